"""The table of a fidelity report, as plain text of at most 80 columns (``fidelity.txt``, and
what ``dream-gym fidelity`` prints)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dream_gym.evaluation.leaderboard import shorten_middle
from dream_gym.infrastructure.printable import printable

NAME_WIDTH = 22  # the policy column; longer names lose their middle (agents/my_…_policy.py)
POOLED = "all recorders"  # the study's mean over its recorders (dream_gym.fidelity.analysis.POOLED)
OUTCOME_NAMES = {"final_best": "final best", "online_V": "online V"}


def _name(text: str, width: int = NAME_WIDTH) -> str:
    return shorten_middle(printable(text), width).ljust(width)


def _number(value: float | None, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _rho(entry: dict[str, Any]) -> str:
    interval = entry["interval"]
    low, high = interval["low"], interval["high"]
    span = "[n/a]" if low is None or high is None else f"[{low:.2f}, {high:.2f}]"
    return f"{_number(entry['rho'], '.2f'):>5} {span}"


def _seeds(seeds: Sequence[int]) -> str:
    """``0,1,2,3,7`` as ``0-3,7``."""
    parts: list[str] = []
    ordered = sorted(seeds)
    start = 0
    for i in range(1, len(ordered) + 1):
        if i == len(ordered) or ordered[i] != ordered[i - 1] + 1:
            first, last = ordered[start], ordered[i - 1]
            parts.append(str(first) if first == last else f"{first}-{last}")
            start = i
    return ",".join(parts)


def render(report: dict[str, Any], width: int = 80) -> str:
    """The report as text lines of at most ``width`` columns (80 or more)."""
    study = report["study"]
    lines = [*_title(study, width), ""]
    lines += _online_block(report)
    for recorder in report["agreement"]:
        lines += [""] + _replay_block(report, recorder)
    lines += [""] + _agreement_block(report)
    return "\n".join(line.rstrip() for line in _fitted(lines, width))


def _title(study: dict[str, Any], width: int) -> list[str]:
    task = study["task"].get("name") or "a task given as files"
    mode = ", request mode" if study.get("requests") else ""
    return [shorten_middle(printable(f"Replay fidelity: {task} ({study['system']})"), width),
            f"W {study['workers']}, {study['iterations']} attempts a run, beta {study['beta']:g}, "
            f"seeds {_seeds(study['seeds'])}{mode}"[:width]]


def _online_block(report: dict[str, Any]) -> list[str]:
    seeds = len(report["study"]["seeds"])
    lines = [f"Online runs (mean over {seeds} seed{'s' if seeds != 1 else ''})",
             f"{'policy':<{NAME_WIDTH}}  {'final best':>12}  {'online V':>9}  {'replay gives it back':>20}"]
    for policy, row in report["policies"].items():
        back = f"{row['reproduced']}/{row['checked']} runs" if row["checked"] else "n/a"
        lines.append(f"{_name(policy)}  {_number(row['final_best'], '.6g'):>12}  {_number(row['online_V']):>9}  "
                     f"{back:>20}")
    return lines


def _replay_block(report: dict[str, Any], recorder: str) -> list[str]:
    worlds = len(report["study"]["seeds"])
    whose = "every recorder's worlds, V averaged" if recorder == POOLED else \
        f"the worlds of {shorten_middle(printable(recorder), 40)} ({worlds})"
    lines = [f"Replay on {whose}",
             f"{'policy':<{NAME_WIDTH}}  {'replay V':>8}  {'coverage':>8}  {'on record':>9}  {'cut short':>9}  "
             f"{'held':>5}  {'errors':>6}"]
    for policy, row in report["policies"].items():
        cell = row["replay"][recorder]
        errors = str(cell["errors"]) if cell["errors"] else ""
        lines.append(f"{_name(policy)}  {_number(cell['V']):>8}  {_share(cell['coverage']):>8}  "
                     f"{_share(cell['on_record']):>9}  {_share(cell['cut_short']):>9}  {_share(cell['held']):>5}  "
                     f"{errors:>6}")
    return lines


def _agreement_block(report: dict[str, Any]) -> list[str]:
    lines = ["How replay V ranks the policies against the online runs",
             f"{'':<{NAME_WIDTH}}  {'Spearman [95% CI]':<20}  {'Kendall [95% CI]':<20}"]
    costs = report.get("recorders", {})
    for recorder, outcomes in report["agreement"].items():
        spent = costs.get(recorder, {}).get("attempts")
        cost = "" if spent is None else f" ({spent:.0f} attempts recorded)"
        name = shorten_middle(printable(recorder), 74 - len(cost) - len("recorder "))
        lines.append("every single-run recorder, V averaged" if recorder == POOLED else f"recorder {name}{cost}")
        for name, entry in outcomes.items():
            label = f"  vs {OUTCOME_NAMES[name]}"
            lines.append(f"{label:<{NAME_WIDTH}}  {_rho(entry['spearman']):<20}  {_rho(entry['kendall']):<20}")
    lines.append("online ceiling (split-half over seeds, Spearman-Brown)")
    for name, entry in report["ceiling"].items():
        label = f"  {OUTCOME_NAMES[name]}"
        splits = entry["splits"]
        lines.append(f"{label:<{NAME_WIDTH}}  {_number(entry['corrected'], '.2f'):>5} "
                     f"(mean of {splits} split{'s' if splits != 1 else ''})")
    return lines


def _fitted(lines: list[str], width: int) -> list[str]:
    """Lines longer than ``width`` are cut with an ellipsis: a table line never wraps."""
    return [line if len(line) <= width else shorten_middle(line, width) for line in lines]


__all__ = ["render"]
