"""Score the candidates fold by fold and assemble the CV table (PROTOCOL.md §2, §5).

    nice -n 15 .venv/bin/python -m experiments.recommended_cv.run_cv eval random greedy ... [-j 1]
    nice -n 15 .venv/bin/python -m experiments.recommended_cv.run_cv table

``eval`` writes ``out/rcv/figures/<candidate>.json`` (per setting, per run: V½ and v2; episodes cached
by evaluation.py); ``eval-folds`` scores a per-fold kind on the folds whose model exists
(``out/rcv/figures/partial/<kind>.json``); ``table`` gathers every candidate scored on all runs into
``experiments/recommended_cv/cv_table.json`` with the guard's verdicts and the choice (guard.py), and
the partial kinds under ``partial`` (reported apart, never in the choice).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from experiments.recommended_cv.candidates import by_name, candidates
from experiments.recommended_cv.common import HERE, OUT, SETTINGS, all_runs, families
from experiments.recommended_cv.evaluation import run_figures
from experiments.recommended_cv.guard import choose

FIGURES = OUT / "figures"
PARTIAL = FIGURES / "partial"
TABLE = HERE / "cv_table.json"


def score(name: str, jobs: int = 1) -> dict[str, dict[str, dict[str, float]]]:
    """Per setting, per run: the candidate's V½ and v2 (each run scored by its fold's spec)."""
    candidate = by_name()[name]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for setting in SETTINGS:
        got: dict[str, dict[str, float]] = {}
        for spec, runs in candidate.assignments():
            got.update(run_figures(spec, setting.name, runs, jobs))
        out[setting.name] = {run: got[run] for run in all_runs()}
    FIGURES.mkdir(parents=True, exist_ok=True)
    (FIGURES / f"{name}.json").write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out


def score_folds(name: str, jobs: int = 1) -> dict[str, Any]:
    """A per-fold kind's figures on the folds whose model exists (a partial kind: reported apart,
    never a candidate of the choice, PROTOCOL.md §7)."""
    candidate = by_name()[name]
    groups = families()
    done = [fold for fold in groups if Path(candidate.spec(fold)).is_file()]
    out: dict[str, Any] = {"folds": done, "figures": {}}
    for setting in SETTINGS:
        got: dict[str, dict[str, float]] = {}
        for fold in done:
            got.update(run_figures(candidate.spec(fold), setting.name, groups[fold], jobs))
        out["figures"][setting.name] = got
    PARTIAL.mkdir(parents=True, exist_ok=True)
    (PARTIAL / f"{name}.json").write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out


def prefetch(names: list[str], jobs: int = 1) -> None:
    """Evaluate each fold of the (per-fold) candidates as soon as its model exists, filling the
    cache ``eval`` reads; returns once every fold is evaluated."""
    todo = [(name, spec, runs) for name in names for spec, runs in by_name()[name].assignments()]
    while todo:
        ready = [t for t in todo if not t[1].endswith((".zip", ".py")) or Path(t[1]).is_file()]
        if not ready:
            time.sleep(30)
            continue
        for item in ready:
            for setting in SETTINGS:
                run_figures(item[1], setting.name, item[2], jobs)
            print(f"evaluated {item[0]}: {item[1]}", flush=True)
            todo.remove(item)


def ships_as(name: str) -> str:
    """What ``recommended`` would name for this candidate (a built-in's name, or the shipped form)."""
    shipped = {"AdaptiveSpend": "adaptive", "tuned": "tuned", "switch": "switch", "dreamed": "dreamed.py"}
    return shipped.get(name, name)


def table() -> dict[str, Any]:
    cands = {}
    for candidate in candidates():
        path = FIGURES / f"{candidate.name}.json"
        if path.is_file():
            cands[candidate.name] = {"learned": candidate.learned, "kind": candidate.kind,
                                     "ships_as": ships_as(candidate.name),
                                     "figures": json.loads(path.read_text(encoding="utf-8"))}
    data: dict[str, Any] = {"settings": [s.name for s in SETTINGS], "families": families(), "candidates": cands}
    data["choice"] = choose(data)
    data["partial"] = {c.name: json.loads((PARTIAL / f"{c.name}.json").read_text(encoding="utf-8"))
                       for c in candidates() if c.name not in cands and (PARTIAL / f"{c.name}.json").is_file()}
    TABLE.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("eval", "eval-folds", "prefetch", "table"))
    parser.add_argument("names", nargs="*")
    parser.add_argument("-j", "--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    if args.what == "eval":
        for name in args.names:
            started = time.perf_counter()
            got = score(name, args.jobs)
            means = "  ".join(f"{s}: V½ {statistics.fmean(v['v_half'] for v in got[s].values()):.4f}"
                              for s in got)
            print(f"{name}: {means}  ({time.perf_counter() - started:.0f} s)", flush=True)
    elif args.what == "eval-folds":
        for name in args.names:
            got = score_folds(name, args.jobs)
            print(f"{name}: {len(got['folds'])} of {len(families())} folds scored: {', '.join(got['folds'])}")
    elif args.what == "prefetch":
        prefetch(args.names, args.jobs)
    else:
        data = table()
        print(f"recommended: {data['choice']['recommended']} (best built-in {data['choice']['best_builtin']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
