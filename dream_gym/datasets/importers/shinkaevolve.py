"""Import a ShinkaEvolve results folder (its ``evolution_db.sqlite`` and ``gen_*`` folders) as a world.

What ShinkaEvolve writes (read in its source, github.com/SakanaAI/ShinkaEvolve):

* ``shinka/database/dbase.py``: every program is a row of the ``programs`` table (``repos`` in
  newer versions; the database is ``evolution_db.sqlite``, ``programs.sqlite`` in newer ones):
  ``id``, ``parent_id``, ``generation``, ``timestamp``, ``combined_score``, ``correct``,
  ``code``, ``code_diff``, ``text_feedback``, JSON text columns ``public_metrics``,
  ``private_metrics``, ``metadata`` and ``migration_history``, ``island_idx``, ...;
* ``shinka/core/runner.py``: generation g is evaluated in ``gen_g/`` (``main.<ext>``; the
  evaluator writes ``gen_g/results/correct.json`` and ``metrics.json``). The row keeps
  ``correct`` but not the error of ``correct.json``, which is read from there. The run's cost is
  ``api_costs + embed_cost + novelty_cost + meta_cost`` of each program's metadata
  (``_get_total_api_costs``); ``compute_time`` is the evaluation's wall time;
* ``shinka/database/islands.py``: the initial program is copied onto every island
  (``CopyInitialProgramIslandStrategy``: metadata ``_is_island_copy`` and
  ``_original_program_id``, ``_original_repo_id`` in newer versions) and a spawned island copies
  programs (``_spawned_from_repo_id``): such copies collapse onto their original. Migration
  *moves* a program to another island (``island_idx`` and ``migration_history`` change, no copy),
  so migrated programs stay as they are.

A program is invalid (null score) when ``correct`` is false or the metric is missing or not
finite; its error is ``correct.json``'s (else ``metrics.json``'s, the text feedback, the
evaluator's stderr). ``round`` is the generation. The database is opened read-only.
"""

from __future__ import annotations

import os
import sqlite3
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
from .files import optional_json_object
from .job import ImportJob
from .shinkaevolve_layout import (
    MAX_VALUE_BYTES,
    SHINKA_TABLES,
    damaged_sqlite,
    reading,
    shinka_databases,
    sqlite_tables,
)

LABEL = "ShinkaEvolve"
REQUIRED_COLUMNS = ("id", "parent_id", "generation", "timestamp", "combined_score", "correct")
DATABASE_NAMES = ("evolution_db.sqlite", "programs.sqlite")
COST_KEYS = ("api_costs", "embed_cost", "novelty_cost", "meta_cost")
COPY_FLAGS = {"_is_island_copy": ("_original_program_id", "_original_repo_id"),
              "_spawned_island": ("_spawned_from_repo_id", "_spawned_from_program_id")}
_LOG_TAIL = 4000


def locate_database(path: Path) -> Path:
    """The ShinkaEvolve database of a results folder (or the file itself)."""
    if path.is_file():
        return path
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such file or folder (expected a ShinkaEvolve results folder "
                                "or its evolution_db.sqlite)")
    found = shinka_databases(path) or [path / name for name in DATABASE_NAMES if (path / name).is_file()]
    if not found:
        raise NotARunError(path, f"{path}: no ShinkaEvolve database below this folder (expected "
                           "evolution_db.sqlite or programs.sqlite with a 'programs' table)")
    return found[0]


def read_rows(db_path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All rows of the program table as dicts (read-only connection)."""
    path = Path(db_path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such database file (expected evolution_db.sqlite)")
    tables = sqlite_tables(path)
    if tables is None:
        damage = damaged_sqlite(path)
        raise RunImportError(f"{path}: a damaged SQLite database ({damage}): its run cannot be read; restore the "
                             "file from a copy" if damage else f"{path}: not a SQLite database")
    table = next((t for t in SHINKA_TABLES if t in tables), None)
    if table is None:
        raise RunImportError(
            f"{path}: has no 'programs' table (tables found: {', '.join(tables) or 'none'}); is it a "
            "ShinkaEvolve evolution_db.sqlite?"
        )
    with reading(path) as conn:
        conn.row_factory = sqlite3.Row
        conn.text_factory = _text  # bytes a column holds that are not UTF-8 stopped the whole import
        schema = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
        if schema is None or str(schema[0] or "").lstrip().upper().startswith("CREATE VIRTUAL"):
            raise RunImportError(f"{path}: table {table!r} is a virtual table, which ShinkaEvolve does not write")
        computed = [row[1] for row in conn.execute(f"PRAGMA table_xinfo({table})") if row[6] not in (0, 3)]
        if computed:  # hidden, or generated on every read: a few bytes of schema can make gigabytes
            raise RunImportError(f"{path}: table {table!r} has column(s) computed when read "
                                 f"({', '.join(map(str, computed))}), which ShinkaEvolve does not write")
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        missing = [c for c in REQUIRED_COLUMNS if c not in columns]
        if missing:
            raise RunImportError(
                f"{path}: table {table!r} lacks column(s) {', '.join(missing)} of ShinkaEvolve's schema "
                f"(it has: {', '.join(columns)})"
            )
        try:
            return [dict(row) for row in conn.execute(f"SELECT * FROM {table}")]
        except sqlite3.DataError as exc:  # a value past MAX_VALUE_BYTES
            raise RunImportError(f"{path}: a value of table {table!r} is longer than "
                                 f"{MAX_VALUE_BYTES >> 20} MB ({exc})") from None


#: What marks bytes of the database's text that are not UTF-8 (each sequence, in the program's text).
UNDECODABLE = "\ufffd"


def _text(value: bytes) -> str:
    """A TEXT value: UTF-8, else decoded with each undecodable sequence marked (:data:`UNDECODABLE`)."""
    return value.decode("utf-8", "replace")


def _metric_value(row: dict[str, Any], metric: str, public: dict[str, Any], private: dict[str, Any]) -> float | None:
    if metric == "combined_score":
        return to_float(row.get("combined_score"))
    return to_float(public.get(metric, private.get(metric)))


def _available_metrics(rows: list[dict[str, Any]]) -> list[str]:
    names = {"combined_score"}
    for row in rows:
        for column in ("public_metrics", "private_metrics"):
            names.update(k for k, v in as_dict(row.get(column)).items() if to_finite(v) is not None)
    return sorted(names)


def _cost(metadata: dict[str, Any]) -> dict[str, Any] | None:
    breakdown = {key: number for key in COST_KEYS if (number := to_finite(metadata.get(key))) is not None}
    llm = as_dict(metadata.get("llm_result"))
    tokens_in, tokens_out = to_int(llm.get("input_tokens")), to_int(llm.get("output_tokens"))
    if not breakdown and tokens_in is None:
        return None
    cost: dict[str, Any] = {"usd": sum(breakdown.values()), "breakdown": breakdown}
    if tokens_in is not None:
        cost["tokens_in"] = tokens_in
    if tokens_out is not None:
        cost["tokens_out"] = tokens_out
    return cost


def _copy_of(metadata: dict[str, Any]) -> str | None:
    for flag, keys in COPY_FLAGS.items():
        if to_bool(metadata.get(flag, False)):
            for key in keys:
                if (original := to_id(metadata.get(key))) is not None:
                    return original
    return None


def _tail(text: Any) -> str:
    return str(text).strip()[-_LOG_TAIL:] if text else ""


def _program(row: dict[str, Any], metric: str, results: Path) -> Program:
    node_id = to_id(row.get("id"))
    if node_id is None:
        raise RunImportError("a row of the program table has no id")
    metadata = as_dict(row.get("metadata"))
    public = as_dict(row.get("public_metrics"))
    private = as_dict(row.get("private_metrics"))
    value = _metric_value(row, metric, public, private)
    correct = to_bool(row["correct"]) if row.get("correct") is not None else False
    generation = to_int(row.get("generation"))
    gen_dir = results / f"gen_{generation}"
    correct_json = optional_json_object(gen_dir / "results" / "correct.json") or {}
    metrics_json = optional_json_object(gen_dir / "results" / "metrics.json") or {}
    feedback = parse_structure(row.get("text_feedback"))
    if isinstance(feedback, list):
        feedback = "\n".join(str(f) for f in feedback)
    reasons = []
    if not correct:
        reasons.append("incorrect (correct=0)")
    if problem := metric_problem(metric, value):
        reasons.append(problem)
    error = None
    if reasons:
        detail = (correct_json.get("error") or metrics_json.get("error") or feedback
                  or _tail(metadata.get("stderr_log")) or metadata.get("error"))
        error = "; ".join(reasons) + (f": {str(detail)[:2000]}" if detail else "")
    diagnostics = {k: v for k, v in {
        "text_feedback": feedback or None,
        "validation_errors": metrics_json.get("all_validation_errors") or None,
        "stdout": _tail(metadata.get("stdout_log")) or None,
        "stderr": _tail(metadata.get("stderr_log")) or None,
    }.items() if v}
    llm = as_dict(metadata.get("llm_result"))
    extra: dict[str, Any] = {"metrics": {"combined_score": to_float(row.get("combined_score")),
                                         "public": public, "private": private}}
    cost = _cost(metadata)
    if cost:
        extra["cost"] = cost
    duration = to_finite(metadata.get("compute_time"))
    if duration is not None:
        extra["duration_s"] = duration
    if diagnostics:
        extra["diagnostics"] = diagnostics
    if llm.get("msg") or llm.get("content"):
        extra["prompts"] = {"system": llm.get("system_msg"), "user": llm.get("msg"), "response": llm.get("content")}
    kept_metadata = {k: v for k, v in metadata.items() if k not in ("llm_result", "stdout_log", "stderr_log")}
    extra["shinkaevolve"] = {
        "generation": generation,
        "timestamp": to_float(row.get("timestamp")),
        "island_idx": to_int(row.get("island_idx")),
        "correct": correct,
        "language": row.get("language"),
        "code_diff": row.get("code_diff"),
        "parent_id": to_id(row.get("parent_id")),
        "migration_history": parse_structure(row.get("migration_history")) or [],
        "gen_folder": gen_dir.name if gen_dir.is_dir() else None,
        "metadata": kept_metadata,
    }
    return Program.attempt(node_id, to_id(row.get("parent_id")), value, error, iteration=generation,
                           timestamp=to_float(row.get("timestamp")), code=as_text(row.get("code")),
                           copy_of=_copy_of(metadata), extra=extra)


def import_shinkaevolve(
    db_path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    options: ImportOptions = DEFAULT_OPTIONS,
) -> ImportReport:
    """Read a ShinkaEvolve results folder (or its ``evolution_db.sqlite``) into a world."""
    db = locate_database(Path(db_path))
    metric = options.metric_or("combined_score")
    job = ImportJob.begin("shinkaevolve", LABEL, db, out, options, metric=metric)
    report = job.report
    rows = read_rows(db)
    report.files_read = 1 + sum(1 for _ in db.parent.glob("gen_*/results/*.json"))
    report.snapshots = len(rows)
    if not rows:
        raise RunImportError(f"{db}: the program table is empty (the run recorded no programs)")
    check_metric(db, metric, _available_metrics(rows))
    programs = [_program(row, metric, db.parent) for row in rows]
    undecodable = sum(1 for row in rows if UNDECODABLE in str(row.get("code") or ""))
    if undecodable:  # imported all the same: the code is shown, not run, by replay
        report.warn(f"{undecodable} program(s) hold code that is not UTF-8 in {db.name}: imported with each "
                    f"undecodable sequence shown as {UNDECODABLE!r}")
    migrated = sum(1 for p in programs if p.extra["shinkaevolve"]["migration_history"])
    if migrated:
        report.notes.append(f"{migrated} program(s) migrated between islands (moved, not copied: kept as they are)")
    return job.write(job.build(programs), source_path=db, run_name=db.resolve().parent.name)


def is_shinkaevolve_run(path: Path) -> bool:
    """A ShinkaEvolve results folder (a SQLite database with a program table below it) or the
    database file itself; also one holding a file by ShinkaEvolve's database name that is damaged,
    empty or no database at all, so that its import says what is wrong with that file instead of
    the run going unrecognised (in a folder of runs: unseen)."""
    if path.is_file():
        tables = sqlite_tables(path)
        return bool(set(tables) & set(SHINKA_TABLES)) if tables is not None else damaged_sqlite(path) is not None
    return path.is_dir() and (bool(shinka_databases(path)) or any((path / name).is_file() for name in DATABASE_NAMES))


IMPORTER = Importer(label=LABEL, looks_for="a ShinkaEvolve results folder (a SQLite database with a 'programs' table)",
                    detect=is_shinkaevolve_run, run=import_shinkaevolve)
