"""The record of one SkyDiscover run with a dream_gym policy: the world being written and the
policy's rounds (:class:`RunState`), and the slots of a round (:class:`Slot`, :data:`SLOT`).

:mod:`.bridge` runs each iteration of a round as a task of its own, in the context of its
:class:`Slot` (its number, worker slot, the parent the policy chose, the programs SkyDiscover's
evaluator scored for it); :meth:`RunState.added` records what SkyDiscover's database is given,
kept or refused, and :meth:`RunState.dropped` what it never is (a failed evaluation). An island
copy or migrant is no node: its children are its original's (:meth:`RunState.original`).
Nothing here imports SkyDiscover.
"""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.datasets.importers.skydiscover import COPY_KEYS, SEED_KEY, skydiscover_program
from dream_gym.integrations.bridge_state import BridgeState, node_record

METRIC = "combined_score"
_COPY_MARKS = (*COPY_KEYS, SEED_KEY)


@dataclass
class Evaluated:
    """One program SkyDiscover's evaluator scored in an iteration (the manager's watch)."""

    program_id: str
    parent_id: str | None
    solution: str
    metrics: dict[str, Any]
    artifacts: dict[str, Any]
    timestamp: float
    tokens: tuple[int, int] = (0, 0)  # (prompt, completion) of the LLM calls that made it


@dataclass
class Slot:
    """One iteration of a round: its number, worker slot, parent and what it evaluated."""

    iteration: int
    worker: int
    parent_id: str | None  # the policy's choice; None until SkyDiscover's own sample (native)
    evaluations: list[Evaluated] = field(default_factory=list)
    llm_calls: int = 0
    tokens: list[int] = field(default_factory=lambda: [0, 0])  # of its LLM calls since its last evaluation

    def take_tokens(self) -> tuple[int, int]:
        """The tokens of the LLM calls since the last evaluation (an answer that did not parse
        included), which the next evaluated program cost."""
        taken = (self.tokens[0], self.tokens[1])
        self.tokens[:] = [0, 0]
        return taken


#: The slot the running coroutine works for (each slot runs as a task of its own).
SLOT: contextvars.ContextVar[Slot | None] = contextvars.ContextVar("dream_gym_skydiscover_slot", default=None)


@dataclass(kw_only=True)
class RunState(BridgeState):
    """The bridge's side of one run: the world being written and the policy's rounds."""

    total_iterations: int
    dropped_dir: Path
    iterations_done: int = 0
    known: dict[str, Any] = field(default_factory=dict)  # every program recorded, by id
    copies: dict[str, Any] = field(default_factory=dict)  # island copies and migrants, by id
    database: Any = None  # SkyDiscover's database (set when the controller has made it)
    admitting: Slot | None = None  # the slot whose result SkyDiscover is processing
    recording: bool = True
    rounds_over: bool = False
    failed_iterations: int = 0
    last_failure: str | None = None  # why the last iteration without an admitted child had none

    # -- recording ------------------------------------------------------------------------------
    def added(self, database: Any, program: Any) -> None:
        """``database.add`` returned: record the program (kept or refused); a copy is no node, its
        children are its original's."""
        if is_copy(program):
            self.copies[program.id] = program
            return
        if not self.recording or program.id in self.writer:
            return
        kept = program.id in database.programs
        if not kept:
            program.metadata = dict(program.metadata or {}, not_kept="refused by the database")
            database._save_program(program, base_path=str(self.dropped_dir))
        self.record(program, kept=kept, island=island_of(database, program.id))

    def dropped(self, database: Any, program: Any) -> None:
        """A program SkyDiscover evaluated but never gave its database (a failed evaluation)."""
        if program.id in self.writer:
            return
        database._save_program(program, base_path=str(self.dropped_dir))
        self.record(program, kept=False, island=None)

    def record(self, program: Any, *, kept: bool, island: int | None) -> None:
        self.writer.append(self.node_of(program, kept=kept, island=island))
        self.known[program.id] = program

    def original(self, program_id: str) -> str:
        """The recorded program a copy stands for (AdaEvolve's island copies and migrants): the
        program it copies, or for a copy of the initial program on another island, the root."""
        seen = set()
        while program_id not in self.writer and program_id not in seen:
            seen.add(program_id)
            copy = self.copies.get(program_id)
            if copy is None and self.database is not None:
                copy = self.database.programs.get(program_id)  # a spawned island's copy is never add()ed
            if copy is None or not is_copy(copy):
                break
            metadata = copy.metadata or {}
            if SEED_KEY in metadata and copy.parent_id is None and self.writer.records:
                program_id = str(self.writer.records[0]["id"])
            elif copy.parent_id is not None:
                program_id = str(copy.parent_id)
            else:
                break
        return program_id

    def node_of(self, program: Any, *, kept: bool, island: int | None) -> dict[str, Any]:
        """The node of one program: the importer's own reading of it, with this run's round, slot,
        island and whether SkyDiscover's database kept it."""
        parsed = skydiscover_program(program.to_dict(), METRIC)
        parent = None if parsed.parent is None else self.original(parsed.parent)
        placement: dict[str, Any] = {"round": 0 if parent is None else self.round}
        if parent is not None and self.admitting is not None:
            placement["worker"] = self.admitting.worker
        record = node_record(parsed, parent, placement)
        record["skydiscover"] = dict(record["skydiscover"], kept=kept, island=island)
        evaluations = self.admitting.evaluations if self.admitting is not None else []
        tokens_in, tokens_out = next((e.tokens for e in evaluations if e.program_id == program.id), (0, 0))
        if tokens_in + tokens_out:
            record["cost"] = self.priced(tokens_in, tokens_out)
        return record

    def program(self, database: Any, program_id: str) -> Any:
        """The program of a node: in SkyDiscover's database, else as recorded (dropped, evicted)."""
        program = database.programs.get(program_id) or self.known.get(program_id)
        if program is None:
            raise RuntimeError(f"parent {program_id} is neither in SkyDiscover's database nor recorded")
        return program


def is_copy(program: Any) -> bool:
    return _marks_a_copy(program.metadata or {})


def _marks_a_copy(metadata: dict[str, Any]) -> bool:
    """Whether a program's metadata marks it an island copy or a migrant."""
    return any(key in metadata for key in _COPY_MARKS)


def remove_unrecorded(folders: list[Path], recorded: set[str]) -> None:
    """Remove the program files (``<folder>/*.json``) of programs the world does not hold, island
    copies and migrants excepted. SkyDiscover's database saves a program as it is given it, and the
    node is written after: a run killed in between leaves a file of a program that is in no record.
    A resumed run rebuilds its database from the world, so that file is stale, and an import of
    SkyDiscover's output would find one program too many. A file cut short by the kill, which no
    reader can parse, goes too."""
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            if path.stem in recorded:
                continue
            try:
                metadata = json.loads(path.read_text(encoding="utf-8")).get("metadata") or {}
            except (OSError, ValueError, AttributeError):
                metadata = {}
            if not (isinstance(metadata, dict) and _marks_a_copy(metadata)):
                path.unlink(missing_ok=True)


def island_of(database: Any, program_id: str) -> int | None:
    """The AdaEvolve island that holds a program (None for the other backends, or none holds it)."""
    archives = getattr(database, "archives", None)
    if getattr(database, "use_unified_archive", False) and archives:
        return next((i for i, archive in enumerate(archives) if archive.get(program_id) is not None), None)
    islands = getattr(database, "islands", None) or []
    return next((i for i, island in enumerate(islands) if any(p.id == program_id for p in island)), None)


__all__ = ["METRIC", "SLOT", "Evaluated", "RunState", "Slot", "is_copy", "island_of", "remove_unrecorded"]
