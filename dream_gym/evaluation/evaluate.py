"""Offline evaluation: every (policy, world, beta) episode, in parallel.

:func:`evaluate` runs each policy once per world and beta (docs/concepts/score.md: the beta grid of the v2
objective) on the replay fast path, serially, across watched job processes or on Ray (how and where
a task's episodes run is :mod:`dream_gym.evaluation.runners`), records each world's oracle limit on
its episodes, and writes one JSON line per episode (:mod:`dream_gym.evaluation.results`), journaled
as it goes so a killed run resumes (:mod:`dream_gym.evaluation.journal`). The worlds spec it takes
is :func:`dream_gym.evaluation.world_specs.resolve_worlds`'s;
:func:`dream_gym.evaluation.leaderboard.leaderboard` aggregates its episodes. This module re-exports both
(and the results-file readers and the runners' public names), the one import most callers need.

Determinism: an episode depends only on (policy spec, world, beta, seed, options). Work is cut
into one task per (policy, world) pair holding all its betas in order, whatever the backend
and the number of processes, and results are returned in canonical order (policies as given,
worlds as resolved, betas as given), so serial, process and Ray runs give identical lines.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from dream_gym.evaluation.journal import EvalJournal, journal_path, run_identity
from dream_gym.evaluation.leaderboard import Leaderboard, LeaderboardRow, leaderboard
from dream_gym.evaluation.results import (
    check_results_target,
    dumps_row,
    load_results,
    read_results,
    result_from_row,
    result_row,
)
from dream_gym.evaluation.runners import (
    BACKENDS,
    Outcomes,
    Task,
    check_model_zips,
    close_kept_sources,
    failed_task,
    model_trust,
    run_tasks,
)
from dream_gym.evaluation.world_specs import check_distinct_runs, resolve_worlds
from dream_gym.infrastructure.durable import write_atomic
from dream_gym.infrastructure.jobs import DEFAULT_TASK_TIMEOUT_S, TaskFailure
from dream_gym.infrastructure.locks import file_lock
from dream_gym.infrastructure.sandbox import require_sandbox
from dream_gym.infrastructure.seeds import check_seed
from dream_gym.policy import EpisodeResult, Policy
from dream_gym.policy_files import check_policy_spec
from dream_gym.policy_files.specs import PolicySource, PolicySpec
from dream_gym.replay.oracle import oracle_limit_at
from dream_gym.replay.score import DEFAULT_BETA_GRID, DEFAULT_LAMBDA, check_lambda
from dream_gym.replay.settings import ReplaySettings
from dream_gym.world.tree import World


def _refuse_repeats(policies: Sequence[str | os.PathLike[str]]) -> None:
    """A spec given twice, or two specs with parameters that are one policy with the same
    parameters written apart (``greedy(patience=3)``, ``greedy( patience = 3 )``): two rows of
    one policy."""
    if len(set(policies)) != len(policies):
        raise ValueError(f"policies repeat: {policies}")
    seen: dict[tuple[str, tuple[tuple[str, Any], ...]], str] = {}
    for given in policies:
        spec = os.fspath(given)
        if "(" not in spec:
            continue
        parsed = PolicySpec.of(spec)
        key = (parsed.name, tuple(sorted(parsed.params)))
        if key in seen:
            raise ValueError(f"{seen[key]!r} and {spec!r} are one policy with the same parameters")
        seen[key] = spec


def _spec_hint(given: Any) -> str:
    """The spec that names what was given instead of one: a class, or a policy object's class
    (with ``(KEY=VALUE)`` for the parameters it was built with)."""
    cls = given if isinstance(given, type) else type(given)
    if not callable(getattr(cls, "act", None)):
        return ""
    from dream_gym.policies import POLICIES

    builtin = next((name for name, factory in POLICIES.items() if factory is cls), None)
    spec = builtin or f"{cls.__module__}:{cls.__qualname__}"
    return f"; {'the class' if given is cls else 'its class'} is {spec!r}" + (
        "" if given is cls else f", and {spec}(KEY=VALUE, ...) gives its parameters")


def load_policy_spec(spec: str, file_options: Mapping[str, Any] | None = None) -> Policy:
    """A fresh policy for a spec (``dream_gym.policy_files.load_policy``); ``file_options``
    (IsolatedPolicy options such as ``decision_timeout_s`` or ``hash_seed``) apply to policy
    files only."""
    return PolicySource(spec, file_options).new()


def parse_betas(betas: Sequence[float] | str | float | None) -> tuple[float, ...]:
    """The beta grid: a sequence, a comma-separated string or one number (None: the default grid)."""
    if betas is None:
        return DEFAULT_BETA_GRID
    if isinstance(betas, str):
        try:
            betas = [float(b) for b in betas.split(",") if b.strip()]
        except ValueError:
            raise ValueError(f"betas must be numbers in [0, 1], comma-separated, got {betas!r}") from None
    elif isinstance(betas, (int, float)):
        betas = [float(betas)]
    out = tuple(float(b) for b in betas)
    if not out:
        raise ValueError("no betas to evaluate")
    for beta in out:
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"beta must be in [0, 1], got {beta}")
    if len(set(out)) != len(out):
        raise ValueError(f"betas repeat: {list(out)}")
    return out


def evaluate(
    policies: Sequence[str] | str,
    worlds: Any,
    betas: Sequence[float] | str | float | None = None,
    *,
    settings: ReplaySettings | None = None,
    jobs: int | None = None,
    backend: str = "process",
    out: str | os.PathLike[str] | None = None,
    progress: bool = True,
    lam: float = DEFAULT_LAMBDA,
    seed: int = 0,
    task_timeout: float | None = DEFAULT_TASK_TIMEOUT_S,
    chunk_size: int | None = None,
    file_options: Mapping[str, Any] | None = None,
    resume: bool = False,
    trust_model: bool = False,
    overwrite: bool = False,
    **replay: Any,
) -> list[EpisodeResult]:
    """Run every (policy, world, beta) episode and return the results in canonical order.

    Args:
        policies: policy specs, or one (a built-in name, ``module:Class`` or a ``.py`` file run isolated;
            see ``dream_gym.policy_files.load_policy``). The spec labels the policy in the results.
        worlds: anything :func:`resolve_worlds` accepts, or a list of World objects.
        betas: the budget preferences (default: the v2 grid 0.0, 0.1, ..., 1.0), "0.1,0.5" or one number.
        jobs: processes (default: the CPU count, or none but this one for a small grid of
            built-in policies and policy files: see :data:`SMALL_GRID_NODE_EPISODES`); 1 is the
            serial backend, whose one job process (watched, for ``task_timeout``) is started as
            every job process is: a script that calls ``evaluate`` with jobs needs its
            ``if __name__ == "__main__":`` guard (the fork server imports the script again).
        settings: what decides each episode besides its world, policy and beta
            (:class:`~dream_gym.replay.settings.ReplaySettings`: W, beta1, beta2, the round limit,
            the frontier rule, ``max_attempts``, request mode); default: the defaults, each world
            replayed at its recorded W and rule. A policy that asks for more than ``max_attempts``
            attempts in one episode gets an ``EpisodeLimitError`` on that world. In request mode
            each policy chooses among what an online run could continue, and what the record cannot
            answer is refused and counted (docs/concepts/coverage.md); every episode records its
            coverage either way (``refused``, ``cut_short``, ``answerable``).
        replay: the same settings as keywords (``workers=4, max_rounds=20``); a field given both
            here and in ``settings`` with another value is an error.
        backend: "process" (job processes of :mod:`dream_gym.infrastructure.jobs`: started by a fork
            server, never forked from this process, and watched), "serial" (one task at a
            time: in one watched job process, or in this process when ``task_timeout`` is
            None) or "ray".
        out: write one JSON line per episode there (in canonical order).
        progress: show a rich progress bar (on stderr).
        lam: recorded with the results for the leaderboard (the v2 penalty weight).
        seed: the seed every policy gets in its RunContext (a whole number from 0 to 2**32 - 1).
        task_timeout: seconds a (policy, world) task may go without progress (a decision or
            a finished episode) before its worker is killed and replaced; the episodes it did
            not finish get a ``TaskTimeout`` error. None: no watchdog (the ray backend has none).
        chunk_size: (policy, world) tasks per Ray task (default: balanced for the jobs).
        file_options: IsolatedPolicy options for policy files (``decision_timeout_s``,
            ``episode_timeout_s``, ``memory_mb``, ``hash_seed``, ...).
        resume: continue the run into ``out`` that was killed: the (policy, world) tasks its
            journal ``<out>.partial`` holds are kept, only the others run (the journal must be
            of the same policies, worlds, betas and options; see :mod:`dream_gym.evaluation.journal`).
        trust_model: load model zips with the objects pickled in them, which run as code (only
            for models whose authors you trust). Default: as data (:mod:`dream_gym.rl.model_zips`),
            and a zip holding anything else is refused (UntrustedModelError) before anything runs.
        overwrite: replace the results an earlier evaluation left in ``out``; without it a
            non-empty ``out`` is refused (FileExistsError) before any episode, unless ``resume``
            continues the run whose journal is beside it.

    With ``out``, the run holds the lock of ``out`` (``<out>.lock``, :mod:`dream_gym.infrastructure.locks`):
    a second run into the same file is refused with LockedError naming this one. Each finished
    task is journaled durably, so a killed run loses only the tasks in flight; without
    ``resume``, a journal left by a killed run is an error (FileExistsError).

    A policy that raises, returns an illegal batch, asks for more than ``max_attempts``
    attempts in one episode, cannot be loaded, hangs (``task_timeout``) or kills its worker gets
    its error in ``EpisodeResult.error``; every other episode still runs. An unknown policy
    name, module or file raises LookupError before anything runs. A class defined in a notebook
    (``"__main__:MyPolicy"``) is played in this process by the default ``jobs`` and ``backend``
    (job processes cannot import a notebook); other settings refuse it (ValueError).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    policies = [policies] if isinstance(policies, (str, os.PathLike)) else list(policies)  # one spec, not letters
    if not policies:
        raise ValueError("no policies to evaluate")
    for spec in policies:
        if not isinstance(spec, (str, os.PathLike)):
            raise TypeError(f"a policy to evaluate is a spec (a built-in name, module:Class, a .py file or a "
                            f"model: each episode builds its own policy from it), got {type(spec).__name__}"
                            f"{_spec_hint(spec)}")
    check_seed(seed)
    _refuse_repeats(policies)
    for spec in policies:  # fail fast on an unknown name, module or file; built only in workers
        check_policy_spec(spec)
    if not trust_model:
        check_model_zips(policies)
    if any(PolicySpec.of(spec).kind == "file" for spec in policies):
        require_sandbox()  # policy files run only where the kernel can sandbox them
    if task_timeout is not None and not task_timeout > 0:
        raise ValueError(f"task_timeout must be > 0 seconds or None, got {task_timeout}")
    if resume and out is None:
        raise ValueError("resume needs out: a run resumes from the journal beside its results file")
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be >= 1 (or None: the CPU count), got {jobs}")
    world_list = resolve_worlds(worlds)
    if not world_list:
        raise LookupError("no worlds to evaluate")
    check_distinct_runs(world_list)
    beta_grid = parse_betas(betas)
    settings = _episode_settings(settings, replay)
    tasks = [
        Task(p, w, spec, str(world.path) if world.path is not None else world, beta_grid, settings, seed,
              file_options, trust_model)
        for p, spec in enumerate(policies)
        for w, world in enumerate(world_list)
    ]
    if jobs is None and backend == "process" and (_small_grid(policies, world_list, beta_grid)
                                                  or not _main_importable(policies)):
        backend, jobs, task_timeout = "serial", 1, None  # in this process: see SMALL_GRID_NODE_EPISODES, _main_importable
    jobs = max(1, int(jobs if jobs is not None else (os.cpu_count() or 1)))
    if backend == "process" and jobs == 1:
        backend = "serial"
    if not (backend == "serial" and task_timeout is None):
        _check_main_importable(policies)
    options = {**_identity_settings(settings), "seed": seed, "lam": check_lambda(lam)}
    identity = {"policies": policies, "worlds": world_list, "betas": beta_grid, "options": options,
                "file_options": file_options}
    with _results_output(out, identity, resume, overwrite) as journal:
        by_key: dict[tuple[int, int], list[EpisodeResult]] = dict(journal.finished) if journal else {}
        pending = [t for t in tasks if (t.policy_index, t.world_index) not in by_key]
        label = f"{len(policies)}x{len(world_list)}x{len(beta_grid)} episodes ({backend})"
        with _progress_bar(progress, len(tasks) * len(beta_grid), label) as advance:
            advance(sum(len(results) for results in by_key.values()))  # resumed from the journal
            for index, outcome in run_tasks(pending, backend, jobs, task_timeout, chunk_size):
                task = pending[index]
                if isinstance(outcome, TaskFailure):
                    outcome = failed_task(task, world_list[task.world_index], outcome)
                by_key[(task.policy_index, task.world_index)] = outcome
                if journal is not None:
                    journal.append((task.policy_index, task.world_index), outcome)
                advance(len(outcome))
        _record_limits(by_key, world_list, settings)
        if out is not None:
            write_atomic(out, "".join(
                dumps_row(result_row(result, world_list[key[1]], **_replayed(settings, world_list[key[1]]),
                                     lam=lam, seed=seed)) + "\n"
                for key in sorted(by_key) for result in by_key[key]
            ))
        if journal is not None:
            journal.remove()  # only once the results file is whole
    return [r for key in sorted(by_key) for r in by_key[key]]


def _main_importable(policies: Sequence[str | os.PathLike[str]]) -> bool:
    """Whether job processes can build every ``__main__:Class`` of ``policies``: they import the
    calling script again, and where ``__main__`` is no script (a notebook, ``python -c``, standard
    input) they cannot."""
    import sys

    script = getattr(sys.modules.get("__main__"), "__file__", None)
    return (isinstance(script, str) and os.path.isfile(script)) or not any(
        str(spec).startswith("__main__:") for spec in policies)


def _check_main_importable(policies: Sequence[str | os.PathLike[str]]) -> None:
    """Refuse, before anything runs, a ``__main__:Class`` that job processes cannot build: every
    episode would fail with the policy not found."""
    if not _main_importable(policies):
        spec = next(str(spec) for spec in policies if str(spec).startswith("__main__:"))
        raise ValueError(f"policy {spec!r}: job processes cannot import __main__ here (it is no script file: "
                         "a notebook, python -c or standard input); evaluate it in this process with "
                         "backend='serial', task_timeout=None (the default jobs and backend do), or define it "
                         "in a module")


def _episode_settings(settings: ReplaySettings | None, replay: Mapping[str, Any]) -> ReplaySettings:
    """One settings value from ``settings=`` and the same fields given as keywords."""
    if "beta" in replay:
        raise TypeError("evaluate() replays every beta of betas: give betas=, not beta=")
    return ReplaySettings.combined(settings, **replay)


def _identity_settings(settings: ReplaySettings) -> dict[str, Any]:
    """The settings a run's journal records for resuming: every field but beta (each episode's
    own); the frontier rule and request mode only when set, so a journal written before they
    could be set still resumes."""
    fields = settings.as_dict()
    del fields["beta"]
    for optional in ("frontier", "requests"):
        if not fields[optional]:
            del fields[optional]
    return fields


#: A grid of at most this many node-episodes (episodes x world nodes) runs in this process when
#: no ``jobs`` are given: starting job processes would cost more than they save. Only built-in
#: names and policy files (each isolated, with its own time limits) qualify: a ``module:Class``
#: or a model keeps the watchdog of a job process.
SMALL_GRID_NODE_EPISODES = 100_000


def _small_grid(policies: Sequence[str], worlds: Sequence[World], betas: Sequence[float]) -> bool:
    if any(PolicySpec.of(spec).in_watched_process for spec in policies):
        return False
    return len(policies) * len(betas) * sum(world.size for world in worlds) <= SMALL_GRID_NODE_EPISODES


@contextlib.contextmanager
def _results_output(out: str | os.PathLike[str] | None, identity: Mapping[str, Any],
                    resume: bool, overwrite: bool) -> Iterator[EvalJournal | None]:
    """With a results file: its lock for the whole run, and the journal of finished tasks."""
    if out is None:
        yield None
        return
    check_results_target(out)
    with file_lock(out):
        continued = resume and journal_path(out).exists()
        if not overwrite and not continued and Path(out).is_file() and Path(out).stat().st_size:
            raise FileExistsError(f"{out} holds the results of an earlier evaluation; give another path, or "
                                  "pass --force (overwrite=True) to replace them")
        journal = EvalJournal.open(out, run_identity(**identity), resume=resume)
        try:
            yield journal
        finally:
            journal.close()


def _replayed(settings: ReplaySettings, world: World) -> dict[str, Any]:
    """What a result row records of the settings its episode was replayed at on ``world``: W and
    the frontier rule as replayed (the world's where not given), beta1, beta2 and the round limit
    (the beta is the episode's own field)."""
    replayed = settings.resolved(world).as_dict()
    del replayed["beta"]
    return replayed


def _record_limits(
    by_key: Mapping[tuple[int, int], list[EpisodeResult]], world_list: Sequence[World], settings: ReplaySettings
) -> None:
    """Set each episode's ``limit``: its world's oracle limit at the replayed W, beta1, beta2,
    frontier and round limit (computed once per world, here, outside every policy's reach)."""
    limits: dict[int, float] = {}
    for (_, w), results in by_key.items():
        if w not in limits:
            world = world_list[w]
            limits[w] = oracle_limit_at(world, settings).value
        for result in results:
            result.limit = limits[w]


class _progress_bar:
    """A rich progress bar on stderr (a no-op when disabled)."""

    def __init__(self, enabled: bool, total: int, description: str):
        self.enabled, self.total, self.description = enabled, total, description
        self._progress: Any = None

    def __enter__(self) -> Callable[[int], None]:
        if not self.enabled:
            return lambda n: None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=Console(stderr=True), transient=False,
        )
        self._progress.__enter__()
        task_id = self._progress.add_task(self.description, total=self.total)
        return lambda n: self._progress.advance(task_id, n)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)


# How and where a task's episodes run has a module of its own (runners); callers import its public
# names from here, as they did before it had one.
__all__ = [
    "BACKENDS",
    "DEFAULT_TASK_TIMEOUT_S",
    "Leaderboard",
    "LeaderboardRow",
    "Outcomes",
    "check_model_zips",
    "close_kept_sources",
    "evaluate",
    "leaderboard",
    "load_policy_spec",
    "model_trust",
    "load_results",
    "parse_betas",
    "read_results",
    "resolve_worlds",
    "result_from_row",
    "result_row",
]
