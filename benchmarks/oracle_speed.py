"""Speed of the oracle limit on 1k / 10k / 100k-node worlds, against loading the same world.

    python -m benchmarks.oracle_speed [--repeats 3]

For each size, shape (root + chains, bushy) and frontier rule, prints the median seconds of
``oracle_limit`` at the default beta1/beta2, at beta2 = 0, with ``max_rounds=3`` and with a tiny
beta1 (many rounds where more attempts pay), and the ratio to ``load_world`` of the same world
(a reference measured in the same run: how long it takes just to read the world from disk).
Also prints whether each limit was exact and its gap.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from dream_gym.replay.oracle import oracle_limit
from dream_gym.world.tree import load_world
from tests.worldgen import meta_for, random_records

SETTINGS = {
    "default": {},
    "beta2=0": {"beta2": 0.0},
    "max_rounds=3": {"max_rounds": 3},
    "beta1=1e-4": {"beta1": 1e-4},
}


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| nodes | shape | frontier | load s | setting | oracle s | oracle / load | exact | gap |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in (1_000, 10_000, 100_000):
            for shape in ("chain", "bushy"):
                records = random_records(random.Random(size), size, shape=shape)
                for frontier in ("leaves", "any"):
                    folder = Path(tmp) / f"{shape}-{size}-{frontier}"
                    folder.mkdir()
                    (folder / "world.json").write_text(json.dumps(meta_for(workers=4, frontier=frontier)))
                    (folder / "nodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
                    load_s = median_seconds(lambda f=folder: load_world(f), args.repeats)
                    world = load_world(folder)
                    for label, options in SETTINGS.items():
                        seconds = median_seconds(lambda o=options, w=world: oracle_limit(w, 4, **o), args.repeats)
                        limit = oracle_limit(world, 4, **options)
                        print(f"| {size} | {shape} | {frontier} | {load_s:.3f} | {label} | {seconds:.4f} | "
                              f"{seconds / load_s:.3f} | {limit.exact} | {limit.gap:.2g} |", flush=True)


if __name__ == "__main__":
    main()
