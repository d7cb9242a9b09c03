"""Import a run of EvoTrace (the refined layout of EvoReplay) as a world.

EvoTrace (huggingface.co/datasets/ZIB-IOL/EvoTrace, CC-BY-4.0) holds 121 runs of OpenEvolve, EvoX,
GEPA and ShinkaEvolve in one schema, written by ``scripts/refine_outputs.py`` of
github.com/ZIB-IOL/EvoReplay (Apache-2.0) and read by its ``core/checkpoints.py``:

* ``meta.json``: ``backend`` (``openevolve_native``, ``gepa_native``, ``evox``, ``shinkaevolve``),
  ``source``, ``refined_at``, ``counts``, ``schema_version`` (1);
* ``programs.jsonl``: one row per unique program: ``id``, ``language``, ``metrics``,
  ``iteration_found``, ``parent_id``, ``other_context_ids``, ``parent_info``, ``context_info``,
  ``timestamp``, ``metadata``, ``generation``, ``status`` (``accepted`` | ``rejected`` | ``failed``),
  ``source``, ``solution_sha256``, ``prompts_sha256``, ``artifacts``, and a backend's own columns
  (ShinkaEvolve: ``correct``, ``island_idx``, ``text_feedback``, embeddings, ...);
* ``blobs/<sha[:2]>/<sha>.txt`` (a program's source) and ``.json`` (its prompts), named by the
  sha256 of their bytes.

How a row becomes a node:

* **parent**: ``parent_id`` (the root has none). A GEPA merge is recorded with its first parent in
  ``parent_id`` and ``parent_info`` ``["Merge Parent A", id]``, its second in ``context_info``
  ``[["Merge Parent B", id]]``: the node keeps ``parent_id`` as its parent and lists both in
  ``parents``. Other context programs (``other_context_ids``: inspirations) are not parents;
* **score**: EvoReplay's primary score (``primary_score``: the first of ``combined_score``,
  ``overall_score``, ``score`` the metrics hold), maximised, or the metric named with ``--metric``;
* **validity** (EvoReplay's ``is_valid_program``): a program is invalid (null score, with its error)
  when its metrics are empty, hold an ``error``, a ``judge_result`` of a hard failure
  (``COMPILE_ERROR``, ``RUNTIME_ERROR``, ``TIME_LIMIT_EXCEEDED``, ``MEMORY_LIMIT_EXCEEDED``,
  ``INTERNAL_ERROR``), or no finite value of the metric; also when its ``status`` is ``failed`` or
  ShinkaEvolve's ``correct`` is false. GEPA's ``rejected`` programs (evaluated, then refused by its
  acceptance test) keep their score and are tagged ``rejected``;
* **order**: ``timestamp``, then ``iteration_found``; ``round`` is ``iteration_found``;
* **copies**: OpenEvolve's migrant copies and ShinkaEvolve's island copies collapse onto the
  program they copy, as in the systems' own importers;
* **code** from the solution blob, **prompts** from the prompts blob, each verified against its
  name; ``artifacts`` become ``diagnostics``.

Every file is read as data (:mod:`.files`): a blob whose bytes do not hash to its name, a blob or
``programs.jsonl`` that is a symbolic link, a FIFO or a device, a line over the line limit, are
refused with an error naming the file. A blob that is absent leaves its program without code (a
warning counts them).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.limits import LimitError, loads_bounded

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
from .coerce import as_dict, to_bool, to_finite, to_float, to_id, to_int
from .files import Blobs, jsonl_objects, present, read_json
from .job import ImportJob
from .openevolve_programs import migrant_copy_of
from .shinkaevolve import _copy_of as shinka_copy_of

LABEL = "EvoTrace"
BACKENDS = ("openevolve_native", "gepa_native", "evox", "shinkaevolve")
SCHEMA_VERSION = 1
PRIMARY_METRICS = ("combined_score", "overall_score", "score")
HARD_FAILURES = ("COMPILE_ERROR", "RUNTIME_ERROR", "TIME_LIMIT_EXCEEDED", "MEMORY_LIMIT_EXCEEDED", "INTERNAL_ERROR")
# Columns kept elsewhere on the node, or too large to keep (ShinkaEvolve's embedding vectors).
_TAKEN = {"id", "parent_id", "metrics", "solution_sha256", "prompts_sha256", "artifacts", "timestamp",
          "iteration_found", "embedding", "embedding_pca_2d", "embedding_pca_3d"}


def _read_meta(src: Path) -> dict[str, Any]:
    meta = read_json(src / "meta.json")
    if not isinstance(meta, dict):
        raise RunImportError(f"{src / 'meta.json'}: not a JSON object")
    backend = meta.get("backend")
    if backend not in BACKENDS:
        raise RunImportError(f"{src / 'meta.json'}: backend {str(backend)[:80]!r} is none of EvoTrace's "
                             f"{', '.join(BACKENDS)}")
    version = to_int(meta.get("schema_version"))
    if version is not None and version > SCHEMA_VERSION:
        raise RunImportError(f"{src / 'meta.json'}: schema_version {version}; this importer reads version "
                             f"{SCHEMA_VERSION} of the refined layout")
    return meta


def _read_rows(src: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    line_of: dict[str, int] = {}
    for number, row in jsonl_objects(src / "programs.jsonl"):
        node_id = to_id(row.get("id"))
        if node_id is None:
            raise RunImportError(f"{src / 'programs.jsonl'} line {number}: a program row without an id")
        if node_id in line_of:
            raise RunImportError(f"{src / 'programs.jsonl'} line {number}: program {node_id[:80]} is already on "
                                 f"line {line_of[node_id]} (the refined layout holds each program once)")
        line_of[node_id] = number
        rows.append(row)
    return rows


def primary_metric(rows: list[dict[str, Any]]) -> str | None:
    """EvoReplay's primary score: the first of :data:`PRIMARY_METRICS` that any program holds."""
    for name in PRIMARY_METRICS:
        if any(to_finite(as_dict(row.get("metrics")).get(name)) is not None for row in rows):
            return name
    return None


def _available_metrics(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({str(k) for row in rows for k, v in as_dict(row.get("metrics")).items() if to_finite(v) is not None})


def _error_of(row: dict[str, Any], metrics: dict[str, Any], metric: str) -> str | None:
    reasons = []
    if not metrics:
        reasons.append("no metrics recorded")
    if metrics.get("error"):
        reasons.append(f"evaluator reported error={str(metrics['error'])[:2000]!r}")
    judge = metrics.get("judge_result")
    if isinstance(judge, str) and judge.upper() in HARD_FAILURES:
        reasons.append(f"judge_result {judge}")
    if row.get("status") == "failed":
        reasons.append("status 'failed'")
    if "correct" in row and row["correct"] is not None and not to_bool(row["correct"]):
        reasons.append("incorrect (correct=false)")
    if problem := metric_problem(metric, to_float(metrics.get(metric))):
        reasons.append(problem)
    if reasons and row.get("text_feedback"):
        reasons.append(f"feedback: {str(row['text_feedback'])[:2000]}")
    return "; ".join(reasons) if reasons else None


def _merge_parents(row: dict[str, Any], parent: str | None) -> list[str]:
    """Both parents of a GEPA merge (``Merge Parent A`` / ``Merge Parent B``), else []."""
    labelled = [row.get("parent_info"), *(row.get("context_info") or [])]
    found = [to_id(item[1]) for item in labelled
             if isinstance(item, (list, tuple)) and len(item) == 2 and "merge parent" in str(item[0]).lower()]
    parents = [p for p in dict.fromkeys([parent, *found]) if p is not None]
    return parents if len(parents) > 1 else []


def _copy_of(row: dict[str, Any], backend: str, parent: str | None) -> str | None:
    metadata = as_dict(row.get("metadata"))
    if backend == "shinkaevolve":
        return shinka_copy_of(metadata)
    return migrant_copy_of(str(row.get("id")), metadata, parent)


def _program(row: dict[str, Any], metric: str, backend: str, blobs: Blobs) -> Program:
    node_id = to_id(row.get("id"))
    assert node_id is not None
    parent = to_id(row.get("parent_id"))
    metrics = {str(k): v for k, v in as_dict(row.get("metrics")).items()}
    error = _error_of(row, metrics, metric)
    iteration = to_int(row.get("iteration_found"))
    extra: dict[str, Any] = {"metrics": metrics}
    code = _text_blob(blobs, row.get("solution_sha256"), "txt")
    prompts = _json_blob(blobs, row.get("prompts_sha256"))
    if prompts is not None:
        extra["prompts"] = prompts
    if row.get("artifacts"):
        extra["diagnostics"] = row["artifacts"]
    parents = _merge_parents(row, parent)
    if parents:
        extra["parents"] = parents
    tags = [tag for tag, on in (("rejected", row.get("status") == "rejected"), ("merge", bool(parents))) if on]
    if tags:
        extra["tags"] = tags
    extra["evotrace"] = {"backend": backend, **{k: v for k, v in row.items() if k not in _TAKEN}}
    return Program.attempt(node_id, parent, to_float(metrics.get(metric)), error, iteration=iteration,
                           timestamp=to_float(row.get("timestamp")), code=code,
                           copy_of=_copy_of(row, backend, parent), extra=extra)


def _text_blob(blobs: Blobs, sha: Any, ext: str) -> str | None:
    if not sha:
        return None
    data = blobs.read(sha, ext)
    return None if data is None else data.decode("utf-8", errors="replace")


def _json_blob(blobs: Blobs, sha: Any) -> Any:
    text = _text_blob(blobs, sha, "json")
    if text is None:
        return None
    try:
        return loads_bounded(text)
    except LimitError as exc:
        raise RunImportError(f"{blobs.label}/{sha[:2]}/{sha}.json: {exc.problem}") from None
    except ValueError:
        return text  # kept as the text it is


def import_evotrace(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    options: ImportOptions = DEFAULT_OPTIONS,
) -> ImportReport:
    """Read one refined EvoTrace run folder (``meta.json``, ``programs.jsonl``, ``blobs/``) into a world."""
    src = Path(src)
    if not is_evotrace_run(src):
        raise NotARunError(src, f"{src}: not a refined EvoTrace run (expected meta.json and programs.jsonl in "
                           "this folder; a folder of runs is imported run by run)")
    job = ImportJob.begin("evotrace", LABEL, src, out, options, metric=options.metric or "")
    report = job.report
    meta = _read_meta(src)
    backend = str(meta["backend"])
    rows = _read_rows(src)
    report.files_read = 2
    report.snapshots = len(rows)
    if not rows:
        raise RunImportError(f"{src / 'programs.jsonl'}: holds no program")
    # no primary score in any program: the error names them all
    chosen = options.metric or primary_metric(rows) or " or ".join(PRIMARY_METRICS)
    check_metric(src, chosen, _available_metrics(rows))
    report.metric = chosen
    blobs = Blobs(src / "blobs", str(src / "blobs"))
    programs = [_program(row, chosen, backend, blobs) for row in rows]
    report.files_read += len({p for p in (row.get(k) for row in rows for k in ("solution_sha256", "prompts_sha256")) if p})
    _note_rows(report, meta, rows, blobs)
    description = options.task_description or f"Imported from the EvoTrace run {src.resolve().name} ({backend})."
    return job.write(job.build(programs), source_path=src, run_name=src.resolve().name,
                     options=replace(options, task_description=description))


def _note_rows(report: ImportReport, meta: dict[str, Any], rows: list[dict[str, Any]], blobs: Blobs) -> None:
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[str(row.get("status"))] = statuses.get(str(row.get("status")), 0) + 1
    report.notes.append(f"backend {meta['backend']}: {len(rows)} program row(s) by status "
                        + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
    merges = sum(1 for row in rows if _merge_parents(row, to_id(row.get("parent_id"))))
    if merges:
        report.notes.append(f"{merges} merge(s) of two parents: the first is the node's parent, both are in 'parents'")
    if blobs.missing:
        report.warn(f"{len(blobs.missing)} blob(s) named by the records are absent (e.g. blobs/{blobs.missing[0]}): "
                    "their programs are imported without that code or those prompts")
    unnamed = sum(1 for row in rows if not row.get("solution_sha256"))
    if unnamed:  # a row written to another schema (a misnamed column) would lose its code without a word
        report.warn(f"{unnamed} of {len(rows)} program row(s) name no source blob ('solution_sha256'): they are "
                    "imported without code")


def is_evotrace_run(path: Path) -> bool:
    """A refined EvoTrace run folder: ``meta.json`` and ``programs.jsonl`` in the folder itself."""
    return path.is_dir() and present(path / "meta.json") and present(path / "programs.jsonl")


IMPORTER = Importer(label=LABEL, looks_for="a refined EvoTrace run (meta.json and programs.jsonl)",
                    detect=is_evotrace_run, run=import_evotrace)
