"""``dream-gym worlds pool``: merge runs of one task into one world (registered by cli/worlds.py)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from dream_gym.datasets.pool import SCORE_RULES

    p = sub.add_parser(
        "pool", help="merge runs of one task from the same root into one world (replay answers more)",
        description="Merge recorded runs of one task into one world: nodes with the same parent chain and "
        "code are one node, every run's children kept under it; nodes in the order of their first creation "
        "(the runs in the order given, oldest first: the first run's policy replays its own run exactly). "
        "See docs/concepts/recorders.md.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="world folders (or world references) of runs of one task, oldest first")
    p.add_argument("--out", required=True, type=Path, help="the pooled world folder to write (new or empty)")
    p.add_argument("--id", dest="world_id", default=None, help="world id (default: the folder name)")
    p.add_argument("--scores", choices=SCORE_RULES, default="exact",
                   help="where merged copies of a program scored differently (a noisy task): refuse (exact, "
                        "default), keep the first-recorded copy (first), or keep each as a sibling (split)")
    p.set_defaults(func=_pool)


def _pool(args: argparse.Namespace) -> int:
    from dream_gym.cli.names import resolve_one_world
    from dream_gym.cli.shown import say, shown
    from dream_gym.datasets.pool import PoolError, pool_worlds

    worlds = [resolve_one_world(run) for run in args.runs]
    given: dict[tuple[object, ...], str] = {}
    for run, world in zip(args.runs, worlds, strict=True):  # one run twice adds nothing, yet would count as two
        key = (world.id, world.meta.get("sha256"), world.size)
        if key in given:
            twice = "given twice" if given[key] == run else f"the run {given[key]} again"
            raise PoolError(f"{run} is {twice}: give each run once")
        given[key] = run
    result = pool_worlds(worlds, args.out, world_id=args.world_id, scores=args.scores)
    say(f"pooled {result.runs} runs of {shown(worlds[0].task_name)} into {shown(str(result.folder))}: "
        f"{result.nodes} nodes ({result.recorded} recorded, {result.merged} merged)")
    say(f"new nodes per run, in order: {', '.join(str(n) for n in result.added)}")
    if result.disagreements:
        kept = "the first-recorded score kept" if args.scores == "first" else "kept as siblings"
        say(f"{result.disagreements} copies of a program scored differently ({kept}; see pooled_scores)")
    if result.unreachable:
        say(f"under the 'leaves' rule {result.unreachable} nodes are a node's later child or below one: "
            "replay reveals them with --frontier any")
    return 0
