"""A grown world's own recorded schedule, and its replay (a test helper).

The online loop runs rounds synchronously and records each node's ``round``, so the batch of
round r is the list of parents of the nodes recorded in round r. Replaying that schedule must
reveal, round by round, exactly the nodes the online run produced in that round, and give the
same replay score as the online run (the invariant tested in tests/test_online_loop.py).
"""

from __future__ import annotations

from collections import defaultdict

from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2, Normalizer, replay_score
from dream_gym.replay.session import ReplaySession
from dream_gym.world.tree import World


def rounds_of(world: World) -> dict[int, list[int]]:
    """World indices of the nodes of each recorded round (file order), by round number."""
    rounds: dict[int, list[int]] = defaultdict(list)
    for index, record in enumerate(world.records[1:], start=1):
        value = record.get("round")
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"world {world.id!r}: node {record['id']!r} has no integer 'round'")
        rounds[value].append(index)
    return dict(sorted(rounds.items()))


def replay_recorded_schedule(
    world: World, beta1: float = DEFAULT_BETA1, beta2: float = DEFAULT_BETA2
) -> tuple[ReplaySession, list[set[int]]]:
    """Replay the world with its own schedule; return the session and, per round, the world
    indices it revealed."""
    session = ReplaySession(world, workers=world.workers, beta1=beta1, beta2=beta2, strict=True)
    obs_of = {ROOT: ROOT}
    revealed: list[set[int]] = []
    for indices in rounds_of(world).values():
        batch = [obs_of[int(world.parent[i])] for i in indices]
        outcome = session.step(batch)
        got = {session.replay.world_index(obs_id) for obs_id in outcome.new_ids}
        for obs_id in outcome.new_ids:
            obs_of[session.replay.world_index(obs_id)] = obs_id
        revealed.append(got)
    return session, revealed


def online_replay_score(world: World, beta1: float = DEFAULT_BETA1, beta2: float = DEFAULT_BETA2) -> float:
    """V of the online run itself: its whole tree, its attempts and its rounds."""
    normalizer = Normalizer(world.baseline_score, world.best_score)
    qualities = [normalizer.q(float(s)) for s in world.score if s == s]
    best_q = max((q for q in qualities if q is not None), default=0.0)
    return replay_score(best_q, world.size - 1, len(rounds_of(world)), beta1, beta2)
