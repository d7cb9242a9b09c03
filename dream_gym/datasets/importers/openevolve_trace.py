"""Import OpenEvolve's evolution-trace log (``evolution_trace.jsonl`` / ``.jsonl.gz``) alone.

OpenEvolve's ``EvolutionTracer`` (``evolution_trace.enabled: true``) writes one JSON line per
child: ``iteration``, ``timestamp``, ``parent_id``, ``child_id``, both programs' metrics, and with
``include_code`` both programs' code. A run whose checkpoints are gone can be imported from it:
every child is a program, and a parent that is never a child (the initial program, or a program
of a phase the log does not cover) is rebuilt from its ``parent_*`` fields; the earliest such
parent is the root. The programs then go through the same reading as the checkpoint importer
(:func:`.openevolve_programs._program`: metric, errors, island, iteration) and the same tree building.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from .base import DEFAULT_OPTIONS, ImportOptions, ImportReport, RunImportError, check_metric
from .coerce import to_float, to_id
from .job import ImportJob
from .openevolve_failures import add_failures, failures_beside, note_failures
from .openevolve_layout import TRACE_NAMES, read_traces
from .openevolve_programs import LABEL, _from_trace, _parent_from_trace, _program, from_failure, metrics_found


def import_openevolve_trace(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    options: ImportOptions = DEFAULT_OPTIONS,
) -> ImportReport:
    """Read an evolution-trace file and write it as a world folder ``out``."""
    src = Path(src)
    metric = options.metric_or("combined_score")
    job = ImportJob.begin("openevolve", LABEL, src, out, options, metric=metric)
    report = job.report
    traces = _read(src)
    if not traces.lines:
        raise RunImportError(f"{src}: no evolution-trace lines (JSON objects with child_id and parent_id)")
    raws: dict[str, dict[str, Any]] = {}
    for child, entry in traces.lines.items():
        raws[child] = _from_trace(child, entry)
        if isinstance(entry.get("artifacts"), dict) and entry["artifacts"]:  # the evaluator's artifacts
            raws[child]["artifacts_json"] = entry["artifacts"]
    for entry in sorted(traces.lines.values(), key=lambda e: to_float(e.get("timestamp")) or math.inf):
        parent = to_id(entry.get("parent_id"))
        if parent is not None and parent not in raws:
            raws[parent] = _parent_from_trace(parent, entry)
    rebuilt = len(raws) - len(traces.lines)
    failures = failures_beside(src)
    for _, entry in failures:  # a continued iteration without a program is that, not a parent without one
        made = from_failure(entry, {})
        if made is not None and raws.get(made["id"], {}).get("recovered_from") == "evolution_trace parent":
            del raws[made["id"]]
            rebuilt -= 1
    placed = add_failures(raws, dict.fromkeys(raws), failures)
    report.files_read = traces.files
    check_metric(src, metric, metrics_found(raws.values()))
    programs = [_program(raw, metric, None, traces.lines.get(node_id)) for node_id, raw in raws.items()]
    missing_code = sum(1 for p in programs if p.code is None)
    report.notes.append(
        f"evolution trace only: {len(traces.lines)} children, {rebuilt} parent(s) that are never "
        f"a child rebuilt from the lines naming them, {traces.unreadable()}"
        + (f"; {missing_code} program(s) without code (the tracer's include_code was off)" if missing_code else "")
    )
    note_failures(report, failures, placed)
    report.notes.extend(traces.problems)
    # the run's name: the output folder's, as an import of that folder gives, for OpenEvolve's own
    # file name (the name of every run's trace); a trace named otherwise names it
    run_name = src.resolve().parent.name if src.name in TRACE_NAMES else src.name.split(".")[0]
    return job.write(job.build(programs), source_path=src, run_name=run_name)


def _read(src: Path) -> Any:
    """The trace lines of one file, read as data (read_traces reads every trace below a folder)."""
    return read_traces(src.parent, files=[src])
