"""V as a share of the oracle limit in evaluation and the leaderboard ("% of limit", regret)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from worldgen import random_records, write_folder

from dream_gym.evaluation.evaluate import evaluate, leaderboard, load_results
from dream_gym.policies import POLICIES
from dream_gym.policy import EpisodeResult
from dream_gym.replay.oracle import oracle_limit
from dream_gym.world.registry import resolve_world

BETAS = (0.0, 0.5, 1.0)


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("worlds")
    return [write_folder(root / f"w{seed}", random_records(random.Random(seed), 60 + 20 * seed),
                         world_id=f"w{seed}", workers=2 + seed, frontier=("leaves", "any")[seed % 2])
            for seed in range(3)]


def test_every_episode_records_its_worlds_limit(worlds, tmp_path) -> None:
    results = evaluate(sorted(POLICIES), worlds, BETAS, backend="serial", progress=False,
                       beta1=0.004, beta2=0.03, max_rounds=6, out=tmp_path / "r.jsonl")
    for folder in worlds:
        world = resolve_world(folder)
        limit = oracle_limit(world, world.workers, 0.004, 0.03, world.frontier_rule, 6).value
        mine = [r for r in results if r.world == world.id]
        assert mine and all(r.limit == limit for r in mine)
        assert max(r.replay_score for r in mine) <= limit + 1e-9  # no policy beats the limit
    assert [r.limit for r in load_results(tmp_path / "r.jsonl")] == [r.limit for r in results]


def test_leaderboard_share_is_mean_v_over_the_limit_and_overall_the_mean(worlds) -> None:
    results = evaluate(["random", "greedy", "fixed"], worlds, BETAS, backend="serial", progress=False)
    board = leaderboard(results)
    for world, rows in board.per_world.items():
        limit = next(r.limit for r in results if r.world == world)
        for row in rows:
            assert row.limit == limit
            assert row.limit_share == pytest.approx(row.mean_v / limit)
            assert row.regret == pytest.approx(limit - row.mean_v)
            assert row.limit_share <= 1 + 1e-9
    for row in board.overall:
        per_world = [r for rows in board.per_world.values() for r in rows if r.policy == row.policy]
        assert row.limit_share == pytest.approx(sum(r.limit_share for r in per_world) / len(per_world))
        assert row.regret == pytest.approx(sum(r.regret for r in per_world) / len(per_world))
    text = board.to_markdown()
    assert "| % of limit | regret |" in text and "(limit V* " in text
    shown = f"{100 * board.overall[0].limit_share:.1f}%"
    assert shown in text and shown in board.to_text()


def test_results_without_a_limit_show_n_a() -> None:
    old = [EpisodeResult(world="w", policy="p", beta=b, replay_score=0.5, best_q=0.6, best_score=1.0,
                         attempts=3, rounds=1, work=0.1, attainment=0.6) for b in BETAS]
    board = leaderboard(old)
    assert math.isnan(board.overall[0].limit_share) and "n/a" in board.to_markdown()
    zero = [EpisodeResult(**{**r.to_dict(), "limit": 0.0}) for r in old]  # a world without gain
    row = leaderboard(zero).overall[0]
    assert math.isnan(row.limit_share) and row.regret == pytest.approx(-0.5)
