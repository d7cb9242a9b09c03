"""Carrying versions across phases: the best earlier versions, scored exactly on the new history.

In ``dream-gym rsi`` the history grows by one world a phase (H_t = H_(t-1) plus the world of
rollout t), and every version of an earlier phase has a recorded, gate-checked score on each
world it was evaluated on: its score on H_t is missing only on the worlds added since. At the
start of phase t >= 2 the improvement step *completes* the scores of the ``carry`` best earlier
versions: each is evaluated isolated, twice in separate processes (the determinism gate), on the
worlds of H_t it has no score for, and the per-world scores are merged. A version's episodes
are deterministic (the gate checks it) and a world's score depends on that world's episodes
only, so the merged score is the exact score on H_t, the one a full re-evaluation gives. No
stale score stands for a score on H_t; stale scores do one thing only: rank the earlier
versions (the mean of the per-world scores each has on worlds of H_t) to choose which
``carry`` of them to complete.

The completed versions reach the developer as ``Feedback.past``: the built-in developer adds
them to its Optuna study (its knowledge of earlier phases, on the current history) and re-proposes
the best when it beats the incumbent; the step then reuses the completed scores instead of
evaluating the same code again (:func:`code_key`).

A carried version is identified by its code's syntax tree (comments ignored): the same family
parameter block written in two phases under two headers is one version. Each completion is a
``carry`` line of the ledger, so a resumed phase reads it back and evaluates nothing twice.
"""

from __future__ import annotations

import ast
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dream_gym.world.tree import World

#: the earlier versions whose scores each phase completes (the developer's carried knowledge)
DEFAULT_CARRY = 8


def code_key(code: str) -> str | None:
    """Identity of a policy file's behaviour: sha256 of its syntax tree (comments and layout
    ignored); None for code that does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    return hashlib.sha256(ast.dump(tree).encode("utf-8")).hexdigest()


@dataclass
class Carried:
    """An earlier phase's version and what is known of its scores."""

    phase: int  # the phase that wrote it
    m: int
    file: str  # relative to the run folder
    key: str
    per_world: dict[str, float] = field(default_factory=dict)  # gate-checked per-world scores
    params: dict[str, Any] | None = None
    status: str = "ok"  # "ok", or why its completion was refused ("failed", "nondeterministic")
    error: str | None = None

    def known_mean(self, worlds: Sequence[str]) -> float:
        """Mean over the worlds of ``worlds`` it has scores for (stale: used only to rank)."""
        known = [self.per_world[w] for w in worlds if w in self.per_world]
        return sum(known) / len(known) if known else float("-inf")


def earlier_versions(rows: Sequence[Mapping[str, Any]], phase: int, read_code: Callable[[str], str]) -> list[Carried]:
    """The distinct selectable versions of phases before ``phase``, with every per-world score
    the ledger ``rows`` hold for them (their own evaluation and earlier completions)."""
    by_key: dict[str, Carried] = {}
    for row in sorted((r for r in rows if r.get("type") == "revision" and int(r["phase"]) < phase),
                      key=lambda r: (int(r["phase"]), int(r["m"]))):
        gate_checked = row.get("score") is not None and (
            row["status"] == "ok" or (row["status"] == "incumbent" and not row.get("warning")))
        if not gate_checked:
            continue
        key = code_key(read_code(row["file"]))
        if key is None:
            continue
        known = by_key.setdefault(key, Carried(int(row["phase"]), int(row["m"]), row["file"], key,
                                               params=row.get("params")))
        for world, value in (row.get("per_world") or {}).items():
            known.per_world.setdefault(world, float(value))
    completions = sorted((r for r in rows if r.get("type") == "carry" and int(r["phase"]) < phase),
                         key=lambda r: int(r["phase"]))
    for row in completions:
        version = by_key.get(row["key"])
        if version is None:
            continue
        if row["status"] != "ok":  # refused once: never carried again
            version.status, version.error = row["status"], row.get("error")
            continue
        for world, value in row["per_world"].items():
            version.per_world.setdefault(world, float(value))
    return [c for c in by_key.values() if c.status == "ok"]


def choose(versions: Sequence[Carried], history: Sequence[str], carry: int, exclude: set[str]) -> list[Carried]:
    """The ``carry`` versions to complete: best known mean on the history first (ties: earliest)."""
    pool = [v for v in versions if v.key not in exclude]
    pool.sort(key=lambda v: (-v.known_mean(history), v.phase, v.m))
    return pool[: max(0, carry)]


Evaluator = Callable[[Path, "list[World]"], tuple[dict[str, float], str | None, str]]


def complete(version: Carried, history: Sequence[World], out: Path, phase: int, evaluate: Evaluator) -> dict[str, Any]:
    """Evaluate ``version`` on the worlds of ``history`` it has no score for; the ledger row.

    ``evaluate(path, worlds)`` returns (per-world scores, error or None, status); it runs the
    two gate passes."""
    started = time.perf_counter()
    missing = [w for w in history if w.id not in version.per_world]
    per_world, error, status = ({}, None, "ok") if not missing else evaluate(out / version.file, missing)
    row: dict[str, Any] = {"type": "carry", "phase": phase, "source": [version.phase, version.m],
                           "file": version.file, "key": version.key, "status": status, "error": error,
                           "evaluated": [w.id for w in missing]}
    if status == "ok":
        merged = {**version.per_world, **per_world}
        row["per_world"] = {w.id: merged[w.id] for w in history}
        row["score"] = sum(row["per_world"].values()) / len(history)
    else:
        row["per_world"] = {}
    row["seconds"] = time.perf_counter() - started
    return row
