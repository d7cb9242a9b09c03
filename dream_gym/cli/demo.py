"""``dream-gym demo``: the built-in baselines on the shipped held-out worlds, then one dreaming step."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dream_gym.cli.options import add_jobs, add_workers


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="the built-in baselines on the shipped held-out worlds, then dreaming",
                              description="Leaderboard and plots of every built-in exploration policy on the held-out split, then an "
                                          "improvement step of the greedy baseline on train worlds (the built-in "
                                          "developer, no API key) and the kept version beside the baselines. Exits "
                                          "1 when an episode or a version of the step failed.")
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="where results and plots go (default out/demo)")
    p.add_argument("--split", default="heldout", help="split of the shipped dataset (default heldout)")
    add_workers(p)
    add_jobs(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dream_gym.cli.names import resolve_world_specs
    from dream_gym.demo import run_demo

    resolve_world_specs(args.split, "--split")
    return exit_status(run_demo(args.out, split=args.split, jobs=args.jobs, workers=args.workers))


def exit_status(demo: Any) -> int:
    """Name each step of the demo that failed on stderr; 1 when one did, else 0."""
    for line in demo.failures:
        print(f"dream-gym demo: {line}", file=sys.stderr)
    if demo.failures:
        print("dream-gym demo: exit status 1 because a step of the demo failed", file=sys.stderr)
    return 1 if demo.failures else 0
