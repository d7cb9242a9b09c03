"""Pooled worlds: runs of one task from the same root, merged into one world (``dream-gym worlds pool``).

Replay answers only what a run recorded. Several runs of the same task answer more together: a
node one run stopped at another may have continued, a branch one never opened another did.
:func:`pool_worlds` merges them into one world:

* **Identity.** Two nodes are the same node when they have the same parent chain and the same
  code: the roots (which must hold the same program) are one node, and a child of a pooled node is
  merged with a child of the same code under it from another run. A node recorded in several
  runs is kept once; its children in every run are all kept under it (merged among themselves by
  the same rule). A node without code is never merged: nothing says it is the same program.
* **Order** (what replay reveals first): nodes in the order of their first creation, the runs'
  clocks laid end to end: every node of the first run given, in its own order, then the nodes
  of the second run that the first did not record, in the second's order, and so on. So the
  children of a node are ordered by the run that first recorded them, then by that run's
  order; parents come before children; and the first run's own tree is the pooled world's
  first nodes, in its order: replaying its policy (same seed and beta) in request mode gives
  its run back wherever the record answers, and every policy has at least the requests answered
  that the first run alone answers, the later runs adding what goes elsewhere. Not those a later
  run alone answers: a policy that opens one branch sees the first run's first branch. List the
  run replay should reveal first first (a history: oldest first).
* **Scores must agree** where nodes merge: a deterministic task scores the same program the
  same way. A noisy task (or one evaluated with the run's seed) may not: ``scores`` says what
  then happens. ``"exact"`` (the default) refuses, naming the node and the scores; ``"first"``
  keeps the first-recorded copy (its score, error and everything else) and merges the others'
  children under it, listing every other score in the node's ``pooled_scores``; ``"split"``
  keeps a copy whose score differs as a node of its own (a sibling with the same code, as if
  the agent had proposed the program twice), its subtree under it, except at the root, of which
  a world has one (the root keeps the first run's score, as under ``"first"``).

Every pooled node lists where it was recorded in ``pooled_from`` (``"<k>/<id>"``: run ``k``,
counted from 1 in the order given, and the node's id there), and is named by the first of
them. ``world.json`` gets ``pool``: the runs (id,
sha256, node counts), the score rule, and how many copies merged and disagreed.

The runs must be of the same task, in the same direction, with the same W and frontier rule.
Under the ``"leaves"`` rule a node is continued once online, so replay reveals only its first
child: a pooled node whose runs continued it differently keeps the later runs' children, but
only its first child is reachable (:attr:`PoolResult.unreachable` counts them).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.world.files import NODE_FILES, WORLD_FILE, is_present
from dream_gym.world.tree import World
from dream_gym.world.writer import check_empty_folder, new_meta, write_world

#: What to do where merged nodes' scores differ (see the module docstring).
SCORE_RULES = ("exact", "first", "split")
#: The rule for the runs of a task that scores one program differently from run to run (a noisy
#: task, or a task given as files, whose evaluation is seeded per run): the first-recorded score.
POOL_SCORES = "first"


class PoolError(ValueError):
    """Runs that cannot be pooled, or scores that disagree under ``scores="exact"``."""


@dataclass
class PoolResult:
    """What :func:`pool_worlds` wrote."""

    folder: Path
    runs: int
    nodes: int  # in the pooled world
    recorded: int  # nodes over every run
    merged: int  # copies merged into a node another run recorded first (recorded - nodes)
    disagreements: int  # merged or split copies whose score differed
    added: list[int] = field(default_factory=list)  # per run: nodes it added to the pool
    unreachable: int = 0  # nodes replay cannot reveal under the "leaves" rule (a later child)


def pool_worlds(worlds: Sequence[World], out: str | os.PathLike[str], *, world_id: str | None = None,
                scores: str = "exact") -> PoolResult:
    """Merge ``worlds`` (runs of one task from one root, oldest first) into a new world at ``out``."""
    if scores not in SCORE_RULES:
        raise ValueError(f"scores must be one of {', '.join(SCORE_RULES)}, got {scores!r}")
    if not worlds:
        raise PoolError("no run to pool")
    if not any(is_present(Path(out) / name) for name in (WORLD_FILE, *NODE_FILES)):  # a world: write_world names it
        check_empty_folder(out)  # the pooled world's files would land among another's
    _check_compatible(worlds, scores)
    merger = _Merger(scores)
    for k, world in enumerate(worlds, start=1):
        merger.add_run(k, world)
    first = worlds[0]
    folder = Path(out)
    meta = new_meta(
        world_id or folder.name, first.task_name, first.task_description, direction=first.direction,
        workers=first.workers, frontier=first.frontier_rule,
        source=f"dream-gym worlds pool ({len(worlds)} runs of {first.task_name})",
        licence=_licence(worlds),
        pool={
            "runs": [{"id": w.id, "sha256": w.meta.get("sha256"), "nodes": w.size, "added": added}
                     for w, added in zip(worlds, merger.added, strict=True)],
            "order": "first creation: the runs in the order given, each in its own order",
            "scores": scores, "merged": merger.merged, "disagreements": merger.disagreements,
        },
        **({"baseline_score": first.meta["baseline_score"]} if "baseline_score" in first.meta else {}),
    )
    write_world(folder, meta, merger.records)
    return PoolResult(
        folder=folder, runs=len(worlds), nodes=len(merger.records), recorded=sum(w.size for w in worlds),
        merged=merger.merged, disagreements=merger.disagreements, added=list(merger.added),
        unreachable=_unreachable(merger.records) if first.frontier_rule == "leaves" else 0,
    )


def _check_compatible(worlds: Sequence[World], scores: str) -> None:
    """Same task, direction, W and frontier rule, the same root program (and world.json baseline, under "exact")."""
    first = worlds[0]
    for k, world in enumerate(worlds[1:], start=2):
        for label, mine, theirs in (("task", world.task_name, first.task_name),
                                    ("direction", world.direction, first.direction),
                                    ("W", world.workers, first.workers),
                                    ("frontier rule", world.frontier_rule, first.frontier_rule)):
            if mine != theirs:
                raise PoolError(f"run {k} ({world.id}) has {label} {mine!r}, run 1 ({first.id}) {theirs!r}: "
                                "only runs of one task with the same settings pool")
        if world.records[0].get("code") != first.records[0].get("code"):
            raise PoolError(f"run {k} ({world.id}) starts from another root program than run 1 ({first.id}): "
                            "only runs from the same root pool")
        baseline, first_baseline = world.meta.get("baseline_score"), first.meta.get("baseline_score")
        if scores == "exact" and baseline != first_baseline:  # (a root's own score is checked as it merges)
            raise PoolError(f"run {k} ({world.id}) has the baseline score {baseline!r}, run 1 ({first.id}) "
                            f"{first_baseline!r}: pool with scores 'first' or 'split' (the pooled world keeps run 1's)")


class _Merger:
    """Builds the pooled records run by run (parents always before children)."""

    def __init__(self, scores: str):
        self.scores = scores
        self.records: list[dict[str, Any]] = []
        self.by_key: dict[tuple[int, str], list[int]] = {}  # (pooled parent, code) -> pooled nodes
        self.added: list[int] = []
        self.merged = 0
        self.disagreements = 0

    def add_run(self, k: int, world: World) -> None:
        index_of: dict[str, int] = {}  # this run's id -> pooled index
        before = len(self.records)
        for record in world.records:
            index_of[str(record["id"])] = self._place(k, record, index_of)
        self.added.append(len(self.records) - before)

    def _place(self, k: int, record: dict[str, Any], index_of: dict[str, int]) -> int:
        """The pooled index of one run's node: an existing node it merges with, or a new one."""
        if record["parent"] is None:
            if not self.records:
                return self._new(k, record, None, index_of)
            return self._merge(0, k, record)
        parent = index_of[str(record["parent"])]
        code = record.get("code")
        if code is not None:
            same = self.by_key.get((parent, str(code)), [])
            agreeing = [i for i in same if self.records[i]["score"] == record["score"]]
            if agreeing:
                return self._merge(agreeing[0], k, record)
            if same and self.scores != "split":  # "exact" refuses in _merge, "first" merges
                return self._merge(same[0], k, record)
            if same:
                self.disagreements += 1
        index = self._new(k, record, parent, index_of)
        if code is not None:
            self.by_key.setdefault((parent, str(code)), []).append(index)
        return index

    def _new(self, k: int, record: dict[str, Any], parent: int | None, index_of: dict[str, int]) -> int:
        node = dict(record)
        node["id"] = f"{k}/{record['id']}"
        node["parent"] = None if parent is None else self.records[parent]["id"]
        if isinstance(record.get("parents"), list):  # every parent of a merge, mapped where this run has it
            node["parents"] = [self.records[index_of[str(p)]]["id"] for p in record["parents"] if str(p) in index_of]
        node["pooled_from"] = [f"{k}/{record['id']}"]
        self.records.append(node)
        return len(self.records) - 1

    def _merge(self, index: int, k: int, record: dict[str, Any]) -> int:
        """Merge one run's copy into pooled node ``index`` (refused under "exact" when scores differ)."""
        node = self.records[index]
        if node["score"] != record["score"]:
            if self.scores == "exact":
                raise PoolError(
                    f"node {record['id']!r} of run {k} is the same program as pooled node {node['id']!r} (same parent "
                    f"chain and code) but scored {record['score']!r} against {node['score']!r}: a noisy task; pool "
                    "with scores 'first' (keep the first-recorded score) or 'split' (keep both as siblings)")
            self.disagreements += 1
            node.setdefault("pooled_scores", []).append(record["score"])
        node["pooled_from"].append(f"{k}/{record['id']}")
        self.merged += 1
        return index


def _licence(worlds: Sequence[World]) -> str:
    licences = list(dict.fromkeys(str(w.meta.get("licence") or "unknown") for w in worlds))
    return licences[0] if len(licences) == 1 else " AND ".join(licences)


def _unreachable(records: list[dict[str, Any]]) -> int:
    """Nodes under the "leaves" rule that no replay reveals: a later child of a node, with its subtree."""
    seen_child: set[str] = set()
    hidden: set[str] = set()
    for record in records[1:]:
        parent = str(record["parent"])
        if parent in hidden or (parent in seen_child and parent != str(records[0]["id"])):
            hidden.add(str(record["id"]))
        seen_child.add(parent)
    return len(hidden)
