"""Per-node features of the node-level policy: one row per candidate (the root or an open node).

Computed from the :class:`~dream_gym.replay.view.PrefixView` only (never q, the world's best score or its
size), so a trained node policy runs unchanged online. Scores enter relative to the baseline and
to the best revealed score, divided by the largest |score - baseline| revealed so far, so tasks
whose raw scores differ by orders of magnitude look alike.

A *round plan* is the view's part that does not change while a batch is being built
(:class:`RoundPlan`, computed once per decision round); :meth:`RoundPlan.features` adds the
columns that depend on the selections already made in the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dream_gym.policies.base import score_key
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.view import NodeView, PrefixView

NODE_FEATURE_NAMES: tuple[str, ...] = (
    "is_root",  # 1 for the root (selecting it opens a new branch)
    "valid",  # 1 when the node has a valid score (the root: 1)
    "vs_baseline",  # (score - baseline) / scale, in [-1, 1]; 0 when invalid
    "vs_best",  # (score - best revealed) / scale, in [-1, 0]; -1 when invalid
    "is_best",  # 1 for the best revealed node
    "vs_parent",  # (score - parent's score) / scale in [-1, 1]; 0 when either is invalid
    "depth",  # d / (d + 5)
    "branch_age",  # attempts since the branch opened, in rounds of W: a / (a + 5) (root: branches opened)
    "branch_size",  # revealed nodes of the branch: n / (n + 5) (root: branches opened / (.. + W))
    "branch_stale",  # attempts since the branch last improved, in rounds of W: s / (s + 3)
    "branch_best",  # (branch's best - best revealed) / scale in [-1, 0]; -1 when none valid
    "branch_invalid",  # share of invalid attempts in the branch
    "branch_repairable",  # repairable failures in the branch: r / (r + 2)
    "branch_hard",  # hard failures in the branch: h / (h + 2)
    "fail_repairable",  # the node itself failed, repairable
    "fail_hard",  # the node itself failed, hard
    "fail_streak",  # failures in a row ending at the node (up its path): f / (f + 2)
    "recency",  # attempts revealed since this node, in rounds of W: r / (r + 3)
    "rank",  # rank among the open nodes by score (0 best, 1 worst); root: 0
    "pending_branch",  # selections already in this batch on the node's branch (root: roots) / W
)
N_NODE_FEATURES = len(NODE_FEATURE_NAMES)


def _squash(x: float, k: float) -> float:
    return x / (x + k)


@dataclass
class _Branch:
    head: int
    size: int = 0
    best: float | None = None
    best_id: int = -1
    invalid: int = 0
    repairable: int = 0
    hard: int = 0


class RoundPlan:
    """The candidates of one decision round and their static feature rows.

    ``candidates``: the root first (when it may open a branch), then the open non-root nodes,
    best first (valid before invalid, then score, then newest), capped at ``limit`` (None: all).
    """

    def __init__(self, view: PrefixView, limit: int | None = None):
        self.view = view
        self.view_features: np.ndarray | None = None  # filled by the env (cached per round)
        nodes = view.nodes
        w = max(1, view.workers)
        attempts = len(nodes) - 1
        baseline = view.baseline_score
        best = view.best()
        best_score = best.score if best.score is not None else baseline
        scale = max((abs(n.score - baseline) for n in nodes if n.score is not None), default=0.0) or 1.0
        branches: dict[int, _Branch] = {}
        for node in nodes[1:]:
            if node.branch is None:
                continue
            info = branches.get(node.branch)
            if info is None:
                info = branches[node.branch] = _Branch(head=node.id)
            info.size += 1
            if node.score is None:
                info.invalid += 1
                info.repairable += node.fail_class == "repairable"
                info.hard += node.fail_class == "hard"
            elif info.best is None or node.score > info.best:
                info.best, info.best_id = node.score, node.id
        opened = [nodes[i] for i in view.frontier if i != ROOT]
        opened.sort(key=lambda n: (*score_key(n), n.id), reverse=True)
        self.root_open = ROOT in view.frontier
        if limit is not None:
            opened = opened[: max(0, limit - (1 if self.root_open else 0))]
        self.candidates: list[int] = ([ROOT] if self.root_open else []) + [n.id for n in opened]
        self.branch_of = [None if i == ROOT else nodes[i].branch for i in self.candidates]
        rows = np.zeros((len(self.candidates), N_NODE_FEATURES), dtype=np.float32)
        n_open = len(opened)
        for row, node_id in enumerate(self.candidates):
            if node_id == ROOT:
                b = view.n_branches
                rows[row, 0] = 1.0
                rows[row, 1] = 1.0
                rows[row, 3] = max(-1.0, (baseline - best_score) / scale)
                rows[row, 4] = 1.0 if best.id == ROOT else 0.0
                rows[row, 7] = _squash(b, 5.0)
                rows[row, 8] = b / (b + w)
                continue
            rows[row] = self._node_row(nodes, nodes[node_id], branches, best, best_score, baseline, scale, attempts, w)
            rows[row, 18] = (row - (1 if self.root_open else 0)) / max(1, n_open - 1)
        self.rows = rows
        self.scale = scale

    @staticmethod
    def _node_row(nodes, node: NodeView, branches, best, best_score, baseline, scale, attempts, w) -> np.ndarray:  # type: ignore[no-untyped-def]
        out = np.zeros(N_NODE_FEATURES, dtype=np.float32)
        info = branches.get(node.branch) if node.branch is not None else None
        parent = nodes[node.parent] if node.parent is not None else None
        out[1] = 1.0 if node.score is not None else 0.0
        if node.score is not None:
            out[2] = np.clip((node.score - baseline) / scale, -1.0, 1.0)
            out[3] = max(-1.0, (node.score - best_score) / scale)
            if parent is not None and parent.score is not None:
                out[5] = np.clip((node.score - parent.score) / scale, -1.0, 1.0)
        else:
            out[3] = -1.0
        out[4] = 1.0 if node.id == best.id else 0.0
        out[6] = _squash(node.depth, 5.0)
        if info is not None:
            out[7] = _squash((attempts - info.head + 1) / w, 5.0)
            out[8] = _squash(info.size, 5.0)
            since = info.best_id if info.best_id >= 0 else info.head
            out[9] = _squash((attempts - since) / w, 3.0)
            out[10] = -1.0 if info.best is None else max(-1.0, (info.best - best_score) / scale)
            out[11] = info.invalid / info.size
            out[12] = _squash(info.repairable, 2.0)
            out[13] = _squash(info.hard, 2.0)
        out[14] = 1.0 if node.score is None and node.fail_class == "repairable" else 0.0
        out[15] = 1.0 if node.score is None and node.fail_class == "hard" else 0.0
        streak, cursor = 0, node
        while cursor.score is None and cursor.parent is not None:
            streak += 1
            cursor = nodes[cursor.parent]
        out[16] = _squash(streak, 2.0)
        out[17] = _squash((attempts - node.id) / w, 3.0)
        return out

    def features(self, pending: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(rows of the candidates still selectable, their indices into ``candidates``) given
        the selections already in the batch (candidate indices; the root may repeat)."""
        view = self.view
        roots = sum(1 for i in pending if self.candidates[i] == ROOT)
        taken = {i for i in pending if self.candidates[i] != ROOT}
        available = [
            i for i, node_id in enumerate(self.candidates)
            if (node_id == ROOT and roots < view.root_slots) or (node_id != ROOT and i not in taken)
        ]
        rows = self.rows[available].copy()
        w = max(1, view.workers)
        per_branch: dict[int | None, int] = {}
        for i in pending:
            per_branch[self.branch_of[i]] = per_branch.get(self.branch_of[i], 0) + 1
        for row, i in enumerate(available):
            rows[row, 19] = per_branch.get(self.branch_of[i], 0) / w
        return rows, np.asarray(available, dtype=np.int64)
