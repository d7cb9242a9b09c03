"""The record of one ShinkaEvolve run with a dream_gym policy: the world being written and the
policy's choices (:class:`RunState`), read off ShinkaEvolve's program rows.

:mod:`.bridge` calls :meth:`RunState.prepare` before ShinkaEvolve inserts a program (its id, derived
from the seed and the generation, and the policy's round and slot) and :meth:`RunState.admitted`
once its row is committed; nodes are written in generation order within a policy round. An island
copy (made by ShinkaEvolve's SQL, not through ``add``) is no node: its children are its
original's. Nothing here imports ShinkaEvolve: its database is read with :mod:`sqlite3`.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.datasets.importers.coerce import as_dict
from dream_gym.datasets.importers.shinkaevolve import _copy_of
from dream_gym.datasets.importers.shinkaevolve import _program as imported_program
from dream_gym.integrations.bridge_state import BridgeState, node_record

METRIC = "combined_score"
DB_FILE = "programs.sqlite"  # where ShinkaEvolveRunner keeps its database, in its results folder
ID_NAMESPACE = uuid.UUID("8f6b1c1e-5a53-4d0e-9a4e-5b6a0f3c2d71")  # dream-gym's ids of ShinkaEvolve programs
#: Fields of ShinkaEvolve's program metadata kept in a node (the rest are timings, logs and
#: ShinkaEvolve's bookkeeping, which differ from run to run).
KEPT_METADATA = ("patch_type", "patch_name", "patch_description", "num_applied", "novelty_attempt", "resample_attempt", "patch_attempt", "api_costs", "embed_cost",
                 "novelty_cost", "meta_cost", "dream_gym")


def program_id(seed: int, generation: int) -> str:
    """The id of generation ``generation`` of a run with this seed (ShinkaEvolve's uuid4 otherwise)."""
    return str(uuid.uuid5(ID_NAMESPACE, f"{seed}/{generation}"))


@dataclass
class Assignment:
    """One generation the policy asked for: its parent, round and worker slot."""

    parent: str
    round: int
    slot: int


@dataclass(kw_only=True)
class RunState(BridgeState):
    """The bridge's side of one run: the world being written and the policy's choices."""

    results_dir: Path
    assigned: dict[int, Assignment] = field(default_factory=dict)
    pending: dict[int, dict[str, Any]] = field(default_factory=dict)  # admitted, waiting for a lower generation
    in_flight: set[int] = field(default_factory=set)  # generations of this round not resolved yet
    reported: set[int] = field(default_factory=set)  # ... whose evaluation was reported finished
    spent: dict[int, list[float]] = field(default_factory=dict)  # generation -> its patch calls' tokens in, out, usd
    copies: dict[str, str] = field(default_factory=dict)  # island copy id -> the program it copies
    stopped_by: str = "budget"
    interrupted: bool = False  # Ctrl-C or SIGTERM: the policy's rounds end after the one in flight
    failed_generations: list[int] = field(default_factory=list)
    lost_generations: list[int] = field(default_factory=list)  # started before a hard stop, never saved: spent
    error: Exception | None = None  # what stopped the policy's rounds

    # -- recording ------------------------------------------------------------------------------
    def prepare(self, program: Any) -> None:
        """Before ShinkaEvolve inserts a program: its deterministic id and the policy's round."""
        program.id = program_id(self.seed, int(program.generation))
        assignment = self.assigned.get(int(program.generation))
        if assignment is not None:
            program.metadata = dict(program.metadata or {})
            program.metadata["dream_gym"] = {"round": assignment.round, "worker": assignment.slot,
                                             "chosen_parent": assignment.parent}

    def admitted(self, program: Any) -> None:
        """A program's row is committed: record it (in generation order within a policy round)."""
        record = self.node_of(program.to_dict())
        if record is None:
            return
        generation = int(program.generation)
        self.in_flight.discard(generation)
        if self.policy is None or generation == 0:
            self.write(record)
            return
        self.pending[generation] = record
        self.release()

    def resolved_without_program(self, generation: int) -> None:
        """A proposal ended without a program (every patch attempt failed, or an error)."""
        if generation in self.in_flight:
            self.in_flight.discard(generation)
            self.failed_generations.append(generation)
            self.release()

    def release(self) -> None:
        while self.pending:
            generation = min(self.pending)
            if any(g < generation for g in self.in_flight):
                return
            self.write(self.pending.pop(generation))

    def waits(self, generation: int) -> bool:
        """Whether the finished evaluation of ``generation`` must wait: a lower generation of its
        round is still being written or evaluated (called from ShinkaEvolve's scheduler threads)."""
        return self.policy is not None and any(g < generation and g not in self.reported
                                                for g in tuple(self.in_flight))

    def end_round(self) -> None:
        """Every proposal of the round is done: write whatever is still held back."""
        self.in_flight.clear()
        self.reported.clear()
        self.release()

    def write(self, record: dict[str, Any]) -> None:
        if record["id"] not in self.writer:
            self.writer.append(record)

    def spent_on(self, generation: int) -> list[float]:
        """What the patch calls of ``generation`` spent so far: prompt tokens, completion tokens, USD
        (every attempt and resample; ShinkaEvolve's own record keeps the last attempt's tokens)."""
        return self.spent.setdefault(generation, [0, 0, 0.0])

    def node_of(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The node of one program row: the importer's reading of it (score, error, code, metrics,
        diagnostics, cost), with this run's round and worker slot; None for an island copy."""
        parsed = imported_program(row, METRIC, self.results_dir)
        if parsed.copy_of is not None:
            self.copies[parsed.id] = parsed.copy_of
            return None
        parent = self.parent_of(parsed.parent)
        generation = int(row.get("generation") or 0)
        tag = (parsed.extra.get("shinkaevolve") or {}).get("metadata", {}).get("dream_gym") or {}
        if parent is None:
            placement = {"round": 0}
        elif "round" in tag:
            placement = {"round": int(tag["round"]), "worker": int(tag.get("worker", 0))}
        else:
            placement = {"round": (max(generation, 1) - 1) // self.workers + 1}
        record = node_record(parsed, parent, placement)
        if generation in self.spent:
            record["cost"] = self.cost_of(record.get("cost") or {}, self.spent[generation])
        extra = record.get("shinkaevolve")
        if isinstance(extra, dict):
            metadata = extra.get("metadata") or {}
            extra["metadata"] = {k: metadata[k] for k in KEPT_METADATA if k in metadata}
            extra["archive_inspiration_ids"] = list(row.get("archive_inspiration_ids") or [])
            extra["top_k_inspiration_ids"] = list(row.get("top_k_inspiration_ids") or [])
        record.pop("duration_s", None)  # a wall time: ShinkaEvolve's metadata keeps it
        return record

    @staticmethod
    def cost_of(recorded: dict[str, Any], spent: list[float]) -> dict[str, Any]:
        """A node's cost with its patch calls counted whole: their tokens, and their USD in place of
        ``api_costs`` (the embedding, novelty and meta costs as ShinkaEvolve recorded them)."""
        breakdown = dict(recorded.get("breakdown") or {}, api_costs=spent[2])
        return {**recorded, "tokens_in": int(spent[0]), "tokens_out": int(spent[1]),
                "usd": sum(breakdown.values()), "breakdown": breakdown}

    def parent_of(self, parent: str | None) -> str | None:
        """The node a program continues: its parent, or the program an island copy copies."""
        if parent is None or parent in self.writer:
            return parent
        if parent not in self.copies:
            self.learn_copies()
        return self.copies.get(parent, parent)

    def learn_copies(self) -> None:
        """The island copies in ShinkaEvolve's database (made by SQL, not through ``add``)."""
        for row in read_program_rows(self.db_path):
            original = _copy_of(as_dict(row.get("metadata")))
            if original is not None:
                self.copies[str(row["id"])] = original

    @property
    def db_path(self) -> Path:
        return self.results_dir / DB_FILE

    def catch_up(self) -> int:
        """Record the programs ShinkaEvolve's database holds and the world lacks (a run killed
        between the two writes), in generation order; returns how many."""
        self.learn_copies()
        rows = sorted(read_program_rows(self.db_path),
                      key=lambda r: (int(r.get("generation") or 0), float(r.get("timestamp") or 0.0)))
        added = 0
        for row in rows:
            if str(row["id"]) in self.copies or str(row["id"]) in self.writer:
                continue
            record = self.node_of(row)
            if record is not None and (record["parent"] is None or record["parent"] in self.writer):
                self.write(record)
                added += 1
        self.round = max((int(r.get("round") or 0) for r in self.writer.records), default=0)
        return added

    # -- the policy -----------------------------------------------------------------------------
    def next_batch(self, limit: int) -> list[str]:
        """The policy's next batch (program ids, at most ``limit``)."""
        return self.start_round(self.choose(limit))  # (choose refuses a run whose initial program failed)

    def assign(self, generation: int, parent: str, slot: int) -> None:
        self.assigned[generation] = Assignment(parent, self.round, slot)
        self.in_flight.add(generation)


def read_program_rows(db_path: Path) -> list[dict[str, Any]]:
    """Every row of ShinkaEvolve's program table (read-only connection)."""
    conn = sqlite3.connect(f"{Path(db_path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        conn.row_factory = sqlite3.Row
        rows = [dict(row) for row in conn.execute("SELECT * FROM programs")]
    finally:
        conn.close()
    for row in rows:
        for key in ("archive_inspiration_ids", "top_k_inspiration_ids"):
            try:
                row[key] = json.loads(row.get(key) or "[]")
            except ValueError:
                row[key] = []
    return rows


__all__ = ["DB_FILE", "METRIC", "Assignment", "RunState", "program_id", "read_program_rows"]
