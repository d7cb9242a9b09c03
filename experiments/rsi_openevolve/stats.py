"""The RSI-vs-native statistics from the run folders (definitions: README.md).

Reads ``OUT/<task>/native/seed-S`` (a world) and ``OUT/<task>/rsi/seed-S`` (an rsi --system run
folder, its runs in ``runs/iter-<t>``); only seeds whose two runs both finished are used.
Writes the JSON and the markdown table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

BUDGET, ITERATIONS = 60, 3
RESAMPLES = 10_000
TARGET_RATIO = 1.7


def read_nodes(folder: Path) -> list[dict[str, Any]]:
    with (folder / "nodes.jsonl").open() as handle:
        return [json.loads(line) for line in handle if line.strip()]


def positioned(runs: list[list[dict[str, Any]]]) -> list[tuple[int, float | None]]:
    """(position, score) of every node of ``runs`` laid end to end: a program's position is its
    attempt count in run order (1-based), a root's the count of attempts before its run."""
    out: list[tuple[int, float | None]] = []
    before = 0
    for nodes in runs:
        for node in nodes:
            if node.get("parent") is None:
                out.append((before, node.get("score")))
            else:
                before += 1
                out.append((before, node.get("score")))
    return out


def curve(points: list[tuple[int, float | None]], budget: int) -> np.ndarray:
    """best[k]: the best score among nodes at positions <= k, for k = 0 … budget (maximise)."""
    best = np.full(budget + 1, -np.inf)
    for position, score in points:
        if score is not None and position <= budget:
            best[position] = max(best[position], float(score))
    return np.maximum.accumulate(best)


def reach(best: np.ndarray, target: float) -> tuple[int, bool]:
    """Attempts to reach ``target`` and whether it was reached (censored at the budget if not)."""
    hit = np.nonzero(best >= target)[0]
    return (int(hit[0]), True) if hit.size else (len(best) - 1, False)


def load_task(folder: Path, rsi_name: str = "rsi") -> dict[str, Any]:
    seeds, native, rsi, deployed, per_iteration, used = [], [], [], [], [], []
    for native_dir in sorted((folder / "native").glob("seed-*"), key=lambda p: int(p.name[5:])):
        seed = int(native_dir.name[5:])
        rsi_dir = folder / rsi_name / native_dir.name
        meta = native_dir / "world.json"
        summary = rsi_dir / "summary.json"
        if not (meta.is_file() and json.loads(meta.read_text()).get("sha256") and summary.is_file()):
            continue
        iterations = json.loads(summary.read_text())["iterations"]
        if len(iterations) != ITERATIONS:
            continue
        assert json.loads(meta.read_text())["direction"] == "maximize"
        seeds.append(seed)
        native_nodes = read_nodes(native_dir)
        native.append(curve(positioned([native_nodes]), BUDGET))
        runs = [read_nodes(rsi_dir / "runs" / f"iter-{t}") for t in range(1, ITERATIONS + 1)]
        used.append((attempts_made([native_nodes]), attempts_made(runs)))
        rsi.append(curve(positioned(runs), BUDGET))
        deployed.append([int(it["deployed_m"]) for it in iterations])
        per_iteration.append([it["best_score"] for it in iterations])
    return {"seeds": seeds, "native": native, "rsi": rsi, "deployed": deployed, "per_iteration": per_iteration,
            "used": used}


def attempts_made(runs: list[list[dict[str, Any]]]) -> int:
    """The programs the runs proposed (every node but the roots)."""
    return sum(1 for nodes in runs for node in nodes if node.get("parent") is not None)


def statistics(native: list[np.ndarray], rsi: list[np.ndarray]) -> dict[str, Any]:
    """The point statistics of one sample of seeds (b* from this sample's native runs)."""
    native_final = np.array([c[-1] for c in native])
    rsi_final = np.array([c[-1] for c in rsi])
    target = float(np.median(native_final))
    native_reach = [reach(c, target) for c in native]
    rsi_reach = [reach(c, target) for c in rsi]
    native_k = np.array([k for k, _ in native_reach], dtype=float)
    rsi_k = np.array([max(k, 1) for k, _ in rsi_reach], dtype=float)  # 0 (root) would divide by 0
    return {
        "target": target,
        "native_attempts": native_k, "rsi_attempts": rsi_k,
        "native_reached": np.array([r for _, r in native_reach]), "rsi_reached": np.array([r for _, r in rsi_reach]),
        "ratio": native_k / rsi_k,
        "median_ratio": float(np.median(native_k / rsi_k)),
        "ratio_of_medians": float(np.median(native_k) / np.median(rsi_k)),
        "native_final": native_final, "rsi_final": rsi_final,
        "median_native_final": float(np.median(native_final)), "median_rsi_final": float(np.median(rsi_final)),
        "median_final_difference": float(np.median(rsi_final - native_final)),
        "median_native_attempts": float(np.median(native_k)), "median_rsi_attempts": float(np.median(rsi_k)),
    }


SCALARS = ("target", "median_ratio", "ratio_of_medians", "median_native_final", "median_rsi_final",
           "median_final_difference", "median_native_attempts", "median_rsi_attempts")


def bootstrap(native: list[np.ndarray], rsi: list[np.ndarray], seed: int = 0) -> dict[str, list[float]]:
    """95% percentile CIs: seeds resampled with replacement (a seed's two runs together), b* recomputed."""
    rng = np.random.default_rng(seed)
    n = len(native)
    draws: dict[str, list[float]] = {key: [] for key in SCALARS}
    for _ in range(RESAMPLES):
        pick = rng.integers(0, n, n)
        point = statistics([native[i] for i in pick], [rsi[i] for i in pick])
        for key in SCALARS:
            draws[key].append(point[key])
    return {key: [float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))] for key, v in draws.items()}


def checkpoints() -> list[int]:
    """Attempts at which native's best so far is shown beside RSI's iterations (their ends)."""
    return [BUDGET * t // ITERATIONS for t in range(1, ITERATIONS + 1)]


def task_result(folder: Path, rsi_name: str = "rsi") -> dict[str, Any] | None:
    data = load_task(folder, rsi_name)
    if not data["seeds"]:
        return None
    point = statistics(data["native"], data["rsi"])
    ci = bootstrap(data["native"], data["rsi"])
    met = point["median_ratio"] >= TARGET_RATIO and ci["median_ratio"][0] > 1
    per_seed = [
        {"seed": s, "native_attempts": int(point["native_attempts"][i]), "native_reached": bool(point["native_reached"][i]),
         "rsi_attempts": int(point["rsi_attempts"][i]), "rsi_reached": bool(point["rsi_reached"][i]),
         "ratio": float(point["ratio"][i]), "native_final": float(point["native_final"][i]),
         "rsi_final": float(point["rsi_final"][i]), "rsi_best_per_iteration": data["per_iteration"][i],
         "attempts_made": {"native": data["used"][i][0], "rsi": data["used"][i][1]},
         "native_best_at": {str(k): float(data["native"][i][k]) for k in checkpoints()},
         "rsi_deployed_version_per_iteration": data["deployed"][i]}
        for i, s in enumerate(data["seeds"])
    ]
    return {
        "seeds": len(data["seeds"]), **{key: point[key] for key in SCALARS}, "ci95": ci,
        "native_censored": int((~point["native_reached"]).sum()), "rsi_censored": int((~point["rsi_reached"]).sum()),
        "dream_changed_policy": sum(1 for d in data["deployed"] for m in d if m != 0),
        "dream_phases": sum(len(d) for d in data["deployed"]),
        "attempts_made_min": {"native": min(u[0] for u in data["used"]), "rsi": min(u[1] for u in data["used"])},
        "target_met": bool(met), "per_seed": per_seed,
    }


def markdown(results: dict[str, Any]) -> str:
    def ci(pair: list[float], digits: int = 2) -> str:
        return f"[{pair[0]:.{digits}f}, {pair[1]:.{digits}f}]"

    lines = [
        f"# RSI inside OpenEvolve vs native sampling, N = {BUDGET} attempts, W = 2 "
        f"(RSI: {ITERATIONS} iterations x {BUDGET // ITERATIONS})", "",
        "b*: native's median final best. Attempts to reach b* censored at N (count of censored runs "
        "given); ratio = native attempts / RSI attempts per seed, > 1: RSI faster. 95% bootstrap CIs over seeds.", "",
        "| task | seeds | b* | median ratio [CI] | ratio of medians [CI] | native / RSI attempts (median) | "
        "censored native / RSI | native final best [CI] | RSI final best [CI] | RSI − native [CI] | target |",
        "|---|---:|---:|---|---|---|---|---|---|---|---|",
    ]
    for task, r in results["tasks"].items():
        c = r["ci95"]
        lines.append(
            f"| {task} | {r['seeds']} | {r['target']:.4f} | {r['median_ratio']:.2f} {ci(c['median_ratio'])} | "
            f"{r['ratio_of_medians']:.2f} {ci(c['ratio_of_medians'])} | "
            f"{r['median_native_attempts']:.1f} / {r['median_rsi_attempts']:.1f} | "
            f"{r['native_censored']} / {r['rsi_censored']} | "
            f"{r['median_native_final']:.4f} {ci(c['median_native_final'], 4)} | "
            f"{r['median_rsi_final']:.4f} {ci(c['median_rsi_final'], 4)} | "
            f"{r['median_final_difference']:+.4f} {ci(c['median_final_difference'], 4)} | "
            f"{'met' if r['target_met'] else 'missed'} |")
    lines += ["", "Dreaming deployed a changed policy in "
              + ", ".join(f"{t}: {r['dream_changed_policy']} of {r['dream_phases']} phases" for t, r in results["tasks"].items())
              + " (the phase after the last run is counted too; only phases 1 and 2 affect the runs).", ""]
    for task, r in results["tasks"].items():
        lines += [f"## {task}", "", "| seed | native attempts | RSI attempts | ratio | native final | RSI final | "
                  "RSI best per iteration (its own run) | native best so far at " + "/".join(map(str, checkpoints()))
                  + " | deployed version per phase |", "|---:|---:|---:|---:|---:|---:|---|---|---|"]
        for s in r["per_seed"]:
            na = f"{s['native_attempts']}{'' if s['native_reached'] else '+'}"
            ra = f"{s['rsi_attempts']}{'' if s['rsi_reached'] else '+'}"
            nat = ", ".join(f"{b:.4f}" for b in s["native_best_at"].values())
            it = ", ".join("-" if b is None else f"{b:.4f}" for b in s["rsi_best_per_iteration"])
            lines.append(f"| {s['seed']} | {na} | {ra} | {s['ratio']:.2f} | {s['native_final']:.4f} | "
                         f"{s['rsi_final']:.4f} | {it} | {nat} | {s['rsi_deployed_version_per_iteration']} |")
        made = r["attempts_made_min"]
        lines += ["", f"(`+`: censored at N, never reached b*. Fewest attempts a run made: native {made['native']}, "
                  f"RSI {made['rsi']}.)", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rsi-name", default="rsi", help="the RSI runs' folder name under each task")
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--md", type=Path, required=True)
    args = parser.parse_args()
    tasks = {}
    for task in ("circle-packing-26", "sum-difference", "function_minimization"):
        result = task_result(args.out / task, args.rsi_name) if (args.out / task).is_dir() else None
        if result is not None:
            tasks[task] = result
    results = {"rsi_runs": args.rsi_name, "budget": BUDGET, "iterations": ITERATIONS, "resamples": RESAMPLES, "target_ratio": TARGET_RATIO,
               "tasks": tasks,
               "target_met_on": sum(r["target_met"] for r in tasks.values())}
    args.json.write_text(json.dumps(results, indent=1) + "\n")
    args.md.write_text(markdown(results) + "\n")
    print(markdown(results).split("\n## ")[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
