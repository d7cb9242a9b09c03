"""``dream-gym demo``: the built-in baselines on the shipped held-out worlds."""

from __future__ import annotations

import argparse
from pathlib import Path

from dream_gym.cli.options import add_jobs, add_workers


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="evaluate the built-in baselines on the shipped held-out worlds",
                              description="Leaderboard and plots of every built-in policy on the held-out split, then a "
                                          "short improvement step on the train split and the chosen policy "
                                          "beside the baselines.")
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="where results and plots go")
    p.add_argument("--split", default="heldout", help="split of the shipped dataset (default heldout)")
    add_workers(p)
    add_jobs(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dream_gym.cli.names import resolve_world_specs
    from dream_gym.demo import run_demo

    resolve_world_specs(args.split, "--split")
    run_demo(args.out, split=args.split, jobs=args.jobs, workers=args.workers)
    return 0
