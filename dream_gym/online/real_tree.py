"""The real tree as the online loop shows it: the policy's view and the agent's parent.

Each round the policy sees the prefix view of the real tree so far (:func:`tree_view`, the same
view type as in replay) and its batch is held to the replay rules (:func:`check_online_batch`);
each attempt's agent is told its parent's program, score, diagnostics and branch history
(:func:`parent_context`).

Online, the future does not exist yet, so the frontier is the reveal rule's with every node's
recorded children unbounded (``reveal_rules.UNRECORDED``): the root (up to W times) and every
leaf of the tree (rule "leaves", default) or every node (rule "any").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dream_gym.online.agent_base import ParentContext
from dream_gym.replay.mechanics import ROOT, IllegalBatchError
from dream_gym.replay.settings import ReplaySettings
from dream_gym.replay.view import NodeView, PrefixView, branch_of_child, node_view_from_record
from dream_gym.world.reveal_rules import UNRECORDED, reveal_rule, root_slots
from dream_gym.world.tree import build_world

HISTORY_LIMIT = 12  # ancestors shown to the agent


def tree_view(
    records: list[dict[str, Any]], meta: dict[str, Any], settings: ReplaySettings | None = None, *, rounds: int,
    known: Sequence[NodeView] = (), **changes: Any,
) -> PrefixView:
    """The prefix view of a real growing tree: every node is revealed (observed id = line).

    ``settings`` (and ``changes``, its fields by name) are the run's; W and the frontier rule
    default to the ones the world's metadata records. ``known`` is the ``nodes`` of an earlier
    view of a prefix of these same, unchanged records: reused instead of built again, so that a
    caller stepping through a record round by round builds each node's view once."""
    world = build_world(meta, records)
    settings = ReplaySettings.of(settings, **changes).resolved(world)
    workers, frontier = settings.workers_on(world), settings.frontier_on(world)
    nodes: list[NodeView] = list(known[: len(records)])
    opened = sum(1 for node in nodes if node.parent == ROOT)  # the branches the known nodes opened
    for index in range(len(nodes), len(records)):
        record = records[index]
        parent_index = int(world.parent[index])
        parent = nodes[parent_index] if parent_index >= 0 else None
        branch, opened = branch_of_child(parent, opened)
        raw = world.score[index]
        nodes.append(node_view_from_record(
            record, obs_id=index, parent=parent, branch=branch,
            score=None if raw != raw else float(raw), baseline=world.baseline_score,
        ))
    children = np.bincount(world.parent[1:], minlength=len(records)).tolist()
    rule = reveal_rule(frontier)
    legal = [i for i in range(1, len(records)) if rule.is_open(children[i], UNRECORDED)]
    return PrefixView(
        nodes=tuple(nodes), frontier=(ROOT, *legal), root_slots=root_slots(workers, UNRECORDED),
        baseline_score=world.baseline_score,
        workers=workers, beta=settings.beta, beta1=settings.beta1, beta2=settings.beta2, rounds=rounds,
        attempts=len(records) - 1, task_name=world.task_name, task_description=world.task_description,
        direction=world.direction, frontier_rule=frontier, max_rounds=settings.max_rounds,
    )


def check_online_batch(view: PrefixView, batch: list[int]) -> list[int]:
    """The replay rules applied to the real tree (legal ids, root up to W, non-root once); the
    error says it was the policy's batch (a live run stops on it: there is no record to fall back on)."""
    if len(batch) > view.workers:
        raise IllegalBatchError(f"the policy's batch of {len(batch)} selections exceeds W={view.workers} workers")
    legal = set(view.frontier)
    seen: set[int] = set()
    for node_id in batch:
        if isinstance(node_id, bool) or not isinstance(node_id, (int, np.integer)):
            raise IllegalBatchError(f"the policy selected {node_id!r}, which is not a node id (an int)", node_id)
        if node_id == ROOT:
            continue
        if node_id not in legal:
            verb = "is" if len(legal) == 1 else "are"
            raise IllegalBatchError(f"the policy selected id {node_id}, which is not on the frontier of the real tree "
                                    f"(ids 0..{len(view) - 1} exist; {len(legal)} {verb} open)", node_id)
        if node_id in seen:
            raise IllegalBatchError(f"the policy selected id {node_id} twice (a non-root node may be selected once)",
                                    node_id)
        seen.add(node_id)
    return [int(i) for i in batch]


def parent_context(records: list[dict[str, Any]], index_of: dict[str, int], index: int) -> ParentContext:
    """What the agent is told about the parent: its program, score, diagnostics, branch history."""
    chain: list[dict[str, Any]] = []
    cursor: int | None = index
    while cursor is not None:
        chain.append(records[cursor])
        parent_id = records[cursor]["parent"]
        cursor = None if parent_id is None else index_of[parent_id]
    chain.reverse()
    history = [
        {k: r.get(k) for k in ("score", "error", "fail_class")}
        | {"diagnostics": str(r.get("diagnostics") or "")[:300], "code": str(r.get("code") or "")}
        for r in chain[-HISTORY_LIMIT:]
    ]
    parent = records[index]
    return ParentContext(
        code=str(parent.get("code") or ""), score=parent.get("score"),
        diagnostics=str(parent.get("diagnostics") or ""), error=parent.get("error"), history=history,
    )


def branch_scores(records: list[dict[str, Any]], index_of: dict[str, int], index: int, negate: bool) -> list[float | None]:
    """Oriented scores from the branch head down to node ``index`` (root excluded)."""
    scores: list[float | None] = []
    cursor = index
    while records[cursor]["parent"] is not None:
        scores.append(oriented(records[cursor], negate))
        cursor = index_of[records[cursor]["parent"]]
    return scores[::-1]


def oriented(record: dict[str, Any], negate: bool) -> float | None:
    """The record's score turned so that higher is better (None: no valid score)."""
    score = record.get("score")
    return None if score is None else (-score if negate else score)
