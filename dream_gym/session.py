"""One replay episode: reveal rules + replay score + prefix views, without gymnasium.

:class:`ReplaySession` is what both the Gymnasium env (a thin adapter adding observation
encoding) and the fast evaluation path of :func:`dream_gym.policy.run_episode` drive, so the
two cannot disagree. Rewards are changes of V, starting from 0 before the first step, so the
rewards of an episode sum to its final V.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

from dream_gym.replay import ROOT, IllegalBatchError, Replay
from dream_gym.score import DEFAULT_BETA1, DEFAULT_BETA2, Normalizer, replay_score
from dream_gym.view import NodeView, PrefixView, fixed_fields
from dream_gym.world import World

_CHUNK = 32  # revealed nodes per immutable chunk of the views' node list
_new_view = object.__new__

# Per world, per world node, filled on first reveal and shared by every session on that world
# (evaluation runs a fresh session per episode): (q, the view fields that do not depend on the
# reveal order). All of it is derived from the world alone and immutable.
_FIXED_BY_WORLD: weakref.WeakKeyDictionary[World, dict[int, tuple[float | None, dict[str, Any]]]] = (
    weakref.WeakKeyDictionary()
)


class StepOutcome(NamedTuple):
    """What one batch did. Built with ``tuple.__new__`` on the hot path (a NamedTuple's own
    constructor is a Python function)."""

    new_ids: list[int]
    reward: float
    terminated: bool
    truncated: bool
    dropped: list[tuple[object, str]]


_new_outcome = tuple.__new__


class ReplaySession:
    """A replay episode on one world.

    Args:
        world: the recorded world.
        workers: W (default: the world's recorded W).
        beta: the policy's budget preference in [0, 1] (shown to the policy; not used by V).
        beta1, beta2: cost and parallelism coefficients of V.
        max_rounds: K2, the round limit (None: no limit).
        frontier: "leaves" or "any" (default: the world's rule).
        strict: raise IllegalBatchError on an illegal selection (True), or drop illegal
            selections and report them in ``StepOutcome.dropped`` (False).
    """

    def __init__(
        self,
        world: World,
        *,
        workers: int | None = None,
        beta: float = 0.5,
        beta1: float = DEFAULT_BETA1,
        beta2: float = DEFAULT_BETA2,
        max_rounds: int | None = None,
        frontier: str | None = None,
        strict: bool = True,
    ):
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"beta must be in [0, 1], got {beta}")
        if max_rounds is not None and max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1 or None, got {max_rounds}")
        self.world = world
        self.beta, self.beta1, self.beta2 = float(beta), float(beta1), float(beta2)
        self.max_rounds = max_rounds
        self._round_limit = math.inf if max_rounds is None else max_rounds
        self.strict = strict
        self.replay = Replay(
            world,
            world.workers if workers is None else workers,
            world.frontier_rule if frontier is None else frontier,
        )
        self.normalizer = Normalizer(world.baseline_score, world.best_score)
        self._scores = world.score_list
        self._fixed = _FIXED_BY_WORLD.setdefault(world, {})
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
        self._view_template = {**self._view_constants, "_children": ()}
        self.reset()

    # -- state ------------------------------------------------------------------------
    def reset(self) -> None:
        self.replay.reset()
        self._nodes: list[NodeView] = []
        # The views' nodes, as immutable chunks shared by the views of this episode (a view
        # would otherwise copy every revealed node each step; see PrefixView.nodes).
        self._chunks: list[tuple[NodeView, ...]] = []
        self._chunks_tuple: tuple[tuple[NodeView, ...], ...] = ()
        self._tail: list[NodeView] = []
        self._branch_count = 0
        self.best_q = float("-inf")
        self.best_score: float | None = None
        self.value = 0.0  # V before the first step; rewards sum to the final V
        self.batches: list[list[int]] = []
        self.done = False
        self.terminated = False
        self.truncated = False
        self._add_node(ROOT, -1)
        if self.best_q == float("-inf"):
            self.best_q = 0.0  # an unscored root: quality starts at the baseline's q

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
        return tuple(self._nodes)

    def node(self, obs_id: int) -> NodeView:
        """The view of one revealed node."""
        return self._nodes[obs_id]

    def current_value(self) -> float:
        return replay_score(self.best_q, self.attempts, self.rounds, self.beta1, self.beta2)

    def _add_node(self, obs_id: int, parent_obs: int) -> None:
        """Append the view of a just-revealed node (``parent_obs``: its parent's observed id)."""
        index = self.replay.order[obs_id]
        nodes = self._nodes
        parent = nodes[parent_obs] if parent_obs >= 0 else None
        cached = self._fixed.get(index)
        if cached is None:
            record, score = self.world.records[index], self._scores[index]
            fixed = fixed_fields(record, parent=parent, score=score, baseline=self.world.baseline_score)
            cached = self._fixed[index] = (self.normalizer.q(score), fixed)
        q, fixed = cached
        # branch_of_child and node_view, inline (one reveal per call, on the step's hot path)
        view = _new_view(NodeView)
        fields = view.__dict__
        fields.update(fixed)
        fields["id"] = obs_id
        if parent is None:
            fields["parent"] = fields["branch"] = None
        else:
            fields["parent"] = parent_obs
            if parent_obs == ROOT:
                fields["branch"] = self._branch_count
                self._branch_count += 1
            else:
                fields["branch"] = parent.branch
        nodes.append(view)
        tail = self._tail
        tail.append(view)
        if len(tail) == _CHUNK:
            self._chunks.append(tuple(tail))
            self._chunks_tuple = tuple(self._chunks)
            tail.clear()
        if q is not None and q > self.best_q:
            self.best_q = q
            self.best_score = fixed["score"]

    # -- what the policy sees ---------------------------------------------------------
    def view(self) -> PrefixView:
        replay = self.replay
        view = _new_view(PrefixView)
        # Filled directly (see PrefixView.build), from a template of the session's constant
        # fields: a view is built every step.
        fields = view.__dict__
        fields.update(self._view_template)
        fields["_node_chunks"] = (self._chunks_tuple, tuple(self._tail))  # nodes: assembled on first use
        fields["frontier"] = replay.frontier()
        fields["root_slots"] = replay.root_slots
        fields["rounds"] = replay.rounds
        fields["attempts"] = replay.attempts
        return view

    # -- dynamics ---------------------------------------------------------------------
    def step(self, batch: Sequence[object]) -> StepOutcome:
        """Apply one batch ([] stops). Returns the new ids, the reward (change of V) and flags.

        Non-strict sessions drop illegal selections (listed in ``StepOutcome.dropped``); a
        non-empty batch with no legal selection left is the empty batch: it stops the episode.
        """
        if self.done:
            raise RuntimeError("the episode is over; call reset() first")
        replay = self.replay
        dropped: list[tuple[object, str]]
        if self.strict:
            ids, dropped = replay.check(batch), []
        else:
            ids, dropped = replay.legal_part(batch)
        if ids:
            new_ids = replay.apply_checked(ids)
            if len(ids) == 1:
                self._add_node(new_ids[0], ids[0])
            else:
                add = self._add_node
                for obs_id, parent_obs in zip(new_ids, ids):  # noqa: B905 - same length by construction
                    add(obs_id, parent_obs)
            self.batches.append(ids)
            terminated = replay.exhausted
        else:
            new_ids, terminated = [], True
        rounds, attempts = replay.rounds, replay.attempts
        truncated = not terminated and rounds >= self._round_limit
        self.terminated, self.truncated, self.done = terminated, truncated, terminated or truncated
        # score.replay_score, inline (the same operations in the same order: the same bits)
        value = self.best_q - self.beta1 * attempts + self.beta2 * attempts / max(1, rounds)
        reward = value - self.value
        self.value = value
        return _new_outcome(StepOutcome, (new_ids, reward, terminated, truncated, dropped))

    def truncate(self) -> None:
        """End the episode from outside (e.g. the env's observation capacity is full)."""
        self.truncated = True
        self.done = True


__all__ = ["IllegalBatchError", "ReplaySession", "StepOutcome"]
