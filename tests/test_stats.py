"""World statistics (dream_gym.datasets.stats) on a hand-computed world, and `dream-gym worlds stats`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from worldgen import make_world, node, write_folder

from dream_gym.cli import main
from dream_gym.datasets.stats import stats_markdown, world_stats
from dream_gym.replay.oracle import oracle_limit
from dream_gym.replay.settings import ReplaySettings
from dream_gym.world.tree import NODES_GZ_FILE
from dream_gym.world.writer import compress_world

# baseline 0, best 10 (q = s / 10); creation order below
HAND = [
    node("root", None, 0.0),
    node("a", "root", 2.0),    # new best (beats 0), beats parent, depth 1
    node("b", "root", None),   # invalid
    node("a1", "a", 1.0),      # worse than parent
    node("a11", "a1", 4.0),    # new best, beats parent, depth 3
    node("b1", "b", 3.0),      # repairs a failed parent: beats it; not a new best
    node("c", "root", 10.0),   # new best, depth 1
    node("a111", "a11", 10.0), # ties the best: not a new best; beats parent
]


def test_stats_by_hand() -> None:
    world = make_world(HAND, workers=2)
    stats = world_stats(world)
    assert stats.workers == 2 and stats.frontier == "leaves" and stats.nodes == 8
    assert stats.q_first_w == pytest.approx(0.2)  # a, b
    assert stats.q_first_10 == pytest.approx(1.0)  # all 7 attempts
    assert stats.new_bests == 3
    assert stats.best_depth == 1  # c is recorded before a111
    assert stats.beat_parent_share == pytest.approx(5 / 7)  # a, a11, b1, c, a111
    assert stats.invalid_share == pytest.approx(1 / 7)
    assert stats.root_branching == 3
    limit = oracle_limit(world, 2)
    assert stats.limit == limit.value and stats.limit_exact
    for r in (1, 2, 3):
        assert stats.stop_r[r] == oracle_limit(world, 2, max_rounds=r).value
        assert stats.limit_minus_stop_r[r] == pytest.approx(stats.limit - stats.stop_r[r])
    # c is the third root child: with W = 2 it needs 2 rounds, so round 1 reaches only q .2
    assert stats.stop_r[1] < stats.stop_r[2]


def test_stats_follow_workers_betas_and_frontier() -> None:
    world = make_world(HAND, workers=2)
    wide = world_stats(world, ReplaySettings(3, beta1=0.01, beta2=0.0, frontier="any"))
    assert wide.workers == 3 and wide.q_first_w == pytest.approx(0.2)  # a, b, a1
    assert wide.stop_r[1] == pytest.approx(1.0 - 3 * 0.01)  # c opened in round 1
    assert wide.limit == oracle_limit(world, 3, 0.01, 0.0, "any").value


def test_stats_of_a_root_only_world() -> None:
    stats = world_stats(make_world([node("root", None, 1.0)], workers=4))
    assert stats.new_bests == 0 and stats.invalid_share == 0.0 and stats.limit == 0.0 and stats.root_branching == 0


def test_cli_stats_markdown_json_and_rich(tmp_path: Path, capsys) -> None:
    a = write_folder(tmp_path / "a", HAND, world_id="hand-a", workers=2)
    b = write_folder(tmp_path / "b", HAND[:5], world_id="hand-b", workers=2)
    compress_world(b)
    assert (b / NODES_GZ_FILE).is_file()
    assert main(["worlds", "stats", str(a), str(b), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["world_id"] for d in data] == ["hand-a", "hand-b"] and data[0]["new_bests"] == 3
    assert data[0]["stop_r"]["1"] == world_stats(make_world(HAND, workers=2)).stop_r[1]
    assert main(["worlds", "stats", str(a), str(b), "--markdown", "-W", "3", "--beta2", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| statistic | hand-a | hand-b |") and "| successive new bests | 3 | 2 |" in out
    assert "beta2 0" in out
    assert main(["worlds", "stats", str(tmp_path)]) == 0  # a folder of worlds
    out = capsys.readouterr().out
    assert "hand-a" in out and "hand-b" in out and "oracle limit" in out


def test_cli_stats_of_more_worlds_than_a_terminal_holds_shows_every_world(tmp_path: Path, capsys,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    ids = [f"hand-world-{n}" for n in ("one", "two", "three", "four", "five")]
    folders = [str(write_folder(tmp_path / i, HAND, world_id=i, workers=2)) for i in ids]
    assert main(["worlds", "stats", *folders[:1]]) == 0  # control: one world, one table
    out = capsys.readouterr().out
    assert _headers(out) == 1 and ids[0] in out
    assert main(["worlds", "stats", *folders]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert all(i in out for i in ids)  # a table as wide as five worlds was cut at the 80th column
    assert _headers(out) >= 2 and out.count("World statistics") == 1


def test_cli_stats_breaks_a_long_world_id_after_a_hyphen(tmp_path: Path, capsys,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    ids = ["lasso-openevolve-w4-s0", "cp32-stagnation-w4-s0", "averyveryverylongnamewithouthyphens"]
    folders = [str(write_folder(tmp_path / i, HAND, world_id=i, workers=2)) for i in ids]
    assert main(["worlds", "stats", *folders]) == 0
    out = capsys.readouterr().out
    first, second = (line.split() for line in out.splitlines()[2:4])
    assert second[0] == "statistic" and len(first) == len(second) - 1 == 2, out
    for world_id, head, tail in zip(ids[:2], first, second[1:], strict=True):  # broken after a hyphen, whole again when joined
        assert head + tail == world_id and head.endswith("-"), out
    assert "averyveryverylongnamewithouthyphens" in out.split()  # alone in its table: room for it whole


def _headers(out: str) -> int:
    """How many tables: each heads its column of names with 'statistic'."""
    return sum(1 for line in out.splitlines() if line.lstrip().startswith("statistic "))


def test_cli_stats_unknown_world_is_a_clear_error(capsys) -> None:
    assert main(["worlds", "stats", "no-such-world-anywhere"]) == 2
    err = capsys.readouterr().err
    assert "unknown world 'no-such-world-anywhere'" in err and len(err.strip().splitlines()) == 1


def test_cli_compress(tmp_path: Path, capsys) -> None:
    folder = write_folder(tmp_path / "w", HAND)
    assert main(["worlds", "compress", str(folder)]) == 0
    assert "bytes" in capsys.readouterr().out and (folder / NODES_GZ_FILE).is_file()
    assert main(["worlds", "compress", str(folder)]) == 0
    assert "already compressed" in capsys.readouterr().out


def test_markdown_marks_an_upper_bound() -> None:
    stats = world_stats(make_world(HAND, workers=2))
    text = stats_markdown([stats])
    assert "| oracle limit V* |" in text and "bound" not in text


def test_markdown_with_one_row_per_world(tmp_path: Path, capsys) -> None:
    a = write_folder(tmp_path / "a", HAND, world_id="hand-a", workers=2)
    assert main(["worlds", "stats", str(a), "--markdown", "--rows"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| world | task | nodes | W |") and lines[2].startswith("| hand-a | toy-task | 8 | 2 |")
