"""Figures of an evaluation (matplotlib), drawn without pyplot: importing this module or calling
its functions never changes the caller's backend (a notebook keeps its inline figures).

Each figure comes two ways: a ``*_figure`` function returns a :class:`matplotlib.figure.Figure`
(show it in a notebook, save it yourself), and a ``plot_*`` function writes it to a PNG and returns
the path. One panel can be drawn on an axes of your own: :func:`draw_tree`, :func:`draw_pareto`,
:func:`draw_ratchet` take the ``ax`` first.

* :func:`anytime_figure` / :func:`plot_anytime`: best quality q reached vs attempts and vs rounds,
  per policy (mean over its worlds and betas), recomputed by replaying each episode's recorded
  batches on its world.
* :func:`pareto_figure` / :func:`plot_pareto`: per world, each policy's (work, attainment) points
  over the beta grid and their Pareto front (the staircase whose area is the v2 ``auc``).
* :func:`tree_figure` / :func:`plot_tree`: one world's recorded tree with the nodes a policy
  revealed, coloured by q (one colour bar for the figure), the best one starred, depth downwards.
* :func:`plot_results`: all three from a results file written by ``dream-gym eval --out``.
* :func:`ratchet_figure` / :func:`plot_ratchet`: the dreaming loop's ratchet (every version's
  score per phase, the deployed one marked) from a ``dream.jsonl`` ledger.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.collections import LineCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from dream_gym.evaluation.results import read_results
from dream_gym.replay.score import pareto_front
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.settings import DEFAULT_BETA, ReplaySettings
from dream_gym.world.registry import load_cached, resolve_world
from dream_gym.world.tree import World

MAX_PARETO_PANELS = 9


@dataclass(frozen=True)
class Trace:
    """An episode's best q after each round: ``attempts[i]``, ``rounds[i]``, ``best_q[i]``
    (index 0 is the state before the first batch)."""

    attempts: tuple[int, ...]
    rounds: tuple[int, ...]
    best_q: tuple[float, ...]
    revealed: tuple[int, ...]  # world indices of the revealed nodes, in reveal order


def world_of_row(row: Mapping[str, Any], cache: dict[str, World] | None = None) -> World:
    """The world an episode ran on: its recorded folder, else its id resolved by the registry."""
    key = str(row.get("world_path") or row["world"])
    if cache is not None and key in cache:
        return cache[key]
    path = row.get("world_path")
    world = load_cached(path) if path and Path(path).is_dir() else resolve_world(str(row["world"]))
    if cache is not None:
        cache[key] = world
    return world


def replay_trace(world: World, row: Mapping[str, Any]) -> Trace:
    """Replay an episode's recorded batches on its world (the same rules, so the same numbers)."""
    session = ReplaySession(world, ReplaySettings.from_row(row))  # the W, betas and limits it was replayed at
    attempts, rounds, best = [0], [0], [session.best_q]
    for number, batch in enumerate(row.get("batches") or [], 1):
        try:
            session.step(batch)
        except ValueError as exc:  # IllegalBatchError among them: a row edited, or of another world
            raise ValueError(f"the episode of {row.get('policy')} on {row.get('world')} at beta {row.get('beta')} "
                             f"does not replay on its world: batch {number} {batch}: {exc}") from None
        attempts.append(session.attempts)
        rounds.append(session.rounds)
        best.append(session.best_q)
    return Trace(tuple(attempts), tuple(rounds), tuple(best), tuple(session.replay.order))


def _anytime_curve(traces: Sequence[Trace], axis: str) -> tuple[np.ndarray, np.ndarray]:
    """Mean over episodes of the best q reached by x attempts (or rounds), held after the end."""
    xs_all = [np.asarray(getattr(t, axis)) for t in traces]
    top = max(int(x[-1]) for x in xs_all)
    grid = np.arange(top + 1)
    curves = []
    for xs, trace in zip(xs_all, traces, strict=True):
        q = np.asarray(trace.best_q, dtype=float)
        # the last state with x <= grid value (xs is non-decreasing; ties keep the later state)
        idx = np.searchsorted(xs, grid, side="right") - 1
        curves.append(q[idx])
    return grid, np.mean(curves, axis=0)


def _policies(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(r["policy"]) for r in rows))


def anytime_figure(rows: Sequence[Mapping[str, Any]], cache: dict[str, World] | None = None) -> Figure:
    """Best q vs attempts and vs rounds, one line per policy (mean over its episodes)."""
    cache = {} if cache is None else cache
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax_a, ax_r = fig.subplots(1, 2)
    for policy in _policies(rows):
        traces = [replay_trace(world_of_row(r, cache), r) for r in rows if r["policy"] == policy]
        for ax, axis in ((ax_a, "attempts"), (ax_r, "rounds")):
            grid, mean = _anytime_curve(traces, axis)
            ax.step(grid, mean, where="post", label=policy)
    for ax, label in ((ax_a, "attempts"), (ax_r, "rounds")):
        ax.set_xlabel(label)
        ax.set_ylabel("best quality q (mean over worlds and betas)")
        ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    ax_a.set_title("anytime: quality vs attempts")
    ax_r.set_title("anytime: quality vs rounds")
    ax_r.legend(loc="lower right", fontsize="small")
    return fig


def plot_anytime(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str],
                 cache: dict[str, World] | None = None) -> Path:
    """:func:`anytime_figure` written to ``path`` (PNG)."""
    return _save(anytime_figure(rows, cache), path)


def draw_pareto(ax: Axes, rows: Sequence[Mapping[str, Any]], world: str,
                colors: Mapping[str, str] | None = None) -> None:
    """One world's panel: each policy's (work, attainment) points over beta and its front."""
    colors = colors or {p: f"C{i % 10}" for i, p in enumerate(_policies(rows))}
    for policy, color in colors.items():
        points = [(float(r["work"]), float(r["attainment"])) for r in rows
                  if r["world"] == world and r["policy"] == policy]
        if not points:
            continue
        ax.scatter([w for w, _ in points], [a for _, a in points], color=color, s=14, alpha=0.6)
        front = [(min(max(w, 0.0), 1.0), min(max(a, 0.0), 1.0)) for w, a in pareto_front(points)]
        xs, ys = [front[0][0]], [0.0]
        for i, (w, a) in enumerate(front):
            xs += [w, front[i + 1][0] if i + 1 < len(front) else 1.0]
            ys += [a, a]
        ax.plot(xs, ys, color=color, drawstyle="default", label=policy)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.05)
    ax.set_title(world, fontsize="small")
    ax.set_xlabel("work (attempts / recorded attempts)")
    ax.set_ylabel("attainment")
    ax.grid(alpha=0.3)


def pareto_figure(rows: Sequence[Mapping[str, Any]]) -> Figure:
    """Per world (first 9), each policy's (work, attainment) points over beta and its front."""
    worlds = list(dict.fromkeys(str(r["world"]) for r in rows))[:MAX_PARETO_PANELS]
    cols = min(3, len(worlds))
    nrows = math.ceil(len(worlds) / cols)
    fig = Figure(figsize=(4.2 * cols, 3.8 * nrows), layout="constrained")
    axes = fig.subplots(nrows, cols, squeeze=False)
    colors = {p: f"C{i % 10}" for i, p in enumerate(_policies(rows))}
    for ax, world in zip(axes.flat, worlds, strict=False):
        draw_pareto(ax, rows, world, colors)
    for ax in list(axes.flat)[len(worlds):]:
        ax.set_visible(False)
    axes.flat[0].legend(loc="lower right", fontsize="small")
    fig.suptitle("Pareto fronts over beta (v2 auc = area under each staircase)")
    return fig


def plot_pareto(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str]) -> Path:
    """:func:`pareto_figure` written to ``path`` (PNG)."""
    return _save(pareto_figure(rows), path)


def tree_layout(world: World) -> tuple[np.ndarray, np.ndarray]:
    """(x, depth) of every node: leaves spaced in depth-first order, parents centred over children."""
    n = world.size
    x = np.zeros(n)
    depth = np.zeros(n, dtype=np.int64)
    next_leaf = 0.0
    stack: list[tuple[int, bool]] = [(0, False)]
    while stack:  # iterative post-order: recorded chains can be very deep
        node, expanded = stack.pop()
        children = world.children_of(node)
        if expanded:
            x[node] = (x[children[0]] + x[children[-1]]) / 2
            continue
        if len(children) == 0:
            x[node] = next_leaf
            next_leaf += 1.0
            continue
        stack.append((node, True))
        for child in children[::-1]:
            depth[child] = depth[node] + 1
            stack.append((int(child), False))
    return x, depth


TREE_CMAP = "viridis"


def tree_quality(world: World) -> np.ndarray:
    """q of every node (0 = the baseline, 1 = the world's best; NaN: a failed attempt)."""
    span = max(world.best_score - world.baseline_score, 1e-12)
    return np.asarray((world.score - world.baseline_score) / span, dtype=float)


Q_FLOOR = -0.5  # q below this (far worse than the baseline) all get the colour of the floor


def tree_norm(worlds_q: Sequence[np.ndarray]) -> Normalize:
    """The colour scale of q: from min(0, the lowest q drawn) to 1, but not below Q_FLOOR."""
    finite = [float(np.nanmin(q)) for q in worlds_q if q.size and np.isfinite(q).any()]
    return Normalize(vmin=max(Q_FLOOR, min([0.0, *finite])), vmax=1.0, clip=True)


def draw_tree(ax: Axes, world: World, nodes: Sequence[int], norm: Normalize | None = None,
              title: str | None = None, layout: tuple[np.ndarray, np.ndarray] | None = None) -> ScalarMappable:
    """One panel: the recorded tree in grey, depth downwards (integer ticks), the ``nodes``
    revealed coloured by q, failed ones as crosses, the best one starred; a legend of what is drawn.

    Returns the colour mapping of q (for one colour bar shared by every panel: see :func:`tree_figure`).
    """
    x, depth = layout if layout is not None else tree_layout(world)
    parents = world.parent
    q = tree_quality(world)
    shown = np.asarray(sorted({int(i) for i in nodes}), dtype=np.int64)
    norm = norm or tree_norm([q[shown]])
    size = 18 if world.size <= 500 else 5
    segments = [[(x[p], depth[p]), (x[i], depth[i])] for i, p in enumerate(parents) if p >= 0]
    if segments:
        ax.add_collection(LineCollection(segments, colors="0.85", linewidths=0.6, zorder=1))
    hidden = np.setdiff1d(np.arange(world.size), shown)
    if len(hidden):
        ax.scatter(x[hidden], depth[hidden], s=size, c="0.8", zorder=2, label="recorded, not revealed")
    if len(shown):
        edges = [[(x[parents[i]], depth[parents[i]]), (x[i], depth[i])] for i in shown if parents[i] >= 0]
        if edges:
            ax.add_collection(LineCollection(edges, colors="tab:blue", linewidths=1.2, zorder=3))
        scored = shown[np.isfinite(q[shown])]
        failed = shown[~np.isfinite(q[shown])]
        if len(scored):
            ax.scatter(x[scored], depth[scored], s=size * 2, c=q[scored], cmap=TREE_CMAP, norm=norm, zorder=4,
                       edgecolors="k", linewidths=0.3, label="revealed (colour: q)")
        if len(failed):
            ax.scatter(x[failed], depth[failed], s=size * 2, marker="x", c="tab:red", zorder=4,
                       linewidths=1.0, label="revealed, failed (no score)")
        if len(scored):
            best = int(scored[int(np.argmax(q[scored]))])
            ax.scatter([x[best]], [depth[best]], marker="*", s=size * 12, c="red", edgecolors="k",
                       linewidths=0.5, zorder=5, label=f"best revealed (q {q[best]:.2f}, depth {int(depth[best])})")
    ax.set_title(title or f"{world.id}: {len(shown)} of {world.size} nodes revealed", fontsize="small")
    ax.set_xlabel("recorded nodes, depth-first")
    ax.set_ylabel("depth")
    ax.set_xticks([])
    ax.autoscale()
    ax.set_ylim(float(depth.max()) + 0.8, -0.8)  # the root on top, depth downwards
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if ax.get_legend_handles_labels()[0]:  # under the panel, where it hides no node
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, fontsize="x-small", frameon=False)
    return ScalarMappable(norm=norm, cmap=TREE_CMAP)


def tree_figure(world: World, revealed: Mapping[str, Sequence[int]]) -> Figure:
    """The recorded tree with each policy's revealed nodes, one panel each, one colour bar.

    Args:
        revealed: policy label -> world indices of the nodes it revealed.
    """
    layout = tree_layout(world)
    q = tree_quality(world)
    panels = list(revealed.items()) or [("recorded tree", [])]
    cols = min(3, len(panels))
    nrows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(5.5 * cols + 1.0, 4.5 * nrows), layout="constrained")
    axes = fig.subplots(nrows, cols, squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    shown = [np.asarray(sorted({int(i) for i in nodes}), dtype=np.int64) for _, nodes in panels]
    norm = tree_norm([q[s] for s in shown])
    used = list(axes.flat[:len(panels)])
    mappable = None
    for ax, (label, nodes) in zip(used, panels, strict=True):
        title = f"{label}: {len(set(nodes))} of {world.size} nodes revealed"
        mappable = draw_tree(ax, world, nodes, norm=norm, title=title, layout=layout)
    if mappable is not None and any(np.isfinite(q[s]).any() for s in shown):
        lowest = min(float(np.nanmin(q[s])) for s in shown if np.isfinite(q[s]).any())
        floor = float(norm.vmin if norm.vmin is not None else Q_FLOOR)
        below = lowest < floor  # lower q are drawn at the floor: the bar says so
        fig.colorbar(mappable, ax=used, shrink=0.85, extend="min" if below else "neither",
                     label=f"q (0 = baseline, 1 = world best{f'; ▼ below {floor:g}' if below else ''})")
    fig.suptitle(f"world {world.id}")
    return fig


def plot_tree(world: World, revealed: Mapping[str, Sequence[int]], path: str | os.PathLike[str]) -> Path:
    """:func:`tree_figure` written to ``path`` (PNG)."""
    return _save(tree_figure(world, revealed), path)


def _save(fig: Figure, path: str | os.PathLike[str]) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return out


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def plot_results(results_path: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                 world: str | None = None, beta: float = DEFAULT_BETA,
                 notes: list[str] | None = None) -> list[Path]:
    """anytime.png, pareto.png and tree_<world>.png from a results file; returns their paths.

    The tree shows ``world`` (default: the first world of the results) with, for each policy,
    the nodes revealed by its episode whose beta is closest to ``beta``. ``notes`` gets what a
    figure leaves out or chooses (the worlds past the Pareto figure's panels, a beta other than
    the one asked for).
    """
    if not 0.0 <= beta <= 1.0:  # NaN too: the closest beta would be an arbitrary one
        raise ValueError(f"beta must be in [0, 1] (the tree shows the episode of the beta closest to it), got {beta}")
    rows = read_results(results_path)
    if not rows:
        raise ValueError(f"{results_path}: no results to plot")
    world_id = world or str(rows[0]["world"])
    on_world = [r for r in rows if r["world"] == world_id]
    if not on_world:  # refused before any figure is written
        import difflib

        worlds = list(dict.fromkeys(str(r["world"]) for r in rows))  # in the file's order: the default is its first
        near = difflib.get_close_matches(world_id, worlds, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else f" (it holds {len(worlds)} worlds, the first {worlds[0]!r})"
        raise LookupError(f"{results_path}: no episode on world {world_id!r}{hint}")
    out = Path(out_dir)
    cache: dict[str, World] = {}
    paths = [plot_anytime(rows, out / "anytime.png", cache), plot_pareto(rows, out / "pareto.png")]
    revealed: dict[str, Sequence[int]] = {}
    drawn: set[float] = set()
    for policy in _policies(on_world):
        episodes = [r for r in on_world if r["policy"] == policy]
        pick = min(episodes, key=lambda r: (abs(float(r["beta"]) - beta), float(r["beta"])))
        drawn.add(float(pick["beta"]))
        revealed[f"{policy} (beta {float(pick['beta']):g})"] = replay_trace(world_of_row(pick, cache), pick).revealed
    if notes is not None:
        world_count = len(dict.fromkeys(str(r["world"]) for r in rows))
        if world_count > MAX_PARETO_PANELS:
            notes.append(f"pareto.png draws the first {MAX_PARETO_PANELS} of the {world_count} worlds")
        if drawn != {beta}:
            notes.append(f"the tree shows beta {', '.join(f'{b:g}' for b in sorted(drawn))}, the closest to "
                         f"{beta:g} in the results")
    paths.append(plot_tree(world_of_row(on_world[0], cache), revealed, out / f"tree_{_safe(world_id)}.png"))
    return paths


REFUSED_STYLE = {"invalid": "x", "failed": "X", "nondeterministic": "d"}


def draw_ratchet(ax: Axes, ledger: Sequence[Mapping[str, Any]]) -> None:
    """The dreaming ratchet from a ``dream.jsonl`` ledger: every version's score on the history,
    per phase (the incumbent as a square, revisions as dots, refused ones in red at their score
    or, without one, below the lowest), the deployed version of each phase as a star, and the
    deployed score across phases as a step line; the legend lists only what is drawn."""
    versions = [r for r in ledger if r.get("type") == "revision"]
    phases = {int(r["phase"]): r for r in ledger if r.get("type") == "phase"}
    if not versions:
        raise ValueError("the ledger holds no versions to plot")
    scored = [float(r["score"]) for r in versions if r.get("score") is not None]
    floor = (min(scored) - 0.05 * (max(scored) - min(scored) + 1e-9)) if scored else 0.0
    per_phase = max(int(r["m"]) for r in versions) + 1
    drawn: set[str] = set()
    steps_x: list[float] = []
    steps_y: list[float] = []
    for phase in sorted({int(r["phase"]) for r in versions}):
        rows = sorted((r for r in versions if int(r["phase"]) == phase), key=lambda r: int(r["m"]))
        for row in rows:
            x = phase + 0.8 * int(row["m"]) / per_phase
            y = floor if row.get("score") is None else float(row["score"])
            status = str(row.get("status"))
            if status in REFUSED_STYLE:
                ax.scatter(x, y, marker=REFUSED_STYLE[status], color="tab:red", s=30)
                drawn.add("refused")
            elif status == "incumbent":
                ax.scatter(x, y, marker="s", color="black", s=30, zorder=3)
                drawn.add("incumbent")
            else:
                ax.scatter(x, y, marker="o", color="tab:blue", s=20)
                drawn.add("revision")
        done = phases.get(phase)
        if done is not None:
            deployed = next((r for r in rows if int(r["m"]) == int(done["deployed_m"])), None)
            if deployed is not None and deployed.get("score") is not None:
                x = phase + 0.8 * int(deployed["m"]) / per_phase
                ax.scatter(x, deployed["score"], marker="*", color="gold", edgecolor="black", s=180, zorder=4)
                drawn.add("deployed")
                steps_x += [phase, phase + 0.8]
                steps_y += [float(deployed["score"])] * 2
    if steps_x:
        ax.plot(steps_x, steps_y, color="gold", linewidth=1.5, zorder=2)
    legend = {
        "incumbent": Line2D([], [], marker="s", color="black", linestyle="", label="incumbent (version 0)"),
        "revision": Line2D([], [], marker="o", color="tab:blue", linestyle="", label="revision"),
        "refused": Line2D([], [], marker="x", color="tab:red", linestyle="",
                          label="refused (invalid / failed / nondet.)"),
        "deployed": Line2D([], [], marker="*", color="gold", markeredgecolor="black", markersize=12, linestyle="",
                           label="deployed"),
    }
    ax.legend(handles=[handle for kind, handle in legend.items() if kind in drawn], fontsize=8, loc="best")
    ax.set_xticks(sorted({int(r["phase"]) for r in versions}))
    ax.set_xlabel("phase (versions left to right)")
    ax.set_ylabel("score on the history")
    ax.set_title("The dreaming ratchet")
    ax.grid(alpha=0.3)


def ratchet_figure(ledger: Sequence[Mapping[str, Any]]) -> Figure:
    """:func:`draw_ratchet` on a figure of its own."""
    phases = len({r["phase"] for r in ledger if r.get("type") == "revision"})
    fig = Figure(figsize=(max(6.0, 1.2 * phases + 4), 4.2), layout="constrained")
    draw_ratchet(fig.subplots(), ledger)
    return fig


def plot_ratchet(ledger: Sequence[Mapping[str, Any]], path: str | os.PathLike[str]) -> Path:
    """:func:`ratchet_figure` written to ``path`` (PNG)."""
    return _save(ratchet_figure(ledger), path)


__all__ = ["Trace", "anytime_figure", "draw_pareto", "draw_ratchet", "draw_tree", "pareto_figure", "plot_anytime",
           "plot_pareto", "plot_ratchet", "plot_results", "plot_tree", "ratchet_figure", "replay_trace", "tree_figure",
           "tree_layout", "tree_quality"]
