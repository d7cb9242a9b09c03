"""The LLM discovery agent: proposes a child program from a parent program through litellm.

``LiteLLMAgent`` works with any litellm provider string (``"openai/gpt-4o-mini"``,
``"anthropic/claude-..."``, ``"ollama/qwen2.5-coder"``) or with a local OpenAI-compatible server
(``model="openai/<served-name>", api_base="http://127.0.0.1:8000/v1"``). litellm is an optional
dependency (``pip install 'dream-gym[llm]'``); it is imported only when an agent is created.

One call to :meth:`LiteLLMAgent.propose` is one chat completion:

* the prompt (:func:`build_messages`) holds the task description, the direction and best known
  value, the parent's code, score, diagnostics and error, and a bounded branch history;
* the new program is extracted from the reply (:func:`extract_code`); a reply without usable code
  never raises: the raw reply becomes the candidate code (the evaluator fails it as repairable)
  and ``Proposal.notes`` says so;
* transport failures (connection refused, HTTP 5xx, timeouts, after ``num_retries`` retries) and
  request rejections (HTTP 4xx such as a bad key) raise :class:`AgentError` naming the model and
  api_base;
* ``Proposal.cost`` records ``seconds`` (wall time, retries included), ``tokens_in`` /
  ``tokens_out`` (the response's ``usage``) and ``usd`` (``litellm.completion_cost``, 0.0 with a
  note when litellm has no price for the model).

API keys come from the provider's usual environment variables (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY`` ...) or the ``api_key`` argument. They are never logged, never part of the
prompt, notes or cost, hidden from ``repr`` and scrubbed from error messages.
"""

from __future__ import annotations

import ast
import os
import re
import textwrap
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from dream_gym.online.agent_base import ParentContext, Proposal

if TYPE_CHECKING:
    import numpy as np

    from dream_gym.online.agent_base import Agent

__all__ = [
    "AgentError",
    "DEFAULT_SYSTEM_PROMPT",
    "Extraction",
    "LiteLLMAgent",
    "build_messages",
    "build_user_prompt",
    "extract_code",
]

#: Placeholder key sent to a keyless local OpenAI-compatible server (the OpenAI client refuses to
#: send a request without one). It is not a secret.
LOCAL_PLACEHOLDER_KEY = "sk-no-key-required"

DEFAULT_SYSTEM_PROMPT = (
    "You are an expert programmer and researcher taking part in an automated discovery loop. "
    "Each turn you are shown a task, its objective, and a parent program with its evaluation "
    "result and the history of the branch that led to it. You write an improved version of the "
    "parent program: fix its errors first, otherwise try a concrete idea that should improve the "
    "score. Keep the program's interface (the functions and signatures the evaluator calls) "
    "unless the task says otherwise. Reply with a very short explanation of the change, then "
    "the COMPLETE new program in exactly one ```python fenced code block. Do not elide code "
    "with placeholders such as '...' or 'rest unchanged'."
)

# Bounds that keep one prompt compact whatever the branch looks like.
MAX_HISTORY_ENTRIES = 12
MAX_HISTORY_FIELD_CHARS = 160
MAX_DIAGNOSTICS_CHARS = 4000
MAX_ERROR_CHARS = 3000
MAX_DESCRIPTION_CHARS = 8000


class AgentError(RuntimeError):
    """The LLM could not be reached or refused the request (not raised for a bad reply)."""

    def __init__(self, message: str, *, model: str = "", api_base: str | None = None,
                 attempts: int = 0) -> None:
        super().__init__(message)
        self.model = model
        self.api_base = api_base
        self.attempts = attempts


class _TaskLike(Protocol):
    """What the agent reads from a task (``dream_gym.online`` tasks satisfy it)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def direction(self) -> str: ...
    @property
    def best_known(self) -> float | None: ...


# ------------------------------------------------------------------------------------------------
# Prompt
# ------------------------------------------------------------------------------------------------

def _clip(text: str, limit: int) -> str:
    """Keep head and tail of ``text`` (tracebacks say most at the end) within ``limit`` chars."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head - 40
    return f"{text[:head]}\n[... {len(text) - head - tail} characters omitted ...]\n{text[-tail:]}"


def _one_line(value: Any, limit: int = MAX_HISTORY_FIELD_CHARS) -> str:
    s = " ".join(str(value).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _fmt_score(score: Any) -> str:
    if score is None:
        return "none"
    try:
        f = float(score)
    except (TypeError, ValueError):
        return _one_line(score, 40)
    return f"{f:.6g}"


def _format_history(history: Sequence[Mapping[str, Any]], max_entries: int) -> str:
    if not history:
        return "(no earlier attempts on this branch)"
    n = len(history)
    start = max(0, n - max_entries)
    lines: list[str] = []
    if start > 0:
        lines.append(f"({start} earlier attempt(s) near the root omitted)")
    for depth in range(start, n):
        h = history[depth]
        label = f"depth {depth}" + (" (parent)" if depth == n - 1 else "")
        parts = [f"{label}: score={_fmt_score(h.get('score'))}"]
        if h.get("fail_class"):
            parts.append(f"fail_class={_one_line(h['fail_class'], 40)}")
        if h.get("error"):
            err_lines = [ln for ln in str(h["error"]).strip().splitlines() if ln.strip()]
            # the last line of a traceback names the exception; that is what matters here
            parts.append(f"error={_one_line(err_lines[-1] if err_lines else h['error'])}")
        elif h.get("diagnostics"):
            parts.append(f"diagnostics={_one_line(h['diagnostics'], 100)}")
        lines.append("- " + "; ".join(parts))
    return "\n".join(lines)


def build_user_prompt(task: _TaskLike, parent: ParentContext, *,
                      max_history: int = MAX_HISTORY_ENTRIES) -> str:
    """The user message for one proposal (pure function of task and parent; no secrets)."""
    direction = str(task.direction).lower()
    better = "higher is better" if direction.startswith("max") else "lower is better"
    best = "unknown" if task.best_known is None else _fmt_score(task.best_known)
    if parent.error:
        status = "FAILED (see error below) — fix it first"
    elif parent.score is None:
        status = "not scored"
    else:
        status = _fmt_score(parent.score)
    sections = [
        f"# Task: {task.name}",
        _clip(str(task.description), MAX_DESCRIPTION_CHARS),
        f"## Objective\n{direction} the score ({better}). Best known value: {best}.",
        f"## Parent program (score: {status})\n```python\n{parent.code.rstrip()}\n```",
    ]
    if parent.error:
        sections.append(f"## Parent error\n```\n{_clip(parent.error, MAX_ERROR_CHARS)}\n```")
    if parent.diagnostics and parent.diagnostics.strip():
        sections.append(f"## Evaluator diagnostics for the parent\n```\n"
                        f"{_clip(parent.diagnostics, MAX_DIAGNOSTICS_CHARS)}\n```")
    sections.append("## Branch history (root first, the parent last)\n"
                    + _format_history(parent.history, max_history))
    sections.append(
        "## Your answer\nWrite the complete new program, improving on the parent"
        + (" after fixing its error" if parent.error else "")
        + ". Give a one- or two-sentence rationale, then the full program in a single "
          "```python fenced block.")
    return "\n\n".join(sections) + "\n"


def build_messages(task: _TaskLike, parent: ParentContext, *, system_prompt: str | None = None,
                   max_history: int = MAX_HISTORY_ENTRIES) -> list[dict[str, str]]:
    """Chat messages (system + user) for one proposal."""
    return [
        {"role": "system", "content": system_prompt or DEFAULT_SYSTEM_PROMPT},
        {"role": "user", "content": build_user_prompt(task, parent, max_history=max_history)},
    ]


# ------------------------------------------------------------------------------------------------
# Code extraction
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
    n_blocks: int = 0

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
    """Extract the candidate program from an LLM reply; never raises.

    Order: the ``python``-tagged fenced blocks (the last one nearly as long as the longest),
    then any fenced block, then the whole reply if it looks like Python; otherwise the raw reply
    is returned with ``method="raw-reply"``.
    """
    text = reply or ""
    visible = _THINK.sub("", text)  # reasoning models: ignore the scratchpad
    blocks = _fenced_blocks(visible)
    py = [body for lang, body in blocks if lang in _PY_TAGS]
    if py:
        return Extraction(_pick(py).rstrip() + "\n", "python-block", len(blocks))
    if blocks:
        return Extraction(_pick([b for _, b in blocks]).rstrip() + "\n", "fenced-block", len(blocks))
    stripped = visible.strip()
    if stripped and _looks_like_code(stripped):
        return Extraction(stripped + "\n", "whole-reply", 0)
    return Extraction(text, "raw-reply", 0)


# ------------------------------------------------------------------------------------------------
# litellm plumbing
# ------------------------------------------------------------------------------------------------

def _import_litellm() -> Any:
    """Import litellm with a local cost map and without debug chatter."""
    # never fetch the remote model-price map: the discovery loop must run offline
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        with warnings.catch_warnings():  # import-time deprecation chatter from litellm's deps
            warnings.simplefilter("ignore")
            import litellm
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "LiteLLMAgent needs litellm, an optional dependency: pip install 'dream-gym[llm]'"
        ) from exc
    litellm.suppress_debug_info = True
    if hasattr(litellm, "telemetry"):  # older releases
        litellm.telemetry = False
    return litellm


def _redact_url(url: str | None) -> str:
    if not url:
        return "(provider default)"
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        parts = parts._replace(netloc=f"***@{host}")
    return urlunsplit(parts._replace(query="***" if parts.query else ""))


def _is_retryable(exc: BaseException) -> bool:
    try:
        import openai
    except ImportError:  # pragma: no cover - openai ships with litellm
        return False
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, openai.InternalServerError,
                        openai.RateLimitError)):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status >= 500 or status in (408, 409, 429))


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


class LiteLLMAgent:
    """Discovery agent that asks an LLM (through litellm) for the next candidate program."""

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
        system_prompt: str | None = None,
        max_history: int = MAX_HISTORY_ENTRIES,
        retry_backoff_s: float = 1.0,
        extra_params: Mapping[str, Any] | None = None,
    ) -> None:
        if not model or not isinstance(model, str):
            raise ValueError("model must be a litellm model string such as 'openai/gpt-4o-mini'")
        if num_retries < 0:
            raise ValueError("num_retries must be >= 0")
        _import_litellm()  # fail early with the install hint
        self.model = model
        self.api_base = api_base
        self._api_key = api_key
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.timeout_s = float(timeout_s)
        self.num_retries = int(num_retries)
        self.system_prompt = system_prompt
        self.max_history = int(max_history)
        self.retry_backoff_s = float(retry_backoff_s)
        self.extra_params = dict(extra_params or {})
        self.name = f"litellm:{model}"

    def __repr__(self) -> str:
        return (f"LiteLLMAgent(model={self.model!r}, api_base={_redact_url(self.api_base)!r}, "
                f"temperature={self.temperature}, max_tokens={self.max_tokens})")

    # -- key handling ---------------------------------------------------------------------------
    def _resolved_api_key(self) -> str | None:
        if self._api_key:
            return self._api_key
        provider = self.model.split("/", 1)[0] if "/" in self.model else "openai"
        if self.api_base and provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
            # a local OpenAI-compatible server usually needs no key, but the client wants one
            return LOCAL_PLACEHOLDER_KEY
        return None  # litellm reads the provider's environment variable

    def _scrub(self, text: str) -> str:
        secrets = {self._api_key} if self._api_key else set()
        secrets |= {v for k, v in os.environ.items()
                    if v and len(v) >= 8 and (k.endswith("_API_KEY") or k.endswith("_TOKEN"))}
        for s in sorted(secrets, key=len, reverse=True):
            if s:
                text = text.replace(s, "***")
        return text

    # -- the call -------------------------------------------------------------------------------
    def _complete(self, messages: list[dict[str, str]], seed: int) -> tuple[Any, int]:
        litellm = _import_litellm()
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "timeout": self.timeout_s,
            "seed": seed,
            "drop_params": True,  # providers without `seed` (or temperature) ignore it
            "max_retries": 0,  # retries are ours, so their number is exact
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        key = self._resolved_api_key()
        if key:
            kwargs["api_key"] = key
        kwargs.update(self.extra_params)
        attempts = 0
        while True:
            attempts += 1
            try:
                return litellm.completion(**kwargs), attempts
            except Exception as exc:  # noqa: BLE001 - mapped to AgentError below
                if attempts <= self.num_retries and _is_retryable(exc):
                    time.sleep(self.retry_backoff_s * (2 ** (attempts - 1)))
                    continue
                kind = "transport error" if _is_retryable(exc) else "request rejected"
                detail = self._scrub(" ".join(str(exc).split()))[:600]
                raise AgentError(
                    f"LLM {kind} for model {self.model!r} at api_base {_redact_url(self.api_base)} "
                    f"after {attempts} attempt(s) (timeout {self.timeout_s:g}s): "
                    f"{type(exc).__name__}: {detail}",
                    model=self.model, api_base=_redact_url(self.api_base), attempts=attempts,
                ) from None  # the original may carry request headers; do not chain it

    def _cost_usd(self, response: Any) -> tuple[float, str | None]:
        litellm = _import_litellm()
        try:
            usd = float(litellm.completion_cost(completion_response=response))
        except Exception as exc:  # noqa: BLE001 - unknown model: no price
            return 0.0, f"no litellm price for {self.model!r} ({type(exc).__name__}); usd=0"
        return usd, None

    def propose(self, task: _TaskLike, parent: ParentContext, rng: np.random.Generator) -> Proposal:
        """One chat completion → one candidate program. Raises :class:`AgentError` only when the
        LLM cannot be reached or rejects the request; a bad reply still yields a Proposal."""
        seed = int(rng.integers(0, 2**31 - 1))
        messages = build_messages(task, parent, system_prompt=self.system_prompt,
                                  max_history=self.max_history)
        t0 = time.perf_counter()
        response, attempts = self._complete(messages, seed)
        seconds = time.perf_counter() - t0

        choices = _get(response, "choices") or []
        first = choices[0] if choices else None
        content = _get(_get(first, "message"), "content")
        finish = _get(first, "finish_reason")
        reply = content if isinstance(content, str) else ""

        usage = _get(response, "usage")
        tokens_in = float(_get(usage, "prompt_tokens", 0) or 0)
        tokens_out = float(_get(usage, "completion_tokens", 0) or 0)
        usd, cost_note = self._cost_usd(response)

        ext = extract_code(reply)
        notes = [f"model={self.model}", f"seed={seed}", f"attempts={attempts}",
                 f"extraction={ext.method}"]
        if finish:
            notes.append(f"finish_reason={finish}")
        if finish == "length":
            notes.append("reply truncated by max_tokens")
        if usage is None or tokens_in + tokens_out == 0:
            notes.append("no token usage in the response; tokens=0")
        if cost_note:
            notes.append(cost_note)
        if not ext.usable:
            notes.append("no code found in the reply: the raw reply is returned as the candidate"
                         + (" (empty reply)" if not reply.strip() else ""))
        return Proposal(
            code=ext.code,
            notes="; ".join(notes),
            cost={"seconds": seconds, "tokens_in": tokens_in, "tokens_out": tokens_out, "usd": usd},
            prompt=messages[-1]["content"],
        )


if TYPE_CHECKING:  # static check that LiteLLMAgent implements the shared Agent protocol
    def _implements_agent(agent: LiteLLMAgent) -> Agent:
        return agent
