"""The frame of one bridge run: what every system's run does around the system's own loop.

Each bridge's run (:func:`.openevolve.run.run_openevolve`, :func:`.skydiscover.run.run_skydiscover`,
:func:`.shinkaevolve.deploy.run`) checks the installed version (:func:`check_version`) and the
policy (:func:`check_policy`), opens the world folder under its lock (:func:`open_world`: created
with the run's ``world.json`` from :func:`world_meta`, or reopened to resume; a built-in task's
files written to ``task/``), gives a task given as files the evaluator that runs it in dream_gym's
sandbox (:func:`files_evaluator`), starts the agent server when no model is given and loads the
policy (:class:`RunParts`, which closes all it opened), runs the system's own loop with the
bridge's hooks, and reports what happened (:func:`deploy_result`, ``run_summary.json``).

The settings it reads (:class:`RunSettings`) are those of a
:class:`~dream_gym.integrations.deploy.DeployRequest` or of OpenEvolve's ``BridgeConfig``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dream_gym.infrastructure.extras import install_command
from dream_gym.infrastructure.locks import FOLDER_LOCK_NAME, folder_lock
from dream_gym.infrastructure.printable import printable
from dream_gym.infrastructure.redact import redact_files, redact_value
from dream_gym.infrastructure.seeds import check_seed
from dream_gym.integrations.deploy import NATIVE_POLICY, DeployResult, SystemUnavailable
from dream_gym.world.files import RUN_SUMMARY_FILE, WORLD_FILE
from dream_gym.world.tree import NODES_FILE

NO_KEY = "sk-no-key-required"
DEFAULT_API_BASE = "https://api.openai.com/v1"
CHOSEN_PARENTS = "parents chosen by a dream_gym policy"


class RunSettings(Protocol):
    """The settings of one run every bridge reads (a ``DeployRequest``'s or a ``BridgeConfig``'s)."""

    task: str
    out: Path
    policy: str
    workers: int
    seed: int
    model: str | None
    api_base: str | None
    beta: float
    resume: bool
    world_id: str | None
    command: str | None
    policy_params: dict[str, Any]
    trust_model: bool
    read: tuple[Path, ...]


def check_version(distribution: str, name: str, extra: str, supported: str, series: tuple[str, ...],
                  hooks: str) -> str:
    """The installed version of ``distribution`` (the system ``name``, extra ``extra``);
    :class:`SystemUnavailable` when it is missing, or its version does not start with ``series``
    (``hooks``: what of that series the bridge relies on)."""
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise SystemUnavailable(f"{name} is not installed: {install_command(extra)} "
                                f"({distribution}{supported})") from None
    if version.split(".")[: len(series)] != list(series):
        raise SystemUnavailable(f"{name} {version} is installed; the bridge supports {distribution}{supported} ({hooks})")
    return version


def check_policy(settings: RunSettings) -> None:
    """Refuse, before any folder is made, what the policy would fail on once the run has started:
    a β outside [0, 1] (NaN included), a policy that names nothing (an unknown name, a missing file
    or module), a policy file that does not load (loaded once in its sandbox, as ``eval`` does),
    a model zip that does not load as data (unless trusted) or was trained at another W, and
    parameters the policy does not take (built and dropped here, as the run will build it)."""
    if not 0.0 <= settings.beta <= 1.0:
        raise ValueError(f"--beta must be in [0, 1], got {settings.beta}")
    check_seed(settings.seed, "--seed")
    params = settings.policy_params
    if settings.policy == NATIVE_POLICY:
        if params:
            raise ValueError(f"policy parameters ({', '.join(sorted(params))}) apply to a dream_gym policy; "
                             f"'{NATIVE_POLICY}' is the system's own selection")
        return
    from dream_gym.evaluation.evaluate import check_model_zips, model_trust
    from dream_gym.policy_files.specs import PolicySpec, check_policy_spec, probe_policy_files

    check_policy_spec(settings.policy)
    probe_policy_files([settings.policy])
    if not settings.trust_model:
        check_model_zips([settings.policy])
    if params or PolicySpec.of(settings.policy).kind == "model":
        from dream_gym.policy_files import load_policy

        with model_trust(settings.trust_model):
            policy = load_policy(settings.policy, params=params)  # a policy file refuses them
        if callable(check_workers := getattr(policy, "check_workers", None)):
            check_workers(settings.workers)  # a model trained at another W, refused before the world is made


def check_api_base(settings: RunSettings, hosted: Callable[[str], str | None] | None = None) -> None:
    """Refuse, before any folder is made, a ``--model`` whose server accepts no connection: the
    systems would retry it for minutes a proposal (ShinkaEvolve silently), and SkyDiscover then
    counts none made. The server is ``--api-base``; without it, ``hosted(model)``: the URL the system
    resolves the model to (None: its client names none, and nothing is checked); by default the
    OpenAI-compatible base the run would use (:func:`given_endpoint`)."""
    if settings.model is None:
        return
    from dream_gym.infrastructure.llm import check_access, redact_url, unreachable

    if settings.api_base is not None:
        check_access(settings.model, settings.api_base)
        return
    url = hosted(settings.model) if hosted is not None else given_endpoint(settings.model, None)[1]
    why = None if url is None else unreachable(url)
    if why is None:
        return
    raise ValueError(f"--model {settings.model} is served at {redact_url(url)}, and {why}; check the network "
                     "(or the proxy settings), or give --api-base for a server you can reach")


def resolve_task(spec: str, folder: Path,
                 write_task_files: Callable[[str, Path], tuple[Path, Path]]) -> tuple[str | None, Path, Path]:
    """(built-in task name or None, initial program, evaluator file) of a ``--task`` value: the two
    files given, or a built-in task's written to ``folder/task`` by the system's ``write_task_files``
    (``spec`` checked by :func:`check_task` first)."""
    if "," in spec:
        initial, evaluator = (Path(p.strip()) for p in spec.split(",", 1))
        return None, initial.resolve(), evaluator.resolve()
    initial, evaluator = write_task_files(spec, folder / "task")
    return spec, initial.resolve(), evaluator.resolve()


def check_task(spec: str) -> None:
    """Refuse a ``--task`` that names no task: a file of the two missing, one file alone, or an
    unknown built-in task (a KeyError listing them)."""
    if "," in spec:
        for path in (Path(p.strip()) for p in spec.split(",", 1)):
            if not path.is_file():
                raise FileNotFoundError(f"--task {spec}: {path} does not exist")
            try:  # every system reads them as UTF-8: else the run failed after its world was made
                path.read_bytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"--task {spec}: {path} is not UTF-8 text ({exc.reason} at byte {exc.start}); the "
                                 "systems read programs as UTF-8: save it as UTF-8") from None
        return
    if spec.endswith(".py") or os.sep in spec:
        raise ValueError(f"--task {spec}: a task given as files is its two files, initial_program.py,evaluator.py "
                         "(a comma between them)")
    from dream_gym.online.tasks import get_task

    get_task(spec, files_too=True)


def open_world(settings: RunSettings, output_dir: str, *,
               write_task_files: Callable[[str, Path], tuple[Path, Path]],
               meta: Callable[[str | None, Path, Path], dict[str, Any]],
               check: Callable[[bool], None] | None = None) -> tuple[Any, str | None, Path, Path]:
    """(writer, task name, initial, evaluator) of the run's world folder, under its lock (a second
    run of the same folder is refused naming the first): a new world with ``meta(task name,
    initial, evaluator)``, or the world reopened to resume. ``check(exists)`` refuses what the
    system cannot continue from, before anything is written."""
    from dream_gym.world.writer import WorldWriter, check_empty_folder, check_resumable_folder

    folder = Path(settings.out)
    check_task(settings.task)  # before the lock makes the folder
    with folder_lock(folder):
        exists = (folder / NODES_FILE).exists()
        if exists and not settings.resume:
            _check_root_scored(folder, None)  # a failed start: --resume would be refused too
            raise FileExistsError(f"{folder} already holds a world; pass --resume to continue it")
        if settings.resume and not exists and (folder / output_dir).exists():
            raise FileExistsError(f"{folder}/{output_dir} exists without a world to resume")
        if exists:
            check_same_run(folder, settings, output_dir)
        elif not settings.resume:
            check_empty_folder(folder)
        else:  # a run killed before its world was made left its task files; anything else is not a run's
            check_resumable_folder(folder, KILLED_BEFORE_WORLD)
        if check is not None:
            check(exists)
        task_name, initial, evaluator = resolve_task(settings.task, folder, write_task_files)
        writer = WorldWriter.open(folder) if exists else WorldWriter.create(folder, meta(task_name, initial, evaluator))
    return writer, task_name, initial, evaluator


#: What a deploy killed before its world was made leaves in --out beside its lock (a built-in task's
#: files): a --resume there starts the run; anything else in the folder is refused.
KILLED_BEFORE_WORLD = frozenset({"task"})

#: The keys of a system's section of world.json that name a task's two files, as each bridge writes them.
TASK_FILE_KEYS = (("initial_program", "evaluator"), ("initial", "evaluate"), ("initial", "evaluator"))


def _source_of(meta: dict[str, Any]) -> str:
    """What world.json says made the world, in a few words (an imported world's source is a dict)."""
    source = meta.get("source")
    if isinstance(source, dict):
        system = source.get("system")
        return f"imported from a run of {system}" if isinstance(system, str) else "imported"
    return printable(str(source), 120)


def check_same_run(folder: Path, settings: RunSettings, section: str) -> None:
    """Refuse to continue a world that another system (no ``section`` of its own in world.json,
    the section named as the system's output folder) or another task wrote, or with another W,
    policy, policy parameters, seed or beta than it records: the run would append its programs to a
    tree they do not belong to."""
    from dream_gym.policy_files.specs import with_recorded_policy
    from dream_gym.world.files import WORLD_FILE, loads_strict
    from dream_gym.world.writer import check_resumed_settings

    recorded = loads_strict((folder / WORLD_FILE).read_bytes())
    own = recorded.get(section)
    if not isinstance(own, dict):
        source = recorded.get("source")
        if isinstance(source, dict):  # an imported world: no deploy recorded it, whatever system ran
            raise ValueError(f"{folder} holds a world {_source_of(recorded)}, not one that deploy recorded; "
                             "--resume continues a deploy's own world (start the run in a new --out)")
        raise ValueError(f"{folder} holds a world that another system wrote ({_source_of(recorded)}); "
                         f"--resume continues a world with the --system that wrote it")
    recorded_task, task = _recorded_task(folder, recorded, own), settings.task
    if not _same_task(task, recorded_task):
        raise ValueError(f"{folder} holds a run of --task {recorded_task}, not of --task {task}; --resume "
                         "continues a world with the task that made it (start another task in a new --out)")
    check_resumed_settings(folder, with_recorded_policy(recorded), {
        **with_recorded_policy({"policy": settings.policy, "policy_params": dict(settings.policy_params)}),
        "workers": settings.workers, "seed": settings.seed, "beta": settings.beta})
    _check_root_scored(folder, recorded)


def _check_root_scored(folder: Path, recorded: dict[str, Any] | None) -> None:
    """Refuse to continue a run whose initial program failed its evaluation (the world has no
    baseline), naming the failure: nothing can be added to a tree without a scored root."""
    if (error := root_failure(folder, recorded)) is not None:
        raise ValueError(f"{folder}: the run's initial program failed its evaluation ({error}), so the run "
                         f"cannot continue; fix the task and start it again in a new --out (or remove {folder})")


def root_failure(folder: Path, meta: dict[str, Any] | None = None) -> str | None:
    """Why the world's initial program has no score (its error, without a traceback), or None
    when it has one or ``meta`` (world.json) gives a baseline: a world without a baseline can be
    neither continued nor replayed."""
    from dream_gym.infrastructure.printable import error_line
    from dream_gym.world.files import WORLD_FILE, loads_strict

    try:
        with open(folder / NODES_FILE, "rb") as nodes:
            first = nodes.readline()
        root = loads_strict(first)
        meta = loads_strict((folder / WORLD_FILE).read_bytes()) if meta is None else meta
    except (OSError, ValueError):  # no node yet, or a line cut short by a kill (the writer repairs it)
        return None
    if not isinstance(root, dict) or root.get("score") is not None or "baseline_score" in meta:
        return None
    return printable(error_line(root.get("error")) or "no score", 300)


def _recorded_task(folder: Path, recorded: dict[str, Any], own: dict[str, Any]) -> str:
    """The ``--task`` a world was made with: a built-in task's name (its files written to
    ``folder/task``), else its two files."""
    files = next(([str(own[a]), str(own[b])] for a, b in TASK_FILE_KEYS if a in own and b in own), [])
    name = str((recorded.get("task") or {}).get("name"))
    written_here = all(Path(f).parent == (folder / "task").resolve() for f in files)
    # a world folder moved or copied still names its old task/ folder
    from dream_gym.online.tasks import TASKS

    moved = all(Path(f).parent.name == "task" for f in files) and name in TASKS
    return name if written_here or moved else ",".join(files)


def _same_task(given: str, recorded: str) -> bool:
    if ("," in given) != ("," in recorded):
        return False
    if "," not in given:
        return given == recorded
    pairs = zip(given.split(",", 1), recorded.split(",", 1), strict=True)  # both hold one comma
    return all(_same_file(Path(a.strip()).resolve(), Path(b)) for a, b in pairs)


def _same_file(given: Path, recorded: Path) -> bool:
    if given == recorded:
        return True
    return given.exists() and recorded.exists() and given.samefile(recorded)


def world_meta(settings: RunSettings, task_name: str | None, initial: Path, *, frontier: str, source: str,
               section: str, version: str, run: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    """A new world's ``world.json``: the task, W, the policy, the agent, the seed, and the system's
    own ``section`` (its ``version``, the ``run``'s budget and settings, the task's direction, the
    task's ``files`` and the ``--read`` folders)."""
    from dream_gym.world.writer import new_meta

    description, direction = "", None
    if task_name is not None:
        from dream_gym.online.tasks import get_task

        task = get_task(task_name)
        description, direction = task.description, task.direction
    own: dict[str, Any] = {section: {"version": version, **run, "task_direction": direction, **files,
                                     **({"read": [str(p) for p in settings.read]} if settings.read else {})}}
    # what replaying the recording policy needs (dream_gym.fidelity), as grow records it; recorded
    # when empty too, so that a resume can tell "none" from a world written before they were recorded
    own["policy_params"] = dict(settings.policy_params)
    return new_meta(
        settings.world_id or Path(settings.out).name, task_name or initial.parent.name, description,
        direction="maximize", workers=settings.workers, frontier=frontier, source=source, licence="CC-BY-4.0",
        policy=settings.policy,
        agent=settings.model or f"dream-gym serve-agent ({'built-in' if task_name else 'generic'} agent)",
        seed=settings.seed, beta=settings.beta, metric="combined_score", command=settings.command, **own)


def parents_by(settings: RunSettings, own: str) -> str:
    """Who chose the parents, for ``source``: the system's ``own`` selection, or the policy."""
    return own if settings.policy == NATIVE_POLICY else CHOSEN_PARENTS


def files_evaluator(evaluator: Path, own_template: str, write: Callable[[Any, Path], Path], *, seed: int,
                    timeout: float | None, read: tuple[Path, ...], folder: Path) -> Path:
    """The evaluator a system gets for a task given as files: the task's own, run in dream_gym's
    sandbox (wall time from the system's evaluator ``timeout``), each evaluation seeded from the
    run's seed and the program, so the same seed scores every program the same way; written by
    ``write`` into ``folder/task``. An evaluator dream-gym wrote from ``own_template`` (a built-in
    task's, which sandboxes its candidates itself) is given as it is."""
    from dream_gym.integrations.files_task import FilesTask, sandbox_wall_s, written_task

    if written_task(evaluator, own_template) is not None:
        return evaluator
    task = FilesTask.of(evaluator, seed=seed, wall_s=sandbox_wall_s(timeout), read=read)
    return write(task, folder / "task")


def openai_name(model: str) -> str:
    """``model`` without the ``openai/`` prefix of an OpenAI-compatible model."""
    return model.split("/", 1)[1] if model.startswith("openai/") else model


def given_endpoint(model: str, api_base: str | None, api_key: str | None = None) -> tuple[str, str, str]:
    """(model, API base, key) of ``--model``: the base and key given, else ``OPENAI_API_BASE`` and
    ``OPENAI_API_KEY`` (OpenAI's own base; no key)."""
    base = api_base or os.environ.get("OPENAI_API_BASE", DEFAULT_API_BASE)
    return model, base, api_key or os.environ.get("OPENAI_API_KEY") or NO_KEY


@dataclass
class RunParts:
    """What a run opens and closes when it ends, however it ends: the world's writer, the agent
    server (none with a model), the policy's isolated source (none for a built-in policy)."""

    writer: Any
    server: Any = None
    source: Any = None

    def start_agent(self, task_name: str | None, initial: Path, evaluator: Path, seed: int) -> tuple[str, str, str]:
        """(model, API base, key) of an agent server started for the run: the built-in task's own
        agent, or the generic agent for a task given as files (no LLM, no key)."""
        from dream_gym.online.agent_server import MODEL_NAME, AgentServer

        self.server = AgentServer(task_name or f"{initial},{evaluator}", seed=seed).start()
        return MODEL_NAME, self.server.base_url, NO_KEY

    def endpoint(self, settings: RunSettings, task_name: str | None, initial: Path, evaluator: Path,
                 api_key: str | None = None) -> tuple[str, str, str]:
        """(model, API base, key): the agent server's without ``--model``, else :func:`given_endpoint`."""
        if settings.model is None:
            return self.start_agent(task_name, initial, evaluator, settings.seed)
        return given_endpoint(settings.model, settings.api_base, api_key)

    def load_policy(self, settings: RunSettings) -> Any:
        """The policy of ``settings.policy`` (None for ``native``); a model zip loads as data unless
        trusted; a policy file runs isolated, in a source closed with the run."""
        if settings.policy == NATIVE_POLICY:
            return None
        from dream_gym.evaluation.evaluate import model_trust
        from dream_gym.policy_files.specs import PolicySource, is_file_spec

        with model_trust(settings.trust_model):
            if settings.policy_params and not is_file_spec(settings.policy):
                from dream_gym.policy_files import load_policy

                return load_policy(settings.policy, params=settings.policy_params)
            self.source = PolicySource(settings.policy)
            return self.source.new()

    def close(self) -> None:
        self.writer.close()
        if self.source is not None:
            self.source.close()
        if self.server is not None:
            self.server.stop()
        # the system's own logs, traces and database beside the world quote what its LLM client
        # saw (a refused key in an error body, an --api-base with its password): redacted as the
        # world's records are (a kill -9 skips this: what the system wrote so far stays as it is)
        redact_files(self.writer.folder, keep=(NODES_FILE, WORLD_FILE, FOLDER_LOCK_NAME))


def record_counts(records: list[dict[str, Any]]) -> dict[str, Any]:
    """``nodes``, ``invalid`` (programs after the root without a score), ``best_score``, ``rounds``."""
    scores = [r["score"] for r in records if r.get("score") is not None]
    return {"nodes": len(records), "invalid": sum(1 for r in records[1:] if r.get("score") is None),
            "best_score": max(scores) if scores else None,
            "rounds": max((int(r.get("round") or 0) for r in records), default=0)}


def write_summary(folder: Path, summary: dict[str, Any]) -> None:
    """``run_summary.json``: what the run did (secrets redacted)."""
    (folder / RUN_SUMMARY_FILE).write_text(
        json.dumps(redact_value(summary), indent=2, default=str) + "\n", encoding="utf-8")


def was_interrupted(folder: Path) -> bool:
    """Whether the run in ``folder`` last ended by Ctrl-C or SIGTERM (its ``run_summary.json``): its
    world is finished as far as it went, and ``--resume`` continues it to the budget."""
    try:
        return json.loads((folder / RUN_SUMMARY_FILE).read_text(encoding="utf-8")).get("stopped_by") == "shutdown"
    except (OSError, ValueError, AttributeError):
        return False


def nodes_before(records: list[dict[str, Any]]) -> int:
    """The nodes a run starts from: those recorded, or the root a new run records first."""
    return max(1, len(records))


def check_made_programs(system: str, tried: int, unit: str, records: list[dict[str, Any]], before: int,
                        why: str) -> None:
    """Refuse a run whose ``tried`` proposals (the system's ``unit``) made no program beyond the
    ``before`` nodes it started from: ShinkaEvolve and SkyDiscover log a failed proposal (a model
    that answers no patch, or cannot be reached) and go on, so it would end as a spent budget."""
    if tried and len(records) <= before:
        raise RuntimeError(f"none of {system}'s {tried} {unit}(s) made a program ({why}); the world keeps what "
                           "was recorded, and --resume continues it")


def deploy_result(system: str, version: str, folder: Path, records: list[dict[str, Any]], state: Any,
                  started: float, extra: Callable[[int], dict[str, Any]]) -> DeployResult:
    """The run's :class:`DeployResult` (``extra(rounds)``: the system's own counts), also written
    as ``run_summary.json``; ``state`` None: the run stopped by an error before its loop."""
    counts = record_counts(records)
    result = DeployResult(
        system=system, version=version, folder=folder, nodes=counts["nodes"], invalid=counts["invalid"],
        best_score=counts["best_score"], stopped_by=state.stopped_by if state else "error",
        seconds=time.time() - started,
        extra={**extra(counts["rounds"]), **({"resumed": state.resumed} if state and state.resumed else {})})
    write_summary(folder, result.summary())
    return result


__all__ = ["NO_KEY", "RunParts", "RunSettings", "check_made_programs", "check_policy", "check_same_run", "check_task", "check_version", "deploy_result",
           "files_evaluator", "given_endpoint", "nodes_before", "open_world", "openai_name", "parents_by", "record_counts", "resolve_task", "root_failure",
           "was_interrupted", "world_meta", "write_summary"]
