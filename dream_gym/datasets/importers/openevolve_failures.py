"""OpenEvolve's log of the iterations that made no program (``evolution_trace_failures.jsonl``,
written when its evolution trace's ``include_failures`` is on): an LLM answer without a usable
change, an LLM call that failed, a worker that timed out or crashed. Each such iteration that
names its parent and got an answer is a failed node (:func:`.openevolve_programs.from_failure`),
for both OpenEvolve importers, so replay charges the attempt as the run paid it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.printable import printable

from .base import ImportReport
from .coerce import as_dict, to_id, to_int
from .openevolve_layout import log_entries, log_lines, phase_of
from .openevolve_programs import NO_PROGRAM, from_failure

#: OpenEvolve's log of the iterations that made no program, beside its evolution trace
FAILURES_NAME = "evolution_trace_failures.jsonl"

Failures = list[tuple[str | None, dict[str, Any]]]  # (phase, the log's line) per iteration


def read_failures(src: Path) -> Failures:
    """Each iteration OpenEvolve logged as making no program, in every failures file below ``src``,
    with the phase that wrote it (an unreadable line counts, as an empty entry)."""
    return [(phase_of(src, path, skip=1), entry if isinstance(entry, dict) else {})
            for path, entry in log_entries(src, FAILURES_NAME)]


def failures_beside(trace: Path) -> Failures:
    """The failures log OpenEvolve writes beside the evolution-trace file ``trace``
    (``<stem>_failures.jsonl``, or ``.jsonl.gz`` beside a compressed trace)."""
    stem = trace.name.removesuffix(".gz").removesuffix(".jsonl")
    paths = [p for p in (trace.with_name(f"{stem}_failures.jsonl"), trace.with_name(f"{stem}_failures.jsonl.gz"))
             if p.is_file()]
    return [(None, entry if isinstance(entry, dict) else {}) for _, entry in log_lines(paths)]


def add_failures(raws: dict[str, Any], phase: dict[str, str | None], failures: Failures) -> int:
    """Add a failed node (:func:`from_failure`) for each logged iteration that made no program and
    names its parent; the number of logged iterations that stand in the record as nodes. A line for
    an iteration of which the phase holds a program is an attempt a killed run made before its
    resume ran the iteration again: no node."""
    with_program = {(phase[i], to_int(raw.get("iteration_found"))) for i, raw in raws.items()
                    if NO_PROGRAM not in as_dict(raw.get("metadata"))}
    placed = 0
    for ph, entry in failures:
        parent = raws.get(to_id(entry.get("parent_id")) or "")
        raw = None if parent is None else from_failure(entry, parent, ph)
        if raw is None:
            continue
        if raw["id"] not in raws:  # else a policy continued it: OpenEvolve's database holds it
            if (ph, raw["iteration_found"]) in with_program:
                continue
            raws[raw["id"]], phase[raw["id"]] = raw, ph
        placed += 1
    return placed


def note_failures(report: ImportReport, failures: Failures, placed: int) -> None:
    """Count OpenEvolve's log of the iterations that made no program (``include_failures`` of its
    evolution trace), and the ones no node stands for."""
    if not failures:
        return
    errors = [str(entry.get("error") or "") for _, entry in failures]
    common, count = Counter(errors).most_common(1)[0]
    unplaced = len(failures) - placed
    report.notes.append(
        f"{FAILURES_NAME}: {len(failures)} iteration(s) made no program; {placed} stand as failed nodes under "
        "the program each continued (its code unchanged), so replay charges them"
        + (f"; {unplaced} name no parent the record holds, got no answer from the LLM, or were run again (no node: "
           "replay charges none of them)" if unplaced else "")
        + f"; the most common error ({count}): {printable(common, 120) or '(none given, or an unreadable line)'}")
