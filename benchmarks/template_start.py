"""How long an isolated policy file takes to start: the sandbox, the template's imports ahead
and its first (probe) episode, paid once per policy file and process.

    .venv/bin/python -m benchmarks.template_start [--starts 8] FILE [FILE ...]

Each file is started ``--starts`` times in turn (``IsolatedPolicy(FILE)``, then closed); prints
the median and the range per file, in milliseconds. Compare code by alternating runs in the
same hour (this VM's speed drifts): the figures in docs/results/benchmarks.md say how.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from dream_gym.policy_files import IsolatedPolicy


@dataclass
class Args:
    files: list[Path]
    starts: int = 8


def start_times(path: Path, starts: int) -> list[float]:
    """Seconds from constructing the isolated policy to its being ready, ``starts`` times."""
    times = []
    for _ in range(starts):
        began = time.perf_counter()
        with IsolatedPolicy(path):
            times.append(time.perf_counter() - began)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--starts", type=int, default=8)
    args = Args(**vars(parser.parse_args()))
    for path in args.files:
        times = [1000 * t for t in start_times(path, args.starts)]
        print(f"{path}: start {statistics.median(times):.0f} ms (median of {len(times)}; "
              f"{min(times):.0f}-{max(times):.0f})")


if __name__ == "__main__":
    main()
