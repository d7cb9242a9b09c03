"""Evaluation speed: episodes/s of the built-in baselines on the replay fast path, and the wall time
of ~1,000 policy x world x beta episodes with ``dream_gym.evaluate.evaluate(jobs=2)``.

    .venv/bin/python benchmarks/eval_speed.py            # full run (~1 min on 2 cores)
    .venv/bin/python benchmarks/eval_speed.py --profile  # also cProfile the serial grid

Worlds are random trees written to a temporary folder (parent of node i: a uniformly random
earlier node 70% of the time, else node i-1, so there are both wide and deep parts; 10% of the
attempts unscored). Target: the ~1,000-episode grid on ~500-node worlds in < 10 s on 2 cores.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dream_gym import registry
from dream_gym.evaluate import evaluate
from dream_gym.policies import POLICIES, make_policy
from dream_gym.policy import run_episode
from dream_gym.registry import load_cached
from dream_gym.score import DEFAULT_BETA_GRID
from dream_gym.world import NODES_FILE, WORLD_FILE, new_meta, write_world

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="150,1000,100000")
    parser.add_argument("--seconds", type=float, default=0.5, help="minimum time per episodes/s cell")
    parser.add_argument("--grid-worlds", type=int, default=None,
                        help="~500-node worlds in the grid (default: ~1,000 episodes over the built-in policies x 11 betas)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="processes of the grid run (default 2)")
    parser.add_argument("--profile", action="store_true", help="cProfile the grid run serially")
    args = parser.parse_args(argv)
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
        timings = {}
        reference = None
        for backend, jobs in (("serial", 1), ("process", args.jobs)):
            registry._CACHE.clear()  # count world loading in every run
            start = time.perf_counter()
            results = evaluate(policies, str(grid_root), None, jobs=jobs, backend=backend, progress=False)
            timings[backend] = time.perf_counter() - start
            rows = [r.to_dict() for r in results]
            if reference is None:
                reference = rows
            elif rows != reference:
                print("ERROR: serial and process results differ", file=sys.stderr)
                return 1
        print(f"{'backend':>10} {'jobs':>8} {'seconds':>8} {'episodes/s':>11}")
        print(f"{'serial':>10} {1:>8} {timings['serial']:8.2f} {n_episodes / timings['serial']:11.0f}")
        print(f"{'process':>10} {args.jobs:>8} {timings['process']:8.2f} {n_episodes / timings['process']:11.0f}")
        verdict = "met" if timings["process"] < GRID_TARGET_S else "MISSED"
        print(f"target < {GRID_TARGET_S:.0f} s with {args.jobs} processes: {verdict}; serial and process results identical")

        if args.profile or timings["process"] >= GRID_TARGET_S:
            registry._CACHE.clear()
            profiler = cProfile.Profile()
            profiler.enable()
            evaluate(policies, str(grid_root), None, backend="serial", progress=False)
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
            print("\nprofile of the serial grid (by own time):")
            print(text.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
