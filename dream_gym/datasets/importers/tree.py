"""From the programs of a foreign run to the node records of one world.

:func:`build_world_records` handles what real runs contain:

* **copies** (a migrant copied onto another island, an initial program copied onto every
  island) are collapsed onto the program they copy; their children are re-parented onto it;
* **several roots**: the earliest root of the first phase is the world's root. Every other root
  is a program the run re-added: the root of a resumed phase (started from a checkpoint's best
  program under a fresh id), or a re-added initial program. It is *stitched* onto the program it
  was started from, so that its subtree continues from there: the program named by the resume
  record (OpenEvolve's ``best_program_info.json``), else the earliest earlier program with the
  same code;
* **orphans**, programs that cannot be placed (their parent is not in the records, a root whose
  start program is unknown, a parent chain that loops): attached under the root and tagged
  ``orphan`` (the default, with a warning that counts them), or dropped with their subtrees when
  asked (``orphans="drop"``). An import that would keep fewer than half of the programs fails;
* **creation order** from timestamps, then iterations; parents always come before children;
* ``frontier: any`` when a non-root node has several children (not a "root + chains" world).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from dream_gym.infrastructure.printable import error_line

from .base import MIN_KEPT_SHARE, ORPHAN_RULES, ImportReport, Program, RunImportError
from .coerce import json_safe


def _sort_key(p: Program) -> tuple[float, float, str]:
    ts = p.timestamp if p.timestamp is not None and math.isfinite(p.timestamp) else math.inf
    order = p.order if p.order is not None and math.isfinite(p.order) else math.inf
    return (ts, order, p.id)


class _Tree:
    """The mutable state of one build: programs, aliases, parents and orphans."""

    def __init__(self, programs: Iterable[Program], report: ImportReport):
        self.report = report
        self.by_id: dict[str, Program] = {}
        for program in programs:
            self.by_id[program.id] = program
        self.alias: dict[str, str] = {}  # collapsed id -> the program it stands for
        self.orphan_reason: dict[str, str] = {}
        self.parent_of: dict[str, str | None] = {}

    def canonical(self, node_id: str) -> str:
        seen = set()
        while node_id in self.alias and node_id not in seen:
            seen.add(node_id)
            node_id = self.alias[node_id]
        return node_id

    # ------------------------------------------------------------------ copies and roots

    def collapse_copies(self) -> None:
        for p in self.by_id.values():
            if p.copy_of is not None and p.copy_of in self.by_id and p.copy_of != p.id:
                self.alias[p.id] = p.copy_of
        for copy_id in self.alias:
            self.by_id[self.canonical(copy_id)].extra.setdefault("copies", []).append(copy_id)
        self.report.migrants_collapsed = len(self.alias)

    def place_roots(self) -> Program:
        report = self.report
        roots = sorted((p for p in self.by_id.values() if p.parent is None and p.id not in self.alias),
                       key=_sort_key)
        report.roots_found = len(roots)
        report.phases = len({p.phase for p in self.by_id.values()})
        if not roots:
            raise RunImportError(
                f"{report.source}: no initial program (a program without parent) was found; "
                "the run's root is missing from the records"
            )
        first_phase = [r for r in roots if r.phase is None]
        root = (first_phase or roots)[0]
        by_code: dict[str, list[Program]] = {}
        for p in sorted(self.by_id.values(), key=_sort_key):
            if p.code is not None and p.id not in self.alias:
                by_code.setdefault(p.code.strip(), []).append(p)
        for other in roots:
            if other is root:
                continue
            target, how = self._start_of(other, by_code)
            if target is None:
                self.orphan_reason[other.id] = (
                    f"the root of the resumed phase {other.phase}, whose start program is not in the records "
                    "(no resume record names one, and no earlier program has the same code)"
                    if other.phase != root.phase else
                    "another initial program of the run, with code of its own (a world has one root)"
                )
                report.unplaced_roots += 1
                continue
            self.alias[other.id] = target
            stitch = {"id": other.id, "onto": target, "by": how, "phase": other.phase, "score": other.score}
            report.stitches.append(stitch)
            self.by_id[target].extra.setdefault("stitched_roots", []).append(
                {k: v for k, v in stitch.items() if k != "onto"})
            report.roots_stitched += 1
            report.phases_stitched += other.phase is not None
        return root

    def _start_of(self, other: Program, by_code: dict[str, list[Program]]) -> tuple[str | None, str]:
        """The program a later root was started from, and how it was found."""
        if other.started_from is not None:
            target = self.canonical(other.started_from)
            if target in self.by_id and target != other.id:
                return target, "resume record"
        for code in (other.code, other.start_code):
            if code is None:
                continue
            for candidate in by_code.get(code.strip(), []):
                if candidate.id == other.id or _sort_key(candidate) >= _sort_key(other):
                    continue
                return self.canonical(candidate.id), "identical code"
        return None, ""

    # ------------------------------------------------------------------ parents and orphans

    def resolve_parents(self, root: Program) -> None:
        for p in self.by_id.values():
            if p.id in self.alias or p.id == root.id:
                continue
            if p.id in self.orphan_reason:
                self.parent_of[p.id] = None
                continue
            assert p.parent is not None
            parent = self.canonical(p.parent)
            if parent not in self.by_id:
                self.orphan_reason[p.id] = f"parent {p.parent} is not in the records (pruned)"
                self.report.dangling += 1
                self.parent_of[p.id] = None
            else:
                self.parent_of[p.id] = parent
        self._break_cycles(root)

    def _break_cycles(self, root: Program) -> None:
        """A parent chain that loops never reaches the root: its earliest node becomes an orphan."""
        done = {root.id}
        for start in self.parent_of:
            path: list[str] = []
            on_path: set[str] = set()
            node: str | None = start
            while node is not None and node not in done:
                if node in on_path:
                    cycle = path[path.index(node):]
                    head = min(cycle, key=lambda i: _sort_key(self.by_id[i]))
                    self.orphan_reason[head] = f"its parent chain loops ({' -> '.join(cycle)})"
                    self.parent_of[head] = None
                    self.report.cycles += 1
                    break
                path.append(node)
                on_path.add(node)
                node = self.parent_of.get(node)
            done.update(path)

    def apply_orphan_rule(self, root: Program, orphans: str) -> None:
        if orphans != "attach":
            return
        for node_id, reason in self.orphan_reason.items():
            self.parent_of[node_id] = root.id
            self.by_id[node_id].extra["orphan"] = {"reason": reason,
                                                   "original_parent": self.by_id[node_id].parent}
        self.report.attached = len(self.orphan_reason)

    # ------------------------------------------------------------------ order and records

    def creation_order(self, root: Program) -> list[Program]:
        """Timestamps then iterations; a child created (by the clock) before its parent waits."""
        ordered = [root]
        emitted = {root.id}
        waiting: dict[str, list[Program]] = {}
        deferred: set[str] = set()
        for p in sorted((self.by_id[i] for i in self.parent_of), key=_sort_key):
            wanted = self.parent_of[p.id]
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
        self.report.dropped = len(self.parent_of) - (len(ordered) - 1)
        self.report.reordered = len(deferred & emitted)
        return ordered


def _check_kept(report: ImportReport, orphans: str) -> None:
    kept = report.programs - report.dropped
    if kept < MIN_KEPT_SHARE * report.programs:
        raise RunImportError(
            f"{report.source}: the import would keep only {kept} of {report.programs} programs: "
            f"{report.dropped} node(s) are dropped with the subtrees of {report.orphans} orphan(s) "
            f"({report.dangling} whose parent is not in the records, {report.unplaced_roots} roots whose start "
            f"program could not be found, {report.cycles} in parent cycles) because orphans={orphans!r}; "
            "rerun with --orphans attach (orphans='attach') to keep them under the root"
        )


def _warn_orphans(report: ImportReport, root: Program, orphans: str) -> None:
    if not report.orphans:
        return
    kinds = (f"{report.dangling} whose parent is not in the records, {report.unplaced_roots} roots whose "
             f"start program could not be found, {report.cycles} in parent cycles")
    if orphans == "attach":
        report.warn(
            f"{report.orphans} orphan(s) attached under the root {root.id} (tagged 'orphan': {kinds}); their "
            "depth is shorter than in the original run; --orphans drop drops them with their subtrees"
        )
    else:
        report.warn(
            f"{report.orphans} orphan(s) dropped with their subtrees as asked ({kinds}): {report.dropped} "
            f"of {report.programs} programs are not in the world; --orphans attach keeps them"
        )


def _records(tree: _Tree, ordered: list[Program], root: Program) -> list[dict[str, Any]]:
    report = tree.report
    records: list[dict[str, Any]] = []
    children: dict[str, int] = {}
    for node in ordered:
        node_parent = None if node is root else tree.parent_of[node.id]
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
    return records


def build_world_records(
    programs: Iterable[Program],
    report: ImportReport,
    *,
    orphans: str = "attach",
    direction: str = "maximize",
) -> list[dict[str, Any]]:
    """Turn programs into node records in creation order, root first; fill ``report``."""
    if orphans not in ORPHAN_RULES:
        raise RunImportError(f"orphans must be one of {ORPHAN_RULES}, got {orphans!r}")
    tree = _Tree(programs, report)
    report.programs = len(tree.by_id)
    if not tree.by_id:
        raise RunImportError(f"{report.source}: the run holds no programs")
    tree.collapse_copies()
    root = tree.place_roots()
    tree.resolve_parents(root)
    tree.apply_orphan_rule(root, orphans)
    ordered = tree.creation_order(root)
    _check_kept(report, orphans)
    _warn_orphans(report, root, orphans)
    if report.roots_stitched:
        report.notes.append(
            f"{report.roots_stitched} extra root(s) stitched onto the program they were started from "
            f"({report.phases_stitched} resumed phase(s)); their subtrees continue from there"
        )
    records = _records(tree, ordered, root)
    if report.frontier == "any":
        report.notes.append(
            f"frontier 'any': non-root nodes have up to {report.max_children_non_root} children (not a "
            "'root + chains' world), so replay must let any revealed node with unrevealed children be "
            "selected"
        )
    if root.score is None:
        raise RunImportError(
            f"{report.source}: the initial program {root.id} has no valid score by metric "
            f"{report.metric!r} ({error_line(root.error) or 'missing'}); a world needs a baseline score"
        )
    report.baseline = root.score
    scores = [r["score"] for r in records if r["score"] is not None]
    report.best = (min(scores) if direction == "minimize" else max(scores)) if scores else None
    return records
