"""The figures of the results page and the model card, written from cv_table.json (logs/summary.md).

    .venv/bin/python -m experiments.recommended_cv.summary

Reads only the recorded table (no episode is run): V½ per setting with its bootstrap CI, the
targets of PROTOCOL.md §7 (``recommended`` against the best built-in of each setting, with a paired
CI), the shipping slots of §6, and per learned candidate what its model card quotes.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping
from typing import Any

from experiments.recommended_cv.common import HERE, LOGS, bootstrap_ci
from experiments.recommended_cv.guard import aggregate, paired_ci

TABLE = HERE / "cv_table.json"
CHECKS = {"ci_excludes_zero": "CI of the gain includes zero",
          "no_family_below_margin": "a family more than 0.05 below",
          "every_setting_at_least": "a setting below"}


def _v_half(cand: Mapping[str, Any], setting: str) -> dict[str, float]:
    return {run: v["v_half"] for run, v in cand["figures"][setting].items()}


def _with_ci(values: Mapping[str, float]) -> str:
    low, high = bootstrap_ci(list(values.values()))
    return f"{statistics.fmean(values.values()):.4f} [{low:.3f}, {high:.3f}]"


def _short(run: str) -> str:
    return run.split("-", 1)[1]


def verdict_text(verdict: Mapping[str, Any] | None) -> str:
    """The guard's verdict in words: passes, or which of its three conditions fail."""
    if verdict is None:
        return "built-in"
    if verdict["passes"]:
        return "passes"
    return "fails: " + "; ".join(text for key, text in CHECKS.items() if not verdict[key])


def settings_table(data: Mapping[str, Any]) -> str:
    """Candidates x settings: mean V½ with its 95 % CI over runs, the 4-setting CV mean, the
    family-balanced mean and the worst run."""
    settings, cands, fams = data["settings"], data["candidates"], data["families"]
    header = ["candidate", "CV mean (4 settings)", *settings, "family-balanced", "worst run (4 settings)", "guard"]
    rows = []
    for name, cand in cands.items():
        agg = aggregate(cand["figures"], settings)
        balanced = statistics.fmean(statistics.fmean(agg[r] for r in runs) for runs in fams.values())
        worst = min(agg, key=agg.__getitem__)
        cells = [f"`{name}`", f"**{_with_ci(agg)}**", *(_with_ci(_v_half(cand, s)) for s in settings),
                 f"{balanced:.4f}", f"{agg[worst]:.3f} ({_short(worst)})",
                 verdict_text(data["choice"]["verdicts"].get(name))]
        rows.append((statistics.fmean(agg.values()), cells))
    rows.sort(key=lambda row: -row[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(cells) + " |" for _, cells in rows])


def target_table(data: Mapping[str, Any]) -> str:
    """Target (a): ``recommended`` against the best built-in of each setting (paired CI over runs)."""
    cands, chosen = data["candidates"], data["choice"]["recommended"]
    builtins = [n for n, c in cands.items() if c["kind"] == "builtin"]
    lines = ["| setting | `recommended` V½ | best built-in of the setting | its V½ | gap [95 % paired CI] | met |",
             "|---|---|---|---|---|---|"]
    for s in data["settings"]:
        means = {b: statistics.fmean(_v_half(cands[b], s).values()) for b in builtins}
        best = max(means, key=means.__getitem__)
        ours, theirs = _v_half(cands[chosen], s), _v_half(cands[best], s)
        gap = [ours[r] - theirs[r] for r in ours]
        low, high = paired_ci(gap)
        met = statistics.fmean(gap) >= 0
        lines.append(f"| {s} | {statistics.fmean(ours.values()):.4f} | `{best}` | {means[best]:.4f} | "
                     f"{statistics.fmean(gap):+.4f} [{low:+.4f}, {high:+.4f}] | {'yes' if met else '**no**'} |")
    return "\n".join(lines)


def slot_table(data: Mapping[str, Any]) -> str:
    """The shipping slots of §6: the learned model with the best figure of each slot, against the
    best built-in's figure of that slot."""
    settings, cands = data["settings"], data["candidates"]
    slots = {
        "aggregate V½ (general use)": lambda c: statistics.fmean(aggregate(c["figures"], settings).values()),
        "mean v2 over the four settings (compare over β)": lambda c: statistics.fmean(
            statistics.fmean(v["v2"] for v in c["figures"][s].values()) for s in settings),
        "V½ at W10i (an online run, no parallel bonus)": lambda c: statistics.fmean(_v_half(c, "W10i").values()),
    }
    lines = ["| slot | best learned model | its figure | best built-in | its figure | filled |", "|---|---|---|---|---|---|"]
    for slot, figure in slots.items():
        models = {n: figure(c) for n, c in cands.items() if c["kind"] == "model"}
        builtins = {n: figure(c) for n, c in cands.items() if c["kind"] == "builtin"}
        model, builtin = max(models, key=models.__getitem__), max(builtins, key=builtins.__getitem__)
        filled = models[model] > builtins[builtin]
        lines.append(f"| {slot} | `{model}` | {models[model]:.4f} | `{builtin}` | {builtins[builtin]:.4f} | "
                     f"{'yes' if filled else 'no'} |")
    return "\n".join(lines)


def card_lines(data: Mapping[str, Any]) -> str:
    """Per learned candidate, the figures its model card quotes."""
    settings, cands, fams = data["settings"], data["candidates"], data["families"]
    lines = []
    for name, verdict in sorted(data["choice"]["verdicts"].items(), key=lambda kv: -kv[1]["cv_mean"]):
        cand = cands[name]
        agg = aggregate(cand["figures"], settings)
        per_family = {f: statistics.fmean(agg[r] for r in runs) for f, runs in fams.items()}
        worst_family = min(per_family, key=per_family.__getitem__)
        gap_family = min(verdict["family_gap"], key=verdict["family_gap"].__getitem__)
        per_setting = ", ".join(f"{s} {statistics.fmean(_v_half(cand, s).values()):.3f}" for s in settings)
        lines.append(f"- `{name}`: CV mean V½ **{_with_ci(agg)}**; {per_setting}; worst family "
                     f"{worst_family} {per_family[worst_family]:.3f}; largest gap to `{data['choice']['best_builtin']}` "
                     f"{verdict['family_gap'][gap_family]:+.3f} ({gap_family}); gain {verdict['difference']:+.4f} "
                     f"[{verdict['ci'][0]:+.4f}, {verdict['ci'][1]:+.4f}]; guard: {verdict_text(verdict)}")
    return "\n".join(lines)


def partial_lines(data: Mapping[str, Any]) -> str:
    """The per-fold kinds trained on only some folds: their held-out figures on the folds scored,
    beside b*'s on the same runs. Never a candidate of the choice (PROTOCOL.md §7)."""
    partial = data.get("partial") or {}
    if not partial:
        return "None: every per-fold kind scored is scored on all 8 folds."
    settings, fams, best = data["settings"], data["families"], data["choice"]["best_builtin"]
    reference = aggregate(data["candidates"][best]["figures"], settings)
    lines = [f"| kind | folds scored | held-out family | runs | its 4-setting V½ | `{best}` on the same runs | gap |",
             "|---|---|---|---:|---:|---:|---:|"]
    for kind, entry in partial.items():
        agg = aggregate(entry["figures"], settings) if entry["folds"] else {}
        for fold in entry["folds"]:
            ours = statistics.fmean(agg[r] for r in fams[fold])
            theirs = statistics.fmean(reference[r] for r in fams[fold])
            lines.append(f"| `{kind}` | {len(entry['folds'])} of {len(fams)} | {fold} | {len(fams[fold])} | "
                         f"{ours:.4f} | {theirs:.4f} | {ours - theirs:+.4f} |")
        if not entry["folds"]:
            lines.append(f"| `{kind}` | 0 of {len(fams)} | | | | | |")
    return "\n".join(lines)


def main() -> int:
    # no options; argparse so that --help explains instead of rewriting the log
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    data = json.loads(TABLE.read_text(encoding="utf-8"))
    parts = ["# Summary figures (written by experiments/recommended_cv/summary.py from cv_table.json)", "",
             "## V½ per setting, with 95 % bootstrap CIs over the 43 runs", "", settings_table(data), "",
             f"## Target (a): `recommended` (`{data['choice']['recommended']}`) against the best built-in of each "
             "setting", "", target_table(data), "",
             "## The shipping slots (PROTOCOL.md §6)", "", slot_table(data), "",
             "## Per learned candidate (the model card's figures)", "", card_lines(data), "",
             "## Per-fold kinds not trained on every fold (reported apart; never in the choice)", "",
             partial_lines(data), ""]
    (LOGS / "summary.md").write_text("\n".join(parts), encoding="utf-8")
    print("\n".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
