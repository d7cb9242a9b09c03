"""Macro actions: a small, fixed decision that fixed rules turn into a legal batch.

The per-slot action space of :class:`dream_gym.envs.env.ReplayEnv` (one node id per worker) is too
large to learn from a few dozen worlds in minutes. Each macro step picks one of
:data:`MACRO_ACTIONS` (stop, open k branches, continue the k best open nodes, or a mix).

* :func:`batch_for` / :func:`macro_masks`: on one :class:`~dream_gym.replay.view.PrefixView`;
* :func:`macro_batches` / :func:`batch_masks`: on N episodes of a
  :class:`~dream_gym.replay.vector.VectorReplay` at once (the same rules; tests pin the two).

Every action is valid: a masked action (its batch would be empty) stops the episode, as the
empty batch does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from dream_gym.policies.base import open_nodes, score_key
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.vector import NONE, VectorReplay
from dream_gym.replay.view import NodeView, PrefixView


@dataclass(frozen=True)
class Macro:
    """One macro action. ``share`` sets its width: k = ceil(share * W) selections (at least 1).

    kind: "stop" ([]); "new" (open k branches: the root k times, capped by root_slots);
    "top" (continue the k best open nodes: valid before invalid, higher score first, newer first
    on ties); "mix" (one new branch, if the root may open one, plus the best open nodes up to W).
    """

    kind: str
    share: float = 1.0

    @property
    def name(self) -> str:
        return self.kind if self.kind in ("stop", "mix") else f"{self.kind}{self.share:g}W"

    def width(self, workers: int) -> int:
        return max(1, math.ceil(self.share * workers - 1e-9))


_SHARES = (0.25, 0.5, 0.75, 1.0)  # with W = 4: k = 1, 2, 3, 4
MACRO_ACTIONS: tuple[Macro, ...] = (
    Macro("stop"),
    *(Macro("new", s) for s in _SHARES),
    *(Macro("top", s) for s in _SHARES),
    Macro("mix"),
)
STOP = 0
KINDS = ("stop", "new", "top", "mix")


def ranked_open(view: PrefixView) -> list[int]:
    """Open non-root ids, best first (valid before invalid, then score, then newest)."""
    ranked: list[NodeView] = sorted(open_nodes(view), key=lambda n: (*score_key(n), n.id), reverse=True)
    return [n.id for n in ranked]


def batch_for(view: PrefixView, action: int) -> list[int]:
    """The legal batch a macro action gives on this view ([] for stop or when nothing fits).

    Never more than W selections, the root at most ``root_slots`` times, only frontier ids.
    """
    macro = MACRO_ACTIONS[int(action)]
    w = view.workers
    if macro.kind == "stop":
        return []
    if macro.kind == "new":
        return [ROOT] * min(macro.width(w), view.root_slots, w)
    if macro.kind == "top":
        return ranked_open(view)[: min(macro.width(w), w)]
    roots = [ROOT] * min(1, view.root_slots, w)
    return roots + ranked_open(view)[: w - len(roots)]


def macro_masks(view: PrefixView) -> np.ndarray:
    """Boolean mask over :data:`MACRO_ACTIONS` for MaskablePPO: an action is allowed unless its
    batch would be empty (stop is always allowed)."""
    can_open = view.root_slots > 0 and view.workers > 0
    has_open = any(i != ROOT for i in view.frontier)
    allowed = {"stop": True, "new": can_open, "top": has_open, "mix": can_open or has_open}
    return np.array([allowed[m.kind] for m in MACRO_ACTIONS], dtype=bool)


# --------------------------------------------------------------------------- N episodes at once


@dataclass(frozen=True)
class MacroTable:
    """:data:`MACRO_ACTIONS` as arrays for one W: each action's kind (index into KINDS) and width."""

    kind: np.ndarray
    width: np.ndarray

    @classmethod
    def for_workers(cls, workers: int) -> MacroTable:
        kind = np.array([KINDS.index(m.kind) for m in MACRO_ACTIONS], dtype=np.int64)
        width = np.array([min(m.width(workers), workers) for m in MACRO_ACTIONS], dtype=np.int64)
        return cls(kind, width)


def macro_batches(replay: VectorReplay, actions: np.ndarray, ranked: np.ndarray, table: MacroTable) -> np.ndarray:
    """:func:`batch_for` of N episodes: (N, W) observed ids, left-aligned, -1 padded.

    ``ranked``: ``replay.ranked_open(W)`` (best open nodes first). Roots come first, then the
    ranked nodes, as in :func:`batch_for`.
    """
    out = np.full((replay.num_envs, replay.workers), NONE, dtype=np.int64)
    _batches_kernel(np.ascontiguousarray(actions, dtype=np.int64), table.kind, table.width, replay.root_slots,
                    replay.open_count, ranked, out)
    return out


@njit(cache=True)
def _batches_kernel(actions: Any, kinds: Any, widths: Any, root_slots: Any, open_count: Any, ranked: Any,
                    out: Any) -> None:  # pragma: no cover
    w = out.shape[1]
    for e in range(out.shape[0]):
        kind, width = kinds[actions[e]], widths[actions[e]]
        roots = tops = 0
        if kind == 1:  # new
            roots = min(width, root_slots[e])
        elif kind == 2:  # top
            tops = min(width, open_count[e])
        elif kind == 3:  # mix
            roots = min(1, root_slots[e])
            tops = min(w - roots, open_count[e])
        for j in range(roots):
            out[e, j] = 0
        for j in range(tops):
            out[e, roots + j] = ranked[e, j]


_KIND_OF_ACTION = np.array([KINDS.index(m.kind) for m in MACRO_ACTIONS])


def batch_masks(replay: VectorReplay) -> np.ndarray:
    """:func:`macro_masks` of N episodes: (N, len(MACRO_ACTIONS)) booleans."""
    by_kind = np.empty((replay.num_envs, len(KINDS)), dtype=bool)
    by_kind[:, 0] = True
    np.greater(replay.root_slots, 0, out=by_kind[:, 1])
    np.greater(replay.open_count, 0, out=by_kind[:, 2])
    np.logical_or(by_kind[:, 1], by_kind[:, 2], out=by_kind[:, 3])
    return by_kind[:, _KIND_OF_ACTION]
