"""One OpenEvolve run with a dream_gym policy, recorded as a world (``dream-gym openevolve run``).

The world folder ``out`` holds ``world.json`` and ``nodes.jsonl`` (every program a node, a
policy's rounds in slot order, OpenEvolve's own sampling in the order it finished them; ``score``
is ``combined_score``, null with the reason for a
program OpenEvolve's evaluator failed), ``openevolve/`` (OpenEvolve's own output: checkpoints,
evolution trace, logs, best program) and ``task/``: for a built-in task the ``initial_program.py``
and ``evaluator.py`` given to OpenEvolve; for a task given as files the ``evaluator.py`` given to
OpenEvolve, which runs the task's own evaluator in dream_gym's sandbox, each evaluation seeded from the
run's seed and the program (:func:`.evaluator.write_files_evaluator`,
:mod:`dream_gym.integrations.files_task`; ``read``: the folders it may read besides its own). As
in ``dream-gym grow``: each
node is written with flush + fsync as it is admitted, the run holds the folder's lock, and
``resume`` continues a killed run (the database is rebuilt from the world's nodes, then the
policy is asked for the next round).

Without ``model`` the agent is the task's built-in agent, or for a task given as files the
generic agent (:mod:`dream_gym.online.agents.generic`), behind an
:class:`~dream_gym.online.agent_server.AgentServer` started for the run (no LLM, no key).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from dream_gym.datasets.importers.openevolve_programs import NO_PROGRAM
from dream_gym.infrastructure.printable import printable
from dream_gym.integrations import stopping, world_run
from dream_gym.integrations.deploy import NATIVE_POLICY
from dream_gym.integrations.openevolve.evaluator import (
    EVALUATOR_TEMPLATE,
    write_files_evaluator,
    write_task_files,
)
from dream_gym.replay.settings import DEFAULT_BETA

SUPPORTED_OPENEVOLVE = ">=0.4,<0.5"
OUTPUT_DIR = "openevolve"


def check_openevolve() -> str:
    """The installed OpenEvolve version; :class:`~dream_gym.integrations.deploy.SystemUnavailable`
    (a RuntimeError) when missing or unsupported."""
    return world_run.check_version("openevolve", "OpenEvolve", "openevolve", SUPPORTED_OPENEVOLVE, ("0", "4"),
                                   "its hooks and ProgramDatabase of the 0.4 series")


@dataclass
class BridgeConfig:
    """Arguments of one run. ``task`` is a built-in task name or ``initial_program.py,evaluator.py``."""

    task: str
    out: Path
    policy: str = NATIVE_POLICY  # any spec dream-gym eval takes, or "native"
    workers: int = 2  # W: OpenEvolve's evaluator.parallel_evaluations, and the batch size
    iterations: int = 20  # OpenEvolve iterations (attempts), the budget
    seed: int = 0
    model: str | None = None  # OpenAI-compatible model; None: the built-in agent server
    api_base: str | None = None
    api_key: str | None = None
    config_path: Path | None = None  # an OpenEvolve config.yaml to start from
    beta: float = DEFAULT_BETA
    frontier: str = "any"
    resume: bool = False
    checkpoint_interval: int = 10
    world_id: str | None = None
    command: str | None = None
    policy_params: dict[str, Any] = field(default_factory=dict)
    log_level: str = "WARNING"
    trust_model: bool = False  # a model zip loads with the objects pickled in it (default: as data)
    read: tuple[Path, ...] = ()  # folders a task given as files may read besides its evaluator's (--read)


@dataclass
class BridgeResult:
    folder: Path
    nodes: int
    iterations: int
    rounds: int
    failed_iterations: int  # iterations that made no program (a failed node stands for those with a parent)
    invalid: int
    best_score: float | None
    stopped_by: str
    seconds: float
    openevolve: str
    restored_parents: int = 0
    batches: list[int] = field(default_factory=list)
    unrecorded_iterations: int = 0  # iterations no node stands for (a worker that timed out or crashed)
    resumed: str = ""  # how a resumed run's policy caught up (dream_gym.online.catch_up)

    def summary(self) -> dict[str, Any]:
        data = asdict(self)
        data["folder"] = str(self.folder)
        return data


def new_meta(config: BridgeConfig, version: str, task_name: str | None, initial: Path, evaluator: Path) -> dict[str, Any]:
    """The world.json of a new run."""
    return world_run.world_meta(
        config, task_name, initial, frontier=config.frontier, section="openevolve", version=version,
        source=f"dream-gym openevolve run (OpenEvolve {version}, {world_run.parents_by(config, 'its own sampling')})",
        run={"iterations": config.iterations}, files={"initial_program": str(initial), "evaluator": str(evaluator)})


def files_evaluator(config: BridgeConfig, evaluator: Path, oe_config: Any, folder: Path) -> Path:
    """The evaluator OpenEvolve gets for a task given as files: the task's own, run in dream_gym's
    sandbox (wall time from OpenEvolve's evaluator timeout; :func:`.world_run.files_evaluator`)."""
    return world_run.files_evaluator(evaluator, EVALUATOR_TEMPLATE, write_files_evaluator, seed=config.seed,
                                     timeout=oe_config.evaluator.timeout, read=config.read, folder=folder)


def openevolve_config(config: BridgeConfig, *, model: str, api_base: str, api_key: str) -> Any:
    """OpenEvolve's Config: the given YAML or OpenEvolve's defaults, with the run's W, budget,
    seed, model and output settings. Everything else (sampling ratios, islands, prompts,
    migration) stays OpenEvolve's."""
    from openevolve.config import Config, LLMModelConfig

    if config.config_path is not None:
        oe = Config.from_yaml(config.config_path)
    else:
        oe = Config()
        oe.log_level = config.log_level
        oe.evaluator.cascade_evaluation = False  # the evaluator files define evaluate() only
    oe.max_iterations = config.iterations
    # the run's database is the world's (resume rebuilds it from the nodes): none loaded from
    # elsewhere, and evaluator artifacts too large to keep inline go under the output folder, not
    # the current directory
    oe.database.db_path = None
    oe.database.artifacts_base_path = str(Path(config.out) / OUTPUT_DIR / "artifacts")
    oe.random_seed = config.seed
    oe.database.random_seed = config.seed
    oe.checkpoint_interval = config.checkpoint_interval
    oe.evaluator.parallel_evaluations = config.workers
    oe.max_code_length = max(oe.max_code_length, 100_000)
    # the trace as the import reads it: JSON lines in the output folder, whatever the config says
    oe.evolution_trace.enabled = True
    oe.evolution_trace.format = "jsonl"
    oe.evolution_trace.output_path = None
    oe.evolution_trace.include_code = True
    oe.evolution_trace.include_failures = True
    # each program's line written as OpenEvolve traces it: a buffered line dies with a killed run,
    # and a program MAP-Elites then prunes is in no checkpoint either (the import would lack it)
    oe.evolution_trace.buffer_size = 1
    if config.policy != NATIVE_POLICY:  # nothing the policy saw may be pruned before it can choose it
        # nor the initial program, which only the database holds: beside each program, migration
        # adds at most one copy of it on every other island (a copy's code is never copied twice)
        islands = max(1, int(oe.database.num_islands))
        oe.database.population_size = max(oe.database.population_size, (config.iterations + 2) * islands)
    name = world_run.openai_name(model)
    llm = LLMModelConfig(name=name, api_base=api_base, api_key=api_key, weight=1.0,
                         timeout=oe.llm.timeout, retries=oe.llm.retries, retry_delay=oe.llm.retry_delay,
                         temperature=oe.llm.temperature, max_tokens=oe.llm.max_tokens,
                         system_message=oe.prompt.system_message)
    oe.llm.models = [llm]
    oe.llm.evaluator_models = [llm]
    oe.llm.api_base = api_base
    return oe


def check_model(config: BridgeConfig) -> None:
    """Refuse a ``--model`` of another provider (``anthropic/...``) without ``--api-base``, before
    anything is written: OpenEvolve sends every request to an OpenAI-compatible server."""
    model = config.model
    if model is not None and "/" in model and not model.startswith("openai/") and config.api_base is None:
        raise ValueError(f"--model {model}: OpenEvolve speaks the OpenAI API; give an OpenAI-compatible model "
                         "(openai/<name>) and --api-base, e.g. a litellm proxy")


def run_openevolve(config: BridgeConfig) -> BridgeResult:
    """Run OpenEvolve with ``config.policy`` choosing the parents; see the module docstring."""
    version = check_openevolve()
    from dream_gym.infrastructure.sandbox import require_sandbox

    require_sandbox()  # candidates (built-in evaluators) and policy files run sandboxed
    if config.workers < 1 or config.iterations < 1:
        raise ValueError("-W and --iterations must be at least 1")
    world_run.check_policy(config)
    check_model(config)
    world_run.check_api_base(config)
    from dream_gym.integrations.files_task import check_evaluate_defined, checked_read

    check_evaluate_defined(config.task, "OpenEvolve")
    if config.config_path is not None and not Path(config.config_path).is_file():  # read after the world is made
        raise FileNotFoundError(f"--config {config.config_path}: no such file (an OpenEvolve config.yaml to start "
                                "from)")
    config = replace(config, read=checked_read(config.task, config.read))
    from dream_gym.integrations.openevolve import bridge

    started = time.time()
    folder = Path(config.out)
    writer, task_name, initial, evaluator = world_run.open_world(
        config, OUTPUT_DIR, write_task_files=write_task_files,
        meta=lambda name, initial, evaluator: new_meta(config, version, name, initial, evaluator))
    parts = world_run.RunParts(writer)
    state = None

    def ended(state: Any, stopped_by: str, message: str) -> RuntimeError:
        """The error of a run that cannot go on, once ``run_summary.json`` says how far it went."""
        state.flush()
        state.stopped_by = stopped_by
        _result(folder, writer.records, version, state, started)
        return RuntimeError(message)

    with stopping.kept_process_state():  # OpenEvolve's log handlers and signal handlers, undone after
        try:
            model, api_base, api_key = parts.endpoint(config, task_name, initial, evaluator, config.api_key)
            oe_config = openevolve_config(config, model=model, api_base=api_base, api_key=api_key)
            oe_evaluator = evaluator if task_name is not None else files_evaluator(config, evaluator, oe_config, folder)
            policy = parts.load_policy(config)
            state = bridge.RunState(writer, policy, config.workers, seed=config.seed, beta=config.beta,
                                    frontier=config.frontier, total_iterations=config.iterations,
                                    model=config.model)
            bridge.guard_forks()
            controller = bridge.PolicyOpenEvolve(str(initial), str(oe_evaluator), oe_config, state,
                                                 output_dir=str(folder / OUTPUT_DIR))
            if writer.records:
                bridge.restore_database(controller.database, writer.records, state)
            # the budget counts nodes: an iteration that left none (its LLM call failed, its worker
            # timed out) is run again, under a later iteration number
            recorded = len(writer.records) - 1 if writer.records else 0
            state.total_iterations += max(0, iterations_of(writer.records) - recorded)
            if recorded < config.iterations:
                try:
                    with stopping.second_signal_interrupts():
                        stopping.run_coroutine(controller.run(iterations=config.iterations - recorded))
                except RuntimeError as exc:  # OpenEvolve's EvolutionFailedError: no iteration made a program
                    if type(exc).__name__ != "EvolutionFailedError":
                        raise
                    if state.llm_failures:
                        raise ended(state, "llm_failed", llm_failed(state, writer.records)) from None
                    raise ended(state, "no_program", f"{exc}; the world keeps what was recorded (each failed "
                                "iteration a node), and --resume continues it") from None
            else:
                state.stopped_by = "iterations"
            state.flush()
            if state.llm_failures:
                raise ended(state, "llm_failed", llm_failed(state, writer.records))
            writer.update_meta(openevolve=dict(writer.meta.get("openevolve") or {}) | {
                "stopped_by": state.stopped_by, "restored_parents": state.restored_parents})
            writer.finish()
        finally:
            bridge.stop_guarding_forks()
            if state is not None:
                try:
                    state.flush()
                except Exception:  # the original error matters more
                    pass
            parts.close()
    return _result(folder, writer.records, version, state, started)


def llm_failed(state: Any, records: list[dict[str, Any]]) -> str:
    """Why a run stopped whose LLM gave no answer: the first failure, and what ``--resume`` does."""
    count = len(state.llm_failures)
    return (f"the LLM answered no call in {count} iteration{'s' if count > 1 else ''} "
            f"({printable(state.llm_failures[0], 400)}); an iteration without an answer is no node, the world keeps "
            f"the {max(0, len(records) - 1)} recorded, and --resume runs the rest of the budget once the LLM answers")


def iterations_of(records: list[dict[str, Any]]) -> int:
    """The last OpenEvolve iteration the world holds a program of."""
    return max((int((r.get("openevolve") or {}).get("iteration_found") or 0) for r in records), default=0)


def _result(folder: Path, records: list[dict[str, Any]], version: str, state: Any, started: float) -> BridgeResult:
    # the iterations run, where the loop counted them: one of a worker that timed out or crashed
    # leaves no node, so the world alone knows only up to its last node
    iterations_done = max(iterations_of(records), (state.iterations_run or 0) if state else 0)
    programs = sum(1 for r in records[1:] if NO_PROGRAM not in ((r.get("openevolve") or {}).get("metadata") or {}))
    result = BridgeResult(
        folder=folder, iterations=iterations_done, failed_iterations=max(0, iterations_done - programs),
        unrecorded_iterations=max(0, iterations_done - (len(records) - 1)),
        stopped_by=state.stopped_by if state else "error", seconds=time.time() - started, openevolve=version,
        restored_parents=state.restored_parents if state else 0, batches=list(state.batches) if state else [],
        resumed=state.resumed if state else "",
        **world_run.record_counts(records),
    )
    world_run.write_summary(folder, result.summary())
    return result
