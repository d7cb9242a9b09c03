"""One replay episode: reveal rules + replay score + prefix views, without gymnasium.

:class:`ReplaySession` is what both the Gymnasium env (a thin adapter adding observation
encoding) and the fast evaluation path of :func:`dream_gym.policy.run_episode` drive, so the
two cannot disagree. Rewards are changes of V, starting from 0 before the first step, so the
rewards of an episode sum to its final V.
"""

from __future__ import annotations

import math
import os
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from dream_gym.replay.mechanics import ROOT, IllegalBatchError, Replay
from dream_gym.replay.node_stores import RevealedNodes
from dream_gym.replay.node_view import FrozenDict, NodeView, fields_under
from dream_gym.replay.score import Normalizer
from dream_gym.replay.settings import ReplaySettings, check_flags
from dream_gym.replay.view import PrefixView
from dream_gym.world.registry import resolve_world
from dream_gym.world.tree import World


class WorldFields(dict[int, Mapping[str, Any]]):
    """Per world node (its index), the fields of its view that do not depend on the reveal order
    (:func:`dream_gym.replay.node_view.fields_under`), computed on first use and shared by every session and
    env on the world (evaluation runs a fresh session per episode). Derived from the world
    alone, immutable values only; ``q`` holds q of every node (None where unscored)."""

    def __init__(self, world: World):
        super().__init__()
        self._world = weakref.ref(world)  # the cache is a value of a WeakKeyDictionary keyed by the world
        self._parent = world.parent.tolist()
        normalizer = Normalizer(world.baseline_score, world.best_score)
        self.q: list[float | None] = [normalizer.q(score) for score in world.score_list]

    def __reduce__(self) -> tuple[Any, ...]:
        return (world_fields, (self._world(),))  # a copy of a session caches on its copy of the world

    def fill(self) -> None:
        """Compute every node's fields now (O(world), once). Run before untrusted code plays the
        world: a reveal then costs what it costs in any episode, so how long the replay takes to
        answer says nothing of which nodes an earlier episode revealed."""
        for index in range(len(self._parent)):
            if index not in self:
                self.__missing__(index)

    def __missing__(self, index: int) -> Mapping[str, Any]:
        world = self._world()
        assert world is not None, "the world of these fields is gone"
        parent_of = self._parent
        pending = [index]  # the node and its ancestors not computed yet, deepest first
        while (parent := parent_of[pending[-1]]) >= 0 and parent not in self:
            pending.append(parent)
        for node in reversed(pending):
            parent = parent_of[node]
            self[node] = fields_under(world.records[node], None if parent < 0 else self[parent],
                                      world.score_list[node], world.baseline_score)
        return self[index]


_FIELDS_BY_WORLD: weakref.WeakKeyDictionary[World, WorldFields] = weakref.WeakKeyDictionary()


def world_fields(world: World) -> WorldFields:
    """The :class:`WorldFields` of a world (one per world and process)."""
    fields = _FIELDS_BY_WORLD.get(world)
    if fields is None:
        fields = _FIELDS_BY_WORLD[world] = WorldFields(world)
    return fields


class EpisodeLimitError(RuntimeError):
    """An episode asked for more attempts than ``max_attempts`` allows
    (:data:`dream_gym.replay.settings.DEFAULT_MAX_ATTEMPTS`): its batch was not applied and the episode
    ended there. Evaluation records it as the policy's error on that world."""


def attempts_limit_message(limit: int, attempts: int, batch: int) -> str:
    """Why a batch of ``batch`` selections after ``attempts`` attempts was refused."""
    return (f"episode exceeded {limit} attempts (max_attempts); its batch of {batch} after {attempts} "
            "attempts was not applied and the episode ended there (raise the bound with --max-attempts, "
            "or max_attempts= of evaluate, ReplaySettings or the env)")


class StepOutcome(NamedTuple):
    """What one batch did. Built with ``tuple.__new__`` on the hot path (a NamedTuple's own
    constructor is a Python function). ``refused``: the selections an online run would have made
    that the record could not answer (:meth:`dream_gym.replay.mechanics.Replay.judge`)."""

    new_ids: list[int]
    reward: float
    terminated: bool
    truncated: bool
    dropped: list[tuple[object, str]]
    refused: list[int]


_new_outcome = tuple.__new__


class ReplaySession:
    """A replay episode on one world.

    Args:
        world: the recorded world, or a reference to one (a world folder, a shipped world's name,
            a dataset's world).
        settings: W, beta, beta1, beta2, max_rounds and frontier
            (:class:`~dream_gym.replay.settings.ReplaySettings`; default: its defaults, W and the
            frontier rule the world's).
        strict: raise IllegalBatchError on an illegal selection (True), or drop illegal
            selections and report them in ``StepOutcome.dropped`` (False).
        changes: settings fields by name (``workers=``, ``beta=``, ...), applied over ``settings``.
    """

    def __init__(
        self,
        world: World,
        settings: ReplaySettings | None = None,
        *,
        strict: bool = True,
        **changes: Any,
    ):
        if isinstance(world, (str, os.PathLike)):  # a world reference, as run_episode and gym.make take
            world = resolve_world(world)
        elif not isinstance(world, World):
            raise TypeError(f"ReplaySession needs a World or a world reference, got {type(world).__name__}")
        self.settings = settings = ReplaySettings.of(settings, **changes).resolved(world)
        max_rounds = settings.max_rounds
        self.world = world
        self.beta, self.beta1, self.beta2 = float(settings.beta), float(settings.beta1), float(settings.beta2)
        self.max_rounds = max_rounds
        self._round_limit = math.inf if max_rounds is None else max_rounds
        self.max_attempts = settings.max_attempts
        check_flags(strict=strict)
        self.strict = bool(strict)
        self.replay = Replay(world, settings.workers_on(world), settings.frontier_on(world), settings.requests)
        self.normalizer = Normalizer(world.baseline_score, world.best_score)
        self._fields = world_fields(world)
        self._q = self._fields.q
        # The view fields that stay the same for the whole session (all immutable values).
        self._view_constants = {
            "baseline_score": world.baseline_score,
            "workers": self.replay.workers,
            "beta": self.beta,
            "beta1": self.beta1,
            "beta2": self.beta2,
            "task_name": world.task_name,
            "task_description": world.task_description,
            "direction": world.direction,
            "frontier_rule": self.replay.frontier_rule,
            "max_rounds": max_rounds,
        }
        self._frozen_constants = FrozenDict(self._view_constants)  # what the views hold
        self.reset()

    # -- state ------------------------------------------------------------------------
    def reset(self) -> None:
        self.replay.reset()
        # The episode's revealed nodes: what its views share (node views are built when read).
        self._revealed = RevealedNodes()
        self.value = 0.0  # V before the first step; rewards sum to the final V
        self.batches: list[list[int]] = []
        self.done = False
        self.terminated = False
        self.truncated = False
        self.limit_error: str | None = None  # why the episode was cut at max_attempts, if it was
        # Coverage (docs/concepts/coverage.md): counted from what the policy chose only.
        self.refused = 0  # selections an online run would have made that the record could not answer
        self.cut_short = False  # the record, not the policy, ended the episode
        self._answerable_sum = 0.0  # over decisions: the share of the online choices the record could answer
        self.decisions = 0
        root_q = self._q[ROOT]
        self.best_q = 0.0 if root_q is None else root_q  # an unscored root: quality starts at the baseline's q
        root = self._fields[ROOT]
        self.best_score: float | None = root["score"]
        self._revealed.fixed.append(root)
        self._revealed.parents.append(-1)

    @property
    def attempts(self) -> int:
        return self.replay.attempts

    @property
    def rounds(self) -> int:
        return self.replay.rounds

    @property
    def workers(self) -> int:
        return self.replay.workers

    @property
    def nodes(self) -> tuple[NodeView, ...]:
        return self._revealed.views(len(self._revealed))

    def node(self, obs_id: int) -> NodeView:
        """The view of one revealed node."""
        if not 0 <= obs_id < len(self._revealed):
            raise IndexError(f"id {obs_id} is not an observed node")
        return self._revealed.view(obs_id)

    def _reveal(self, new_ids: list[int], parents: list[int]) -> None:
        """Record just-revealed nodes (``parents``: their parents' observed ids, i.e. the batch)."""
        order, fields, q_of, revealed = self.replay.order, self._fields, self._q, self._revealed
        best_q = self.best_q
        fixed = revealed.fixed
        for obs_id in new_ids:
            index = order[obs_id]
            entry = fields[index]
            fixed.append(entry)
            q = q_of[index]
            if q is not None and q > best_q:
                best_q = q
                self.best_score = entry["score"]
        self.best_q = best_q
        revealed.parents.extend(parents)

    # -- what the policy sees ---------------------------------------------------------
    def view(self) -> PrefixView:
        """The current prefix view (its fields are filled when first read)."""
        replay = self.replay
        return PrefixView.lazy(self._revealed, len(replay.order), replay.frontier(), replay.root_slots,
                               replay.rounds, replay.attempts, self._frozen_constants)

    @property
    def coverage(self) -> float:
        """The share of the policy's requests the record answered: attempts / (attempts +
        refused); 1.0 when it asked for nothing."""
        asked = self.replay.attempts + self.refused
        return self.replay.attempts / asked if asked else 1.0

    @property
    def answerable(self) -> float | None:
        """Over the decisions so far, the mean share of the choices an online run would have had
        that the record could answer (None before the first decision)."""
        return self._answerable_sum / self.decisions if self.decisions else None

    # -- dynamics ---------------------------------------------------------------------
    def step(self, batch: Sequence[object]) -> StepOutcome:
        """Apply one batch ([] stops). Returns the new ids, the reward (change of V) and flags.

        Non-strict sessions drop illegal selections (listed in ``StepOutcome.dropped``); a
        non-empty batch with no legal selection left is the empty batch: it stops the episode.
        A batch that would take the episode past ``max_attempts`` is not applied: the episode
        ends truncated, reward 0, and ``limit_error`` says why (:class:`EpisodeLimitError`'s
        message).

        Coverage: ``StepOutcome.refused`` lists the selections the record could not answer
        (counted in ``refused``). In request mode they are legal and not charged, and a batch
        holding nothing else ends the episode truncated and ``cut_short``; under the rule's own
        frontier they are dropped selections (non-strict), and an episode that ends because
        nothing is left to reveal, or on a batch whose selections the record refused, is
        ``cut_short`` too.
        """
        if self.done:
            raise RuntimeError("the episode is over; call reset() first")
        replay = self.replay
        self._answerable_sum += replay.answerable_choices() / replay.online_choices()
        self.decisions += 1
        dropped: list[tuple[object, str]]
        refused: list[int]
        if self.strict:
            ids, dropped = replay.check(batch), []
            refused = []
            if replay.requests:
                ids, refused = replay.answer(ids)
        else:
            ids, dropped, refused = replay.judge(batch)
        if refused:
            self.refused += len(refused)
        if ids and replay.attempts + len(ids) > self.max_attempts:
            return self._refuse_over_limit(len(ids), dropped, refused)
        if ids:
            new_ids = replay.apply_checked(ids)
            self._reveal(new_ids, ids)
            self.batches.append(ids)
            terminated = replay.exhausted
            if terminated:  # nothing left to reveal: the policy did not ask to stop
                self.cut_short = True
        elif refused and replay.requests:  # the record holds nothing the batch asked for
            self.cut_short = self.truncated = self.done = True
            return _new_outcome(StepOutcome, ([], 0.0, False, True, dropped, refused))
        else:
            new_ids, terminated = [], True
            self.cut_short = bool(refused)
        rounds, attempts = replay.rounds, replay.attempts
        truncated = not terminated and rounds >= self._round_limit
        self.terminated, self.truncated, self.done = terminated, truncated, terminated or truncated
        # score.replay_score, inline (the same operations in the same order: the same bits)
        value = self.best_q - self.beta1 * attempts + self.beta2 * attempts / max(1, rounds)
        reward = value - self.value
        self.value = value
        return _new_outcome(StepOutcome, (new_ids, reward, terminated, truncated, dropped, refused))

    def _refuse_over_limit(self, batch: int, dropped: list[tuple[object, str]],
                           refused: list[int] | None = None) -> StepOutcome:
        """End the episode, truncated, without applying a batch of ``batch`` selections that would
        take it past ``max_attempts``."""
        self.limit_error = attempts_limit_message(self.max_attempts, self.replay.attempts, batch)
        self.truncated = self.done = True
        return _new_outcome(StepOutcome, ([], 0.0, False, True, dropped, refused or []))

    def truncate(self) -> None:
        """End the episode from outside (e.g. the env's observation capacity is full)."""
        self.truncated = True
        self.done = True


__all__ = ["EpisodeLimitError", "IllegalBatchError", "ReplaySession", "StepOutcome", "attempts_limit_message"]
