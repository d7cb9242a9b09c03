"""Discovery statistics of a world: does exploration matter on it? (``dream-gym worlds stats``)

:func:`world_stats` measures one world; :func:`stats_table` renders several side by side
(rich, markdown or JSON). Definitions (q is the normalised quality of V, docs/concepts/score.md: 0 at the
baseline, 1 at the best recorded score; "attempts" are the non-root nodes, in creation order):

* ``q_first_w`` / ``q_first_10``: the best q among the root and the first W / first 10 attempts.
* ``new_bests``: attempts that beat every score before them (the baseline included).
* ``best_depth``: depth of the best node (the first one recorded on ties).
* ``beat_parent_share``: attempts with a score above their parent's (a scored attempt whose
  parent has no score counts: it repaired a failure).
* ``invalid_share``: attempts without a valid score.
* ``root_branching``: children of the root (branches the run opened).
* ``limit``: the oracle limit (:func:`dream_gym.replay.oracle.oracle_limit`) at W, beta1, beta2 and the
  frontier rule; ``stop_r[r]``: the limit for policies that stop after at most r rounds, for
  r = 1, 2, 3; ``limit_minus_stop_r[r]``: what stopping there gives away.
* ``answered[p]`` / ``cut_short[p]``: coverage of the reference policy p
  (:data:`COVERAGE_POLICIES`, docs/concepts/coverage.md), replayed in request mode at W and the
  frontier rule over the betas 0, 0.1, ..., 1: the share of its requests the world answers, and
  the share of its episodes the world cut short (a batch of requests it could not answer).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dream_gym.infrastructure.printable import printable
from dream_gym.policies import make_policy
from dream_gym.policy import run_episode
from dream_gym.replay.oracle import oracle_limit_at
from dream_gym.replay.score import DEFAULT_BETA_GRID
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.settings import ReplaySettings
from dream_gym.world.tree import World

STOP_ROUNDS = (1, 2, 3)
FIRST_ATTEMPTS = 10
#: The reference policies whose coverage the statistics give: greedy, the built-in that goes
#: deepest (the one replay's record holds least of), and OpenEvolve's own parent sampling.
COVERAGE_POLICIES = ("greedy", "openevolve")


@dataclass(frozen=True)
class WorldStats:
    world_id: str
    task: str
    nodes: int
    workers: int
    frontier: str
    beta1: float
    beta2: float
    q_first_w: float
    q_first_10: float
    new_bests: int
    best_depth: int
    beat_parent_share: float
    invalid_share: float
    root_branching: int
    limit: float
    limit_exact: bool
    limit_gap: float
    stop_r: dict[int, float] = field(default_factory=dict)
    limit_minus_stop_r: dict[int, float] = field(default_factory=dict)
    answered: dict[str, float] = field(default_factory=dict)  # per reference policy (request mode)
    cut_short: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("stop_r", "limit_minus_stop_r"):
            data[key] = {str(k): v for k, v in data[key].items()}
        return data


def quality(world: World) -> np.ndarray:
    """q of every node (NaN where unscored)."""
    span = world.best_score - world.baseline_score
    if span <= 0:
        return np.where(np.isnan(world.score), np.nan, 0.0)
    return (world.score - world.baseline_score) / span


def depths(world: World) -> np.ndarray:
    depth = np.zeros(world.size, dtype=np.int64)
    parent = world.parent
    for i in range(1, world.size):  # parents come before children
        depth[i] = depth[parent[i]] + 1
    return depth


def _best_q_of_first(q: np.ndarray, count: int) -> float:
    head = q[: count + 1]
    valid = head[~np.isnan(head)]
    return float(valid.max()) if valid.size else 0.0


def reference_coverage(world: World, settings: ReplaySettings, policy: str) -> tuple[float, float]:
    """Coverage of the built-in ``policy`` on ``world`` in request mode at ``settings`` (W, rule),
    over the default beta grid: the share of its requests the world answered (all episodes
    pooled) and the share of its episodes the world cut short."""
    hits = asked = cut = 0
    for beta in DEFAULT_BETA_GRID:
        session = ReplaySession(world, settings, beta=beta, requests=True)
        result = run_episode(make_policy(policy), session)
        hits += result.attempts
        asked += result.attempts + (result.refused or 0)
        cut += bool(result.cut_short)
    return (hits / asked if asked else 1.0), cut / len(DEFAULT_BETA_GRID)


def world_stats(world: World, settings: ReplaySettings | None = None) -> WorldStats:
    """The statistics of ``world`` (see the module docstring) at ``settings``' W, beta1, beta2
    and frontier rule (default: the defaults, the world's recorded W and rule)."""
    settings = settings or ReplaySettings()
    w, rule = settings.workers_on(world), settings.frontier_on(world)
    q = quality(world)
    scores = world.score
    attempts = world.size - 1
    running = world.baseline_score
    new_bests = 0
    for s in scores[1:].tolist():
        if s == s and s > running:  # s == s: a score, not NaN
            new_bests += 1
            running = s
    parent_scores = scores[world.parent[1:]] if attempts else np.zeros(0)
    child_scores = scores[1:]
    scored = ~np.isnan(child_scores)
    beats = child_scores > np.where(np.isnan(parent_scores), -np.inf, parent_scores)  # NaN > x is False
    valid = ~np.isnan(scores)
    best_index = int(np.flatnonzero(valid & (scores == np.nanmax(scores)))[0]) if valid.any() else 0
    limit = oracle_limit_at(world, settings)
    stops = {r: oracle_limit_at(world, settings.replace(max_rounds=r)).value for r in STOP_ROUNDS}
    coverage = {p: reference_coverage(world, settings.resolved(world), p) for p in COVERAGE_POLICIES}
    return WorldStats(
        world_id=world.id,
        task=world.task_name,
        nodes=world.size,
        workers=w,
        frontier=rule,
        beta1=float(settings.beta1),
        beta2=float(settings.beta2),
        q_first_w=_best_q_of_first(q, w),
        q_first_10=_best_q_of_first(q, FIRST_ATTEMPTS),
        new_bests=new_bests,
        best_depth=int(depths(world)[best_index]),
        beat_parent_share=float(beats.mean()) if attempts else 0.0,
        invalid_share=float((~scored).mean()) if attempts else 0.0,
        root_branching=int(world.children_start[1] - world.children_start[0]),
        limit=limit.value,
        limit_exact=limit.exact,
        limit_gap=limit.gap,
        stop_r=stops,
        limit_minus_stop_r={r: limit.value - v for r, v in stops.items()},
        answered={p: answered for p, (answered, _) in coverage.items()},
        cut_short={p: cut for p, (_, cut) in coverage.items()},
    )


# -- rendering ----------------------------------------------------------------------------
def _rows(stats: Sequence[WorldStats]) -> list[tuple[str, list[str]]]:
    def f(x: float, digits: int = 3) -> str:
        return "n/a" if math.isnan(x) else f"{x:.{digits}f}"

    def pct(x: float) -> str:
        return f"{100 * x:.0f}%"

    rows = [
        ("task", [printable(s.task) for s in stats]),  # the world's own text: escaped and cut
        ("nodes", [str(s.nodes) for s in stats]),
        ("W", [str(s.workers) for s in stats]),
        ("q after first W attempts", [f(s.q_first_w) for s in stats]),
        (f"q after first {FIRST_ATTEMPTS} attempts", [f(s.q_first_10) for s in stats]),
        ("successive new bests", [str(s.new_bests) for s in stats]),
        ("depth of best node", [str(s.best_depth) for s in stats]),
        ("attempts beating parent", [pct(s.beat_parent_share) for s in stats]),
        ("invalid attempts", [pct(s.invalid_share) for s in stats]),
        ("root branching", [str(s.root_branching) for s in stats]),
        ("oracle limit V*", [f(s.limit) + ("" if s.limit_exact else f" (bound, gap {s.limit_gap:.3g})") for s in stats]),
    ]
    for r in STOP_ROUNDS:
        rows.append((f"best V stopping after round {r}", [f(s.stop_r[r]) for s in stats]))
    for r in STOP_ROUNDS:
        rows.append((f"V* - stop after round {r}", [f(s.limit_minus_stop_r[r]) for s in stats]))
    for p in COVERAGE_POLICIES:
        rows.append((f"{p}: requests answered", [pct(s.answered[p]) if p in s.answered else "n/a" for s in stats]))
        rows.append((f"{p}: episodes cut short", [pct(s.cut_short[p]) if p in s.cut_short else "n/a" for s in stats]))
    return rows


def _caption(stats: Sequence[WorldStats]) -> str:
    settings = sorted({(s.beta1, s.beta2) for s in stats})
    betas = "; ".join(f"beta1 {b1:g}, beta2 {b2:g}" for b1, b2 in settings)
    return (f"q: 0 = baseline, 1 = best recorded; V* = the oracle limit (best V any policy can reach; "
            f"{betas}); 'stopping after round r' = the best V of any policy that stops by round r; "
            "'requests answered' / 'episodes cut short': of the policy replayed in request mode over "
            "betas 0-1 (the share of its requests the world holds; of its episodes the world ended)")


def stats_markdown(stats: Sequence[WorldStats], *, one_row_per_world: bool = False) -> str:
    """A markdown table: worlds side by side (a column each), or one row per world."""
    rows = _rows(stats)
    if one_row_per_world:
        header = ["world", *[name for name, _ in rows]]
        body = [[printable(s.world_id), *[cells[i] for _, cells in rows]] for i, s in enumerate(stats)]
    else:
        header = ["statistic", *[printable(s.world_id) for s in stats]]
        body = [[name, *cells] for name, cells in rows]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines) + "\n\n" + _caption(stats) + "\n"


def stats_json(stats: Sequence[WorldStats]) -> str:
    return json.dumps([s.as_dict() for s in stats], indent=2)


def stats_rich(stats: Sequence[WorldStats], width: int | None = None) -> Any:
    """The statistics as rich Tables, then their legend as a paragraph (it wraps at the terminal's
    width, not the narrow tables'); world ids and task names are ``Text`` (shown literally, never
    read as markup) and escaped (:func:`dream_gym.infrastructure.printable.printable`). The worlds
    that do not fit beside each other in ``width`` columns (default: the terminal's) go on in a
    table of their own below, each with the statistics' names: a table wider than the terminal
    would be cut off at its edge, and the worlds beyond it lost."""
    from rich.console import Console, Group
    from rich.text import Text

    width = width or Console().width
    rows = _rows(stats)
    names = max(len(name) for name, _ in rows)
    tables: list[Any] = []
    group: list[int] = []
    for i in range(len(stats)):
        # each column takes its cells' width and 3 more (padding, rule), the table 1 more
        if group and names + sum(_narrowest(stats, rows, j) + 3 for j in [*group, i]) + 4 > width:
            tables.append(_rich_table(stats, rows, group, title=not tables, room=width - names - 4))
            group = []
        group.append(i)
    tables.append(_rich_table(stats, rows, group, title=not tables, room=width - names - 4))
    return Group(*tables, Text(_caption(stats), style="dim"))


def _narrowest(stats: Sequence[WorldStats], rows: list[tuple[str, list[str]]], i: int) -> int:
    """The narrowest the column of world ``i`` is drawn: its widest cell, folded at 18."""
    return min(max(len(printable(stats[i].world_id)), *(len(cells[i]) for _, cells in rows)), 18)


def _folded(world_id: str, width: int) -> str:
    """``world_id`` in lines of at most ``width`` characters, each as long as it can be but broken
    only after a hyphen (at 18: ``lasso-openevolve-`` / ``w4-s0``, not ``lasso-openevolve-w`` /
    ``4-s0``), and within a part only where that part alone is wider than ``width``."""
    lines = [""]
    for part in re.findall(r"[^-]*-|[^-]+$", world_id):
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
        while len(lines[-1]) > width:
            lines[-1:] = [lines[-1][:width], lines[-1][width:]]
    return "\n".join(lines)


def _rich_table(stats: Sequence[WorldStats], rows: list[tuple[str, list[str]]], columns: list[int], *,
                title: bool, room: int) -> Any:
    """The table of the worlds at ``columns`` (positions in ``stats``), in ``room`` columns beside
    the statistics' names: a world's id is broken (:func:`_folded`) only where its share is narrower."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title="World statistics" if title else None, box=box.SIMPLE_HEAD)
    table.add_column("statistic", justify="left", no_wrap=True)
    for i in columns:
        width = _narrowest(stats, rows, i)
        share = max(width, room // len(columns) - 3)  # each column's padding and rule take 3
        table.add_column(Text(_folded(printable(stats[i].world_id), share)), justify="right", overflow="fold",
                         min_width=width)
    for name, cells in rows:
        table.add_row(name, *(Text(cells[i]) for i in columns))
    return table
