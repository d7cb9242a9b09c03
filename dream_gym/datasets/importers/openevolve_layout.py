"""Where an OpenEvolve output folder keeps what: snapshots, resumed phases, traces.

What OpenEvolve writes (read in its source, github.com/codelion/openevolve, now
algorithmicsuperintelligence/openevolve):

* ``database.py`` ``ProgramDatabase.save``: a database folder holds ``programs/<id>.json`` (one
  ``Program.to_dict()`` each, ``prompts`` added when logged) and ``metadata.json``;
* ``controller.py`` ``_save_checkpoint``: every ``checkpoint_interval`` iterations it saves the
  database to ``<output>/checkpoints/checkpoint_N/`` with the best program so far as
  ``best_program<ext>`` and ``best_program_info.json`` (its ``id``, metrics, ...);
* ``controller.py`` ``OpenEvolve.__init__``: the output folder defaults to
  ``dirname(initial_program)/openevolve_output``, and ``run`` adds the initial program under a
  fresh uuid with no parent. The recipe of ``examples/circle_packing/README.md`` ("Running the
  Example") starts phase 2 from ``openevolve_output/checkpoints/checkpoint_100/best_program.py``:
  so a resumed phase writes its whole output inside that checkpoint folder
  (``checkpoint_N/openevolve_output/checkpoints/checkpoint_M/programs/*.json``, nested once per
  resume), and its root is a copy of the checkpoint's best program under a new id;
* ``evolution_trace.py`` ``EvolutionTracer``: optionally ``<output>/evolution_trace.jsonl`` (or
  ``.jsonl.gz``), one line per child: ``iteration``, ``timestamp``, ``parent_id``,
  ``child_id``, ``child_metrics``, optionally ``child_code``, ``metadata``.

Derivatives keep the same files elsewhere (Noema: ``db/programs/`` without checkpoints).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.limits import LimitError, loads_bounded, max_line_bytes

from .base import ImportReport, RunImportError
from .coerce import to_id
from .files import data_lines, data_text, optional_json_object, read_data

_CHECKPOINT_RE = re.compile(r"^checkpoint_(\d+)$")
TRACE_NAMES = ("evolution_trace.jsonl", "evolution_trace.jsonl.gz")


def _checkpoint_numbers(parts: tuple[str, ...]) -> list[float]:
    return [float(m.group(1)) for part in parts if (m := _CHECKPOINT_RE.match(part))]


def find_program_files(src: str | os.PathLike[str]) -> list[Path]:
    """Every ``programs/*.json`` below ``src``, oldest snapshot first.

    Snapshots are ordered by the checkpoint numbers on their path (outer first), database
    folders outside any checkpoint (``db/``) last, then by path.
    """
    src = Path(src)
    files = [p for p in src.rglob("*.json") if p.parent.name == "programs" and p.is_file()]

    def key(path: Path) -> tuple[list[float], str]:
        numbers = _checkpoint_numbers(path.relative_to(src).parts) or [math.inf]
        return numbers, str(path)

    return sorted(files, key=key)


def phase_of(src: Path, path: Path, *, skip: int) -> str | None:
    """The checkpoint folder (relative to ``src``; "." for ``src`` itself) whose best program
    started the phase that wrote ``path``, or None for the first phase.

    ``skip`` is the number of trailing path parts that belong to the writing phase itself
    (``checkpoint_M/programs/x.json``: 3; ``evolution_trace.jsonl``: 1).
    """
    parts = (src.name, *path.relative_to(src).parts)  # src itself may be the checkpoint resumed from
    for i in range(len(parts) - skip - 1, -1, -1):
        if _CHECKPOINT_RE.match(parts[i]):
            return Path(*parts[1: i + 1]).as_posix() if i else "."
    return None


@dataclass
class Snapshots:
    """The union of all snapshots: one merged raw dict per program id, with its phase."""

    raws: dict[str, dict[str, Any]] = field(default_factory=dict)
    phase: dict[str, str | None] = field(default_factory=dict)


def read_snapshots(src: Path, report: ImportReport) -> Snapshots:
    """Read every program file; later snapshots fill in and override earlier values.

    A file that cannot be read is skipped when its program (named by the file) is read from
    another snapshot; otherwise the import fails naming the file, since importing would lose it.
    """
    files = find_program_files(src)
    if not files:
        return Snapshots()
    snapshots = Snapshots()
    unreadable: list[tuple[Path, str]] = []
    for path in files:
        data = read_data(path, max_line_bytes())  # a link, a FIFO or a bomb is refused, not noted
        try:
            raw = loads_bounded(data)
        except LimitError as exc:
            unreadable.append((path, exc.problem))
            continue
        except ValueError as exc:
            unreadable.append((path, f"unreadable JSON ({exc})"))
            continue
        node_id = to_id(raw.get("id")) if isinstance(raw, dict) else None
        if node_id is None:
            unreadable.append((path, "not a program record (no 'id')"))
            continue
        report.snapshots += 1
        snapshots.phase.setdefault(node_id, phase_of(src, path, skip=3))
        target = snapshots.raws.setdefault(node_id, {})
        for key, value in raw.items():
            if value is not None or key not in target:
                target[key] = value
    report.files_read = len(files)
    for path, problem in unreadable:
        if path.stem not in snapshots.raws:
            raise RunImportError(
                f"{path}: {problem}; program {path.stem} has no other readable snapshot, so the import "
                "would lose it. Repair the file, or delete it to import the run without that program"
            )
        report.unreadable += 1
        report.notes.append(f"skipped {path}: {problem}; program {path.stem} is read from another snapshot")
    return snapshots


def read_resume_record(src: Path, phase: str) -> tuple[str | None, str | None]:
    """The id and code of the best program saved with the checkpoint that started ``phase``."""
    folder = src / phase
    info = optional_json_object(folder / "best_program_info.json")
    started_from = to_id(info.get("id")) if info is not None else None
    code = None
    for candidate in sorted(folder.glob("best_program.*")):
        if candidate.name != "best_program_info.json" and not candidate.is_dir():
            code = data_text(candidate)  # a link or a FIFO is refused, not followed or waited on
            break
    return started_from, code


@dataclass
class Traces:
    """The evolution-trace lines by child id, with the phase of the file that holds each."""

    lines: dict[str, dict[str, Any]] = field(default_factory=dict)
    phase: dict[str, str | None] = field(default_factory=dict)
    files: int = 0
    bad_lines: int = 0
    first_bad: str = ""  # where the first unreadable line is: "FILE line N"
    problems: list[str] = field(default_factory=list)

    def unreadable(self) -> str:
        """The unreadable lines, counted, and where the first is."""
        return f"{self.bad_lines} unreadable line(s)" + (f" (the first: {self.first_bad})" if self.bad_lines else "")

    def _bad(self, path: Path, number: int) -> None:
        self.bad_lines += 1
        self.first_bad = self.first_bad or f"{path} line {number}"


def read_traces(src: Path, files: list[Path] | None = None) -> Traces:
    """The lines of every evolution trace below ``src`` (or of ``files``, a trace given alone)."""
    traces = Traces()
    if files is None:
        files = sorted(p for name in TRACE_NAMES for p in src.rglob(name) if not p.is_dir())
    for path in files:
        traces.files += 1
        try:
            for number, line in enumerate(data_lines(path), start=1):
                if not line.strip():
                    continue
                try:
                    entry = loads_bounded(line)
                    child = to_id(entry.get("child_id"))
                except (ValueError, AttributeError):
                    traces._bad(path, number)
                    continue
                if child is None:
                    traces._bad(path, number)
                    continue
                traces.lines[child] = entry
                traces.phase.setdefault(child, phase_of(src, path, skip=1))
        except (OSError, EOFError) as exc:  # a truncated .gz: keep the lines read so far
            traces.problems.append(f"{path}: read stopped early ({exc})")
    return traces


def log_entries(src: Path, name: str) -> list[tuple[Path, Any]]:
    """Each non-blank line of every file ``name`` or ``name.gz`` (OpenEvolve's ``compress``) below
    ``src``, with its file: a side log of the run, read leniently (:func:`log_lines`)."""
    return log_lines(sorted(p for n in (name, name + ".gz") for p in src.rglob(n)) if src.is_dir() else [])


def log_lines(paths: list[Path]) -> list[tuple[Path, Any]]:
    """Each non-blank line of the files ``paths`` (``.gz`` ones decompressed), with its file. A line
    that is not JSON is None; a file that cannot be read, or the rest of a truncated ``.gz``, is
    passed over."""
    entries: list[tuple[Path, Any]] = []
    for path in paths:
        try:
            for line in filter(bytes.strip, data_lines(path)):
                try:
                    entries.append((path, loads_bounded(line)))
                except ValueError:
                    entries.append((path, None))
        except (OSError, EOFError):  # unreadable, or a .gz cut short: keep the lines read so far
            continue
    return entries


def read_llm_calls(src: Path) -> list[dict[str, Any]]:
    """Noema's ``llm_calls.jsonl`` (one line per LLM call: ``call_id``, ``cost``, tokens), if any."""
    return [entry for _, entry in log_entries(src, "llm_calls.jsonl") if isinstance(entry, dict)]


def read_run_best(src: Path, metric: str) -> tuple[Path, str | None, float | None] | None:
    """The run's own final best (the newest ``best/best_program_info.json``), if any."""
    found = []
    for path in src.rglob("best_program_info.json"):
        if path.parent.name == "best" and (info := optional_json_object(path)) is not None:
            found.append((float(info.get("saved_at") or 0.0), path, info))
    if not found:
        return None
    _, path, info = max(found, key=lambda item: (item[0], len(item[1].parts)))
    metrics = info.get("metrics")
    value = metrics.get(metric) if isinstance(metrics, dict) else None
    return path, to_id(info.get("id")), value if isinstance(value, (int, float)) else None


def note_run_best(src: Path, report: ImportReport, metric: str, *, why: str = "") -> None:
    """Note the run's own final best (:func:`read_run_best`) when it differs from the best valid
    program of the records; ``why`` says what the system's file may have missed."""
    run_best = read_run_best(src, metric)
    if run_best is None or report.best is None:
        return
    path, best_id, value = run_best
    if value is not None and not math.isclose(value, report.best, rel_tol=1e-12, abs_tol=1e-12):
        report.notes.append(
            f"the run's own best ({path.relative_to(src)}: {metric} {value}, program {best_id}) differs from the "
            f"best valid program in the records ({report.best})" + (f": {why}" if why else "")
        )


TRACE_SUFFIXES = (".jsonl", ".jsonl.gz")


def is_trace_file(path: str | os.PathLike[str]) -> bool:
    """A file whose name ends .jsonl or .jsonl.gz and whose first line holds child_id and parent_id."""
    path = Path(path)
    if not path.is_file() or path.is_symlink() or not path.name.endswith(TRACE_SUFFIXES):
        return False
    try:
        for line in data_lines(path):
            if line.strip():
                entry = loads_bounded(line)
                return isinstance(entry, dict) and "child_id" in entry and "parent_id" in entry
    except (OSError, EOFError, ValueError):  # RunImportError and LimitError are ValueErrors
        return False
    return False
