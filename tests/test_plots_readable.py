"""dream_gym.evaluation.plots leaves the caller's matplotlib alone and draws a readable tree.

Importing the module (and drawing with it) keeps the backend a notebook or script chose; the
tree figure has integer depth ticks, exactly one colour bar, a legend entry for the best revealed
node, and legend entries only for what is drawn."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from worldgen import random_records, write_folder

from dream_gym.evaluation.plots import draw_tree, tree_figure, tree_quality
from dream_gym.world.registry import load_cached
from dream_gym.world.tree import World

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def shallow_world(folder: Path, failed: bool) -> World:
    """A bushy world two levels deep (autoscaled depth ticks would be 0, 0.25, 0.5, ...), with or
    without failed attempts."""
    records = random_records(random.Random(7), 24, shape="bushy", p_unscored=0.3 if failed else 0.0)
    depth = {"root": 0}
    for rec in records[1:]:  # flatten to depth <= 2: re-parent deeper nodes under a depth-1 node
        parent = rec["parent"]
        if depth[parent] >= 2:
            parent = next(r["id"] for r in records if depth.get(r["id"]) == 1)
            rec["parent"] = parent
        depth[rec["id"]] = depth[parent] + 1
    return load_cached(write_folder(folder, records, workers=3))


def panels(fig: Figure) -> list:
    return [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]


def colour_bars(fig: Figure) -> list:
    return [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["MPLBACKEND=svg", "matplotlib.use('pdf')"])
def test_importing_and_drawing_keep_the_callers_backend(how: str, tmp_path: Path) -> None:
    world = write_folder(tmp_path / "w", random_records(random.Random(1), 30))
    chosen = "svg" if how.startswith("MPLBACKEND") else "pdf"
    code = textwrap.dedent(f"""
        import sys
        import matplotlib
        {"matplotlib.use('pdf')" if chosen == "pdf" else ""}
        before = matplotlib.get_backend()
        import dream_gym.evaluation.plots as plots
        after_import = matplotlib.get_backend()
        from dream_gym.world.registry import load_cached
        world = load_cached({str(world)!r})
        plots.plot_tree(world, {{"some policy": [0, 1, 2]}}, {str(tmp_path / "tree.png")!r})
        plots.tree_figure(world, {{}})
        print(before, after_import, matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules)
    """)
    env = {**os.environ, "MPLBACKEND": "svg"} if chosen == "svg" else {
        k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [chosen, chosen, chosen, "False"]  # never switched, pyplot never imported
    assert (tmp_path / "tree.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.slow
@pytest.mark.parametrize("failed", [True, False])
def test_the_tree_figure_is_readable(failed: bool, tmp_path: Path) -> None:
    world = shallow_world(tmp_path / "w", failed)
    rng = np.random.default_rng(0)
    revealed = {"greedy (beta 0.5)": [0, *rng.choice(np.arange(1, world.size), 10, replace=False)],
                "fixed (beta 0.5)": [0, *range(1, 8)], "ucb (beta 0.5)": list(range(world.size))}
    fig = tree_figure(world, revealed)
    fig.canvas.draw()  # ticks and legends as they are drawn
    drawn = panels(fig)
    assert len(drawn) == len(revealed)
    # exactly one colour bar for the whole figure, labelled with what the colour means
    [bar] = colour_bars(fig)
    assert bar.get_ylabel().startswith("q (0 = baseline, 1 = world best")
    q = tree_quality(world)
    for ax, nodes in zip(drawn, revealed.values(), strict=True):
        low, high = sorted(ax.get_ylim())
        ticks = [t for t in ax.get_yticks() if low <= t <= high]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks  # whole depths only
        assert ax.get_ylim()[0] > ax.get_ylim()[1]  # depth grows downwards, the root on top
        legend = ax.get_legend()
        labels = [t.get_text() for t in legend.get_texts()]
        artists = {c.get_label(): c for c in ax.collections if isinstance(c, PathCollection)}
        for label in labels:  # every entry is an artist that drew at least one point
            assert label in artists and len(artists[label].get_offsets()) > 0, label
        scored = [i for i in set(nodes) if np.isfinite(q[i])]
        best = max(scored, key=lambda i: q[i])
        [star] = [label for label in labels if label.startswith("best revealed")]
        assert star == f"best revealed (q {q[best]:.2f}, depth {int(artists[star].get_offsets()[0][1])})"
        has_failed = any(not np.isfinite(q[i]) for i in nodes)
        assert ("revealed, failed (no score)" in labels) == has_failed  # no entry for what is not drawn
        assert ("recorded, not revealed" in labels) == (len(set(nodes)) < world.size)
    out = tmp_path / "tree.png"
    fig.savefig(out, dpi=80)
    assert out.read_bytes().startswith(PNG_MAGIC)


def test_draw_tree_draws_on_the_callers_axes(tmp_path: Path) -> None:
    world = shallow_world(tmp_path / "w", failed=True)
    fig = Figure()
    ax = fig.subplots()
    mappable = draw_tree(ax, world, list(range(6)))
    assert fig.axes == [ax] and ax.collections  # drawn there; no figure of its own, no colour bar
    fig.colorbar(mappable, ax=ax)  # the caller adds one if it wants
    assert len(colour_bars(fig)) == 1


@pytest.mark.slow
def test_an_unknown_world_to_plot_names_the_nearest(tmp_path: Path) -> None:
    from dream_gym.evaluation.evaluate import evaluate
    from dream_gym.evaluation.plots import plot_results

    for seed in range(2):
        write_folder(tmp_path / "worlds" / f"world-{seed}", random_records(random.Random(seed), 20), world_id=f"world-{seed}")
    out = tmp_path / "results.jsonl"
    evaluate(["greedy"], str(tmp_path / "worlds"), (0.5,), backend="serial", task_timeout=None, out=out, progress=False)
    with pytest.raises(LookupError, match=r"no episode on world 'world-7'; did you mean 'world-\d'\?$"):
        plot_results(out, tmp_path / "plots", world="world-7")
    for beta in (7.0, -0.1, float("nan")):  # the closest beta of the results would be an arbitrary one
        with pytest.raises(ValueError, match="beta must be in .0, 1."):
            plot_results(out, tmp_path / "plots", beta=beta)
    assert not (tmp_path / "plots").exists()
