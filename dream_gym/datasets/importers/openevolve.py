"""Import an OpenEvolve output folder (or an OpenEvolve derivative's) as a world.

The importer reads every ``programs/*.json`` below the folder (checkpoints, database folders,
outputs of resumed phases nested in checkpoints: see :mod:`.openevolve_layout`) and keeps each
program once. Each checkpoint is a snapshot of a database that prunes programs over time, so
the union of all snapshots is the record; an ``evolution_trace.jsonl`` adds the children that
were pruned from every snapshot, and the LLM costs Noema records in it.

A resumed phase's root is stitched onto the program it was started from (the id in the
checkpoint's ``best_program_info.json``, else identical code), and its iterations are counted on
from the rounds of the phases before it, so that ``round`` keeps growing across phases.

A program is invalid (null score, with its error) when its metrics hold an ``error`` key, a
validity flag (``validity``/``valid``/``valid_solution``/``is_valid``) of 0, or no finite value
for the chosen metric. Code, all metrics, prompts, the change description, island, generation,
iteration and timestamp are kept on each node; evaluator artifacts go to ``diagnostics``.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from .base import (
    Importer,
    ImportReport,
    NotARunError,
    Program,
    RunImportError,
    check_options,
    check_out_folder,
    write_imported_world,
)
from .coerce import as_dict, parse_structure, to_bool, to_finite, to_float, to_id, to_int
from .openevolve_layout import (
    Traces,
    find_program_files,
    is_trace_file,
    read_llm_calls,
    read_resume_record,
    read_run_best,
    read_snapshots,
    read_traces,
)
from .tree import build_world_records

__all__ = ["find_program_files", "import_openevolve"]

LABEL = "OpenEvolve"
VALIDITY_KEYS = ("validity", "valid", "valid_solution", "is_valid")
# metadata keys moved to their own node fields (or redundant: the parent's metrics).
_METADATA_TAKEN = ("island", "migrant", "changes", "parent_metrics", "token_ledger")


def _metrics_of(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in as_dict(raw.get("metrics")).items():
        number = to_float(value)
        out[str(name)] = number if number is not None else value
    return out


def _error_of(metrics: dict[str, Any], metric: str, diagnostics: Any, stderr: Any) -> str | None:
    """The reason a program has no valid score, or None when it has one."""
    reasons = []
    if "error" in metrics:
        reasons.append(f"evaluator reported error={metrics['error']!r}")
    for key in VALIDITY_KEYS:
        if key in metrics and to_float(metrics[key]) == 0.0:
            reasons.append(f"{key}=0")
    value = to_float(metrics.get(metric))
    if value is None:
        reasons.append(f"metric {metric!r} missing")
    elif not math.isfinite(value):
        reasons.append(f"metric {metric!r} is {value}")
    if not reasons:
        return None
    if isinstance(diagnostics, dict):
        for key, text in diagnostics.items():
            if any(word in str(key).lower() for word in ("stderr", "traceback", "error")) and text:
                reasons.append(f"{key}: {str(text)[:2000]}")
                break
    if isinstance(stderr, str) and stderr.strip():
        reasons.append(f"stderr: {stderr.strip()[-2000:]}")
    return "; ".join(reasons)


def _ledger_cost(ledger: Any) -> dict[str, Any] | None:
    """Noema's per-child token ledger (``metadata.token_ledger.calls``) as a node cost."""
    ledger = as_dict(ledger)
    calls = [c for c in ledger.get("calls") or [] if isinstance(c, dict)]
    if not calls:
        return None
    total = {"usd": 0.0, "tokens_in": 0, "tokens_out": 0, "seconds": 0.0}
    for call in calls:
        total["usd"] += to_finite(call.get("cost")) or 0.0
        total["tokens_in"] += to_int(call.get("prompt_tokens")) or 0
        total["tokens_out"] += to_int(call.get("completion_tokens")) or 0
        total["seconds"] += to_finite(call.get("latency_s")) or 0.0
    return total | {"calls": len(calls), "call_ids": [c.get("call_id") for c in calls if c.get("call_id")]}


def _program(raw: dict[str, Any], metric: str, phase: str | None, trace: dict[str, Any] | None) -> Program:
    node_id = to_id(raw.get("id"))
    assert node_id is not None
    metadata = as_dict(raw.get("metadata"))
    metrics = _metrics_of(raw)
    diagnostics = parse_structure(raw.get("artifacts_json"))
    error = _error_of(metrics, metric, diagnostics, metadata.get("stderr"))
    iteration = to_int(raw.get("iteration_found"))
    extra: dict[str, Any] = {"metrics": metrics}
    prompts = parse_structure(raw.get("prompts"))
    if prompts:
        extra["prompts"] = prompts
    if diagnostics:
        extra["diagnostics"] = diagnostics
    trace_metadata = as_dict((trace or {}).get("metadata"))
    cost = _ledger_cost(metadata.get("token_ledger") or trace_metadata.get("token_ledger"))
    if cost:
        extra["cost"] = cost
    parent = to_id(raw.get("parent_id"))
    migrant = to_bool(metadata.get("migrant", False)) or "_migrant_" in node_id
    extra["openevolve"] = {
        "generation": to_int(raw.get("generation")),
        "iteration_found": iteration,
        "timestamp": to_float(raw.get("timestamp")),
        "island": to_int(metadata.get("island")),
        "changes": metadata.get("changes") or raw.get("changes_description"),
        "language": raw.get("language"),
        "complexity": to_float(raw.get("complexity")),
        "diversity": to_float(raw.get("diversity")),
        "parent_id": parent,
        "phase": phase,
        "metadata": {k: v for k, v in metadata.items() if k not in _METADATA_TAKEN} or None,
    }
    return Program(
        id=node_id,
        parent=parent,
        score=None if error else to_float(metrics[metric]),
        error=error,
        timestamp=to_float(raw.get("timestamp")),
        order=None if iteration is None else float(iteration),
        round=iteration,
        code=raw.get("code") if isinstance(raw.get("code"), str) else None,
        copy_of=parent if migrant else None,
        phase=phase,
        extra=extra,
    )


def _from_trace(child: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A program record rebuilt from its evolution-trace line (it was pruned from every snapshot)."""
    return {
        "id": child, "parent_id": entry.get("parent_id"), "code": entry.get("child_code"),
        "metrics": entry.get("child_metrics"), "timestamp": entry.get("timestamp"),
        "iteration_found": entry.get("iteration"), "generation": entry.get("generation"),
        "metadata": {"island": entry.get("island_id"), "changes": entry.get("child_changes_description")},
        "prompts": entry.get("prompt"), "recovered_from": "evolution_trace",
    }


def _number_rounds(programs: list[Program]) -> None:
    """Count each resumed phase's iterations on from the rounds of the phases before it."""
    first_seen: dict[str | None, float] = {}
    for p in programs:
        stamp = p.timestamp if p.timestamp is not None else math.inf
        first_seen[p.phase] = min(first_seen.get(p.phase, math.inf), stamp)
    phases = sorted(first_seen, key=lambda ph: (ph is not None, first_seen[ph], ph or ""))
    offset: dict[str | None, int] = {}
    reached = 0
    for ph in phases:
        offset[ph] = 0 if ph is None else reached
        top = max((p.round for p in programs if p.phase == ph and p.round is not None), default=0)
        reached = max(reached, offset[ph] + top)
    for p in programs:
        if p.round is not None and offset[p.phase]:
            p.round += offset[p.phase]


def _note_run_best(src: Path, report: ImportReport, metric: str) -> None:
    run_best = read_run_best(src, metric)
    if run_best is None or report.best is None:
        return
    path, best_id, value = run_best
    if value is not None and not math.isclose(value, report.best, rel_tol=1e-12, abs_tol=1e-12):
        report.notes.append(
            f"the run's own best ({path.relative_to(src)}: {metric} {value}, program {best_id}) differs from the "
            f"best valid program in the records ({report.best}): that file was written before the run ended, "
            "or by a tracked best that does not use this metric"
        )


def import_openevolve(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    metric: str = "combined_score",
    direction: str = "maximize",
    world_id: str | None = None,
    task_name: str | None = None,
    task_description: str = "",
    workers: int = 1,
    orphans: str = "attach",
) -> ImportReport:
    """Read an OpenEvolve output folder and write it as a world folder ``out``."""
    started = time.perf_counter()
    src = Path(src)
    from .openevolve_trace import import_openevolve_trace

    if is_trace_file(src):  # an evolution_trace.jsonl(.gz) on its own
        return import_openevolve_trace(src, out, metric=metric, direction=direction, world_id=world_id,
                                       task_name=task_name, task_description=task_description, workers=workers,
                                       orphans=orphans)
    if not src.is_dir():
        raise FileNotFoundError(f"{src}: not a folder (expected an OpenEvolve output folder or its evolution_trace.jsonl)")
    check_options(direction, orphans)
    out_path = check_out_folder(out)
    report = ImportReport("openevolve", str(src), LABEL, out=str(out_path), metric=metric)
    snapshots = read_snapshots(src, report)
    traces = read_traces(src)
    if not snapshots.raws:
        raise NotARunError(src, f"{src}: no OpenEvolve programs found (expected programs/*.json files, e.g. in "
                           "checkpoints/checkpoint_N/programs/ or db/programs/)")
    raws = dict(snapshots.raws)
    phase = dict(snapshots.phase)
    for child, entry in traces.lines.items():
        if child not in raws:
            raws[child] = _from_trace(child, entry)
            phase[child] = traces.phase[child]
            report.recovered += 1
    available = sorted({k for r in raws.values() for k in _metrics_of(r)})
    if metric not in available:
        raise RunImportError(
            f"{src}: no program has metric {metric!r}; metrics found: {', '.join(available) or 'none'} "
            "(choose one with --metric)"
        )
    programs = []
    for node_id, raw in raws.items():
        program = _program(raw, metric, phase[node_id], traces.lines.get(node_id))
        if raw.get("recovered_from"):
            program.extra["recovered_from"] = raw["recovered_from"]
        programs.append(program)
    resume_records = {ph: read_resume_record(src, ph) for ph in {p.phase for p in programs} if ph is not None}
    for p in programs:
        if p.parent is None and p.phase is not None:
            p.started_from, p.start_code = resume_records[p.phase]
    _number_rounds(programs)
    _note_traces(report, traces, snapshots.raws)
    _note_llm_calls(src, report, programs)
    records = build_world_records(programs, report, orphans=orphans, direction=direction)
    _note_run_best(src, report, metric)
    write_imported_world(
        out_path, records, report, system="openevolve", source_path=src, run_name=src.resolve().name,
        world_id=world_id, task_name=task_name, task_description=task_description, direction=direction,
        workers=workers, orphans=orphans,
    )
    report.seconds = time.perf_counter() - started
    return report


def _note_traces(report: ImportReport, traces: Traces, snapshot_raws: dict[str, Any]) -> None:
    if not traces.files:
        return
    mismatched = sum(
        1 for child, entry in traces.lines.items()
        if child in snapshot_raws and to_id(entry.get("parent_id")) != to_id(snapshot_raws[child].get("parent_id"))
    )
    report.notes.append(
        f"evolution trace: {traces.files} file(s), {len(traces.lines)} children, {report.recovered} of them "
        f"pruned from every snapshot and recovered from the trace, {mismatched} with another parent than "
        f"in the snapshots (the snapshots win), {traces.bad_lines} unreadable line(s)"
    )
    report.notes.extend(traces.problems)


def _note_llm_calls(src: Path, report: ImportReport, programs: list[Program]) -> None:
    """All-in cost: LLM calls a node's cost does not cover (retried or rejected proposals) are counted."""
    calls = read_llm_calls(src)
    if not calls:
        return
    attached = {cid for p in programs for cid in p.extra.get("cost", {}).get("call_ids", [])}
    loose = [c for c in calls if c.get("call_id") not in attached]
    usd = sum(to_finite(c.get("cost")) or 0.0 for c in calls)
    loose_usd = sum(to_finite(c.get("cost")) or 0.0 for c in loose)
    report.notes.append(
        f"llm_calls.jsonl: {len(calls)} LLM call(s), ${usd:.4f} in all; {len(loose)} of them (${loose_usd:.4f}) "
        "are in no node's cost (retried or rejected proposals, or programs made outside the trace)"
    )


def is_openevolve_run(path: Path) -> bool:
    """An OpenEvolve output folder (programs/*.json somewhere below) or its evolution trace file."""
    if path.is_file():
        return is_trace_file(path)
    return path.is_dir() and any(p.parent.name == "programs" for p in path.rglob("*.json"))


IMPORTER = Importer(label=LABEL, looks_for="an OpenEvolve output folder (programs/*.json)",
                    detect=is_openevolve_run, run=import_openevolve)
