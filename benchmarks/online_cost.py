"""Online vs replay cost, and the worker pool's parallel efficiency.

    python -m benchmarks.online_cost [--skip-pool]

(1) For every shipped world: the seconds its online run took (run_summary.json) against the
seconds one replay episode of a policy takes on it (mean over the built-in policies at beta 0.5,
measured here), and their ratio: the paper's premise is that replay is >= 10^4 times cheaper.
(2) The time to start and warm the worker pool, and its parallel efficiency: the same 8 attempts of ``sleep-task`` (a fixed 0.5 s
evaluator) grown with 1, 2 and 4 workers; efficiency = T(1) / (W * T(W)).
(3) The best score each built-in task reached in the shipped worlds, against the best known.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from dream_gym.online.attempts import Backend, Deadlines
from dream_gym.online.loop import GrowConfig, grow
from dream_gym.online.tasks import get_task
from dream_gym.policies import POLICIES, make_policy
from dream_gym.policy import run_episode
from dream_gym.world.registry import list_worlds, resolve_world


def replay_seconds(world, repeats: int = 3) -> float:
    timings = []
    for name in sorted(POLICIES):
        start = time.perf_counter()
        for seed in range(repeats):
            run_episode(make_policy(name), world, beta=0.5, seed=seed)
        timings.append((time.perf_counter() - start) / repeats)
    return statistics.fmean(timings)


def replay_vs_online() -> None:
    print("## Online growth vs replay, per shipped world")
    print("| world | nodes | grow s | replay episode ms | ratio |")
    print("|---|---:|---:|---:|---:|")
    ratios = []
    for row in list_worlds():
        summary = Path(row["path"]) / "run_summary.json"
        if not summary.is_file():
            continue
        grow_s = json.loads(summary.read_text())["seconds"]
        replay_s = replay_seconds(resolve_world(row["name"]))
        ratios.append(grow_s / replay_s)
        print(f"| {row['name']} | {row['nodes']} | {grow_s:.0f} | {replay_s * 1e3:.2f} | {grow_s / replay_s:,.0f}x |")
    if ratios:
        print(f"\nmedian ratio {statistics.median(ratios):,.0f}x, smallest {min(ratios):,.0f}x")


def pool_start(workers: int) -> float:
    """Seconds to start the online loop's process pool and warm its workers (before round 1)."""
    started = time.perf_counter()
    Backend("process", workers, Deadlines(60.0, 60.0)).close()
    return time.perf_counter() - started


def pool_efficiency(attempts: int = 8) -> None:
    first = pool_start(2)
    print(f"\n## Worker pool start (2 workers, warmed: agents and tasks imported): first {first:.2f} s "
          f"(starts the fork server), then {statistics.median(pool_start(2) for _ in range(3)):.2f} s")
    print("\n## Worker pool, sleep-task (fixed 0.5 s evaluator), 8 attempts")
    print("| workers | seconds | attempts/s | efficiency |")
    print("|---:|---:|---:|---:|")
    base = None
    for workers in (1, 2, 4):
        with tempfile.TemporaryDirectory() as tmp:
            config = GrowConfig(task="sleep-task", out=Path(tmp) / "w", workers=workers,
                                rounds=attempts // workers, backend="process", survival_repeats=1)
            result = grow(config, make_policy("fixed", branches=attempts, depth=1))
            seconds = sum(stats.seconds for stats in result.round_stats)  # rounds only: no root/survival
        base = base or seconds
        print(f"| {workers} | {seconds:.2f} | {result.attempts / seconds:.2f} | {base / (workers * seconds):.2f} |")


def best_per_task() -> None:
    print("\n## Best score per built-in task (shipped worlds, built-in agent)")
    print("| task | direction | best reached | best known |")
    print("|---|---|---:|---:|")
    best: dict[str, float] = {}
    for row in list_worlds():
        world = resolve_world(row["name"])
        raw = [r["score"] for r in world.records if r["score"] is not None]
        value = min(raw) if world.direction == "minimize" else max(raw)
        task = world.task_name
        if task not in best or (value < best[task] if world.direction == "minimize" else value > best[task]):
            best[task] = value
    for task, value in sorted(best.items()):
        spec = get_task(task)
        print(f"| {task} | {spec.direction} | {value:.6g} | {spec.best_known if spec.best_known else '-'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-pool", action="store_true")
    args = parser.parse_args()
    replay_vs_online()
    if not args.skip_pool:
        pool_efficiency()
    best_per_task()


if __name__ == "__main__":
    main()
