"""The generic no-LLM agent on OpenEvolve's own example tasks: validity and progress.

Run once (not in CI), from the repository root:

    nice -n 10 .venv/bin/python experiments/generic_agent/run.py --out /tmp/generic-agent-runs

Every command it runs is appended to ``<out>/commands.log``; a finished run (its
``run_summary.json`` exists) is skipped, so a killed experiment continues where it stopped. It
writes ``results.json`` beside this file (and in ``--out``); the world folders stay in ``--out``.

Design (fixed before any run):
* the five examples of OpenEvolve's repository copied in ``/work/shared/openevolve-examples``
  (function_minimization, heilbronn_triangle, k_module_problem, polynomial_real, fft_convolution),
  each as ``--task initial_program.py,evaluator.py`` with no ``--model``: the generic agent answers
  through the agent server, and every evaluation runs the example's evaluator in dream_gym's
  sandbox; OpenEvolve's default config (the example's own config.yaml is not used: ``dream-gym
  deploy`` has none either), W = 2, 100 iterations, seeds 0-4 (a run takes seconds to minutes);
* the two AlgoTune examples import ``AlgoTuneTasks`` from an AlgoTune checkout that their evaluator
  looks for at ``Path.home() / "github" / "AlgoTune"``: given with ``--read`` when it is there
  (``ALGOTUNE``). Their evaluations take seconds to a minute each (fft_convolution about 3 s idle,
  9 s under load, polynomial_real 15 s idle, about 50 s under load: each times AlgoTune's reference
  solver and the program on 5 problems), so polynomial_real runs 20 iterations with seeds 0-1
  (``BUDGETS``; fft_convolution, first planned at 20 iterations, runs the 100 of the others);
* arms: ``--policy native`` (OpenEvolve's own sampling), ``--policy greedy`` (the built-in, its
  defaults: it stops after three rounds without a new best) and greedy with ``patience=100`` (so
  it spends the whole budget);
* an example is excluded when its evaluator cannot score the initial program here (checked first,
  with the sandboxed evaluation the runs use: the reason is the evaluator's own error);
* per run: the share of valid children (the evaluator returned a combined_score and no error),
  the initial program's and the best combined_score, nodes, why it stopped, seconds.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

EXAMPLES_DIR = Path("/work/shared/openevolve-examples")
EXAMPLES = ("function_minimization", "heilbronn_triangle", "k_module_problem", "polynomial_real", "fft_convolution")
ALGOTUNE = Path.home() / "github" / "AlgoTune"
NEEDS_ALGOTUNE = ("polynomial_real", "fft_convolution")
#: (iterations, seeds) where an example's evaluation takes too long for the default budget
BUDGETS = {"polynomial_real": (20, (0, 1)), "fft_convolution": (100, (0, 1, 2, 3, 4))}
ARMS = {"native": ["--policy", "native"], "greedy": ["--policy", "greedy"],
        "greedy-patience-100": ["--policy", "greedy", "--policy-arg", "patience=100"]}
W, ITERATIONS, SEEDS = 2, 100, (0, 1, 2, 3, 4)
HERE = Path(__file__).resolve().parent
DREAM_GYM = [sys.executable, "-m", "dream_gym"]

def read_args(example: str) -> list[str]:
    """``--read`` of the folders an example's evaluator reads besides its own (the AlgoTune checkout)."""
    return ["--read", str(ALGOTUNE)] if example in NEEDS_ALGOTUNE and ALGOTUNE.is_dir() else []


def probe(example: str) -> dict:
    """The example's evaluator on its initial program, evaluated as the runs evaluate it (in the
    sandbox, seeded with seed 0): its error or score."""
    from dream_gym.integrations.files_task import FilesTask, sandbox_wall_s

    read = read_args(example)[1:]
    task = FilesTask.of(EXAMPLES_DIR / example / "evaluator.py", seed=0, wall_s=sandbox_wall_s(300), read=read)
    metrics = task.evaluate(EXAMPLES_DIR / example / "initial_program.py").metrics
    error = metrics.get("error")
    return {"error": None if error is None else str(error)[:500], "combined_score": metrics.get("combined_score")}


def run(example: str, arm: str, seed: int, out: Path, log: Path) -> dict:
    folder = out / f"{example}-{arm}-{seed}"
    task = f"{EXAMPLES_DIR / example / 'initial_program.py'},{EXAMPLES_DIR / example / 'evaluator.py'}"
    iterations = BUDGETS.get(example, (ITERATIONS, SEEDS))[0]
    command = [*DREAM_GYM, "openevolve", "run", "--task", task, *ARMS[arm], "-W", str(W),
               "--iterations", str(iterations), "--seed", str(seed), "--out", str(folder), *read_args(example)]
    if not (folder / "run_summary.json").exists():
        line = shlex.join(["nice", "-n", "10", "dream-gym", *command[3:]])
        with log.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        started = time.time()
        done = subprocess.run(["nice", "-n", "10", *command], capture_output=True, text=True, cwd="/tmp")
        if done.returncode != 0:
            raise RuntimeError(f"{line} failed:\n{done.stderr[-3000:]}")
        print(f"{example} {arm} {seed}: {time.time() - started:.0f}s", flush=True)
    return summarise(folder)


def summarise(folder: Path) -> dict:
    records = [json.loads(line) for line in (folder / "nodes.jsonl").read_text().splitlines() if line.strip()]
    summary = json.loads((folder / "run_summary.json").read_text())
    children = records[1:]
    valid = [r for r in children if r.get("score") is not None]
    scores = [r["score"] for r in records if r.get("score") is not None]
    initial = records[0].get("score")
    best = max(scores) if scores else None
    return {
        "nodes": len(records), "children": len(children), "valid_children": len(valid),
        "valid_share": round(len(valid) / len(children), 3) if children else None,
        "initial_score": initial, "best_score": best,
        "improved": best is not None and initial is not None and best > initial,
        "stopped_by": summary.get("stopped_by"), "seconds": round(float(summary.get("seconds") or 0.0), 1),
        "folder": str(folder),
    }


def four_digits(value: float) -> float:
    """Four significant digits (heilbronn_triangle's first gains are of the order of 1e-5)."""
    return float(f"{value:.4g}")


def aggregate(runs: list[dict]) -> dict:
    """One arm of one example over the seeds: pooled valid share, runs improved, mean gain."""
    children = sum(r["children"] for r in runs)
    gains = [r["best_score"] - r["initial_score"] for r in runs
             if r["best_score"] is not None and r["initial_score"] is not None]
    return {
        "valid_share": round(sum(r["valid_children"] for r in runs) / children, 3) if children else None,
        "improved_runs": sum(1 for r in runs if r["improved"]), "runs": len(runs),
        "mean_initial": four_digits(sum(r["initial_score"] or 0.0 for r in runs) / len(runs)),
        "mean_best": four_digits(sum(r["best_score"] or 0.0 for r in runs) / len(runs)),
        "mean_gain": four_digits(sum(gains) / len(gains)) if gains else None,
        "mean_nodes": round(sum(r["nodes"] for r in runs) / len(runs), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/generic-agent-runs"))
    parser.add_argument("--example", action="append", choices=EXAMPLES, default=[],
                        help="measure only this example (repeatable); the others keep their results.json entry")
    parser.add_argument("--seeds", type=int, nargs="+", help="these seeds instead of the design's (a shorter run)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "commands.log"
    results: dict = {"design": {"w": W, "iterations": ITERATIONS, "seeds": SEEDS, "arms": ARMS,
                                "budgets": {k: {"iterations": i, "seeds": s} for k, (i, s) in BUDGETS.items()},
                                "read": {e: read_args(e)[1:] for e in NEEDS_ALGOTUNE}, "sandboxed": True},
                     "examples": {}}
    result_path = HERE / "results.json"
    if args.example and result_path.exists():
        results["examples"] = json.loads(result_path.read_text())["examples"]
    for example in args.example or EXAMPLES:
        checked = probe(example)
        entry: dict = {"initial_program": checked}
        if checked["error"] is not None:
            entry["excluded"] = checked["error"]
        else:
            seeds = tuple(args.seeds) if args.seeds else BUDGETS.get(example, (ITERATIONS, SEEDS))[1]
            runs = {arm: [run(example, arm, seed, args.out, log) for seed in seeds] for arm in ARMS}
            entry["summary"] = {arm: aggregate(found) for arm, found in runs.items()}
            entry["runs"] = runs
            entry["measured"] = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seeds": list(seeds),
                                 "iterations": BUDGETS.get(example, (ITERATIONS, SEEDS))[0], "w": W}
        results["examples"][example] = entry
    text = json.dumps(results, indent=2) + "\n"
    result_path.write_text(text, encoding="utf-8")
    (args.out / "results.json").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
