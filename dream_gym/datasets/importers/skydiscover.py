"""Import a SkyDiscover output folder as a world.

What SkyDiscover 0.1 writes (read in its source, the ``skydiscover`` package):

* ``search/base_database.py`` ``Program``: ``id``, ``solution`` (the program's code), ``language``,
  ``metrics``, ``iteration_found``, ``parent_id``, ``other_context_ids`` (the inspirations shown to
  the LLM), ``parent_info`` (the sampling label and the parent id), ``context_info``,
  ``timestamp``, ``metadata`` (``changes``, ``parent_metrics``, ...), ``artifacts`` (the
  evaluator's), ``prompts``, ``generation``;
* ``search/utils/checkpoint_manager.py``: a database saves each program as
  ``programs/<id>.json`` (``Program.to_dict()``, prompts added) beside a ``metadata.json``;
  ``search/main_controller.py`` saves the database every ``checkpoint_interval`` iterations and at
  the end to ``<output>/checkpoints/checkpoint_N/`` (with ``best_program.<ext>`` and
  ``best_program_info.json``; AdaEvolve adds ``adaevolve_metadata.json``) and the final best to
  ``<output>/best/``; with ``database.db_path`` set, every program is also saved there as it is
  added;
* ``search/adaevolve/database.py``: copies are new programs under fresh ids: the initial program
  on every other island (metadata ``seeded_to_island``, no parent), the top programs of an island
  on the next one (``migrated_from``/``migrated_to``, ``parent_id`` the original) and on a
  spawned island (``seeded_to_spawned_island``): they collapse onto the program they copy;
* ``search/evox``: EvoX also evolves the search strategy itself, saved as
  ``search/iteration_N/code.py``: those programs are not solutions and are not imported (counted
  in a note).

Each checkpoint is a snapshot of a database that may drop programs (AdaEvolve's archives evict),
so the union of all ``programs/*.json`` below the folder is the record. A program is invalid
(null score, with its error) by SkyDiscover's own rule for a failed evaluation: an ``error``
metric (its evaluator's marker for a crash or time-out is ``{"error": 0.0}``), ``validity`` 0 or
-1, ``timeout``, or no finite value for the chosen metric. Code, all metrics, the artifacts (as
``diagnostics``), prompts, the sampling label, the inspirations, iteration, generation and
timestamp are kept on each node; ``round`` is the iteration.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from .base import (
    DEFAULT_OPTIONS,
    Importer,
    ImportOptions,
    ImportReport,
    NotARunError,
    Program,
    RunImportError,
    check_metric,
    metric_problem,
)
from .coerce import as_dict, as_text, parse_structure, to_bool, to_finite, to_float, to_id, to_int
from .files import optional_json_object, read_data
from .job import ImportJob
from .openevolve_layout import note_run_best, read_snapshots
from .openevolve_programs import _metrics_of, metrics_found

LABEL = "SkyDiscover"
# metadata of a copy whose parent_id is the program it copies
COPY_KEYS = ("migrated_from", "seeded_to_spawned_island")
# metadata of a copy of the initial program on another island (no parent_id)
SEED_KEY = "seeded_to_island"
# metadata keys moved to their own node fields (or redundant: the parent's metrics)
_METADATA_TAKEN = ("changes", "parent_metrics", "failed_attempts")
_SNIFF_BYTES = 4 << 20


def _error_of(metrics: dict[str, Any], metric: str, artifacts: dict[str, Any]) -> str | None:
    """The reason a program has no valid score (SkyDiscover's failed-evaluation rule), or None."""
    reasons = []
    if "error" in metrics:
        reasons.append(f"evaluator reported error={metrics['error']!r}")
    validity = to_float(metrics.get("validity"))
    if validity in (0.0, -1.0):
        reasons.append(f"validity={metrics['validity']!r}")
    if "timeout" in metrics and to_bool(metrics["timeout"]):
        reasons.append("timeout")
    if problem := metric_problem(metric, to_float(metrics.get(metric))):
        reasons.append(problem)
    if not reasons:
        return None
    for key in ("error", "stderr", "traceback", "error_message"):
        text = artifacts.get(key)
        if text and str(text) != str(metrics.get("error")):
            reasons.append(f"{key}: {str(text)[:2000]}")
            break
    return "; ".join(reasons)


def _parent_label(parent_info: Any) -> str | None:
    """The label SkyDiscover's sampling gave the parent (AdaEvolve's mode guidance), if any."""
    info = parse_structure(parent_info)
    if isinstance(info, (list, tuple)) and info and isinstance(info[0], str) and info[0]:
        return info[0]
    return None


def skydiscover_program(raw: dict[str, Any], metric: str, phase: str | None = None) -> Program:
    """One SkyDiscover program record (a ``programs/*.json`` file, ``Program.to_dict()``) as a
    :class:`~.base.Program`. Shared with the SkyDiscover bridge, so that the deploy record and
    an import read a program the same way."""
    node_id = to_id(raw.get("id"))
    if node_id is None:
        raise RunImportError("a SkyDiscover program record has no id")
    metadata = as_dict(raw.get("metadata"))
    metrics = _metrics_of(raw)
    artifacts = as_dict(raw.get("artifacts"))
    error = _error_of(metrics, metric, artifacts)
    iteration = to_int(raw.get("iteration_found"))
    parent = to_id(raw.get("parent_id"))
    extra: dict[str, Any] = {"metrics": metrics}
    if artifacts:
        extra["diagnostics"] = artifacts
    prompts = parse_structure(raw.get("prompts"))
    if prompts:
        extra["prompts"] = prompts
    failed_attempts = metadata.get("failed_attempts")
    extra["skydiscover"] = {
        "iteration_found": iteration,
        "generation": to_int(raw.get("generation")),
        "timestamp": to_float(raw.get("timestamp")),
        "language": raw.get("language"),
        "parent_id": parent,
        "changes": metadata.get("changes"),
        "parent_label": _parent_label(raw.get("parent_info")),
        "inspirations": [i for i in (to_id(c) for c in raw.get("other_context_ids") or []) if i],
        "failed_attempts": len(failed_attempts) if isinstance(failed_attempts, list) else None,
        "metadata": {k: v for k, v in metadata.items() if k not in _METADATA_TAKEN} or None,
    }
    copy_of = parent if parent is not None and any(k in metadata for k in COPY_KEYS) else None
    return Program.attempt(node_id, parent, to_float(metrics.get(metric)), error, iteration=iteration,
                           timestamp=to_float(raw.get("timestamp")), code=as_text(raw.get("solution")),
                           copy_of=copy_of, phase=phase, extra=extra)


def _collapse_seeded_copies(programs: list[Program], raws: dict[str, dict[str, Any]]) -> None:
    """AdaEvolve's copies of the initial program on the other islands have no parent: each one is
    a copy of the initial program with the same code (the earliest such root)."""
    roots = sorted((p for p in programs if p.parent is None and SEED_KEY not in as_dict(raws[p.id].get("metadata"))),
                   key=lambda p: (p.timestamp if p.timestamp is not None else math.inf, p.id))
    for p in programs:
        if p.parent is None and SEED_KEY in as_dict(raws[p.id].get("metadata")):
            original = next((r for r in roots if r.code is not None and r.code == p.code), None)
            if original is not None:
                p.copy_of = original.id


def _note_search_strategies(src: Path, report: ImportReport) -> None:
    strategies = [d for d in src.glob("search/iteration_*") if d.is_dir()]
    if strategies:
        report.notes.append(
            f"EvoX: {len(strategies)} evolved search strateg{'y' if len(strategies) == 1 else 'ies'} in search/ "
            "(programs of the search itself, not solutions) are not imported")


def _note_summary(src: Path, report: ImportReport) -> None:
    """The run's own cost summary (``summary.json``, written by some SkyDiscover versions), if any."""
    summary = optional_json_object(src / "summary.json")
    if summary is None:
        return
    cost, iterations = to_finite(summary.get("total_cost")), to_int(summary.get("num_iterations"))
    if cost is not None:
        report.notes.append(f"summary.json: total LLM cost ${cost:.4f}"
                            + (f" over {iterations} iterations" if iterations is not None else "")
                            + " (not split by program)")


def _note_iterations(src: Path, report: ImportReport) -> None:
    """The iterations the run reached (its checkpoints' ``last_iteration``) against the programs
    found: an iteration whose program failed leaves none (SkyDiscover's loop keeps no failed
    program), and a program evicted between two checkpoints is in none of them."""
    reached = 0
    for path in src.glob("checkpoints/checkpoint_*/metadata.json"):
        if (meta := optional_json_object(path)) is not None:
            reached = max(reached, to_int(meta.get("last_iteration")) or 0)
    attempts = report.nodes - 1
    if reached > attempts:
        report.notes.append(
            f"the run reached iteration {reached} and {attempts} of its programs are in the records: an iteration "
            "whose evaluation failed keeps no program (SkyDiscover's loop), and a program dropped from the database "
            "between two checkpoints is in none of them")


def import_skydiscover(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    options: ImportOptions = DEFAULT_OPTIONS,
) -> ImportReport:
    """Read a SkyDiscover output folder and write it as a world folder ``out``."""
    src = Path(src)
    if not src.is_dir():
        raise FileNotFoundError(f"{src}: not a folder (expected a SkyDiscover output folder)")
    metric = options.metric_or("combined_score")
    job = ImportJob.begin("skydiscover", LABEL, src, out, options, metric=metric)
    report = job.report
    snapshots = read_snapshots(src, report)
    raws = {node_id: raw for node_id, raw in snapshots.raws.items() if "solution" in raw}
    if not raws:
        raise NotARunError(src, f"{src}: no SkyDiscover programs found (expected programs/*.json files with a "
                           "'solution' field, e.g. in checkpoints/checkpoint_N/programs/)")
    skipped = sorted(set(snapshots.raws) - set(raws))
    continued = [i for i in skipped if any(to_id(raw.get("parent_id")) == i for raw in raws.values())]
    if continued:  # its children would hang under the root as orphans, and its own attempt be gone
        raise RunImportError(f"{src}: program {continued[0]} has no 'solution' field in any of its files, and programs "
                             "of the run continue it: the import would lose it; restore its file from a copy")
    if skipped:
        report.notes.append(f"{len(skipped)} program file(s) without a 'solution' field skipped")
    check_metric(src, metric, metrics_found(raws.values()))
    programs = [skydiscover_program(raw, metric) for raw in raws.values()]
    _collapse_seeded_copies(programs, raws)
    _note_search_strategies(src, report)
    _note_summary(src, report)
    records = job.build(programs)
    _note_iterations(src, report)
    note_run_best(src, report, metric)
    return job.write(records, source_path=src, run_name=src.resolve().name)


def _is_program_file(path: Path) -> bool:
    """A SkyDiscover ``Program.to_dict()`` file: a JSON object with ``id`` and ``solution``."""
    try:
        raw = json.loads(read_data(path, _SNIFF_BYTES))  # no link followed, no FIFO waited on
    except (OSError, ValueError, UnicodeDecodeError):  # RunImportError is a ValueError
        return False
    return isinstance(raw, dict) and "id" in raw and "solution" in raw


def is_skydiscover_run(path: Path) -> bool:
    """A SkyDiscover output folder: programs/*.json below it hold SkyDiscover's ``solution`` field."""
    if not path.is_dir():
        return False
    for candidate in path.rglob("*.json"):
        if candidate.parent.name == "programs" and candidate.is_file():
            return _is_program_file(candidate)
    return False


IMPORTER = Importer(label=LABEL, looks_for="a SkyDiscover output folder (programs/*.json with 'solution')",
                    detect=is_skydiscover_run, run=import_skydiscover)
