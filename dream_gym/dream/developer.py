"""The policy-development agent's interface: incumbent + feedback in, the next revision out.

A developer is given a :class:`Feedback` (the incumbent policy file's code and its replay
scores, compact replay traces per world, and this phase's earlier revisions with their scores
and errors) and returns a :class:`Revision`: the code of a new policy file in the format of
``agents/example_policy.py``, plus what writing it cost. Two developers implement it:

* :class:`dream_gym.dream.llm_developer.LLMDeveloper` (an LLM through litellm);
* :class:`dream_gym.dream.builtin_developer.BuiltinDeveloper` (Optuna over a parametric policy
  family, no LLM).

A developer never evaluates: the improvement step validates, evaluates and selects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class EarlierRevision:
    """A revision of this phase that was already evaluated (or refused)."""

    m: int
    code: str
    status: str  # "ok", "invalid", "failed", "nondeterministic", or "incumbent"
    score: float | None  # the selection score on the history (None when refused)
    error: str | None = None
    params: dict[str, Any] | None = None  # for parametric revisions


@dataclass(frozen=True)
class Feedback:
    """What a developer reads before writing revision ``m`` of ``phase``."""

    phase: int
    m: int  # the revision to write: 1 .. revisions - 1 (0 is the incumbent)
    revisions: int  # M, the incumbent included
    incumbent: EarlierRevision  # m = 0
    traces: str  # compact replay traces of the incumbent on the history
    earlier: tuple[EarlierRevision, ...]  # revisions 1 .. m-1 of this phase
    select: str  # "V" or "v2": what the improvement step maximises
    betas: tuple[float, ...]
    history: tuple[str, ...]  # world ids
    seed: int = 0
    reference: str = ""  # the source of the built-in policy the incumbent runs, when it wraps one


@dataclass
class Revision:
    """A developer's answer: a policy file's code (None when it produced none) and its cost."""

    code: str | None
    notes: str = ""
    error: str | None = None  # why there is no usable code (e.g. "no code found in the reply")
    prompt: str | None = None  # what an LLM was sent (None for the built-in developer)
    reply: str | None = None  # what it answered
    params: dict[str, Any] | None = None  # the parameter block of a parametric revision
    cost: dict[str, float] = field(default_factory=dict)  # calls, tokens_in, tokens_out, usd, seconds


@runtime_checkable
class Developer(Protocol):
    """Writes the next revision of the exploration policy."""

    name: str

    def propose(self, feedback: Feedback) -> Revision: ...


def make_developer(spec: str, folder: Any = None, *, api_base: str | None = None, seed: int = 0,
                   **options: Any) -> Developer:
    """``builtin`` → :class:`BuiltinDeveloper`; anything else is a litellm model string for an
    :class:`LLMDeveloper` whose journal lives in ``folder``."""
    if spec == "builtin":
        from dream_gym.dream.builtin_developer import BuiltinDeveloper

        return BuiltinDeveloper(seed=seed, **options)
    from dream_gym.dream.llm_developer import LLMDeveloper

    if folder is None:
        raise ValueError("an LLM developer needs a run folder for its call journal")
    return LLMDeveloper(spec, folder, api_base=api_base, seed=seed, **options)
