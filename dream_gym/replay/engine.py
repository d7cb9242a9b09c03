"""The engine of :class:`dream_gym.envs.env.ReplayEnv`: one replay episode in two flat arrays, stepped
by one compiled call (numba) that judges a batch, applies it and writes the observation rows it
changed into an observation buffer set. The rules are :mod:`dream_gym.replay.mechanics`'s, pinned to it
by tests/test_reveal_rule_conformance.py and tests/test_env_engine.py; the vector envs run the
same rules for N episodes in :mod:`dream_gym.replay.vector`.

The kernel is compiled without numba's reference counting (``_nrt=False``): each inlined row
writer takes the observation's arrays, and counting references to them for every row a step
writes was about a third of the kernel's call (docs/results/benchmarks.md). It allocates
nothing and every array it views outlives the call; tests/test_env_engine.py checks that the
compiled kernel counts no references.
"""

from __future__ import annotations

import weakref
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from dream_gym.replay.layout import (
    F_BASELINE,
    F_BEST_Q,
    F_BETA1,
    F_BETA2,
    F_HEADER_SIZE,
    F_O_SCORE,
    F_REWARD,
    F_VALUE,
    H_B_GLOBALS,
    H_B_MASK,
    H_B_SCORES,
    H_DST,
    H_EPOCH,
    H_FC,
    H_FIRST,
    H_K,
    H_LEAVES,
    H_M,
    H_MAX_ATTEMPTS,
    H_MODE,
    H_N,
    H_NF,
    H_O_BATCH,
    H_O_CHILDREN,
    H_O_CSTART,
    H_O_DEPTH,
    H_O_F,
    H_O_MARK,
    H_O_NCH,
    H_O_NEXT,
    H_O_OPEN,
    H_O_ORDER,
    H_O_OUT,
    H_O_PARENT,
    H_O_PREV,
    H_O_REFUSED,
    H_O_REVEALED,
    H_O_SETS,
    H_O_VALID,
    H_OBSERVED,
    H_OUTLEN,
    H_REFUSALS,
    H_REFUSED,
    H_REQUESTS,
    H_ROOT_CHILDREN,
    H_ROOT_SLOTS,
    H_ROUND_LIMIT,
    H_ROUNDS,
    H_ROWS_SAFE,
    H_STAMP,
    H_STATUS,
    H_STEP_REFUSED,
    H_W,
    HEADER_SIZE,
    MAX_SETS,
    MODE_RESET,
    OUT_END,
    OUT_FIRST,
    OUT_HEADER,
    OUT_K,
    OUT_REMOVED,
    OUT_ROOT_SLOTS,
    OUT_ROUNDS,
    STATUS_APPLIED,
    STATUS_CUT,
    STATUS_EMPTY,
    STATUS_ILLEGAL,
    STATUS_REFUSED,
)
from dream_gym.replay.vector import WorldPool
from dream_gym.world.tree import World

# The state's layout (its slots' names, and how the sections are laid out): dream_gym.replay.layout.


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
                 beta1: float, beta2: float, max_attempts: int, requests: bool = False):
        pool = _one_world_pool(world)
        size = int(pool.sizes[0])
        n_children = pool.n_children
        sections = [("batch", workers), ("refused", workers), ("out", OUT_HEADER + 2 * workers + 2 * max_nodes),
                    ("sets", 2 * MAX_SETS), ("order", max_nodes), ("parent", max_nodes), ("revealed", max_nodes),
                    ("open", max_nodes), ("next", max_nodes), ("prev", max_nodes), ("mark", max_nodes),
                    ("cstart", size), ("nch", size),
                    ("children", len(pool.children)),
                    ("depth", size), ("valid", size), ("floats", F_HEADER_SIZE + 2 * size)]
        offsets, at = {}, HEADER_SIZE
        for name, length in sections:
            offsets[name] = at
            at += length
        S = np.zeros(at, dtype=np.int64)
        for key, name in ((H_O_BATCH, "batch"), (H_O_REFUSED, "refused"), (H_O_OUT, "out"), (H_O_SETS, "sets"), (H_O_ORDER, "order"),
                          (H_O_PARENT, "parent"), (H_O_REVEALED, "revealed"), (H_O_OPEN, "open"),
                          (H_O_NEXT, "next"), (H_O_PREV, "prev"), (H_O_MARK, "mark"), (H_O_CSTART, "cstart"),
                          (H_O_NCH, "nch"),
                          (H_O_CHILDREN, "children"), (H_O_DEPTH, "depth"), (H_O_VALID, "valid"), (H_O_F, "floats")):
            S[key] = offsets[name]
        S[H_NF] = F_HEADER_SIZE + 2 * size
        S[H_W], S[H_M], S[H_LEAVES] = workers, max_nodes, int(leaves)
        S[H_REQUESTS] = int(requests)
        S[H_ROUND_LIMIT] = -1 if round_limit is None else round_limit
        S[H_ROWS_SAFE] = max_nodes - workers
        S[H_MAX_ATTEMPTS] = max_attempts
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


@njit(cache=True, inline="always", _nrt=False)
def _write_flag(S: Any, i: int, nodes: Any, mask: Any) -> None:  # pragma: no cover
    """The frontier flag of revealed non-root row i, in the observation and the mask."""
    flag = S[S[H_O_OPEN] + i]
    nodes[i, 4] = flag
    for j in range(mask.shape[0]):
        mask[j, i] = flag


@njit(cache=True, inline="always", _nrt=False)
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


@njit(cache=True, inline="always", _nrt=False)
def _frontier_out(S: Any, at: int, written: int, observed: int, same_episode: bool, fc: int,
                  root_slots: int) -> int:  # pragma: no cover
    """Write at ``at`` the changes from the frontier as of a buffer set's ``written`` rows to the
    frontier now (OUT_REMOVED, then the ids), or the whole frontier when the set held another
    episode or the frontier is not much longer than its changes could be (OUT_REMOVED -1); return
    where they end. Only the ids revealed since (their parents are the selections since) can have
    changed: a step costs the nodes it revealed, not the frontier's size. A non-root id leaves
    the frontier only when selected and never comes back; a new id joins it if it is open now."""
    o_out, o_open, o_parent = S[H_O_OUT], S[H_O_OPEN], S[H_O_PARENT]
    if not same_episode or fc <= 3 * (observed - written):
        S[o_out + OUT_REMOVED] = -1
        if root_slots > 0:
            S[at] = 0
            at += 1
        i = S[S[H_O_NEXT]]  # the open list, from its head (id 0)
        while i != 0:
            S[at] = i
            at += 1
            i = S[S[H_O_NEXT] + i]
        return at
    S[H_STAMP] += 1  # marks this call's removals, so that a parent selected twice leaves once
    stamp, o_mark = S[H_STAMP], S[H_O_MARK]
    removed = 0
    for i in range(written, observed):
        p = S[o_parent + i]
        if 0 < p < written and S[o_open + p] == 0 and S[o_mark + p] != stamp:
            S[o_mark + p] = stamp
            S[at] = p
            at += 1
            removed += 1
    S[o_out + OUT_REMOVED] = removed
    for i in range(written, observed):
        if S[o_open + i] == 1:
            S[at] = i
            at += 1
    return at


@njit(cache=True, _nrt=False)
def _episode_kernel(S: Any, buffer: Any) -> None:  # pragma: no cover
    """Reset (H_MODE = MODE_RESET) or step the episode with the batch S[batch : batch + H_N]
    (values H_M: no selection), then bring buffer set H_DST (the bytes ``buffer``) up to date.
    A batch with an illegal selection changes nothing (H_STATUS = STATUS_ILLEGAL): the caller
    judges it and steps again with its legal part. A legal batch that would take the episode
    past H_MAX_ATTEMPTS is not applied: the episode ends (OUT_END 4, H_REFUSED its size).

    Request mode (H_REQUESTS = 1): the open flags (and so the frontier) are the online frontier
    (every revealed node the rule lets an online run continue; the root W times), and a legal
    batch is split into hits, applied as above, and refusals (H_STEP_REFUSED of them, their ids in
    the refused section, counted in H_REFUSALS); a batch of refusals only ends the episode
    (OUT_END 5) and applies nothing."""
    W, M = S[H_W], S[H_M]
    F = S[S[H_O_F]: S[H_O_F] + S[H_NF]].view(np.float64)
    nodes = buffer[: 20 * M].view(np.int32).reshape(M, 5)
    scores = buffer[S[H_B_SCORES]: S[H_B_SCORES] + 8 * M].view(np.float64)
    glob = buffer[S[H_B_GLOBALS]: S[H_B_GLOBALS] + 32].view(np.float64)
    mask = buffer[S[H_B_MASK]: S[H_B_MASK] + W * (M + 1)].view(np.int8).reshape(W, M + 1)
    o_order, o_parent, o_rev, o_open = S[H_O_ORDER], S[H_O_PARENT], S[H_O_REVEALED], S[H_O_OPEN]
    o_out = S[H_O_OUT]
    observed, rounds, root_slots, fc = S[H_OBSERVED], S[H_ROUNDS], S[H_ROOT_SLOTS], S[H_FC]
    requests = S[H_REQUESTS] == 1
    k = 0
    S[H_STEP_REFUSED] = 0
    if S[H_MODE] == MODE_RESET:
        S[H_EPOCH] += 1
        observed, rounds, fc = 1, 0, 0
        S[o_order] = 0
        S[o_parent] = -1
        S[o_rev] = 0
        S[o_open] = 0
        S[S[H_O_NEXT]] = 0  # the open list: empty
        S[S[H_O_PREV]] = 0
        S[H_REFUSED] = 0
        S[H_REFUSALS] = 0
        root_slots = W if requests else min(W, S[H_ROOT_CHILDREN])
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
        refused = 0
        if requests and k > 0:  # the hits stay in order in the kept section, the refusals move out
            o_nch, leaves = S[H_O_NCH], S[H_LEAVES] == 1
            hits, opened = 0, 0
            for i in range(k):
                s = S[kept + i]
                if s == 0:
                    answered = S[o_rev] + opened < S[o_nch]
                    if answered:
                        opened += 1
                else:
                    recorded = S[o_nch + S[o_order + s]]
                    answered = S[o_rev + s] < (min(recorded, 1) if leaves else recorded)
                if answered:
                    S[kept + hits] = s
                    hits += 1
                else:
                    S[S[H_O_REFUSED] + refused] = s
                    refused += 1
            k = hits
            S[H_STEP_REFUSED] = refused
            S[H_REFUSALS] += refused
        if k == 0 and refused > 0:  # request mode: the record holds nothing the batch asked for
            S[H_STATUS] = STATUS_CUT
            end = 5
        elif k == 0:
            S[H_STATUS] = STATUS_EMPTY
            end = 1
        elif observed - 1 + k > S[H_MAX_ATTEMPTS]:  # past the attempts limit: nothing is applied
            S[H_STATUS] = STATUS_REFUSED
            S[H_REFUSED] = k
            k = 0
            end = 4
        else:
            S[H_STATUS] = STATUS_APPLIED
            o_cstart, o_nch, o_children, o_valid = S[H_O_CSTART], S[H_O_NCH], S[H_O_CHILDREN], S[H_O_VALID]
            o_next, o_prev = S[H_O_NEXT], S[H_O_PREV]
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
                    root_slots = W if requests else min(W, S[o_nch] - rank)
                elif leaves or (rank == S[o_nch + pw] and not requests):  # request mode: open while online
                    S[o_open + s] = 0
                    before, after = S[o_prev + s], S[o_next + s]  # unlinked from the open list
                    S[o_next + before] = after
                    S[o_prev + after] = before
                    fc -= 1
                if S[o_nch + child] > 0 or requests:
                    S[o_open + new] = 1
                    last = S[o_prev]  # linked at the tail: the newest id is the largest
                    S[o_next + last] = new
                    S[o_prev + new] = last
                    S[o_next + new] = 0
                    S[o_prev] = new
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
    # the output: header, kept selections (written above), their nodes, the frontier's changes
    S[o_out + OUT_K] = k
    S[o_out + OUT_FIRST] = first
    S[o_out + OUT_ROOT_SLOTS] = root_slots
    S[o_out + OUT_ROUNDS] = rounds
    S[o_out + OUT_END] = end
    meta = S[H_O_SETS] + 2 * S[H_DST]
    written, epoch = S[meta], S[meta + 1]
    S[H_OUTLEN] = _frontier_out(S, o_out + OUT_HEADER + 2 * k, written, observed, epoch == S[H_EPOCH], fc,
                                root_slots) - o_out
    # the buffer set: rows revealed since it was written, their parents, the root, the globals
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


__all__ = ["MAX_SETS", "EpisodeArrays", "episode_kernel", "set_layout"]
