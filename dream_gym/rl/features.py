"""The macro env's observation: a fixed-length, scale-free summary of the prefix view.

Two implementations of one definition, pinned to each other bit for bit by the tests:

* :func:`view_features` reads a :class:`~dream_gym.replay.view.PrefixView` (what a trained policy sees
  in replay and online);
* :func:`batch_features` reads N episodes of a :class:`~dream_gym.replay.vector.VectorReplay`
  at once (what the vector envs train on).

Both read revealed data only (revealed nodes, frontier, root_slots, baseline, W, beta, beta1,
beta2, rounds, attempts, max_rounds): never q, the world's best score or unrevealed nodes.
:class:`FeatureSet` bundles the two with their names; the envs take one (``features=``), so that
another observation can be trained on the same envs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from dream_gym.policies.base import open_nodes
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.vector import VectorReplay
from dream_gym.replay.view import PrefixView

FEATURE_NAMES: tuple[str, ...] = (
    "rounds",  # k / (k + 10)
    "attempts",  # N / (N + 50)
    "root_slots",  # root_slots / W: how many branches the next batch may open
    "open",  # n / (n + W), n = open (frontier) non-root nodes
    "branches",  # b / (b + W), b = branches opened so far
    "stale_share",  # share of the attempts so far made since the best node was revealed
    "improved",  # 1 when some revealed score beats the baseline
    "stale",  # s / (s + 3), s = attempts since the best node was revealed, in units of W
    "recent_gain",  # share of the total gain reached by the last W attempts
    "invalid",  # share of invalid attempts so far
    "invalid_recent",  # share of invalid attempts among the last W
    "best_open",  # (best open score - baseline) / (best - baseline), clipped; -1 when none valid
    "best_is_open",  # 1 when the best node can be continued
    "open_valid",  # share of open nodes with a valid score
    "open_improving",  # share of open nodes that beat their parent
    "best_depth",  # d / (d + 5), d = depth of the best node
    "beta",  # the budget preference in [0, 1]
    "cost",  # beta1 * N: V's attempt cost so far (clipped to 1)
    "parallel",  # beta2 * N / max(1, k): V's parallelism bonus so far (clipped to 1)
    "round_limit",  # k / max_rounds (0 without a round limit)
    "workers",  # W / (W + 4)
    "late_gain",  # share of the total gain reached in the second half of the attempts so far
)
N_FEATURES = len(FEATURE_NAMES)

def _share(count: int, total: int) -> float:
    return count / total if total else 0.0


def view_features(view: PrefixView) -> np.ndarray:
    """The observation of the macro env: a float32 vector of :data:`FEATURE_NAMES`, each in [-1, 1].

    Computed from the prefix view alone, never from q or the world's best score, so the same
    features exist online. Every entry is invariant under ``score -> a * score + b`` (a > 0), as q,
    V and v2 are: scores enter only through comparisons and ratios of gains over the baseline, so
    tasks whose raw scores differ by orders of magnitude, or sit far from zero, look alike (a
    gain relative to |baseline| would make a 0.5 % gain on a task scored near 100 look like no
    progress at all). Decision rounds are not recorded per node, so "recent" means the last W
    revealed attempts and "late" the last half of them (observed ids are in reveal order).
    """
    nodes = view.nodes
    w = max(1, view.workers)
    baseline = view.baseline_score
    attempts = len(nodes) - 1
    opened = open_nodes(view)
    best = view.best()
    best_score = best.score if best.score is not None else baseline
    gain = best_score - baseline
    improved = gain > 0

    def gain_after(cut: int) -> float:
        """Share of the gain reached by the attempts with ids >= cut."""
        before = [n.score for n in nodes[:cut] if n.score is not None]
        best_before = max(before) if before else baseline
        return (best_score - max(best_before, baseline)) / gain if improved else 0.0

    recent = nodes[max(1, len(nodes) - w) :]
    recent_gain = gain_after(max(1, len(nodes) - w))
    late_gain = gain_after(max(1, len(nodes) - (attempts + 1) // 2))

    valid_open = [n for n in opened if n.score is not None]
    if valid_open:
        top = max(n.score for n in valid_open)  # type: ignore[type-var]
        if improved:
            best_open = (top - baseline) / gain  # type: ignore[operator]
        else:
            best_open = 0.0 if top >= baseline else -1.0  # type: ignore[operator]
    else:
        best_open = -1.0
    improving = sum(1 for n in opened if n.delta_parent is not None and n.delta_parent > 0)
    stale = (attempts - best.id) / w  # observed ids are in reveal order; the root has id 0

    features = (
        view.rounds / (view.rounds + 10.0),
        view.attempts / (view.attempts + 50.0),
        view.root_slots / w,
        len(opened) / (len(opened) + w),
        view.n_branches / (view.n_branches + w),
        (attempts - best.id) / attempts if attempts else 0.0,
        1.0 if improved else 0.0,
        stale / (stale + 3.0),
        recent_gain,
        _share(sum(1 for n in nodes[1:] if n.score is None), attempts),
        _share(sum(1 for n in recent if n.score is None), len(recent)),
        best_open,
        1.0 if best.id in view.frontier and best.id != ROOT else 0.0,
        _share(len(valid_open), len(opened)),
        _share(improving, len(opened)),
        best.depth / (best.depth + 5.0),
        view.beta,
        view.beta1 * view.attempts,
        view.beta2 * view.attempts / max(1, view.rounds),
        view.rounds / view.max_rounds if view.max_rounds else 0.0,
        w / (w + 4.0),
        late_gain,
    )
    # clip in float64 first: a huge score ratio would overflow the float32 cast (same result, no warning)
    return np.clip(np.asarray(features, dtype=np.float64), -1.0, 1.0).astype(np.float32)


@dataclass(frozen=True)
class EpisodeParams:
    """What the vector envs know about each episode beyond the replay state: (N,) arrays of
    beta, and the scalars beta1, beta2, max_rounds shared by all."""

    beta: np.ndarray
    beta1: float
    beta2: float
    max_rounds: int | None


def batch_features(replay: VectorReplay, params: EpisodeParams, top_open: np.ndarray,
                   out: np.ndarray | None = None, rows: np.ndarray | None = None) -> np.ndarray:
    """:func:`view_features` of N episodes at once: (N, N_FEATURES) float32.

    ``top_open``: each episode's best-ranked open node (``replay.ranked_open(k)[:, 0]``, -1 when
    none), which the macro actions need as well. With ``out`` and ``rows``, only those rows of
    ``out`` are (re)written. The compiled loop repeats view_features' arithmetic operation for
    operation, so the two agree to the last bit.
    """
    if out is None:
        out = np.empty((replay.num_envs, N_FEATURES), dtype=np.float32)
    _features_kernel(
        replay.rows if rows is None else rows, replay.workers, replay.pool.arrays, replay.pool.baseline,
        replay._episode_arrays(), replay._observed_arrays(), np.ascontiguousarray(top_open, dtype=np.int64),
        params.beta, params.beta1, params.beta2, params.max_rounds or 0, out,
    )
    return out


@njit(cache=True)
def _features_kernel(rows: Any, workers: int, pool: Any, baselines: Any, ep: Any, obs: Any, top_open: Any, beta: Any,
                     beta1: float, beta2: float, max_rounds: int, out: Any) -> None:  # pragma: no cover
    score, valid = pool[4], pool[5]
    (world, root_children, _, observed, rounds, open_count, open_valid, open_improving, _, has_best, best_score,
     best_id, best_depth) = ep
    order, _, revealed, open_pos, _, _, prefix_best, prefix_invalid = obs
    w = max(1, workers)
    values = np.empty(N_FEATURES, dtype=np.float64)
    for e in rows:
        n = observed[e]
        attempts = n - 1
        k = rounds[e]
        baseline = baselines[world[e]]
        best = best_score[e] if has_best[e] else baseline
        gain = best - baseline
        improved = gain > 0
        cut = max(1, n - w)  # ids < cut come before the last W attempts
        before = prefix_best[e, cut - 1]
        best_before = before if before > -np.inf else baseline
        recent_gain = (best - max(best_before, baseline)) / gain if improved else 0.0
        late = prefix_best[e, max(1, n - (attempts + 1) // 2) - 1]  # ids before the last half
        late_before = late if late > -np.inf else baseline
        late_gain = (best - max(late_before, baseline)) / gain if improved else 0.0
        invalid = prefix_invalid[e, n - 1]
        invalid_recent = invalid - prefix_invalid[e, cut - 1]
        recent = n - cut
        opened = open_count[e]
        best_open = -1.0
        top = top_open[e]
        if top >= 0 and valid[order[e, top]]:
            top_score = score[order[e, top]]
            if improved:
                best_open = (top_score - baseline) / gain
            else:
                best_open = 0.0 if top_score >= baseline else -1.0
        stale = (attempts - best_id[e]) / w
        branches = revealed[e, 0]
        root_slots = min(workers, root_children[e] - branches)
        depth = best_depth[e]
        values[0] = k / (k + 10.0)
        values[1] = attempts / (attempts + 50.0)
        values[2] = root_slots / w
        values[3] = opened / (opened + w)
        values[4] = branches / (branches + w)
        values[5] = (attempts - best_id[e]) / attempts if attempts else 0.0
        values[6] = 1.0 if improved else 0.0
        values[7] = stale / (stale + 3.0)
        values[8] = recent_gain
        values[9] = invalid / attempts if attempts else 0.0
        values[10] = invalid_recent / recent if recent else 0.0
        values[11] = best_open
        values[12] = 1.0 if best_id[e] != 0 and open_pos[e, best_id[e]] >= 0 else 0.0
        values[13] = open_valid[e] / opened if opened else 0.0
        values[14] = open_improving[e] / opened if opened else 0.0
        values[15] = depth / (depth + 5.0)
        values[16] = beta[e]
        values[17] = beta1 * attempts
        values[18] = beta2 * attempts / max(1, k)
        values[19] = k / max_rounds if max_rounds else 0.0
        values[20] = w / (w + 4.0)
        values[21] = late_gain
        for i in range(N_FEATURES):  # float32 and clipped, as view_features' np.clip(np.asarray(..., float32))
            out[e, i] = min(max(np.float32(values[i]), np.float32(-1.0)), np.float32(1.0))


@dataclass(frozen=True)
class FeatureSet:
    """An observation for the macro envs: its names, the per-view function (policies, single env)
    and the batched one (vector envs), which must agree."""

    names: tuple[str, ...]
    from_view: Callable[[PrefixView], np.ndarray]
    # (replay, params, top open node per episode, out=(N, size) float32, rows=None|indices) -> out
    from_batch: Callable[..., np.ndarray]

    @property
    def size(self) -> int:
        return len(self.names)


MACRO_FEATURES = FeatureSet(FEATURE_NAMES, view_features, batch_features)
