"""Run SkyDiscover 0.1 with a dream_gym exploration policy choosing the parents.

How the hook works (SkyDiscover's own plug-in interface, :mod:`skydiscover.search.route`:
``register_database`` and ``register_manager``; nothing of SkyDiscover is patched):

* For each backend whose search is a ``ProgramDatabase`` (``topk``, ``best_of_n``,
  ``beam_search``, ``adaevolve``) a subclass of its database is registered under
  ``dream_gym_<backend>`` (:data:`SEARCH_TYPES`). It overrides ``sample``, the one place
  SkyDiscover's loop asks for a parent: it returns the parent the policy chose for the iteration
  being run, with inspirations by the backend's own rule (AdaEvolve: the most different of its
  island's archive plus the global top; the others: the top programs); with ``--policy native``
  it calls the backend's own ``sample``. It also overrides ``add`` to record every program the
  database is given (island copies and migrants excepted) as a world node.
* A subclass of the backend's discovery manager (``DiscoveryManager``, ``AdaEvolveManager``)
  overrides ``run_discovery``, the orchestration SkyDiscover's managers leave to subclasses:
  per round it asks the policy for at most W parents (W = ``evaluator.parallel_evaluations``)
  and runs the manager's own iteration for each (prompt, LLM call, diff, evaluation:
  ``_run_iteration``, AdaEvolve's ``_run_normal_step``) concurrently; when all are done
  it hands the results to the manager's own processing in slot order (database ``add``,
  prompt log, checkpoints; AdaEvolve's ``end_iteration``: island rotation, migration). Rounds
  are synchronous, as in ``dream-gym grow``. With ``native`` the same rounds run SkyDiscover's own
  ``sample`` W times (SkyDiscover's own loops run one iteration at a time: ``-W 1`` is that loop).
* Every program SkyDiscover evaluates is a node: its loop keeps no program whose evaluation
  failed (its retries are new programs) and AdaEvolve's archive may refuse one, so the manager
  watches its evaluator (:meth:`RoundsManager._watch_evaluations`), records the programs the
  database did not keep as nodes too and saves each with SkyDiscover's own program writer under
  ``skydiscover/dropped/`` (metadata ``not_kept``: why), so that SkyDiscover's output holds every
  program of the world.
* Each LLM call carries a seed of its own (the run's LLM seed, the iteration and the call): the
  LLM client is SkyDiscover's ``OpenAILLM`` given through its ``LLMModelConfig.init_client`` hook.

When a policy chooses, an iteration evaluates one program. SkyDiscover's default loop retries a
program whose evaluation failed within its iteration (a new program from the same parent, the
failure shown in its prompt): an attempt no policy chose, which replay (one child a selection)
would charge as a selection the run never made. So a failed program ends its iteration, retrying
its parent is the policy choosing it again, and ``--budget`` counts programs, as on the other
systems; an answer that did not parse (no program, nothing evaluated) is still asked again, up to
SkyDiscover's retry count, afresh. ``native`` keeps SkyDiscover's retries. AdaEvolve retries only
answers that made no program, so its loop is unchanged. AdaEvolve's paradigm breakthrough is
turned off when a policy chooses: an active paradigm makes AdaEvolve continue from its best
program instead of the sampled parent. EvoX and the external
backends (``openevolve``, ``shinkaevolve``, ``gepa``) have no database sampling to hook: see
:func:`check_search`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from pathlib import Path
from typing import Any

from skydiscover.llm.openai import OpenAILLM
from skydiscover.search.adaevolve.database import AdaEvolveDatabase
from skydiscover.search.adaevolve.manager import AdaEvolveManager
from skydiscover.search.base_database import Program
from skydiscover.search.beam_search.database import BeamSearchDatabase
from skydiscover.search.best_of_n.database import BestOfNDatabase
from skydiscover.search.default_discovery_manager import DiscoveryManager
from skydiscover.search.main_controller import MainController
from skydiscover.search.route import register_database, register_manager
from skydiscover.search.topk.database import TopKDatabase
from skydiscover.utils.metrics_utils import get_fitness_score

from dream_gym.integrations import stopping
from dream_gym.integrations.skydiscover.state import (
    SLOT,
    Evaluated,
    RunState,
    Slot,
    is_copy,
    island_of,
    remove_unrecorded,
)

PREFIX = "dream_gym_"
#: The attempts SkyDiscover's default loop makes per iteration (the default of its run_discovery).
RETRY_TIMES: int = inspect.signature(DiscoveryManager.run_discovery).parameters["retry_times"].default


# -- databases --------------------------------------------------------------------------------------
class PolicySampling:
    """Mixed into a backend's database: ``sample`` hands out the policy's parent; ``add`` records."""

    dream_state: RunState | None = None

    def __init__(self, name: str, config: Any):
        # SkyDiscover loads an existing db_path when a database is made: a resumed run rebuilds
        # its database from the world instead (run.restore_database), and saves as it adds
        db_path, config.db_path = config.db_path, None
        try:
            super().__init__(name, config)  # type: ignore[call-arg]
        finally:
            config.db_path = db_path

    def sample(self, num_inspirations: int | None = None, **kwargs: Any) -> tuple[dict[str, Any], dict[str, list[Any]]]:
        slot = SLOT.get()
        state = self.dream_state
        if state is None or state.policy is None or slot is None or slot.parent_id is None:
            parents, inspirations = super().sample(num_inspirations, **kwargs)  # type: ignore[misc]
            if slot is not None:
                slot.parent_id = next(iter(parents.values())).id  # SkyDiscover's own choice
            return parents, inspirations  # type: ignore[no-any-return]
        parent = state.program(self, slot.parent_id)
        return {"": parent}, {"": self.policy_inspirations(parent, num_inspirations or 5)}

    def policy_inspirations(self, parent: Any, count: int) -> list[Any]:
        """The top programs but the parent (the rule of topk and beam_search)."""
        top = self.get_top_programs(count + 1)  # type: ignore[attr-defined]
        return [p for p in top if p.id != parent.id][:count]

    def add(self, program: Any, iteration: int | None = None, **kwargs: Any) -> str:
        state = self.dream_state
        if state is not None and state.policy is not None and program.parent_id and not is_copy(program):
            self.place_child(program)
        added: str = super().add(program, iteration=iteration, **kwargs)  # type: ignore[misc]
        if state is not None:
            state.added(self, program)
        return added

    def place_child(self, program: Any) -> None:
        """Where a policy-chosen parent's child goes (AdaEvolve: the parent's island)."""


class PolicyTopK(PolicySampling, TopKDatabase):  # type: ignore[misc]
    pass


class PolicyBestOfN(PolicySampling, BestOfNDatabase):  # type: ignore[misc]
    pass


class PolicyBeamSearch(PolicySampling, BeamSearchDatabase):  # type: ignore[misc]
    pass


class PolicyAdaEvolve(PolicySampling, AdaEvolveDatabase):  # type: ignore[misc]
    def policy_inspirations(self, parent: Any, count: int) -> list[Any]:
        """AdaEvolve's own mix: the most different of the parent's island, then the global top."""
        if not (self.use_unified_archive and self.archives):
            return self._sample_global_top(parent.id, count)  # type: ignore[no-any-return]
        island = island_of(self, parent.id)
        archive = self.archives[self.current_island if island is None else island]
        local_count = max(1, int(count * self.local_inspiration_ratio))
        local = archive.sample_inspirations(parent, local_count)
        return list(local) + list(self._sample_global_top(parent.id, count - local_count))

    def place_child(self, program: Any) -> None:
        island = island_of(self, program.parent_id)
        if island is not None:
            self.current_island = island


# -- managers ---------------------------------------------------------------------------------------
class RoundsManager:
    """Mixed into a backend's discovery manager: rounds of W iterations, every program recorded."""

    dream_state: RunState
    database: Any
    evaluator: Any
    shutdown_event: Any
    config: Any

    def __init__(self, manager_input: Any):
        super().__init__(manager_input)  # type: ignore[call-arg]
        self.dream_state = manager_input.database.dream_state
        self._watch_evaluations()

    def _watch_evaluations(self) -> None:
        """Note every program the evaluator scores for a slot (the retries' too)."""
        evaluate = self.evaluator.evaluate_program

        async def watched(program_solution: str, program_id: str = "") -> Any:
            result = await evaluate(program_solution, program_id)
            slot = SLOT.get()
            if slot is not None:
                slot.evaluations.append(Evaluated(
                    program_id, slot.parent_id, program_solution, dict(result.metrics or {}),
                    dict(result.artifacts or {}), time.time(), slot.take_tokens()))
            return result

        self.evaluator.evaluate_program = watched

    def request_shutdown(self) -> None:
        """SkyDiscover's first Ctrl-C or SIGTERM: the round in flight finishes, and the run says so."""
        super().request_shutdown()  # type: ignore[misc]
        stopping.say_stopping("the iterations in flight")

    async def run_discovery(self, start_iteration: int, max_iterations: int,
                            checkpoint_callback: Any = None, **_: Any) -> Any:
        state = self.dream_state
        self._before_rounds()
        iteration = state.iterations_done + 1
        end = state.total_iterations + 1
        while iteration < end and not self.shutdown_event.is_set():
            limit = min(state.workers, end - iteration)
            if state.policy is None:
                state.check_started()
                parents: list[str | None] = [None] * limit
            else:
                parents = list(state.choose(limit))
                if not parents:
                    state.stopped_by = "policy"
                    break
            await self._before_round()
            slots = [Slot(iteration + k, k, parent) for k, parent in enumerate(parents)]
            state.round += 1
            state.batches.append(len(slots))
            results = await asyncio.gather(*(self._run_slot(slot) for slot in slots), return_exceptions=True)
            for slot, result in zip(slots, results, strict=True):
                self._admit_slot(slot, result, checkpoint_callback)
            iteration += len(slots)
            state.iterations_done = iteration - 1
            state.writer.update_meta(skydiscover=dict(state.writer.meta.get("skydiscover") or {},
                                                      iterations_done=state.iterations_done))
        else:
            if self.shutdown_event.is_set():
                state.stopped_by = "shutdown"
        state.rounds_over = True
        return self.database.get_best_program()

    async def _run_slot(self, slot: Slot) -> Any:
        SLOT.set(slot)  # this task's own context: its sample, evaluations and LLM calls see it
        return await self._propose(slot.iteration)

    def _admit_slot(self, slot: Slot, result: Any, checkpoint_callback: Any) -> None:
        """Record the slot's programs in the order they were evaluated: those SkyDiscover drops
        first, then its result through the manager's own processing (database add, logs)."""
        state = self.dream_state
        if isinstance(result, BaseException):
            result = _error_result(slot.iteration, f"{type(result).__name__}: {result}")
        child = result.child_program_dict if isinstance(result.child_program_dict, dict) else None
        admitted = None if result.error or child is None else child.get("id")
        state.admitting = slot
        try:
            for evaluated in slot.evaluations:
                if evaluated.program_id == admitted:
                    continue
                final = child if child is not None and child.get("id") == evaluated.program_id else None
                state.dropped(self.database, self._dropped_program(evaluated, final, slot))
            if admitted is not None:
                self._admit(result, slot.iteration, checkpoint_callback)
            else:
                state.failed_iterations += 1
                state.last_failure = result.error or "no child program"
            self._after_iteration(slot.iteration, result)
        finally:
            state.admitting = None

    def _dropped_program(self, evaluated: Evaluated, final: dict[str, Any] | None, slot: Slot) -> Any:
        """A Program for an evaluation SkyDiscover kept nowhere: its own failed child when it made
        one, else rebuilt from what the evaluator was given and returned."""
        if final is not None:
            program = Program.from_dict(final)
        else:
            parent = self.dream_state.known.get(evaluated.parent_id or "")
            program = Program(
                id=evaluated.program_id, solution=evaluated.solution, language=self.config.language or "python",
                metrics=evaluated.metrics, iteration_found=slot.iteration, parent_id=evaluated.parent_id,
                timestamp=evaluated.timestamp, artifacts=evaluated.artifacts,
                generation=(parent.generation + 1) if parent is not None else 0,
                metadata={"parent_metrics": dict(parent.metrics) if parent is not None else {}},
            )
        program.metadata = dict(program.metadata or {}, not_kept="evaluation failed (SkyDiscover keeps no failed "
                                "program; a retry is a new program)")
        return program

    # -- what each backend's manager does per iteration ------------------------------------------
    def _before_rounds(self) -> None:
        pass

    async def _before_round(self) -> None:
        pass

    async def _propose(self, iteration: int) -> Any:
        raise NotImplementedError

    def _admit(self, result: Any, iteration: int, checkpoint_callback: Any) -> None:
        raise NotImplementedError

    def _after_iteration(self, iteration: int, result: Any) -> None:
        pass


def _error_result(iteration: int, error: str) -> Any:
    from skydiscover.search.utils.discovery_utils import SerializableResult

    return SerializableResult(error=error, iteration=iteration)


class PolicyDiscoveryManager(RoundsManager, DiscoveryManager):  # type: ignore[misc]
    """SkyDiscover's default loop (topk, best_of_n, beam_search) in rounds."""

    async def _propose(self, iteration: int) -> Any:
        if self.dream_state.policy is None:
            return await self._run_iteration(iteration, retry_times=RETRY_TIMES)
        slot = SLOT.get()  # a policy chose: one evaluated program an iteration (the module doc)
        for _ in range(RETRY_TIMES):
            result = await self._run_iteration(iteration, retry_times=1)
            unparsed = result.error and result.child_program_dict is None and result.llm_response is not None
            if not unparsed or (slot is not None and slot.evaluations):
                break
        return result

    def _admit(self, result: Any, iteration: int, checkpoint_callback: Any) -> None:
        self._process_iteration_result(result, iteration, checkpoint_callback)


class PolicyAdaEvolveManager(RoundsManager, AdaEvolveManager):  # type: ignore[misc]
    """AdaEvolve's loop in rounds: its seeding, retries, stats log, island rotation and migration."""

    def _before_rounds(self) -> None:
        self._setup_iteration_stats_logging()
        self._ensure_all_islands_seeded()

    async def _before_round(self) -> None:
        # once a round, not per slot: AdaEvolve's paradigm state is not made for concurrent iterations
        if self.database.use_paradigm_breakthrough and self.database.is_paradigm_stagnating():
            await self._generate_paradigms_if_needed()

    async def _propose(self, iteration: int) -> Any:
        return await self._run_normal_step(iteration)

    def _admit(self, result: Any, iteration: int, checkpoint_callback: Any) -> None:
        self._process_result(result, iteration, checkpoint_callback)

    def _after_iteration(self, iteration: int, result: Any) -> None:
        self._log_iteration_stats(iteration=iteration, child_program=None if result.error else result.child_program_dict,
                                  iteration_time=result.iteration_time, error=result.error)
        self.database.end_iteration(iteration)


# -- the controller and resume ----------------------------------------------------------------------
class BridgeController(MainController):  # type: ignore[misc]
    """SkyDiscover's MainController (initial program, seeds, checkpoints, the final best); its
    final checkpoint is named by the last iteration run, also when the policy stopped early."""

    def _save_checkpoint(self, iteration: int) -> None:
        state: RunState | None = getattr(self.database, "dream_state", None)
        if state is not None and state.rounds_over:
            iteration = min(iteration, state.iterations_done)
        super()._save_checkpoint(iteration)


def restore_database(database: Any, records: list[dict[str, Any]], state: RunState) -> None:
    """Rebuild SkyDiscover's database from the world's nodes the way the run built it: the initial
    program (on every AdaEvolve island), then per iteration the programs the database kept, each on
    its recorded island, and the backend's end of iteration (AdaEvolve: rotation, migration).
    Nothing is recorded again, nor saved again; the backends' sampling counters start afresh.
    A program file the killed run saved but never recorded is removed."""
    programs = {str(r["id"]): program_from_node(r) for r in records}
    saved = [Path(database.config.db_path) / "programs"] if database.config.db_path else []
    remove_unrecorded([*saved, state.dropped_dir / "programs"], set(programs))
    state.known.update(programs)
    meta = state.writer.meta.get("skydiscover") or {}
    done = max([int(meta.get("iterations_done") or 0)]
               + [int((r.get("skydiscover") or {}).get("iteration_found") or 0) for r in records])
    kept: dict[int, list[dict[str, Any]]] = {}
    for record in records[1:]:
        sky = record.get("skydiscover") or {}
        if sky.get("kept", True):
            kept.setdefault(int(sky.get("iteration_found") or 0), []).append(record)
    state.recording = False
    db_path, database.config.db_path = database.config.db_path, None
    try:
        root = programs[str(records[0]["id"])]
        seed_all = getattr(database, "seed_all_islands", None)
        if seed_all is not None:
            seed_all(root, iteration=0)
        else:
            database.add(root)
        database.initial_program_id, database.initial_program_score = root.id, get_fitness_score(root.metrics or {})
        end_iteration = getattr(database, "end_iteration", None)
        for iteration in range(1, done + 1):
            for record in kept.get(iteration, []):
                island = (record.get("skydiscover") or {}).get("island")
                if island is not None and int(island) < int(getattr(database, "num_islands", 0)):
                    database.current_island = int(island)
                database.add(programs[str(record["id"])], iteration=iteration, parent_id=record["parent"])
            if end_iteration is not None:
                end_iteration(iteration)
    finally:
        database.config.db_path = db_path
        state.recording = True
    state.iterations_done = done
    state.round = max((int(r.get("round") or 0) for r in records), default=0)


def program_from_node(record: dict[str, Any]) -> Any:
    """The SkyDiscover Program a node was recorded from."""
    sky = record.get("skydiscover") or {}
    metadata = dict(sky.get("metadata") or {})
    if sky.get("changes"):
        metadata["changes"] = sky["changes"]
    diagnostics = record.get("diagnostics")
    return Program(
        id=str(record["id"]), solution=str(record.get("code") or ""), language=sky.get("language") or "python",
        metrics=dict(record.get("metrics") or {}), iteration_found=int(sky.get("iteration_found") or 0),
        parent_id=record.get("parent"), other_context_ids=list(sky.get("inspirations") or []) or None,
        timestamp=float(sky.get("timestamp") or time.time()), metadata=metadata,
        artifacts=dict(diagnostics) if isinstance(diagnostics, dict) else {},
        generation=int(sky.get("generation") or 0),
    )


# -- the LLM client ---------------------------------------------------------------------------------
class SeededLLM(OpenAILLM):  # type: ignore[misc]
    """SkyDiscover's OpenAI-compatible client; each call of a slot sends a seed of its own (the
    run's LLM seed, the iteration, the call), so two slots with the same parent and prompt get
    different answers and a run gets the same answers again."""

    async def generate(self, system_message: str, messages: list[dict[str, Any]], **kwargs: Any) -> str:
        slot = SLOT.get()
        if slot is not None and self.random_seed is not None and "seed" not in kwargs:
            kwargs["seed"] = (int(self.random_seed) + 1_000_003 * slot.iteration + 7919 * slot.llm_calls) % 2**31
            slot.llm_calls += 1
        text: str = await super().generate(system_message, messages, **kwargs)
        return text

    async def _call_api(self, params: dict[str, Any]) -> str:
        """SkyDiscover 0.1's chat call, which returns the text only: here the response's token
        usage is also kept for the slot (:meth:`Slot.take_tokens`), so a node records its cost."""
        slot = SLOT.get()
        create = self.client.chat.completions.create
        response = await asyncio.get_running_loop().run_in_executor(None, lambda: create(**params))
        usage = getattr(response, "usage", None)
        if slot is not None and usage is not None:
            slot.tokens[0] += int(getattr(usage, "prompt_tokens", 0) or 0)
            slot.tokens[1] += int(getattr(usage, "completion_tokens", 0) or 0)
        content: str = response.choices[0].message.content
        return content


# -- the registry -----------------------------------------------------------------------------------
DATABASES: dict[str, type] = {
    "topk": PolicyTopK, "best_of_n": PolicyBestOfN, "beam_search": PolicyBeamSearch, "adaevolve": PolicyAdaEvolve,
}
MANAGERS: dict[str, type] = {"adaevolve": PolicyAdaEvolveManager}
#: The backend of SkyDiscover each registered search type runs.
SEARCH_TYPES = {backend: PREFIX + backend for backend in DATABASES}

for _backend, _database in DATABASES.items():
    register_database(SEARCH_TYPES[_backend], _database)
    register_manager(SEARCH_TYPES[_backend], MANAGERS.get(_backend, PolicyDiscoveryManager))
