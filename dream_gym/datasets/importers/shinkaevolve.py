"""Import a ShinkaEvolve run (its ``evolution_db.sqlite``) as a world.

ShinkaEvolve keeps every program in the ``programs`` table of a SQLite database (schema of
``shinka/database/dbase.py``): ``id``, ``parent_id``, ``generation``, ``timestamp``,
``combined_score``, ``correct``, ``code``, ``text_feedback``, JSON text columns
``public_metrics``, ``private_metrics`` and ``metadata`` (which holds the API costs and timings),
and more. The database is opened read-only.

A program is invalid (null score) when ``correct`` is false or the metric is missing or not
finite; its error is the text feedback (or the metadata's error). ``round`` is the generation.
Costs: numeric metadata entries whose name mentions ``cost`` (``api_costs``, ``embed_cost``,
``novelty_cost``, ``meta_cost``) are summed into ``cost.usd`` with the breakdown kept;
``compute_time`` becomes ``duration_s``.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from dream_gym.datasets.importers import (
    ImportError_,
    ImportReport,
    Program,
    build_world_records,
    check_out_folder,
    parse_structure,
    to_bool,
    to_float,
    to_id,
    to_int,
    write_imported_world,
)
from dream_gym.world import DIRECTIONS

REQUIRED_COLUMNS = ("id", "parent_id", "generation", "timestamp", "combined_score")
MIGRANT_FLAGS = ("migrant", "_is_migrated_copy", "is_migrated_copy", "migrated_copy")


def read_rows(db_path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All rows of the ``programs`` table as dicts (read-only connection)."""
    path = Path(db_path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such database file (expected evolution_db.sqlite)")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ImportError_(f"{path}: cannot open as SQLite: {exc}") from None
    try:
        conn.row_factory = sqlite3.Row
        try:
            columns = [row[1] for row in conn.execute("PRAGMA table_info(programs)")]
        except sqlite3.DatabaseError as exc:
            raise ImportError_(f"{path}: not a SQLite database ({exc})") from None
        if not columns:
            raise ImportError_(f"{path}: has no 'programs' table (is it a ShinkaEvolve evolution_db.sqlite?)")
        missing = [c for c in REQUIRED_COLUMNS if c not in columns]
        if missing:
            raise ImportError_(f"{path}: table 'programs' lacks column(s) {', '.join(missing)}")
        return [dict(row) for row in conn.execute("SELECT * FROM programs")]
    finally:
        conn.close()


def _cost(metadata: dict[str, Any]) -> dict[str, Any] | None:
    breakdown = {}
    for key, value in metadata.items():
        number = to_float(value)
        if "cost" in str(key).lower() and number is not None and math.isfinite(number):
            breakdown[str(key)] = number
    if not breakdown:
        return None
    return {"usd": sum(breakdown.values()), "breakdown": breakdown}


def _program(row: dict[str, Any], metric: str) -> Program:
    node_id = to_id(row.get("id"))
    if node_id is None:
        raise ImportError_("a row of 'programs' has no id")
    metadata = parse_structure(row.get("metadata"))
    metadata = metadata if isinstance(metadata, dict) else {}
    public = parse_structure(row.get("public_metrics"))
    public = public if isinstance(public, dict) else {}
    private = parse_structure(row.get("private_metrics"))
    private = private if isinstance(private, dict) else {}
    if metric == "combined_score":
        value = to_float(row.get("combined_score"))
    else:
        value = to_float(public.get(metric, private.get(metric)))
    correct = to_bool(row["correct"]) if "correct" in row and row["correct"] is not None else True
    feedback = row.get("text_feedback")
    feedback = parse_structure(feedback)
    if isinstance(feedback, list):
        feedback = "\n".join(str(f) for f in feedback)
    reasons = []
    if not correct:
        reasons.append("incorrect (correct=0)")
    if value is None:
        reasons.append(f"metric {metric!r} missing")
    elif not math.isfinite(value):
        reasons.append(f"metric {metric!r} is {value}")
    error = None
    if reasons:
        detail = metadata.get("error") or feedback
        error = "; ".join(reasons) + (f": {str(detail)[:2000]}" if detail else "")
    generation = to_int(row.get("generation"))
    extra: dict[str, Any] = {"metrics": {"combined_score": to_float(row.get("combined_score")),
                                         "public": public, "private": private}}
    cost = _cost(metadata)
    if cost:
        extra["cost"] = cost
    duration = to_float(metadata.get("compute_time"))
    if duration is not None:
        extra["duration_s"] = duration
    if feedback:
        extra["diagnostics"] = feedback
    extra["shinkaevolve"] = {
        "generation": generation,
        "timestamp": to_float(row.get("timestamp")),
        "island_idx": to_int(row.get("island_idx")),
        "correct": correct,
        "language": row.get("language"),
        "code_diff": row.get("code_diff"),
        "parent_id": to_id(row.get("parent_id")),
        "metadata": metadata,
    }
    return Program(
        id=node_id,
        parent=to_id(row.get("parent_id")),
        score=None if error else value,
        error=error,
        timestamp=to_float(row.get("timestamp")),
        order=None if generation is None else float(generation),
        round=generation,
        code=row.get("code") if isinstance(row.get("code"), str) else None,
        migrant=any(to_bool(metadata.get(flag, False)) for flag in MIGRANT_FLAGS),
        extra=extra,
    )


def import_shinkaevolve(
    db_path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    metric: str = "combined_score",
    direction: str = "maximize",
    world_id: str | None = None,
    task_name: str | None = None,
    task_description: str = "",
    workers: int = 1,
    orphans: str = "drop",
) -> ImportReport:
    """Read a ShinkaEvolve ``evolution_db.sqlite`` (or a results folder holding one) into a world."""
    started = time.perf_counter()
    db = Path(db_path)
    if db.is_dir():
        candidates = sorted(db.rglob("evolution_db.sqlite"))
        if not candidates:
            raise FileNotFoundError(f"{db}: no evolution_db.sqlite below this folder")
        db = candidates[0]
    if direction not in DIRECTIONS:
        raise ImportError_(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    out_path = check_out_folder(out)
    report = ImportReport("shinkaevolve", str(db), out=str(out_path), metric=metric)
    rows = read_rows(db)
    report.files_read = 1
    report.snapshots = len(rows)
    programs = [_program(row, metric) for row in rows]
    if programs and all(p.score is None and "missing" in (p.error or "") for p in programs):
        raise ImportError_(f"{db}: no program has metric {metric!r} (choose one with --metric)")
    records = build_world_records(programs, report, orphans=orphans, direction=direction)
    write_imported_world(
        out_path, records, report, system="shinkaevolve", source_path=db, run_name=db.resolve().parent.name,
        world_id=world_id, task_name=task_name, task_description=task_description, direction=direction,
        workers=workers, orphans=orphans,
    )
    report.seconds = time.perf_counter() - started
    return report
