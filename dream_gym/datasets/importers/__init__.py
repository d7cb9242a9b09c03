"""Importers: discovery trees of other systems turned into ``dream-gym-world/1`` worlds.

Each importer reads its system's records into :class:`Program` objects; :func:`build_world_records`
turns them into one world, handling what real runs contain:

* migrant copies (a program copied onto another island keeps its code and score, and points at
  the original as its parent) are collapsed onto the program they copy; their children are
  re-parented onto it;
* several roots (a resumed run re-adds its initial program) are merged when they hold the same
  code as the earliest root; a root with other code is an orphan, like
* dangling parents (pruned from the database): the orphan and its subtree are dropped
  (``orphans="drop"``, the default, which never invents structure) or attached to the root
  (``orphans="reattach"``, keeping outcomes but shortening their path);
* creation order from timestamps, then iterations; parents always come before children;
* ``frontier: any`` when a non-root node has several children (not a "root + chains" world).
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.world import new_meta, write_world

ORPHAN_RULES = ("drop", "reattach")


SYSTEM_NAMES = {"openevolve": "OpenEvolve", "shinkaevolve": "ShinkaEvolve"}


class ImportError_(ValueError):
    """The source cannot be imported (no root, unknown metric, ...); the message says why."""


@dataclass
class Program:
    """One attempt of a foreign run, normalised."""

    id: str
    parent: str | None
    score: float | None
    error: str | None = None
    timestamp: float | None = None
    order: float | None = None  # iteration / generation, the fallback order
    round: int | None = None
    code: str | None = None
    migrant: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ImportReport:
    system: str
    source: str
    out: str = ""
    world_id: str = ""
    metric: str = ""
    files_read: int = 0
    snapshots: int = 0
    programs: int = 0
    nodes: int = 0
    roots_found: int = 0
    roots_merged: int = 0
    migrants_collapsed: int = 0
    dangling: int = 0
    foreign_roots: int = 0
    dropped: int = 0
    reattached: int = 0
    reordered: int = 0
    invalid: int = 0
    scored: int = 0
    frontier: str = "leaves"
    max_children_non_root: int = 0
    baseline: float | None = None
    best: float | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("notes",)} | {"notes": list(self.notes)}

    def summary(self) -> str:
        lines = [
            f"imported {self.system} run {self.source}",
            f"  -> world {self.world_id!r} at {self.out}",
            f"  files read {self.files_read}, snapshots {self.snapshots}, distinct programs {self.programs}",
            f"  nodes written {self.nodes} (scored {self.scored}, invalid {self.invalid}) "
            f"by metric {self.metric!r}",
            f"  roots found {self.roots_found} (merged {self.roots_merged}, foreign {self.foreign_roots}), "
            f"migrant copies collapsed {self.migrants_collapsed}",
            f"  dangling parents {self.dangling}: dropped {self.dropped} node(s), reattached {self.reattached}",
            f"  baseline {self.baseline}, best {self.best}, frontier {self.frontier!r}, "
            f"import took {self.seconds:.2f} s",
        ]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


# --------------------------------------------------------------------------- value coercion
# Real output files hold both proper JSON values and stringified ones ("2", "1766687202.86",
# "{'rel_depth': 0.5}" python reprs, "None"). These helpers accept both.


def parse_structure(value: Any) -> Any:
    """A dict/list given as itself, as JSON text, or as a Python repr string."""
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "{[":
            try:
                return json.loads(text)
            except ValueError:
                try:
                    return ast.literal_eval(text)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    return value
    return value


def to_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def to_int(value: Any) -> int | None:
    number = to_float(value)
    if number is None or not math.isfinite(number):
        return None
    return int(number)


def to_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "1.0", "yes", "y", "t")
    number = to_float(value)
    return bool(number) if number is not None else bool(value)


def to_id(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return None if text in ("", "None", "null", "none", "NULL") else text


def json_safe(value: Any) -> Any:
    """Recursively make a value JSON-writable: non-finite floats become None, tuples lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def world_name_from(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-._")
    return name or "imported"


# --------------------------------------------------------------------------- tree building


def _same_code(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and a.strip() == b.strip()


def build_world_records(
    programs: Iterable[Program],
    report: ImportReport,
    *,
    orphans: str = "drop",
    direction: str = "maximize",
) -> list[dict[str, Any]]:
    """Turn programs into node records in creation order, root first; fill ``report``."""
    if orphans not in ORPHAN_RULES:
        raise ImportError_(f"orphans must be one of {ORPHAN_RULES}, got {orphans!r}")
    by_id: dict[str, Program] = {}
    for program in programs:
        by_id[program.id] = program
    report.programs = len(by_id)
    if not by_id:
        raise ImportError_(f"{report.source}: no programs found")

    def sort_key(p: Program) -> tuple[float, float, str]:
        ts = p.timestamp if p.timestamp is not None and math.isfinite(p.timestamp) else math.inf
        order = p.order if p.order is not None and math.isfinite(p.order) else math.inf
        return (ts, order, p.id)

    # 1. Migrant copies collapse onto the program they copy.
    alias: dict[str, str] = {}
    for p in by_id.values():
        if p.migrant and p.parent is not None and p.parent in by_id:
            alias[p.id] = p.parent

    def canonical(node_id: str) -> str:
        seen = set()
        while node_id in alias and node_id not in seen:
            seen.add(node_id)
            node_id = alias[node_id]
        return node_id

    for copy_id in alias:
        target = by_id[canonical(copy_id)]
        target.extra.setdefault("migrant_copies", []).append(copy_id)
    report.migrants_collapsed = len(alias)

    # 2. Roots: the earliest is the root; others with the same code merge into it.
    roots = sorted((p for p in by_id.values() if p.parent is None and p.id not in alias), key=sort_key)
    report.roots_found = len(roots)
    if not roots:
        raise ImportError_(
            f"{report.source}: no initial program (a program without parent) was found; "
            "the run's root is missing from the records"
        )
    root = roots[0]
    orphan_reason: dict[str, str] = {}
    for other in roots[1:]:
        if _same_code(other.code, root.code):
            alias[other.id] = root.id
            root.extra.setdefault("merged_roots", []).append(other.id)
            report.roots_merged += 1
        else:
            orphan_reason[other.id] = "a second root whose code differs from the initial program"
            report.foreign_roots += 1
    if report.roots_merged:
        report.notes.append(
            f"{report.roots_merged} extra root(s) with the initial program's code (resumed runs) "
            f"merged into {root.id}"
        )

    # 3. Effective parents; dangling ones.
    parent_of: dict[str, str | None] = {}
    for p in by_id.values():
        if p.id in alias or p.id == root.id:
            continue
        if p.id in orphan_reason:
            parent_of[p.id] = None
            continue
        assert p.parent is not None
        parent = canonical(p.parent)
        if parent not in by_id:
            orphan_reason[p.id] = f"parent {p.parent} is not in the records (pruned)"
            report.dangling += 1
            parent_of[p.id] = None
        else:
            parent_of[p.id] = parent
    if orphans == "reattach":
        for node_id, reason in orphan_reason.items():
            parent_of[node_id] = root.id
            by_id[node_id].extra["orphan"] = {"reason": reason, "original_parent": by_id[node_id].parent}
        report.reattached = len(orphan_reason)

    # 4. Creation order: timestamps then iterations; a child waits for its parent.
    ordered = [root]
    emitted = {root.id}
    waiting: dict[str, list[Program]] = {}
    deferred: set[str] = set()
    for p in sorted((by_id[i] for i in parent_of), key=sort_key):
        wanted = parent_of[p.id]
        if wanted is None:
            continue
        if wanted not in emitted:
            waiting.setdefault(wanted, []).append(p)
            deferred.add(p.id)
            continue
        stack = [p]
        while stack:
            node = stack.pop(0)
            ordered.append(node)
            emitted.add(node.id)
            stack = waiting.pop(node.id, []) + stack
    report.dropped = len(parent_of) - (len(ordered) - 1)
    report.reordered = len(deferred & emitted)  # created (by the clock) before their parent
    if orphan_reason and orphans == "drop":
        report.notes.append(
            f"{len(orphan_reason)} orphan(s) ({report.dangling} with a pruned parent, "
            f"{report.foreign_roots} foreign root(s)) dropped with their subtrees: "
            f"{report.dropped} node(s) in all; use orphans='reattach' to keep them under the root"
        )
    elif orphan_reason:
        report.notes.append(
            f"{len(orphan_reason)} orphan(s) attached to the root (tagged 'orphan'); their depth is "
            "shorter than in the original run"
        )

    # 5. Records.
    records: list[dict[str, Any]] = []
    children: dict[str, int] = {}
    for node in ordered:
        node_parent = None if node is root else parent_of[node.id]
        record: dict[str, Any] = {"id": node.id, "parent": node_parent, "score": node.score}
        if node.round is not None:
            record["round"] = 0 if node is root else node.round
        if node.score is None:
            record["error"] = node.error or "no valid score"
            report.invalid += 1
        else:
            report.scored += 1
        if node.code is not None:
            record["code"] = node.code
        for key, value in node.extra.items():
            record.setdefault(key, value)
        records.append(json_safe(record))
        if node_parent is not None and node_parent != root.id:
            children[node_parent] = children.get(node_parent, 0) + 1
    report.nodes = len(records)
    report.max_children_non_root = max(children.values(), default=0)
    report.frontier = "any" if report.max_children_non_root > 1 else "leaves"
    if report.frontier == "any":
        report.notes.append(
            f"frontier 'any': non-root nodes have up to {report.max_children_non_root} children (not a "
            "'root + chains' world), so replay must let any revealed node with unrevealed children be "
            "selected"
        )
    if root.score is None:
        raise ImportError_(
            f"{report.source}: the initial program {root.id} has no valid score by metric "
            f"{report.metric!r} ({root.error or 'missing'}); a world needs a baseline score"
        )
    report.baseline = root.score
    scores = [r["score"] for r in records if r["score"] is not None]
    report.best = (min(scores) if direction == "minimize" else max(scores)) if scores else None
    return records


def check_out_folder(out: str | os.PathLike[str]) -> Path:
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out}: output folder exists and is not empty")
    return out


def write_imported_world(
    out_path: Path,
    records: list[dict[str, Any]],
    report: ImportReport,
    *,
    system: str,
    source_path: Path,
    run_name: str,
    world_id: str | None,
    task_name: str | None,
    task_description: str,
    direction: str,
    workers: int,
    orphans: str,
) -> None:
    """Write the imported records as a finished world, with the import's provenance."""
    name = world_name_from(world_id or run_name)
    report.world_id = name
    meta = new_meta(
        name,
        task_name or run_name,
        task_description or f"Imported from the {SYSTEM_NAMES[system]} run {run_name}.",
        direction=direction,
        workers=workers,
        frontier=report.frontier,
        source={
            "system": system,
            "path": str(source_path.resolve()),
            "metric": report.metric,
            "orphans": orphans,
            "import": {k: v for k, v in report.as_dict().items() if k not in ("out", "seconds")},
        },
        notes=list(report.notes),
    )
    write_world(out_path, meta, records)
