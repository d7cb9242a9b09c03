"""The revealed tree of a prefix view as an RGB image (``ReplayEnv(render_mode="rgb_array")``).

Drawn on matplotlib's Agg canvas through ``matplotlib.figure.Figure`` directly: pyplot is never
imported, so the caller's backend and open figures are untouched, and nothing needs a display.
Only the view is read, so an image shows nothing a policy could not see.
"""

from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from dream_gym.replay.view import PrefixView

HEIGHT, WIDTH = 480, 640  # pixels of every frame: videos need one size
_DPI = 100


def tree_layout(view: PrefixView) -> tuple[np.ndarray, np.ndarray]:
    """x and y of every revealed node: leaves side by side in depth-first order, a parent above
    the middle of its children, y = -depth (the root on top)."""
    count = len(view.nodes)
    x = np.zeros(count)
    y = -np.array([node.depth for node in view.nodes], dtype=np.float64)
    next_leaf = 0.0
    stack: list[tuple[int, bool]] = [(0, False)]
    while stack:  # iterative: recorded chains can be thousands of nodes deep
        node_id, children_done = stack.pop()
        children = view.children(node_id)
        if not children:
            x[node_id], next_leaf = next_leaf, next_leaf + 1.0
        elif children_done:
            x[node_id] = (x[children[0]] + x[children[-1]]) / 2
        else:
            stack.append((node_id, True))
            stack.extend((child, False) for child in reversed(children))
    return x, y


def tree_image(view: PrefixView) -> np.ndarray:
    """A ``(480, 640, 3)`` uint8 image of the revealed tree: edges parent to child, nodes coloured
    by raw score (the revealed range; grey crosses for attempts without a score), the frontier
    ringed in red, the best revealed node starred, and the counters in the title."""
    figure = Figure(figsize=(WIDTH / _DPI, HEIGHT / _DPI), dpi=_DPI)
    canvas = FigureCanvasAgg(figure)
    axes = figure.add_axes((0.02, 0.02, 0.96, 0.88))
    axes.set_axis_off()
    x, y = tree_layout(view)
    nodes = view.nodes
    edges = [((x[n.parent], y[n.parent]), (x[n.id], y[n.id])) for n in nodes if n.parent is not None]
    if edges:
        axes.add_collection(LineCollection(edges, colors="0.6", linewidths=0.8, zorder=1))
    scored = np.array([n.score is not None for n in nodes])
    scores = np.array([n.score if n.score is not None else np.nan for n in nodes], dtype=np.float64)
    if scored.any():
        axes.scatter(x[scored], y[scored], c=scores[scored], cmap="viridis", s=18, zorder=2)
    if not scored.all():
        axes.scatter(x[~scored], y[~scored], marker="x", color="0.5", s=14, zorder=2)
    frontier = np.array(view.frontier, dtype=np.int64)
    if frontier.size:
        axes.scatter(x[frontier], y[frontier], s=60, facecolors="none", edgecolors="red", linewidths=1.2, zorder=3)
    best = view.best()
    axes.scatter([x[best.id]], [y[best.id]], marker="*", s=160, color="gold", edgecolors="black", zorder=4)
    axes.set_xlim(-1.0, max(1.0, float(x.max()) + 1.0))
    axes.set_ylim(min(-1.0, float(y.min()) - 0.5), 0.5)
    best_text = "none" if best.score is None else f"{best.score:.6g}"
    figure.suptitle(f"round {view.rounds}   attempts {view.attempts}   W={view.workers}   "
                    f"baseline {view.baseline_score:.6g}   best revealed {best_text}", fontsize=10)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[:, :, :3].copy()


__all__ = ["HEIGHT", "WIDTH", "tree_image", "tree_layout"]
