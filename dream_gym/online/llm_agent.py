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

The litellm plumbing (retries, key handling, cost, code extraction) lives in :mod:`dream_gym.infrastructure.llm`,
shared with the dreaming loop's policy developer.

API keys come from the provider's usual environment variables (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY`` ...) or the ``api_key`` argument. They are never logged, never part of the
prompt, notes or cost, hidden from ``repr`` and scrubbed from error messages. Any secret that
leaked into the parent's error, diagnostics or code is redacted from the prompt
(:mod:`dream_gym.infrastructure.redact`), so ``Proposal.prompt`` is what was sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from dream_gym.infrastructure.llm import (
    LOCAL_PLACEHOLDER_KEY,
    Extraction,
    LLMClient,
    LLMError,
    clip,
    extract_code,
    one_line,
    redact_url,
)
from dream_gym.infrastructure.redact import redact_value
from dream_gym.online.agent_base import ParentContext, Proposal

if TYPE_CHECKING:
    import numpy as np

    from dream_gym.online.agent_base import Agent

__all__ = [
    "LOCAL_PLACEHOLDER_KEY",
    "AgentError",
    "DEFAULT_SYSTEM_PROMPT",
    "Extraction",
    "LiteLLMAgent",
    "build_messages",
    "build_user_prompt",
    "extract_code",
]

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


#: The LLM could not be reached or refused the request (not raised for a bad reply).
AgentError = LLMError


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

def _one_line(value: Any, limit: int = MAX_HISTORY_FIELD_CHARS) -> str:
    return one_line(value, limit)


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
        clip(str(task.description), MAX_DESCRIPTION_CHARS),
        f"## Objective\n{direction} the score ({better}). Best known value: {best}.",
        f"## Parent program (score: {status})\n```python\n{parent.code.rstrip()}\n```",
    ]
    if parent.error:
        sections.append(f"## Parent error\n```\n{clip(parent.error, MAX_ERROR_CHARS)}\n```")
    if parent.diagnostics and parent.diagnostics.strip():
        sections.append(f"## Evaluator diagnostics for the parent\n```\n"
                        f"{clip(parent.diagnostics, MAX_DIAGNOSTICS_CHARS)}\n```")
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
        self.client = LLMClient(
            model, api_base=api_base, api_key=api_key, temperature=temperature, max_tokens=max_tokens,
            timeout_s=timeout_s, num_retries=num_retries, retry_backoff_s=retry_backoff_s,
            extra_params=extra_params,
        )
        self.model = model
        self.api_base = api_base
        self.system_prompt = system_prompt
        self.max_history = int(max_history)
        self.name = f"litellm:{model}"

    def __repr__(self) -> str:
        return (f"LiteLLMAgent(model={self.model!r}, api_base={redact_url(self.api_base)!r}, "
                f"temperature={self.client.temperature}, max_tokens={self.client.max_tokens})")

    def propose(self, task: _TaskLike, parent: ParentContext, rng: np.random.Generator) -> Proposal:
        """One chat completion → one candidate program. Raises :class:`AgentError` only when the
        LLM cannot be reached or rejects the request; a bad reply still yields a Proposal."""
        seed = int(rng.integers(0, 2**31 - 1))
        messages = redact_value(build_messages(task, parent, system_prompt=self.system_prompt,
                                               max_history=self.max_history))
        done = self.client.complete(messages, seed)
        ext = extract_code(done.reply)
        notes = [f"model={self.model}", f"seed={seed}", f"attempts={done.attempts}",
                 f"extraction={ext.method}"]
        if done.finish_reason:
            notes.append(f"finish_reason={done.finish_reason}")
        notes += done.notes
        if not ext.usable:
            notes.append("no code found in the reply: the raw reply is returned as the candidate"
                         + (" (empty reply)" if not done.reply.strip() else ""))
        return Proposal(
            code=ext.code,
            notes="; ".join(notes),
            cost={"seconds": done.seconds, "tokens_in": done.tokens_in, "tokens_out": done.tokens_out,
                  "usd": done.usd},
            prompt=messages[-1]["content"],
        )


if TYPE_CHECKING:  # static check that LiteLLMAgent implements the shared Agent protocol
    def _implements_agent(agent: LiteLLMAgent) -> Agent:
        return agent
