"""One SkyDiscover run with a dream_gym policy, recorded as a world (``dream-gym deploy --system skydiscover``).

The world folder ``out`` holds ``world.json`` and ``nodes.jsonl`` (every program SkyDiscover
evaluated a node, in the order of the rounds and their slots; ``score`` is ``combined_score``, null
with the reason for a failed evaluation), ``skydiscover/`` (SkyDiscover's own output:
checkpoints, the final best, logs, ``db/programs/`` with each program as its database was given it,
and ``dropped/programs/`` with the programs its database did not keep) and ``task/`` (for a
built-in task, the ``initial_program.py`` and ``evaluator.py`` given to SkyDiscover; for a task
given as files, the ``evaluator.py`` given to SkyDiscover, which runs the task's own evaluator in
dream_gym's sandbox: :mod:`dream_gym.integrations.files_task`). As in
``dream-gym grow``: each node is written with flush + fsync as it is admitted, the run holds the
folder's lock, and ``resume`` continues a killed run (SkyDiscover's database is rebuilt from the
world's nodes, a program file it saved that the world lacks is removed, then the policy is asked
for the next round).

Without ``model`` the agent is the task's built-in agent (for a task given as files, the generic
agent) behind an
:class:`~dream_gym.online.agent_server.AgentServer` started for the run (no LLM, no key).
System-specific settings (``DeployRequest.options``, ``--option KEY=VALUE``): :data:`OPTIONS`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dream_gym.integrations import stopping, world_run
from dream_gym.integrations.deploy import (
    NATIVE_POLICY,
    DeployRequest,
    DeployResult,
    SystemUnavailable,
    system_options,
)
from dream_gym.integrations.skydiscover.evaluator import (
    EVALUATOR_TEMPLATE,
    write_files_evaluator,
    write_task_files,
)

SUPPORTED_SKYDISCOVER = ">=0.1,<0.2"
OUTPUT_DIR = "skydiscover"
#: SkyDiscover's searches whose parent choice is a ProgramDatabase's sample(): the bridge's.
BACKENDS = ("topk", "best_of_n", "beam_search", "adaevolve")
#: The system-specific settings a run takes, with their defaults.
OPTIONS: dict[str, Any] = {
    "search": None,  # SkyDiscover's search (backend), one of BACKENDS: the config's, else topk
    "config_path": None,  # a SkyDiscover config.yaml to start from (prompts, database settings)
    "checkpoint_interval": 10,
    "frontier": "any",
    "log_level": "INFO",  # of SkyDiscover's log file, skydiscover/logs/
}
_EXTERNAL = {"openevolve": "openevolve", "shinkaevolve": "shinkaevolve", "gepa": None}


def check_skydiscover() -> str:
    """The installed SkyDiscover version; SystemUnavailable when missing or unsupported."""
    return world_run.check_version("skydiscover", "SkyDiscover", "skydiscover", SUPPORTED_SKYDISCOVER, ("0", "1"),
                                   "its ProgramDatabase and DiscoveryManager of the 0.1 series")


def check_search(search: str) -> None:
    """Refuse a SkyDiscover search the bridge cannot run, naming the hook it lacks."""
    if search in BACKENDS:
        return
    if search == "evox":
        raise SystemUnavailable(
            "SkyDiscover's evox search cannot be deployed: it replaces its solution database during the run with "
            "ProgramDatabase code its LLM writes (CoEvolutionManager._switch_to_new_search_algorithm), so there is no "
            "fixed sample() for a policy to choose the parents through, nor add() to record every program as it is "
            "admitted; import an EvoX run's output folder with dream-gym worlds import")
    if search in _EXTERNAL:
        own = _EXTERNAL[search]
        instead = (f"run it with dream-gym deploy --system {own}" if own else "run GEPA itself")
        raise SystemUnavailable(
            f"SkyDiscover's {search} search cannot be deployed: it hands the whole run to {search}'s own loop "
            f"(skydiscover.extras.external.{search}_backend.run), where SkyDiscover's ProgramDatabase.sample() and "
            f"add() are not called, so neither a policy's parent choice nor the record can hook in; {instead}, "
            "and import its output with dream-gym worlds import")
    raise ValueError(f"--option search={search!r}: SkyDiscover's searches are {', '.join(BACKENDS)} "
                     "(deployable), evox, openevolve, shinkaevolve, gepa")


@dataclass
class RunOptions:
    search: str
    config_path: Path | None
    checkpoint_interval: int
    frontier: str
    log_level: str

    @classmethod
    def of(cls, options: dict[str, Any]) -> RunOptions:
        values = system_options("SkyDiscover", options, OPTIONS)
        config_path = values["config_path"]
        interval = values["checkpoint_interval"]
        search = values["search"]
        if search is None:
            search = _search_of(config_path) if config_path is not None else "topk"
        return cls(str(search), config_path, interval, str(values["frontier"]), str(values["log_level"]))


def _search_of(config_path: Path) -> str:
    """The search a SkyDiscover config.yaml names (``search.type``; SkyDiscover's default topk)."""
    return str(load_skydiscover_config(config_path).search.type)


def load_skydiscover_config(config_path: Path) -> Any:
    """SkyDiscover's ``load_config``, its one unreadable failure explained: a one-line
    ``prompt.system_message`` under 500 characters is taken for a file name beside the config
    (as OpenEvolve's example configs write their prompts), and one too long for a file name ends
    in ``File name too long`` naming the message as a path."""
    import errno

    from skydiscover.config import load_config

    try:
        return load_config(str(config_path))
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        raise ValueError(
            f"{config_path}: SkyDiscover reads a prompt.system_message of one line under 500 characters as the "
            "name of a file beside the config, and this one is too long for a file name: write it over two lines "
            "or more (a YAML block, system_message: |), or put it in a file and name that file") from None


def skydiscover_config(request: DeployRequest, options: RunOptions, *, model: str, api_base: str,
                       api_key: str, folder: Path) -> Any:
    """SkyDiscover's Config: the given YAML or SkyDiscover's defaults, with the run's search, W,
    budget, seed, model and output settings. Everything else (prompts, the backend's database
    settings, retries) stays SkyDiscover's."""
    from skydiscover.config import (
        AdaEvolveDatabaseConfig,
        BeamSearchDatabaseConfig,
        BestOfNDatabaseConfig,
        Config,
        DatabaseConfig,
        LLMModelConfig,
    )

    from dream_gym.integrations.skydiscover.bridge import SEARCH_TYPES, SeededLLM

    config = load_skydiscover_config(options.config_path) if options.config_path is not None else Config()
    if options.config_path is None:
        config.evaluator.cascade_evaluation = False  # the evaluator files define evaluate() only
    database_classes = {"topk": DatabaseConfig, "best_of_n": BestOfNDatabaseConfig,
                        "beam_search": BeamSearchDatabaseConfig, "adaevolve": AdaEvolveDatabaseConfig}
    if config.search.type != options.search or type(config.search.database) is not database_classes[options.search]:
        config.search.database = database_classes[options.search]()
    config.search.type = SEARCH_TYPES[options.search]
    config.log_level = options.log_level
    config.max_iterations = request.budget
    config.random_seed = request.seed
    config.search.database.random_seed = request.seed
    config.search.database.db_path = str(folder / OUTPUT_DIR / "db")
    config.checkpoint_interval = options.checkpoint_interval
    config.evaluator.parallel_evaluations = request.workers
    if request.policy != NATIVE_POLICY and isinstance(config.search.database, AdaEvolveDatabaseConfig):
        config.search.database.use_paradigm_breakthrough = False  # an active paradigm overrides the parent
    llm = config.llm
    llm.api_base, llm.api_key = api_base, api_key
    chosen = LLMModelConfig(name=model, init_client=SeededLLM)
    llm.models, llm.evaluator_models, llm.guide_models = [chosen], [chosen], [chosen]
    llm.update_model_params({
        "api_base": api_base, "api_key": api_key, "temperature": llm.temperature, "top_p": llm.top_p,
        "max_tokens": llm.max_tokens, "timeout": llm.timeout, "retries": llm.retries, "retry_delay": llm.retry_delay,
        "reasoning_effort": llm.reasoning_effort, "system_message": config.prompt.system_message,
    }, overwrite=True)
    return config


def files_evaluator(request: DeployRequest, evaluator: Path, config: Any, folder: Path) -> Path:
    """The evaluator SkyDiscover gets for a task given as files: the task's own, run in dream_gym's
    sandbox (wall time from SkyDiscover's evaluator timeout; :func:`.world_run.files_evaluator`)."""
    return world_run.files_evaluator(evaluator, EVALUATOR_TEMPLATE, write_files_evaluator, seed=request.seed,
                                     timeout=config.evaluator.timeout, read=request.read, folder=folder)


@contextlib.contextmanager
def _skydiscover_process_state() -> Iterator[None]:
    """SkyDiscover's controller sets the root logger's level, adds a log file handler (and a console
    handler) to it and takes SIGINT/SIGTERM for itself; all of it is put back when the run ends
    (:func:`~dream_gym.integrations.stopping.kept_process_state`)."""
    root = logging.getLogger()
    with stopping.kept_process_state():
        if not any(isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
                   for h in root.handlers):
            # SkyDiscover adds a console handler only when the root has none: its log (every failed
            # evaluation with the program's code) goes to skydiscover/logs/, the console stays the CLI's
            quiet = logging.StreamHandler()
            quiet.setLevel(logging.CRITICAL + 1)
            root.addHandler(quiet)
        yield


def new_meta(request: DeployRequest, options: RunOptions, version: str, task_name: str | None, initial: Path,
             evaluator: Path) -> dict[str, Any]:
    """The world.json of a new run."""
    how = world_run.parents_by(request, "its own sampling")
    return world_run.world_meta(
        request, task_name, initial, frontier=options.frontier, section="skydiscover", version=version,
        source=f"dream-gym deploy --system skydiscover (SkyDiscover {version}, {options.search}, {how})",
        run={"search": options.search, "iterations": request.budget},
        files={"initial_program": str(initial), "evaluator": str(evaluator)})


def hosted_endpoint(model: str) -> tuple[str, str, str]:
    """(the name the API receives, base, key) of a ``--model`` without ``--api-base``, as
    SkyDiscover resolves one itself: ``OPENAI_API_BASE`` or ``OPENAI_BASE_URL`` when set, else the
    provider's server of a ``provider/name`` or known bare name (``anthropic/...``, ``gemini-...``,
    else OpenAI's); the key from the provider's variables, then ``OPENAI_API_KEY``."""
    from skydiscover.config import _parse_model_spec, _resolve_api_key_from_env

    provider, bare_name, base, env_vars = _parse_model_spec(model)
    base = os.environ.get("OPENAI_API_BASE") or os.environ.get("OPENAI_BASE_URL") or base
    if not base:
        raise ValueError(f"--model {model}: SkyDiscover has no server of its own for {provider} models; give "
                         "--api-base")
    name = bare_name if "/" in model and provider != "openai" else world_run.openai_name(model)
    return name, base, _resolve_api_key_from_env(env_vars) or world_run.NO_KEY


def run_skydiscover(request: DeployRequest) -> DeployResult:
    """Run SkyDiscover with ``request.policy`` choosing the parents; see the module docstring."""
    version = check_skydiscover()
    options = RunOptions.of(dict(request.options))
    check_search(options.search)
    from dream_gym.infrastructure.sandbox import require_sandbox

    require_sandbox()  # candidates (built-in evaluators) and policy files run sandboxed
    world_run.check_policy(request)
    from dream_gym.integrations.files_task import check_evaluate_defined

    check_evaluate_defined(request.task, "SkyDiscover")
    hosted = hosted_endpoint(request.model) if request.model and not request.api_base else None
    world_run.check_api_base(request, hosted=lambda _model: hosted[1] if hosted else None)
    from dream_gym.integrations.skydiscover import bridge

    started = time.time()
    folder = Path(request.out)

    def fresh_output(exists: bool) -> None:
        if not request.resume and (folder / OUTPUT_DIR).exists():
            raise FileExistsError(f"{folder}/{OUTPUT_DIR} exists: choose an empty --out")

    writer, task_name, initial, evaluator = world_run.open_world(
        request, OUTPUT_DIR, write_task_files=write_task_files, check=fresh_output,
        meta=lambda name, initial, evaluator: new_meta(request, options, version, name, initial, evaluator))
    parts = world_run.RunParts(writer)
    state = None
    try:
        model, api_base, api_key = hosted or parts.endpoint(request, task_name, initial, evaluator)
        config = skydiscover_config(request, options, model=world_run.openai_name(model), api_base=api_base,
                                    api_key=api_key, folder=folder)
        sky_evaluator = evaluator if task_name is not None else files_evaluator(request, evaluator, config, folder)
        policy = parts.load_policy(request)
        state = bridge.RunState(writer, policy, request.workers, total_iterations=request.budget,
                                dropped_dir=folder / OUTPUT_DIR / "dropped", seed=request.seed, beta=request.beta,
                                frontier=options.frontier, model=request.model)
        with _skydiscover_process_state(), stopping.second_signal_interrupts():
            controller = bridge.BridgeController(str(initial), str(sky_evaluator), config=config,
                                                 output_dir=str(folder / OUTPUT_DIR))
            controller.database.dream_state = state
            state.database = controller.database
            if writer.records:
                bridge.restore_database(controller.database, writer.records, state)
            iterations_before, before = state.iterations_done, world_run.nodes_before(writer.records)
            if state.iterations_done < request.budget:
                first = max(1, controller.database.last_iteration)
                stopping.run_coroutine(controller.run(iterations=request.budget - first + 1))
        writer.update_meta(skydiscover=dict(writer.meta.get("skydiscover") or {}, stopped_by=state.stopped_by,
                                            iterations_done=state.iterations_done))
        writer.finish()
    finally:
        parts.close()
    records = writer.records
    world_run.check_made_programs("SkyDiscover", state.iterations_done - iterations_before, "iteration", records,
                                  before, f"the last: {state.last_failure}")
    return world_run.deploy_result("skydiscover", version, folder, records, state, started, lambda rounds: {
        "search": options.search, "iterations": state.iterations_done if state else 0, "rounds": rounds,
        "failed_iterations": state.failed_iterations if state else 0,
        "without_program": (state.iterations_done if state else 0) - len(
            {(r.get("skydiscover") or {}).get("iteration_found") for r in records[1:]}),
        "not_kept": sum(1 for r in records if not (r.get("skydiscover") or {}).get("kept", True)),
        "batches": list(state.batches) if state else []})
