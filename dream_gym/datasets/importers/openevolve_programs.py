"""One OpenEvolve program record (a ``programs/*.json`` file, or a line of the evolution trace) as a
:class:`~.base.Program`: its metric and validity, errors, costs, island and iteration. Shared by
the checkpoint importer (:mod:`.openevolve`), the trace-only importer (:mod:`.openevolve_trace`) and
the OpenEvolve bridge, so that every path reads a program the same way."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .base import Program, metric_problem
from .coerce import as_dict, as_text, parse_structure, to_bool, to_finite, to_float, to_id, to_int

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


def metrics_found(raws: Iterable[dict[str, Any]]) -> list[str]:
    """The metric names the program records hold, sorted."""
    return sorted({name for raw in raws for name in _metrics_of(raw)})


def is_migrant(node_id: str, metadata: dict[str, Any]) -> bool:
    """Whether a program is an OpenEvolve migrant copy (flagged in its metadata, or named ``..._migrant_...``)."""
    return bool(to_bool(metadata.get("migrant", False))) or "_migrant_" in node_id


def migrant_copy_of(node_id: str, metadata: dict[str, Any], parent: str | None) -> str | None:
    """The program an OpenEvolve migrant copies: its parent; None for a program that is not a migrant."""
    return parent if is_migrant(node_id, metadata) else None


def _reports_error(metrics: dict[str, Any], value: float | None) -> bool:
    """Whether the metrics hold an ``error`` that marks the evaluation failed.

    OpenEvolve's own failures are ``{"error": 0.0}`` (sometimes with ``timeout`` or
    ``stage1_passed``) with no score, and evaluators return an error message; both fail. Some
    evaluators instead report ``error`` as a number beside every score, 0 when nothing failed and
    1 when something did: a numeric 0 beside a finite score is that flag saying "no error".
    """
    if "error" not in metrics:
        return False
    flag = metrics["error"]
    no_error_flag = isinstance(flag, (int, float)) and flag == 0
    return not (no_error_flag and value is not None and math.isfinite(value))


def _error_of(metrics: dict[str, Any], metric: str, diagnostics: Any, stderr: Any) -> str | None:
    """The reason a program has no valid score, or None when it has one."""
    reasons = []
    value = to_float(metrics.get(metric))
    if _reports_error(metrics, value):
        reasons.append(f"evaluator reported error={metrics['error']!r}")
    for key in VALIDITY_KEYS:
        if key in metrics and to_float(metrics[key]) == 0.0:
            reasons.append(f"{key}=0")
    if problem := metric_problem(metric, value):
        reasons.append(problem)
    if not reasons:
        return None
    if isinstance(diagnostics, dict):
        for key, text in diagnostics.items():
            if any(word in str(key).lower() for word in ("stderr", "traceback", "error")) and text:
                if str(text) != str(metrics.get("error")):  # an evaluator may return its error twice
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
    if NO_PROGRAM in metadata:  # nothing was evaluated: OpenEvolve's reason is the error
        error = f"no program: {as_text(metadata[NO_PROGRAM]) or 'OpenEvolve gave no reason'}"
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
    if raw.get("recovered_from"):  # rebuilt from the evolution trace (see _from_trace)
        extra["recovered_from"] = raw["recovered_from"]
    return Program.attempt(node_id, parent, to_float(metrics.get(metric)), error,
                           iteration=iteration, timestamp=to_float(raw.get("timestamp")), code=as_text(raw.get("code")),
                           copy_of=migrant_copy_of(node_id, metadata, parent), phase=phase, extra=extra)


def _from_trace(child: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A program record rebuilt from its evolution-trace line (it was pruned from every snapshot)."""
    return {
        "id": child, "parent_id": entry.get("parent_id"), "code": entry.get("child_code"),
        "metrics": entry.get("child_metrics"), "timestamp": entry.get("timestamp"),
        "iteration_found": entry.get("iteration"), "generation": entry.get("generation"),
        "metadata": {"island": entry.get("island_id"), "changes": entry.get("child_changes_description")},
        "prompts": entry.get("prompt"), "recovered_from": "evolution_trace",
    }


def _parent_from_trace(parent: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A parent that is never a child, rebuilt from the first line that names it."""
    stamp = to_float(entry.get("timestamp"))
    return {
        "id": parent, "parent_id": None, "code": entry.get("parent_code"), "metrics": entry.get("parent_metrics"),
        "timestamp": None if stamp is None else stamp - 1e-6, "iteration_found": 0,
        "changes_description": entry.get("parent_changes_description"), "recovered_from": "evolution_trace parent",
    }


#: the metadata key of an iteration that made no program (:func:`from_failure`): OpenEvolve's error
NO_PROGRAM = "no_program"


def no_program_id(iteration: int, phase: str | None = None) -> str:
    """The node id of iteration ``iteration`` of a phase that made no program (one per iteration)."""
    return f"no-program-{iteration}" if phase is None else f"no-program-{phase}-{iteration}"


#: how OpenEvolve's worker begins the error of an iteration whose LLM call raised: no answer came
LLM_FAILED = "LLM generation failed"


def answered_by_no_llm(entry: dict[str, Any]) -> bool:
    """Whether a line of OpenEvolve's failures log is an iteration whose LLM call failed (the server
    down, a refused key): no answer was made, so it is no attempt of the search, as in ``grow``."""
    return (as_text(entry.get("error")) or "").startswith(LLM_FAILED)


def from_failure(entry: dict[str, Any], parent: dict[str, Any], phase: str | None = None) -> dict[str, Any] | None:
    """The program record of an iteration OpenEvolve logged as making no program (a line of its
    failures log: an LLM answer without a usable change, ...), continuing ``parent`` (its record):
    the parent's code, unchanged, no metrics, OpenEvolve's error under ``metadata.no_program``.
    So replay charges the attempt, and a policy that continues it continues the parent's code.
    None for a line that names no iteration or no parent (a timed-out or crashed worker's), or
    whose LLM call failed (:func:`answered_by_no_llm`)."""
    iteration, parent_id = to_int(entry.get("iteration")), to_id(entry.get("parent_id"))
    if iteration is None or parent_id is None or answered_by_no_llm(entry):
        return None
    return {
        "id": no_program_id(iteration, phase), "parent_id": parent_id, "code": as_text(parent.get("code")) or "",
        "language": parent.get("language") or "python", "generation": (to_int(parent.get("generation")) or 0) + 1,
        "timestamp": to_float(entry.get("timestamp")), "iteration_found": iteration, "metrics": {},
        "metadata": {"island": to_int(entry.get("island_id")), NO_PROGRAM: as_text(entry.get("error")) or "",
                     **({"token_usage": entry["token_usage"]} if isinstance(entry.get("token_usage"), dict) else {})},
    }
