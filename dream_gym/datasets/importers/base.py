"""What every importer shares: the normalised :class:`Program`, the :class:`ImportReport`, the
errors, the :class:`Importer` entry of the registry (:mod:`.systems`), and the writer of the
imported world."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.printable import TEXT_CHARS, printable
from dream_gym.infrastructure.walk import without_lone_surrogates
from dream_gym.world.files import WorldFormatError
from dream_gym.world.tree import DIRECTIONS
from dream_gym.world.writer import new_meta, write_world

from .coerce import world_name_from
from .run_config import configured_workers

# What to do with an orphan (a program that cannot be placed in the tree): attach it under the
# root (the default: nothing is lost) or drop it with its subtree (only when asked).
ORPHAN_RULES = ("attach", "drop")

# An import that would keep fewer than this share of the programs it read fails instead.
MIN_KEPT_SHARE = 0.5


class RunImportError(ValueError):
    """The source cannot be imported (no root, unknown metric, ...); the message says why."""


class NotARunError(RunImportError):
    """The source holds no run of the system asked for; :func:`~.systems.import_run` adds which
    known system it looks like instead."""

    def __init__(self, path: str | os.PathLike[str], message: str):
        self.path = Path(path)
        self.world_folder = (self.path / "world.json").is_file()
        hint = "; it is already a dream-gym world folder (load it directly)" if self.world_folder else ""
        super().__init__(message + hint)


class OtherSystemError(RunImportError):
    """The source holds no run of the system asked for, but one of ``found`` (a key of
    :data:`~.systems.IMPORTERS`), which the message names."""

    def __init__(self, message: str, found: str):
        super().__init__(message)
        self.found = found


@dataclass(frozen=True)
class Importer:
    """One system's importer, as the registry (:data:`~.systems.IMPORTERS`) holds it.

    Attributes:
        label: the system's name in messages ("OpenEvolve").
        looks_for: what :attr:`detect` recognises, in words (for ``--from auto``'s error).
        detect: whether a path (folder or file) holds a run of this system.
        run: ``run(src, out, options) -> ImportReport``: the import itself (``options``: an
            :class:`ImportOptions`).
    """

    label: str
    looks_for: str
    detect: Callable[[Path], bool]
    run: Callable[[str | os.PathLike[str], str | os.PathLike[str], ImportOptions], ImportReport]


class OrphanWarning(UserWarning):
    """Programs of the run could not be placed where the run put them (attached or dropped)."""


@dataclass
class Program:
    """One attempt of a foreign run, normalised."""

    id: str
    parent: str | None
    score: float | None
    error: str | None = None
    timestamp: float | None = None
    order: float | None = None  # iteration / generation, the fallback order
    round: int | None = None
    code: str | None = None
    # A copy (migrant, island copy) of the program with this id: collapsed onto it.
    copy_of: str | None = None
    # The phase of a resumed run the program belongs to (None: the first phase), and, for the
    # root of such a phase, the id recorded as the program it was started from and that
    # program's code as saved with the checkpoint.
    phase: str | None = None
    started_from: str | None = None
    start_code: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def attempt(cls, node_id: str, parent: str | None, value: float | None, error: str | None, *,
                iteration: int | None, timestamp: float | None, code: str | None, copy_of: str | None = None,
                phase: str | None = None, extra: dict[str, Any]) -> Program:
        """A program the run numbered by its iteration (or generation): that number is both its round
        and the order it falls back on; its value is its score unless it failed (``error``)."""
        return cls(id=node_id, parent=parent, score=None if error else value, error=error, timestamp=timestamp,
                   order=None if iteration is None else float(iteration), round=iteration, code=code,
                   copy_of=copy_of, phase=phase, extra=extra)


def metric_problem(metric: str, value: float | None) -> str | None:
    """Why ``value`` is no score by ``metric`` (missing, or not finite), or None when it is one."""
    if value is None:
        return f"metric {metric!r} missing"
    return None if math.isfinite(value) else f"metric {metric!r} is {value}"


def check_metric(where: str | os.PathLike[str], metric: str, available: list[str], *, what: str = "program") -> None:
    """Refuse a metric that no program of the run holds, naming the ones it does."""
    if metric not in available:
        raise RunImportError(f"{where}: no {what} has metric {metric!r}; metrics found: "
                             f"{', '.join(available) or 'none'} (choose one with --metric)")


@dataclass
class ImportReport:
    system: str
    source: str
    label: str = ""  # the system's name in messages (not one of the report's figures)
    out: str = ""
    world_id: str = ""
    metric: str = ""
    files_read: int = 0
    snapshots: int = 0
    unreadable: int = 0  # unreadable files whose program was read from another snapshot
    recovered: int = 0  # programs known only from a trace (pruned from every snapshot)
    programs: int = 0
    nodes: int = 0
    roots_found: int = 0
    phases: int = 1
    phases_stitched: int = 0
    roots_stitched: int = 0  # every extra root placed onto the program it copies (phases included)
    migrants_collapsed: int = 0
    dangling: int = 0  # orphans whose parent is not in the records
    unplaced_roots: int = 0  # orphans: extra roots whose start program could not be found
    cycles: int = 0  # orphans: parent chains that loop
    attached: int = 0
    dropped: int = 0  # nodes dropped with orphans="drop" (orphans and their subtrees)
    reordered: int = 0
    invalid: int = 0
    scored: int = 0
    frontier: str = "leaves"
    max_children_non_root: int = 0
    baseline: float | None = None
    best: float | None = None
    seconds: float = 0.0
    stitches: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def orphans(self) -> int:
        return self.dangling + self.unplaced_roots + self.cycles

    def as_dict(self) -> dict[str, Any]:
        data = {k: (list(v) if isinstance(v, list) else v) for k, v in self.__dict__.items() if k != "label"}
        return data | {"orphans": self.orphans}

    def warn(self, message: str) -> None:
        """Record a warning and raise it as an :class:`OrphanWarning` for library callers."""
        self.warnings.append(message)
        warnings.warn(message, OrphanWarning, stacklevel=3)

    def summary(self) -> str:
        by = {how: sum(1 for s in self.stitches if s["phase"] is not None and s["by"] == how)
              for how in ("resume record", "identical code")}
        lines = [
            f"imported {self.label or self.system} run {self.source}",
            f"  -> world {self.world_id!r} at {self.out}",
            f"  files read {self.files_read}, snapshots {self.snapshots}, distinct programs {self.programs}"
            + (f" ({self.recovered} recovered from the evolution trace)" if self.recovered else ""),
            f"  nodes written {self.nodes} (scored {self.scored}, invalid {self.invalid}) "
            f"by metric {self.metric!r}",
            f"  migrant and island copies collapsed {self.migrants_collapsed}; roots found {self.roots_found}",
            (f"  phases {self.phases}: {self.phases_stitched} resumed phase(s) stitched onto the program they "
             f"started from ({by['resume record']} by best_program_info.json, {by['identical code']} by "
             f"identical code)" if self.phases > 1 else "  phases 1 (not a resumed run)")
            + f"; other extra roots stitched {self.roots_stitched - self.phases_stitched}",
            f"  orphans {self.orphans} (parent not recorded {self.dangling}, unplaced roots "
            f"{self.unplaced_roots}, parent cycles {self.cycles}): attached under the root {self.attached}, "
            f"dropped {self.dropped} node(s)",
            f"  baseline {self.baseline}, best {self.best}, frontier {self.frontier!r}, "
            f"import took {self.seconds:.2f} s",
        ]
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  warning: {w}" for w in self.warnings]
        # notes and warnings quote the run's own names (program ids, folders): escaped and cut
        return "\n".join(printable(line, TEXT_CHARS) for line in lines)


@dataclass(frozen=True)
class ImportOptions:
    """What every importer takes besides the run and the world folder (``dream-gym worlds import``'s
    options), checked when made.

    Attributes:
        metric: the metric read as the score; None: the system's own (``combined_score`` for
            OpenEvolve, ShinkaEvolve and SkyDiscover, GEPA's validation score, EvoTrace's primary score).
        direction: ``maximize`` or ``minimize``.
        world_id: the world's id (default: the name of the world's folder, ``out``).
        task_name, task_description: the task as the world names and describes it (the name's
            default: the task of the dream-gym world whose folder holds the run, a deploy's, else
            the run folder's name).
        workers: W of the original run; None (default): that of the dream-gym world holding the run,
            else the run's own configuration file's where it records one (:mod:`.run_config`), else 1.
        orphans: ``attach`` (programs whose parent is missing go under the root) or ``drop``.
    """

    metric: str | None = None
    direction: str = "maximize"
    world_id: str | None = None
    task_name: str | None = None
    task_description: str = ""
    workers: int | None = None
    orphans: str = "attach"

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise RunImportError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if self.orphans not in ORPHAN_RULES:
            raise RunImportError(f"orphans must be one of {ORPHAN_RULES}, got {self.orphans!r}")
        if self.workers is not None and (isinstance(self.workers, bool) or not isinstance(self.workers, int)
                                         or self.workers < 1):
            raise RunImportError(f"workers must be an integer >= 1, got {self.workers!r}")

    def metric_or(self, system_default: str) -> str:
        """The metric asked for, else the system's own."""
        return self.metric if self.metric is not None else system_default


#: The options of an import that names none.
DEFAULT_OPTIONS = ImportOptions()


def _the_world_around(source: Path) -> tuple[Path, dict[str, Any]] | None:
    """The dream-gym world whose folder holds the run, and its world.json: a deploy's ``--out``
    keeps the system's own output in a folder of its own, named after the system, and its world
    records the run's task and W."""
    from dream_gym.world.files import WORLD_FILE, WorldFormatError, is_present
    from dream_gym.world.tree import read_meta

    folder = source if source.is_dir() else source.parent
    for around in (folder, folder.parent):  # the deploy's --out given, or the system's folder in it
        try:
            if is_present(around / WORLD_FILE):
                return around, read_meta(around / WORLD_FILE)
        except (OSError, WorldFormatError):
            return None
    return None


def _run_settings(system: str, source: Path, options: ImportOptions, report: ImportReport,
                  run_name: str) -> tuple[str, int]:
    """The task name and W of an imported run: the options', else those of the world that holds
    the run (a deploy's), else (W) the run's configuration file's, else the run folder's name and
    W = 1; where they came from is noted in ``report``."""
    around = _the_world_around(source)
    if around and not around[1].get("sha256"):  # a deploy still writing it, or stopped before its end
        from dream_gym.infrastructure.locks import folder_lock

        holder = folder_lock(around[0]).holder()
        state = (f"is being written by pid {holder.get('pid')}" if holder
                 else "was stopped before its end (--resume of that run finishes it)")
        report.warn(f"the run in {around[0]} {state}: this import holds the programs it had saved so far")
    task = (around[1].get("task") or {}).get("name") if around else None
    task_name = options.task_name or (task if isinstance(task, str) and task else None) or run_name
    if around and task_name == task and not options.task_name:
        report.notes.append(f"task {task!r}: the task of the world in {around[0]}, which holds this run "
                            "(--task gives another)")
    if options.workers is not None:
        return task_name, options.workers
    if around and isinstance(around[1].get("workers"), int):
        workers = int(around[1]["workers"])
        report.notes.append(f"W {workers}: the W of the world in {around[0]}, which holds this run (-W gives another)")
        return task_name, workers
    configured = configured_workers(system, source)
    if configured:
        report.notes.append(f"W {configured[0]}: {configured[1]} (-W gives another)")
    return task_name, configured[0] if configured else 1


def write_imported_world(
    out_path: Path,
    records: list[dict[str, Any]],
    report: ImportReport,
    *,
    system: str,
    source_path: Path,
    run_name: str,
    options: ImportOptions,
) -> None:
    """Write the imported records as a finished world, with the import's provenance."""
    records, marked = without_lone_surrogates(records)
    if marked:  # valid JSON escapes (\ud83d) that are no text: no world file may hold them
        report.warn(f"{marked} text value(s) of the run hold half of a UTF-16 pair (a lone surrogate): imported "
                    "with each shown as '\ufffd'")
    # the world's folder names it, as a grown or deployed world's does: a run folder's name is
    # often the system's default (``openevolve_output``), the same for every run
    name = world_name_from(options.world_id or out_path.resolve().name)
    report.world_id = name
    task_name, workers = _run_settings(system, source_path, options, report, run_name)
    meta = new_meta(
        name,
        task_name,
        options.task_description or f"Imported from the {report.label or system} run {run_name}.",
        direction=options.direction,
        workers=workers,
        frontier=report.frontier,
        source={
            "system": system,
            "path": str(source_path.resolve()),
            "metric": report.metric,
            "orphans": options.orphans,
            "import": {k: v for k, v in report.as_dict().items() if k not in ("out", "seconds", "notes", "warnings")},
        },
        notes=list(report.notes) + list(report.warnings),
    )
    try:
        write_world(out_path, meta, records)
    except WorldFormatError as exc:  # a value of the run no world may hold (a negative iteration, ...)
        raise RunImportError(f"{source_path}: the run holds what no world may: {exc.problem}") from None
