"""Run ShinkaEvolve 0.0.7 with a dream_gym exploration policy choosing the parents.

How ShinkaEvolve picks a parent: its ``ShinkaEvolveRunner`` (``shinka.core.async_runner``) asks
``self.async_db.sample_with_fix_mode_async(target_generation=g, ...)`` once per patch attempt of
generation ``g``; that ``AsyncProgramDatabase`` method opens a read-only ``ProgramDatabase`` in a
worker thread, which samples an island and builds a ``CombinedParentSelector``
(``shinka.database.parents``) on the spot, by the name in ``parent_selection_strategy``
(``weighted``, ``power_law``, ``beam_search``, ...), then draws the inspirations with a
``CombinedContextSelector``. The strategy is looked up by name inside that method: a selector
class cannot be registered from outside, so the hook is one level up.

What of ShinkaEvolve this bridge touches (documented methods of its public classes, overridden
in subclasses; nothing is patched in place):

* :class:`PolicyAsyncDatabase`, an ``AsyncProgramDatabase`` subclass, overrides
  ``sample_with_fix_mode_async``: the parent of generation ``g`` is the program the policy
  chose for it; the inspirations are ShinkaEvolve's own (its ``CombinedContextSelector`` on the
  parent, in the same read-only thread database), and a parent that is not ``correct`` gets
  ShinkaEvolve's fix mode (the fix prompt, its ancestors as context), the mode ShinkaEvolve uses
  for incorrect parents. It also overrides ``add_program_async`` to give each program a
  deterministic id (``uuid5`` of the seed and the generation) and to record every program as a
  world node once its row is committed.
* :class:`PolicyRunner`, a ``ShinkaEvolveRunner`` subclass, builds that database where the runner
  builds its own (the ``async_db`` attribute), and overrides ``_proposal_coordinator_task`` (the
  loop that starts proposals): per round it waits until every earlier proposal is evaluated,
  persisted and its side effects (archive, best program) applied, asks the policy for at most W
  parents (W = ShinkaEvolve's ``max_evaluation_jobs`` = ``max_proposal_jobs``) and starts one
  generation per parent with ShinkaEvolve's own ``_generate_proposal_async``. An empty batch
  stops the run the way ShinkaEvolve stops when its budget is spent. Rounds are synchronous, as
  in ``dream-gym grow``: the policy sees every program of the earlier rounds.

``policy=None`` (``--policy native``) keeps ShinkaEvolve's own coordinator and parent selection
(its asynchronous pipeline of W evaluations) and only records the world; a node's ``round`` is
then ``(generation - 1) // W + 1``.

**Determinism.** ShinkaEvolve 0.0.7 takes no seed; it draws from numpy's and Python's global
generators (patch type, full-rewrite variant, crossover partner, model kwargs) and from
SQLite's ``RANDOM()`` (inspirations), in threads and coroutines whose order depends on timing.
With a policy the bridge makes a run a function of its seed: before each patch prompt
(``_run_patch_async``, ``_run_fix_patch_async``, which draw synchronously before their first
``await``) the global generators are seeded from (seed, generation, attempt); the sampling
connection's ``RANDOM()`` is replaced by a generator seeded the same way; the request to an
OpenAI-compatible server carries ``seed`` (so two children of one parent differ); nodes are
written in generation order within a round; ids are derived from the seed. ShinkaEvolve's own
sampling (``native``) still depends on timing when W > 1.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import random
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from shinka.core import ShinkaEvolveRunner
from shinka.database import AsyncProgramDatabase, ProgramDatabase
from shinka.database.inspirations import CombinedContextSelector
from shinka.launch import JobScheduler
from shinka.llm import AsyncLLMClient

from dream_gym.integrations.shinkaevolve.state import METRIC, RunState, program_id, read_program_rows

ROUND_POLL_S = 0.05
_REQUEST_SEED: contextvars.ContextVar[int | None] = contextvars.ContextVar("dream_gym_request_seed", default=None)
#: what the patch calls of the generation a proposal works for spent (task-local; RunState.spent)
_SPENT: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar("dream_gym_spent", default=None)


def derived_seed(*parts: object) -> int:
    """A 32-bit seed from the run's seed and the parts that name one draw."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:4], "little")


def seeded_random(conn: sqlite3.Connection, seed: int) -> None:
    """Replace SQLite's ``RANDOM()`` on this connection by a generator seeded with ``seed``."""
    rng = random.Random(seed)
    conn.create_function("random", 0, lambda: rng.randint(-(2**63), 2**63 - 1))


def seed_global_generators(seed: int) -> None:
    """Seed the generators ShinkaEvolve's prompt sampler and model kwargs draw from."""
    np.random.seed(seed)
    random.seed(seed)


class PolicyAsyncDatabase(AsyncProgramDatabase):  # type: ignore[misc]
    """ShinkaEvolve's async database with the policy's parents and every program recorded."""

    def __init__(self, sync_db: Any, state: RunState, **kwargs: Any):
        super().__init__(sync_db, **kwargs)
        self.dream_state = state

    async def add_program_async(self, program: Any, *args: Any, **kwargs: Any) -> bool:
        self.dream_state.prepare(program)
        added = bool(await super().add_program_async(program, *args, **kwargs))
        if added:
            self.dream_state.admitted(program)
        return added

    async def sample_with_fix_mode_async(self, target_generation: Any = None, novelty_attempt: Any = None,
                                         max_novelty_attempts: Any = None, resample_attempt: Any = None,
                                         max_resample_attempts: Any = None) -> tuple[Any, list[Any], list[Any], bool]:
        state = self.dream_state
        if state.policy is None:
            return await super().sample_with_fix_mode_async(  # type: ignore[no-any-return]
                target_generation=target_generation, novelty_attempt=novelty_attempt,
                max_novelty_attempts=max_novelty_attempts, resample_attempt=resample_attempt,
                max_resample_attempts=max_resample_attempts)
        generation = int(target_generation)
        assignment = state.assigned.get(generation)
        if assignment is None:
            raise RuntimeError(f"ShinkaEvolve asked for a parent of generation {generation}, which the policy did not start")
        seed = derived_seed(state.seed, "context", generation, novelty_attempt, resample_attempt)
        loop = asyncio.get_running_loop()
        async with self._db_semaphore:
            return await loop.run_in_executor(self.executor, self._chosen, assignment.parent, seed)

    def _chosen(self, parent_id: str, seed: int) -> tuple[Any, list[Any], list[Any], bool]:
        """Parent ``parent_id`` with ShinkaEvolve's own context: inspirations for a correct
        parent, fix mode with its ancestors for an incorrect one (in a read-only database)."""
        thread_db = ProgramDatabase(self.sync_db.config, read_only=True)
        try:
            seeded_random(thread_db.conn, seed)
            parent = thread_db.get(parent_id)
            if parent is None:
                raise RuntimeError(f"the policy chose {parent_id}, which is not in ShinkaEvolve's database")
            config = thread_db.config
            if not parent.correct:
                count = config.num_archive_inspirations + config.num_top_k_inspirations
                return parent, thread_db.get_ancestry(parent.id, max_ancestors=count), [], True
            selector = CombinedContextSelector(
                cursor=thread_db.cursor, conn=thread_db.conn, config=config, get_program_func=thread_db.get,
                best_program_id=thread_db.best_program_id, get_island_idx_func=thread_db.island_manager.get_island_idx,
                program_from_row_func=thread_db._program_from_row,
            )
            archive, top_k = selector.sample_context(parent, config.num_archive_inspirations,
                                                     config.num_top_k_inspirations)
            return parent, archive, top_k, False
        finally:
            thread_db.close()


class OrderedScheduler(JobScheduler):  # type: ignore[misc]
    """ShinkaEvolve's job scheduler, reporting a finished evaluation of a policy round only once
    the lower generations of the round are reported (or ended without a program); with
    :meth:`PolicyRunner._process_completed_jobs_safely` the programs enter the database (and its
    archive) in generation order, whatever order their evaluations end in. (SQLite's ``ORDER BY
    RANDOM()``, which ShinkaEvolve's inspiration sampling uses, follows the order rows were
    inserted in.)"""

    def __init__(self, state: RunState, **kwargs: Any):
        super().__init__(**kwargs)
        self.dream_state = state

    def check_job_status(self, job: Any) -> bool:
        if super().check_job_status(job) or self.dream_state.waits(int(job.generation)):
            return True
        self.dream_state.reported.add(int(job.generation))
        return False


class SeededLLMClient(AsyncLLMClient):  # type: ignore[misc]
    """ShinkaEvolve's async LLM client that sends the proposal's ``seed`` with each request where
    ``send_seeds`` (an OpenAI-compatible server, such as dream_gym's agent server, uses it: two
    children of one parent with the same prompt get different answers, and a rerun gets the same
    ones), and counts what each call spent for its generation: ShinkaEvolve keeps the tokens of
    the patch attempt that made the program only."""

    def __init__(self, *args: Any, send_seeds: bool = True, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.send_seeds = send_seeds

    async def query(self, msg: str, system_msg: str, msg_history: list[Any] | None = None,
                    llm_kwargs: dict[str, Any] | None = None, model_sample_probs: list[float] | None = None,
                    model_posterior: list[float] | None = None) -> Any:
        seed = _REQUEST_SEED.get()
        if seed is not None and self.send_seeds:
            llm_kwargs = dict(llm_kwargs or self.get_kwargs(model_sample_probs=model_sample_probs))
            llm_kwargs["seed"] = seed
        result = await super().query(msg, system_msg, msg_history or [], llm_kwargs=llm_kwargs,
                                     model_sample_probs=model_sample_probs, model_posterior=model_posterior)
        spent = _SPENT.get()
        if spent is not None and result is not None:
            spent[0] += int(getattr(result, "input_tokens", 0) or 0)
            spent[1] += int(getattr(result, "output_tokens", 0) or 0)
            spent[2] += float(getattr(result, "cost", 0.0) or 0.0)
        return result


class PolicyRunner(ShinkaEvolveRunner):  # type: ignore[misc]
    """ShinkaEvolve's runner whose proposals run the policy's batches (see the module docstring)."""

    scheduler: Any
    next_generation_to_submit: int

    def __init__(self, *args: Any, state: RunState, workers: int, request_seeds: bool, **kwargs: Any):
        self.dream_state = state
        self.dream_workers = workers
        super().__init__(*args, **kwargs)
        self.scheduler.executor.shutdown(wait=False)
        self.scheduler = OrderedScheduler(state, job_type=self.evo_config.job_type, config=self.job_config,
                                          verbose=self.verbose)
        self.llm = SeededLLMClient(model_names=self.evo_config.llm_models, send_seeds=request_seeds,
                                   **dict(self.evo_config.llm_kwargs, headless_work_dir=str(self.results_dir)))

    # -- ShinkaEvolve's own settings, with W honoured ------------------------------------------------
    @property
    def async_db(self) -> Any:
        return self.__dict__.get("_dream_async_db")

    @async_db.setter
    def async_db(self, value: Any) -> None:
        """Where the runner builds its ``AsyncProgramDatabase``, build the bridge's instead."""
        if value is not None and not isinstance(value, PolicyAsyncDatabase):
            sync_db = value.sync_db
            value.executor.shutdown(wait=False)
            value.write_executor.shutdown(wait=False)
            value = PolicyAsyncDatabase(sync_db, self.dream_state, max_workers=self.max_db_workers,
                                        enable_deadlock_debugging=self.enable_deadlock_debugging)
        self.__dict__["_dream_async_db"] = value

    def _validate_concurrency_settings(self, max_evaluation_jobs: int, max_proposal_jobs: int,
                                       max_db_workers: int, cpu_count: int) -> tuple[int, int, int]:
        """W evaluations and W proposals at once, as asked (ShinkaEvolve would scale them down to
        the CPU count; every candidate is limited by dream_gym's sandbox instead)."""
        _, _, db_workers = super()._validate_concurrency_settings(
            max_evaluation_jobs, max_proposal_jobs, max_db_workers, cpu_count)
        return self.dream_workers, self.dream_workers, db_workers

    # -- seeds ---------------------------------------------------------------------------------------
    async def _run_patch_async(self, parent_program: Any, archive_programs: Any, top_k_programs: Any,
                               generation: int, *args: Any, **kwargs: Any) -> Any:
        self._seed_proposal(generation, kwargs)
        return await super()._run_patch_async(parent_program, archive_programs, top_k_programs, generation,
                                              *args, **kwargs)

    async def _run_fix_patch_async(self, incorrect_program: Any, ancestor_inspirations: Any, generation: int,
                                   *args: Any, **kwargs: Any) -> Any:
        self._seed_proposal(generation, kwargs)
        return await super()._run_fix_patch_async(incorrect_program, ancestor_inspirations, generation,
                                                  *args, **kwargs)

    def _seed_proposal(self, generation: int, kwargs: dict[str, Any]) -> None:
        """Seed the draws the patch prompt makes before its first ``await`` (this coroutine runs
        alone until then), and the request's ``seed`` (task-local)."""
        key = (self.dream_state.seed, generation, kwargs.get("novelty_attempt"), kwargs.get("resample_attempt"))
        seed_global_generators(derived_seed(*key, "prompt"))
        _REQUEST_SEED.set(derived_seed(*key, "request"))
        _SPENT.set(self.dream_state.spent_on(generation))

    # -- resume --------------------------------------------------------------------------------------
    async def _setup_async(self) -> None:
        await super()._setup_async()
        self.dream_state.catch_up()

    async def _restore_resume_progress(self) -> None:
        """ShinkaEvolve continues after the last generation in its database; a generation that
        was started (its folder exists) but killed before its program was saved is spent."""
        await super()._restore_resume_progress()
        started = [int(p.name.split("_", 1)[1]) for p in Path(self.results_dir).glob("gen_*")
                   if p.name.split("_", 1)[1].isdigit()]
        self.next_generation_to_submit = max(self.next_generation_to_submit, max(started, default=0) + 1)
        # the generations in flight at a hard stop: started after the last one saved (an earlier one
        # without a row is a proposal that made no program, which the run says as such)
        saved = {int(row.get("generation") or 0) for row in read_program_rows(self.dream_state.db_path)}
        self.dream_state.lost_generations = sorted(g for g in started if g > max(saved, default=0))

    # -- proposals -----------------------------------------------------------------------------------
    async def _process_completed_jobs_safely(self, completed_jobs: list[Any]) -> None:
        """Jobs found finished together are saved in generation order."""
        await super()._process_completed_jobs_safely(sorted(completed_jobs, key=lambda job: job.generation))

    def _is_job_hung(self, job: Any, now: float | None = None) -> bool:
        """A finished evaluation held back by :class:`OrderedScheduler` is not hung."""
        poll = getattr(job.job_id, "poll", None)
        if poll is not None and poll() is not None:
            return False
        return bool(super()._is_job_hung(job, now))

    async def _generate_proposal_async(self, generation: int, task_id: str) -> Any:
        job = None
        try:
            job = await super()._generate_proposal_async(generation, task_id)
            return job
        finally:
            if job is None:
                self.dream_state.resolved_without_program(generation)

    async def _proposal_coordinator_task(self) -> None:
        try:
            self.dream_state.check_started()  # (ShinkaEvolve's own selection would spend its budget on no baseline)
        except ValueError as exc:
            self._stop_with(exc)
            return
        if self.dream_state.policy is None:
            await super()._proposal_coordinator_task()
            return
        try:
            await self._policy_rounds()
        except Exception as exc:  # noqa: BLE001 - ShinkaEvolve would wait for ever: stop, and raise it after
            self._stop_with(exc)

    def _stop_with(self, exc: Exception) -> None:
        """End the run, and have it raise ``exc`` once ShinkaEvolve's loop has stopped."""
        self.dream_state.error = exc
        self.dream_state.stopped_by = "error"
        self._finish()

    async def _policy_rounds(self) -> None:
        state = self.dream_state
        while not self.should_stop.is_set():
            if self._get_in_flight_work_count() > 0 or self._has_background_side_effect_work():
                await asyncio.sleep(ROUND_POLL_S)
                continue
            await self._cleanup_completed_proposal_tasks()
            state.end_round()
            if state.interrupted:  # at a round's end: every program it started is saved
                state.stopped_by = "shutdown"
                self._finish()
                return
            left = self._get_remaining_generation_slots()
            batch = state.next_batch(min(self.max_evaluation_jobs, left)) if left > 0 else []
            if not batch:
                state.stopped_by = "policy" if left > 0 else "budget"
                self._finish()
                return
            self._start_batch(batch)

    def _start_batch(self, parents: list[str]) -> None:
        """One generation per chosen parent, in the batch's order, started as ShinkaEvolve does."""
        for slot, parent in enumerate(parents):
            generation = self.next_generation_to_submit
            self.next_generation_to_submit += 1
            self.assigned_generations.add(generation)
            self.dream_state.assign(generation, parent, slot)
            task_id = str(uuid.uuid4())
            self.active_proposal_tasks[task_id] = asyncio.create_task(
                self._generate_proposal_async(generation, task_id), name=f"proposal_{generation}")
        self._record_progress()

    def _finish(self) -> None:
        """Stop the run the way ShinkaEvolve's coordinator does when its budget is spent."""
        self.should_stop.set()
        self.slot_available.set()
        self.finalization_complete.set()

    async def run_async(self) -> None:
        self._dream_loop = asyncio.get_running_loop()
        await super().run_async()

    def _finish_soon(self) -> None:
        """:meth:`_finish` from a signal handler: on the event loop, between two of its steps."""
        loop = self.__dict__.get("_dream_loop")
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._finish)


def run_runner(runner: PolicyRunner, quiet: Callable[[], Any]) -> None:
    """Run ShinkaEvolve's loop (``quiet``: a context manager for its console output)."""
    with quiet():
        runner.run()


__all__ = ["METRIC", "PolicyAsyncDatabase", "PolicyRunner", "RunState", "SeededLLMClient", "program_id",
           "read_program_rows"]
