"""``dream-gym worlds``: list, show, validate, pack, upload, download, delete and import worlds
(``stats`` and ``compress`` live in :mod:`dream_gym.cli.worlds_stats`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dream_gym.cli.options import worker_count
from dream_gym.cli.shown import LINE_CHARS, cell, say, shown
from dream_gym.infrastructure.printable import TEXT_CHARS, printable

if TYPE_CHECKING:
    from dream_gym.datasets.importers import ImportOptions
    from dream_gym.datasets.importers.base import ImportReport
    from dream_gym.datasets.importers.many import ManyReport


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "worlds",
        help="recorded-world datasets: list, show, validate, pack, upload, download, delete, import, pool, "
             "stats, compress, decompress",
        description="Datasets of recorded worlds (ids 'namespace/name-vN'), kept in the local "
        "store ($DREAM_GYM_HOME, default ~/.dream_gym) and shared through fsspec remotes.",
    )
    sub = parser.add_subparsers(dest="worlds_command", required=True, metavar="ACTION")

    p = sub.add_parser("list", help="datasets in the local store (or at a remote), or the worlds in a folder")
    p.add_argument("folder", nargs="?", metavar="FOLDER",
                   help="list the worlds in this folder instead (a world, or a folder of worlds such as an "
                        "import's --out): each one's nodes, task and W, and whether its run finished")
    p.add_argument("--remote", nargs="?", const="", metavar="URL",
                   help="list a remote instead: hf://NAMESPACE, hf://datasets/OWNER/REPO, file://... or any "
                   "fsspec URL; --remote alone lists $DREAM_GYM_REMOTE")
    p.set_defaults(func=_list)

    p = sub.add_parser("show", help="metadata and coverage/bias report of a dataset or world")
    p.add_argument("target", help="dataset id, world reference ns/name-vN/world, or world folder")
    shown = p.add_mutually_exclusive_group()  # (--json printed the report and left the plot out)
    shown.add_argument("--plot", help="write the tree plot: a PNG file or a folder (world), a folder (dataset)")
    shown.add_argument("--json", action="store_true", help="print the coverage report as JSON (one world)")
    p.set_defaults(func=_show)

    p = sub.add_parser("validate", help="check a dataset (id or folder) or a world",
                       description="Check a dataset's files against the sha256 sums of its dataset.json and load "
                                   "each of its worlds, or load one world (its format, ids, parents and checksum). "
                                   "Prints what it checked; exits 2 naming the first problem.")
    p.add_argument("target", help="dataset id or folder, world reference ns/name-vN/world, shipped world name, "
                                  "or world folder")
    p.set_defaults(func=_validate)

    p = sub.add_parser("pack", help="make a dataset in the local store from world folders")
    p.add_argument("worlds", nargs="+", metavar="WORLD_FOLDER", help="world folders, or folders of worlds")
    p.add_argument("--id", required=True, dest="dataset_id", help="namespace/name-vN")
    p.add_argument("--description", default="", help="what the worlds are, for dataset.json and the card")
    p.add_argument("--author", default="", help="who made the worlds")
    p.add_argument("--licence", "--license", default="", dest="licence", help="the worlds' licence (e.g. CC-BY-4.0)")
    # one name (or a comma list) an option: a list of names would take the world folders after it
    p.add_argument("--held-out", action="append", default=[], metavar="WORLD",
                   help="a world of the held-out split (repeat the option, or separate names by commas)")
    p.add_argument("--readme", help="a README.md dataset card to include")
    p.add_argument("--force", action="store_true", help="replace an existing dataset with this id")
    p.set_defaults(func=_pack)

    remote_help = ("hf://NAMESPACE (the Hugging Face Hub: repository NAMESPACE/<name>, folder vN/), "
                   "hf://datasets/OWNER/REPO, file://... or any fsspec URL; default $DREAM_GYM_REMOTE")
    p = sub.add_parser("upload", help="copy a dataset to a remote (the Hub: one commit)")
    p.add_argument("dataset_id", help="namespace/name-vN")
    p.add_argument("--remote", help=remote_help)
    p.add_argument("--archive", action="store_true", help="upload one .tar.gz instead of a folder (not on hf://)")
    p.add_argument("--force", action="store_true", help="replace that version at the remote")
    p.set_defaults(func=_upload)

    p = sub.add_parser("download", help="fetch a dataset from a remote into the local store")
    p.add_argument("dataset_id", help="namespace/name-vN, or namespace/name for the newest version at the remote")
    p.add_argument("--remote", help=remote_help)
    p.add_argument("--force", action="store_true", help="replace a local copy")
    p.set_defaults(func=_download)

    p = sub.add_parser("delete", help="remove a dataset from the local store",
                       description="Remove one version of a dataset from the local store (a shipped dataset is not "
                                   "in the store and cannot be removed).")
    p.add_argument("dataset_id", metavar="DATASET", help="namespace/name-vN")
    p.set_defaults(func=_delete)

    from dream_gym.datasets.importers import IMPORTERS  # the registry names the systems

    p = sub.add_parser(
        "import", help=f"turn a run of {' or '.join(i.label for i in IMPORTERS.values())} into a world",
        description="Import a finished run: every program once (the union of all snapshots), copies "
        "collapsed, resumed phases stitched, orphans kept under the root; then print the import summary, "
        "the coverage report and the statistics of the world.",
    )
    p.add_argument("--from", default="auto", choices=("auto", *IMPORTERS), dest="system", metavar="SYSTEM",
                   help=f"the system that wrote SRC: {', '.join(IMPORTERS)}, or auto (the default: recognised "
                        "from the folder)")
    p.add_argument("src", help="a run's folder (or its database / state / trace file), or a folder of many runs: "
                   "each is imported into a world of its own, OUT/<its path below SRC>")
    p.add_argument("--out", required=True, type=Path, help="world folder to write (must not exist or be empty)")
    p.add_argument("--metric", default=None,
                   help="metric used as score (default: the system's own, combined_score for OpenEvolve, "
                   "ShinkaEvolve and SkyDiscover, val_score for GEPA, EvoReplay's primary score for EvoTrace; an "
                   "unknown one lists those found)")
    p.add_argument("--direction", default="maximize", choices=("maximize", "minimize"),
                   help="whether a higher or a lower score is better (default maximize)")
    p.add_argument("--id", dest="world_id", help="world id (default: the name of the --out folder)")
    p.add_argument("--task", help="task name (default: the task of the dream-gym world holding the run, a deploy's "
                   "--out, else the run folder's name)")
    p.add_argument("-W", "--workers", type=worker_count, default=None,
                   help="W of the original run (default: the W of the dream-gym world holding the run, else the "
                   "run's own configuration where its folder holds it: OpenEvolve's evaluator.parallel_evaluations "
                   "in config.yaml beside or above the output folder, ShinkaEvolve's max_parallel_jobs in "
                   "experiment_config.yaml; else 1)")
    p.add_argument("--resume", action="store_true",
                   help="continue an import that was stopped: the worlds it finished are kept, the other runs "
                   "imported (a world is written whole or not at all)")
    p.add_argument("--orphans", default="attach", choices=("attach", "drop"),
                   help="programs that cannot be placed (parent pruned, unplaced phase root): attach them "
                   "under the root, tagged 'orphan' (default), or drop them with their subtrees")
    p.set_defaults(func=_import)

    from dream_gym.cli import worlds_pool, worlds_stats

    worlds_stats.register(sub)  # stats, compress, decompress
    worlds_pool.register(sub)  # pool


def _list(args: argparse.Namespace) -> int:
    if args.folder is not None:
        if args.remote is not None:
            raise ValueError("give a FOLDER or --remote, not both")
        return _list_folder(Path(args.folder))
    if args.remote is not None:
        from dream_gym.datasets.remote import list_remote, resolve_remote

        url = resolve_remote(args.remote or None)
        remote = list_remote(url)
        if not remote:
            print(f"no datasets at {url}")
        for item in remote:  # what a remote says of itself is shown escaped, before anything is fetched
            worlds = "" if item.worlds is None else f"  {item.worlds} world(s)"
            _print_listed(f"{shown(item.id):<36} {shown(item.kind):<8}{worlds}", item.description)
        return 0
    from dream_gym.datasets.store import datasets_root, list_datasets

    found = list_datasets()
    if not found:
        print(f"no datasets in {datasets_root()}")
    for d in found:
        where = "shipped" if d.shipped else "local"
        if d.problem:
            _print_listed(f"{shown(d.id):<36} {where:<8} BROKEN", d.problem, TEXT_CHARS)
        else:
            _print_listed(f"{shown(d.id):<36} {where:<8} {d.worlds} world(s)", d.description)
    return 0


def _list_folder(folder: Path) -> int:
    """One line a world of ``folder`` (itself, or the worlds below it): its nodes, W, whether its
    run finished, its folder and its task; the columns of fixed width first, so a long name
    neither breaks nor pushes them out of line. A world that does not load says why."""
    from dream_gym.evaluation.world_specs import FOLDER_DEPTH, worlds_below
    from dream_gym.world.files import WORLD_FILE, count_node_lines, node_file
    from dream_gym.world.tree import WorldFormatError, read_meta

    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: {'not a folder' if folder.exists() else 'no such folder'}")
    worlds = [folder] if (folder / WORLD_FILE).is_file() else worlds_below(folder, FOLDER_DEPTH)
    if not worlds:
        print(f"no worlds in {shown(folder)} (a world's folder holds {WORLD_FILE})")
        return 0
    lines = [f"{'nodes':>7}  {'W':>4}  {'run':<10}  world (task)"]
    for world in worlds:
        name = shown(world.relative_to(folder) if world != folder else folder)
        try:
            meta = read_meta(world / WORLD_FILE)
            nodes = count_node_lines(node_file(world))
        except (WorldFormatError, OSError) as exc:
            lines.append(f"{'-':>7}  {'-':>4}  {'BROKEN':<10}  {name}: {exc}")
            continue
        state = "finished" if meta.get("sha256") else "unfinished"  # world.json, read above: is_finished's test
        lines.append(f"{nodes:>7}  {meta['workers']:>4}  {state:<10}  {name} ({shown(meta['task']['name'])})")
    say("\n".join(lines), hang=len(lines[0]) - len("world (task)"))  # continued under the world's name
    return 0


def _print_listed(line: str, text: object, limit: int = 400) -> None:
    """A dataset's line, then its description (or problem) escaped, cut to ``limit`` and
    wrapped to the terminal's width below it, indented: a listing stays readable at 80 columns."""
    import shutil
    import textwrap

    width = max(40, shutil.get_terminal_size().columns)
    print(line.rstrip())
    if text:
        print(textwrap.fill(shown(text, limit), width, initial_indent="    ", subsequent_indent="    ",
                            break_on_hyphens=False))


def _show(args: argparse.Namespace) -> int:
    from dream_gym.cli.names import explain_world, show_target
    from dream_gym.datasets.store import Dataset

    target = show_target(args.target)  # a shipped world's name becomes its reference
    _refuse_a_folder_of_worlds(target)
    try:
        if args.json:
            from dream_gym.datasets import coverage_report, load

            loaded = load(target)
            if isinstance(loaded, Dataset):  # a dataset: its metadata and each world's report
                report = {"dataset": loaded.meta, "worlds": {
                    name: coverage_report(loaded.load(name)).as_dict() for name in loaded.world_names}}
            else:
                report = coverage_report(loaded).as_dict()
            print(json.dumps(report, indent=2, default=str))
            return 0
        from dream_gym.datasets import show

        say(show(target, plot=args.plot))
    except LookupError as exc:  # an unknown world of a dataset: the nearest names, not all of them
        raise explain_world(target, exc) from None
    return 0


def _refuse_a_folder_of_worlds(target: str) -> None:
    """A folder that holds worlds (a folder import's ``--out``) is neither a world nor a dataset:
    say what it is and what takes it, instead of the missing world.json and an import hint."""
    from dream_gym.evaluation.world_specs import FOLDER_DEPTH, worlds_below
    from dream_gym.world.files import WORLD_FILE
    from dream_gym.world.registry import DATASET_FILE

    folder = Path(target)
    if not folder.is_dir() or any((folder / name).is_file() for name in (WORLD_FILE, DATASET_FILE)):
        return
    worlds = worlds_below(folder, FOLDER_DEPTH)
    if worlds:
        raise FileNotFoundError(
            f"{target} is a folder of {len(worlds)} world(s), not one world or a dataset: name one of them "
            f"({shown(worlds[0])}), see them side by side with dream-gym worlds stats {shown(target)}, or make "
            f"them a dataset with dream-gym worlds pack {shown(target)} --id NAMESPACE/NAME-v0")


def _validate(args: argparse.Namespace) -> int:
    from dream_gym.datasets.store import validate

    _refuse_a_folder_of_worlds(args.target)
    say(validate(args.target).summary())
    return 0


def world_folders(folders: list[str]) -> list[Path]:
    """The world folders ``pack`` is given: each a world, or a folder of worlds (its sub-folders
    that hold a world.json, sorted by name), as ``--worlds`` takes one."""
    from dream_gym.world.files import WORLD_FILE

    found: list[Path] = []
    for folder in map(Path, folders):
        inner = sorted(p for p in folder.iterdir() if (p / WORLD_FILE).is_file()) if folder.is_dir() else []
        found += inner if inner and not (folder / WORLD_FILE).exists() else [folder]
    return found


def _pack(args: argparse.Namespace) -> int:
    import sys

    from dream_gym.datasets.packing import pack
    from dream_gym.world.files import is_finished

    held_out = [name.strip() for given in args.held_out for name in given.split(",") if name.strip()]
    folders = world_folders(args.worlds)
    dataset = pack(
        folders, args.dataset_id, description=args.description, author=args.author,
        licence=args.licence, held_out=held_out, readme=args.readme, overwrite=args.force,
    )
    print(f"packed {len(dataset.world_names)} world(s) as {dataset.id} at {dataset.path}")
    say("  each world's world.json and nodes file; its other files (grow's evidence.jsonl and run_summary.json, a "
        "system's own output) stay in its folder")
    unfinished = [shown(folder) for folder in folders if not is_finished(folder)]
    if unfinished:  # packed as the nodes they hold: a figure on them should say so
        say(f"note: not finished (world.json holds no checksum: its run stopped before its end, or is running): "
            f"{', '.join(unfinished)}", file=sys.stderr)
    return 0


def _upload(args: argparse.Namespace) -> int:
    from dream_gym.datasets import hub
    from dream_gym.datasets.remote import resolve_remote, upload

    remote = resolve_remote(args.remote)
    if hub.is_hub_remote(remote) and not args.archive:
        say(hub.upload(args.dataset_id, remote, overwrite=args.force).summary())
        return 0
    where = upload(args.dataset_id, remote, archive=args.archive, overwrite=args.force)
    print(f"uploaded {args.dataset_id} to {where}")
    return 0


def _download(args: argparse.Namespace) -> int:
    from dream_gym.datasets.ids import DatasetName, parse_dataset_ref
    from dream_gym.datasets.remote import download, resolve_remote

    remote = resolve_remote(args.remote)
    dataset = download(args.dataset_id, remote, overwrite=args.force)
    newest = f", the newest version at {remote}" if isinstance(parse_dataset_ref(args.dataset_id), DatasetName) else ""
    print(f"downloaded {dataset.id}{newest} ({len(dataset.world_names)} world(s), every sha256 verified) "
          f"to {dataset.path}")
    return 0


def _delete(args: argparse.Namespace) -> int:
    from dream_gym.datasets.packing import delete

    print(f"deleted {args.dataset_id} ({delete(args.dataset_id)})")
    return 0


def _import(args: argparse.Namespace) -> int:
    import warnings

    from rich.console import Console

    from dream_gym.datasets.coverage import coverage_report, render_text
    from dream_gym.datasets.importers import ImportOptions, OrphanWarning, import_run
    from dream_gym.datasets.importers.many import find_runs, finished_import
    from dream_gym.datasets.stats import stats_rich, world_stats
    from dream_gym.world.tree import load_world

    options = ImportOptions(metric=args.metric, direction=args.direction, world_id=args.world_id,
                            task_name=args.task, workers=args.workers, orphans=args.orphans)
    if find_runs(args.src):
        return _import_many(args, options)
    if args.resume and finished_import(Path(args.out), Path(args.src), options) is not None:
        say(f"{shown(args.out)} holds the world imported from {shown(args.src)} already: nothing to do")
        return 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrphanWarning)  # the summary prints them
        report = import_run(args.system, args.src, args.out, options)
    say(report.summary())
    world = load_world(args.out)
    print()
    say(render_text(coverage_report(world)))
    print(flush=True)
    Console().print(stats_rich([world_stats(world)]))
    return 0


def _import_many(args: argparse.Namespace, options: ImportOptions) -> int:
    """A folder of many runs: each into OUT/<name>; a table of the runs imported (what each holds),
    then each run refused and why."""
    import warnings

    from rich.console import Console

    from dream_gym.datasets.importers import OrphanWarning
    from dream_gym.datasets.importers.many import import_runs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrphanWarning)  # each run's row counts its orphans
        report = import_runs(args.system, args.src, args.out, options, resume=args.resume)
    say(report.headline())
    console = Console(soft_wrap=True)
    for table in _imported_tables(report):
        console.print()
        console.print(table)
    console.file.flush()
    for outcome in report.outcomes:  # said: in a terminal a long reason breaks between words
        if outcome.report is None:
            if outcome.looks_like is None:  # the runs of other systems: a line a system, below
                say(printable(f"refused {outcome.name}: {outcome.reason}", LINE_CHARS))
        elif outcome.report.nodes == 1:  # imported, and it gives a policy nothing to choose
            say(printable(f"warning: {outcome.name} holds only its initial program (no child was recorded): no "
                          "policy decision is replayed on it; leave it out of a history", LINE_CHARS))
    for line in report.other_systems():
        say(printable(line, LINE_CHARS))
    say(f"the worlds side by side: dream-gym worlds stats {shown(args.out)}")
    return 0


def _imported_tables(report: ManyReport) -> list[Any]:
    """The runs a folder import imported, a table per system and metric (in order of first run),
    one row each; a long run name folds in its cell, so that a table fits the terminal."""
    from rich import box
    from rich.table import Table

    from dream_gym.datasets.importers.systems import SYSTEM_NAMES

    groups: dict[tuple[str, str], list[tuple[str, ImportReport]]] = {}
    for outcome in report.outcomes:
        if (r := outcome.report) is not None:
            groups.setdefault((SYSTEM_NAMES.get(r.system, r.system), r.metric), []).append((outcome.name, r))
    tables = []
    for (system, metric), runs in groups.items():
        table = Table(title=cell(f"{system} runs scored by {metric!r}"), box=box.SIMPLE_HEAD, show_edge=False,
                      pad_edge=False)
        table.add_column("run", overflow="fold")
        for name in ("nodes", "invalid", "orphans", "baseline", "best"):
            table.add_column(name, justify="right", no_wrap=True)
        for name, r in runs:
            table.add_row(cell(name), str(r.nodes), str(r.invalid), str(r.orphans), _score(r.baseline), _score(r.best))
        tables.append(table)
    return tables


def _score(value: float | None) -> str:
    """A score to six significant digits (the world keeps it whole); a dash for none."""
    return "-" if value is None else f"{value:.6g}"
