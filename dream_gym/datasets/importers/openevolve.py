"""Import an OpenEvolve output folder (or an OpenEvolve derivative's) as a world.

The importer reads every ``programs/*.json`` below the folder (checkpoints, database folders,
outputs of resumed phases nested in checkpoints: see :mod:`.openevolve_layout`) and keeps each
program once. Each checkpoint is a snapshot of a database that prunes programs over time, so
the union of all snapshots is the record; an ``evolution_trace.jsonl`` adds the children that
were pruned from every snapshot, and the LLM costs Noema records in it.

A resumed phase's root is stitched onto the program it was started from (the id in the
checkpoint's ``best_program_info.json``, else identical code), and its iterations are counted on
from the rounds of the phases before it, so that ``round`` keeps growing across phases.

A program is invalid (null score, with its error) when its metrics hold an ``error`` key (but
not a numeric 0 beside a finite score: some evaluators report ``error`` as a 0/1 flag), a
validity flag (``validity``/``valid``/``valid_solution``/``is_valid``) of 0, or no finite value
for the chosen metric. Code, all metrics, prompts, the change description, island, generation,
iteration and timestamp are kept on each node; evaluator artifacts go to ``diagnostics``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from .base import DEFAULT_OPTIONS, Importer, ImportOptions, ImportReport, NotARunError, Program, check_metric
from .coerce import as_dict, to_finite, to_id
from .job import ImportJob
from .openevolve_failures import add_failures, note_failures, read_failures
from .openevolve_layout import (
    TRACE_NAMES,
    Traces,
    find_program_files,
    is_trace_file,
    note_run_best,
    read_llm_calls,
    read_resume_record,
    read_snapshots,
    read_traces,
)
from .openevolve_programs import (
    LABEL,
    _from_trace,
    _metrics_of,
    _parent_from_trace,
    _program,
    is_migrant,
    metrics_found,
)

__all__ = ["find_program_files", "import_openevolve"]

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


def import_openevolve(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    options: ImportOptions = DEFAULT_OPTIONS,
) -> ImportReport:
    """Read an OpenEvolve output folder and write it as a world folder ``out``."""
    src = Path(src)
    from .openevolve_trace import import_openevolve_trace

    if is_trace_file(src):  # an evolution_trace.jsonl(.gz) on its own
        return import_openevolve_trace(src, out, options)
    if (trace := lone_trace(src)) is not None:  # stopped before its first checkpoint
        return import_openevolve_trace(trace, out, options)
    if not src.is_dir():
        raise FileNotFoundError(f"{src}: not a folder (expected an OpenEvolve output folder or its evolution_trace.jsonl)")
    metric = options.metric_or("combined_score")
    job = ImportJob.begin("openevolve", LABEL, src, out, options, metric=metric)
    report = job.report
    snapshots = read_snapshots(src, report)
    traces = read_traces(src)
    if not snapshots.raws:
        raise NotARunError(src, f"{src}: no OpenEvolve programs found (expected programs/*.json files, e.g. in "
                           f"checkpoints/checkpoint_N/programs/ or db/programs/, or an evolution trace); {NO_PROGRAMS}")
    if not any("code" in raw for raw in snapshots.raws.values()) and any(
            "solution" in raw for raw in snapshots.raws.values()):  # read as OpenEvolve's, it would keep no code
        raise NotARunError(src, f"{src}: its program files hold a 'solution', not OpenEvolve's 'code'")
    without_code = sum(1 for raw in snapshots.raws.values() if not isinstance(raw.get("code"), str))
    if without_code:  # a file written to another schema (a misnamed key) would lose its code without a word
        report.warn(f"{without_code} of {len(snapshots.raws)} program file(s) hold no 'code' (a string): they are "
                    "imported without code")
    raws = dict(snapshots.raws)
    phase = dict(snapshots.phase)
    for child, entry in traces.lines.items():
        if child not in raws:
            raws[child] = _from_trace(child, entry)
            phase[child] = traces.phase[child]
            report.recovered += 1
    _recover_root(raws, phase, traces, report)
    _recover_copies(raws, phase, traces, report)
    failures = read_failures(src)
    placed = add_failures(raws, phase, failures)
    check_metric(src, metric, metrics_found(raws.values()))
    programs = [_program(raw, metric, phase[node_id], traces.lines.get(node_id)) for node_id, raw in raws.items()]
    resume_records = {ph: read_resume_record(src, ph) for ph in {p.phase for p in programs} if ph is not None}
    for p in programs:
        if p.parent is None and p.phase is not None:
            p.started_from, p.start_code = resume_records[p.phase]
    _number_rounds(programs)
    _note_traces(report, traces, snapshots.raws)
    note_failures(report, failures, placed)
    _note_llm_calls(src, report, programs)
    records = job.build(programs)
    if report.dangling and not traces.files:  # what the user can change for the next run
        report.warn(f"{report.dangling} program(s) whose parent OpenEvolve pruned before any checkpoint: its "
                    "evolution trace records every program (evolution_trace: {enabled: true, include_code: true} "
                    "in the run's config.yaml), and this import reads it")
    why = "that file was written before the run ended, or by a tracked best that does not use this metric"
    if report.unplaced_roots:  # a folder that held a run started again from scratch: its best may be that run's
        why += (f", or it is the best of another run in this folder ({report.roots_found} initial programs; "
                f"{report.unplaced_roots} attached under the first)")
    note_run_best(src, report, metric, why=why)
    return job.write(records, source_path=src, run_name=src.resolve().name)


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
        f"in the snapshots (the snapshots win), {traces.unreadable()}"
    )
    report.notes.extend(traces.problems)


def _recover_root(raws: dict[str, Any], phase: dict[str, str | None], traces: Traces, report: ImportReport) -> None:
    """The initial program, when MAP-Elites dropped it from every snapshot (a better program took its
    cell): rebuilt from the ``parent_*`` fields of the earliest trace line whose parent is in no
    snapshot and never a child, as the trace-only import rebuilds it."""
    if not traces.lines or any(to_id(raw.get("parent_id")) is None for raw in raws.values()):
        return
    lines = sorted(traces.lines.items(), key=lambda item: to_finite(item[1].get("timestamp")) or math.inf)
    for child, entry in lines:
        parent = to_id(entry.get("parent_id"))
        if parent is not None and parent not in raws and entry.get("parent_code") is not None:
            raws[parent], phase[parent] = _parent_from_trace(parent, entry), traces.phase[child]
            report.recovered += 1
            report.notes.append(f"the initial program ({parent}) is in no snapshot: rebuilt from the evolution trace")
            return


def _recover_copies(raws: dict[str, Any], phase: dict[str, str | None], traces: Traces,
                    report: ImportReport) -> None:
    """The migrant copies MAP-Elites dropped from every snapshot whose children the trace holds (the
    trace names no copy, and OpenEvolve's sampling continues copies): each placed as a copy of the
    one program whose code and metrics its children's lines give for it, so that its children
    hang from that program instead of being orphans. A copy that matches no program, or several,
    stays unknown."""
    dangling = [(child, entry, copy) for child, entry in traces.lines.items()
                if (copy := to_id(entry.get("parent_id"))) is not None and copy not in raws
                and entry.get("parent_code") is not None]
    if not dangling:  # the usual case: every parent a trace names is a program of the record
        return
    originals: dict[tuple[str, str], list[str]] = {}
    for node_id, raw in raws.items():
        if raw.get("code") is not None and not is_migrant(node_id, as_dict(raw.get("metadata"))):
            originals.setdefault(_code_and_metrics(raw.get("code"), raw), []).append(node_id)
    placed = 0
    for child, entry, copy in dangling:
        if copy in raws:  # placed from an earlier line of one of its children
            continue
        same = originals.get(_code_and_metrics(entry["parent_code"], {"metrics": entry.get("parent_metrics")}), [])
        if len(same) == 1:
            raws[copy] = {"id": copy, "parent_id": same[0], "code": entry["parent_code"],
                          "metrics": entry.get("parent_metrics"), "iteration_found": raws[same[0]].get("iteration_found"),
                          "metadata": {"migrant": True, "island": entry.get("island_id")}}
            phase[copy] = traces.phase[child]
            placed += 1
    if placed:
        report.notes.append(f"{placed} migrant copy(ies) in no snapshot, named by their children's trace lines: each "
                            "placed as a copy of the one program with its code and metrics")


def _code_and_metrics(code: Any, raw: dict[str, Any]) -> tuple[str, str]:
    return str(code), json.dumps(_metrics_of(raw), sort_keys=True, default=str)


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
    """An OpenEvolve output folder (programs/*.json somewhere below, or only its evolution trace)
    or its evolution trace file."""
    if path.is_file():
        return is_trace_file(path)
    return path.is_dir() and (_holds_programs(path) or lone_trace(path) is not None)


def _holds_programs(path: Path) -> bool:
    return any(p.parent.name == "programs" for p in path.rglob("*.json"))


def lone_trace(src: Path) -> Path | None:
    """The evolution trace of an output folder that holds no programs/*.json: OpenEvolve writes
    its first checkpoint after ``checkpoint_interval`` iterations (10 by default), so a shorter or
    an interrupted run leaves its trace (and its best program) only."""
    if not src.is_dir() or _holds_programs(src):
        return None
    return next((src / name for name in TRACE_NAMES if is_trace_file(src / name)), None)


#: Why an OpenEvolve output folder can hold no program: what to set for the next run.
NO_PROGRAMS = ("OpenEvolve writes its programs at checkpoints, every checkpoint_interval iterations (100 by "
               "default), and in <output>/evolution_trace.jsonl only with evolution_trace: {enabled: true, "
               "include_code: true} in its config")

IMPORTER = Importer(label=LABEL, looks_for="an OpenEvolve output folder (programs/*.json)",
                    detect=is_openevolve_run, run=import_openevolve)
