"""Many replay episodes at once: the reveal rules of :mod:`dream_gym.replay` for N episodes over a
pool of worlds, held in numpy arrays and stepped in one call (no gymnasium).

:class:`WorldPool` concatenates worlds into flat arrays indexed by *global* node index (world
offset + index): children in creation order (CSR), oriented scores, q, recorded depth, ...
:class:`VectorReplay` holds N episodes; every per-episode array is indexed by *observed id*
(reveal order), so its size is the longest episode's, never the world's, and starting an episode
costs the same on any world. The loops over episodes are compiled with numba (one pass over a
batch per episode, as :class:`~dream_gym.replay.Replay` does it).

The rules are Replay's (the reference; tests/test_vector_replay.py pins the two to each other on
random batches over mixed-size worlds):

* a batch is a row of at most W observed ids, left-aligned, ``-1`` for "no selection";
* selections are applied in order and new observed ids handed out in batch order: a root
  selection reveals the root's next unrevealed child, a non-root selection its node's earliest
  unrevealed recorded child;
* frontier: the root while it has unrevealed children (``root_slots`` = min(W, left)); a
  non-root node under "leaves" while it is a leaf with a recorded child, under "any" while it
  has an unrevealed child.

The open (frontier, non-root) nodes of each episode are kept in a compact list with a rank key
(valid before invalid, then score, then newest), so that ranking them costs the frontier's size.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from dream_gym.score import Normalizer
from dream_gym.world import FRONTIER_RULES, World

ROOT = 0
NONE = -1  # "no selection" in a batch row, "no node" in id arrays
KEY_SHIFT = 1 << 32  # rank key = score rank * KEY_SHIFT + observed id
_FRONTIER_CODES = {None: -1, "any": 0, "leaves": 1}


class WorldPool:
    """Worlds concatenated into flat arrays indexed by *global* node index (offset + index)."""

    def __init__(self, worlds: Sequence[World]):
        if not worlds:
            raise ValueError("a world pool needs at least one world")
        self.worlds = tuple(worlds)
        self.sizes = np.array([w.size for w in worlds], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.max_size = int(self.sizes.max())
        child_offsets = np.concatenate([[0], np.cumsum([len(w.children) for w in worlds])[:-1]]).astype(np.int64)
        self.child_start = np.concatenate(
            [w.children_start[:-1] + c for w, c in zip(worlds, child_offsets, strict=True)]).astype(np.int64)
        self.n_children = np.concatenate([np.diff(w.children_start) for w in worlds]).astype(np.int64)
        self.children = np.concatenate(
            [w.children.astype(np.int64) + o for w, o in zip(worlds, self.offsets, strict=True)] + [np.zeros(1, np.int64)])
        self.score = np.concatenate([w.score for w in worlds])
        self.valid = ~np.isnan(self.score)
        self.q = np.concatenate([_q_of(w) for w in worlds])
        self.depth = np.concatenate([_depth_of(w) for w in worlds])
        parent_score = np.concatenate([np.where(w.parent >= 0, w.score[np.maximum(w.parent, 0)], np.nan)
                                       for w in worlds])
        with np.errstate(invalid="ignore"):
            self.improving = self.valid & ~np.isnan(parent_score) & (self.score > parent_score)
        self.score_rank = np.concatenate([_score_rank(w) for w in worlds])
        self.baseline = np.array([w.baseline_score for w in worlds], dtype=np.float64)
        self.leaves_rule = np.array([w.frontier_rule == "leaves" for w in worlds])
        # what the compiled kernels read, in their order
        self.arrays = (self.offsets, self.child_start, self.n_children, self.children, self.score, self.valid,
                       self.q, self.depth, self.improving, self.score_rank, self.leaves_rule)

    def __len__(self) -> int:
        return len(self.worlds)


def _q_of(world: World) -> np.ndarray:
    """q of every node by the one rule (score.Normalizer); NaN where unscored."""
    normalizer = Normalizer(world.baseline_score, world.best_score)
    return np.array([np.nan if (q := normalizer.q(s)) is None else q for s in world.score_list], dtype=np.float64)


def _depth_of(world: World) -> np.ndarray:
    parent = world.parent.tolist()
    depth = [0] * world.size
    for i in range(1, world.size):  # parents come before children (creation order)
        depth[i] = depth[parent[i]] + 1
    return np.array(depth, dtype=np.int64)


def _score_rank(world: World) -> np.ndarray:
    """Dense rank of the valid scores (1 = lowest, equal scores share a rank); 0 where unscored."""
    rank = np.zeros(world.size, dtype=np.int64)
    valid = ~np.isnan(world.score)
    if valid.any():
        _, inverse = np.unique(world.score[valid], return_inverse=True)
        rank[valid] = inverse + 1
    return rank


class VectorReplay:
    """N replay episodes over a :class:`WorldPool`, stepped together.

    Per episode (arrays of shape (N,)): ``world`` (pool index), ``observed`` (revealed nodes,
    root included: attempts + 1), ``rounds``, ``open_count`` / ``open_valid`` /
    ``open_improving`` (open nodes; with a valid score; that beat their parent), ``best_q``,
    ``has_best`` / ``best_score`` / ``best_id`` / ``best_depth`` (the first-revealed best raw
    score, as :meth:`PrefixView.best`). Per episode and observed id (shape (N, capacity)):
    ``order`` (global node index), ``parent_obs``, ``revealed_children``, ``open_pos`` (slot in
    the open list ``open_ids``/``open_key``, or -1), ``prefix_best`` (best valid score among ids
    0..i, -inf for none) and ``prefix_invalid`` (unscored attempts among ids 1..i).

    Args:
        pool: the worlds.
        num_envs: N.
        workers: W, the same for every episode.
        frontier: "leaves" or "any" for every episode, or None for each world's own rule.
        capacity: initial room for observed ids per episode (grows as episodes get longer).
    """

    order: np.ndarray
    parent_obs: np.ndarray
    revealed_children: np.ndarray
    open_pos: np.ndarray
    open_ids: np.ndarray
    open_key: np.ndarray
    prefix_best: np.ndarray
    prefix_invalid: np.ndarray

    def __init__(self, pool: WorldPool, num_envs: int, workers: int, frontier: str | None = None,
                 capacity: int = 64):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if frontier is not None and frontier not in FRONTIER_RULES:
            raise ValueError(f"frontier must be one of {FRONTIER_RULES} or None, got {frontier!r}")
        self.pool = pool
        self.num_envs = n = int(num_envs)
        self.workers = int(workers)
        self.frontier = frontier
        self.rows = np.arange(n)
        self.world = np.zeros(n, dtype=np.int64)
        self.root_children = np.zeros(n, dtype=np.int64)
        self.leaves_rule = np.ones(n, dtype=np.bool_)
        self.observed = np.ones(n, dtype=np.int64)
        self.rounds = np.zeros(n, dtype=np.int64)
        self.open_count = np.zeros(n, dtype=np.int64)
        self.open_valid = np.zeros(n, dtype=np.int64)
        self.open_improving = np.zeros(n, dtype=np.int64)
        self.best_q = np.zeros(n, dtype=np.float64)
        self.has_best = np.zeros(n, dtype=np.bool_)
        self.best_score = np.zeros(n, dtype=np.float64)
        self.best_id = np.zeros(n, dtype=np.int64)
        self.best_depth = np.zeros(n, dtype=np.int64)
        self._episode_tuple = (self.world, self.root_children, self.leaves_rule, self.observed, self.rounds,
                               self.open_count, self.open_valid, self.open_improving, self.best_q, self.has_best,
                               self.best_score, self.best_id, self.best_depth)
        self.capacity = 0
        self._allocate(max(2, min(int(capacity), pool.max_size + workers)))
        self.reset(np.ones(n, dtype=np.bool_), np.zeros(n, dtype=np.int64))

    # -- storage (the arrays are updated in place; the tuples are what the kernels take) ---------
    def _episode_arrays(self) -> tuple[np.ndarray, ...]:
        return self._episode_tuple

    def _observed_arrays(self) -> tuple[np.ndarray, ...]:
        return self._observed_tuple

    def _allocate(self, capacity: int) -> None:
        n, old = self.num_envs, self.capacity
        fresh = {
            "order": np.zeros((n, capacity), dtype=np.int64),
            "parent_obs": np.full((n, capacity), NONE, dtype=np.int64),
            "revealed_children": np.zeros((n, capacity), dtype=np.int64),
            "open_pos": np.full((n, capacity), NONE, dtype=np.int64),
            "open_ids": np.zeros((n, capacity), dtype=np.int64),
            "open_key": np.zeros((n, capacity), dtype=np.int64),
            "prefix_best": np.full((n, capacity), -np.inf),
            "prefix_invalid": np.zeros((n, capacity), dtype=np.int64),
        }
        for name, array in fresh.items():
            if old:
                array[:, :old] = getattr(self, name)
            setattr(self, name, array)
        self.capacity = capacity
        self._observed_tuple = (self.order, self.parent_obs, self.revealed_children, self.open_pos, self.open_ids,
                                self.open_key, self.prefix_best, self.prefix_invalid)

    def _ensure_room(self) -> None:
        need = int(self.observed.max()) + self.workers
        if need > self.capacity:
            capacity = self.capacity
            while capacity < need:
                capacity *= 2
            self._allocate(capacity)

    # -- derived state ----------------------------------------------------------------
    @property
    def attempts(self) -> np.ndarray:
        return self.observed - 1

    @property
    def root_slots(self) -> np.ndarray:
        return np.minimum(self.root_children - self.revealed_children[:, ROOT], self.workers)

    @property
    def branches(self) -> np.ndarray:
        """Branches opened so far (root children revealed)."""
        return self.revealed_children[:, ROOT].copy()

    def exhausted(self) -> np.ndarray:
        return (self.open_count == 0) & (self.root_slots == 0)

    # -- episodes -----------------------------------------------------------------------
    def reset(self, mask: np.ndarray, worlds: np.ndarray, check: bool = True) -> None:
        """Start new episodes where ``mask`` holds, on the given worlds (pool indices: one per
        True of ``mask``, or an array shaped like ``mask``; ``check=False`` for indices known to
        be in range)."""
        rows = np.flatnonzero(mask)
        if not len(rows):
            return
        w = np.asarray(worlds, dtype=np.int64).reshape(-1)
        if len(w) == len(mask):
            w = w[rows]
        if len(w) != len(rows):
            raise ValueError(f"{len(rows)} episodes to start but {len(w)} worlds given")
        if check and (w.min() < 0 or w.max() >= len(self.pool)):
            raise ValueError(f"world index out of range (pool of {len(self.pool)})")
        _reset_kernel(rows, w, _FRONTIER_CODES[self.frontier], self.pool.arrays, self._episode_arrays(),
                      self._observed_arrays())

    def legal_part(self, batch: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Judge each selection against the ones kept before it in its row (Replay.legal_part).

        ``batch``: (N, W) observed ids, ``-1`` for "no selection". Returns the kept selections
        left-aligned (``-1`` padded) and a boolean (N, W) mask of the dropped ones: ids not
        revealed yet, off the frontier, a non-root id twice, the root more often than
        ``root_slots``. Rows where ``active`` is False keep and drop nothing.
        """
        batch = np.ascontiguousarray(batch, dtype=np.int64)
        kept = np.full(batch.shape, NONE, dtype=np.int64)
        dropped = np.zeros(batch.shape, dtype=np.bool_)
        _legal_kernel(batch, np.ascontiguousarray(active, dtype=np.bool_), self.workers, self._episode_arrays(),
                      self._observed_arrays(), kept, dropped)
        return kept, dropped

    def apply(self, batch: np.ndarray) -> None:
        """Apply one round where a row has selections: ``batch`` (N, W) legal observed ids,
        left-aligned, ``-1`` padded (a row of -1 applies nothing: the caller stops that episode)."""
        self._ensure_room()
        _apply_kernel(np.ascontiguousarray(batch, dtype=np.int64), self.pool.arrays, self._episode_arrays(),
                      self._observed_arrays())

    def ranked_open(self, k: int, out: np.ndarray | None = None, rows: np.ndarray | None = None) -> np.ndarray:
        """The k best open nodes of each episode (valid before invalid, then higher score, then
        newer), as observed ids, ``-1`` padded: (N, k). With ``out`` and ``rows``, only those rows
        of ``out`` are (re)written."""
        if out is None:
            out = np.empty((self.num_envs, k), dtype=np.int64)
        _ranked_kernel(self.rows if rows is None else rows, self.open_count, self.open_key, out)
        return out


# --------------------------------------------------------------------------- compiled loops
# The argument tuples are WorldPool.arrays, VectorReplay._episode_arrays() and _observed_arrays().


@njit(cache=True)
def _reset_kernel(rows: Any, worlds: Any, frontier: int, pool: Any, ep: Any, obs: Any) -> None:  # pragma: no cover
    """Episodes ``rows`` start on pool worlds ``worlds`` (frontier: -1 each world's rule, 0 "any",
    1 "leaves"). The kernels unpack their argument tuples once: numba counts references to every
    array it takes out of one."""
    offsets, _, n_children, _, score, valid, q, _, _, _, leaves_rule = pool
    (world, root_children, leaves, observed, rounds, open_count, open_valid, open_improving, best_q, has_best,
     best_score, best_id, best_depth) = ep
    order, parent_obs, revealed, open_pos, _, _, prefix_best, prefix_invalid = obs
    for i in range(len(rows)):
        e, w = rows[i], worlds[i]
        root = offsets[w]
        world[e] = w
        root_children[e] = n_children[root]
        leaves[e] = leaves_rule[w] if frontier < 0 else frontier == 1
        observed[e] = 1
        rounds[e] = 0
        open_count[e] = 0
        open_valid[e] = 0
        open_improving[e] = 0
        has_best[e] = valid[root]
        best_q[e] = q[root] if valid[root] else 0.0  # an unscored root: quality starts at 0
        best_score[e] = score[root] if valid[root] else 0.0
        best_id[e] = 0
        best_depth[e] = 0
        order[e, 0] = root
        parent_obs[e, 0] = -1
        revealed[e, 0] = 0
        open_pos[e, 0] = -1
        prefix_best[e, 0] = score[root] if valid[root] else -np.inf
        prefix_invalid[e, 0] = 0


@njit(cache=True)
def _legal_kernel(batch: Any, active: Any, workers: int, ep: Any, obs: Any, kept: Any, dropped: Any,
                  pad: int = -1) -> None:  # pragma: no cover
    """Judge each active row of the batch (-1 and ``pad``: no selection) against the selections
    kept before each one: the kept ones left-aligned in ``kept``, the dropped flagged."""
    root_children, observed = ep[1], ep[3]
    revealed, open_pos = obs[2], obs[3]
    for e in range(batch.shape[0]):
        if not active[e]:
            continue
        root_slots = min(workers, root_children[e] - revealed[e, 0])
        roots = 0
        count = 0
        for j in range(batch.shape[1]):
            s = batch[e, j]
            if s == -1 or s == pad:
                continue
            ok = False
            if 0 <= s < observed[e]:
                if s == 0:
                    if roots < root_slots:
                        roots += 1
                        ok = True
                elif open_pos[e, s] >= 0:
                    ok = True
                    for i in range(count):
                        if kept[e, i] == s:
                            ok = False
            if ok:
                kept[e, count] = s
                count += 1
            else:
                dropped[e, j] = True


@njit(cache=True)
def _apply_kernel(batch: Any, pool: Any, ep: Any, obs: Any) -> None:  # pragma: no cover
    _, child_start, n_children, children, score, valid, q, depth, improving, score_rank, _ = pool
    (_, _, leaves, observed, rounds, open_count, open_valid, open_improving, best_q, has_best, best_score,
     best_id, best_depth) = ep
    order, parent_obs, revealed, open_pos, open_ids, open_key, prefix_best, prefix_invalid = obs
    for e in range(batch.shape[0]):
        k = 0
        for j in range(batch.shape[1]):
            s = batch[e, j]
            if s < 0:
                break
            new = observed[e] + k
            parent = order[e, s]
            rank = revealed[e, s]
            child = children[child_start[parent] + rank]
            revealed[e, s] = rank + 1
            if s != 0 and (leaves[e] or rank + 1 == n_children[parent]):
                # the selection leaves the frontier: swap-remove it from the open list
                pos, last = open_pos[e, s], open_count[e] - 1
                moved = open_ids[e, last]
                open_ids[e, pos] = moved
                open_key[e, pos] = open_key[e, last]
                open_pos[e, moved] = pos
                open_pos[e, s] = -1
                open_count[e] = last
                open_valid[e] -= valid[parent]
                open_improving[e] -= improving[parent]
            order[e, new] = child
            parent_obs[e, new] = s
            revealed[e, new] = 0
            open_pos[e, new] = -1
            if valid[child]:
                if q[child] > best_q[e]:
                    best_q[e] = q[child]
                if not has_best[e] or score[child] > best_score[e]:  # the first revealed best
                    has_best[e] = True
                    best_score[e] = score[child]
                    best_id[e] = new
                    best_depth[e] = depth[child]
                prefix_best[e, new] = max(prefix_best[e, new - 1], score[child])
                prefix_invalid[e, new] = prefix_invalid[e, new - 1]
            else:
                prefix_best[e, new] = prefix_best[e, new - 1]
                prefix_invalid[e, new] = prefix_invalid[e, new - 1] + 1
            if n_children[child] > 0:
                slot = open_count[e]
                open_ids[e, slot] = new
                open_key[e, slot] = score_rank[child] * KEY_SHIFT + new
                open_pos[e, new] = slot
                open_count[e] = slot + 1
                open_valid[e] += valid[child]
                open_improving[e] += improving[child]
            k += 1
        if k:
            observed[e] += k
            rounds[e] += 1


@njit(cache=True)
def _vector_env_kernel(actions: Any, pad: int, act: Any, start: Any, world_of: Any, frontier: int, workers: int,
                       round_limit: int, max_nodes: int, beta1: float, beta2: float, pool: Any, ep: Any, obs: Any,
                       kept: Any, nodes: Any, scores: Any, glob: Any, written: Any, set_epoch: Any, epoch: Any,
                       value: Any, reward: Any, terminated: Any, truncated: Any, dropped: Any, illegal_stop: Any,
                       full: Any) -> None:  # pragma: no cover
    """One step of ReplayVectorEnv: episodes where ``act`` judge and apply their row of
    ``actions`` (values ``pad`` and -1: no selection), episodes where ``start`` begin again on
    their world; then every episode's rows in the buffer set (nodes, scores, glob) are brought up
    to date: the rows revealed since the set was written (``written``, per episode; the whole
    used part when the episode started again since, ``set_epoch``), the selections' frontier
    flags, the root, the globals."""
    n, width = actions.shape
    observed, rounds, best_q = ep[3], ep[4], ep[8]
    root_children, open_count = ep[1], ep[5]
    order, parent_obs, revealed, open_pos = obs[0], obs[1], obs[2], obs[3]
    score, valid, depth = pool[4], pool[5], pool[7]
    rows = np.nonzero(start)[0]
    if len(rows):
        _reset_kernel(rows, world_of[rows], frontier, pool, ep, obs)
    kept[:] = -1
    flags = np.zeros((n, width), dtype=np.bool_)
    _legal_kernel(actions, act, workers, ep, obs, kept, flags, pad)
    _apply_kernel(kept, pool, ep, obs)
    for e in range(n):
        reward[e] = 0.0
        terminated[e] = False
        truncated[e] = False
        full[e] = False
        illegal_stop[e] = False
        dropped[e] = 0
        root_slots = min(workers, root_children[e] - revealed[e, 0])
        if start[e]:
            epoch[e] += 1
            value[e] = 0.0
        elif act[e]:
            count = 0
            for j in range(width):
                if flags[e, j]:
                    count += 1
            dropped[e] = count
            if kept[e, 0] < 0:  # no legal selection: the empty batch stops
                terminated[e] = True
                illegal_stop[e] = count > 0
            elif open_count[e] == 0 and root_slots == 0:
                terminated[e] = True
            elif round_limit >= 0 and rounds[e] >= round_limit:
                truncated[e] = True
            elif observed[e] + min(workers, root_slots + open_count[e]) > max_nodes:
                full[e] = True
            attempts = observed[e] - 1
            v = best_q[e] - beta1 * attempts + beta2 * attempts / max(1, rounds[e])
            reward[e] = v - value[e]
            value[e] = v
        # the buffer set (written here without helper functions: numba counts references to
        # the arrays a call takes, which costs more than the row itself)
        m = observed[e]
        again = set_epoch[e] != epoch[e]  # the episode started again since the set was written
        first = 0 if again else written[e]
        for i in range(first, m):
            node = order[e, i]
            nodes[e, i, 0] = 1
            nodes[e, i, 1] = parent_obs[e, i]
            nodes[e, i, 2] = depth[node]
            nodes[e, i, 3] = 1 if valid[node] else 0
            nodes[e, i, 4] = 1 if open_pos[e, i] >= 0 else 0
            scores[e, i] = score[node] if valid[node] else 0.0
            p = parent_obs[e, i]
            if p > 0:  # a selection: its frontier flag may have changed
                nodes[e, p, 4] = 1 if open_pos[e, p] >= 0 else 0
        nodes[e, 0, 4] = 1 if root_slots > 0 else 0  # the root: while it may open a branch
        if again:
            for i in range(m, written[e]):  # the rows of the set's older episode
                nodes[e, i, 0] = 0
                nodes[e, i, 1] = -1
                nodes[e, i, 2] = 0
                nodes[e, i, 3] = 0
                nodes[e, i, 4] = 0
                scores[e, i] = 0.0
            set_epoch[e] = epoch[e]
        written[e] = m
        glob[e, 0] = root_slots
        glob[e, 2] = rounds[e]
        glob[e, 3] = m - 1


@njit(cache=True)
def _ranked_kernel(rows: Any, open_count: Any, open_key: Any, out: Any) -> None:  # pragma: no cover
    k = out.shape[1]
    top = np.empty(k, dtype=np.int64)
    for e in rows:
        filled = 0
        for i in range(open_count[e]):
            key = open_key[e, i]
            if filled < k:
                filled += 1
            elif key <= top[k - 1]:
                continue
            j = filled - 1  # insert into the sorted (descending) top list
            while j > 0 and top[j - 1] < key:
                top[j] = top[j - 1]
                j -= 1
            top[j] = key
        for i in range(k):
            out[e, i] = top[i] & (KEY_SHIFT - 1) if i < filled else -1


__all__ = ["KEY_SHIFT", "NONE", "ROOT", "VectorReplay", "WorldPool"]


# --------------------------------------------------------------------------- one episode
# The engine of dream_gym.env.ReplayEnv: one episode in two flat arrays, stepped by one compiled
# call that judges the batch, applies it and writes the observation rows it changed into an
# observation buffer set. Few array arguments keep the call's own cost (numba checks the type of
# every argument) well below a microsecond. The rules are Replay's, pinned to it by the tests.
#
# S (int64): a header of scalars, then sections (offsets in the header): the batch, the output
# (kept selections, their new nodes' world indices, the frontier), per buffer set its (rows
# written, episode), per observed id (world index, parent id, revealed children, open flag), the
# open non-root ids in ascending order, the world's arrays (children CSR, depth, validity), and
# F, read as float64: value, reward, best q, beta1, beta2, baseline, the world's scores and q.
# A buffer set is one block of bytes holding the observation's nodes (int32), score and globals
# (float64) and the action mask (int8) at the offsets set_layout gives.
H_STATUS, H_N, H_K, H_FIRST, H_OBSERVED, H_ROUNDS, H_ROOT_SLOTS, H_FC = range(8)
H_DST, H_EPOCH, H_W, H_M, H_LEAVES, H_ROUND_LIMIT, H_ROWS_SAFE = range(8, 15)
H_OUTLEN, H_MODE, H_ROOT_CHILDREN, H_O_F, H_NF = range(16, 21)
H_B_SCORES, H_B_GLOBALS, H_B_MASK = range(35, 38)  # byte offsets in a buffer set (its nodes at 0)
H_O_BATCH, H_O_OUT, H_O_SETS, H_O_ORDER, H_O_PARENT, H_O_REVEALED, H_O_OPEN, H_O_FRONT = range(22, 30)
H_O_CSTART, H_O_NCH, H_O_CHILDREN, H_O_DEPTH, H_O_VALID = range(30, 35)
HEADER_SIZE = 40
F_VALUE, F_REWARD, F_BEST_Q, F_BETA1, F_BETA2, F_BASELINE = range(6)
F_HEADER_SIZE = 8
F_O_SCORE = F_HEADER_SIZE
STATUS_APPLIED, STATUS_ILLEGAL, STATUS_EMPTY = 0, 1, 2
MODE_STEP, MODE_RESET = 0, 1
MAX_SETS = 4  # observation buffer sets an env keeps
# The output starts with these, then the kept selections, their nodes, the frontier (root first).
OUT_K, OUT_FIRST, OUT_ROOT_SLOTS, OUT_ROUNDS, OUT_END = range(5)  # OUT_END: 0 running, 1 terminated,
OUT_HEADER = 5                                                    # 2 truncated, 3 capacity full


def set_layout(workers: int, max_nodes: int) -> tuple[tuple[tuple[Any, tuple[int, ...], int], ...], int]:
    """The arrays of a buffer set, ((dtype, shape, byte offset), ...) for nodes, score, globals
    and action mask, and the set's size in bytes (each array starts 8-byte aligned)."""
    kinds = ((np.int32, (max_nodes, 5)), (np.float64, (max_nodes,)), (np.float64, (4,)),
             (np.int8, (workers, max_nodes + 1)))
    layout, at = [], 0
    for dtype, shape in kinds:
        layout.append((dtype, shape, at))
        at += -(-int(np.prod(shape)) * np.dtype(dtype).itemsize // 8) * 8
    return tuple(layout), at


class EpisodeArrays:
    """The packed state of one episode on ``world`` with W = ``workers``, capacity ``max_nodes``
    observed ids (see the section comment above): ``S``, and ``F``, its float64 part."""

    def __init__(self, world: World, workers: int, max_nodes: int, leaves: bool, round_limit: int | None,
                 beta1: float, beta2: float):
        pool = _one_world_pool(world)
        size = int(pool.sizes[0])
        n_children = pool.n_children
        sections = [("batch", workers), ("out", OUT_HEADER + 2 * workers + max_nodes + 1), ("sets", 2 * MAX_SETS),
                    ("order", max_nodes), ("parent", max_nodes), ("revealed", max_nodes), ("open", max_nodes),
                    ("front", max_nodes), ("cstart", size), ("nch", size), ("children", len(pool.children)),
                    ("depth", size), ("valid", size), ("floats", F_HEADER_SIZE + 2 * size)]
        offsets, at = {}, HEADER_SIZE
        for name, length in sections:
            offsets[name] = at
            at += length
        S = np.zeros(at, dtype=np.int64)
        for key, name in ((H_O_BATCH, "batch"), (H_O_OUT, "out"), (H_O_SETS, "sets"), (H_O_ORDER, "order"),
                          (H_O_PARENT, "parent"), (H_O_REVEALED, "revealed"), (H_O_OPEN, "open"),
                          (H_O_FRONT, "front"), (H_O_CSTART, "cstart"), (H_O_NCH, "nch"),
                          (H_O_CHILDREN, "children"), (H_O_DEPTH, "depth"), (H_O_VALID, "valid"), (H_O_F, "floats")):
            S[key] = offsets[name]
        S[H_NF] = F_HEADER_SIZE + 2 * size
        S[H_W], S[H_M], S[H_LEAVES] = workers, max_nodes, int(leaves)
        S[H_ROUND_LIMIT] = -1 if round_limit is None else round_limit
        S[H_ROWS_SAFE] = max_nodes - workers
        S[H_ROOT_CHILDREN] = n_children[0]
        layout, _ = set_layout(workers, max_nodes)
        S[H_B_SCORES], S[H_B_GLOBALS], S[H_B_MASK] = (offset for _, _, offset in layout[1:])
        S[offsets["sets"] + 1: offsets["sets"] + 2 * MAX_SETS: 2] = -1  # no set holds an episode yet
        S[offsets["cstart"]: offsets["cstart"] + size] = pool.child_start
        S[offsets["nch"]: offsets["nch"] + size] = n_children
        S[offsets["children"]: offsets["children"] + len(pool.children)] = pool.children
        S[offsets["depth"]: offsets["depth"] + size] = pool.depth
        S[offsets["valid"]: offsets["valid"] + size] = pool.valid
        F = S[offsets["floats"]:].view(np.float64)
        F[F_BETA1], F[F_BETA2], F[F_BASELINE] = beta1, beta2, world.baseline_score
        F[F_O_SCORE: F_O_SCORE + size] = pool.score
        F[F_O_SCORE + size:] = pool.q
        self.S, self.F, self.offsets = S, F, offsets


class _OneWorld(NamedTuple):
    """A world's arrays as a one-world :class:`WorldPool` has them (no reference to the world)."""

    sizes: np.ndarray
    child_start: np.ndarray
    n_children: np.ndarray
    children: np.ndarray
    depth: np.ndarray
    valid: np.ndarray
    score: np.ndarray
    q: np.ndarray


_ONE_WORLD: weakref.WeakKeyDictionary[World, _OneWorld] = weakref.WeakKeyDictionary()


def _one_world_pool(world: World) -> _OneWorld:
    """The arrays of one world (computed once per world and process: O(world size))."""
    arrays = _ONE_WORLD.get(world)
    if arrays is None:
        pool = WorldPool([world])
        arrays = _ONE_WORLD[world] = _OneWorld(pool.sizes, pool.child_start, pool.n_children, pool.children,
                                               pool.depth, pool.valid, pool.score, pool.q)
    return arrays


@njit(cache=True, inline="always")
def _write_flag(S: Any, i: int, nodes: Any, mask: Any) -> None:  # pragma: no cover
    """The frontier flag of revealed non-root row i, in the observation and the mask."""
    flag = S[S[H_O_OPEN] + i]
    nodes[i, 4] = flag
    for j in range(mask.shape[0]):
        mask[j, i] = flag


@njit(cache=True, inline="always")
def _write_row(S: Any, F: Any, i: int, nodes: Any, scores: Any, mask: Any, root_slots: int) -> None:  # pragma: no cover
    """Row i of the observation and column i of the mask, from the state."""
    w = S[S[H_O_ORDER] + i]
    valid = S[S[H_O_VALID] + w]
    nodes[i, 0] = 1
    nodes[i, 1] = S[S[H_O_PARENT] + i]
    nodes[i, 2] = S[S[H_O_DEPTH] + w]
    nodes[i, 3] = valid
    scores[i] = F[F_O_SCORE + w] if valid else 0.0
    if i == 0:
        nodes[0, 4] = 1 if root_slots > 0 else 0
        for j in range(mask.shape[0]):
            mask[j, 0] = 1 if j < root_slots else 0
    else:
        flag = S[S[H_O_OPEN] + i]
        nodes[i, 4] = flag
        for j in range(mask.shape[0]):
            mask[j, i] = flag


@njit(cache=True)
def _episode_kernel(S: Any, buffer: Any) -> None:  # pragma: no cover
    """Reset (H_MODE = MODE_RESET) or step the episode with the batch S[batch : batch + H_N]
    (values H_M: no selection), then bring buffer set H_DST (the bytes ``buffer``) up to date.
    A batch with an illegal selection changes nothing (H_STATUS = STATUS_ILLEGAL): the caller
    judges it and steps again with its legal part."""
    W, M = S[H_W], S[H_M]
    F = S[S[H_O_F]: S[H_O_F] + S[H_NF]].view(np.float64)
    nodes = buffer[: 20 * M].view(np.int32).reshape(M, 5)
    scores = buffer[S[H_B_SCORES]: S[H_B_SCORES] + 8 * M].view(np.float64)
    glob = buffer[S[H_B_GLOBALS]: S[H_B_GLOBALS] + 32].view(np.float64)
    mask = buffer[S[H_B_MASK]: S[H_B_MASK] + W * (M + 1)].view(np.int8).reshape(W, M + 1)
    o_order, o_parent, o_rev, o_open, o_front = S[H_O_ORDER], S[H_O_PARENT], S[H_O_REVEALED], S[H_O_OPEN], S[H_O_FRONT]
    o_out = S[H_O_OUT]
    observed, rounds, root_slots, fc = S[H_OBSERVED], S[H_ROUNDS], S[H_ROOT_SLOTS], S[H_FC]
    k = 0
    if S[H_MODE] == MODE_RESET:
        S[H_EPOCH] += 1
        observed, rounds, fc = 1, 0, 0
        S[o_order] = 0
        S[o_parent] = -1
        S[o_rev] = 0
        S[o_open] = 0
        root_slots = min(W, S[H_ROOT_CHILDREN])
        valid_root = S[S[H_O_VALID]]
        size = S[H_O_NCH] - S[H_O_CSTART]
        F[F_BEST_Q] = F[F_O_SCORE + size] if valid_root else 0.0
        F[F_VALUE] = 0.0
        F[F_REWARD] = 0.0
        S[H_STATUS] = STATUS_APPLIED
        end = 0
    else:
        n = S[H_N]
        o_batch = S[H_O_BATCH]
        kept = o_out + OUT_HEADER
        roots = 0
        for j in range(n):
            s = S[o_batch + j]
            if s == M:
                continue
            ok = k < W and 0 <= s < observed
            if ok:
                if s == 0:
                    ok = roots < root_slots
                    roots += 1
                else:
                    ok = S[o_open + s] == 1
                    for i in range(k):
                        if S[kept + i] == s:
                            ok = False
            if not ok:
                S[H_STATUS] = STATUS_ILLEGAL
                return
            S[kept + k] = s
            k += 1
        if k == 0:
            S[H_STATUS] = STATUS_EMPTY
            end = 1
        else:
            S[H_STATUS] = STATUS_APPLIED
            o_cstart, o_nch, o_children, o_valid = S[H_O_CSTART], S[H_O_NCH], S[H_O_CHILDREN], S[H_O_VALID]
            size = o_nch - o_cstart
            o_q = F_O_SCORE + size
            leaves = S[H_LEAVES] == 1
            best_q = F[F_BEST_Q]
            for i in range(k):
                s = S[kept + i]
                pw = S[o_order + s]
                rank = S[o_rev + s] + 1
                S[o_rev + s] = rank
                child = S[o_children + S[o_cstart + pw] + rank - 1]
                new = observed
                observed += 1
                S[o_order + new] = child
                S[o_parent + new] = s
                S[o_rev + new] = 0
                S[kept + k + i] = child
                if s == 0:
                    root_slots = min(W, S[o_nch] - rank)
                elif leaves or rank == S[o_nch + pw]:
                    S[o_open + s] = 0
                    lo, hi = 0, fc  # s in the ascending open list: binary search, then close the gap
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if S[o_front + mid] < s:
                            lo = mid + 1
                        else:
                            hi = mid
                    for p in range(lo, fc - 1):
                        S[o_front + p] = S[o_front + p + 1]
                    fc -= 1
                if S[o_nch + child] > 0:
                    S[o_open + new] = 1
                    S[o_front + fc] = new
                    fc += 1
                else:
                    S[o_open + new] = 0
                if S[o_valid + child] == 1 and F[o_q + child] > best_q:
                    best_q = F[o_q + child]
            F[F_BEST_Q] = best_q
            rounds += 1
            end = 0
            if fc == 0 and root_slots == 0:
                end = 1
            elif S[H_ROUND_LIMIT] >= 0 and rounds >= S[H_ROUND_LIMIT]:
                end = 2
            elif observed > S[H_ROWS_SAFE] and observed + min(W, root_slots + fc) > M:
                end = 3
        attempts = observed - 1
        # score.replay_score: the same operations in the same order (the same bits)
        value = F[F_BEST_Q] - F[F_BETA1] * attempts + F[F_BETA2] * attempts / max(1, rounds)
        F[F_REWARD] = value - F[F_VALUE]
        F[F_VALUE] = value
    first = observed - k
    S[H_K], S[H_FIRST], S[H_OBSERVED], S[H_ROUNDS], S[H_ROOT_SLOTS], S[H_FC] = k, first, observed, rounds, root_slots, fc
    # the output: header, kept selections (written above), their nodes, the frontier
    S[o_out + OUT_K] = k
    S[o_out + OUT_FIRST] = first
    S[o_out + OUT_ROOT_SLOTS] = root_slots
    S[o_out + OUT_ROUNDS] = rounds
    S[o_out + OUT_END] = end
    at = o_out + OUT_HEADER + 2 * k
    if root_slots > 0:
        S[at] = 0
        at += 1
    for p in range(fc):
        S[at + p] = S[o_front + p]
    S[H_OUTLEN] = at + fc - o_out
    # the buffer set: rows revealed since it was written, their parents, the root, the globals
    meta = S[H_O_SETS] + 2 * S[H_DST]
    written, epoch = S[meta], S[meta + 1]
    if epoch != S[H_EPOCH]:
        for i in range(max(written, observed)):
            if i < observed:
                _write_row(S, F, i, nodes, scores, mask, root_slots)
            else:
                nodes[i, 0] = 0
                nodes[i, 1] = -1
                nodes[i, 2] = 0
                nodes[i, 3] = 0
                nodes[i, 4] = 0
                scores[i] = 0.0
                for j in range(mask.shape[0]):
                    mask[j, i] = 0
    else:
        for i in range(written, observed):
            _write_row(S, F, i, nodes, scores, mask, root_slots)
            p = S[o_parent + i]
            if p > 0:  # a selection: its frontier flag may have changed
                _write_flag(S, p, nodes, mask)
        _write_row(S, F, 0, nodes, scores, mask, root_slots)
    glob[0] = root_slots
    glob[1] = F[F_BASELINE]
    glob[2] = rounds
    glob[3] = observed - 1
    S[meta] = observed
    S[meta + 1] = S[H_EPOCH]


def episode_kernel() -> Any:
    """The compiled :func:`_episode_kernel` for its one signature (int64 state, uint8 buffer set),
    called without numba's dispatch (which would check the types of the arguments every call)."""
    from numba import types

    return _episode_kernel.compile((types.Array(types.int64, 1, "C"), types.Array(types.uint8, 1, "C")))
