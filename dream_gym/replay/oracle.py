"""The oracle limit: the best replay score V any policy can reach on a world (docs/concepts/oracle-limit.md).

It is replay's knowledge, never a policy's: nothing a policy sees (views, observations) is
computed from it.

What reaching a node costs, read off the reveal rules (:meth:`RevealRule.edge_costs` of
:mod:`dream_gym.world.reveal_rules`):

* **Closure.** Every node reveals its children in creation order, so revealing ``x`` needs its
  ancestors and, below each ancestor, the children created before the one on ``x``'s path. That
  set is ``x``'s closure; its size ``N(x)`` is the fewest attempts of any schedule revealing ``x``.
* **Rounds.** The root opens up to W branches a round, a non-root node reveals at most one child
  a round. With ``m_i`` the children of the i-th node of the path that must be revealed, ``x``
  needs ``R(x) = ceil(m_0 / W) + m_1 + ... + m_{d-1}`` rounds at least, and its closure is revealed
  in exactly ``R(x)`` rounds (open the root's branches W at a time, then walk down the path).
* **Reachability.** A non-root node may be selected ``selections`` times in a row (the rule's
  number), so only its first ``selections`` children can be revealed: ``x`` is reachable only
  when every edge of its path below a root child stays within that. Under "leaves" (a node is
  legal only while it is a revealed leaf) that is the first child; under "any", every child.

With ``qe(x) = max(q0, q(x))`` (``q0``: the quality a replay starts from, the root's q or 0), any
schedule's V is at most ``qe(x) - beta1 * N + beta2 * N / k`` for its best node ``x``, with
``N >= N(x)`` attempts and ``k >= R(x)`` rounds.

* **beta2 = 0** (with or without ``max_rounds``): V is largest for the fewest attempts, so the
  limit is ``max_x qe(x) - beta1 * N(x)`` over the nodes with ``R(x) <= max_rounds``: **exact**.
* **beta2 > 0**: for a fixed number of rounds ``k``, V is linear in N. When ``beta2 / k <= beta1``
  fewer attempts are better, and the best such schedule is ``x``'s closure in ``R(x)`` rounds
  (exact). When ``beta2 / k > beta1`` more attempts are better; the most attempts ``k`` rounds can
  hold with ``x`` among them is a scheduling problem. We bound it by matching nodes to rounds no
  earlier than their ``R``, at most W a round (:func:`_most_attempts_bound`), and attack it by
  constructing schedules: ``x``'s closure as early as possible, every other slot
  filled greedily (three fill orders), best candidates ``(k, x)`` first (branch and bound). When
  the best constructed schedule meets the best remaining bound the limit is exact; otherwise
  ``value`` is the upper bound, ``lower`` the best constructed schedule and ``gap`` the difference.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dream_gym.replay.mechanics import ROOT, Replay
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2, Normalizer, replay_score
from dream_gym.replay.settings import ReplaySettings, whole_at_least_one
from dream_gym.world.registry import resolve_world
from dream_gym.world.reveal_rules import REVEAL_RULES, RevealRule
from dream_gym.world.tree import World

# Branch and bound: at most this many (k, target) candidates are constructed, and at most this
# many rounds in total, so that a world with a tiny beta1 (hence many useful k) stays fast.
MAX_CANDIDATES = 48
MAX_CANDIDATE_ROUNDS = 20_000
FILL_RULES = ("deep", "wide", "chains")
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class OracleLimit:
    """The oracle limit of one world at one setting, and a schedule reaching it.

    Attributes:
        value: the limit V (``exact``), else an upper bound on it.
        lower: V of ``batches`` (equal to ``value`` when exact).
        exact: whether ``value`` is the limit itself.
        best_q, attempts, rounds: of ``batches``.
        target: world index of the best node ``batches`` reveal (0: the root).
        nodes: world indices revealed by ``batches``, in reveal order (root first).
        batches: observed ids per round, playable through ``Replay``/``ReplaySession`` at the
            same W, frontier rule and (for ``max_rounds``) round limit; they give ``lower``.
        candidates: (k, target) schedules constructed (0 when the closure argument sufficed).
    """

    value: float
    lower: float
    exact: bool
    best_q: float
    attempts: int
    rounds: int
    target: int
    nodes: tuple[int, ...]
    batches: tuple[tuple[int, ...], ...]
    workers: int
    frontier: str
    beta1: float
    beta2: float
    max_rounds: int | None
    candidates: int = 0

    @property
    def gap(self) -> float:
        """``value - lower``: 0 when exact."""
        return self.value - self.lower

    def share(self, v: float) -> float:
        """``v`` as a share of the limit (NaN when the limit is not positive)."""
        return v / self.value if self.value > 0 else math.nan


@dataclass(frozen=True)
class ReachCosts:
    """Per world node: fewest attempts N and rounds R that reveal it; reachability; qe."""

    attempts: np.ndarray
    rounds: np.ndarray
    feasible: np.ndarray
    qe: np.ndarray
    q0: float


def _path_sums(parent: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Sum of ``weight`` over each node's path to the root (root excluded), by pointer jumping."""
    acc = weight.astype(np.int64, copy=True)
    acc[ROOT] = 0
    anc = parent.astype(np.int64, copy=True)
    anc[ROOT] = ROOT
    while True:
        live = anc != ROOT
        if not live.any():
            return acc
        acc[live] += acc[anc[live]]
        anc[live] = anc[anc[live]]


def sibling_rank(world: World) -> np.ndarray:
    """Position of each node among its parent's children (creation order); 0 for the root."""
    rank = np.zeros(world.size, dtype=np.int64)
    kids = world.children.astype(np.int64)
    if kids.size:
        rank[kids] = np.arange(kids.size) - world.children_start[world.parent[kids]]
    return rank


def reach_costs(world: World, workers: int, frontier: str, max_rounds: int | None = None) -> ReachCosts:
    """Per world node: the fewest attempts N and rounds R of any schedule that reveals it, and
    whether one can (within ``max_rounds``), by the rule's cost model summed along its path."""
    parent = world.parent.astype(np.int64)
    rank = sibling_rank(world)
    from_root = parent == ROOT
    from_root[ROOT] = False
    n_children = np.diff(world.children_start).astype(np.int64)
    edge_attempts, edge_rounds, reachable = REVEAL_RULES[frontier].edge_costs(
        rank, n_children[np.maximum(parent, 0)], from_root, workers)
    edge_attempts[ROOT] = edge_rounds[ROOT] = 0
    reachable[ROOT] = True
    blocked = _path_sums(parent, (~reachable).astype(np.int64)) > 0
    attempts = _path_sums(parent, edge_attempts)
    rounds = _path_sums(parent, edge_rounds)
    feasible = ~blocked
    if max_rounds is not None:
        feasible &= rounds <= max_rounds
    normalizer = Normalizer(world.baseline_score, world.best_score)
    root_q = normalizer.q(world.score_list[ROOT])
    q0 = 0.0 if root_q is None else root_q
    span = world.best_score - world.baseline_score
    q = (world.score - world.baseline_score) / span if span > 0 else np.where(np.isnan(world.score), np.nan, 0.0)
    qe = np.fmax(np.where(np.isnan(q), q0, q), q0)
    return ReachCosts(attempts, rounds, feasible, qe, q0)


@dataclass
class _Schedule:
    value: float
    best_q: float
    attempts: int
    rounds: int
    target: int
    nodes: list[int]
    batches: list[list[int]]


class _Builder:
    """Plays schedules on a real :class:`Replay`, so every value it reports is a replayed V."""

    def __init__(self, world: World, workers: int, frontier: str, beta1: float, beta2: float):
        self.world, self.workers, self.frontier = world, workers, frontier
        self.rule: RevealRule = REVEAL_RULES[frontier]
        self.beta1, self.beta2 = beta1, beta2
        self.normalizer = Normalizer(world.baseline_score, world.best_score)
        self.scores = world.score_list
        self.starts, self.children, self.n_children = world.tree_lists
        self.rank = sibling_rank(world)
        self._potential: list[int] | None = None

    @property
    def potential(self) -> list[int]:
        """Per node: the most reveals that can follow it in successive rounds (fill priority)."""
        if self._potential is None:
            pot = [0] * self.world.size
            starts, children, counts = self.starts, self.children, self.n_children
            limits = self.rule.selection_limits(np.asarray(counts, dtype=np.int64)).tolist()
            for v in range(self.world.size - 1, -1, -1):  # children come after their parent
                limit, first = limits[v], starts[v]  # only the first `limit` children can follow v
                if limit == 1:  # a chain step (every node under "leaves"): the common case, inline
                    pot[v] = 1 + pot[children[first]]
                elif limit:
                    pot[v] = max(r + 1 + pot[children[first + r]] for r in range(limit))
            self._potential = pot
        return self._potential

    def path(self, target: int) -> list[int]:
        nodes = [target]
        parent = self.world.parent
        while nodes[-1] != ROOT:
            nodes.append(int(parent[nodes[-1]]))
        return nodes[::-1]

    def play(self, target: int, rounds: int, fill: str | None) -> _Schedule:
        """Reveal ``target``'s closure as early as possible within ``rounds`` rounds; with a
        ``fill`` rule, fill every free slot. Returns the best prefix of the schedule played."""
        replay = Replay(self.world, self.workers, self.frontier)
        path = self.path(target)
        need = {p: int(self.rank[c]) + 1 for p, c in itertools.pairwise(path)}  # children each path node reveals
        revealed = {ROOT: 0}  # children revealed so far, per revealed world node
        obs_of = {ROOT: 0}
        q = self.normalizer.q(self.scores[ROOT])
        best_q = 0.0 if q is None else q
        best_node = ROOT
        best = _Schedule(replay_score(best_q, 0, 0, self.beta1, self.beta2), best_q, 0, 0, ROOT, [ROOT], [])
        batches: list[list[int]] = []
        order = [ROOT]
        for _ in range(rounds):
            picks = self._mandatory(replay, need, revealed)
            if fill is not None and len(picks) < self.workers:
                picks += self._fill(replay, revealed, picks, fill)
            if not picks:
                break
            batch = [obs_of[p] for p in picks]
            new_ids = replay.apply(batch)
            batches.append(batch)
            for p, new_id in zip(picks, new_ids, strict=True):
                child = replay.world_index(new_id)
                revealed[p] += 1
                revealed[child] = 0
                obs_of[child] = new_id
                order.append(child)
                q = self.normalizer.q(self.scores[child])
                if q is not None and q > best_q:
                    best_q, best_node = q, child
            value = replay_score(best_q, replay.attempts, replay.rounds, self.beta1, self.beta2)
            if value > best.value:  # every prefix of the schedule is a schedule too
                best = _Schedule(value, best_q, replay.attempts, replay.rounds, best_node, list(order),
                                 [list(b) for b in batches])
        return best

    def _mandatory(self, replay: Replay, need: dict[int, int], revealed: dict[int, int]) -> list[int]:
        """This round's selections of the closure schedule (world indices of the parents)."""
        picks = [ROOT] * min(self.workers, need.get(ROOT, 0) - revealed[ROOT], replay.root_slots)
        for node, wanted in need.items():
            if node != ROOT and node in revealed and revealed[node] < wanted and len(picks) < self.workers:
                picks.append(node)
        return picks

    def _fill(
        self, replay: Replay, revealed: dict[int, int], picks: Sequence[int], rule: str
    ) -> list[int]:
        """Extra selections for the free slots of a round, by fill rule."""
        free = self.workers - len(picks)
        pot, starts, children = self.potential, self.starts, self.children
        taken = set(picks)
        nonroot: list[tuple[int, int, int]] = []  # (-priority, obs id, world index)
        for obs_id in replay.frontier():
            if obs_id == ROOT:
                continue
            node = replay.world_index(obs_id)
            if node in taken:
                continue
            child = children[starts[node] + revealed[node]]
            nonroot.append((-pot[child], obs_id, node))
        nonroot.sort()
        root_used = sum(1 for p in picks if p == ROOT)
        first_free = revealed[ROOT] + root_used
        root_free = min(replay.root_slots - root_used, free)
        root_prio = []
        floor = math.inf
        for s in range(root_free):  # opens come in creation order: a later one rides on earlier ones
            floor = min(floor, pot[children[starts[ROOT] + first_free + s]])
            root_prio.append(floor)
        if rule == "wide":
            extra = [ROOT] * root_free + [node for _, _, node in nonroot]
        elif rule == "chains":
            extra = [node for _, _, node in nonroot] + [ROOT] * root_free
        else:  # "deep": merge by priority
            merged = [(-p, 0, s, ROOT) for s, p in enumerate(root_prio)]
            merged += [(prio, 1, obs_id, node) for prio, obs_id, node in nonroot]
            merged.sort()
            extra = [m[3] for m in merged]
        return extra[:free]


def oracle_limit(
    world: World | str | os.PathLike[str],
    workers: int,
    beta1: float = DEFAULT_BETA1,
    beta2: float = DEFAULT_BETA2,
    frontier: str | None = None,
    max_rounds: int | None = None,
) -> OracleLimit:
    """The best V any policy can reach on ``world`` (see the module docstring for the method).

    Args:
        world: the recorded world, or a reference to one.
        workers: W, the most selections a batch may hold.
        beta1, beta2: the coefficients of V (both >= 0).
        frontier: "leaves" or "any" (default: the world's rule).
        max_rounds: only policies that stop after at most this many rounds (None: no limit).
    """
    world = resolve_world(world)  # a reference too, as ReplaySession and run_episode take
    rule = world.frontier_rule if frontier is None else frontier
    if rule not in REVEAL_RULES:
        raise ValueError(f"frontier must be one of {tuple(REVEAL_RULES)}, got {rule!r}")
    if not whole_at_least_one(workers):  # 3.9 was W 3
        raise ValueError(f"workers must be a whole number >= 1, got {workers!r}")
    if beta1 < 0 or beta2 < 0 or not (math.isfinite(beta1) and math.isfinite(beta2)):
        raise ValueError(f"beta1 and beta2 must be finite and >= 0, got {beta1}, {beta2}")
    if max_rounds is not None and max_rounds < 1:
        raise ValueError(f"max_rounds must be >= 1 or None, got {max_rounds}")
    workers, beta1, beta2 = int(workers), float(beta1), float(beta2)
    costs = reach_costs(world, workers, rule, max_rounds)
    builder = _Builder(world, workers, rule, beta1, beta2)

    # Fewest attempts per target, revealed in R(x) rounds: exact for every k with beta2/k <= beta1.
    n = costs.attempts.astype(np.float64)
    closure_v = costs.qe - beta1 * n + beta2 * n / np.maximum(1, costs.rounds)
    closure_v = np.where(costs.feasible, closure_v, -np.inf)
    tie_order = np.lexsort((np.arange(world.size), costs.attempts, -closure_v))
    best = builder.play(int(tie_order[0]), int(costs.rounds[tie_order[0]]), fill=None)
    upper = float(closure_v[tie_order[0]])

    candidates = 0
    if beta2 > 0 and world.size > 1:
        best, upper, candidates = _most_attempts_branch(world, costs, builder, best, upper, max_rounds)
    upper = max(upper, best.value)
    exact = upper - best.value <= _TOLERANCE * max(1.0, abs(upper))
    return OracleLimit(
        value=best.value if exact else upper,
        lower=best.value,
        exact=exact,
        best_q=best.best_q,
        attempts=best.attempts,
        rounds=best.rounds,
        target=best.target,
        nodes=tuple(best.nodes),
        batches=tuple(tuple(b) for b in best.batches),
        workers=workers,
        frontier=rule,
        beta1=beta1,
        beta2=beta2,
        max_rounds=max_rounds,
        candidates=candidates,
    )


def oracle_limit_at(world: World, settings: ReplaySettings) -> OracleLimit:
    """:func:`oracle_limit` at an episode's settings: its W and frontier rule on ``world`` (the
    world's where not given), beta1, beta2 and round limit (beta does not enter V).

    Request mode (``settings.requests``) has the rule's limit: refusals reveal nothing and cost
    nothing, and the hits of every request batch are a legal batch of the rule, so a policy that
    knows the tree gains nothing by asking what the record cannot answer."""
    return oracle_limit(world, settings.workers_on(world), settings.beta1, settings.beta2,
                        settings.frontier_on(world), settings.max_rounds)


def _most_attempts_bound(release: np.ndarray, workers: int, k_max: int) -> np.ndarray:
    """For k = 1..k_max, a bound on the attempts any schedule of k rounds holds.

    A node cannot be revealed before its round R, and a round holds at most W reveals. Matching
    nodes to rounds under just these two rules (windows [R, k], all ending at k) admits at most
    ``min over t <= k of (#{R <= t} + (k - t) * W)`` nodes (Hall's condition on the suffixes of
    the rounds; t = 0 gives k * W, t = k every node with R <= k)."""
    per_round = np.bincount(np.minimum(release, k_max + 1), minlength=k_max + 2)
    count = np.cumsum(per_round)[: k_max + 1]  # count[t]: nodes with R <= t (count[0] = 0)
    t = np.arange(k_max + 1)
    slack = np.minimum.accumulate(count - t * workers)  # min over t' <= t of count[t'] - t' * W
    return (t * workers + slack)[1:]


def _most_attempts_branch(
    world: World, costs: ReachCosts, builder: _Builder, best: _Schedule, closure_upper: float, max_rounds: int | None
) -> tuple[_Schedule, float, int]:
    """Branch and bound over (k, target) for the rounds k where more attempts raise V."""
    beta1, beta2, workers = builder.beta1, builder.beta2, builder.workers
    reachable = costs.feasible.copy()
    reachable[ROOT] = False
    total = int(reachable.sum())
    k_max = total if max_rounds is None else min(total, max_rounds)
    if beta1 > 0:
        k_max = min(k_max, math.ceil(beta2 / beta1) - 1)  # beta2/k > beta1 strictly
    if k_max < 1:
        return best, closure_upper, 0
    ks = np.arange(1, k_max + 1)
    capacity = _most_attempts_bound(costs.rounds[reachable], workers, k_max)
    gain = beta2 / ks - beta1
    # best qe among targets with R <= k (the root, R = 0, always counts)
    qe_by_round = np.full(k_max + 1, costs.q0)
    early = np.flatnonzero(costs.feasible & (costs.rounds <= k_max))
    np.maximum.at(qe_by_round, costs.rounds[early], costs.qe[early])
    top_q = np.maximum.accumulate(qe_by_round)[1:]
    bounds = top_q + gain * capacity
    possible = capacity >= ks  # k non-empty rounds need at least k attempts

    by_quality = np.lexsort((np.arange(world.size), costs.attempts, -costs.qe))
    by_quality = by_quality[costs.feasible[by_quality]]
    lists: dict[int, np.ndarray] = {}
    heap = [(-float(bounds[k - 1]), int(k), 0) for k in ks[possible]]
    heapq.heapify(heap)
    candidates = rounds_spent = 0
    unresolved = -math.inf  # bounds of constructed candidates that no schedule reached
    while heap and candidates < MAX_CANDIDATES and rounds_spent < MAX_CANDIDATE_ROUNDS:
        if -heap[0][0] <= best.value + _TOLERANCE * max(1.0, abs(best.value)):
            heap.clear()  # nothing left can beat the best schedule
            break
        bound, k, i = heapq.heappop(heap)
        if k not in lists:
            lists[k] = by_quality[costs.rounds[by_quality] <= k]
        target = int(lists[k][i])
        reached = -math.inf
        for rule in FILL_RULES:
            played = builder.play(target, k, fill=rule)
            reached = max(reached, played.value)
            if played.value > best.value:
                best = played
        if reached < -bound - _TOLERANCE * max(1.0, abs(bound)):
            unresolved = max(unresolved, -bound)
        candidates += 1
        rounds_spent += k * len(FILL_RULES)
        if i + 1 < len(lists[k]):
            nxt = int(lists[k][i + 1])
            heapq.heappush(heap, (-float(costs.qe[nxt] + gain[k - 1] * capacity[k - 1]), k, i + 1))
    upper = max(closure_upper, unresolved, -heap[0][0] if heap else -math.inf)
    return best, upper, candidates
