"""Replay mechanics: the deterministic reveal rules of SPEC §3 (pure Python/numpy, no gymnasium).

The one place the reveal rule lives:

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
node are always a prefix of its recorded children: one counter per node is the whole state.

Known bias (SPEC §5): a revealed leaf that is *not* on the frontier tells the policy that the
original run stopped there. That is the only fact about unrevealed nodes the frontier carries
(plus, for the root, how many more branches it may open in the next batch, capped at W).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

from dream_gym.world import FRONTIER_RULES, World

ROOT = 0


class IllegalBatchError(ValueError):
    """A batch breaks the reveal rules; the message names the selection and the reason."""

    def __init__(self, message: str, node: object = None):
        super().__init__(message)
        self.node = node


def _as_id(selection: object) -> int:
    if isinstance(selection, bool):
        raise IllegalBatchError(f"selection {selection!r} is a bool, not an observed node id", selection)
    try:
        return operator.index(selection)  # type: ignore[arg-type]
    except TypeError:
        raise IllegalBatchError(
            f"selection {selection!r} is not an observed node id (an int)", selection
        ) from None


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
        if frontier not in FRONTIER_RULES:
            raise ValueError(f"frontier must be one of {FRONTIER_RULES}, got {frontier!r}")
        self.world = world
        self.workers = int(workers)
        self.frontier_rule = frontier
        self._children_start, self._children, self._n_children = world.tree_lists
        self.reset()

    def reset(self) -> None:
        size = self.world.size
        self.order: list[int] = [ROOT]  # world index of each observed id
        self._obs_of = [-1] * size
        self._obs_of[ROOT] = 0
        self._revealed_children = [0] * size  # revealed children are a prefix of the recorded ones
        self._open: dict[int, None] = {}  # non-root frontier members (observed ids), insertion-ordered
        self.attempts = 0
        self.rounds = 0

    # -- what the policy may know ------------------------------------------------------
    @property
    def root_slots(self) -> int:
        """How many times the root may appear in the next batch."""
        return min(self.workers, self._n_children[ROOT] - self._revealed_children[ROOT])

    def frontier(self) -> tuple[int, ...]:
        """Legal observed ids in ascending order (the root once, if it may open a branch)."""
        ids = sorted(self._open)
        return (ROOT, *ids) if self.root_slots else tuple(ids)

    @property
    def exhausted(self) -> bool:
        """Nothing left that a batch could reveal."""
        return not self._open and not self.root_slots

    def world_index(self, obs_id: int) -> int:
        return self.order[obs_id]

    def observed_parent(self, obs_id: int) -> int:
        """Observed id of a revealed node's parent (-1 for the root)."""
        parent = int(self.world.parent[self.order[obs_id]])
        return -1 if parent < 0 else self._obs_of[parent]

    # -- the rules --------------------------------------------------------------------
    def why_illegal(self, obs_id: int) -> str:
        """The reason a revealed non-root id is off the frontier, in words."""
        index = self.order[obs_id]
        if self._revealed_children[index] >= self._n_children[index]:
            return f"id {obs_id} has no unrevealed recorded child (the original run did not continue there)"
        return (
            f"id {obs_id} is not a leaf of the revealed tree (frontier rule 'leaves'; "
            "a world or env with frontier='any' allows it)"
        )

    def check(self, batch: Sequence[object]) -> list[int]:
        """Validate a batch; return it as a list of ints or raise IllegalBatchError."""
        ids = [_as_id(s) for s in batch]
        if len(ids) > self.workers:
            raise IllegalBatchError(f"batch of {len(ids)} selections exceeds W={self.workers} workers")
        seen: set[int] = set()
        root_count = 0
        for obs_id in ids:
            if not 0 <= obs_id < len(self.order):
                raise IllegalBatchError(
                    f"id {obs_id} is not an observed node (observed ids are 0..{len(self.order) - 1})", obs_id
                )
            if obs_id == ROOT:
                root_count += 1
                if root_count > self.root_slots:
                    raise IllegalBatchError(
                        f"the root (id 0) is selected {root_count} times but may open only "
                        f"{self.root_slots} branch(es) in this batch", obs_id
                    )
                continue
            if obs_id in seen:
                raise IllegalBatchError(
                    f"id {obs_id} appears twice (a non-root node may be selected once per batch)", obs_id
                )
            seen.add(obs_id)
            if obs_id not in self._open:
                raise IllegalBatchError(self.why_illegal(obs_id), obs_id)
        return ids

    def legal_part(self, batch: Sequence[object]) -> tuple[list[int], list[tuple[object, str]]]:
        """Split a batch into its legal selections (in order) and the dropped ones with reasons."""
        kept: list[int] = []
        dropped: list[tuple[object, str]] = []
        for selection in batch:
            try:
                self.check([*kept, selection])
            except IllegalBatchError as exc:
                dropped.append((selection, str(exc)))
            else:
                kept.append(_as_id(selection))
        return kept, dropped

    def apply(self, batch: Sequence[object]) -> list[int]:
        """Apply a legal, non-empty batch as one round; return the new observed ids."""
        return self.apply_checked(self.check(batch))

    def apply_checked(self, ids: list[int]) -> list[int]:
        """:meth:`apply` for ids that :meth:`check` (or :meth:`legal_part`) just returned."""
        if not ids:
            raise IllegalBatchError("an empty batch stops the episode; it is not a round to apply")
        new_ids = [self._reveal_child_of(obs_id) for obs_id in ids]
        self.attempts += len(new_ids)
        self.rounds += 1
        return new_ids

    def _reveal_child_of(self, obs_id: int) -> int:
        parent = self.order[obs_id]
        rank = self._revealed_children[parent]
        child = self._children[self._children_start[parent] + rank]
        self._revealed_children[parent] = rank + 1
        if obs_id != ROOT:
            if self.frontier_rule == "leaves" or rank + 1 == self._n_children[parent]:
                self._open.pop(obs_id, None)
        new_id = len(self.order)
        self.order.append(child)
        self._obs_of[child] = new_id
        if self._n_children[child]:
            self._open[new_id] = None
        return new_id
