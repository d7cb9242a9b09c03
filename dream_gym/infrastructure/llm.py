"""LLM calls through litellm, shared by the discovery agent and the policy developer.

* :class:`LLMClient`: one chat completion with our own retries (connection errors, HTTP 5xx,
  408/409/429 and timeouts, with exponential backoff), the API key resolved without ever being
  logged (a keyless local OpenAI-compatible server gets :data:`LOCAL_PLACEHOLDER_KEY`), secrets
  scrubbed from error messages, and the response read into a :class:`Completion` (reply text,
  finish reason, tokens, USD from ``litellm.completion_cost``, 0.0 with a note when unpriced).
  Every message sent and every reply is passed through :mod:`dream_gym.infrastructure.redact` (a secret that
  leaked into an error or a reply is never sent to the LLM nor recorded).
* :func:`extract_code`: the program in a reply (never raises).

litellm is an optional dependency (``pip install 'dream-gym[llm]'``) imported only when a client
is created. It uses its bundled price table (``LITELLM_LOCAL_MODEL_COST_MAP=True``): nothing is
fetched online.
"""

from __future__ import annotations

import ast
import os
import re
import socket
import textwrap
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, urlsplit, urlunsplit

from dream_gym.infrastructure.extras import install_command
from dream_gym.infrastructure.redact import redact, redact_value, register_secret

#: Placeholder key sent to a keyless local OpenAI-compatible server (the OpenAI client refuses to
#: send a request without one). It is not a secret.
LOCAL_PLACEHOLDER_KEY = "sk-no-key-required"


class LLMError(RuntimeError):
    """The LLM could not be reached or refused the request (not raised for a bad reply)."""

    def __init__(self, message: str, *, model: str = "", api_base: str | None = None,
                 attempts: int = 0) -> None:
        super().__init__(message)
        self.model = model
        self.api_base = api_base
        self.attempts = attempts


# ------------------------------------------------------------------------------------------------
# text helpers
# ------------------------------------------------------------------------------------------------

def clip(text: str, limit: int) -> str:
    """Keep head and tail of ``text`` (tracebacks say most at the end) within ``limit`` chars."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head - 40
    return f"{text[:head]}\n[... {len(text) - head - tail} characters omitted ...]\n{text[-tail:]}"


def one_line(value: Any, limit: int = 160) -> str:
    """``value`` on one line, cut to ``limit`` characters."""
    s = " ".join(str(value).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


# ------------------------------------------------------------------------------------------------
# code extraction
# ------------------------------------------------------------------------------------------------

_PY_TAGS = {"python", "py", "python3", "py3"}
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w.+#-]*)[^\n]*$", re.MULTILINE)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_CODE_LINE = re.compile(r"^(def |class |import |from \S+ import |@\w|if __name__)", re.MULTILINE)


@dataclass(frozen=True)
class Extraction:
    """The code found in a reply and how it was found (``method`` is one of ``python-block``,
    ``fenced-block``, ``whole-reply``, ``raw-reply``)."""

    code: str
    method: str

    @property
    def usable(self) -> bool:
        return self.method != "raw-reply"


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced block; an unclosed last block runs to the end
    (replies cut by ``max_tokens``)."""
    blocks: list[tuple[str, str]] = []
    pos = 0
    while True:
        m = _FENCE_OPEN.search(text, pos)
        if m is None:
            break
        fence, lang = m.group(1), m.group(2).lower()
        body_start = m.end() + 1
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        c = close.search(text, body_start)
        body = text[body_start:c.start()] if c else text[body_start:]
        blocks.append((lang, textwrap.dedent(body).strip("\n")))
        if c is None:
            break
        pos = c.end()
    return [(lang, body) for lang, body in blocks if body.strip()]


def _pick(bodies: list[str]) -> str:
    """The last block that is nearly as long as the longest one: a final revised program wins
    over an earlier draft, a full program wins over a short usage snippet after it."""
    longest = max(len(b) for b in bodies)
    return [b for b in bodies if len(b) >= 0.8 * longest][-1]


def _looks_like_code(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return len(_CODE_LINE.findall(text)) >= 2
    meaningful = [n for n in tree.body if not (isinstance(n, ast.Expr)
                                               and isinstance(n.value, (ast.Constant, ast.Name)))]
    return bool(meaningful)


def extract_code(reply: str | None) -> Extraction:
    """Extract the program from an LLM reply; never raises.

    Order: the ``python``-tagged fenced blocks (the last one nearly as long as the longest),
    then any fenced block, then the whole reply if it looks like Python; otherwise the raw reply
    is returned with ``method="raw-reply"``.
    """
    text = reply or ""
    visible = _THINK.sub("", text)  # reasoning models: ignore the scratchpad
    blocks = _fenced_blocks(visible)
    py = [body for lang, body in blocks if lang in _PY_TAGS]
    if py:
        return Extraction(_pick(py).rstrip() + "\n", "python-block")
    if blocks:
        return Extraction(_pick([b for _, b in blocks]).rstrip() + "\n", "fenced-block")
    stripped = visible.strip()
    if stripped and _looks_like_code(stripped):
        return Extraction(stripped + "\n", "whole-reply")
    return Extraction(text, "raw-reply")


# ------------------------------------------------------------------------------------------------
# litellm plumbing
# ------------------------------------------------------------------------------------------------

def needs_litellm() -> str:
    return f"LLM agents and developers need litellm, an optional dependency: {install_command('llm')}"


def require_litellm() -> None:
    """RuntimeError with the install hint when litellm is not installed (found without importing
    it: a command checks this before it makes a folder, importing litellm takes seconds)."""
    import importlib.util

    if importlib.util.find_spec("litellm") is None:
        raise RuntimeError(needs_litellm())


def import_litellm() -> Any:
    """Import litellm with a local cost map and without debug chatter."""
    # never fetch the remote model-price map: the loops must run offline
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        with warnings.catch_warnings():  # import-time deprecation chatter from litellm's deps
            warnings.simplefilter("ignore")
            import litellm
    except ImportError as exc:  # tests/test_extras.py runs without the extra
        raise RuntimeError(needs_litellm()) from exc
    litellm.suppress_debug_info = True
    if hasattr(litellm, "telemetry"):  # older releases
        litellm.telemetry = False
    return litellm


def check_model_name(model: str) -> None:
    """Refuse a model string litellm finds no provider for (``nosuch``, ``gpt4o``): every call with
    it would fail, so a command checks it before it makes a folder. Imports litellm (seconds)."""
    litellm = import_litellm()
    try:
        litellm.get_llm_provider(model)
    except Exception:  # litellm's BadRequestError, or whatever another release raises for it
        raise ValueError(f"model {model!r}: litellm knows no provider for it; name one as provider/model, e.g. "
                         "openai/gpt-4o-mini, or openai/<served-name> with --api-base for an OpenAI-compatible "
                         "server") from None


def check_priced(model: str) -> None:
    """Refuse a spending limit on ``model`` when litellm knows no price for it: each call would
    count $0, and the limit never stop the run (a run under ``--max-usd 0.000001`` made all its
    calls and said "stopped by rounds")."""
    litellm = import_litellm()
    try:
        info = litellm.get_model_info(model)
        priced = bool(info.get("input_cost_per_token") or info.get("output_cost_per_token"))
    except Exception:  # noqa: BLE001 - litellm raises a bare Exception for a model it does not know
        priced = False
    if not priced:
        raise ValueError(f"max_usd (--max-usd) cannot be kept for model {model!r}: litellm knows no price for it, so "
                         "every call would count $0; limit the run by max_attempts or max_seconds instead")


def usd_of_tokens(model: str | None, tokens_in: float, tokens_out: float) -> float:
    """What ``tokens_in`` prompt and ``tokens_out`` completion tokens of ``model`` cost by litellm's
    price list: the cost of a call a discovery system made itself, which records its tokens and no
    price. 0.0 for no model, a model litellm has no price for, or no litellm installed (as
    :meth:`LLMClient.complete` counts an unpriced call)."""
    if model is None or tokens_in + tokens_out <= 0:
        return 0.0
    try:
        litellm = import_litellm()
        prompt_usd, completion_usd = litellm.cost_per_token(
            model=model, prompt_tokens=int(tokens_in), completion_tokens=int(tokens_out))
    except Exception:  # noqa: BLE001 - litellm raises a bare Exception for a model it does not know
        return 0.0
    return float(prompt_usd) + float(completion_usd)


def redact_url(url: str | None) -> str:
    """``url`` without credentials or query string (for messages and logs)."""
    if not url:
        return "(provider default)"
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        parts = parts._replace(netloc=f"***@{host}")
    return urlunsplit(parts._replace(query="***" if parts.query else ""))


def unreachable(api_base: str, timeout_s: float = 5.0) -> str | None:
    """Why no server accepts a connection at ``api_base``'s host and port (None: one does).
    Systems retry an unreachable model for minutes per proposal, logging only to their files.
    Behind a proxy (``HTTPS_PROXY``, ``ALL_PROXY``, ... and ``NO_PROXY``, which the OpenAI client
    follows too) the proxy is what must answer: the host itself may be out of direct reach."""
    parts = urlsplit(api_base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http(s) URL"
    try:
        target, through = _address(parts), ""
    except ValueError:
        return "its port is not a number"
    proxy = _proxy_for(parts.scheme, parts.hostname)
    if proxy is not None:
        try:
            target = _address(urlsplit(proxy if "://" in proxy else f"http://{proxy}"))
        except ValueError:
            return f"the proxy {redact_url(proxy)} of the environment has a port that is not a number"
        through = f" (the proxy of the environment for {parts.hostname})"
    try:
        with socket.create_connection(target, timeout=timeout_s):
            return None
    except OSError as exc:
        return f"nothing accepts a connection at {target[0]}:{target[1]}{through} ({exc.strerror or exc})"


def check_access(model: str, api_base: str | None) -> None:
    """Refuse, before a run makes its folder, a model no call of it can reach: ``api_base`` where
    nothing accepts a connection, or (without one) a provider whose key the environment does not
    set (litellm's ``validate_environment``). Otherwise the run retries its first call for
    seconds, then stops with a transport error after writing its first records."""
    if api_base is not None:
        why = unreachable(api_base)
        if why is not None:
            raise ValueError(f"--api-base {redact_url(api_base)}: {why}; start the server, or give another --api-base")
        return
    litellm = import_litellm()
    try:
        missing = litellm.validate_environment(model).get("missing_keys") or []
    except Exception:  # noqa: BLE001 - a provider litellm cannot check: the first call will say
        return
    keys = [name for name in missing if str(name).endswith(("_KEY", "_TOKEN"))]  # not a base URL with a default
    if keys:
        raise ValueError(f"model {model}: {' and '.join(keys)} {'is' if len(keys) == 1 else 'are'} not set in the "
                         "environment; set it, or give --api-base for an OpenAI-compatible server")


def _address(parts: SplitResult) -> tuple[str, int]:
    """(host, port) of a split URL, the scheme's port by default; ValueError for a port that is not a number."""
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def _proxy_for(scheme: str, host: str) -> str | None:
    """The proxy URL the environment names for ``scheme`` requests to ``host`` (None: direct)."""
    import urllib.request

    proxies = urllib.request.getproxies()
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    return str(proxy)


#: The longest wait a server's ``Retry-After`` may ask for before a retry (seconds): longer, and
#: the backoff's own wait is used (the run's retries then fail sooner, saying why).
MAX_RETRY_AFTER_S = 60.0


def retry_after(exc: BaseException) -> float:
    """The seconds a rate-limited server asked the client to wait (its ``Retry-After`` header, in
    seconds, on the error's response), at most :data:`MAX_RETRY_AFTER_S`; 0 when it asked none.
    The fixed backoff retried at 1 and 3 s a server that had said to come back in 6."""
    # litellm keeps the server's headers apart (its exception's own response is one it made up)
    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    try:
        value = float(headers.get("retry-after")) if headers is not None else 0.0
    except (TypeError, ValueError, AttributeError):  # absent, or an HTTP date: the backoff's own wait
        return 0.0
    return min(max(value, 0.0), MAX_RETRY_AFTER_S) if value == value else 0.0


def is_retryable(exc: BaseException) -> bool:
    """Connection errors, timeouts, HTTP 5xx and 408/409/429 are worth another try."""
    try:
        import openai
    except ImportError:  # pragma: no cover - openai ships with litellm
        return False
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, openai.InternalServerError,
                        openai.RateLimitError)):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status >= 500 or status in (408, 409, 429))


def field_of(obj: Any, key: str, default: Any = None) -> Any:
    """``obj[key]`` or ``obj.key`` (litellm responses are objects, stored ones dicts)."""
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


@dataclass(frozen=True)
class Completion:
    """What one chat completion returned, read out of litellm's response."""

    reply: str
    finish_reason: str | None
    tokens_in: float
    tokens_out: float
    usd: float
    seconds: float
    attempts: int
    notes: tuple[str, ...] = ()
    priced: bool = True  # False: litellm knows no price for the model, and ``usd`` is 0 for want of one


class LLMClient:
    """Chat completions through litellm with exact retries, key handling and cost accounting.

    Args:
        model: a litellm model string (``openai/gpt-4o-mini``, ``anthropic/...``, or
            ``openai/<served-name>`` with ``api_base`` for a local OpenAI-compatible server).
        api_base: base URL of an OpenAI-compatible server.
        api_key: the key (default: the provider's usual environment variable).
        temperature, max_tokens, timeout_s: sent with every request.
        num_retries: retries of a retryable failure (after the first attempt).
        retry_backoff_s: the first backoff, doubled on each retry.
        extra_params: more litellm arguments.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.7,
        max_tokens: int = 4096,
        timeout_s: float = 120,
        num_retries: int = 2,
        retry_backoff_s: float = 1.0,
        extra_params: Mapping[str, Any] | None = None,
    ) -> None:
        if not model or not isinstance(model, str):
            raise ValueError("model must be a litellm model string such as 'openai/gpt-4o-mini'")
        if num_retries < 0:
            raise ValueError("num_retries must be >= 0")
        check_model_name(model)  # fail early: the install hint, or a model no provider serves
        self.model = model
        self.api_base = api_base
        self._api_key = api_key
        register_secret(api_key, "LLM_API_KEY")  # redacted from records and prompts like an env key
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.timeout_s = float(timeout_s)
        self.num_retries = int(num_retries)
        self.retry_backoff_s = float(retry_backoff_s)
        self.extra_params = dict(extra_params or {})
        #: said each time a failed attempt is retried (a timeout or an error retried takes minutes
        #: that would otherwise pass in silence): one line, the key scrubbed
        self.on_retry: Callable[[str], None] | None = None

    def __repr__(self) -> str:
        return (f"LLMClient(model={self.model!r}, api_base={redact_url(self.api_base)!r}, "
                f"temperature={self.temperature}, max_tokens={self.max_tokens})")

    # -- key handling ---------------------------------------------------------------------------
    def resolved_api_key(self) -> str | None:
        if self._api_key:
            return self._api_key
        provider = self.model.split("/", 1)[0] if "/" in self.model else "openai"
        if self.api_base and provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
            # a local OpenAI-compatible server usually needs no key, but the client wants one
            return LOCAL_PLACEHOLDER_KEY
        return None  # litellm reads the provider's environment variable

    def scrub(self, text: str) -> str:
        """``text`` with the key and every ``*_API_KEY`` / ``*_TOKEN`` value replaced by ***."""
        secrets = {self._api_key} if self._api_key else set()
        secrets |= {v for k, v in os.environ.items()
                    if v and len(v) >= 8 and (k.endswith("_API_KEY") or k.endswith("_TOKEN"))}
        for s in sorted(secrets, key=len, reverse=True):
            if s:
                text = text.replace(s, "***")
        return redact(text)  # the encodings and the other secret names

    def request(self, messages: list[dict[str, str]], seed: int) -> dict[str, Any]:
        """The request's content without transport details or secrets (what a journal keys on,
        and what is sent): the messages are redacted."""
        return {"model": self.model, "messages": redact_value(messages), "temperature": self.temperature,
                "max_tokens": self.max_tokens, "seed": seed}

    # -- the call -------------------------------------------------------------------------------
    def _send(self, messages: list[dict[str, str]], seed: int) -> tuple[Any, int]:
        litellm = import_litellm()
        kwargs: dict[str, Any] = {
            **self.request(messages, seed),
            "timeout": self.timeout_s,
            "drop_params": True,  # providers without `seed` (or temperature) ignore it
            "max_retries": 0,  # retries are ours, so their number is exact
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        key = self.resolved_api_key()
        if key:
            kwargs["api_key"] = key
        kwargs.update(self.extra_params)
        attempts = 0
        while True:
            attempts += 1
            try:
                return litellm.completion(**kwargs), attempts
            except Exception as exc:  # noqa: BLE001 - mapped to LLMError below
                if attempts <= self.num_retries and is_retryable(exc):
                    wait = max(self.retry_backoff_s * (2 ** (attempts - 1)), retry_after(exc))
                    if self.on_retry is not None:
                        cause = self.scrub(" ".join(str(exc).split()))[:160]
                        self.on_retry(f"attempt {attempts} of {self.num_retries + 1} failed ({type(exc).__name__}: "
                                      f"{cause}); asking again in {wait:.0f} s (timeout {self.timeout_s:g} s)")
                    time.sleep(wait)
                    continue
                kind = "transport error" if is_retryable(exc) else "request rejected"
                detail = self.scrub(" ".join(str(exc).split()))[:600]
                raise LLMError(
                    f"LLM {kind} for model {self.model!r} at api_base {redact_url(self.api_base)} "
                    f"after {attempts} attempt(s) (timeout {self.timeout_s:g}s): "
                    f"{type(exc).__name__}: {detail}",
                    model=self.model, api_base=redact_url(self.api_base), attempts=attempts,
                ) from None  # the original may carry request headers; do not chain it

    def _cost_usd(self, response: Any) -> tuple[float, str | None]:
        litellm = import_litellm()
        try:
            usd = float(litellm.completion_cost(completion_response=response))
        except Exception as exc:  # noqa: BLE001 - unknown model: no price
            return 0.0, f"no litellm price for {self.model!r} ({type(exc).__name__}); usd=0"
        return usd, None

    def complete(self, messages: list[dict[str, str]], seed: int = 0) -> Completion:
        """One chat completion. Raises :class:`LLMError` only when the LLM cannot be reached or
        rejects the request; an empty or odd reply is still a Completion."""
        t0 = time.perf_counter()
        response, attempts = self._send(messages, seed)
        seconds = time.perf_counter() - t0
        choices = field_of(response, "choices") or []
        first = choices[0] if choices else None
        content = field_of(field_of(first, "message"), "content")
        finish = field_of(first, "finish_reason")
        usage = field_of(response, "usage")
        tokens_in = float(field_of(usage, "prompt_tokens", 0) or 0)
        tokens_out = float(field_of(usage, "completion_tokens", 0) or 0)
        usd, cost_note = self._cost_usd(response)
        notes = []
        if finish == "length":
            notes.append("reply truncated by max_tokens")
        if usage is None or tokens_in + tokens_out == 0:
            notes.append("no token usage in the response; tokens=0")
        if cost_note:
            notes.append(cost_note)
        return Completion(
            reply=redact(content) if isinstance(content, str) else "", finish_reason=finish,
            tokens_in=tokens_in, tokens_out=tokens_out, usd=usd, seconds=seconds, attempts=attempts,
            notes=tuple(notes), priced=cost_note is None,
        )


__all__ = [
    "LOCAL_PLACEHOLDER_KEY", "Completion", "Extraction", "LLMClient", "LLMError", "check_priced", "clip",
    "extract_code", "field_of", "import_litellm", "is_retryable", "one_line", "redact_url", "unreachable",
    "usd_of_tokens",
]
