"""Dream-RSI's loop on OpenEvolve: redeploy a dreamed policy inside OpenEvolve and compare.

Run once (not in CI), from the repository root, on a quiet-ish machine:

    nice -n 10 .venv/bin/python experiments/openevolve_redeploy/run.py --out out/openevolve_redeploy

Every command it runs is appended to ``<out>/commands.log``; finished runs are skipped, so a
killed experiment continues where it stopped; run again when all are done, it only rebuilds the
tables (``<out>/table.md``, ``<out>/results.json``).

Design (fixed before any run):
* tasks circle-packing-26 and sum-difference (built-in, maximised, fast evaluators); seeds 0-4;
  every run: the same agent server (the task's built-in agent, seeded by the run's seed), the same
  evaluator files, W = 2, a budget of ITERATIONS OpenEvolve iterations, OpenEvolve's default
  config otherwise (5 islands, its sampling ratios, migration);
* arm A: OpenEvolve's own parent sampling (``--policy native``);
* arm B: Dream-RSI's loop: arm A's runs of the other four seeds of the task, imported from their
  OpenEvolve output folders (``dream-gym worlds import``), are the history H; the best built-in on
  H (highest mean replay V over the default beta grid, ``dream-gym eval``) is the incumbent; one
  dreaming step (``dream-gym dream --developer builtin -M 8``) from it; its chosen.py goes through
  the bridge on the held-out seed;
* arm C: the best shipped RL model through the bridge. Rule: the shipped model with the highest
  mean V on README's real-run table (imported OpenEvolve/ShinkaEvolve runs, "Results (measured)"),
  the closest setting to this one; mean V and not v2, since an online run has one beta: ppo-macro-v;
* the other built-ins through the bridge, for the replay-vs-online rank correlation: each policy's
  replay score on the five imported arm-A worlds of the task (mean V at beta 0.5, the runs' beta)
  against its online median final best.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

TASKS = ("circle-packing-26", "sum-difference")
SEEDS = (0, 1, 2, 3, 4)
W = 2
ITERATIONS = 80
BUILTINS = ("greedy", "fixed", "ucb", "puct", "hyperband", "shinka", "stagnation", "openevolve", "random")
REVISIONS = 8
ROOT = Path(__file__).resolve().parents[2]
# ppo-macro-v no longer ships (see agents/models/README.md); its zip is kept as a test fixture
ARM_C = str(ROOT / "tests/data/models/ppo-macro-v.zip")
DREAM_GYM = [sys.executable, "-m", "dream_gym"]  # the interpreter (and PYTHONPATH) this script runs with


def sh(cmd: list[str], log: Path) -> None:
    line = shlex.join(["nice", "-n", "10", *cmd])
    with log.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    started = time.time()
    done = subprocess.run(["nice", "-n", "10", *cmd], capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"failed ({done.returncode}): {line}")
    print(f"{time.time() - started:6.1f}s  {line}", flush=True)


def run_dir(out: Path, task: str, arm: str, seed: int) -> Path:
    return out / "runs" / task / arm.replace("/", "_") / f"s{seed}"


def online(out: Path, task: str, arm: str, policy: str, seed: int, log: Path) -> Path:
    folder = run_dir(out, task, arm, seed)
    if (folder / "run_summary.json").exists():
        return folder
    if folder.exists():  # killed mid-run: continue it
        sh([*DREAM_GYM, "openevolve", "run", "--task", task, "--policy", policy, "-W", str(W), "--iterations",
            str(ITERATIONS), "--seed", str(seed), "--out", str(folder), "--resume"], log)
    else:
        folder.parent.mkdir(parents=True, exist_ok=True)
        sh([*DREAM_GYM, "openevolve", "run", "--task", task, "--policy", policy, "-W", str(W), "--iterations",
            str(ITERATIONS), "--seed", str(seed), "--out", str(folder)], log)
    return folder


def imported(out: Path, task: str, seed: int, log: Path) -> Path:
    """Arm A's run of ``seed`` imported from OpenEvolve's own output folder (the user's path)."""
    folder = out / "imported" / task / f"A-s{seed}"
    if not (folder / "world.json").exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        sh([*DREAM_GYM, "worlds", "import", "--from", "openevolve", str(run_dir(out, task, "A", seed) / "openevolve"),
            "--out", str(folder), "-W", str(W), "--id", f"{task}-A-s{seed}", "--task", task], log)
    return folder


def history(out: Path, task: str, held_out: int) -> Path:
    """A folder of links to the imported arm-A worlds of the other seeds."""
    folder = out / "history" / task / f"without-s{held_out}"
    folder.mkdir(parents=True, exist_ok=True)
    for seed in SEEDS:
        link = folder / f"A-s{seed}"
        if seed != held_out and not link.exists():
            link.symlink_to(out / "imported" / task / f"A-s{seed}")
    return folder


def replay(out: Path, name: str, policies: list[str], worlds: Path, betas: str, log: Path) -> list[dict]:
    path = out / "replay" / f"{name}.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [*DREAM_GYM, "eval", "--worlds", str(worlds), "--betas", betas, "--out", str(path), "--no-progress", "-j", "2"]
        for policy in policies:
            cmd += ["-p", policy]
        sh(cmd, log)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def dreamed(out: Path, task: str, seed: int, log: Path) -> tuple[Path, dict]:
    hist = history(out, task, seed)
    rows = replay(out, f"builtins-{task}-without-s{seed}", list(BUILTINS), hist, "0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1", log)
    means = {p: statistics.mean(r["replay_score"] for r in rows if r["policy"] == p) for p in BUILTINS}
    best = max(BUILTINS, key=lambda p: (means[p], p))
    folder = out / "dream" / task / f"s{seed}"
    if not (folder / "chosen.py").exists():
        sh([*DREAM_GYM, "dream", "--history", str(hist), "--policy", best, "--developer", "builtin", "-M", str(REVISIONS),
            "--seed", str(seed), "--out", str(folder), "--quiet", "-j", "2"], log)
    ledger = [json.loads(line) for line in (folder / "dream.jsonl").read_text().splitlines() if line.strip()]
    phase = next(e for e in ledger if e.get("type") == "phase")
    return folder / "chosen.py", {"incumbent": best, "incumbent_V": means[best], "ledger": ledger,
                                  "selected_m": phase.get("deployed_m"), "gain_history": phase.get("gain_history")}


# -- analysis ---------------------------------------------------------------------------------------
def world_curve(folder: Path) -> tuple[list[float | None], float | None]:
    """Scores of the non-root nodes in world order, and the best."""
    nodes = [json.loads(line) for line in (folder / "nodes.jsonl").read_text().splitlines() if line.strip()]
    scores = [n.get("score") for n in nodes[1:]]
    valid = [s for s in scores if s is not None]
    return scores, (max(valid) if valid else nodes[0].get("score"))


def online_v(folder: Path, reference: float) -> float:
    """V of an online run, as replay scores an episode (beta1 0.003, beta2 0.02): q of its best with
    0 at the baseline and 1 at ``reference`` (the best of every run of that task and seed),
    minus the cost of its attempts, plus its attempts per round."""
    nodes = [json.loads(line) for line in (folder / "nodes.jsonl").read_text().splitlines() if line.strip()]
    baseline = float(nodes[0]["score"])
    best = max([n["score"] for n in nodes if n.get("score") is not None])
    attempts = len(nodes) - 1
    rounds = max(int(n.get("round") or 0) for n in nodes)
    q = min(1.0, max(0.0, (best - baseline) / (reference - baseline))) if reference > baseline else 0.0
    return q - 0.003 * attempts + 0.02 * attempts / max(1, rounds)


def attempts_to_reach(scores: list[float | None], target: float) -> int | None:
    for index, score in enumerate(scores, start=1):
        if score is not None and score >= target - 1e-12:
            return index
    return None


def spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(values: list[float]) -> list[float]:
        order = sorted(range(len(values)), key=lambda i: values[i])
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return out
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    den = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return num / den if den else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "openevolve_redeploy")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "commands.log"
    started = time.time()
    arms: dict[str, dict[str, dict[int, Path]]] = {}
    dream_info: dict[str, dict[int, dict]] = {}
    for task in TASKS:
        arms[task] = {}
        arms[task]["A"] = {s: online(out, task, "A", "native", s, log) for s in SEEDS}
        for s in SEEDS:
            imported(out, task, s, log)
        dream_info[task] = {}
        arms[task]["B"] = {}
        for s in SEEDS:
            chosen, info = dreamed(out, task, s, log)
            dream_info[task][s] = info
            arms[task]["B"][s] = online(out, task, "B", str(chosen), s, log)
        arms[task]["C"] = {s: online(out, task, "C", ARM_C, s, log) for s in SEEDS}
        for policy in BUILTINS:
            arms[task][policy] = {s: online(out, task, policy, policy, s, log) for s in SEEDS}
    report = analyse(out, arms, dream_info, log)
    report["seconds"] = time.time() - started
    (out / "results.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    print((out / "table.md").read_text())
    return 0


def analyse(out: Path, arms: dict, dream_info: dict, log: Path) -> dict:
    lines: list[str] = []
    report: dict = {"tasks": {}}
    for task in TASKS:
        curves = {arm: {s: world_curve(f) for s, f in runs.items()} for arm, runs in arms[task].items()}
        a_best = {s: curves["A"][s][1] for s in SEEDS}
        rows = []
        for arm in ["A", "B", "C", *BUILTINS]:
            bests = [curves[arm][s][1] for s in SEEDS]
            attempts = [len(curves[arm][s][0]) for s in SEEDS]
            reach = [attempts_to_reach(curves[arm][s][0], a_best[s]) for s in SEEDS]
            reached = [r for r in reach if r is not None]
            dev = 0
            if arm == "B":
                dev = statistics.mean(sum(1 for e in dream_info[task][s]["ledger"]
                                          if e.get("type") == "revision" and e.get("status") != "incumbent")
                                      for s in SEEDS)
            rows.append({
                "arm": arm, "median_best": statistics.median(bests), "min_best": min(bests), "max_best": max(bests),
                "bests": bests, "attempts": attempts, "median_attempts": statistics.median(attempts),
                "reach": reach, "reached": len(reached), "median_reach": statistics.median(reached) if reached else None,
                "developer_versions": dev,
            })
        # replay on the five imported arm-A worlds vs online
        policies = [ARM_C, *BUILTINS]
        worlds = out / "imported" / task
        rep = replay(out, f"all-{task}-beta0.5", policies, worlds, "0.5", log)
        replay_v = {p: statistics.mean(r["replay_score"] for r in rep if r["policy"] == p) for p in policies}
        replay_q = {p: statistics.mean(r["best_q"] for r in rep if r["policy"] == p) for p in policies}
        online_best = {("C" if p == ARM_C else p): next(r["median_best"] for r in rows if r["arm"] == ("C" if p == ARM_C else p))
                       for p in policies}
        xs_v = [replay_v[p] for p in policies]
        xs_q = [replay_q[p] for p in policies]
        ys = [online_best["C" if p == ARM_C else p] for p in policies]
        rho_v, rho_q = spearman(xs_v, ys), spearman(xs_q, ys)
        reference = {s: max(curves[arm][s][1] for arm in curves) for s in SEEDS}
        v_online = {p: statistics.median(online_v(arms[task]["C" if p == ARM_C else p][s], reference[s]) for s in SEEDS)
                    for p in policies}
        rho_vv = spearman(xs_v, [v_online[p] for p in policies])
        report["tasks"][task] = {"rows": rows, "replay_V": replay_v, "replay_q": replay_q, "spearman_V": rho_v,
                                 "spearman_q": rho_q, "online_V": v_online, "spearman_V_online_V": rho_vv, "dream": {s: {k: v for k, v in d.items() if k != "ledger"}
                                                                for s, d in dream_info[task].items()}}
        a_reach = next(r for r in rows if r["arm"] == "A")["median_reach"]
        lines.append(f"### {task} (W = {W}, budget {ITERATIONS} iterations, seeds {SEEDS[0]}-{SEEDS[-1]})\n")
        lines.append("| arm / policy | final best: median [min, max] | attempts used (median) | runs reaching arm A's final best | attempts to reach it (median) | vs arm A | all-in cost (median) | replay V on arm-A worlds (β 0.5) |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        names = {"A": "A: OpenEvolve's own sampling", "B": "B: dreamed policy (bridge)", "C": f"C: {ARM_C} (bridge)"}
        for r in rows:
            ratio = (f"{a_reach / r['median_reach']:.2f}x fewer" if r["median_reach"] and a_reach else "-")
            key = ARM_C if r["arm"] == "C" else r["arm"]
            rv = f"{replay_v[key]:.3f}" if key in replay_v else "-"
            reach = "-" if r["median_reach"] is None else f"{r['median_reach']:.0f}"
            cost = f"{r['median_attempts']:.0f} attempts"
            if r["developer_versions"]:
                episodes = int(round(r["developer_versions"])) * 4 * 11 * 2
                cost += f" + {r['developer_versions']:.0f} developer revisions (0 LLM calls; {episodes} replay episodes)"
            lines.append(f"| {names.get(r['arm'], r['arm'])} | {r['median_best']:.6g} [{r['min_best']:.6g}, {r['max_best']:.6g}] | "
                         f"{r['median_attempts']:.0f} | {r['reached']}/5 | {reach} | {ratio} | {cost} | {rv} |")
        incumbents = ", ".join(f"s{s}: {d['incumbent']}" for s, d in dream_info[task].items())
        lines.append("")
        lines.append(f"Dreaming (arm B): incumbents (best built-in on the other seeds' imported arm-A worlds) {incumbents}; "
                     f"{REVISIONS} versions per step ({REVISIONS - 1} revisions by the built-in developer, 0 LLM calls), each "
                     f"replayed on 4 worlds x 11 betas, twice.")
        lines.append(f"Replay vs online over {len(policies)} policies: Spearman rho {rho_v:.2f} (replay V) and {rho_q:.2f} "
                     f"(replay best q) against the online median final best; {rho_vv:.2f} between replay V and the "
                     "online runs' own V (median over seeds; q from 0 at the baseline to 1 at the best run of the seed).\n")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    return report


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
