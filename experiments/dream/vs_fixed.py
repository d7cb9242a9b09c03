"""Recursive Fixed Exploration vs the dreaming loop (the paper's comparison), built-in developer.

    nice -n 5 .venv/bin/python -m experiments.dream.vs_fixed [--tasks autocorrelation,circle-packing-26]
        [--seeds 0,1,2,3,4] [--iterations 6] [--workers 4] [--rounds 16] [--revisions 8] [--carry 8]
        [--betas 0.5] [--backend serial] [--history train]

Both arms are ``dream-gym rsi`` runs with the same task, built-in agent, seed, W and K1 per
iteration, starting from the same policy (``fixed``, the paper's fixed exploration):

* **fixed** (Recursive Fixed Exploration): ``--revisions 1``: only the incumbent, so ``fixed``
  is redeployed every iteration;
* **dream**: ``--revisions M --developer builtin``: each phase writes M-1 revisions and deploys
  the argmax on the history, scored at ``--betas`` (default the online beta 0.5: the one the
  deployed policy runs with) with the replay round limit K2 = K1 (the budget it gets online).
  The history is every world grown so far plus, with ``--history train`` (the default), the
  shipped recorded-v1 train worlds of the task (grown earlier by the same agent under eight
  other policies); ``--history none`` is the history of the arm's own rollouts only, where
  ``fixed`` replays its own trees exactly and nothing can beat it (see docs/results/dreaming.md).

Iteration 1 of both arms is the same rollout (same policy, same seeds): the online backend is
``serial`` by default, whose attempts are recorded in a fixed order, so a rollout is a function
of (policy, seed) alone; with the ``process`` backend nodes are recorded in completion order,
which changes branch numbering from run to run and makes two runs of the same policy diverge. Reported per task, over
the seeds: the attempts each arm needed to first reach the fixed arm's final best score, the
best score of each at equal attempts (the smaller of the two totals), and the deployed policy's
attempts per round in each iteration. Runs live in OUT/<task>/s<seed>/<arm>/ and resume after a
crash (run the script again).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from dream_gym.dream.improve import DreamSettings
from dream_gym.dream.rsi import RsiConfig, run_rsi
from dream_gym.dream.scoring import ScoringSettings
from dream_gym.replay.settings import ReplaySettings
from dream_gym.world.registry import list_worlds
from dream_gym.world.tree import load_world

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Args:
    tasks: str = "autocorrelation,circle-packing-26"
    seeds: str = "0,1,2,3,4"
    iterations: int = 6  # t
    workers: int = 4  # W
    rounds: int = 16  # K1
    revisions: int = 8  # M of the dream arm
    carry: int = 8  # earlier phases' versions each phase re-scores on the grown history (0: none)
    backend: str = "serial"  # the online pool: serial records attempts in a fixed order (reproducible)
    history: str = "train"  # extra history of the dream arm: "train" (the task's shipped train worlds) or "none"
    betas: str = "0.5"  # the selection grid: the beta the deployed policy runs with online
    start: str = "fixed"  # π_1 of both arms
    jobs: int = 2
    out: Path = ROOT / "out" / "bench" / "dream-vs-fixed"


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, value in vars(Args()).items():
        parser.add_argument(f"--{name}", type=type(value), default=value)
    return Args(**vars(parser.parse_args()))


def run_arm(args: Args, task: str, seed: int, arm: str) -> Path:
    out = args.out / task / f"s{seed}" / arm
    if (out / "summary.json").is_file():
        return out
    revisions = 1 if arm == "fixed" else args.revisions
    extra = None
    if args.history == "train" and arm == "dream":
        extra = ",".join(row["name"] for row in list_worlds("dream-gym/recorded-v1")
                         if row["task"] == task and row["split"] == "train")
    config = RsiConfig(
        task=task, policy=args.start, out=out, iterations=args.iterations,
        settings=DreamSettings(revisions, ScoringSettings(betas=tuple(float(b) for b in args.betas.split(",")),
                                                          jobs=args.jobs, seed=seed, replay=ReplaySettings(max_rounds=args.rounds)),
                               carry=args.carry),
        history=extra,
        agent="builtin", developer="builtin", workers=args.workers, rounds=args.rounds, backend=args.backend,
        resume=out.exists(), command=f"experiments/dream/vs_fixed.py {arm} {task} seed {seed}",
    )
    started = time.perf_counter()
    run_rsi(config)
    print(f"  {task} seed {seed} {arm}: {time.perf_counter() - started:.0f}s", flush=True)
    return out


def anytime(out: Path, iterations: int) -> tuple[list[float | None], str, list[float], list[int]]:
    """Best score so far after each attempt (all iterations in order), the direction, and the
    attempts per round and attempts of each iteration's rollout."""
    best: list[float | None] = []
    per_round = []
    per_iteration = []
    direction = "maximize"
    current: float | None = None
    for t in range(1, iterations + 1):
        world = load_world(out / "worlds" / f"iter-{t}")
        direction = world.direction
        rounds = max(int(r.get("round") or 0) for r in world.records)
        per_round.append((world.size - 1) / max(1, rounds))
        per_iteration.append(world.size - 1)
        for record in world.records[1:]:
            score = record["score"]
            if score is not None and (current is None or (score > current if direction == "maximize"
                                                          else score < current)):
                current = score
            best.append(current)
    return best, direction, per_round, per_iteration


def first_reach(curve: list[float | None], target: float, direction: str) -> int | None:
    for i, value in enumerate(curve, 1):
        if value is not None and (value >= target if direction == "maximize" else value <= target):
            return i
    return None


def better(a: float | None, b: float | None, direction: str) -> bool:
    if a is None or b is None:
        return False
    return a > b if direction == "maximize" else a < b


def main() -> None:
    args = parse_args()
    tasks = [t for t in args.tasks.split(",") if t]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    report: dict[str, dict] = {}
    for task in tasks:
        rows = []
        for seed in seeds:
            fixed_out, dream_out = (run_arm(args, task, seed, arm) for arm in ("fixed", "dream"))
            fixed, direction, fixed_rate, fixed_attempts = anytime(fixed_out, args.iterations)
            dream, _, dream_rate, dream_attempts = anytime(dream_out, args.iterations)
            target = fixed[-1]
            equal = min(len(fixed), len(dream))
            rows.append({
                "seed": seed, "target": target,
                "fixed_attempts_to_target": first_reach(fixed, target, direction) if target is not None else None,
                "dream_attempts_to_target": first_reach(dream, target, direction) if target is not None else None,
                "fixed_total": len(fixed), "dream_total": len(dream), "equal_attempts": equal,
                "fixed_at_equal": fixed[equal - 1], "dream_at_equal": dream[equal - 1],
                "fixed_per_round": fixed_rate, "dream_per_round": dream_rate,
                "fixed_per_iteration": fixed_attempts, "dream_per_iteration": dream_attempts,
                "dream_deployed": [json.loads(line)["deployed_m"] for line in
                                   (dream_out / "rsi.jsonl").read_text().splitlines()
                                   if json.loads(line)["type"] == "iteration"],
            })
        report[task] = {"direction": direction, "seeds": rows}
        print(f"\n## {task} ({direction}; {len(seeds)} seeds, {args.iterations} iterations, W={args.workers}, "
              f"K1={args.rounds}, M={args.revisions})")
        print("| seed | fixed final best | attempts to reach it: fixed | dream | ratio | best at equal attempts "
              "(fixed / dream) | total attempts (fixed / dream) |")
        print("|---:|---:|---:|---:|---:|---|---|")
        ratios = []
        for r in rows:
            f, d = r["fixed_attempts_to_target"], r["dream_attempts_to_target"]
            ratio = f / d if f and d else None
            if ratio:
                ratios.append(ratio)
            print(f"| {r['seed']} | {r['target']:.6g} | {f} | {d if d else 'not reached'} | "
                  f"{f'{ratio:.2f}x' if ratio else '-'} | {r['fixed_at_equal']:.6g} / {r['dream_at_equal']:.6g} "
                  f"({r['equal_attempts']}) | {r['fixed_total']} / {r['dream_total']} |")
        reached = sum(1 for r in rows if r["dream_attempts_to_target"])
        wins = sum(better(r["dream_at_equal"], r["fixed_at_equal"], direction) for r in rows)
        ties = sum(r["dream_at_equal"] == r["fixed_at_equal"] for r in rows)
        geo = statistics.geometric_mean(ratios) if ratios else float("nan")
        print(f"dream reached the fixed arm's final best in {reached}/{len(rows)} seeds; attempts ratio "
              f"fixed/dream: geometric mean {geo:.2f}x over those seeds; at equal attempts dream better in "
              f"{wins}, equal in {ties}, worse in {len(rows) - wins - ties} seeds")
        for arm in ("fixed", "dream"):
            rates = [statistics.mean(r[f"{arm}_per_round"][t] for r in rows) for t in range(args.iterations)]
            effort = [statistics.mean(r[f"{arm}_per_iteration"][t] for r in rows) for t in range(args.iterations)]
            print(f"{arm}: attempts per round by iteration " + ", ".join(f"{x:.2f}" for x in rates)
                  + "; attempts by iteration " + ", ".join(f"{x:.1f}" for x in effort))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
