"""Replay mechanics: the deterministic reveal rules played on one world (pure Python, no gymnasium).

The rules themselves are :mod:`dream_gym.world.reveal_rules` (a :class:`RevealRule` per frontier rule);
:mod:`dream_gym.replay.vector` applies them to many episodes at once in numpy arrays, and
tests/test_reveal_rule_conformance.py pins the two, the online check and the oracle to each other:

* Observed ids are assigned in reveal order: 0 is the root, then 1, 2, ... as nodes are
  revealed; inside a batch, in the order of the batch.
* Selecting the root opens the next branch: it reveals the root's earliest-created unrevealed
  child. The root may appear up to ``root_slots`` times in a batch (at most W, and no more than
  the branches it can still open).
* Selecting a revealed non-root node reveals its earliest-created unrevealed recorded child; a
  non-root node may appear once per batch.
* Frontier rule ``"leaves"`` (default, the paper's): a non-root node is legal when it is a leaf
  of the revealed tree and has a recorded child. Rule ``"any"``: any revealed node with an
  unrevealed recorded child is legal.

Because every reveal takes the earliest-created unrevealed child, the revealed children of each
node are always a prefix of its recorded children: one counter per node is the whole state. The
counters live in dicts holding revealed nodes only, so creating or resetting a replay costs the
same on a 100-node world and on a 100,000-node one.

Known bias (docs/concepts/honesty.md): a revealed leaf that is *not* on the frontier tells the policy that the
original run stopped there. That is the only fact about unrevealed nodes the frontier carries
(plus, for the root, how many more branches it may open in the next batch, capped at W).

**Request mode** (``requests=True``, docs/concepts/coverage.md): the frontier is the one an online
run of the same rule has (every revealed node the rule lets an online run continue, and the root W
times a batch), so a policy asks for what it would ask for online. A selection the record can
answer reveals as above (a hit); one it cannot (a node with no unrevealed recorded child, the root
with no unopened recorded branch) is *refused*: it reveals nothing and is not charged. The hits of a
batch are always a legal batch of the rule itself, so request mode reveals nothing the rule could
not, and a refusal tells only what the rule's frontier would have told about the node selected.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Container, Sequence
from typing import NamedTuple

from dream_gym.world.reveal_rules import REVEAL_RULES, UNRECORDED, root_slots
from dream_gym.world.tree import World

ROOT = 0


class IllegalBatchError(ValueError):
    """A batch breaks the reveal rules; the message names the selection and the reason."""

    def __init__(self, message: str, node: object = None):
        super().__init__(message)
        self.node = node


def _as_id(selection: object) -> int | None:
    """The selection as an int, or None when it is not an integer (bools are not ids)."""
    if type(selection) is int:  # the hot path: plain ints
        return selection
    if isinstance(selection, bool):
        return None
    try:
        return operator.index(selection)  # type: ignore[arg-type]
    except TypeError:
        return None


def why_illegal(obs_id: int, leaves_rule: bool, has_revealed_children: bool) -> str:
    """The reason a revealed non-root id is off the frontier, in words, from revealed facts only
    (:meth:`RevealRule.why_closed` of rule "leaves" or "any")."""
    rule = REVEAL_RULES["leaves" if leaves_rule else "any"]
    return rule.why_closed(obs_id, int(has_revealed_children))


def judge_batch(
    batch: Sequence[object],
    workers: int,
    n_observed: int,
    is_open: Container[int],
    root_slots: int,
    off_frontier: Callable[[int], str],
) -> tuple[list[int], list[tuple[object, str]]]:
    """:meth:`Replay.legal_part` on any replay state: ``n_observed`` observed ids, ``is_open``
    the non-root frontier, ``root_slots``, and ``off_frontier(id)`` the reason a revealed
    non-root id off the frontier is (``why_illegal``)."""
    kept: list[int] = []
    dropped: list[tuple[object, str]] = []
    roots = 0
    for selection in batch:
        obs_id = selection if type(selection) is int else _as_id(selection)
        if obs_id is None:
            what = "a bool" if isinstance(selection, bool) else "not an int"
            reason = f"selection {selection!r} is {what}, not an observed node id"
        elif len(kept) == workers:
            reason = f"batch of {len(batch)} selections exceeds W={workers} workers"
        elif not 0 <= obs_id < n_observed:
            reason = f"id {obs_id} is not an observed node (observed ids are 0..{n_observed - 1})"
        elif obs_id == ROOT:
            if roots < root_slots:
                roots += 1
                kept.append(ROOT)
                continue
            reason = ("the root (id 0) may open no branch in this batch" if not root_slots else
                      f"the root (id 0) is selected {roots + 1} times but may open only {root_slots} "
                      f"branch{'es' * (root_slots != 1)} in this batch")
        elif obs_id in is_open and obs_id not in kept:
            kept.append(obs_id)
            continue
        elif obs_id in kept:
            reason = f"id {obs_id} appears twice (a non-root node may be selected once per batch)"
        else:
            reason = off_frontier(obs_id)
        dropped.append((selection, reason))
    return kept, dropped


def refused_among(batch: Sequence[object], kept: list[int], workers: int, n_observed: int,
                  online_open: Container[int], off_frontier: Callable[[int], str]) -> list[int]:
    """The selections of ``batch`` an online run of the rule would have kept (the root up to W
    times, the non-root ids in ``online_open``, judged as :func:`judge_batch` judges) that the
    rule's frontier, which also asks the record, did not keep (``kept``): the requests the
    record could not answer."""
    online, _ = judge_batch(batch, workers, n_observed, online_open, workers, off_frontier)
    left = Counter(kept)
    refused = []
    for obs_id in online:
        if left[obs_id]:
            left[obs_id] -= 1
        else:
            refused.append(obs_id)
    return refused


class Judged(NamedTuple):
    """A batch judged by :meth:`Replay.judge`: what to apply, what breaks the rules, and what the
    record cannot answer."""

    hits: list[int]  # the selections to apply (each reveals a recorded node), in order
    dropped: list[tuple[object, str]]  # selections the rules refuse, with the reason
    refused: list[int]  # selections an online run of the rule would take that the record cannot answer


class Replay:
    """The revealed part of one world and the rules to grow it.

    Args:
        world: the recorded world.
        workers: W, the most selections one batch may hold.
        frontier: "leaves" (default) or "any".
        requests: request mode (see the module doc): the frontier is the online one, and a
            selection the record cannot answer is refused instead of being off the frontier.
    """

    def __init__(self, world: World, workers: int, frontier: str = "leaves", requests: bool = False):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if frontier not in REVEAL_RULES:
            raise ValueError(f"frontier must be one of {tuple(REVEAL_RULES)}, got {frontier!r}")
        self.world = world
        self.workers = int(workers)
        self.frontier_rule = frontier
        self.rule = REVEAL_RULES[frontier]
        self.requests = bool(requests)
        # rounds in a row an online run may select a node (1 under "leaves", unbounded under "any")
        self._online_selections = self.rule.selections(UNRECORDED)
        self._children_start, self._children, self._n_children = world.tree_lists
        self.reset()

    def reset(self) -> None:
        """Back to the root alone; costs the same whatever the world's size."""
        self.order: list[int] = [ROOT]  # world index of each observed id
        self._revealed_children: dict[int, int] = {}  # world index -> revealed children (a prefix)
        # Non-root frontier members (observed id -> 1, the multiplicity a batch allows), ascending.
        self._open: dict[int, int] = {}
        self.attempts = 0
        self.rounds = 0
        self.unopened = self._n_children[ROOT]  # recorded branches of the root not opened yet
        # How many times the root may appear in the next batch: at most W and the branches left
        # (request mode: W, as online).
        self.root_slots = self.workers if self.requests else root_slots(self.workers, self.unopened)
        self.exhausted = not self.root_slots  # nothing left that a batch could reveal
        # request mode: the open non-root nodes the record can answer (the others are all open)
        self._answerable_open = 0

    # -- what the policy may know ------------------------------------------------------

    def frontier(self) -> tuple[int, ...]:
        """Legal observed ids in ascending order (the root once, if it may open a branch).

        ``_open`` is already ascending: ids are handed out in increasing order, each enters the
        frontier once (when revealed) and never comes back after leaving it.
        """
        if self.root_slots:
            return (ROOT, *self._open)
        return tuple(self._open)

    def frontier_counts(self) -> dict[int, int]:
        """The frontier as {observed id: how often a batch may hold it}: ``root_slots`` for the
        root (when it may open a branch), 1 for the others; a fresh dict, in frontier order."""
        if self.root_slots:
            return {ROOT: self.root_slots, **self._open}
        return self._open.copy()

    def is_open(self, obs_id: int) -> bool:
        """Whether a revealed non-root node is on the frontier."""
        return obs_id in self._open

    def open_ids(self) -> list[int]:
        """The non-root frontier members, ascending."""
        return list(self._open)

    def world_index(self, obs_id: int) -> int:
        return self.order[obs_id]

    def observed_parent(self, obs_id: int) -> int:
        """Observed id of a revealed node's parent (-1 for the root); O(revealed nodes)."""
        parent = int(self.world.parent[self.order[obs_id]])
        return -1 if parent < 0 else self.order.index(parent)

    def online_choices(self) -> int:
        """How many choices an online run of the rule would have now: the root (once) and every
        revealed non-root node the rule lets it continue."""
        if self.requests:
            return 1 + len(self._open)
        if self._online_selections == UNRECORDED:  # "any": every revealed node
            return len(self.order)
        # "leaves": the revealed non-root nodes with no revealed child, and the root
        expanded = len(self._revealed_children) - (ROOT in self._revealed_children)
        return len(self.order) - expanded

    def answerable_choices(self) -> int:
        """How many of :meth:`online_choices` the record can answer (the root counted once)."""
        if self.requests:
            return self._answerable_open + (self.unopened > 0)
        return len(self._open) + (self.root_slots > 0)

    # -- the rules --------------------------------------------------------------------
    def why_illegal(self, obs_id: int) -> str:
        """The reason a revealed non-root id is off the frontier (see :func:`why_illegal`)."""
        return self.rule.why_closed(obs_id, self._revealed_children.get(self.order[obs_id], 0))

    def legal_part(self, batch: Sequence[object]) -> tuple[list[int], list[tuple[object, str]]]:
        """Split a batch into its legal selections (in order) and the dropped ones with reasons.

        Each selection is judged against the selections kept before it, so the kept part is
        always a legal batch: at most W selections, the root at most ``root_slots`` times, each
        non-root id once and on the frontier.
        """
        if len(batch) == 1:  # the common single selection: legal when open, or the root with a slot
            selection = batch[0]
            if type(selection) is int and (selection in self._open or (selection == ROOT and self.root_slots)):
                return [selection], []
        return judge_batch(batch, self.workers, len(self.order), self._open, self.root_slots, self.why_illegal)

    def judge(self, batch: Sequence[object]) -> Judged:
        """:meth:`legal_part`, with the selections the record cannot answer told apart.

        In request mode the legal part is split into hits (applied) and refusals. Under the
        rule's own frontier every legal selection is a hit, and ``refused`` lists the dropped
        selections an online run of the rule would have taken (the root beyond its recorded
        branches, a node the record does not continue): what :meth:`legal_part` dropped because
        of the record rather than the rule.
        """
        kept, dropped = self.legal_part(batch)
        if self.requests:
            hits, refused = self.answer(kept)
            return Judged(hits, dropped, refused)
        return Judged(kept, dropped, self._refused_among(batch, kept) if dropped else [])

    def answer(self, kept: Sequence[int]) -> tuple[list[int], list[int]]:
        """Request mode: a legal batch split into the selections the record can answer (in
        order; the root as often as it has unopened recorded branches) and the refused ones."""
        hits: list[int] = []
        refused: list[int] = []
        opened = 0
        order, revealed, n_children, selections = self.order, self._revealed_children, self._n_children, \
            self.rule.selections
        for obs_id in kept:
            if obs_id == ROOT:
                answered = opened < self.unopened
                opened += answered
            else:
                parent = order[obs_id]
                answered = revealed.get(parent, 0) < selections(n_children[parent])
            (hits if answered else refused).append(obs_id)
        return hits, refused

    def _refused_among(self, batch: Sequence[object], kept: list[int]) -> list[int]:
        """Under the rule's frontier: :func:`refused_among` of this replay's state."""
        return refused_among(batch, kept, self.workers, len(self.order), _OnlineOpen(self), self.why_illegal)

    def check(self, batch: Sequence[object]) -> list[int]:
        """Validate a batch; return it as a list of ints or raise IllegalBatchError (request
        mode: the legal batch, refusals included; :meth:`answer` splits it)."""
        if len(batch) > self.workers:
            raise IllegalBatchError(f"batch of {len(batch)} selections exceeds W={self.workers} workers")
        kept, dropped = self.legal_part(batch)
        if dropped:
            selection, reason = dropped[0]
            raise IllegalBatchError(reason, selection)
        return kept

    def apply(self, batch: Sequence[object]) -> list[int]:
        """Apply a legal, non-empty batch as one round; return the new observed ids."""
        return self.apply_checked(self.check(batch))

    def apply_checked(self, ids: list[int]) -> list[int]:
        """:meth:`apply` for ids that :meth:`check` (or :meth:`legal_part`) just returned.

        Each selection reveals its node's earliest-created unrevealed recorded child
        (``revealed_child``, inline: this runs every step); the rule's ``selections`` says when a
        node leaves the frontier and whether a new one enters it.
        """
        if not ids:
            raise IllegalBatchError("an empty batch stops the episode; it is not a round to apply")
        if self.requests:
            return self._apply_requests(ids)
        order, revealed, is_open = self.order, self._revealed_children, self._open
        children, starts, n_children = self._children, self._children_start, self._n_children
        selections = self.rule.selections
        new_ids = []
        for obs_id in ids:
            parent = order[obs_id]
            rank = revealed.get(parent, 0) + 1  # the revealed children of parent, this one included
            revealed[parent] = rank
            new_id = len(order)
            child = children[starts[parent] + rank - 1]
            order.append(child)
            if obs_id == ROOT:
                self.unopened = n_children[ROOT] - rank
                self.root_slots = root_slots(self.workers, self.unopened)
            elif rank >= selections(n_children[parent]):
                del is_open[obs_id]
            if selections(n_children[child]):
                is_open[new_id] = 1
            new_ids.append(new_id)
        self.attempts += len(new_ids)
        self.rounds += 1
        self.exhausted = not is_open and not self.root_slots  # an attribute: read every step
        return new_ids

    def _apply_requests(self, ids: list[int]) -> list[int]:
        """:meth:`apply_checked` in request mode, for hits (:meth:`answer`): the same reveals;
        the frontier is the online one (a node leaves it only when the rule closes it online,
        every new node enters it) and the root keeps W slots."""
        order, revealed, is_open = self.order, self._revealed_children, self._open
        children, starts, n_children = self._children, self._children_start, self._n_children
        selections, online = self.rule.selections, self._online_selections
        new_ids = []
        for obs_id in ids:
            parent = order[obs_id]
            rank = revealed.get(parent, 0) + 1
            revealed[parent] = rank
            new_id = len(order)
            child = children[starts[parent] + rank - 1]
            order.append(child)
            if obs_id == ROOT:
                self.unopened = n_children[ROOT] - rank
            else:
                if rank >= selections(n_children[parent]):
                    self._answerable_open -= 1
                if rank >= online:
                    del is_open[obs_id]
            is_open[new_id] = 1
            if selections(n_children[child]):
                self._answerable_open += 1
            new_ids.append(new_id)
        self.attempts += len(new_ids)
        self.rounds += 1
        return new_ids


class _OnlineOpen:
    """The non-root nodes an online run of a replay's rule could select, as a container of
    observed ids (revealed facts only: how many children of each are revealed)."""

    __slots__ = ("_replay",)

    def __init__(self, replay: Replay):
        self._replay = replay

    def __contains__(self, obs_id: object) -> bool:
        replay = self._replay
        if type(obs_id) is not int or not 0 < obs_id < len(replay.order):
            return False
        return replay.rule.is_open(replay._revealed_children.get(replay.order[obs_id], 0), UNRECORDED)
