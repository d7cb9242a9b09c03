"""`make demo`: the baselines on the held-out split, then a short improvement step whose chosen
policy is ranked beside them."""

from __future__ import annotations

import pytest

from dream_gym.demo import DREAMED, dream_step, run_demo
from dream_gym.durable import read_jsonl
from dream_gym.evaluate import resolve_worlds


def test_dream_step_starts_from_the_best_builtin_and_writes_a_chosen_policy(tmp_path):
    chosen, line = dream_step(tmp_path / "dream", "sd-fixed-s0,lasso-ucb-s0", jobs=1, revisions=2)
    assert chosen.is_file() and (tmp_path / "dream" / "ratchet.png").is_file()
    versions = [r for r in read_jsonl(tmp_path / "dream" / "dream.jsonl") if r["type"] == "revision"]
    assert [v["m"] for v in versions] == [0, 1]
    assert "incumbent" in line and "-> version" in line


@pytest.mark.slow
def test_demo_ranks_the_dreamed_policy_beside_the_baselines_on_the_held_out_split(tmp_path, capsys):
    paths = run_demo(tmp_path, jobs=2, dream_revisions=2)
    board = (tmp_path / "leaderboard_dreamed.md").read_text()
    held_out = len(resolve_worlds("heldout"))
    assert DREAMED in board and "fixed" in board and f"Leaderboard: mean over {held_out} worlds" in board
    assert all(p.exists() for p in paths)
    assert "not used for selection" in capsys.readouterr().out
