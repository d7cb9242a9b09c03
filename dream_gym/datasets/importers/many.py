"""A folder of many runs: each imported into a world of its own.

``dream-gym worlds import FOLDER --out DIR`` on a folder that holds several runs (EvoTrace's
corpus, ``EvoTrace/<backend>/<run>/``, a folder of OpenEvolve outputs, a mix of systems) imports
every run into ``DIR/<name>``, its name made from its path below the folder
(``gepa_native/run_3`` -> ``gepa_native-run_3``), and reports each run: imported, or refused with
the reason. One run that cannot be imported does not stop the others.

**Which folders are folders of runs.** A folder is one when two or more runs lie below it, in its
subfolders or (to :data:`MAX_DEPTH` levels) in theirs, and no subfolder on the way to them is a
part of one run's own layout (:data:`RUN_PARTS`: ``checkpoints``, ``checkpoint_<N>``, ``programs``,
``db``, ``openevolve_output``, ``gen_<N>``, ``blobs``): an OpenEvolve output folder holds its
snapshots in ``checkpoints/checkpoint_<N>/programs/``, each of which an importer would recognise,
yet it is one run. A subfolder is a run when an importer of :data:`~.systems.IMPORTERS` recognises
it; when it holds one run in a subfolder of its own beside other files (a run's ``SOURCE.md`` beside
its ``raw/gepa_state.bin``), the subfolder's parent is the run and names the world. Folders whose
name starts with a dot and symbolic links to folders are not looked into.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.locks import FOLDER_LOCK_NAME, folder_lock
from dream_gym.infrastructure.printable import TEXT_CHARS, a_few, printable
from dream_gym.world.files import WORLD_FILE, is_present
from dream_gym.world.tree import read_meta
from dream_gym.world.writer import check_empty_folder

from .base import ImportOptions, ImportReport, RunImportError
from .coerce import unique_name, world_name_from
from .systems import SYSTEM_NAMES, a_run_of, detect_system, import_run, with_fields

MAX_DEPTH = 8  # experiment folders nest task/config/date/seed/...: each run found, not read as one
RUN_PARTS = re.compile(r"^(checkpoints|checkpoint_\d+|programs|db|openevolve_output|gen_\d+|blobs)$")


def _subfolders(folder: Path) -> list[Path]:
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    return [p for p in entries if not p.name.startswith(".") and not p.is_symlink() and p.is_dir()]


def _runs_below(folder: Path, depth: int) -> list[Path] | None:
    """The runs in ``folder``'s subfolders, or None when one of them is a part of a run's own layout
    (``folder`` is then that run)."""
    runs: list[Path] = []
    for sub in _subfolders(folder):
        found = _runs_in(sub, depth - 1)
        if found and RUN_PARTS.match(sub.name):
            return None
        runs += found
    return runs


def _only_holds_one_folder(path: Path) -> bool:
    try:
        return len([p for p in path.iterdir() if not p.name.startswith(".")]) == 1
    except OSError:
        return False


def _runs_in(path: Path, depth: int) -> list[Path]:
    """The runs ``path`` holds: those below it, or ``path`` itself when it is a run that keeps its one
    run in a subfolder beside files of its own (``SOURCE.md`` and ``raw/gepa_state.bin``)."""
    below = _runs_below(path, depth) if depth > 0 else None
    is_run = detect_system(path) is not None
    if below and (len(below) >= 2 or not is_run or _only_holds_one_folder(path)):
        return below
    return [path] if is_run else []


def find_runs(folder: str | os.PathLike[str], *, max_depth: int = MAX_DEPTH) -> list[Path]:
    """The runs of a folder of runs, in name order; [] when ``folder`` is one run or holds fewer than two."""
    folder = Path(folder)
    runs = _runs_below(folder, max_depth) if folder.is_dir() else None
    return runs if runs is not None and len(runs) >= 2 else []


@dataclass
class RunOutcome:
    """One run of a folder of runs: imported (``report``) or refused (``reason``)."""

    name: str
    source: str
    report: ImportReport | None = None
    reason: str = ""
    kept: bool = False  # imported by an earlier, interrupted import (resume)
    looks_like: str | None = None  # refused as no run of the system asked for: the system it looks like

    @property
    def imported(self) -> bool:
        return self.report is not None


@dataclass
class ManyReport:
    """The import of a folder of runs: one :class:`RunOutcome` per run."""

    source: str
    out: str
    outcomes: list[RunOutcome] = field(default_factory=list)
    seconds: float = 0.0
    system: str = "auto"  # the system asked for (--from)

    @property
    def imported(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.imported]

    def headline(self) -> str:
        """One line: how many runs were imported, of how many, from where to where."""
        refused = len(self.outcomes) - len(self.imported)
        kept = sum(o.kept for o in self.outcomes)
        before = f"; {kept} imported before, kept" if kept else ""
        return (f"imported {len(self.imported)} of {len(self.outcomes)} run(s) of {self.source} into {self.out} "
                f"({refused} refused{before}) in {self.seconds:.2f} s")

    def summary(self) -> str:
        """The headline, then a line per run: imported (what it holds) or refused (why)."""
        lines = [self.headline()]
        width = max(len(o.name) for o in self.outcomes)
        for o in self.outcomes:
            if o.report is not None:
                r = o.report
                lines.append(f"  imported  {o.name:<{width}}  {SYSTEM_NAMES.get(r.system, r.system)}: {r.nodes} nodes "
                             f"(invalid {r.invalid}, orphans {r.orphans}), baseline {r.baseline}, best {r.best} "
                             f"by {r.metric!r}")
            elif o.looks_like is None:  # the runs of other systems: a line a system, below
                lines.append(f"  refused   {o.name:<{width}}  {o.reason}")
        lines += [f"  {line}" for line in self.other_systems()]
        return "\n".join(printable(line, TEXT_CHARS) for line in lines)

    def other_systems(self) -> list[str]:
        """A line per system that runs refused as no run of the system asked for look like: a
        folder of many systems' runs imported with one ``--from`` had a long line a run, each
        saying the same."""
        groups: dict[str, list[str]] = {}
        for outcome in self.outcomes:
            if outcome.report is None and outcome.looks_like is not None:
                groups.setdefault(outcome.looks_like, []).append(outcome.name)
        lines = []
        for found, names in groups.items():
            runs = f"1 run that looks like {a_run_of(found)}" if len(names) == 1 else \
                f"{len(names)} runs that look like {SYSTEM_NAMES[found]} runs"
            lines.append(f"refused {runs}, not {SYSTEM_NAMES.get(self.system, self.system)}: {a_few(names)}; import "
                         f"{'them' if len(names) > 1 else 'it'} with --from {found} (or --from auto)")
        return lines


def _names(folder: Path, runs: list[Path]) -> list[str]:
    names: list[str] = []
    for run in runs:
        names.append(unique_name(world_name_from("-".join(run.relative_to(folder).parts)), names))
    return names


def import_runs(system: str, src: str | os.PathLike[str], out: str | os.PathLike[str],
                options: ImportOptions | None = None, *, resume: bool = False, **fields: Any) -> ManyReport:
    """Import every run of the folder of runs ``src`` (see :func:`find_runs`) into ``out/<name>``.

    ``system`` is ``auto`` (each run recognised on its own) or the system every run was written
    by; ``options`` (or its fields as keywords) go to each run's importer (``world_id`` is refused:
    each world is named after its run). A run that fails is refused with its error and the others
    go on; raises :class:`~.base.RunImportError` when no run could be imported. ``out`` must be
    absent or empty, unless ``resume``: an import that was stopped continues, keeping each world
    it finished (a world is written whole or not at all) and importing the other runs.
    """
    started = time.perf_counter()
    src = Path(src)
    options = with_fields(options, fields)
    if options.world_id:
        raise RunImportError(f"{src}: --id names one world, but this folder holds several runs: each world is named "
                             "after its run's folder")
    runs = find_runs(src)
    if not runs:
        raise RunImportError(f"{src}: not a folder of runs (fewer than two runs below it)")
    by_name = dict(zip(_names(src, runs), runs, strict=True))
    out_path = Path(out)
    made = not out_path.exists()
    # One writer: a second import into the same --out is refused naming this one (two ran side by
    # side, each refusing and deleting the worlds the other was writing, both exiting 0).
    with folder_lock(out_path):
        kept = _finished_worlds(src, out_path, by_name, options) if resume else {}
        if not resume:
            _check_empty_for(src, out_path, by_name, options)
        report = ManyReport(str(src), str(out_path), system=system)
        for name, run in by_name.items():
            if name in kept:
                report.outcomes.append(RunOutcome(name, str(run), kept[name], kept=True))
            else:
                report.outcomes.append(_import_one(system, run, out_path / name, name, options))
    report.seconds = time.perf_counter() - started
    if not report.imported:
        if made and {entry.name for entry in out_path.iterdir()} <= {FOLDER_LOCK_NAME}:  # a refused run leaves nothing
            shutil.rmtree(out_path, ignore_errors=True)
        raise RunImportError(f"{report.summary()}\n{src}: none of its {len(runs)} run(s) could be imported")
    return report


def _check_empty_for(src: Path, out: Path, runs: dict[str, Path], options: ImportOptions) -> None:
    """``out`` is empty (:func:`~dream_gym.world.writer.check_empty_folder`); one that holds the
    finished worlds of a stopped import of ``src`` is refused saying that ``--resume`` continues it."""
    try:
        check_empty_folder(out)
    except FileExistsError as exc:
        try:
            finished = _finished_worlds(src, out, runs, options)
        except (FileExistsError, OSError, ValueError):
            raise exc from None
        if len(finished) == len(runs):
            raise FileExistsError(f"{out} holds the worlds of an import of {src} already, one for each of its "
                                  f"{len(runs)} run(s): nothing to do (give a new or empty folder to import it "
                                  "again)") from None
        raise FileExistsError(f"{out} holds {len(finished)} world(s) of an import of {src} of {len(runs)} run(s) "
                              "(stopped, or some runs refused): --resume imports the others (or give a new or "
                              "empty folder)") from None


def _finished_worlds(src: Path, out: Path, runs: dict[str, Path], options: ImportOptions) -> dict[str, ImportReport]:
    """The worlds an earlier import of ``src`` finished in ``out``, by name, with their reports;
    refuses anything else there (another folder's world, a file, a world of another run)."""
    finished: dict[str, ImportReport] = {}
    entries = sorted(out.iterdir()) if out.is_dir() else []
    for entry in entries:
        if entry.name == FOLDER_LOCK_NAME:
            continue
        run = runs.get(entry.name)
        if run is None or not entry.is_dir() or entry.is_symlink():
            raise FileExistsError(f"{out} holds {entry.name}, which is not the world of a run of {src}: --resume "
                                  "continues an import of the same folder into the same --out")
        report = finished_import(entry, run, options)
        if report is not None:
            finished[entry.name] = report
    return finished


def finished_import(folder: Path, run: Path, options: ImportOptions) -> ImportReport | None:
    """The report of the world an import of ``run`` with ``options`` finished in ``folder``; None
    when there is none (nothing, or an import stopped before its world was whole, which an import
    writes whole or not at all); a FileExistsError when ``folder`` holds a world of anything else,
    or one imported with other options."""
    meta_path = folder / WORLD_FILE
    if not is_present(meta_path):
        return None
    meta = read_meta(meta_path)
    source = meta.get("source")
    source = source if isinstance(source, dict) else {}
    read, imported = source.get("path"), source.get("import")  # read: the run, or its database or state file
    if not (isinstance(read, str) and Path(read).is_relative_to(Path(run).resolve()) and meta.get("sha256")
            and isinstance(imported, dict)):
        raise FileExistsError(f"{folder} holds a world that is not the import of {run}: --resume continues an "
                              "import of the same run into the same --out")
    task = meta.get("task")
    given = {"metric": (options.metric, source.get("metric")), "direction": (options.direction, meta.get("direction")),
             "W": (options.workers, meta.get("workers")), "orphans": (options.orphans, source.get("orphans")),
             "id": (options.world_id, meta.get("id")),
             "task": (options.task_name, task.get("name") if isinstance(task, dict) else None)}
    other = [f"{name} {was!r}, not {now!r}" for name, (now, was) in given.items() if now is not None and now != was]
    if other:
        raise FileExistsError(f"{folder} holds the import of {run} with {'; '.join(other)}: --resume continues an "
                              "import with the options it was started with")
    known = {f.name for f in dataclass_fields(ImportReport)}
    return ImportReport(**{k: v for k, v in imported.items() if k in known}, out=str(folder))


def _import_one(system: str, run: Path, out: Path, name: str, options: ImportOptions) -> RunOutcome:
    outcome = RunOutcome(name, str(run))
    began = not out.exists()
    try:
        outcome.report = import_run(system, run, out, replace(options, world_id=name))
    except Exception as exc:  # one run's failure is reported and the others go on
        if began:  # a world this import began: never one it did not write
            shutil.rmtree(out, ignore_errors=True)
        kind = "" if isinstance(exc, (RunImportError, OSError, ValueError)) else f"{type(exc).__name__}: "
        outcome.reason = f"{kind}{exc}"
        outcome.looks_like = getattr(exc, "found", None)  # an OtherSystemError
    return outcome
