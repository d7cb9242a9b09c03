"""The policy interface (docs/concepts/policies.md) and ``run_episode``.

A policy is anything with::

    reset(context: RunContext) -> None     # once per episode: W, beta, task info, seed
    act(view: PrefixView) -> list[int]      # the next batch; [] stops

Heuristics, RL-trained networks and LLM-written files all implement it, and the same object
runs in replay and online. A plain function ``f(view) -> batch`` becomes a policy with
:class:`FunctionPolicy` (or :func:`as_policy`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from dream_gym.replay.view import PrefixView

if TYPE_CHECKING:
    from dream_gym.replay.session import ReplaySession


@dataclass(frozen=True)
class RunContext:
    """What a policy is told when an episode starts (the same online and in replay).

    Attributes:
        workers: W, the most selections one batch may hold.
        beta: the budget preference in [0, 1], fixed for the episode (high: wider, more patient;
            low: a tighter budget, an earlier stop).
        beta1, beta2: the replay score's cost per attempt and bonus per attempt-per-round.
        max_rounds: the round limit K2 (None: none).
        task_name, task_description: the task of the world or run.
        direction: ``"maximize"`` or ``"minimize"``; the scores a view holds are already oriented
            so that higher is better.
        frontier_rule: ``"leaves"`` (a non-root node is selectable while it is a leaf of the
            revealed tree) or ``"any"`` (any revealed node with an unrevealed recorded child).
        seed: the seed of anything random the policy does (its decisions must not vary otherwise).
    """

    workers: int
    beta: float
    beta1: float
    beta2: float
    max_rounds: int | None
    task_name: str
    task_description: str
    direction: str
    frontier_rule: str
    seed: int = 0

    @classmethod
    def from_view(cls, view: PrefixView, seed: int = 0) -> RunContext:
        return cls(
            workers=view.workers,
            beta=view.beta,
            beta1=view.beta1,
            beta2=view.beta2,
            max_rounds=view.max_rounds,
            task_name=view.task_name,
            task_description=view.task_description,
            direction=view.direction,
            frontier_rule=view.frontier_rule,
            seed=seed,
        )


@runtime_checkable
class Policy(Protocol):
    """What an exploration policy is: any object with these two methods (and, optionally, a
    ``name``). Built-ins are in :mod:`dream_gym.policies`; a function of the view becomes one
    with :class:`FunctionPolicy` (:func:`as_policy` does it for you).
    """

    def reset(self, context: RunContext) -> None:
        """Called once when an episode starts, with what the episode is (:class:`RunContext`)."""

    def act(self, view: PrefixView) -> Sequence[int]:
        """The next batch: at most ``view.workers`` node ids from ``view.frontier`` (the root,
        id 0, up to ``view.root_slots`` times: each opens a branch; any other id once); ``[]``
        stops the episode. ``view`` is what replay has revealed so far (:class:`PrefixView`)."""


class FunctionPolicy:
    """Adapts ``fn(view) -> batch`` (optionally ``fn(view, context)``) to the interface."""

    def __init__(self, fn: Callable[..., Sequence[int]], name: str | None = None):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "function")
        self.context: RunContext | None = None
        code = getattr(fn, "__code__", None)
        self._wants_context = code is not None and code.co_argcount >= 2

    def reset(self, context: RunContext) -> None:
        self.context = context

    def act(self, view: PrefixView) -> Sequence[int]:
        if self._wants_context:
            return self.fn(view, self.context)
        return self.fn(view)


def as_policy(obj: Any) -> Policy:
    """A policy object as is; a callable wrapped in :class:`FunctionPolicy`."""
    if isinstance(obj, type) and hasattr(obj, "act") and hasattr(obj, "reset"):
        raise TypeError(f"got the class {obj.__name__}, not a policy: pass an instance, {obj.__name__}()")
    if hasattr(obj, "act") and hasattr(obj, "reset"):
        return obj  # type: ignore[no-any-return]
    if callable(obj):
        return FunctionPolicy(obj)
    hint = " (a spec: build it with dream_gym.policy_files.load_policy)" if isinstance(obj, str) else ""
    raise TypeError(f"{obj!r} is not a policy: it needs reset(context) and act(view), or be a function{hint}")


def policy_name(policy: Any) -> str:
    return str(getattr(policy, "name", None) or type(policy).__name__)


def construct(factory: Callable[..., Any], params: Mapping[str, Any], owner: str) -> Any:
    """``factory(**params)``, after refusing (ValueError, naming ``owner``) a parameter the factory
    does not take or a value its annotation does not admit. Parameters come from the command line
    (``--policy-arg patience=100``): a misspelt name must not end in a TypeError's traceback, and a
    word where a number belongs must not reach the policy's first decision, after a run has begun.
    """
    if not params:
        return factory()
    import inspect
    import typing

    signature = inspect.signature(factory)
    named = [p.name for p in signature.parameters.values()
             if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    for key in params:
        if key not in named and not takes_any:
            raise ValueError(f"{owner} takes no parameter {key!r}; its parameters: {', '.join(named) or 'none'}")
    try:
        hints = typing.get_type_hints(factory.__init__ if isinstance(factory, type) else factory)  # type: ignore[misc]
    except Exception:  # an annotation that does not resolve: the factory's own checks apply
        hints = {}
    for key, value in params.items():
        kinds = _plain_kinds(hints.get(key))
        if kinds and not _admits(kinds, value):
            wanted = " or ".join(kind.__name__ for kind in kinds if kind is not type(None))
            raise ValueError(f"{owner}: {key} must be {wanted}, got {value!r}")
    return factory(**params)


def _plain_kinds(hint: Any) -> tuple[type, ...]:
    """The classes an annotation admits (``int | None`` → int, NoneType; ``tuple[float, float]``
    → tuple); empty where it says nothing checkable (Any, a type variable, a protocol)."""
    import types
    import typing

    if hint is None:
        return ()
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = tuple(kind for arg in typing.get_args(hint) for kind in _plain_kinds(arg))
        return kinds if len(kinds) == len(typing.get_args(hint)) else ()
    origin = typing.get_origin(hint) or hint
    return (origin,) if isinstance(origin, type) and origin is not typing.Any else ()


def _admits(kinds: tuple[type, ...], value: Any) -> bool:
    """Whether a value of the kinds a command line gives (str, int, float, bool) fits; other
    values, from Python callers, are left to the factory's own checks."""
    if not isinstance(value, (str, int, float)):
        return True
    if isinstance(value, bool):  # a bool is an int to Python, not to a parameter counting rounds
        return bool in kinds
    if float in kinds and isinstance(value, int):
        return True
    return isinstance(value, kinds)


def batch_from(result: Any) -> list[int]:
    """Normalise what ``act`` returned into a list; anything but a sequence of ids is an error."""
    if result is None:
        raise TypeError("policy returned None; return a list of node ids ([] to stop)")
    if hasattr(result, "tolist") and not isinstance(result, (list, tuple)):
        result = result.tolist()
    if not isinstance(result, (list, tuple, range)):
        raise TypeError(f"policy returned {type(result).__name__}; expected a list of node ids ([] to stop)")
    return list(result)


@dataclass
class EpisodeResult:
    """One episode's record (what ``dream-gym eval`` writes as a JSON line)."""

    world: str
    policy: str
    beta: float
    replay_score: float  # V
    best_q: float
    best_score: float | None
    attempts: int  # N
    rounds: int  # k
    work: float  # attempts / (recorded nodes - 1), for the v2 objective
    attainment: float  # clip(best_q, 0, 1)
    batches: list[list[int]] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    error: str | None = None
    # the world's oracle limit at this episode's W, beta1, beta2, frontier and round limit: set
    # by evaluation (dream_gym.evaluation.evaluate), never by the episode, never shown to the policy
    limit: float | None = None
    # Coverage (docs/concepts/coverage.md); None in results files written before it was recorded.
    refused: int | None = None  # selections an online run would have made that the record could not answer
    cut_short: bool | None = None  # the record, not the policy, ended the episode
    answerable: float | None = None  # mean share, over decisions, of the online choices the record held

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def coverage(self) -> float | None:
        """The share of the policy's requests that landed on recorded nodes: attempts /
        (attempts + refused); 1.0 when it asked for nothing; None when not recorded."""
        if self.refused is None:
            return None
        asked = self.attempts + self.refused
        return self.attempts / asked if asked else 1.0

    @property
    def on_record(self) -> bool | None:
        """Whether the record answered the whole episode: nothing refused and not cut short
        (None when not recorded)."""
        if self.refused is None or self.cut_short is None:
            return None
        return not self.refused and not self.cut_short


def result_from_session(session: ReplaySession, policy: str, error: str | None = None) -> EpisodeResult:
    world = session.world
    recorded_attempts = max(1, world.size - 1)
    best_q = session.best_q
    return EpisodeResult(
        world=world.id,
        policy=policy,
        beta=session.beta,
        replay_score=session.value,
        best_q=best_q,
        best_score=session.best_score,
        attempts=session.attempts,
        rounds=session.rounds,
        work=session.attempts / recorded_attempts,
        attainment=min(max(best_q, 0.0), 1.0) if math.isfinite(best_q) else 0.0,
        batches=[list(b) for b in session.batches],
        terminated=session.terminated,
        truncated=session.truncated,
        error=error,
        refused=session.refused,
        cut_short=session.cut_short,
        answerable=session.answerable,
    )


def _session_of(target: Any, options: Mapping[str, Any]) -> tuple[ReplaySession, bool]:
    """The session to drive and whether it came from a gymnasium env (stepped through it)."""
    # Imported here: the policy interface above is all an isolated policy's template imports,
    # and it stays free of the replay and numpy (a smaller process, cheaper to fork per episode).
    from dream_gym.replay.session import ReplaySession
    from dream_gym.world.registry import resolve_world
    from dream_gym.world.tree import World

    if isinstance(target, (World, str, os.PathLike)):
        return ReplaySession(resolve_world(target), **options), False
    if options:  # the env's or the session's own settings would be played, these ignored
        raise TypeError(f"run_episode: {', '.join(sorted(options))} apply to a World or a world reference; "
                        f"a {type(target).__name__} has its own (give them to gym.make or ReplaySession)")
    if isinstance(target, ReplaySession):
        return target, False
    unwrapped = getattr(target, "unwrapped", None)
    session = getattr(unwrapped, "session", None)
    if isinstance(session, ReplaySession):
        return session, True
    raise TypeError(
        f"run_episode needs a ReplayEnv, a ReplaySession, a World or a world reference, got {type(target).__name__}"
    )


def run_episode(
    policy: Any,
    env: Any,
    *,
    seed: int = 0,
    on_error: str = "raise",
    **session_options: Any,
) -> EpisodeResult:
    """Run one episode of ``policy`` and return its record.

    Args:
        policy: a policy object or a function of the view.
        env: a ``gym.make``'d ReplayEnv (stepped through its wrappers, until one of them or the
            env ends the episode, e.g. ``max_episode_steps``; batches are checked strictly
            whatever the env's ``strict``), or a ReplaySession, a
            World or a world reference such as a shipped world's name (the fast path used by
            evaluation: no observation encoding).
        seed: passed to the policy in its RunContext (and to ``env.reset``).
        on_error: "raise" re-raises a policy's exception or illegal batch, and raises
            :class:`~dream_gym.replay.session.EpisodeLimitError` when the policy asked for more than
            ``max_attempts`` attempts; "record" ends the episode there and puts the message in
            ``EpisodeResult.error``.
        session_options: ReplaySession arguments when ``env`` is a World (workers, beta, ...).
    """
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error must be 'raise' or 'record', got {on_error!r}")
    policy = as_policy(policy)
    session, through_env = _session_of(env, session_options)
    if getattr(policy, "untrusted", False):  # code that times the replies: see WorldFields.fill
        from dream_gym.replay.session import world_fields

        world_fields(session.world).fill()
    if through_env:
        _, info = env.reset(seed=seed)
        view = info["view"]
    else:
        session.reset()
        view = session.view()
    error: str | None = None
    cut_by_wrapper = False  # a wrapper's truncation (TimeLimit): the episode ends there, as for any agent
    try:
        policy.reset(RunContext.from_view(view, seed=seed))
        while not session.done and not cut_by_wrapper:
            batch = batch_from(policy.act(view))
            if through_env:
                # A policy's illegal batch is its error (docs/concepts/policies.md), even where the env itself
                # would drop illegal selections (its default, for Gymnasium's contract).
                session.replay.check(batch)
                _, _, terminated, truncated, info = env.step(batch)
                cut_by_wrapper = (terminated or truncated) and not session.done
                view = info["view"]
            else:
                session.step(batch)
                view = session.view()
        if session.limit_error is not None:  # the episode asked for more than max_attempts
            from dream_gym.replay.session import EpisodeLimitError  # here: see _session_of

            raise EpisodeLimitError(session.limit_error)
    except Exception as exc:  # an IllegalBatchError, EpisodeLimitError, or anything the policy raised
        if on_error == "raise":
            raise
        error = f"{type(exc).__name__}: {exc}"
    result = result_from_session(session, policy_name(policy), error)
    result.truncated = result.truncated or cut_by_wrapper
    return result
