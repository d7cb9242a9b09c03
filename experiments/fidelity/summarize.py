"""The fidelity experiment's summary: rho by recorder against the online ceiling, per task.

Reads the three studies' ``fidelity.json`` (``out/fidelity/exp-*/``, made by ``run.sh``; then the
same design through the ShinkaEvolve and SkyDiscover bridges, tabled apart), copies
each report and table into this folder (``<task>.json``, ``<task>.txt``), and writes
``results.md`` (the tables) and ``results.json`` (the figures they hold). Run from the
repository's root once the studies are done::

    .venv/bin/python experiments/fidelity/summarize.py

The target: on each task, replay rho with the default recorder (``dream-gym grow``'s
``recommended``; the OpenEvolve bridge's ``native``, OpenEvolve's own sampling) at least 0.8 x the
online ceiling. Judged on the final best (the outcome the issue's figures use), shown for online V too.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from dream_gym.fidelity.stats import bootstrap_interval, spearman

HERE = Path(__file__).resolve().parent
STUDIES = {  # name here: (study folder, label, the default recorder of its recording command)
    "cp26-grow": ("exp-cp26-grow", "circle-packing-26 (grow)", "recommended"),
    "sd-grow": ("exp-sd-grow", "sum-difference (grow)", "recommended"),
    "fm-openevolve": ("exp-fm-openevolve", "function_minimization (OpenEvolve bridge)", "native"),
}
#: The same design through the other systems' bridges (built-in task, the built-in agent, 20
#: attempts a run): tabled on their own, outside the three tasks' target and means.
SYSTEM_STUDIES = {
    "cp26-shinkaevolve": ("exp-cp26-shinkaevolve", "circle-packing-26 (ShinkaEvolve bridge)", "native"),
    "cp26-skydiscover": ("exp-cp26-skydiscover", "circle-packing-26 (SkyDiscover bridge)", "native"),
}
TARGET = 0.8  # x the online ceiling
RESAMPLES = 2000
BOOTSTRAP_SEED = 20261205
OUTCOMES = {"final_best": "final best", "online_V": "online V"}
ALL_RECORDERS = "all recorders"


def short(recorder: str) -> str:
    """A recorder's name for the tables (the long pool of every policy by what it is)."""
    if recorder.startswith("pool:") and recorder.count("+") >= 5:
        first = recorder[len("pool:"):].split("+")[0]
        return f"pool of all {recorder.count('+') + 1} ({first} first)"
    return "every single-run recorder, V averaged" if recorder == ALL_RECORDERS else recorder


def rho_cell(entry: dict[str, Any]) -> str:
    rho, interval = entry["spearman"]["rho"], entry["spearman"]["interval"]
    if rho is None:
        return "n/a"
    low, high = interval["low"], interval["high"]
    span = "" if low is None or high is None else f" [{low:.2f}, {high:.2f}]"
    return f"{rho:.2f}{span}"


def task_figures(report: dict[str, Any], default: str) -> dict[str, Any]:
    ceiling = {name: report["ceiling"][name]["corrected"] for name in OUTCOMES}
    recorders = {}
    for recorder, outcomes in report["agreement"].items():
        cost = report.get("recorders", {}).get(recorder, {})
        cells = [row["replay"][recorder] for row in report["policies"].values()]
        recorders[recorder] = {
            "attempts": cost.get("attempts"),
            "cut_short": _mean(c["cut_short"] for c in cells), "held": _mean(c["held"] for c in cells),
            **{name: {"rho": outcomes[name]["spearman"]["rho"], "interval": outcomes[name]["spearman"]["interval"],
                      "tau": outcomes[name]["kendall"]["rho"]} for name in OUTCOMES},
        }
    found = recorders[default]["final_best"]["rho"]
    need = TARGET * ceiling["final_best"] if ceiling["final_best"] is not None else None
    runs = report["runs"]
    reproduced = [r["reproduced"] for r in runs if r["reproduced"] is not None]
    return {
        "ceiling": ceiling, "recorders": recorders, "default_recorder": default,
        "target": {"outcome": "final_best", "rho": found, "needed": need,
                   "met": None if found is None or need is None else found >= need},
        "runs": len(runs), "reproduced": sum(reproduced), "checked": len(reproduced),
        "resumed": sum(1 for r in runs if r["resumed"]),
        "policies": {p: {"final_best": row["final_best"], "online_V": row["online_V"]}
                     for p, row in report["policies"].items()},
    }


SAME_TREES = {"recommended": "openevolve"}  # grow's default grew the openevolve built-in's very trees here


def without_own_policy(report: dict[str, Any]) -> dict[str, float | None]:
    """Per recorder, rho vs final best over the policies other than the recorder's own: replayed on
    its own run a policy gives that run back whole, which ranks it where it ran (self-replay)."""
    policies, seeds = report["study"]["policies"], report["study"]["seeds"]
    online = {p: statistics.mean(r["final_best"] for r in report["runs"] if r["policy"] == p) for p in policies}
    found: dict[str, float | None] = {}
    for recorder in report["study"]["recorders"]:
        own = SAME_TREES.get(recorder, recorder)
        kept = [p for p in policies if p != own]
        replay = {p: statistics.mean(r["V"] for r in report["replays"] if r["recorder"] == recorder and r["policy"] == p)
                  for p in kept}
        rho = spearman([replay[p] for p in kept], [online[p] for p in kept])
        found[recorder] = float(rho) if np.isfinite(rho) else None
    assert all(len([r for r in report["replays"] if r["recorder"] == rec]) == len(policies) * len(seeds)
               for rec in report["study"]["recorders"])
    return found


def paired_differences(report: dict[str, Any], default: str) -> dict[str, dict[str, Any]]:
    """Per recorder, rho vs final best minus the default recorder's, with a paired bootstrap over
    seeds (the same resample of seeds for both recorders and the online runs) and the share of
    resamples where the recorder ranks closer than the default."""
    policies, seeds = report["study"]["policies"], report["study"]["seeds"]
    online = np.array([[next(r["final_best"] for r in report["runs"] if r["policy"] == p and r["seed"] == s)
                        for s in seeds] for p in policies])
    replay: dict[str, np.ndarray] = {}
    for recorder in report["study"]["recorders"]:
        cells = {(r["policy"], r["seed"]): r["V"] for r in report["replays"] if r["recorder"] == recorder}
        replay[recorder] = np.array([[cells[(p, s)] for s in seeds] for p in policies])

    def rho(recorder: str, sample: np.ndarray) -> float:
        return spearman(replay[recorder][:, sample].mean(axis=1), online[:, sample].mean(axis=1))

    found = {}
    for recorder in replay:
        if recorder == default:
            continue
        def difference(sample: np.ndarray, recorder: str = recorder) -> float:
            return rho(recorder, sample) - rho(default, sample)

        rng = np.random.default_rng(BOOTSTRAP_SEED)
        draws = [difference(rng.integers(0, len(seeds), len(seeds))) for _ in range(RESAMPLES)]
        finite = [d for d in draws if np.isfinite(d)]
        interval = bootstrap_interval(difference, len(seeds), resamples=RESAMPLES,
                                      rng=np.random.default_rng(BOOTSTRAP_SEED))
        found[recorder] = {"difference": difference(np.arange(len(seeds))), "interval": interval.to_dict(),
                           "share_better": sum(d > 0 for d in finite) / len(finite) if finite else None}
    return found


def difference_table(label: str, figures: dict[str, Any]) -> list[str]:
    default = figures["default_recorder"]
    lines = [f"#### {label}: ρ vs final best, each recorder minus the default ({default})", "",
             "| recorder | attempts | difference [95 % CI, paired over seeds] | resamples where it ranks closer |",
             "|---|---:|---:|---:|"]
    for recorder, row in figures["differences"].items():
        interval = row["interval"]
        span = "" if interval["low"] is None else f" [{interval['low']:+.2f}, {interval['high']:+.2f}]"
        attempts = figures["recorders"][recorder]["attempts"]
        share = "n/a" if row["share_better"] is None else f"{100 * row['share_better']:.0f} %"
        lines.append(f"| {short(recorder)} | {attempts:.0f} | {row['difference']:+.2f}{span} | {share} |")
    return lines + [""]


def recorder_table(label: str, figures: dict[str, Any]) -> list[str]:
    ceiling = figures["ceiling"]
    lines = [f"### {label}", "",
             "| recorder | attempts recorded (mean per seed) | episodes cut short by the record | "
             "ρ vs final best [95 % CI] | ρ / ceiling | ρ vs online V [95 % CI] | ρ / ceiling | "
             "ρ vs final best without the recorder's own policy |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for recorder, row in figures["recorders"].items():
        cells = []
        for name in OUTCOMES:
            rho = row[name]["rho"]
            entry = {"spearman": {"rho": rho, "interval": row[name]["interval"]}}
            ratio = "n/a" if rho is None or not ceiling[name] else f"{rho / ceiling[name]:.2f}"
            cells += [rho_cell(entry), ratio]
        attempts = "—" if row["attempts"] is None else f"{row['attempts']:.0f}"
        name = short(recorder)
        if recorder == figures["default_recorder"]:
            name = f"**{name}** (default)"
        lines.append(f"| {name} | {attempts} | {_share(row['cut_short'])} | {' | '.join(cells)} | "
                     f"{_num(row.get('final_best_without_own'))} |")
    lines.append(f"| **online ceiling** (split-half, Spearman–Brown) | | | **{_num(ceiling['final_best'])}** | | "
                 f"**{_num(ceiling['online_V'])}** | | |")
    target = figures["target"]
    verdict = "met" if target["met"] else "missed" if target["met"] is not None else "not measurable"
    lines += ["", f"Target (default recorder's ρ vs final best ≥ {TARGET} × ceiling = {_num(target['needed'])}): "
              f"**{verdict}** ({_num(target['rho'])}). Replay gave back {figures['reproduced']} of "
              f"{figures['checked']} runs; {figures['resumed']} runs were resumed.", ""]
    return lines


def _mean(values: Any) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.mean(kept) if kept else None


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f} %"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def across_tasks(figures: dict[str, dict[str, Any]]) -> list[str]:
    """Each recorder's rho vs final best as a share of the ceiling, per task and mean, where every task has it."""
    tasks = list(figures)
    shared = [r for r in figures[tasks[0]]["recorders"] if all(r in figures[t]["recorders"] for t in tasks)]
    lines = ["### Across tasks: ρ vs final best / online ceiling", "",
             f"| recorder | {' | '.join(tasks)} | mean |", f"|---|{'---:|' * (len(tasks) + 1)}"]
    for recorder in shared:
        ratios = []
        for task in tasks:
            rho, ceiling = figures[task]["recorders"][recorder]["final_best"]["rho"], figures[task]["ceiling"]["final_best"]
            ratios.append(None if rho is None or not ceiling else rho / ceiling)
        mean = statistics.mean(r for r in ratios if r is not None) if any(r is not None for r in ratios) else None
        lines.append(f"| {short(recorder)} | {' | '.join(_num(r) for r in ratios)} | {_num(mean)} |")
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--studies", type=Path, default=Path("out/fidelity"), help="where run.sh wrote the studies")
    args = parser.parse_args()
    figures: dict[str, dict[str, Any]] = {}
    lines = ["# The fidelity experiment: results", "", "Made by `summarize.py` from the studies `run.sh` ran.", ""]
    for name, (folder, label, default) in STUDIES.items():
        source = args.studies / folder
        report = json.loads((source / "fidelity.json").read_text(encoding="utf-8"))
        shutil.copyfile(source / "fidelity.json", HERE / f"{name}.json")
        shutil.copyfile(source / "fidelity.txt", HERE / f"{name}.txt")
        figures[name] = task_figures(report, default)
        figures[name]["differences"] = paired_differences(report, default)
        for recorder, rho in without_own_policy(report).items():
            figures[name]["recorders"][recorder]["final_best_without_own"] = rho
        lines += recorder_table(label, figures[name])
    lines += across_tasks(figures)
    lines += ["### Against the default recorder", ""]
    for name, (_folder, label, _default) in STUDIES.items():
        lines += difference_table(label, figures[name])
    lines += ["## The other systems", ""]
    for name, (folder, label, default) in SYSTEM_STUDIES.items():
        source = args.studies / folder
        if not (source / "fidelity.json").is_file():
            lines += [f"{label}: not run (`bash experiments/fidelity/run.sh {name}`)", ""]
            continue
        report = json.loads((source / "fidelity.json").read_text(encoding="utf-8"))
        shutil.copyfile(source / "fidelity.json", HERE / f"{name}.json")
        shutil.copyfile(source / "fidelity.txt", HERE / f"{name}.txt")
        figures[name] = task_figures(report, default)
        for recorder, rho in without_own_policy(report).items():
            figures[name]["recorders"][recorder]["final_best_without_own"] = rho
        lines += recorder_table(label, figures[name])
    (HERE / "results.md").write_text("\n".join(lines), encoding="utf-8")
    (HERE / "results.json").write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
