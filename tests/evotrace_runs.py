"""Test helper: write refined EvoTrace runs the way EvoReplay's refiner writes them.

Nothing here is copied from EvoTrace; the layout follows ``scripts/refine_outputs.py`` of
github.com/ZIB-IOL/EvoReplay (``Refiner.emit_program``, ``write_blob``, ``refine``):

* a row per program holds the passthrough fields (``id``, ``language``, ``metrics``,
  ``iteration_found``, ``parent_id``, ``other_context_ids``, ``parent_info``, ``context_info``,
  ``timestamp``, ``metadata``, ``generation``), then ``status``, ``source``, ``solution_sha256``,
  ``prompts_sha256``, ``artifacts`` and a backend's extra columns, written as
  ``json.dumps(row, default=str, ensure_ascii=False)`` one per line;
* a program's solution goes to ``blobs/<sha[:2]>/<sha>.txt`` (its UTF-8 bytes), its prompts to
  ``.json`` (``json.dumps(prompts, ensure_ascii=False, sort_keys=True)``), named by their sha256;
* ``meta.json``: ``backend``, ``source``, ``refined_at`` (None), ``counts``, ``schema_version`` 1;
  ``iterations.jsonl`` and ``iter_scalars.jsonl`` beside them.

The runs: a GEPA-native run with accepted, rejected (``gepa.rejection_history``), failed and
merged programs (a merge's second parent in ``context_info`` as ``["Merge Parent B", id]``, as the
GEPA-native controller of SkyDiscover records it), an OpenEvolve-native run with a migrant copy, and
a ShinkaEvolve run with an island copy, an incorrect program and embeddings.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

PASSTHROUGH = ("id", "language", "metrics", "iteration_found", "parent_id", "other_context_ids", "parent_info",
               "context_info", "timestamp", "metadata", "generation")


def write_blob(blobs: Path, content: bytes, ext: str) -> str:
    sha = hashlib.sha256(content).hexdigest()
    path = blobs / sha[:2] / f"{sha}.{ext}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return sha


def write_refined_run(folder: Path, backend: str, programs: list[dict[str, Any]]) -> Path:
    """Write ``programs`` (records as the refiner receives them, plus ``status``, ``source`` and
    ``extras``) as a refined run folder."""
    blobs = folder / "blobs"
    blobs.mkdir(parents=True)
    counts = {"accepted_unique": 0, "rejected_unique": 0, "failed_unique": 0, "blobs_solution": 0, "blobs_prompts": 0}
    with (folder / "programs.jsonl").open("w", encoding="utf-8") as out:
        for rec in programs:
            row: dict[str, Any] = {k: rec.get(k) for k in PASSTHROUGH}
            row["status"] = rec.get("status", "accepted")
            row["source"] = rec.get("source", "checkpoint.programs")
            solution = rec.get("solution")
            row["solution_sha256"] = write_blob(blobs, solution.encode("utf-8"), "txt") if solution else None
            prompts = rec.get("prompts")
            row["prompts_sha256"] = (write_blob(blobs, json.dumps(prompts, ensure_ascii=False, sort_keys=True)
                                                .encode("utf-8"), "json") if prompts else None)
            row["artifacts"] = rec.get("artifacts") or None
            row.update(rec.get("extras") or {})
            out.write(json.dumps(row, default=str, ensure_ascii=False) + "\n")
            counts[f"{row['status']}_unique"] += 1
            counts["blobs_solution"] += bool(solution)
            counts["blobs_prompts"] += bool(prompts)
    (folder / "iterations.jsonl").write_text("")
    (folder / "iter_scalars.jsonl").write_text(json.dumps({"iteration": 10, "key": "best_program_id", "value": None}) + "\n")
    meta = {"backend": backend, "source": f"/runs/{folder.name}", "refined_at": None, "counts": counts,
            "schema_version": 1}
    (folder / "meta.json").write_text(json.dumps(meta, indent=2))
    return folder


def _program(pid: str, parent: str | None, score: float | None, iteration: int, **fields: Any) -> dict[str, Any]:
    metrics = fields.pop("metrics", None)
    if metrics is None:
        metrics = {"combined_score": score, "validity": 1.0}
    return {"id": pid, "language": "python", "metrics": metrics, "iteration_found": iteration, "parent_id": parent,
            "other_context_ids": [], "parent_info": None, "context_info": None, "timestamp": 1000.0 + iteration,
            "metadata": {}, "generation": iteration, "solution": f"def solve():\n    return {iteration}  # {pid}\n",
            **fields}


def gepa_native_programs() -> list[dict[str, Any]]:
    return [
        _program("init", None, 0.40, 0, prompts=None),
        _program("a1", "init", 0.55, 1, prompts={"system": "You improve programs.", "user": "Improve ü"}),
        _program("a2", "init", 0.50, 2),
        _program("fail3", "a1", None, 3, metrics={"error": "SyntaxError: invalid syntax", "combined_score": 0.0}),
        _program("m4", "a1", 0.61, 4, other_context_ids=["a2"], parent_info=["Merge Parent A", "a1"],
                 context_info=[["Merge Parent B", "a2"]], metadata={"changes": "LLM-mediated merge"}),
        _program("a5", "m4", 0.70, 5, artifacts={"stderr": "warning: slow"}),
        _program("r6", "a5", 0.66, 6, status="rejected", source="gepa.rejection_history"),
        _program("r7", "m4", 0.58, 7, status="rejected", source="gepa.rejection_history",
                 solution="def solve():\n    return 5  # a5 again\n"),
        _program("f8", "a5", None, 8, status="failed", metrics={}),
    ]


def openevolve_native_programs() -> list[dict[str, Any]]:
    return [
        _program("root", None, None, 0, metrics={"overall_score": 0.2}),
        _program("p1", "root", None, 1, metrics={"overall_score": 0.3}, metadata={"island": 0}),
        _program("p1_migrant_1", "p1", None, 0, metrics={"overall_score": 0.3},
                 metadata={"island": 1, "migrant": True}),
        _program("p2", "p1_migrant_1", None, 2, metrics={"overall_score": 0.45}),
        _program("p3", "p2", None, 3, metrics={"overall_score": 0.1, "judge_result": "RUNTIME_ERROR"}),
    ]


def shinkaevolve_programs() -> list[dict[str, Any]]:
    def extras(correct: bool, island: int, **more: Any) -> dict[str, Any]:
        return {"complexity": 3.0, "correct": correct, "children_count": 0, "island_idx": island,
                "system_prompt_id": None, "text_feedback": more.pop("feedback", None),
                "embedding": [0.1] * 64, "embedding_pca_2d": [0.1, 0.2], "embedding_pca_3d": [0.1, 0.2, 0.3],
                "embedding_cluster_id": 0, "migration_history": [], "archive_inspiration_ids": [],
                "top_k_inspiration_ids": [], "public_metrics": {}, "private_metrics": {}, "code_diff_sha256": None,
                **more}

    return [
        _program("g0", None, 0.30, 0, extras=extras(True, 0)),
        _program("g0c", None, 0.30, 0, metadata={"_is_island_copy": True, "_original_program_id": "g0"},
                 extras=extras(True, 1)),
        _program("g1", "g0c", 0.35, 1, extras=extras(True, 1)),
        _program("g2", "g1", 0.0, 2, extras=extras(False, 1, feedback="AssertionError: overlap")),
        _program("g3", "g0", 0.42, 3, extras=extras(True, 0)),
    ]


def write_corpus(root: Path) -> dict[str, Path]:
    """An EvoTrace-like corpus: ``<root>/<backend>/<run>/`` for three backends, plus ``tools/``."""
    runs = {
        "gepa_native/circle-gepa-s0": ("gepa_native", gepa_native_programs()),
        "openevolve_native/circle-oe-s0": ("openevolve_native", openevolve_native_programs()),
        "shinkaevolve/circle-shinka-s0": ("shinkaevolve", shinkaevolve_programs()),
    }
    written = {}
    for relative, (backend, programs) in runs.items():
        written[relative] = write_refined_run(root / relative, backend, programs)
    (root / "tools").mkdir()
    (root / "tools" / "refine_outputs.py").write_text("# the refiner\n")
    (root / "README.md").write_text("# a corpus\n")
    return written
