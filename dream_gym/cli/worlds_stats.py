"""``dream-gym worlds stats``, ``compress`` and ``decompress`` (registered by cli/worlds.py)."""

from __future__ import annotations

import argparse

from dream_gym.cli.options import add_workers, non_negative_number
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "stats",
        help="discovery statistics and the oracle limit of worlds, side by side",
        description="Per world: q after the first W and 10 attempts, successive new bests, depth of the "
        "best node, share of attempts beating their parent, invalid share, root branching, the oracle "
        "limit and the best V of stopping after rounds 1, 2, 3.",
    )
    p.add_argument("worlds", nargs="+", metavar="WORLD",
                   help="world folder, folder of worlds, dataset id ns/name-vN, world ns/name-vN/world, "
                        "shipped world name, or split of the shipped dataset (train, heldout)")
    add_workers(p)
    p.add_argument("--beta1", type=non_negative_number, default=DEFAULT_BETA1, help=f"V's cost per attempt (default {DEFAULT_BETA1})")
    p.add_argument("--beta2", type=non_negative_number, default=DEFAULT_BETA2,
                   help=f"V's bonus per attempt-per-round (default {DEFAULT_BETA2})")
    p.add_argument("--frontier", choices=("leaves", "any"), default=None, help="frontier rule (default: each world's)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--markdown", action="store_true", help="print a markdown table")
    out.add_argument("--json", action="store_true", help="print JSON (one object per world)")
    p.add_argument("--rows", action="store_true", help="with --markdown: one row per world instead of a column")
    p.set_defaults(func=_stats)

    p = sub.add_parser("compress", help="store finished worlds' nodes as nodes.jsonl.gz (checksum updated)",
                       description="Store each finished world's nodes as nodes.jsonl.gz, its checksum updated: a "
                                   "world that is still being written (or stopped before its end) is refused.")
    p.add_argument("folders", nargs="+", metavar="WORLD_FOLDER", help="world folders to compress")
    p.set_defaults(func=_compress)
    p = sub.add_parser("decompress", help="store compressed worlds' nodes as nodes.jsonl again (to resume growing them)",
                       description="Store each compressed world's nodes as nodes.jsonl again, its checksum "
                                   "updated: grow --resume continues only an uncompressed world.")
    p.add_argument("folders", nargs="+", metavar="WORLD_FOLDER", help="compressed world folders")
    p.set_defaults(func=_decompress)


def _stats(args: argparse.Namespace) -> int:
    from dream_gym.cli.names import resolve_world_specs
    from dream_gym.datasets.stats import stats_json, stats_markdown, stats_rich, world_stats
    from dream_gym.replay.settings import ReplaySettings

    if args.rows and not args.markdown:  # the table's orientation: no other output has one
        raise ValueError("--rows lays out the --markdown table (one row per world): add --markdown")
    worlds = list({id(w): w for spec in args.worlds for w in resolve_world_specs(spec, "WORLD")}.values())
    settings = ReplaySettings(args.workers, beta1=args.beta1, beta2=args.beta2, frontier=args.frontier)
    stats = [world_stats(w, settings) for w in worlds]
    if args.json:
        print(stats_json(stats))
    elif args.markdown:
        print(stats_markdown(stats, one_row_per_world=args.rows), end="")
    else:
        from rich.console import Console

        Console().print(stats_rich(stats))
    return 0


def _compress(args: argparse.Namespace) -> int:
    return _store_nodes(args.folders, compress=True)


def _decompress(args: argparse.Namespace) -> int:
    return _store_nodes(args.folders, compress=False)


def _store_nodes(folders: list[str], compress: bool) -> int:
    """Compress (or decompress) each world's nodes file, saying its path and sizes; a world of a
    packed dataset is refused (dataset.json lists its files' sha256), every folder checked first,
    so none is changed when one is refused."""
    from pathlib import Path

    from dream_gym.datasets.store import DATASET_FILE
    from dream_gym.world.files import NODES_FILE, NODES_GZ_FILE
    from dream_gym.world.writer import compress_world, decompress_world

    for folder in folders:
        if (Path(folder).resolve().parent / DATASET_FILE).is_file():
            raise ValueError(f"{folder} is a world of a packed dataset, whose files dataset.json lists with their "
                             "sha256: " + ("compress the world folder before packing it (or pack it again)"
                                           if compress else "decompress a copy of it"))
    for folder in folders:
        source = Path(folder) / (NODES_FILE if compress else NODES_GZ_FILE)
        before = source.stat().st_size if source.is_file() else None
        stored = compress_world(folder) if compress else decompress_world(folder)
        sizes = (f" ({before} -> {stored.stat().st_size} bytes)" if before is not None
                 else " (already compressed)" if compress else " (not compressed)")
        print(f"{stored}{sizes}")
    return 0
