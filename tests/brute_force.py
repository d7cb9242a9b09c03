"""Brute-force enumeration of every legal batch sequence on a small world: the oracle's reference."""

from __future__ import annotations

import itertools
import math

from dream_gym.replay.score import Normalizer, replay_score
from dream_gym.world.tree import World


def brute_force_limit(
    world: World, workers: int, frontier: str, beta1: float, beta2: float, max_rounds: int | None = None
) -> float:
    """The best V over all legal batch sequences (stopping after any of them), by enumeration.

    A state is the set of revealed nodes (revealed children are always a prefix in creation
    order, so the set determines the state) and the number of rounds taken; a batch is a
    multiset of selections: the root 0..min(W, branches left) times plus distinct legal non-root
    nodes, at most W in all, at least one.
    """
    children = [list(map(int, world.children_of(i))) for i in range(world.size)]
    norm = Normalizer(world.baseline_score, world.best_score)
    scores = world.score_list
    root_q = norm.q(scores[0])
    q0 = 0.0 if root_q is None else root_q
    limit = math.inf if max_rounds is None else max_rounds
    best = -math.inf
    seen: set[tuple[frozenset[int], int]] = set()

    def next_child(node: int, revealed: frozenset[int]) -> int | None:
        for child in children[node]:
            if child not in revealed:
                return child
        return None

    def visit(revealed: frozenset[int], rounds: int) -> None:
        nonlocal best
        if (revealed, rounds) in seen:
            return
        seen.add((revealed, rounds))
        quality = max([q0] + [q for i in revealed if (q := norm.q(scores[i])) is not None])
        best = max(best, replay_score(quality, len(revealed) - 1, rounds, beta1, beta2))
        if rounds >= limit:
            return
        root_left = sum(1 for c in children[0] if c not in revealed)
        legal = [
            v for v in sorted(revealed)
            if v != 0 and next_child(v, revealed) is not None
            and (frontier == "any" or not any(c in revealed for c in children[v]))
        ]
        for root_times in range(min(workers, root_left) + 1):
            for size in range(max(0, 1 - root_times), min(workers - root_times, len(legal)) + 1):
                for chosen in itertools.combinations(legal, size):
                    new = set(revealed)
                    new.update(children[0][len(children[0]) - root_left:][:root_times])
                    for v in chosen:
                        child = next_child(v, revealed)
                        assert child is not None
                        new.add(child)
                    visit(frozenset(new), rounds + 1)

    visit(frozenset([0]), 0)
    return best
