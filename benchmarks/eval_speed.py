"""Evaluation speed: episodes/s of the built-in baselines on the replay fast path, and the wall time
of ~1,000 policy x world x beta episodes with ``dream_gym.evaluation.evaluate.evaluate(jobs=2)``.

    .venv/bin/python -m benchmarks.eval_speed            # full run (~1 min on 2 cores)
    .venv/bin/python -m benchmarks.eval_speed --profile  # also cProfile the serial grid

Worlds are random trees written to a temporary folder (parent of node i: a uniformly random
earlier node 70% of the time, else node i-1, so there are both wide and deep parts; 10% of the
attempts unscored). Target: the ~1,000-episode grid on ~500-node worlds in < 10 s on 2 cores.

The grid runs four ways, interleaved over ``--rounds`` repetitions (medians): serial in this
process without the watchdog, serial in one watched worker, the process backend, and, as a
reference only, the process backend with workers forked from this process (the start method
before the fork server, unsafe in a threaded parent). Worker start times are printed first.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dream_gym.evaluation.evaluate import evaluate
from dream_gym.infrastructure import jobs as pools
from dream_gym.policies import POLICIES, make_policy
from dream_gym.policy import run_episode
from dream_gym.replay.score import DEFAULT_BETA_GRID
from dream_gym.world import registry
from dream_gym.world.registry import load_cached
from dream_gym.world.tree import NODES_FILE, WORLD_FILE
from dream_gym.world.writer import new_meta, write_world

GRID_TARGET_S = 10.0


def random_world(folder: Path, nodes: int, seed: int, workers: int = 4) -> Path:
    rng = np.random.default_rng(seed)
    records = [{"id": "n0", "parent": None, "score": 0.0}]
    for i in range(1, nodes):
        parent = int(rng.integers(0, i)) if rng.random() < 0.7 else i - 1
        score = None if rng.random() < 0.1 else float(rng.normal(0.3, 1.0))
        records.append({"id": f"n{i}", "parent": f"n{parent}", "score": score})
    if nodes <= 2000:
        return write_world(folder, new_meta(f"bench-{nodes}-s{seed}", "bench", workers=workers), records)
    # write_world fsyncs every node line (durable growth); a big throwaway world is written at once
    folder.mkdir(parents=True)
    (folder / WORLD_FILE).write_text(json.dumps(new_meta(f"bench-{nodes}-s{seed}", "bench", workers=workers)))
    (folder / NODES_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def episodes_per_second(world_folder: Path, policy: str, min_seconds: float) -> tuple[float, float]:
    """(episodes/s, mean attempts per episode) over repeated sweeps of the beta grid."""
    world = load_cached(world_folder)
    episodes, attempts = 0, 0
    start = time.perf_counter()
    while True:
        for beta in DEFAULT_BETA_GRID:
            result = run_episode(make_policy(policy), world, beta=beta, on_error="raise")
            episodes += 1
            attempts += result.attempts
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return episodes / elapsed, attempts / episodes


def _grid_contenders(jobs: int) -> list[tuple[str, dict[str, Any], str | None]]:
    """(label, evaluate options, start method override) of each way to run the grid."""
    return [
        ("serial, in this process (task_timeout=None: no watchdog)", {"backend": "serial", "task_timeout": None}, None),
        ("serial, one watched worker (default)", {"backend": "serial"}, None),
        (f"process, {jobs} watched workers (default)", {"backend": "process", "jobs": jobs}, None),
        (f"process, {jobs} workers forked from this process (unsafe)", {"backend": "process", "jobs": jobs},
         "fork"),
    ]


@contextlib.contextmanager
def _start_method(method: str | None) -> Iterator[None]:
    """Workers started with ``method`` instead of dream_gym's (a reference for the benchmark only:
    forking a parent that runs threads can hang)."""
    if method is None:
        yield
        return
    saved, pools.START_METHOD = pools.START_METHOD, method
    try:
        yield
    finally:
        pools.START_METHOD = saved


def _noop(task: Any, beat: Any) -> int:
    return os.getpid()


def _pool_start_s(n: int) -> float:
    start = time.perf_counter()
    with pools.JobPool(_noop, n, task_timeout=60) as pool:
        assert len(list(pool.run(range(n)))) == n
    return time.perf_counter() - start


def print_worker_start(n: int, rounds: int) -> None:
    """Time to start n workers, run one trivial task each and stop them: the first pool (it
    starts the fork server, which imports dream_gym once), then warm, then forked (reference)."""
    first = _pool_start_s(n)
    warm = statistics.median(_pool_start_s(n) for _ in range(rounds))
    with _start_method("fork"):
        forked = statistics.median(_pool_start_s(n) for _ in range(rounds))
    print(f"worker start ({n} workers, one trivial task each): first pool {first * 1000:.0f} ms "
          f"(starts the {pools.START_METHOD} server), then {warm * 1000:.0f} ms; "
          f"forked from this process {forked * 1000:.0f} ms (medians of {rounds})\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="150,1000,100000")
    parser.add_argument("--seconds", type=float, default=0.5, help="minimum time per episodes/s cell")
    parser.add_argument("--grid-worlds", type=int, default=None,
                        help="~500-node worlds in the grid (default: ~1,000 episodes over the built-in policies x 11 betas)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="processes of the grid run (default 2)")
    parser.add_argument("--rounds", type=int, default=5, help="repetitions of the grid per contender")
    parser.add_argument("--profile", action="store_true", help="cProfile the grid run serially")
    args = parser.parse_args(argv)
    print_worker_start(args.jobs, args.rounds)
    policies = sorted(POLICIES)
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="dream-gym-bench-") as tmp:
        root = Path(tmp)
        print(f"episodes/s on the fast path (run_episode on a World), beta grid {len(DEFAULT_BETA_GRID)} values, W=4")
        print(f"{'nodes':>8} " + " ".join(f"{p:>22}" for p in policies))
        for size in sizes:
            folder = random_world(root / f"single-{size}", size, seed=size)
            cells = []
            for policy in policies:
                rate, attempts = episodes_per_second(folder, policy, args.seconds)
                cells.append(f"{rate:9.0f} ep/s ({attempts:5.1f} att)")
            print(f"{size:>8} " + " ".join(f"{c:>22}" for c in cells))

        grid_root = root / "grid"
        if args.grid_worlds is None:
            args.grid_worlds = max(1, round(1000 / (len(policies) * len(DEFAULT_BETA_GRID))))
        for i in range(args.grid_worlds):
            random_world(grid_root / f"w{i:03d}", 450 + 5 * i % 100, seed=1000 + i)
        n_episodes = len(policies) * args.grid_worlds * len(DEFAULT_BETA_GRID)
        print(f"\ngrid: {len(policies)} policies x {args.grid_worlds} worlds (~500 nodes) x "
              f"{len(DEFAULT_BETA_GRID)} betas = {n_episodes} episodes")
        contenders = _grid_contenders(args.jobs)
        timings: dict[str, list[float]] = {name: [] for name, _, _ in contenders}
        reference = None
        for _ in range(args.rounds):  # contenders interleaved, so machine load hits them alike
            for name, options, start_method in contenders:
                registry._CACHE.clear()  # count world loading in every run
                with _start_method(start_method):
                    start = time.perf_counter()
                    results = evaluate(policies, str(grid_root), None, progress=False, **options)
                    timings[name].append(time.perf_counter() - start)
                rows = [r.to_dict() for r in results]
                if reference is None:
                    reference = rows
                elif rows != reference:
                    print(f"ERROR: results of {name!r} differ from the first contender's", file=sys.stderr)
                    return 1
        base = statistics.median(timings[contenders[0][0]])
        print(f"{'backend':<58} {'seconds':>8} {'episodes/s':>11} {'vs in-process':>14}   (medians of {args.rounds})")
        for name, _, _ in contenders:
            seconds = statistics.median(timings[name])
            print(f"{name:<58} {seconds:8.2f} {n_episodes / seconds:11.0f} {seconds / base:13.2f}x")
        process = statistics.median(timings[contenders[2][0]])
        verdict = "met" if process < GRID_TARGET_S else "MISSED"
        print(f"target < {GRID_TARGET_S:.0f} s with {args.jobs} processes: {verdict}; all results identical")
        timings["process"] = timings[contenders[2][0]]

        if args.profile or statistics.median(timings["process"]) >= GRID_TARGET_S:
            registry._CACHE.clear()
            profiler = cProfile.Profile()
            profiler.enable()
            evaluate(policies, str(grid_root), None, backend="serial", task_timeout=None, progress=False)
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
            print("\nprofile of the serial grid (by own time):")
            print(text.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
