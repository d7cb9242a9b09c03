"""The engine of :class:`dream_gym.envs.vector_env.ReplayVectorEnv`: one compiled call per step that,
episode by episode, starts the episodes to start, judges and applies each acting episode's row
of actions, sets its reward and flags, and brings its rows of an observation buffer set up to
date.

One pass over the episodes: each episode's state (its records, :mod:`dream_gym.replay.vector`'s
``records``: the fields of one observed id side by side) and its observation rows are fetched
from memory once per step, which is what the step costs at large N. The replay is a
``VectorReplay(..., ranked=False)``: the node-level env reads no open list, rank key or prefix,
so none is kept. The rules are :mod:`dream_gym.replay.mechanics`'s, as in ``vector_replay``'s kernels;
tests/test_vector_env.py pins every episode to the single :class:`~dream_gym.envs.env.ReplayEnv`.

The kernels are compiled without numba's reference counting (``_nrt=False``): inlining a
function that takes arrays makes numba count references to each of them on every episode,
which was most of a step that revealed nothing (about 37 ns of 41 per episode). The engine
allocates nothing and every array it takes outlives the call, so there is nothing to count;
tests/test_vector_env.py checks that the compiled step calls no reference counting.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from dream_gym.replay.vector import OPEN, ORDER, PARENT, REVEALED, judge_row

# The per-episode flags the engine sets (rows of one (FLAGS, N) bool array).
TERMINATED, TRUNCATED, ILLEGAL_STOP, CAPACITY_FULL, ATTEMPTS_LIMIT = range(5)
FLAGS = 5
# Episodes ahead whose first rows the step asks the cache for: each episode's rows lie a page or
# more from its neighbours', so without the hint every episode waits for its own cache misses.
PREFETCH_AHEAD = 3


@intrinsic
def _prefetch(typingctx: Any, array: Any, i: Any, j: Any) -> Any:  # pragma: no cover
    """A hint to bring the cache line of ``array[i, j]`` in for writing (never faults)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array_type = signature.args[0]
        view = context.make_array(array_type)(context, builder, args[0])
        address = cgutils.get_item_pointer(context, builder, array_type, view, args[1:], wraparound=False)
        byte_pointer = ir.IntType(8).as_pointer()
        int32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, int32, int32, int32]), "llvm.prefetch.p0i8")
        # (address, write, strong locality, data cache)
        builder.call(function, [builder.bitcast(address, byte_pointer), int32(1), int32(3), int32(1)])
        return context.get_dummy_value()

    return types.void(array, i, j), codegen


@njit(cache=True, inline="always", _nrt=False)
def _start(e: int, w: int, frontier: int, offsets: Any, n_children: Any, valid: Any, q: Any, leaves_rule: Any,
           world: Any, root_children: Any, root_revealed: Any, leaves: Any, observed: Any, rounds: Any,
           open_count: Any, best_q: Any, records: Any) -> None:  # pragma: no cover
    """Episode e starts on pool world w (frontier: -1 the world's rule, 0 "any", 1 "leaves")."""
    root = offsets[w]
    world[e] = w
    root_children[e] = n_children[root]
    root_revealed[e] = 0
    leaves[e] = leaves_rule[w] if frontier < 0 else frontier == 1
    observed[e] = 1
    rounds[e] = 0
    open_count[e] = 0
    best_q[e] = q[root] if valid[root] else 0.0  # an unscored root: quality starts at 0
    records[e, 0, ORDER] = root
    records[e, 0, PARENT] = -1
    records[e, 0, REVEALED] = 0
    records[e, 0, OPEN] = -1


@njit(cache=True, inline="always", _nrt=False)
def _apply(e: int, kept: Any, count: int, root: int, child_start: Any, n_children: Any, children: Any, valid: Any,
           q: Any, leaves: Any, observed: Any, rounds: Any, open_count: Any, best_q: Any, root_revealed: Any,
           records: Any) -> None:  # pragma: no cover
    """One round of episode e (whose root is pool node ``root``) with the ``count`` legal
    selections in ``kept[0]`` (VectorReplay.apply without the open list: an open id's slot is 0). The root's
    revealed children are read from ``root_revealed``: its record is only written."""
    first = observed[e]
    for j in range(count):
        s = kept[0, j]
        new = first + j
        if s == 0:
            parent = root
            rank = root_revealed[e]
            root_revealed[e] = rank + 1
        else:
            parent = records[e, s, ORDER]
            rank = records[e, s, REVEALED]
        child = children[child_start[parent] + rank]
        records[e, s, REVEALED] = rank + 1
        if s != 0 and (leaves[e] or rank + 1 == n_children[parent]):
            records[e, s, OPEN] = -1  # the selection leaves the frontier
            open_count[e] -= 1
        records[e, new, ORDER] = child
        records[e, new, PARENT] = s
        records[e, new, REVEALED] = 0
        if n_children[child] > 0:
            records[e, new, OPEN] = 0
            open_count[e] += 1
        else:
            records[e, new, OPEN] = -1
        if valid[child] and q[child] > best_q[e]:
            best_q[e] = q[child]
    if count:
        observed[e] = first + count
        rounds[e] += 1


@njit(cache=True, inline="always", _nrt=False)
def _write_rows(e: int, root_slots: int, observed: int, records: Any, depth: Any, valid: Any, score: Any,
                nodes: Any, scores: Any, written: Any, set_epoch: Any, epoch: Any) -> None:  # pragma: no cover
    """Episode e's rows of the buffer set: those revealed since the set was written (``written``;
    the whole used part when the episode started again since, ``set_epoch``), the selections'
    frontier flags, the root's (its flag changes only when a row with parent 0 is revealed); the
    rows of the set's older episode are cleared."""
    again = set_epoch[e] != epoch[e]
    root_selected = again
    for i in range(0 if again else written[e], observed):
        node = records[e, i, ORDER]
        p = records[e, i, PARENT]
        nodes[e, i, 0] = 1
        nodes[e, i, 1] = p
        nodes[e, i, 2] = depth[node]
        nodes[e, i, 3] = 1 if valid[node] else 0
        nodes[e, i, 4] = 1 if records[e, i, OPEN] >= 0 else 0
        scores[e, i] = score[node] if valid[node] else 0.0
        if p > 0:  # a selection: its frontier flag may have changed
            nodes[e, p, 4] = 1 if records[e, p, OPEN] >= 0 else 0
        elif p == 0:
            root_selected = True
    if root_selected:
        nodes[e, 0, 4] = 1 if root_slots > 0 else 0  # the root: while it may open a branch
    if again:
        for i in range(observed, written[e]):
            nodes[e, i, 0] = 0
            nodes[e, i, 1] = -1
            nodes[e, i, 2] = 0
            nodes[e, i, 3] = 0
            nodes[e, i, 4] = 0
            scores[e, i] = 0.0
        set_epoch[e] = epoch[e]
    written[e] = observed


@njit(cache=True, _nrt=False)
def step_kernel(actions: Any, pad: int, act: Any, start: Any, world_of: Any, frontier: int, workers: int,
                round_limit: int, max_attempts: int, max_nodes: int, beta1: float, beta2: float, pool: Any, ep: Any,
                root_revealed: Any, records: Any, kept: Any, nodes: Any, scores: Any, glob: Any, written: Any, set_epoch: Any, epoch: Any,
                value: Any, reward: Any, dropped: Any, flags: Any) -> None:  # pragma: no cover
    """One step of ReplayVectorEnv: episodes where ``start`` begin again on their world
    (``world_of``), episodes where ``act`` judge and apply their row of ``actions``; then each
    episode's reward, ``dropped`` count and ``flags`` (FLAGS, N), its rows of the buffer set
    (nodes, scores, glob) and the value so far. A row whose legal part would take its episode past
    ``max_attempts`` is not applied and ends the episode (flag ATTEMPTS_LIMIT). ``pool``: WorldPool.arrays, ``ep``:
    VectorReplay._episode_arrays(), ``root_revealed`` and ``records``: VectorReplay's,
    ``kept``: (1, W), room for one row's legal part.
    The argument tuples are unpacked once: numba counts references to every array it takes out
    of one."""
    offsets, child_start, n_children, children, score, valid, q, depth, _, _, leaves_rule = pool
    world, root_children, leaves, observed, rounds, open_count, _, _, best_q, _, _, _, _ = ep
    open_pos = records[:, :, OPEN]
    no_flags = flags[:0, :0]  # the step counts drops (strict mode flags them first); a view: nothing allocated
    n = actions.shape[0]
    for e in range(n):
        if e + PREFETCH_AHEAD < n:
            ahead = e + PREFETCH_AHEAD
            first_new = observed[ahead]
            # the rows this set is written from (the set last held the episode a step or more ago)
            # up to the last a full batch reveals, and the records of the newest ids
            last_row = min(first_new + workers, nodes.shape[1]) - 1
            first_row = min(written[ahead], last_row) if set_epoch[ahead] == epoch[ahead] else 0
            _prefetch(nodes[ahead], first_row, 0)
            _prefetch(nodes[ahead], last_row, 0)
            _prefetch(scores, ahead, first_row)
            _prefetch(scores, ahead, last_row)
            _prefetch(records[ahead], first_new - 1, 0)
            _prefetch(records[ahead], min(first_new + workers, records.shape[1]) - 1, 0)
        reward[e] = 0.0
        dropped[e] = 0
        for f in range(FLAGS):
            flags[f, e] = False
        count = drops = 0
        refused = False
        if start[e]:
            _start(e, world_of[e], frontier, offsets, n_children, valid, q, leaves_rule, world, root_children,
                   root_revealed, leaves, observed, rounds, open_count, best_q, records)
            epoch[e] += 1
            value[e] = 0.0
        if act[e]:
            slots = min(workers, root_children[e] - root_revealed[e])
            count, drops = judge_row(actions, e, pad, slots, observed[e], open_pos, kept, 0, no_flags)
            refused = observed[e] - 1 + count > max_attempts  # past the attempts limit: nothing is applied
            if not refused:
                _apply(e, kept, count, offsets[world[e]], child_start, n_children, children, valid, q, leaves,
                       observed, rounds, open_count, best_q, root_revealed, records)
        root_slots = min(workers, root_children[e] - root_revealed[e])
        if act[e] and not start[e]:
            dropped[e] = drops
            if refused:
                flags[ATTEMPTS_LIMIT, e] = True
            elif count == 0:  # no legal selection: the empty batch stops
                flags[TERMINATED, e] = True
                flags[ILLEGAL_STOP, e] = drops > 0
            elif open_count[e] == 0 and root_slots == 0:
                flags[TERMINATED, e] = True
            elif round_limit >= 0 and rounds[e] >= round_limit:
                flags[TRUNCATED, e] = True
            elif observed[e] + min(workers, root_slots + open_count[e]) > max_nodes:
                flags[CAPACITY_FULL, e] = True
            attempts = observed[e] - 1
            v = best_q[e] - beta1 * attempts + beta2 * attempts / max(1, rounds[e])
            reward[e] = v - value[e]
            value[e] = v
        m = observed[e]
        _write_rows(e, root_slots, m, records, depth, valid, score, nodes, scores, written, set_epoch, epoch)
        glob[e, 0] = root_slots
        glob[e, 2] = rounds[e]
        glob[e, 3] = m - 1


def compiled_for(kernel: Any, arguments: tuple[Any, ...]) -> Any:
    """``kernel`` compiled for the types of ``arguments``, called without numba's dispatch: the
    dispatcher types each of the step's 27 arguments (and the arrays in its tuples) on every call,
    which took as long as the engine's own work for a few dozen episodes. The caller must pass
    arguments of the same types on every call (an env's own arrays do)."""
    return kernel.compile(tuple(kernel.typeof_pyval(argument) for argument in arguments))


__all__ = ["ATTEMPTS_LIMIT", "CAPACITY_FULL", "FLAGS", "ILLEGAL_STOP", "TERMINATED", "TRUNCATED", "compiled_for",
           "step_kernel"]
