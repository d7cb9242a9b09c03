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

import asyncio
import importlib.metadata
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.locks import folder_lock
from dream_gym.infrastructure.redact import redact_value
from dream_gym.replay.settings import DEFAULT_BETA
from dream_gym.world.tree import NODES_FILE

SUPPORTED_OPENEVOLVE = ">=0.4,<0.5"
NATIVE_POLICY = "native"  # OpenEvolve's own parent sampling, recorded
NO_KEY = "sk-no-key-required"
OUTPUT_DIR = "openevolve"


def check_openevolve() -> str:
    """The installed OpenEvolve version; RuntimeError when missing or unsupported."""
    try:
        version = importlib.metadata.version("openevolve")
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError("OpenEvolve is not installed: pip install 'dream-gym[openevolve]' "
                           f"(openevolve{SUPPORTED_OPENEVOLVE})") from None
    parts = version.split(".")
    if len(parts) < 2 or parts[0] != "0" or parts[1] != "4":
        raise RuntimeError(f"OpenEvolve {version} is installed; the bridge supports openevolve{SUPPORTED_OPENEVOLVE} "
                           "(its hooks and ProgramDatabase of the 0.4 series)")
    return version


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
    failed_iterations: int
    invalid: int
    best_score: float | None
    stopped_by: str
    seconds: float
    openevolve: str
    restored_parents: int = 0
    batches: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        data = asdict(self)
        data["folder"] = str(self.folder)
        return data


def resolve_task(spec: str, folder: Path) -> tuple[str | None, Path, Path]:
    """(built-in task name or None, initial program, evaluator file) of a ``--task`` value."""
    if "," in spec:
        initial, evaluator = (Path(p.strip()) for p in spec.split(",", 1))
        for path in (initial, evaluator):
            if not path.is_file():
                raise FileNotFoundError(f"--task {spec}: {path} does not exist")
        return None, initial.resolve(), evaluator.resolve()
    from dream_gym.integrations.openevolve.evaluator import write_task_files
    from dream_gym.online.tasks import get_task

    get_task(spec)  # KeyError listing the tasks
    initial, evaluator = write_task_files(spec, folder / "task")
    return spec, initial.resolve(), evaluator.resolve()


def files_evaluator(config: BridgeConfig, evaluator: Path, read: tuple[Path, ...], oe_config: Any,
                    folder: Path) -> Path:
    """The evaluator OpenEvolve gets for a task given as files: the task's own, run in dream_gym's
    sandbox (wall time from OpenEvolve's evaluator timeout), each evaluation seeded from the run's
    seed and the program, so the same seed scores every program the same way."""
    from dream_gym.integrations.files_task import FilesTask, sandbox_wall_s, written_task
    from dream_gym.integrations.openevolve.evaluator import EVALUATOR_TEMPLATE, write_files_evaluator

    if written_task(evaluator, EVALUATOR_TEMPLATE) is not None:  # dream_gym's own: it sandboxes its candidates
        return evaluator
    task = FilesTask.of(evaluator, seed=config.seed, wall_s=sandbox_wall_s(oe_config.evaluator.timeout), read=read)
    return write_files_evaluator(task, folder / "task")


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
    oe.random_seed = config.seed
    oe.database.random_seed = config.seed
    oe.checkpoint_interval = config.checkpoint_interval
    oe.evaluator.parallel_evaluations = config.workers
    oe.max_code_length = max(oe.max_code_length, 100_000)
    oe.evolution_trace.enabled = True
    oe.evolution_trace.include_code = True
    oe.evolution_trace.include_failures = True
    if config.policy != NATIVE_POLICY:  # nothing the policy saw may be pruned before it can choose it
        oe.database.population_size = max(oe.database.population_size, config.iterations + 2)
    name = model.split("/", 1)[1] if model.startswith("openai/") else model
    if "/" in model and not model.startswith("openai/") and config.api_base is None:
        raise ValueError(f"--model {model}: OpenEvolve speaks the OpenAI API; give an OpenAI-compatible "
                         "model (openai/<name>) and --api-base, e.g. a litellm proxy")
    llm = LLMModelConfig(name=name, api_base=api_base, api_key=api_key, weight=1.0,
                         timeout=oe.llm.timeout, retries=oe.llm.retries, retry_delay=oe.llm.retry_delay,
                         temperature=oe.llm.temperature, max_tokens=oe.llm.max_tokens,
                         system_message=oe.prompt.system_message)
    oe.llm.models = [llm]
    oe.llm.evaluator_models = [llm]
    oe.llm.api_base = api_base
    return oe


def run_openevolve(config: BridgeConfig) -> BridgeResult:
    """Run OpenEvolve with ``config.policy`` choosing the parents; see the module docstring."""
    version = check_openevolve()
    from dream_gym.infrastructure.sandbox import require_sandbox

    require_sandbox()  # candidates (built-in evaluators) and policy files run sandboxed
    if config.workers < 1 or config.iterations < 1:
        raise ValueError("-W and --iterations must be at least 1")
    if config.policy != NATIVE_POLICY and not config.trust_model:
        from dream_gym.evaluation.evaluate import check_model_zips

        check_model_zips([config.policy])  # a zip that does not load as data: refused before any folder is made
    from dream_gym.integrations.files_task import checked_read

    read = checked_read(config.task, config.read)
    from dream_gym.integrations.openevolve import bridge
    from dream_gym.world.writer import WorldWriter, new_meta

    started = time.time()
    folder = Path(config.out)
    with folder_lock(folder):  # a second run of the same folder is refused naming the first
        exists = (folder / NODES_FILE).exists()
        if exists and not config.resume:
            raise FileExistsError(f"{folder} already holds a world; pass --resume to continue it")
        if config.resume and not exists and (folder / OUTPUT_DIR).exists():
            raise FileExistsError(f"{folder}/{OUTPUT_DIR} exists without a world to resume")
        task_name, initial, evaluator = resolve_task(config.task, folder)
        if exists:
            writer = WorldWriter.open(folder)
        else:
            description = ""
            direction_note = None
            if task_name is not None:
                from dream_gym.online.tasks import get_task

                task = get_task(task_name)
                description = task.description
                direction_note = task.direction
            agent_name = f"dream-gym serve-agent ({'built-in' if task_name else 'generic'} agent)"
            meta = new_meta(
                config.world_id or folder.name, task_name or initial.parent.name, description,
                direction="maximize", workers=config.workers, frontier=config.frontier,
                source=f"dream-gym openevolve run (OpenEvolve {version}, {'its own sampling' if config.policy == NATIVE_POLICY else 'parents chosen by a dream_gym policy'})",
                licence="CC-BY-4.0", policy=config.policy, agent=config.model or agent_name,
                seed=config.seed, beta=config.beta, metric="combined_score", command=config.command,
                openevolve={"version": version, "iterations": config.iterations, "task_direction": direction_note,
                            "initial_program": str(initial), "evaluator": str(evaluator),
                            **({"read": [str(p) for p in read]} if read else {})},
            )
            writer = WorldWriter.create(folder, meta)
    server = None
    source = None
    state = None
    try:
        if config.model is None:  # a built-in task's own agent, or the generic agent for any other task
            from dream_gym.online.agent_server import MODEL_NAME, AgentServer

            server = AgentServer(task_name or f"{initial},{evaluator}", seed=config.seed).start()
            model, api_base, api_key = MODEL_NAME, server.base_url, NO_KEY
        else:
            model = config.model
            api_base = config.api_base or os.environ.get("OPENAI_API_BASE", "https://api.openai.com/v1")
            api_key = config.api_key or os.environ.get("OPENAI_API_KEY") or NO_KEY
        oe_config = openevolve_config(config, model=model, api_base=api_base, api_key=api_key)
        oe_evaluator = files_evaluator(config, evaluator, read, oe_config, folder) if task_name is None else evaluator
        policy = None
        if config.policy != NATIVE_POLICY:
            from dream_gym.evaluation.evaluate import model_trust
            from dream_gym.policy_files.specs import PolicySource, is_file_spec

            with model_trust(config.trust_model):  # a model zip: as data unless trusted
                if config.policy_params and not is_file_spec(config.policy):
                    from dream_gym.policy_files import load_policy

                    policy = load_policy(config.policy, params=config.policy_params)
                else:
                    source = PolicySource(config.policy)
                    policy = source.new()
        state = bridge.RunState(writer, policy, config.workers, seed=config.seed, beta=config.beta,
                                frontier=config.frontier, total_iterations=config.iterations)
        bridge.guard_forks()
        controller = bridge.PolicyOpenEvolve(str(initial), str(oe_evaluator), oe_config, state,
                                             output_dir=str(folder / OUTPUT_DIR))
        if writer.records:
            bridge.restore_database(controller.database, writer.records, state)
        done = max((int((r.get("openevolve") or {}).get("iteration_found") or 0) for r in writer.records), default=0)
        if done < config.iterations:
            asyncio.run(controller.run(iterations=config.iterations - done))
        else:
            state.stopped_by = "iterations"
        state.flush()
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
        writer.close()
        if source is not None:
            source.close()
        if server is not None:
            server.stop()
    records = writer.records
    iterations_done = max((int((r.get("openevolve") or {}).get("iteration_found") or 0) for r in records), default=0)
    scores = [r["score"] for r in records if r.get("score") is not None]
    result = BridgeResult(
        folder=folder, nodes=len(records), iterations=iterations_done,
        rounds=max((int(r.get("round") or 0) for r in records), default=0),
        failed_iterations=max(0, iterations_done - (len(records) - 1)),
        invalid=sum(1 for r in records[1:] if r.get("score") is None),
        best_score=max(scores) if scores else None, stopped_by=state.stopped_by if state else "error",
        seconds=time.time() - started, openevolve=version,
        restored_parents=state.restored_parents if state else 0, batches=list(state.batches) if state else [],
    )
    (folder / "run_summary.json").write_text(
        json.dumps(redact_value(result.summary()), indent=2, default=str) + "\n", encoding="utf-8")
    return result
