"""Replay fidelity: does a policy's replay score on a history predict its online score?

    nice -n 5 .venv/bin/python -m experiments.replay_fidelity [--tasks sum-difference] [--seeds 0,1,2]

For each task and each policy (every built-in, at least 6): the mean replay V over the shipped
worlds of that task in --dataset (the history), at beta = --beta; and the mean online V over fresh online
runs of the same task with the built-in agent (one per seed, W workers, at most K1 rounds).

Online V of a run is the same formula, V = q - beta1 * N + beta2 * N / k, with q normalised by a
reference shared by every run of the task (baseline = the task's initial program, best = the best
score recorded in any history world or fresh run of that task), since each run's own best would
make every q equal to 1.

Reported: Spearman's rank correlation between the policies' mean replay V and mean online V; its
spread by a bootstrap over seeds (each policy's runs resampled with replacement; 5th-95th
percentile) and the correlation with each seed's runs alone. Runs live in
OUT/<task>/<policy>/s<seed>/ and resume after a crash (run the script again).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from dream_gym.evaluation.evaluate import evaluate, leaderboard
from dream_gym.online.loop import GrowConfig, grow
from dream_gym.policies import POLICIES, make_policy
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2, replay_score
from dream_gym.world.registry import list_worlds, load_cached
from dream_gym.world.tree import World, load_world

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Args:
    tasks: str = "sum-difference"
    policies: str = ",".join(sorted(POLICIES))
    seeds: str = "0,1,2"
    workers: int = 4  # W
    rounds: int = 30  # K1
    beta: float = 0.5  # the budget preference, online and in replay
    bootstrap: int = 2000
    dataset: str = "dream-gym/recorded-v1"  # the shipped dataset whose worlds of the task are the history
    out: Path = ROOT / "out" / "bench" / "replay-fidelity"


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, value in vars(Args()).items():
        parser.add_argument(f"--{name}", type=type(value), default=value)
    return Args(**vars(parser.parse_args()))


def online_run(args: Args, task: str, policy: str, seed: int) -> World:
    out = args.out / task / policy / f"s{seed}"
    meta = out / "world.json"
    if meta.is_file() and json.loads(meta.read_text()).get("sha256"):
        return load_world(out)
    config = GrowConfig(task=task, out=out, policy=policy, workers=args.workers, rounds=args.rounds,
                        seed=1000 + seed, beta=args.beta, resume=(out / "nodes.jsonl").exists(),
                        command=f"experiments/replay_fidelity.py {task} {policy} seed {seed}")
    started = time.perf_counter()
    grow(config, make_policy(policy))
    print(f"  online {task} {policy} seed {seed}: {time.perf_counter() - started:.0f}s", flush=True)
    return load_world(out)


def online_v(world: World, best_reference: float) -> float:
    """V of an online run with q normalised by the task's reference best (oriented scores)."""
    scored = [s for s in world.score_list if s is not None]
    span = best_reference - world.baseline_score
    q = (max(scored) - world.baseline_score) / span if scored and span > 0 else 0.0
    rounds = max(int(r.get("round") or 0) for r in world.records)
    return replay_score(q, world.size - 1, rounds, DEFAULT_BETA1, DEFAULT_BETA2)


def main() -> None:
    args = parse_args()
    policies = [p for p in args.policies.split(",") if p]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    report = {}
    for task in [t for t in args.tasks.split(",") if t]:
        history = [load_cached(row["path"]) for row in list_worlds()
                   if row["task"] == task and row.get("dataset") == args.dataset]
        board = leaderboard(evaluate(policies, history, (args.beta,), jobs=2, progress=False))
        replay = {row.policy: row.mean_v for row in board.overall}
        runs = {p: [online_run(args, task, p, s) for s in seeds] for p in policies}
        reference = max(w.best_score for w in history + [w for ws in runs.values() for w in ws])
        online = {p: [online_v(w, reference) for w in ws] for p, ws in runs.items()}
        x = np.array([replay[p] for p in policies])
        y = np.array([statistics.mean(online[p]) for p in policies])
        rho = float(spearmanr(x, y).statistic)
        rng = np.random.default_rng(0)
        boot = []
        for _ in range(args.bootstrap):
            picks = rng.integers(0, len(seeds), size=(len(policies), len(seeds)))
            yb = np.array([np.mean(np.array(online[p])[picks[i]]) for i, p in enumerate(policies)])
            value = spearmanr(x, yb).statistic
            if np.isfinite(value):
                boot.append(float(value))
        per_seed = [float(spearmanr(x, [online[p][i] for p in policies]).statistic) for i in range(len(seeds))]
        low, high = np.percentile(boot, [5, 95])
        print(f"\n## {task}: {len(policies)} policies, history {len(history)} shipped worlds, "
              f"{len(seeds)} online runs each (W={args.workers}, K1={args.rounds}, beta {args.beta:g})")
        print("| policy | replay V (history) | online V (mean ± sd over seeds) | online attempts |")
        print("|---|---:|---:|---:|")
        for p in sorted(policies, key=lambda p: -replay[p]):
            sd = statistics.stdev(online[p]) if len(online[p]) > 1 else 0.0
            attempts = statistics.mean(w.size - 1 for w in runs[p])
            print(f"| {p} | {replay[p]:.4f} | {statistics.mean(online[p]):.4f} ± {sd:.4f} | {attempts:.1f} |")
        print(f"Spearman rho = {rho:.3f}; bootstrap over seeds 5-95%: [{low:.3f}, {high:.3f}]; "
              f"per seed: {', '.join(f'{r:.3f}' for r in per_seed)}")
        report[task] = {"rho": rho, "bootstrap_5_95": [float(low), float(high)], "per_seed": per_seed,
                        "replay": replay, "online": online}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
