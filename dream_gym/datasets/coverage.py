"""Coverage and bias report of a world: what a replay on it can and cannot answer.

:func:`coverage_report` measures a :class:`~dream_gym.world.tree.World` (sizes, scored fraction,
depth and branching, root children, best against baseline, leaves where the original run
stopped, attempts per round of the original run, the oracle limit and what stopping after
rounds 1, 2 and 3 could reach, and how much of the reference policies' requests the record
answers: docs/concepts/coverage.md) and lists warnings; :func:`render_text` prints
it; :func:`plot_tree` draws the tree to a PNG (a matplotlib Figure, no pyplot: the caller's backend is untouched).

Scores here are oriented ("higher is better", as :class:`World` stores them); the report
also gives the raw best for display.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dream_gym.datasets.stats import COVERAGE_POLICIES, STOP_ROUNDS, depths, reference_coverage
from dream_gym.infrastructure.printable import printable
from dream_gym.replay.oracle import oracle_limit
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2
from dream_gym.replay.settings import ReplaySettings
from dream_gym.world.registry import resolve_world
from dream_gym.world.tree import World

# Warn when the best improvement over the baseline is below this share of the scores' scale.
TINY_GAIN = 0.01
# Warn when the record cuts short at least this share of a reference policy's episodes.
MOSTLY_CUT_SHORT = 0.5


@dataclass
class CoverageReport:
    world_id: str
    task: str
    direction: str
    frontier_rule: str
    workers: int
    nodes: int
    attempts: int  # non-root nodes
    scored: int  # non-root nodes with a score
    scored_fraction: float  # of non-root nodes
    failed: int
    max_depth: int
    mean_depth: float
    root_children: int
    expanded_non_root: int  # non-root nodes with at least one child
    max_children_non_root: int
    mean_branching: float  # mean children over expanded non-root nodes
    chain_world: bool  # every non-root node has at most one child ("root + chains")
    leaves: int  # non-root nodes without a recorded child
    leaf_share: float  # leaves / attempts: where the original run stopped
    best_is_leaf: bool  # the run never continued from its best node
    baseline: float  # raw scale
    best: float  # raw scale
    gain: float  # oriented best - baseline (>= 0 when anything beat the baseline)
    score_scale: float
    relative_gain: float  # gain / score_scale
    nodes_beating_baseline: int
    rounds: int | None  # rounds of the original run (None: the world records no rounds)
    attempts_per_round_mean: float | None
    attempts_per_round_max: int | None
    attempts_per_round: dict[int, int] = field(default_factory=dict)
    # the oracle limit at the world's W and frontier rule, default beta1/beta2 (score.py)
    limit: float = float("nan")
    limit_exact: bool = True
    stop_after: dict[int, float] = field(default_factory=dict)  # best V stopping by round r
    # per reference policy, in request mode over betas 0-1: share of its requests the record
    # answers, and of its episodes the record cuts short (dream_gym.datasets.stats.reference_coverage)
    answered: dict[str, float] = field(default_factory=dict)
    cut_short: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    cannot_answer: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["attempts_per_round"] = {str(k): v for k, v in self.attempts_per_round.items()}
        data["stop_after"] = {str(k): v for k, v in self.stop_after.items()}
        return data


def _spread(scores: np.ndarray) -> float:
    """The standard deviation of finite ``scores``, taken on the scores scaled to at most 1 (a
    score near the largest float overflowed numpy's sum of squares, which warned on stderr and
    made the scale infinite)."""
    if scores.size < 2:
        return 0.0
    largest = float(np.max(np.abs(scores)))
    return float(np.std(scores / largest)) * largest if largest > 0 else 0.0


def coverage_report(world: World | str | os.PathLike[str], *, tiny_gain: float = TINY_GAIN) -> CoverageReport:
    """Measure ``world`` (a World or a reference to one) and say what a replay on it can and cannot answer."""
    world = resolve_world(world)  # a name too (it was "'str' object has no attribute 'size'")
    n = world.size
    attempts = n - 1
    counts = np.diff(world.children_start)
    depth = depths(world)
    scores = world.score
    valid = ~np.isnan(scores)
    non_root_valid = valid[1:]
    scored = int(non_root_valid.sum())
    non_root_counts = counts[1:]
    expanded = non_root_counts[non_root_counts > 0]
    leaves = int((non_root_counts == 0).sum())
    baseline = float(world.baseline_score)
    best = float(world.best_score)
    gain = best - baseline
    valid_scores = scores[valid]
    spread = _spread(valid_scores)
    scale = max(abs(baseline), abs(best), spread)
    if scale == 0.0:
        scale = 1.0
    best_index = int(np.nanargmax(scores)) if valid.any() else 0
    rounds_raw = [r.get("round") for r in world.records[1:]]
    per_round: Counter[int] = Counter(
        int(r) for r in rounds_raw if isinstance(r, (int, float)) and not isinstance(r, bool)
    )
    has_rounds = attempts > 0 and len(per_round) > 0 and sum(per_round.values()) == attempts

    def raw(value: float) -> float:
        return -value if world.direction == "minimize" else value

    report = CoverageReport(
        world_id=world.id,
        task=world.task_name,
        direction=world.direction,
        frontier_rule=world.frontier_rule,
        workers=world.workers,
        nodes=n,
        attempts=attempts,
        scored=scored,
        scored_fraction=scored / attempts if attempts else 0.0,
        failed=attempts - scored,
        max_depth=int(depth.max()),
        mean_depth=float(depth[1:].mean()) if attempts else 0.0,
        root_children=int(counts[0]),
        expanded_non_root=int(expanded.size),
        max_children_non_root=int(expanded.max()) if expanded.size else 0,
        mean_branching=float(expanded.mean()) if expanded.size else 0.0,
        chain_world=bool((non_root_counts <= 1).all()),
        leaves=leaves,
        leaf_share=leaves / attempts if attempts else 0.0,
        best_is_leaf=bool(best_index != 0 and counts[best_index] == 0),
        baseline=raw(baseline),
        best=raw(best),
        gain=gain,
        score_scale=scale,
        relative_gain=gain / scale,
        nodes_beating_baseline=int((valid_scores > baseline).sum()),
        rounds=len(per_round) if has_rounds else None,
        attempts_per_round_mean=(attempts / len(per_round)) if has_rounds else None,
        attempts_per_round_max=max(per_round.values()) if has_rounds else None,
        attempts_per_round=dict(sorted(per_round.items())) if has_rounds else {},
    )
    limit = oracle_limit(world, world.workers, DEFAULT_BETA1, DEFAULT_BETA2)
    report.limit, report.limit_exact = limit.value, limit.exact
    report.stop_after = {r: oracle_limit(world, world.workers, max_rounds=r).value for r in STOP_ROUNDS}
    settings = ReplaySettings().resolved(world)
    for policy in COVERAGE_POLICIES:
        report.answered[policy], report.cut_short[policy] = reference_coverage(world, settings, policy)
    _judge(report, tiny_gain)
    return report


def _judge(r: CoverageReport, tiny_gain: float) -> None:
    w = r.warnings
    if r.attempts == 0:
        w.append("the world holds only its root: a replay can reveal nothing")
    if r.gain <= 0:
        w.append(
            "no recorded attempt beats the baseline: normalised quality q is undefined (0/0) and "
            "replay cannot compare policies by quality on this world"
        )
    elif r.relative_gain < tiny_gain:
        w.append(
            f"the best improvement over the baseline is tiny ({r.baseline:.6g} -> {r.best:.6g}, "
            f"{100 * r.relative_gain:.3g}% of the scores' scale {r.score_scale:.4g}); normalised "
            "quality stretches it to full marks, so quality differences on this world may be "
            "evaluator noise"
        )
    if r.attempts and r.scored_fraction < 0.5:
        w.append(f"only {100 * r.scored_fraction:.0f}% of attempts have a score")
    if r.attempts and r.attempts < 10:
        w.append(f"only {r.attempts} attempts: few decisions to evaluate a policy on")
    if r.leaves and r.attempts:
        w.append(
            f"frontier bias: {100 * r.leaf_share:.0f}% of attempts are leaves where the original run "
            "stopped; in replay, 'no recorded child' tells a policy that the original run gave up "
            "there"
        )
    if r.best_is_leaf:
        w.append("the best node is a leaf: the original run never continued from its best candidate")
    if not r.chain_world and r.frontier_rule != "any":
        w.append("non-root nodes have several children but the world's frontier rule is 'leaves': "
                 "later children of an expanded node are unreachable in replay")
    if r.rounds is None and r.attempts:
        w.append("the world records no rounds: attempts per round of the original run are unknown")
    cut = [p for p, share in r.cut_short.items() if share >= MOSTLY_CUT_SHORT]
    if cut:
        w.append(
            f"coverage: the record cuts short most episodes of {', '.join(cut)} in request mode (a batch "
            "asking only for what the run never tried): a policy that goes where the original run did "
            "not finds little recorded here, and its replay score says little about it online"
        )

    r.answers.append(
        f"which of {r.attempts} recorded attempts a policy reveals, in what order, and the best "
        f"score it reaches (up to {r.best:.6g} from baseline {r.baseline:.6g})"
    )
    r.answers.append(f"branching decisions from the root ({_count(r.root_children, 'recorded branch')})")
    if r.chain_world:
        r.answers.append(f"how long to continue each chain (depth up to {r.max_depth})")
    else:
        r.answers.append(
            f"continuations of expanded nodes (up to {r.max_children_non_root} recorded children each)"
        )
    leaves = {0: None, 1: "a child of its one leaf"}.get(r.leaves, f"a child of any of its {r.leaves} leaves")
    beyond = [f"a branch opened more than {_count(r.root_children, 'time')}" if r.root_children else
              "any branch of the root", leaves, "a second attempt where the run made one"]
    said = [b for b in beyond if b]
    r.cannot_answer.append(f"anything beyond the record: {', '.join(said[:-1])}, or {said[-1]}")
    r.cannot_answer.append("outcomes of a different discovery agent, evaluator or prompt")
    if r.rounds is not None and r.attempts_per_round_max is not None and r.attempts_per_round_max <= 1:
        r.cannot_answer.append(
            "how wide rounds would have fared in wall-clock terms: the original run made one attempt "
            "per round"
        )


def _count(n: int, noun: str) -> str:
    """``n noun`` with the noun's plural where ``n`` is not 1 (``1 recorded branch``, ``3 times``)."""
    return f"1 {noun}" if n == 1 else f"{n} {noun}{'es' if noun.endswith(('ch', 's')) else 's'}"


def render_text(report: CoverageReport) -> str:
    """The report as plain text (the body of ``dream-gym worlds show``)."""
    r = report
    lines = [
        f"world {printable(r.world_id)}  (task {printable(r.task)}, {r.direction}, frontier {r.frontier_rule!r}, "
        f"W={r.workers})",
        f"  nodes            {r.nodes} (root + {r.attempts} attempts)",
        f"  scored           {r.scored}/{r.attempts} ({100 * r.scored_fraction:.0f}%), failed {r.failed}",
        f"  depth            max {r.max_depth}, mean {r.mean_depth:.2f}",
        f"  branching        root children {r.root_children}; expanded non-root nodes "
        f"{r.expanded_non_root}, mean children {r.mean_branching:.2f}, max {r.max_children_non_root}"
        f" ({'root + chains' if r.chain_world else 'tree'})",
        f"  best vs baseline {r.best:.6g} vs {r.baseline:.6g} (gain {r.gain:.4g} oriented, "
        f"{100 * r.relative_gain:.3g}% of scale {r.score_scale:.4g}); "
        f"{r.nodes_beating_baseline} node(s) beat the baseline",
        f"  stopped leaves   {r.leaves} ({100 * r.leaf_share:.0f}% of attempts)"
        + ("; the best node is a leaf" if r.best_is_leaf else ""),
    ]
    if r.rounds is not None:
        lines.append(
            f"  original rounds  {r.rounds}, attempts per round mean "
            f"{r.attempts_per_round_mean:.2f}, max {r.attempts_per_round_max}"
        )
    else:
        lines.append("  original rounds  not recorded")
    if not math.isnan(r.limit):
        stops = " / ".join(f"{v:.4f}" for v in r.stop_after.values())
        lines.append(
            f"  oracle limit     V* {r.limit:.4f}{'' if r.limit_exact else ' (upper bound)'} at W={r.workers}, "
            f"beta1 {DEFAULT_BETA1:g}, beta2 {DEFAULT_BETA2:g}; stopping after round "
            f"{'/'.join(str(k) for k in r.stop_after)}: {stops}"
        )
    if r.answered:
        shares = "; ".join(f"{p} {100 * r.answered[p]:.0f}% answered, {100 * r.cut_short[p]:.0f}% cut short"
                           for p in r.answered)
        lines.append(f"  coverage         {shares} (request mode, betas 0-1)")
    lines.append("  a replay can answer:")
    lines += [f"    - {a}" for a in r.answers]
    lines.append("  a replay cannot answer:")
    lines += [f"    - {a}" for a in r.cannot_answer]
    if r.warnings:
        lines.append("  warnings:")
        lines += [f"    ! {w}" for w in r.warnings]
    return "\n".join(lines)


def _layout(world: World) -> tuple[np.ndarray, np.ndarray]:
    """Tidy-ish layout: leaves spread left to right in depth-first order, parents centred."""
    x = np.zeros(world.size)
    depth = depths(world)
    next_leaf = 0.0
    order: list[int] = []
    stack = [0]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(int(c) for c in reversed(world.children_of(node)))
    for node in reversed(order):  # children before parents
        kids = world.children_of(node)
        if kids.size == 0:
            x[node] = next_leaf
            next_leaf += 1.0
    for node in reversed(order):
        kids = world.children_of(node)
        if kids.size:
            x[node] = float(np.mean(x[kids]))
    # leaf positions were assigned in reverse DFS order; flip so the first branch is on the left
    x = x.max() - x if world.size > 1 else x
    return x, depth.astype(float)


def plot_tree(world: World, path: str | os.PathLike[str], *, title: str | None = None) -> Path:
    """Draw the world's tree (colour = normalised score, grey x = failed) into a PNG file."""
    from matplotlib.figure import Figure  # no pyplot: the caller's backend stays as it is

    x, y = _layout(world)
    span = world.best_score - world.baseline_score
    quality = (world.score - world.baseline_score) / span if span > 0 else np.zeros(world.size)
    width = min(12.0, max(4.0, 0.06 * world.size + 3))
    height = min(6.0, max(2.5, 0.35 * (y.max() + 1) + 1.5))
    fig = Figure(figsize=(width, height), dpi=100)
    ax = fig.subplots()
    for i in range(1, world.size):
        p = int(world.parent[i])
        ax.plot([x[p], x[i]], [-y[p], -y[i]], color="0.75", linewidth=0.6, zorder=1)
    valid = ~np.isnan(world.score)
    points = ax.scatter(x[valid], -y[valid], c=np.clip(quality[valid], -0.25, 1.0), cmap="viridis",
                        s=14, zorder=2, vmin=-0.25, vmax=1.0)
    if not valid.all():  # a legend entry only for what is drawn
        ax.scatter(x[~valid], -y[~valid], marker="x", color="0.5", s=12, zorder=2, label="failed")
    ax.scatter([x[0]], [0], marker="s", color="black", s=30, zorder=3, label="root")
    if valid.any():
        best = int(np.nanargmax(world.score))
        ax.scatter([x[best]], [-y[best]], marker="*", color="red", s=60, zorder=4, label="best")
    fig.colorbar(points, ax=ax, label="q (0 = baseline, 1 = best)")
    ax.set_ylabel("depth")
    ax.set_yticks([-d for d in range(int(y.max()) + 1)])
    ax.set_yticklabels([str(d) for d in range(int(y.max()) + 1)])
    ax.set_xticks([])
    ax.legend(loc="lower right", fontsize="small")
    # a world's id is its author's text: drawn as written, never read as mathtext ($\frac...$)
    ax.set_title(printable(title or f"{world.id}: {world.size} nodes", 120), parse_math=False)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    return out
