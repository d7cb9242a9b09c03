"""The CV tables of RESULTS.md, written from cv_table.json (logs/cv_tables.md).

    .venv/bin/python -m experiments.recommended_cv.report
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping
from typing import Any

from experiments.recommended_cv.common import HERE, LOGS, bootstrap_ci
from experiments.recommended_cv.guard import aggregate
from experiments.recommended_cv.summary import verdict_text

TABLE = HERE / "cv_table.json"


def _mean(values: Any) -> float:
    return statistics.fmean(values)


def hindsight(cands: Mapping[str, Any], setting: str) -> dict[str, float]:
    """Per run: the best built-in's V½ at ``setting``."""
    builtins = [n for n, c in cands.items() if c["kind"] == "builtin"]
    runs = list(cands[builtins[0]]["figures"][setting])
    return {r: max(cands[b]["figures"][setting][r]["v_half"] for b in builtins) for r in runs}


def main_table(data: Mapping[str, Any]) -> str:
    settings, cands, choice = data["settings"], data["candidates"], data["choice"]
    fams = data["families"]
    rows = []
    for name, c in cands.items():
        agg = aggregate(c["figures"], settings)
        low, high = bootstrap_ci(list(agg.values()))
        balanced = _mean(_mean(agg[r] for r in runs) for runs in fams.values())
        cells = [f"`{name}`" + ("" if c["learned"] else " (built-in)"), f"**{_mean(agg.values()):.4f}** [{low:.3f}, {high:.3f}]",
                 f"{balanced:.4f}"]
        for s in settings:
            vh = {r: v["v_half"] for r, v in c["figures"][s].items()}
            cells.append(f"{_mean(vh.values()):.4f}")
        cells.append(f"{_mean(_mean(v['v2'] for v in c['figures'][s].values()) for s in settings):.4f}")
        worst = min(agg, key=lambda r: agg[r])
        cells.append(f"{agg[worst]:.3f} ({worst.split('-', 1)[1]})")
        verdict = choice["verdicts"].get(name)
        cells.append("" if verdict is None else verdict_text(verdict))
        rows.append((_mean(agg.values()), cells))
    rows.sort(key=lambda r: -r[0])
    header = ["candidate", "CV mean V½ (4 settings) [95 % CI]", "family-balanced"] + [f"V½ {s}" for s in settings] + [
        "v2 (mean of settings)", "worst run (4-setting V½)", "guard"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for _, cells in rows]
    hind = [hindsight(cands, s) for s in settings]
    runs = list(hind[0])
    per_run = {r: _mean(h[r] for h in hind) for r in runs}
    cells = ["*per-run hindsight pick over the built-ins*", f"{_mean(per_run.values()):.4f}",
             f"{_mean(_mean(per_run[r] for r in rs) for rs in fams.values()):.4f}"]
    cells += [f"{_mean(h.values()):.4f}" for h in hind] + ["", "", ""]
    lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def setting_table(data: Mapping[str, Any], setting: str) -> str:
    cands = data["candidates"]
    lines = ["| candidate | mean V½ [95 % CI] | v2 | worst run V½ |", "|---|---|---|---|"]
    rows = []
    for name, c in cands.items():
        vh = {r: v["v_half"] for r, v in c["figures"][setting].items()}
        low, high = bootstrap_ci(list(vh.values()))
        worst = min(vh, key=lambda r: vh[r])
        v2 = _mean(v["v2"] for v in c["figures"][setting].values())
        rows.append((_mean(vh.values()), f"| `{name}` | {_mean(vh.values()):.4f} [{low:.3f}, {high:.3f}] | {v2:.4f} | "
                                          f"{vh[worst]:.3f} ({worst.split('-', 1)[1]}) |"))
    rows.sort(key=lambda r: -r[0])
    hind = hindsight(cands, setting)
    return "\n".join(lines + [r for _, r in rows] + [f"| *hindsight pick over the built-ins* | {_mean(hind.values()):.4f} | | |"])


def family_table(data: Mapping[str, Any]) -> str:
    settings, cands, fams = data["settings"], data["candidates"], data["families"]
    lines = ["| candidate | " + " | ".join(f"{f} ({len(r)})" for f, r in fams.items()) + " |",
             "|---|" + "---|" * len(fams)]
    rows = []
    for name, c in cands.items():
        agg = aggregate(c["figures"], settings)
        rows.append((_mean(agg.values()), f"| `{name}` | " + " | ".join(f"{_mean(agg[r] for r in rs):.3f}"
                                                                        for rs in fams.values()) + " |"))
    rows.sort(key=lambda r: -r[0])
    return "\n".join(lines + [r for _, r in rows])


def guard_table(data: Mapping[str, Any]) -> str:
    choice = data["choice"]
    lines = [f"b* (best built-in by CV mean): `{choice['best_builtin']}` "
             f"({choice['cv_mean'][choice['best_builtin']]:.4f})", "",
             "| learned candidate | mean(L - b*) | 95 % CI | worst family gap | worst setting gap | passes |",
             "|---|---|---|---|---|---|"]
    for name, v in sorted(choice["verdicts"].items(), key=lambda kv: -kv[1]["cv_mean"]):
        fam = min(v["family_gap"], key=lambda f: v["family_gap"][f])
        st = min(v["setting_gap"], key=lambda s: v["setting_gap"][s])
        lines.append(f"| `{name}` | {v['difference']:+.4f} | [{v['ci'][0]:+.4f}, {v['ci'][1]:+.4f}] | "
                     f"{v['family_gap'][fam]:+.3f} ({fam}) | {v['setting_gap'][st]:+.4f} ({st}) | "
                     f"{'**yes**' if v['passes'] else 'no'} |")
    lines += ["", f"`recommended` = **`{choice['recommended']}`** (names `{choice['recommended_spec']}`)"]
    return "\n".join(lines)


def main() -> int:
    # no options; argparse so that --help explains instead of rewriting the log
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    data = json.loads(TABLE.read_text(encoding="utf-8"))
    parts = ["# CV tables (written by experiments/recommended_cv/report.py from cv_table.json)", "",
             "## All settings", "", main_table(data), "", "## The guard", "", guard_table(data), "",
             "## Per family (4-setting V½)", "", family_table(data), ""]
    for s in data["settings"]:
        parts += [f"## {s}", "", setting_table(data, s), ""]
    (LOGS / "cv_tables.md").write_text("\n".join(parts), encoding="utf-8")
    print("\n".join(parts[:8]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
