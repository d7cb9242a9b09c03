"""Import an OpenEvolve output folder as a world.

OpenEvolve saves its program database as ``programs/<id>.json`` files, in every
``checkpoints/checkpoint_N/`` and in database folders (``db/``); a resumed run nests its output
inside a checkpoint, so these folders can sit at any depth. Each checkpoint is a snapshot of the
database, which prunes programs over time: the importer reads all of them and takes the union,
each program once (later snapshots fill in fields that earlier ones lacked).

A program is invalid (null score, with its error) when its metrics hold an ``error`` key, a
validity flag (``validity``/``valid``/``valid_solution``/``is_valid``) of 0, or no finite value
for the chosen metric. Code, all metrics, prompts, the change description, island, generation,
iteration and timestamp are kept on each node; evaluator artifacts go to ``diagnostics``.
"""

from __future__ import annotations

import json
import math
import os
import re
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

VALIDITY_KEYS = ("validity", "valid", "valid_solution", "is_valid")
_CHECKPOINT_RE = re.compile(r"^checkpoint_(\d+)$")


def find_program_files(src: str | os.PathLike[str]) -> list[Path]:
    """Every ``programs/*.json`` below ``src``, oldest snapshot first.

    Snapshots are ordered by the checkpoint numbers on their path (outer first), database
    folders outside any checkpoint (``db/``) last, then by path.
    """
    src = Path(src)
    files = [p for p in src.rglob("*.json") if p.parent.name == "programs" and p.is_file()]

    def key(path: Path) -> tuple[list[float], str]:
        numbers = [float(m.group(1)) for part in path.relative_to(src).parts
                   if (m := _CHECKPOINT_RE.match(part))]
        inside = path.relative_to(src).parts
        if not any(_CHECKPOINT_RE.match(p) for p in inside):
            numbers = [math.inf]
        return numbers, str(path)

    return sorted(files, key=key)


def _metrics_of(raw: dict[str, Any]) -> dict[str, Any]:
    metrics = parse_structure(raw.get("metrics"))
    if not isinstance(metrics, dict):
        return {}
    out: dict[str, Any] = {}
    for name, value in metrics.items():
        number = to_float(value)
        out[str(name)] = number if number is not None else value
    return out


def _error_of(metrics: dict[str, Any], metric: str, diagnostics: Any) -> str | None:
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
    return "; ".join(reasons)


def _program(raw: dict[str, Any], metric: str) -> Program:
    node_id = to_id(raw.get("id"))
    if node_id is None:
        raise ValueError("program without id")
    metadata = parse_structure(raw.get("metadata"))
    metadata = metadata if isinstance(metadata, dict) else {}
    metrics = _metrics_of(raw)
    diagnostics = parse_structure(raw.get("artifacts_json"))
    error = _error_of(metrics, metric, diagnostics)
    iteration = to_int(raw.get("iteration_found"))
    extra: dict[str, Any] = {"metrics": metrics}
    prompts = parse_structure(raw.get("prompts"))
    if prompts:
        extra["prompts"] = prompts
    if diagnostics:
        extra["diagnostics"] = diagnostics
    migrant = to_bool(metadata.get("migrant", False)) or "_migrant" in node_id
    extra["openevolve"] = {
        "generation": to_int(raw.get("generation")),
        "iteration_found": iteration,
        "timestamp": to_float(raw.get("timestamp")),
        "island": to_int(metadata.get("island")),
        "changes": metadata.get("changes"),
        "language": raw.get("language"),
        "complexity": to_float(raw.get("complexity")),
        "diversity": to_float(raw.get("diversity")),
        "parent_id": to_id(raw.get("parent_id")),
    }
    return Program(
        id=node_id,
        parent=to_id(raw.get("parent_id")),
        score=None if error else to_float(metrics[metric]),
        error=error,
        timestamp=to_float(raw.get("timestamp")),
        order=None if iteration is None else float(iteration),
        round=iteration,
        code=raw.get("code") if isinstance(raw.get("code"), str) else None,
        migrant=migrant,
        extra=extra,
    )


def read_programs(src: str | os.PathLike[str], report: ImportReport) -> list[dict[str, Any]]:
    """The union of all snapshots: one merged raw dict per program id (later snapshots win)."""
    files = find_program_files(src)
    if not files:
        raise ImportError_(
            f"{src}: no OpenEvolve programs found (expected programs/*.json files, e.g. in "
            "checkpoints/checkpoint_N/programs/)"
        )
    merged: dict[str, dict[str, Any]] = {}
    snapshots: dict[str, int] = {}
    for path in files:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            report.notes.append(f"skipped unreadable {path}: {exc}")
            continue
        node_id = to_id(raw.get("id")) if isinstance(raw, dict) else None
        if node_id is None:
            report.notes.append(f"skipped {path}: not a program record")
            continue
        report.snapshots += 1
        snapshots[node_id] = snapshots.get(node_id, 0) + 1
        target = merged.setdefault(node_id, {})
        for key, value in raw.items():
            if value is not None or key not in target:
                target[key] = value
    report.files_read = len(files)
    return list(merged.values())


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
    orphans: str = "drop",
) -> ImportReport:
    """Read an OpenEvolve output folder and write it as a world folder ``out``."""
    started = time.perf_counter()
    src = Path(src)
    if not src.is_dir():
        raise FileNotFoundError(f"{src}: not a folder (expected an OpenEvolve output folder)")
    if direction not in DIRECTIONS:
        raise ImportError_(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    out_path = check_out_folder(out)
    report = ImportReport("openevolve", str(src), out=str(out_path), metric=metric)
    raws = read_programs(src, report)
    available = sorted({k for r in raws for k in _metrics_of(r)})
    if metric not in available:
        raise ImportError_(
            f"{src}: no program has metric {metric!r}; metrics found: {', '.join(available) or 'none'} "
            "(choose one with --metric)"
        )
    programs = [_program(r, metric) for r in raws]
    records = build_world_records(programs, report, orphans=orphans, direction=direction)
    write_imported_world(
        out_path, records, report, system="openevolve", source_path=src, run_name=src.resolve().name,
        world_id=world_id, task_name=task_name, task_description=task_description, direction=direction,
        workers=workers, orphans=orphans,
    )
    report.seconds = time.perf_counter() - started
    return report
