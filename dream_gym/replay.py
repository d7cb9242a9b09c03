"""Replay mechanics: the deterministic reveal rules played on one world (pure Python, no gymnasium).

The rules themselves are :mod:`dream_gym.reveal_rules` (a :class:`RevealRule` per frontier rule);
:mod:`dream_gym.vector_replay` applies them to many episodes at once in numpy arrays, and
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
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Container, Sequence

from dream_gym.reveal_rules import REVEAL_RULES, root_slots
from dream_gym.world import World

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
            reason = (f"the root (id 0) is selected {roots + 1} times but may open only "
                      f"{root_slots} branch(es) in this batch")
        elif obs_id in is_open and obs_id not in kept:
            kept.append(obs_id)
            continue
        elif obs_id in kept:
            reason = f"id {obs_id} appears twice (a non-root node may be selected once per batch)"
        else:
            reason = off_frontier(obs_id)
        dropped.append((selection, reason))
    return kept, dropped


class Replay:
    """The revealed part of one world and the rules to grow it.

    Args:
        world: the recorded world.
        workers: W, the most selections one batch may hold.
        frontier: "leaves" (default) or "any".
    """

    def __init__(self, world: World, workers: int, frontier: str = "leaves"):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if frontier not in REVEAL_RULES:
            raise ValueError(f"frontier must be one of {tuple(REVEAL_RULES)}, got {frontier!r}")
        self.world = world
        self.workers = int(workers)
        self.frontier_rule = frontier
        self.rule = REVEAL_RULES[frontier]
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
        # How many times the root may appear in the next batch: at most W and the branches left.
        self.root_slots = root_slots(self.workers, self._n_children[ROOT])
        self.exhausted = not self.root_slots  # nothing left that a batch could reveal

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

    def check(self, batch: Sequence[object]) -> list[int]:
        """Validate a batch; return it as a list of ints or raise IllegalBatchError."""
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
                self.root_slots = root_slots(self.workers, n_children[ROOT] - rank)
            elif rank >= selections(n_children[parent]):
                del is_open[obs_id]
            if selections(n_children[child]):
                is_open[new_id] = 1
            new_ids.append(new_id)
        self.attempts += len(new_ids)
        self.rounds += 1
        self.exhausted = not is_open and not self.root_slots  # an attribute: read every step
        return new_ids
