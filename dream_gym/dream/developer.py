"""The policy developer's interface: incumbent + feedback in, the next revision out.

A developer is given a :class:`Feedback` (the incumbent policy file's code and its replay
scores, compact replay traces per world, this phase's earlier revisions with their scores
and errors, and the best versions of earlier phases re-scored on this phase's history) and returns a :class:`Revision`: the code of a new policy file in the format of
``agents/example_policy.py``, plus what writing it cost. Two developers implement it:

* :class:`dream_gym.dream.llm_developer.LLMDeveloper` (an LLM through litellm);
* :class:`dream_gym.dream.builtin_developer.BuiltinDeveloper` (Optuna over a parametric policy
  family, no LLM).

:mod:`dream_gym.dream.developers` names them (``--developer``) and builds one.

A developer never evaluates: the improvement step validates, evaluates and selects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class EarlierRevision:
    """A version that was already evaluated (or refused): of this phase, or carried over from an
    earlier phase (then ``phase`` is that phase and ``score`` its exact score on *this* phase's
    history; see :mod:`dream_gym.dream.carry`)."""

    m: int
    code: str
    status: str  # "ok", "invalid", "failed", "nondeterministic", or "incumbent"
    score: float | None  # the selection score on the history (None when refused)
    error: str | None = None
    params: dict[str, Any] | None = None  # for parametric revisions
    phase: int | None = None  # the earlier phase of a carried version (None: this phase)


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
    past: tuple[EarlierRevision, ...] = ()  # earlier phases' best versions, scored exactly on this history


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
    truncated: bool = False  # the reply was cut at the token limit: a refusal says so (write less)


@runtime_checkable
class Developer(Protocol):
    """Writes the next revision of the exploration policy."""

    name: str

    def propose(self, feedback: Feedback) -> Revision: ...
