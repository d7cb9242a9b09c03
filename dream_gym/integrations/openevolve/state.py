"""The record of one OpenEvolve run with a dream_gym policy: the world being written and the
policy's queue of parents (:class:`RunState`).

:mod:`.bridge` tells :meth:`RunState.admitted` of every program OpenEvolve's database admits
(migrant copies excepted) and writes it as a node once its artifacts are stored
(:meth:`RunState.flush`); the controller takes the policy's parents from the queue in order
(:meth:`RunState.take_parent`). Nothing here imports OpenEvolve.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from dream_gym.datasets.importers.openevolve import _program as imported_program
from dream_gym.datasets.importers.openevolve_programs import NO_PROGRAM
from dream_gym.integrations.bridge_state import BridgeState, node_record

METRIC = "combined_score"


@dataclass(kw_only=True)
class RunState(BridgeState):
    """The bridge's side of one run: the world being written and the policy's queue."""

    total_iterations: int = 0
    queue: deque[str] = field(default_factory=deque)
    slot_of: dict[int, int] = field(default_factory=dict)
    pending: list[Any] = field(default_factory=list)
    known: dict[str, Any] = field(default_factory=dict)  # every program recorded (to restore pruned parents)
    copies: dict[str, str] = field(default_factory=dict)  # a migrant copy's id -> the program it copies
    recording: bool = True
    restored_parents: int = 0
    iterations_run: int | None = None  # the last iteration run, once the loop ends (None: not known)
    llm_failures: list[str] = field(default_factory=list)  # iterations whose LLM call failed (no nodes)

    # -- recording ------------------------------------------------------------------------------
    def admitted(self, program: Any) -> None:
        if not self.recording or program.metadata.get("migrant") or program.id in self.writer:
            return
        self.flush()
        self.pending.append(program)
        self.known[program.id] = program

    def made_no_program(self, program: Any) -> None:
        """Record an iteration that made no program (``program``: the failed stand-in of
        :func:`~dream_gym.datasets.importers.openevolve_programs.from_failure`, in iteration order
        with the admitted programs); a policy that continues it gets its parent's code."""
        if not self.recording or program.id in self.writer:
            return
        self.flush()
        self.known[program.id] = program
        self.writer.append(self.node_of(program))

    def flush(self) -> None:
        while self.pending:
            self.writer.append(self.node_of(self.pending.pop(0)))

    def node_of(self, program: Any) -> dict[str, Any]:
        """The node of one program: the importer's own reading of it (score, error, code, metrics,
        diagnostics, OpenEvolve fields), with this run's round and worker slot."""
        parsed = imported_program(program.to_dict(), METRIC, None, None)
        iteration = int(program.iteration_found or 0)
        if parsed.parent is None:
            placement = {"round": 0}
        elif self.policy is None:
            placement = {"round": (max(iteration, 1) - 1) // self.workers + 1}
        else:
            placement = {"round": self.round, "worker": self.slot_of.get(iteration, 0)}
        parent = parsed.parent
        while parent in self.copies:  # OpenEvolve's sampling chose a migrant copy: its original, as the import
            parent = self.copies[parent]
        record = node_record(parsed, parent, placement)
        usage = program.metadata.get("token_usage") if isinstance(program.metadata, dict) else None
        if isinstance(usage, dict):
            tokens_in, tokens_out = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
            record["cost"] = self.priced(tokens_in, tokens_out)
        return record

    # -- the policy -----------------------------------------------------------------------------
    def next_batch(self, limit: int) -> list[str]:
        """The policy's next batch (program ids, at most ``limit``), queued for the controller."""
        self.flush()
        ids = self.start_round(self.choose(limit))  # (choose refuses a run whose initial program failed)
        self.queue.extend(ids)
        return ids

    def next_parent_island(self, database: Any) -> int:
        program = self.program_of(database, self.queue[0]) if self.queue else None
        island = program.metadata.get("island", 0) if program is not None else 0
        return int(island or 0) % len(database.islands)

    def take_parent(self, database: Any) -> Any:
        if not self.queue:
            raise RuntimeError("the controller asked for more parents than the policy chose")
        program_id = self.queue.popleft()
        program = self.program_of(database, program_id)
        if program is None:
            raise RuntimeError(f"parent {program_id} is neither in the database nor recorded")
        if program_id not in database.programs:  # dropped by MAP-Elites, or no program: the worker needs it
            database.programs[program_id] = program
            self.restored_parents += NO_PROGRAM not in program.metadata
        return program

    def program_of(self, database: Any, program_id: str) -> Any:
        """The program of an id: OpenEvolve's database holds it, or the run recorded it."""
        return database.programs.get(program_id) or self.known.get(program_id)


__all__ = ["METRIC", "RunState"]
