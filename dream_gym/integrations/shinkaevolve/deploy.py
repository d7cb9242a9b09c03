"""``dream-gym deploy --system shinkaevolve``: one ShinkaEvolve run, recorded as a world.

The world folder ``out`` holds ``world.json`` and ``nodes.jsonl`` (every program a node; ``score``
is ShinkaEvolve's ``combined_score``, null with the evaluator's reason for an incorrect program),
``shinkaevolve/`` (ShinkaEvolve's own results folder: ``programs.sqlite``, ``gen_<g>/`` with each
program, its patch and its evaluation, ``best/``, ``evolution_run.log``) and ``task/`` (for a
built-in task, the ``initial.py`` and ``evaluate.py`` given to ShinkaEvolve; for a task given as
files, the ``evaluate.py`` given to ShinkaEvolve, which runs the task's own evaluator, OpenEvolve's
``evaluate(program_path)`` or ShinkaEvolve's evaluation script, in dream_gym's sandbox:
:mod:`dream_gym.integrations.files_task`). As in
``dream-gym grow``: each node is written with flush + fsync once ShinkaEvolve has committed its
row, the run holds the folder's lock, and ``resume`` continues a killed run (ShinkaEvolve resumes
from its database; programs it saved that the world lacks are recorded first; a generation that
was started but not saved when the run was killed is spent).

The budget is ShinkaEvolve's generations: ``budget`` proposals (generations 1 to ``budget``;
``num_generations = budget + 1`` with the initial program); W is its ``max_evaluation_jobs`` and
``max_proposal_jobs``. Without ``model`` the children come from the task's built-in agent (for a
task given as files, the generic agent) behind
an :class:`~dream_gym.online.agent_server.AgentServer` started for the run (no LLM, no key), given
to ShinkaEvolve as its dynamic local model ``local/dream-gym-builtin@http://127.0.0.1:<port>/v1``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dream_gym.integrations import stopping, world_run
from dream_gym.integrations.deploy import DeployRequest, DeployResult, system_options
from dream_gym.integrations.shinkaevolve.evaluator import (
    EVALUATE_TEMPLATE,
    write_files_evaluate,
    write_task_files,
)
from dream_gym.world.tree import NODES_FILE

SUPPORTED_SHINKA = ">=0.0.7,<0.0.8"
OUTPUT_DIR = "shinkaevolve"
LOG_FILE = "evolution_run.log"
#: Options a request may set (``DeployRequest.options``), with their defaults (None: ShinkaEvolve's own).
OPTIONS: dict[str, Any] = {"frontier": "any", "num_islands": None, "patch_types": None, "patch_type_probs": None,
                           "log_level": "INFO"}
PATCH_TYPES = ("diff", "full", "cross")  # ShinkaEvolve's patch prompts (its fix prompt is for incorrect parents)


def check_shinka() -> str:
    """The installed ShinkaEvolve version; :class:`SystemUnavailable` when missing or unsupported."""
    return world_run.check_version(
        "shinka-evolve", "ShinkaEvolve", "shinka", SUPPORTED_SHINKA, ("0", "0", "7"),
        "it overrides ShinkaEvolveRunner._proposal_coordinator_task and "
        "AsyncProgramDatabase.sample_with_fix_mode_async of that version")


def model_name(model: str, api_base: str | None) -> tuple[str, bool]:
    """ShinkaEvolve's name of ``model`` and whether its requests carry a seed (an OpenAI-compatible
    server). With ``api_base``: its dynamic local model ``local/<name>@<api_base>``, whose key is
    ``OPENAI_API_KEY`` when set (else ShinkaEvolve's ``LOCAL_OPENAI_API_KEY`` or none); without:
    the name as ShinkaEvolve knows it (its pricing table, ``openrouter/...``), with its own keys."""
    from shinka.llm.providers.model_resolver import resolve_model_backend
    from shinka.model_availability import validate_model_env_access

    if api_base:
        name = world_run.openai_name(model)
        key = "?api_key_env=OPENAI_API_KEY" if os.environ.get("OPENAI_API_KEY") else ""
        return f"local/{name}@{api_base.rstrip('/')}{key}", True
    try:
        resolved = resolve_model_backend(model)
        validate_model_env_access(llm_models=[model], embedding_models=[])
    except ValueError as exc:
        raise ValueError(f"--model {model}: {exc} (or give --api-base for an OpenAI-compatible server)") from None
    return model, resolved.provider == "local_openai"


def task_message(task_name: str | None) -> str:
    """ShinkaEvolve's task system message: its default, and the task's description."""
    from shinka.defaults import DEFAULT_TASK_SYS_MSG

    if task_name is None:
        return DEFAULT_TASK_SYS_MSG
    from dream_gym.online.tasks import get_task

    task = get_task(task_name)
    goal = ("combined_score is the task's score" if task.direction == "maximize" else
            "combined_score is 1 / the task's score (the task minimises its score)")
    return f"{DEFAULT_TASK_SYS_MSG}\n\nTask: {task.description}\n({goal}.)"


def shinka_configs(request: DeployRequest, task_name: str | None, initial: Path, evaluate: Path,
                   results_dir: Path, model: str) -> tuple[Any, Any, Any]:
    """ShinkaEvolve's EvolutionConfig, DatabaseConfig and LocalJobConfig: its defaults, with the
    run's budget, model, files and folder. No embedding, meta-summary or novelty model (each would
    need a model of its own); the evaluator's text feedback is shown in the prompts."""
    from shinka.core import EvolutionConfig
    from shinka.database import DatabaseConfig
    from shinka.launch import LocalJobConfig

    options = request.options
    evo = EvolutionConfig(
        task_sys_msg=task_message(task_name), num_generations=request.budget + 1, language="python",
        llm_models=[model], llm_dynamic_selection=None, embedding_model=None, init_program_path=str(initial),
        results_dir=str(results_dir), use_text_feedback=True,
    )
    if "patch_types" in options:
        evo.patch_types, evo.patch_type_probs = patch_types(options)
    db = DatabaseConfig()
    if "num_islands" in options:
        db.num_islands = int(options["num_islands"])
    job = LocalJobConfig(eval_program_path=str(evaluate), time=_job_time(task_name))
    return evo, db, job


def files_evaluate(request: DeployRequest, evaluate: Path, folder: Path) -> Path:
    """The evaluation script ShinkaEvolve gets for a task given as files: the task's evaluator run
    in dream_gym's sandbox (ShinkaEvolve sets no evaluation time limit: the sandbox's default),
    each evaluation seeded from the run's seed and the program."""
    return world_run.files_evaluator(evaluate, EVALUATE_TEMPLATE, write_files_evaluate, seed=request.seed,
                                     timeout=None, read=request.read, folder=folder)


def patch_types(options: dict[str, Any]) -> tuple[list[str], list[float]]:
    """ShinkaEvolve's patch types and their probabilities from ``--option patch_types=diff,full``
    (and ``patch_type_probs=0.7,0.3``; default: equal); ValueError naming a bad value."""
    kinds = [k.strip() for k in str(options["patch_types"]).split(",") if k.strip()]
    unknown = [k for k in kinds if k not in PATCH_TYPES]
    if not kinds or unknown:
        raise ValueError(f"--option patch_types={options['patch_types']}: a comma-separated list of "
                         f"{', '.join(PATCH_TYPES)}")
    raw = options.get("patch_type_probs")
    try:
        probs = [float(p) for p in str(raw).split(",")] if raw is not None else [1.0 / len(kinds)] * len(kinds)
    except ValueError:
        probs = []
    if len(probs) != len(kinds) or any(p < 0 for p in probs) or abs(sum(probs) - 1.0) > 1e-6:
        raise ValueError(f"--option patch_type_probs={raw}: {len(kinds)} probabilities (one per patch type) "
                         "that sum to 1")
    return kinds, probs


def _job_time(task_name: str | None) -> str | None:
    """ShinkaEvolve's per-evaluation time limit (hh:mm:ss): the task's deadline (for a task given as
    files, the sandbox's wall time) and a minute."""
    if task_name is None:
        from dream_gym.integrations.files_task import sandbox_wall_s

        seconds = int(sandbox_wall_s(None)) + 60
    else:
        from dream_gym.online.tasks import get_task

        seconds = int(get_task(task_name).limits.deadline_s) + 60
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@contextlib.contextmanager
def shinka_output(results_dir: Path, level: str) -> Iterator[None]:
    """ShinkaEvolve's log records and console output go to ``<results>/evolution_run.log``."""
    results_dir.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger("shinka")
    saved = (logger.level, logger.propagate)
    with open(results_dir / LOG_FILE, "a", encoding="utf-8") as log:
        handler = logging.StreamHandler(log)
        handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(getattr(logging, level.upper(), logging.INFO))
        logger.propagate = False
        try:
            with contextlib.redirect_stdout(log):
                yield
        finally:
            logger.removeHandler(handler)
            logger.setLevel(saved[0])
            logger.propagate = saved[1]


def _saved_generations(db_path: Path) -> int:
    """How many generations after the initial program ShinkaEvolve's database holds."""
    conn = sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM programs WHERE generation > 0").fetchone()[0])
    finally:
        conn.close()


def _check_request(request: DeployRequest) -> None:
    system_options("ShinkaEvolve", request.options, OPTIONS)
    if "patch_types" in request.options:
        patch_types(request.options)
    elif "patch_type_probs" in request.options:
        raise ValueError("--option patch_type_probs needs --option patch_types")
    islands = request.options.get("num_islands", 1)
    if isinstance(islands, bool) or not isinstance(islands, int) or islands < 1:
        raise ValueError(f"--option num_islands={islands}: a whole number of islands, at least 1")
    check_markers(request.task)
    world_run.check_policy(request)
    world_run.check_api_base(request, hosted=hosted_url)


def hosted_url(model: str) -> str | None:
    """The URL ShinkaEvolve's own client for ``model`` calls (its provider's, or the environment's
    ``OPENAI_BASE_URL``; None for a client that names none). An unknown model or a missing key is
    refused first (:func:`model_name`)."""
    model_name(model, None)
    from shinka.llm.client import get_client_llm

    client, _, _ = get_client_llm(model)
    url = getattr(client, "base_url", None)
    return str(url) if url else None


def check_markers(task: str) -> None:
    """Refuse a task given as files whose initial program has no EVOLVE-BLOCK-START and -END
    lines: ShinkaEvolve applies a patch of every type (diff, full, cross) only between them, so
    each generation would fail and the run would record no child."""
    if "," not in task:
        return  # a built-in task: the bridge writes the markers
    initial = Path(task.split(",", 1)[0].strip())
    if not initial.is_file():
        return  # open_world names it
    text = initial.read_text(encoding="utf-8", errors="replace")
    if "EVOLVE-BLOCK-START" in text and "EVOLVE-BLOCK-END" in text:
        return
    raise ValueError(f"--task {task}: ShinkaEvolve changes a program only between EVOLVE-BLOCK-START and "
                     f"EVOLVE-BLOCK-END lines, and {initial} has none, so no child could be made; mark the code "
                     "to evolve with a '# EVOLVE-BLOCK-START' line before it and a '# EVOLVE-BLOCK-END' line after it")


def check_results(folder: Path, exists: bool) -> None:
    """Refuse to resume without ShinkaEvolve's database; a run stopped while ShinkaEvolve was
    setting up (no generation saved) starts its results folder again (the same root id)."""
    results_dir = folder / OUTPUT_DIR
    db_path = results_dir / "programs.sqlite"
    recorded = exists and (folder / NODES_FILE).stat().st_size > 0
    if recorded and not db_path.is_file():
        raise FileNotFoundError(f"{db_path} is missing: ShinkaEvolve's database is needed to resume {folder}")
    if exists and (not db_path.is_file() or _saved_generations(db_path) == 0) and results_dir.exists():
        shutil.rmtree(results_dir)


def new_meta(request: DeployRequest, version: str, task_name: str | None, initial: Path,
             evaluate: Path) -> dict[str, Any]:
    """The world.json of a new run."""
    own = world_run.parents_by(request, "its own parent selection")
    return world_run.world_meta(
        request, task_name, initial, frontier=str(request.options.get("frontier", "any")), section="shinkaevolve",
        version=version, source=f"dream-gym deploy --system shinkaevolve (ShinkaEvolve {version}, {own})",
        run={"budget": request.budget}, files={"initial": str(initial), "evaluate": str(evaluate)})


@contextlib.contextmanager
def _stop_on_signal(runner: Any, state: Any) -> Iterator[None]:
    """Ctrl-C or SIGTERM ends the run as its budget would, after the programs in flight: under a
    policy at the end of the round (every program it started is saved; ShinkaEvolve itself would
    raise KeyboardInterrupt out of its event loop, leaving no summary and spending the round's
    generations); with ShinkaEvolve's own selection at once, its in-flight generations spent. A
    second signal raises KeyboardInterrupt as before. Only in the main thread (where signals go)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    previous = {number: action for number, action in previous.items() if action is not signal.SIG_IGN}  # nohup, &

    def stop(number: int, _frame: Any) -> None:
        for other, action in previous.items():
            signal.signal(other, action)  # a second signal: the usual abrupt stop
        state.interrupted = True
        if state.policy is None:
            state.stopped_by = "shutdown"
            runner._finish_soon()
        else:
            stopping.say_stopping("the round in flight")

    for number in previous:
        signal.signal(number, stop)
    try:
        yield
    finally:
        for number, action in previous.items():
            signal.signal(number, action)


def run(request: DeployRequest) -> DeployResult:
    """One ShinkaEvolve run with ``request.policy`` choosing the parents (see the module docstring)."""
    version = check_shinka()
    from dream_gym.infrastructure.sandbox import require_sandbox

    require_sandbox()  # candidates (built-in tasks) and policy files run sandboxed
    _check_request(request)
    model, seeded = model_name(request.model, request.api_base) if request.model else ("", True)
    started = time.time()
    folder = Path(request.out)
    writer, task_name, initial, evaluate = world_run.open_world(
        request, OUTPUT_DIR, write_task_files=write_task_files, check=lambda exists: check_results(folder, exists),
        meta=lambda name, initial, evaluate: new_meta(request, version, name, initial, evaluate))
    results_dir = folder / OUTPUT_DIR
    before = world_run.nodes_before(writer.records)
    parts = world_run.RunParts(writer)
    state = None
    try:
        from dream_gym.integrations.shinkaevolve import bridge  # imports ShinkaEvolve (seconds)

        if request.model is None:
            name, api_base, _ = parts.start_agent(task_name, initial, evaluate, request.seed)
            model = f"local/{name}@{api_base}"
        if task_name is None:
            evaluate = files_evaluate(request, evaluate, folder)
        evo, db, job = shinka_configs(request, task_name, initial, evaluate, results_dir, model)
        policy = parts.load_policy(request)
        state = bridge.RunState(writer, policy, request.workers, results_dir=results_dir.resolve(), seed=request.seed,
                                beta=request.beta, frontier=str(request.options.get("frontier", "any")))
        if policy is None:
            bridge.seed_global_generators(request.seed)
        with shinka_output(results_dir, str(request.options.get("log_level", "INFO"))):
            runner = bridge.PolicyRunner(evo, job, db, state=state, workers=request.workers, request_seeds=seeded,
                                         banner_style="minimal", verbose=False, max_evaluation_jobs=request.workers,
                                         max_proposal_jobs=request.workers)
            with _stop_on_signal(runner, state):
                runner.run()
        if state.error is not None:
            raise state.error
        state.end_round()
        state.catch_up()  # anything committed by ShinkaEvolve's last steps
        writer.update_meta(shinkaevolve=dict(writer.meta.get("shinkaevolve") or {}) | {
            "stopped_by": state.stopped_by, "failed_generations": sorted(state.failed_generations)})
        writer.finish()
    finally:
        if state is not None:
            with contextlib.suppress(Exception):  # the original error matters more
                state.end_round()
        parts.close()
    records = writer.records
    if state.lost_generations:  # a hard stop's generations in flight: the run records fewer than its budget
        lost = state.lost_generations
        said = (f"generation{'s' * (len(lost) > 1)} {', '.join(map(str, lost))}, started before the stop and not "
                f"saved, {'are' if len(lost) > 1 else 'is'} spent (ShinkaEvolve starts a generation once)")
        state.resumed = f"{said}; {state.resumed}" if state.resumed else said
    world_run.check_made_programs("ShinkaEvolve", len(state.failed_generations), "generation", records, before,
                                  f"every patch failed to apply, or the model failed; why: "
                                  f"{results_dir / 'evolution_run.log'}")
    return world_run.deploy_result("shinkaevolve", version, folder, records, state, started, lambda rounds: {
        "generations": max((int((r.get("shinkaevolve") or {}).get("generation") or 0) for r in records), default=0),
        "rounds": rounds, "failed_generations": sorted(state.failed_generations) if state else [],
        "without_program": len(state.failed_generations) if state else 0,
        "lost_generations": list(state.lost_generations) if state else [],
        "batches": list(state.batches) if state else []})


__all__ = ["OPTIONS", "SUPPORTED_SHINKA", "check_shinka", "model_name", "run"]
