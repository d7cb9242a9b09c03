"""Many replay episodes at once: the reveal rules of :mod:`dream_gym.replay.mechanics` for N episodes over a
pool of worlds, held in numpy arrays and stepped in one call (no gymnasium).

:class:`WorldPool` concatenates worlds into flat arrays indexed by *global* node index (world
offset + index): children in creation order (CSR), oriented scores, q, recorded depth, ...
:class:`VectorReplay` holds N episodes; every per-episode array is indexed by *observed id*
(reveal order), so its size is the longest episode's, never the world's, and starting an episode
costs the same on any world. The loops over episodes are compiled with numba (one pass over a
batch per episode, as :class:`~dream_gym.replay.mechanics.Replay` does it).

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

import mmap
from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import njit

from dream_gym.replay.score import Normalizer
from dream_gym.world.tree import FRONTIER_RULES, World

ROOT = 0
NONE = -1  # "no selection" in a batch row, "no node" in id arrays
KEY_SHIFT = 1 << 32  # rank key = score rank * KEY_SHIFT + observed id
# The fields of an observed id's record (int32, side by side: one reveal reads and writes one
# cache line of them): global node index, parent id, revealed children, open slot (-1: closed).
ORDER, PARENT, REVEALED, OPEN = range(4)
RECORD_FIELDS = 4
MAX_POOL_NODES = 2**31 - 1  # global node indices are int32 in the records
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
        if int(self.sizes.sum()) > MAX_POOL_NODES:
            raise ValueError(f"a world pool holds at most {MAX_POOL_NODES} nodes, got {int(self.sizes.sum())}")
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


def _zeros_on_huge_pages(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A zeroed array in private anonymous memory the kernel may back with huge pages: each
    episode's records lie a page or more from its neighbours', so with 4 KiB pages a step that
    touches every episode misses the TLB at nearly every one."""
    count = int(np.prod(shape))
    memory = mmap.mmap(-1, max(count * np.dtype(dtype).itemsize, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        memory.madvise(mmap.MADV_HUGEPAGE)
    return np.frombuffer(memory, dtype=dtype, count=count).reshape(shape)


class VectorReplay:
    """N replay episodes over a :class:`WorldPool`, stepped together.

    Per episode (arrays of shape (N,)): ``world`` (pool index), ``observed`` (revealed nodes,
    root included: attempts + 1), ``root_children`` / ``root_revealed`` (the root's recorded
    and revealed children), ``rounds``, ``open_count`` / ``open_valid`` /
    ``open_improving`` (open nodes; with a valid score; that beat their parent), ``best_q``,
    ``has_best`` / ``best_score`` / ``best_id`` / ``best_depth`` (the first-revealed best raw
    score, as :meth:`PrefixView.best`). Per episode and observed id (shape (N, capacity)):
    ``order`` (global node index), ``parent_obs``, ``revealed_children``, ``open_pos`` (slot in
    the open list ``open_ids``/``open_key``, or -1), ``prefix_best`` (best valid score among ids
    0..i, -inf for none) and ``prefix_invalid`` (unscored attempts among ids 1..i). The first
    four are int32 views of one array, ``records`` (N, capacity, RECORD_FIELDS): an id's fields
    share a cache line. Ids at or past ``observed`` hold nothing (an earlier episode's values).

    Args:
        pool: the worlds.
        num_envs: N.
        workers: W, the same for every episode.
        frontier: "leaves" or "any" for every episode, or None for each world's own rule.
        capacity: initial room for observed ids per episode (grows as episodes get longer).
        ranked: False for the node-level vector env's engine (dream_gym.replay.vector_engine), which
            keeps only the reveal state (records, observed, rounds, open_count, best_q): no open
            list, rank keys or prefixes (``open_ids``, ``open_key``, ``prefix_*`` hold no ids),
            ``open_pos`` is 0 for an open id, and the open-list and best-score counts stay as
            reset left them; :meth:`apply` and :meth:`ranked_open` need ``ranked=True``.
    """

    records: np.ndarray
    order: np.ndarray
    parent_obs: np.ndarray
    revealed_children: np.ndarray
    open_pos: np.ndarray
    open_ids: np.ndarray
    open_key: np.ndarray
    prefix_best: np.ndarray
    prefix_invalid: np.ndarray

    def __init__(self, pool: WorldPool, num_envs: int, workers: int, frontier: str | None = None,
                 capacity: int = 64, ranked: bool = True):
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
        self.ranked = bool(ranked)
        self.rows = np.arange(n)
        self.world = np.zeros(n, dtype=np.int64)
        self.root_children = np.zeros(n, dtype=np.int64)
        self.root_revealed = np.zeros(n, dtype=np.int64)  # revealed_children[:, ROOT], read without the records
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
        records = _zeros_on_huge_pages((n, capacity, RECORD_FIELDS), np.int32)
        records[:, :, PARENT] = NONE
        records[:, :, OPEN] = NONE
        if old:
            records[:, :old] = self.records
        self.records = records
        self.order, self.parent_obs = records[:, :, ORDER], records[:, :, PARENT]
        self.revealed_children, self.open_pos = records[:, :, REVEALED], records[:, :, OPEN]
        ranked = capacity if self.ranked else 0
        fresh = {
            "open_ids": np.zeros((n, ranked), dtype=np.int64),
            "open_key": np.zeros((n, ranked), dtype=np.int64),
            "prefix_best": np.full((n, ranked), -np.inf),
            "prefix_invalid": np.zeros((n, ranked), dtype=np.int64),
        }
        for name, array in fresh.items():
            if old and ranked:
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
        return np.minimum(self.root_children - self.root_revealed, self.workers)

    @property
    def branches(self) -> np.ndarray:
        """Branches opened so far (root children revealed)."""
        return self.root_revealed.copy()

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
                      self._observed_arrays(), self.root_revealed)

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
        self._need_ranked("apply")
        self._ensure_room()
        _apply_kernel(np.ascontiguousarray(batch, dtype=np.int64), self.pool.arrays, self._episode_arrays(),
                      self._observed_arrays(), self.root_revealed)

    def _need_ranked(self, what: str) -> None:
        if not self.ranked:
            raise RuntimeError(f"{what} needs the open list: VectorReplay(..., ranked=True)")

    def ranked_open(self, k: int, out: np.ndarray | None = None, rows: np.ndarray | None = None) -> np.ndarray:
        """The k best open nodes of each episode (valid before invalid, then higher score, then
        newer), as observed ids, ``-1`` padded: (N, k). With ``out`` and ``rows``, only those rows
        of ``out`` are (re)written."""
        self._need_ranked("ranked_open")
        if out is None:
            out = np.empty((self.num_envs, k), dtype=np.int64)
        _ranked_kernel(self.rows if rows is None else rows, self.open_count, self.open_key, out)
        return out


# --------------------------------------------------------------------------- compiled loops
# The argument tuples are WorldPool.arrays, VectorReplay._episode_arrays() and _observed_arrays().


@njit(cache=True)
def _reset_kernel(rows: Any, worlds: Any, frontier: int, pool: Any, ep: Any, obs: Any,
                  root_revealed: Any) -> None:  # pragma: no cover
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
        root_revealed[e] = 0
        open_pos[e, 0] = -1
        if prefix_best.shape[1]:  # a ranked replay
            prefix_best[e, 0] = score[root] if valid[root] else -np.inf
            prefix_invalid[e, 0] = 0


@njit(cache=True, inline="always", _nrt=False)
def judge_row(batch: Any, e: int, pad: int, root_slots: int, observed: int, open_pos: Any, kept: Any, kept_row: int,
              dropped: Any) -> tuple[int, int]:  # pragma: no cover
    """Replay.legal_part for row e of ``batch`` (values -1 and ``pad``: no selection), each
    selection judged against the ones kept before it: the kept ones left-aligned in
    ``kept[kept_row]``, the dropped flagged in ``dropped[e]`` (when ``dropped`` has rows).
    Returns (kept, dropped) counts. ``open_pos[e, s] >= 0``: id s is on the frontier."""
    roots = 0
    count = 0
    drops = 0
    for j in range(batch.shape[1]):
        s = batch[e, j]
        if s == -1 or s == pad:
            continue
        ok = False
        if 0 <= s < observed:
            if s == 0:
                if roots < root_slots:
                    roots += 1
                    ok = True
            elif open_pos[e, s] >= 0:
                ok = True
                for i in range(count):
                    if kept[kept_row, i] == s:
                        ok = False
        if ok:
            kept[kept_row, count] = s
            count += 1
        else:
            drops += 1
            if dropped.shape[0]:
                dropped[e, j] = True
    return count, drops


@njit(cache=True)
def _legal_kernel(batch: Any, active: Any, workers: int, ep: Any, obs: Any, kept: Any, dropped: Any) -> None:  # pragma: no cover
    root_children, observed = ep[1], ep[3]
    revealed, open_pos = obs[2], obs[3]
    for e in range(batch.shape[0]):
        if active[e]:
            judge_row(batch, e, -1, min(workers, root_children[e] - revealed[e, 0]), observed[e], open_pos, kept, e,
                      dropped)


@njit(cache=True)
def _apply_kernel(batch: Any, pool: Any, ep: Any, obs: Any, root_revealed: Any) -> None:  # pragma: no cover
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
            if s == 0:
                root_revealed[e] = rank + 1
            elif leaves[e] or rank + 1 == n_children[parent]:
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


__all__ = ["KEY_SHIFT", "NONE", "ROOT", "VectorReplay", "WorldPool", "judge_row"]
