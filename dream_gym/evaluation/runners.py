"""How an evaluation's (policy, world) tasks run, and where.

A :class:`Task` holds every beta of one (policy, world) pair: the unit of work, the same whatever
the backend and the number of processes. Its episodes run in order, each with a fresh policy
object, or, for a policy file, side by side, each in its own isolated template, taking turns on a
fixed schedule (the templates are kept across this process's tasks: the kept sources);
a task that fails whole is recorded as failed on each of its episodes (:func:`failed_task`).
:func:`run_tasks` runs a list of tasks on a backend of :data:`BACKENDS`: in this process, in
watched job processes (:mod:`dream_gym.infrastructure.jobs`: a fork server that preloads this
module, a watchdog) or on Ray. Model zips load as data unless trusted (:func:`model_trust`,
:func:`check_model_zips`).

:func:`dream_gym.evaluation.evaluate.evaluate` builds the tasks, runs them here and records their
results. Tasks are pickled to job processes and Ray by this module's path.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing.util
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.jobs import JobPool, TaskFailure, job_context, require_ray
from dream_gym.policy import EpisodeResult, Policy, result_from_session, run_episode
from dream_gym.policy_files.specs import MODEL_MODULES, PolicySource, PolicySpec
from dream_gym.policy_files.turns import Turns
from dream_gym.replay.session import ReplaySession, world_fields
from dream_gym.replay.settings import ReplaySettings
from dream_gym.world.registry import load_cached
from dream_gym.world.tree import World

BACKENDS = ("process", "ray", "serial")


@dataclass(frozen=True)
class Task:
    """All betas of one (policy, world) pair: the unit of work sent to a worker."""

    policy_index: int
    world_index: int
    policy: str
    world: str | World  # a folder path (workers load it with load_cached), or the World itself
    betas: tuple[float, ...]
    settings: ReplaySettings  # of every episode but its beta (taken from ``betas``)
    seed: int
    file_options: Mapping[str, Any] | None = None
    trust_model: bool = False  # model zips load with the objects pickled in them (else as data)


class _Heartbeat:
    """The policy, with ``beat()`` (the watchdog's heartbeat) before and after every decision."""

    def __init__(self, policy: Policy, beat: Callable[[], None]):
        self.policy, self.beat = policy, beat

    def reset(self, context: Any) -> None:
        self.beat()
        self.policy.reset(context)
        self.beat()

    def act(self, view: Any) -> Any:
        self.beat()
        batch = self.policy.act(view)
        self.beat()
        return batch


def _no_beat(step: int | None = None, allowance_s: float | None = None) -> None:
    pass


def _task_results(task: Task, beat: Callable[..., None] = _no_beat) -> list[EpisodeResult]:
    """The task's episodes, one per beta in order (a JobPool task function: ``beat(i)``
    when episode i starts, ``beat()`` around every decision)."""
    with model_trust(task.trust_model):
        return _episodes(task, beat)


def model_trust(trusted: bool) -> contextlib.AbstractContextManager[None]:
    """A block in which model zips load with the objects pickled in them (``trusted``: the
    ``--trust-model`` of a command), else as data (:mod:`dream_gym.rl.model_zips`). Imports the
    RL stack only when trusted."""
    if not trusted:
        return contextlib.nullcontext()
    from dream_gym.rl.model_zips import trusted_models

    return trusted_models()


def check_model_zips(policies: Sequence[str]) -> None:
    """Refuse a model spec whose zip does not load as data (UntrustedModelError naming what it
    holds), or whose spaces no dream_gym policy runs (ValueError naming them), before anything
    runs: reads the zips' data, imports no torch."""
    for spec in map(PolicySpec.of, policies):
        if spec.kind == "model":
            from types import SimpleNamespace

            from dream_gym.rl.archs import ARCH_ATTRIBUTE, runs_here, unknown_model
            from dream_gym.rl.model_zips import check_model_zip

            for path in spec.model_files():
                contents = check_model_zip(path)
                recorded = {ARCH_ATTRIBUTE: contents.data[ARCH_ATTRIBUTE]} if ARCH_ATTRIBUTE in contents.data else {}
                model = SimpleNamespace(**contents.spaces, **recorded)  # what the checks read of a loaded model
                if not runs_here(model):
                    raise ValueError(unknown_model(Path(path).stem, model))


def _episodes(task: Task, beat: Callable[..., None]) -> list[EpisodeResult]:
    world = task.world if isinstance(task.world, World) else load_cached(task.world)
    beat()
    try:
        source: PolicySource | None = _source_for(task)
        load_error = None
    except Exception as exc:  # noqa: BLE001 - recorded on each of this task's episodes
        source, load_error = None, f"{type(exc).__name__}: {exc}"
    try:
        if source is not None and source.untrusted and len(task.betas) > 1:
            return _side_by_side(task, world, source, beat)
        results: list[EpisodeResult] = []
        for i, beta in enumerate(task.betas):
            beat(i)
            try:
                policy = source.new() if source is not None else None  # a fresh object every episode
            except Exception as exc:  # noqa: BLE001 - recorded on the episode
                policy, load_error = None, f"{type(exc).__name__}: {exc}"
            results.append(_episode(task, world, policy, beta, beat, load_error))
        return results
    finally:
        if source is not None and source not in _KEPT_SOURCES.values():
            source.close()


def _episode(task: Task, world: World, policy: Policy | None, beta: float, beat: Callable[..., None],
             load_error: str | None) -> EpisodeResult:
    if policy is None:
        result = result_from_session(ReplaySession(world, task.settings, beta=beta), task.policy, load_error)
    else:
        watched = policy if beat is _no_beat else _Heartbeat(policy, beat)
        result = run_episode(watched, world, seed=task.seed, on_error="record", settings=task.settings, beta=beta)
    result.policy = task.policy  # the spec names the policy in the results, not its class
    return result


def _side_by_side(task: Task, world: World, source: PolicySource, beat: Callable[..., None]) -> list[EpisodeResult]:
    """The task's episodes of untrusted code, each in its own thread and its own template,
    taking turns (:class:`~dream_gym.policy_files.turns.Turns`). Played one after another, an
    episode could time its last reply and the next read the clock as it starts; played at the
    same time, one could load the CPUs and the others time it: the wall clock, which no sandbox
    hides, would carry what the first revealed into the others. Taking turns on a fixed
    schedule, each episode runs alone, and what it can time is the schedule."""
    try:
        policies = source.side_by_side(len(task.betas))
    except Exception as exc:  # noqa: BLE001 - recorded on each of the task's episodes
        return [_episode(task, world, None, beta, beat, f"{type(exc).__name__}: {exc}") for beta in task.betas]
    world_fields(world).fill()  # once here, not by every thread at once
    # the watchdog waits for a decision as long as its stretched timeout, which ends it first
    beat(allowance_s=max(policy.decision_limit_s for policy in policies) + 10.0)  # type: ignore[attr-defined]
    results: list[EpisodeResult | BaseException | None] = [None] * len(task.betas)

    def play(i: int) -> None:
        try:
            results[i] = _episode(task, world, policies[i], task.betas[i], beat, None)
        except BaseException as exc:  # noqa: BLE001 - raised again by the task, below
            results[i] = exc

    threads = [threading.Thread(target=play, args=(i,), name=f"dream_gym-episode-{i}", daemon=True)
               for i in range(len(task.betas))]
    with Turns([policy.pid for policy in policies if policy.pid is not None]) as turns:  # type: ignore[attr-defined]
        for thread in threads:
            thread.start()
        turns.run(lambda: not any(thread.is_alive() for thread in threads))
    for thread in threads:
        thread.join()
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return [result for result in results if isinstance(result, EpisodeResult)]


#: The policy-file sources of this process, kept across its tasks: one isolated child per
#: (policy file, options) and process, reused from world to world. Nothing crosses episodes
#: or worlds: every episode runs in a new process forked from the child's template, and the
#: child never holds a world (see :mod:`dream_gym.policy_files.isolated`). A job killed by the
#: watchdog takes its children with it.
_KEPT_SOURCES: dict[tuple[str, str], PolicySource] = {}


def _source_for(task: Task) -> PolicySource:
    """The task's policy source: this process's kept one for a policy file, else a new one."""
    if PolicySpec.of(task.policy).kind != "file":
        return PolicySource(task.policy, task.file_options)
    key = (task.policy, repr(sorted((task.file_options or {}).items())))
    source = _KEPT_SOURCES.get(key)
    if source is None:
        source = PolicySource(task.policy, task.file_options)
        if not _KEPT_SOURCES:  # a job process ends its children as it exits (SIGTERM included)
            multiprocessing.util.Finalize(None, close_kept_sources, exitpriority=10)
        _KEPT_SOURCES[key] = source
    else:  # an error on this world quotes only what was printed on it
        source.forget_output()
    return source


def close_kept_sources() -> None:
    """End the isolated children this process keeps across tasks (at the end of an in-process run)."""
    while _KEPT_SOURCES:
        _KEPT_SOURCES.popitem()[1].close()


def failed_task(task: Task, world: World, failure: TaskFailure) -> list[EpisodeResult]:
    """The task's episodes, each with the error that ended the task (its finished episodes are
    lost with its worker: a failed task is recorded whole, the same whatever the timing)."""
    kind = {"timeout": "TaskTimeout", "died": "WorkerDied"}.get(failure.kind, "TaskError")
    where = f", in the episode at beta {task.betas[failure.step]:g}" if failure.step is not None else ""
    message = (f"{kind}: policy {task.policy} on world {world.id}{where}: {failure.message.strip()}; "
               f"all {len(task.betas)} episodes of the task are recorded as failed")
    return [result_from_session(ReplaySession(world, task.settings, beta=beta), task.policy, message)
            for beta in task.betas]


Outcomes = Iterator[tuple[int, list[EpisodeResult] | TaskFailure]]


def _in_process(tasks: list[Task]) -> Outcomes:
    """Every task in this process, no watchdog (``backend="serial", task_timeout=None``, or a
    small grid by default)."""
    try:
        for index, task in enumerate(tasks):
            try:
                yield index, _task_results(task)
            except Exception as exc:  # noqa: BLE001 - the same record as a failed task in a worker
                yield index, TaskFailure("error", f"{type(exc).__name__}: {exc}")
    finally:
        close_kept_sources()


def _watched(tasks: list[Task], jobs: int, task_timeout: float | None) -> Outcomes:
    """Every task in job processes (dream_gym.infrastructure.jobs: fork server, watchdog). Where a task runs a
    trained model, the fork server imports the model's stack once (when this process starts it)."""
    models = MODEL_MODULES if any(PolicySpec.of(task.policy).kind == "model" for task in tasks) else ()
    context = job_context(preload=(__name__, *models))
    with JobPool(_task_results, jobs, task_timeout=task_timeout, context=context) as pool:
        yield from pool.run(tasks)


def _run_chunk(tasks: list[tuple[int, Task]]) -> list[tuple[int, list[EpisodeResult]]]:
    return [(index, _task_results(task)) for index, task in tasks]


def _ray(tasks: list[Task], jobs: int, chunk_size: int | None) -> Outcomes:
    require_ray()
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False)
    per_chunk = chunk_size or max(1, math.ceil(len(tasks) / (4 * jobs)))  # a few chunks per process
    numbered = list(enumerate(tasks))
    remote = ray.remote(_run_chunk)
    pending = [remote.remote(numbered[i : i + per_chunk]) for i in range(0, len(numbered), per_chunk)]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        yield from ray.get(done[0])


def run_tasks(tasks: list[Task], backend: str, jobs: int, task_timeout: float | None,
              chunk_size: int | None) -> Outcomes:
    """The outcomes of ``tasks`` (indices into it), on the backend asked for."""
    if not tasks:  # a resumed run whose journal holds every task: start no worker
        return iter(())
    if backend == "ray":
        return _ray(tasks, jobs, chunk_size)
    if backend == "serial" and task_timeout is None:
        return _in_process(tasks)
    return _watched(tasks, jobs if backend == "process" else 1, task_timeout)


__all__ = ["BACKENDS", "Outcomes", "Task", "check_model_zips", "close_kept_sources", "failed_task", "model_trust",
           "run_tasks"]
