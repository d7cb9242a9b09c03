"""Test helper: write OpenEvolve output folders the way OpenEvolve writes them, resumed phases included.

Nothing here is copied from a real run; the layout and the records follow OpenEvolve's source
(github.com/codelion/openevolve):

* ``database.py``: ``Program.to_dict()`` fields (id, code, language, parent_id, generation,
  timestamp, iteration_found, metrics, complexity, diversity, metadata, artifacts_json,
  artifact_dir, prompts) saved as ``programs/<id>.json`` with a ``metadata.json`` beside them;
  ``migrate_programs`` copies the top programs of each island onto the next one as
  ``{id}_migrant_{island}`` with ``parent_id`` the original, the original's generation, metadata
  ``migrant: True`` and a fresh timestamp (iteration_found left at its default 0);
  ``_enforce_population_limit`` removes the worst programs but never the best or the new one;
* ``controller.py``: a fresh run adds the initial program under a new id, no parent, iteration 0;
  ``_save_checkpoint`` writes ``checkpoints/checkpoint_N/`` with ``best_program.py`` and
  ``best_program_info.json``; the final best goes to ``best/``; the output folder defaults to
  ``dirname(initial_program)/openevolve_output``;
* ``examples/circle_packing/README.md`` ("Running the Example"): the next phase is a fresh run
  whose initial program is ``.../checkpoints/checkpoint_N/best_program.py``, so its output lands
  in ``checkpoint_N/openevolve_output/`` (nested once per resume, as in a public circle-packing
  run of four phases).

The simulated evaluator is deterministic: each child's score moves a little from its parent's, and
every ``invalid_every``-th child fails with an ``error`` metric, as real evaluators report.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class SimProgram:
    id: str
    parent: str | None
    code: str
    metrics: dict[str, Any]
    iteration: int
    generation: int
    timestamp: float
    island: int
    phase: int
    migrant: bool = False

    @property
    def score(self) -> float | None:
        return None if "error" in self.metrics else self.metrics["combined_score"]

    def to_dict(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"island": self.island}
        if self.migrant:
            metadata["migrant"] = True
        else:
            metadata["changes"] = f"edit at iteration {self.iteration}"
        return {
            "id": self.id, "code": self.code, "language": "python", "parent_id": self.parent,
            "generation": self.generation, "timestamp": self.timestamp, "iteration_found": self.iteration,
            "metrics": self.metrics, "complexity": 0.0, "diversity": 0.0, "metadata": metadata,
            "artifacts_json": None, "artifact_dir": None, "prompts": None,
        }


@dataclass
class SimRun:
    """What the simulator knows and an importer must recover."""

    folder: Path
    programs: dict[str, SimProgram] = field(default_factory=dict)  # every program ever created
    snapshotted: set[str] = field(default_factory=set)  # ids saved in at least one checkpoint
    phase_roots: list[str] = field(default_factory=list)  # the initial program of each phase
    started_from: dict[str, str] = field(default_factory=dict)  # phase root -> best program it copies
    phase_dirs: list[Path] = field(default_factory=list)  # output folder of each phase
    resume_checkpoints: list[Path] = field(default_factory=list)  # checkpoint each later phase started from

    def best_valid(self, ids: set[str] | None = None) -> float:
        pool = self.programs if ids is None else {i: self.programs[i] for i in ids}
        return max(p.score for p in pool.values() if p.score is not None)


class _Phase:
    def __init__(self, run: SimRun, rng: random.Random, clock: list[float], phase: int, islands: int,
                 population: int | None, invalid_every: int):
        self.run, self.rng, self.clock, self.phase = run, rng, clock, phase
        self.islands, self.population, self.invalid_every = islands, population, invalid_every
        self.db: dict[str, SimProgram] = {}
        self.best: str | None = None

    def new_id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def tick(self) -> float:
        self.clock[0] += 1.0 + self.rng.random()
        return self.clock[0]

    def add(self, program: SimProgram) -> None:
        self.db[program.id] = program
        self.run.programs[program.id] = program
        best = self.db.get(self.best) if self.best else None
        if program.score is not None and (best is None or best.score is None or program.score > best.score):
            self.best = program.id
        if self.population is not None and len(self.db) > self.population:
            worst = sorted((p for p in self.db.values() if p.id not in (self.best, program.id)),
                           key=lambda p: -1.0 if p.score is None else p.score)
            for victim in worst[: len(self.db) - self.population]:
                del self.db[victim.id]

    def child_of(self, parent: SimProgram, iteration: int) -> SimProgram:
        failed = iteration % self.invalid_every == 0
        base = parent.score if parent.score is not None else 0.5
        metrics: dict[str, Any] = (
            {"runs_successfully": 0.0, "error": f"NameError: name 'x{iteration}' is not defined"} if failed
            else {"runs_successfully": 1.0, "combined_score": round(base + self.rng.uniform(-0.03, 0.06), 6)}
        )
        return SimProgram(self.new_id(), parent.id, f"{parent.code}\n# phase {self.phase} iteration {iteration}",
                          metrics, iteration, parent.generation + 1, self.tick(), iteration % self.islands,
                          self.phase)

    def migrate(self) -> None:
        for island in range(self.islands):
            members = [p for p in self.db.values() if p.island == island and p.score is not None]
            if not members:
                continue
            top = max(members, key=lambda p: p.score or 0.0)
            target = (island + 1) % self.islands
            copy = SimProgram(f"{top.id}_migrant_{target}", top.id, top.code, dict(top.metrics), 0,
                              top.generation, self.tick(), target, self.phase, migrant=True)
            self.db[copy.id] = copy
            self.run.programs[copy.id] = copy

    def checkpoint(self, output: Path, iteration: int) -> Path:
        folder = output / "checkpoints" / f"checkpoint_{iteration}"
        (folder / "programs").mkdir(parents=True, exist_ok=True)
        for program in self.db.values():
            (folder / "programs" / f"{program.id}.json").write_text(json.dumps(program.to_dict()))
            self.run.snapshotted.add(program.id)
        islands = [[p.id for p in self.db.values() if p.island == i] for i in range(self.islands)]
        (folder / "metadata.json").write_text(json.dumps({
            "islands": islands, "archive": [], "best_program_id": self.best, "last_iteration": iteration,
        }))
        self._write_best(folder, current_iteration=iteration)
        return folder

    def _write_best(self, folder: Path, **extra: Any) -> None:
        assert self.best is not None
        best = self.db[self.best]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "best_program.py").write_text(best.code)
        (folder / "best_program_info.json").write_text(json.dumps({
            "id": best.id, "generation": best.generation, "iteration": best.iteration, "metrics": best.metrics,
            "language": "python", "timestamp": best.timestamp, "saved_at": self.clock[0], **extra,
        }))

    def run_iterations(self, output: Path, initial_code: str, iterations: int, checkpoint_interval: int,
                       migration_interval: int) -> str:
        root = SimProgram(self.new_id(), None, initial_code,
                          {"runs_successfully": 1.0, "combined_score": self.initial_score(initial_code)},
                          0, 0, self.tick(), 0, self.phase)
        self.add(root)
        for iteration in range(1, iterations + 1):
            island = iteration % self.islands
            pool = [p for p in self.db.values() if p.island == island and p.score is not None and not p.migrant]
            pool = pool or [p for p in self.db.values() if p.score is not None and not p.migrant]
            pool.sort(key=lambda p: p.score or 0.0)
            parent = pool[-1] if self.rng.random() < 0.5 else self.rng.choice(pool)
            self.add(self.child_of(parent, iteration))
            if migration_interval and iteration % migration_interval == 0:
                self.migrate()
            if iteration % checkpoint_interval == 0:
                self.checkpoint(output, iteration)
        self._write_best(output / "best", parent_id=self.db[self.best].parent if self.best else None)
        return root.id

    def initial_score(self, code: str) -> float:
        # The resumed phase re-evaluates the best program it starts from: same code, same score.
        for program in self.run.programs.values():
            if program.code == code and program.score is not None:
                return program.score
        return 0.5


def write_resumed_run(
    folder: Path,
    *,
    iterations: tuple[int, ...] = (20, 15, 15, 10),
    resume_at: tuple[int, ...] = (20, 10, 15),
    checkpoint_interval: int = 5,
    migration_interval: int = 6,
    islands: int = 2,
    population: int | None = None,
    invalid_every: int = 7,
    seed: int = 0,
) -> SimRun:
    """An OpenEvolve run of ``len(iterations)`` phases, each started from ``checkpoint_<resume_at[k]>``
    of the phase before it; returns what the simulator knows."""
    assert len(resume_at) == len(iterations) - 1
    rng = random.Random(seed)
    clock = [1_700_000_000.0]
    run = SimRun(folder)
    output = folder / "openevolve_output"
    initial_code = "def solve():\n    return 0\n"
    for phase, count in enumerate(iterations):
        sim = _Phase(run, rng, clock, phase, islands, population, invalid_every)
        run.phase_dirs.append(output)
        root_id = sim.run_iterations(output, initial_code, count, checkpoint_interval, migration_interval)
        run.phase_roots.append(root_id)
        if phase > 0:
            info = json.loads((run.resume_checkpoints[-1] / "best_program_info.json").read_text())
            run.started_from[root_id] = info["id"]
        if phase + 1 < len(iterations):
            checkpoint = output / "checkpoints" / f"checkpoint_{resume_at[phase]}"
            run.resume_checkpoints.append(checkpoint)
            initial_code = (checkpoint / "best_program.py").read_text()
            output = checkpoint / "openevolve_output"
    return run
