"""Run OpenEvolve 0.4 with a dream_gym exploration policy choosing the parents.

How the hook works (what of OpenEvolve it touches, all documented hooks or overridable methods
of its public classes; nothing is patched in place):

* :class:`PolicyDatabase`, a ``ProgramDatabase`` subclass, overrides ``sample_from_island`` (the
  one place OpenEvolve's controller asks for a parent: ``ProcessParallelController.
  _submit_iteration``): it hands out the parents the policy chose, in order, and draws the
  inspirations with OpenEvolve's own ``_sample_inspirations``. It also overrides ``add`` and
  ``increment_island_generation`` to record every admitted program (migrant copies excepted)
  as a world node, through the :class:`~dream_gym.world.writer.WorldWriter`, once its
  artifacts are stored.
* The ``island_selector`` hook places each iteration on its parent's island, so children land
  where OpenEvolve's own sampling would put them.
* :class:`FailureLog` wraps the controller's evolution tracer: an iteration OpenEvolve logs as
  making no program (an LLM answer without a usable change) becomes a failed node under the parent
  it continued, as the importer reads OpenEvolve's failures log, so replay charges the attempt.
* :class:`PolicyOpenEvolve`, an ``OpenEvolve`` subclass, replaces the controller's database with
  the subclass and overrides ``_run_evolution_with_checkpoints`` (the controller's evolution
  phase): per round it asks the policy for a batch of at most W selections (W =
  ``evaluator.parallel_evaluations``) and runs OpenEvolve's own ``run_evolution`` for exactly
  those iterations, whose processing (database, artifacts, trace, checkpoints, island
  generations, migration) is OpenEvolve's. Rounds are synchronous, as in ``dream-gym grow``:
  the policy sees every program of the earlier rounds. An empty batch stops the run through
  the controller's ``request_shutdown``; a final checkpoint is saved.

The policy sees the run as a :class:`~dream_gym.replay.view.PrefixView` built by
:func:`dream_gym.online.real_tree.tree_view` from the nodes written so far (every program so far,
with its parent, ``combined_score`` and failure), so the same policy object runs unchanged here,
in ``grow`` and in replay. A parent MAP-Elites has dropped from the database is put back into
its program table when the policy continues from it (the worker needs its code). A population
smaller than the run is raised to hold it (``database.population_size``), so nothing the policy
saw is pruned before it can choose it.

``policy=None`` (``--policy native``) runs OpenEvolve's own sampling unchanged (its
pipelined schedule, 2W iterations in flight) and only records the world; its ``round`` is then
``(iteration - 1) // W + 1``.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import signal
import sys
import time
import uuid
from typing import Any

from openevolve.controller import OpenEvolve
from openevolve.database import Program as OEProgram
from openevolve.database import ProgramDatabase

from dream_gym.datasets.importers.openevolve_programs import NO_PROGRAM, answered_by_no_llm, from_failure
from dream_gym.integrations.openevolve.state import METRIC, RunState


class OrderedIdSet(set):  # type: ignore[type-arg]
    """A set of program ids that iterates in insertion order.

    OpenEvolve keeps each island and the archive as a ``set`` of ids and iterates them to sample
    inspirations and to list an island's programs for the prompt; a plain set of strings iterates
    in hash order, which changes with each process's hash seed, so two runs with the same seed
    would see different inspirations. Membership stays the set's own."""

    def __init__(self, items: Any = ()):
        super().__init__()
        self._order: dict[Any, None] = {}
        self.update(items)

    def __iter__(self) -> Any:
        return iter(list(self._order))

    def __reduce__(self) -> Any:
        return (OrderedIdSet, (list(self._order),))

    def copy(self) -> OrderedIdSet:
        return OrderedIdSet(self._order)

    def add(self, item: Any) -> None:
        super().add(item)
        self._order[item] = None

    def discard(self, item: Any) -> None:
        super().discard(item)
        self._order.pop(item, None)

    def remove(self, item: Any) -> None:
        super().remove(item)
        self._order.pop(item, None)

    def pop(self) -> Any:
        if not self._order:
            raise KeyError("pop from an empty set")
        item = next(iter(self._order))
        self.remove(item)
        return item

    def clear(self) -> None:
        super().clear()
        self._order.clear()

    def update(self, *others: Any) -> None:
        for other in others:
            for item in list(other):
                self.add(item)

    def _keep(self, kept: set[Any]) -> None:
        for item in [i for i in self._order if i not in kept]:
            self.remove(item)

    def intersection_update(self, *others: Any) -> None:
        self._keep(set(self).intersection(*others))

    def difference_update(self, *others: Any) -> None:
        self._keep(set(self).difference(*others))

    def symmetric_difference_update(self, other: Any) -> None:
        for item in dict.fromkeys(other):
            if item in self._order:
                self.remove(item)
            else:
                self.add(item)

    def __ior__(self, other: Any) -> OrderedIdSet:  # type: ignore[override,misc]
        self.update(other)
        return self

    def __iand__(self, other: Any) -> OrderedIdSet:  # type: ignore[override,misc]
        self.intersection_update(other)
        return self

    def __isub__(self, other: Any) -> OrderedIdSet:  # type: ignore[override,misc]
        self.difference_update(other)
        return self

    def __ixor__(self, other: Any) -> OrderedIdSet:  # type: ignore[override,misc]
        self.symmetric_difference_update(other)
        return self


def program_id(seed: int, *parts: Any) -> str:
    """A program id (UUID-shaped, as OpenEvolve's) derived from the run's seed and what identifies
    the program in the run, so the same seed gives the same ids."""
    digest = hashlib.sha256(json.dumps([int(seed), *parts], default=str).encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


class PolicyDatabase(ProgramDatabase):  # type: ignore[misc]
    """OpenEvolve's database with the parents chosen by the policy and every program recorded.

    Two changes make a run repeat with its seed: islands and archive iterate in insertion order
    (:class:`OrderedIdSet`), and each new program's random ``uuid4`` id is replaced, as it is
    added, by :func:`program_id` of the seed, its iteration, parent and code (a migrant copy: of
    its original and island); artifacts stored under the old id follow it."""

    islands: list[Any]  # OpenEvolve's attributes, replaced by ordered sets
    archive: Any

    def __init__(self, config: Any, state: RunState, population_strategy: Any = None):
        super().__init__(config, population_strategy=population_strategy)
        self.dream_state = state
        self.renamed: dict[str, str] = {}
        self._ordered_sets()

    def _ordered_sets(self) -> None:
        self.islands = [OrderedIdSet(island) for island in self.islands]
        self.archive = OrderedIdSet(self.archive)

    def load(self, path: str) -> None:
        super().load(path)
        self._ordered_sets()

    def add(self, program: Any, iteration: int | None = None, target_island: int | None = None) -> str | None:
        if self.dream_state.recording and program.id not in self.programs:
            self._rename(program, iteration, target_island)
        admitted = super().add(program, iteration=iteration, target_island=target_island)
        if admitted is not None and program.metadata.get("migrant") and program.parent_id is not None:
            self.dream_state.copies[program.id] = program.parent_id
        if admitted is not None:
            self.dream_state.admitted(program)
        return admitted  # type: ignore[no-any-return]

    def _rename(self, program: Any, iteration: int | None, target_island: int | None) -> None:
        seed = self.dream_state.seed
        if program.metadata.get("migrant"):
            new = program_id(seed, "migrant", program.parent_id, target_island)
        else:
            found = program.iteration_found if iteration is None else iteration
            new = program_id(seed, found, program.parent_id, target_island, program.code)
        while new in self.programs:  # the same program twice in one iteration (island seeds)
            new = program_id(seed, new)
        self.renamed[program.id] = new
        program.id = new

    def store_artifacts(self, program_id: str, artifacts: Any) -> None:
        super().store_artifacts(self.renamed.get(program_id, program_id), artifacts)

    def get_artifacts(self, program_id: str) -> Any:
        return super().get_artifacts(self.renamed.get(program_id, program_id))

    def increment_island_generation(self, island_idx: int | None = None) -> None:
        super().increment_island_generation(island_idx)
        self.dream_state.flush()  # the child's artifacts, trace and prompt are stored by now

    def sample_from_island(self, island_id: int, num_inspirations: int | None = None) -> tuple[Any, list[Any]]:
        if self.dream_state.policy is None:
            return super().sample_from_island(island_id, num_inspirations)  # type: ignore[no-any-return]
        parent = self.dream_state.take_parent(self)
        count = 5 if num_inspirations is None else num_inspirations
        inspirations = self._sample_inspirations(parent, n=count, island_id=island_id % len(self.islands))
        return parent, inspirations


class PolicyOpenEvolve(OpenEvolve):  # type: ignore[misc]
    """OpenEvolve whose evolution phase runs the policy's batches (see the module docstring)."""

    def __init__(self, initial_program_path: str, evaluation_file: str, config: Any, state: RunState,
                 output_dir: str | None = None):
        selector = None if state.policy is None else self._parent_island
        super().__init__(initial_program_path, evaluation_file, config, output_dir=output_dir,
                         island_selector=selector)
        self.dream_state = state
        self.database = PolicyDatabase(self.config.database, state)
        self.evaluator.database = self.database
        tracer: Any = getattr(self, "evolution_tracer", None)  # the run's config turns it on (include_failures)
        if tracer is not None:
            self.evolution_tracer = FailureLog(tracer, self.database)

    def _parent_island(self, _context: Any) -> int:
        """The ``island_selector`` hook: the island of the parent queued for this iteration."""
        return self.dream_state.next_parent_island(self.database)

    async def _run_evolution_with_checkpoints(self, start_iteration: int, max_iterations: int,
                                              target_score: float | None) -> None:
        state = self.dream_state
        state.flush()  # the initial program
        controller = self.parallel_controller
        iteration = max(start_iteration, self.database.last_iteration + 1, 1)
        end = state.total_iterations + 1
        if state.policy is None:  # OpenEvolve's own sampling and schedule, from where the world ends
            state.check_started()
            if iteration < end:
                await super()._run_evolution_with_checkpoints(iteration, end - iteration, target_score)
                done = getattr(controller, "completed_iterations", None)  # OpenEvolve 0.4.1's count
                state.iterations_run = None if done is None else iteration - 1 + int(done)
                # why OpenEvolve's own loop ended (its stop() sets the shutdown event too, but later)
                if controller.shutdown_event.is_set():
                    state.stopped_by = "shutdown"
                elif controller.early_stopping_triggered:
                    state.stopped_by = "early_stopping"
            state.flush()
            return
        pool = controller.executor = InOrderPool(controller.executor)
        oe_log = logging.getLogger("openevolve.process_parallel")
        oe_log.addFilter(_per_round_verdict)
        try:
            iteration, completed, successful, last_saved = await self._rounds(iteration, end, target_score, pool)
        finally:
            oe_log.removeFilter(_per_round_verdict)
            if controller.executor is pool:
                controller.executor = pool.executor
        final = state.iterations_run = iteration - 1
        if final > 0 and final != last_saved:
            self._save_checkpoint(final)  # the whole run, for the importer
        if state.stopped_by == "policy":
            controller.request_shutdown()  # the empty batch is OpenEvolve's shutdown
        controller.completed_iterations = completed
        controller.successful_iterations = successful
        controller.produced_no_candidates = completed > 0 and successful == 0

    async def _rounds(self, iteration: int, end: int, target_score: float | None,
                      pool: InOrderPool) -> tuple[int, int, int, int | None]:
        """The policy's rounds, from ``iteration`` up to ``end``: (next iteration, completed,
        successful, last checkpointed iteration)."""
        state = self.dream_state
        controller = self.parallel_controller
        completed = successful = 0
        last_saved = None
        while iteration < end and not controller.shutdown_event.is_set():
            batch = state.next_batch(end - iteration)
            if not batch:
                state.stopped_by = "policy"
                break
            for slot in range(len(batch)):
                state.slot_of[iteration + slot] = slot
            pool.new_round()
            await controller.run_evolution(iteration, len(batch), target_score,
                                           checkpoint_callback=self._save_checkpoint)
            state.flush()
            # per-call counters of OpenEvolve 0.4.1 (0.4.0 has none: count the batch)
            done = getattr(controller, "completed_iterations", len(batch))
            completed += done
            successful += getattr(controller, "successful_iterations", len(batch))
            if controller.shutdown_event.is_set():
                # Ctrl-C or SIGTERM in the round: OpenEvolve cancels the iterations still in flight
                # without a word, and the round's results arrive in iteration order (InOrderPool),
                # so the ones run are its first ``done``; the others were never proposals
                iteration += min(done, len(batch))
                state.stopped_by = "shutdown"
                break
            if iteration + len(batch) - 1 >= 1 and (iteration + len(batch) - 1) % self.config.checkpoint_interval == 0:
                last_saved = iteration + len(batch) - 1
            iteration += len(batch)
            if state.llm_failures:  # no answer from the LLM: stop, as grow does (--resume runs them again)
                state.stopped_by = "llm_failed"
                break
            if controller.early_stopping_triggered:
                state.stopped_by = "early_stopping"
                break
            if target_score is not None and _best_combined(self.database) >= target_score:
                state.stopped_by = "target_score"
                break
        else:
            if controller.shutdown_event.is_set():
                state.stopped_by = "shutdown"
        return iteration, completed, successful, last_saved


class FailureLog:
    """OpenEvolve's evolution tracer, which also records each iteration it logs as making no
    program (an LLM answer with no usable change) as a failed node under the parent it continued,
    after OpenEvolve has written the line (:func:`~dream_gym.datasets.importers.openevolve_programs.
    from_failure`, as the importer reads that line). OpenEvolve logs them in the controller's loop,
    in iteration order with the admitted programs. A worker that timed out or crashed names no
    parent: no node, as in the import. Nor is an iteration whose LLM call failed (no answer came):
    it is kept in ``llm_failures``, and a policy's run stops after its round."""

    def __init__(self, tracer: Any, database: PolicyDatabase):
        self.tracer = tracer
        self.database = database

    def log_failure(self, iteration: int, error: str, parent_id: str | None = None, **fields: Any) -> None:
        self.tracer.log_failure(iteration=iteration, error=error, parent_id=parent_id, **fields)
        state = self.database.dream_state
        parent = state.program_of(self.database, parent_id) if parent_id is not None else None
        if parent is None:
            return
        entry = {"iteration": iteration, "parent_id": parent_id, "error": error, "island_id": fields.get("island_id"),
                 "token_usage": fields.get("token_usage"), "timestamp": time.time()}
        if answered_by_no_llm(entry):  # no answer, so no attempt: the run stops after the round
            state.llm_failures.append(f"iteration {iteration}: {error}")
            return
        raw = from_failure(entry, parent.to_dict())
        if raw is not None:
            state.made_no_program(OEProgram(**raw))

    def __getattr__(self, name: str) -> Any:  # log_trace, flush_buffer, close, ...: the tracer's own
        return getattr(self.tracer, name)


def _per_round_verdict(record: logging.LogRecord) -> bool:
    """Drop OpenEvolve's "None of the N iterations produced a candidate program" error: it ends each
    ``run_evolution`` call, which the bridge makes once a round, so it would call a round whose
    answers held no program a failed run. The run's own verdict (every round made nothing) is the
    controller's, at the end."""
    return not str(record.msg).startswith("❌ None of the")


class InOrderPool:
    """The controller's process pool, with a round's results handed over in iteration order.

    OpenEvolve's ``run_evolution`` takes the first finished future of those in flight, so the
    order in which a round's children enter the database (and so the database's later sampling)
    would depend on which worker finished first. Each future of a round reports itself done only
    once the round's earlier futures are done too; the work still runs in parallel."""

    def __init__(self, executor: Any):
        self.executor = executor
        self._round: list[Any] = []

    def new_round(self) -> None:
        self._round = []

    def submit(self, function: Any, *args: Any, **kwargs: Any) -> InOrderFuture:
        future = self.executor.submit(function, *args, **kwargs)
        ordered = InOrderFuture(future, tuple(self._round))
        self._round.append(future)
        return ordered

    def __getattr__(self, name: str) -> Any:  # shutdown, _processes, ...: the pool's own
        return getattr(self.executor, name)


class InOrderFuture:
    """A future that is done when it and every earlier future of its round are done."""

    def __init__(self, future: Any, earlier: tuple[Any, ...]):
        self.future = future
        self.earlier = earlier

    def done(self) -> bool:
        return self.future.done() and all(f.done() for f in self.earlier)

    def __getattr__(self, name: str) -> Any:  # result, cancel, exception, ...
        return getattr(self.future, name)


def _best_combined(database: Any) -> float:
    best = database.get_best_program()
    value = best.metrics.get(METRIC) if best is not None else None
    return float(value) if isinstance(value, (int, float)) else float("-inf")


# -- resume ----------------------------------------------------------------------------------------
def restore_database(database: Any, records: list[dict[str, Any]], state: RunState) -> None:
    """Rebuild OpenEvolve's database from the world's nodes, in their order, the way the
    controller built it (add, island generation, migration when due); nothing is re-recorded."""
    state.recording = False
    try:
        for record in records:
            program = program_from_node(record)
            if NO_PROGRAM in program.metadata:  # never in OpenEvolve's database, until continued
                state.known[program.id] = program
                database.last_iteration = max(database.last_iteration, program.iteration_found)
                continue
            island = (record.get("openevolve") or {}).get("island")
            database.add(program, iteration=program.iteration_found,
                         target_island=None if island is None else int(island))
            state.known[program.id] = program
            diagnostics = record.get("diagnostics")
            if isinstance(diagnostics, dict) and diagnostics:
                database.store_artifacts(program.id, {str(k): str(v) for k, v in diagnostics.items()})
            if record.get("parent") is not None:
                database.increment_island_generation(island_idx=program.metadata.get("island"))
                if database.should_migrate():
                    database.migrate_programs()
    finally:
        state.recording = True
    state.round = max((int(r.get("round") or 0) for r in records), default=0)


def program_from_node(record: dict[str, Any]) -> Any:
    extra = record.get("openevolve") or {}
    metadata = dict(extra.get("metadata") or {})
    if extra.get("island") is not None:
        metadata["island"] = int(extra["island"])
    if extra.get("changes"):
        metadata["changes"] = extra["changes"]
    return OEProgram(
        id=str(record["id"]), code=str(record.get("code") or ""), parent_id=record.get("parent"),
        language=extra.get("language") or "python", generation=int(extra.get("generation") or 0),
        timestamp=float(extra.get("timestamp") or time.time()),
        iteration_found=int(extra.get("iteration_found") or 0),
        metrics=dict(record.get("metrics") or {}), metadata=metadata,
        changes_description=str(extra.get("changes") or ""),
    )


# -- processes -------------------------------------------------------------------------------------
_OWNER: dict[str, Any] = {"pid": None}
_PR_SET_PDEATHSIG = 1


def _after_fork_in_child() -> None:
    """OpenEvolve forks its workers from this process: a direct child closes its copies of the
    locks this process holds (so a worker left behind cannot keep the world locked) and dies
    with it (``kill -9`` of the run ends its workers too)."""
    owner = _OWNER["pid"]
    if owner is None or os.getppid() != owner:
        return
    from dream_gym.infrastructure import locks

    for held in list(locks._held.values()):
        if held.pid == owner:
            try:
                os.close(held.fd)
            except OSError:
                pass
    locks._held.clear()
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != owner:
            os._exit(1)


_HOOKED = {"done": False}


def guard_forks() -> None:
    """Install :func:`_after_fork_in_child` for this process (once)."""
    _OWNER["pid"] = os.getpid()
    if not _HOOKED["done"]:
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _HOOKED["done"] = True


def stop_guarding_forks() -> None:
    _OWNER["pid"] = None
