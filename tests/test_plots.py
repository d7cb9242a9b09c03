"""dream_gym.evaluation.plots: replayed anytime traces agree with the results; every figure is a real PNG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dream_gym import load_world
from dream_gym.evaluation.evaluate import evaluate, read_results
from dream_gym.evaluation.plots import _anytime_curve, plot_results, replay_trace, tree_layout, world_of_row
from dream_gym.world.registry import load_cached
from tests.test_evaluate import make_world

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def results_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plot-worlds")
    for seed in range(2):
        make_world(root / "worlds" / f"w{seed}", 60, seed)
    out = root / "results.jsonl"
    evaluate(["greedy", "fixed", "random"], str(root / "worlds"), (0.0, 0.5, 1.0), backend="serial",
             out=out, progress=False)
    return out


def test_replayed_traces_match_the_recorded_results(results_file: Path) -> None:
    for row in read_results(results_file):
        trace = replay_trace(world_of_row(row), row)
        assert trace.attempts[-1] == row["attempts"]
        assert trace.rounds[-1] == row["rounds"]
        assert trace.best_q[-1] == pytest.approx(row["best_q"])
        assert list(trace.best_q) == sorted(trace.best_q)  # best-so-far never drops
        assert len(trace.revealed) == row["attempts"] + 1  # the root and one node per attempt


def test_anytime_curve_holds_the_last_value() -> None:
    from dream_gym.evaluation.plots import Trace

    a = Trace((0, 2, 3), (0, 1, 2), (0.0, 0.5, 0.7), ())
    b = Trace((0, 1), (0, 1), (0.2, 0.4), ())
    grid, mean = _anytime_curve([a, b], "attempts")
    assert list(grid) == [0, 1, 2, 3]
    assert np.allclose(mean, [0.1, 0.2, 0.45, 0.55])


def test_tree_layout_centres_parents_and_separates_leaves(results_file: Path) -> None:
    world = load_cached(read_results(results_file)[0]["world_path"])
    x, depth = tree_layout(world)
    leaves = [i for i in range(world.size) if len(world.children_of(i)) == 0]
    assert sorted(x[leaves]) == list(range(len(leaves)))  # distinct, evenly spaced leaves
    for i in range(world.size):
        kids = world.children_of(i)
        if len(kids):
            assert x[i] == pytest.approx((x[kids[0]] + x[kids[-1]]) / 2)
            assert all(depth[k] == depth[i] + 1 for k in kids)


@pytest.mark.slow
def test_plot_results_writes_non_empty_pngs(results_file: Path, tmp_path: Path) -> None:
    notes: list[str] = []
    paths = plot_results(results_file, tmp_path / "plots", notes=notes)
    assert [p.name for p in paths] == ["anytime.png", "pareto.png", "tree_w0.png"]
    assert notes == []  # every world drawn, the tree at the beta asked for
    plot_results(results_file, tmp_path / "plots", beta=0.4, notes=notes)
    assert notes == ["the tree shows beta 0.5, the closest to 0.4 in the results"]
    for path in paths:
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000
    with pytest.raises(LookupError, match="no episode on world"):
        plot_results(results_file, tmp_path / "plots2", world="nope")
    assert not (tmp_path / "plots2").exists()  # refused before any figure is written
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="no results"):
        plot_results(tmp_path / "empty.jsonl", tmp_path / "plots3")


@pytest.mark.parametrize("line", ['{"bad": 1}', "[1, 2]"])
def test_a_file_that_is_not_a_results_file_is_named_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             line: str) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ValueError, match=r"notes.jsonl, line 1: not a results row \((it lacks world, policy, beta"
                                         r"|a results row is a JSON object, got list)"):
        read_results(path)
    from dream_gym.cli import main as cli_main

    assert cli_main(["plot", str(path), "--out", str(tmp_path / "plots")]) == 2
    error = capsys.readouterr().err
    assert error.count("error:") == 1 and "a results file is what `dream-gym eval --out` writes" in error
    assert not (tmp_path / "plots").exists()


def test_an_unknown_world_is_refused_naming_the_world_drawn_by_default(results_file: Path, tmp_path: Path) -> None:
    """The message named the alphabetically first world as "the first", while the tree drawn by
    default is the results file's first."""
    worlds = results_file.parent / "worlds"
    out = tmp_path / "results.jsonl"
    evaluate(["greedy"], [str(worlds / "w1"), str(worlds / "w0")], (0.5,), backend="serial", out=out, progress=False)
    first = str(read_results(out)[0]["world"])
    assert first == load_world(worlds / "w1").id != load_world(worlds / "w0").id
    with pytest.raises(LookupError, match=rf"it holds 2 worlds, the first '{first}'"):
        plot_results(out, tmp_path / "plots", world="zzz-no-such-world-qqq")
    assert not (tmp_path / "plots").exists()


@pytest.mark.parametrize(("field", "value", "said"), [
    ("batches", 5, "'batches' must be a list of lists of node ids, got 5"),
    ("world_path", 5, "'world_path' must be a string, got 5"),
    ("policy", 5, "'policy' must be a string, got 5"),
    ("replay_score", "x", "'replay_score' must be a number, got \"x\""),
    ("format", "dream-gym-results/9", "format 'dream-gym-results/9', where this version reads"),
    ("batches", [[999]], None),
])
def test_a_results_row_with_a_value_of_the_wrong_kind_is_named_by_its_line(
        results_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object,
        said: str | None) -> None:
    """Edited by hand, a results file made tracebacks (``'int' object is not iterable``) or errors
    that named nothing (``max() arg is an empty sequence``), or was read as if it were right."""
    import json

    from dream_gym.cli import main as cli_main

    lines = results_file.read_text().splitlines()
    row = json.loads(lines[1])
    row[field] = value
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(row), *lines[2:]]) + "\n")
    assert cli_main(["plot", str(path), "--out", str(tmp_path / "plots")]) == 2
    error = capsys.readouterr().err
    if said is None:  # of the right kind, and not a batch of this world: the episode named
        said = "does not replay on its world: batch 1 [999]: id 999 is not an observed node"
        assert error.count("error:") == 1 and said in error, error
    else:
        assert error.count("error:") == 1 and f"edited.jsonl, line 2: not a results row ({said}" in error
    assert "Traceback" not in error and not (tmp_path / "plots").exists()
