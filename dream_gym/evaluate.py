"""Offline evaluation: every (policy, world, beta) episode, in parallel, and a leaderboard.

* :func:`resolve_worlds` turns a worlds spec (folder, folder of worlds, dataset id, shipped
  world name, split name ``train``/``heldout``; comma-separated lists) into World objects.
* :func:`evaluate` runs each policy once per world and beta (SPEC §4: the beta grid of the v2
  objective) on the replay fast path, serially, across processes or on Ray, and writes one JSON
  line per episode.
* :func:`leaderboard` aggregates the episodes per world and over worlds (mean V over beta, the
  v2 objective ``auc - lambda * penalty``, attainment, attempts, rounds, errors, and V as a share
  of the world's oracle limit, which :func:`evaluate` records on every episode).

Determinism: an episode depends only on (policy spec, world, beta, seed, options). Work is cut
into one task per (policy, world) pair holding all its betas in order, whatever the backend
and the number of processes, and results are returned in canonical order (policies as given,
worlds as resolved, betas as given), so serial, process and Ray runs give identical lines.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from dream_gym.policy import EpisodeResult, Policy, result_from_session, run_episode
from dream_gym.policy_files import check_policy_spec, load_policy
from dream_gym.registry import load_cached, resolve_world, shipped_worlds_dir
from dream_gym.score import (
    DEFAULT_BETA1,
    DEFAULT_BETA2,
    DEFAULT_BETA_GRID,
    DEFAULT_LAMBDA,
    oracle_limit,
    v2_objective,
)
from dream_gym.session import ReplaySession
from dream_gym.workers import TaskFailure, WatchedPool
from dream_gym.world import WORLD_FILE, World

BACKENDS = ("process", "ray", "serial")
SPLIT_ALIASES = {"train": ("train",), "heldout": ("heldout", "held_out"), "held_out": ("held_out", "heldout")}
RESULT_FORMAT = "dream-gym-results/1"

# --------------------------------------------------------------------------- worlds


def _is_world_folder(path: Path) -> bool:
    return (path / WORLD_FILE).is_file()


def _shipped_dataset_meta() -> tuple[Path, dict[str, Any]] | None:
    try:
        from dream_gym.datasets.store import shipped_path
    except ImportError:  # the store is optional for this module
        candidate = shipped_worlds_dir()
        root: Path | None = candidate if (candidate / "dataset.json").is_file() else None
    else:
        root = shipped_path()
    if root is None:
        return None
    return root, json.loads((root / "dataset.json").read_text(encoding="utf-8"))


def _split_worlds(name: str) -> list[World]:
    found = _shipped_dataset_meta()
    if found is None:
        raise LookupError(
            f"split {name!r} needs the shipped dataset (recorded_worlds/dataset.json, or "
            "$DREAM_GYM_SHIPPED), which is not present"
        )
    root, meta = found
    split = meta.get("split") or {}
    for key in SPLIT_ALIASES[name]:
        if key in split:
            return [load_cached(root / str(world)) for world in split[key]]
    raise LookupError(f"the shipped dataset {root} has no split {name!r}; it has: {', '.join(split) or 'none'}")


def _dataset_worlds(dataset_id: str) -> list[World]:
    from dream_gym.datasets.store import find_dataset

    dataset = find_dataset(dataset_id)
    return [load_cached(dataset.world_path(name)) for name in dataset.world_names]


def _looks_like_dataset_id(text: str) -> bool:
    try:
        from dream_gym.datasets.ids import is_dataset_id
    except ImportError:
        return False
    return bool(is_dataset_id(text))


def _resolve_one(spec: str) -> list[World]:
    path = Path(spec).expanduser()
    if path.is_dir():
        if _is_world_folder(path):
            return [load_cached(path)]
        children = sorted(p for p in path.iterdir() if p.is_dir() and _is_world_folder(p))
        if not children:
            raise LookupError(f"{spec!r} is a folder but neither a world (no {WORLD_FILE}) nor a folder of worlds")
        return [load_cached(p) for p in children]
    if spec in SPLIT_ALIASES:
        return _split_worlds(spec)
    if _looks_like_dataset_id(spec):
        return _dataset_worlds(spec)
    try:
        return [resolve_world(spec)]  # a shipped world name or ns/name-vN/<world>
    except LookupError as exc:
        raise LookupError(
            f"cannot resolve worlds {spec!r}: not a world folder, a folder of worlds, a dataset id "
            f"'namespace/name-vN', a split name (train, heldout) or a shipped world ({exc})"
        ) from None


def resolve_worlds(spec: str | os.PathLike[str] | World | Iterable[str | os.PathLike[str] | World]) -> list[World]:
    """The worlds a spec names, in order, without duplicates.

    ``spec`` is a world folder, a folder of world folders (sorted by name), a dataset id
    (``ns/name-vN``), a world of a dataset (``ns/name-vN/world``), a shipped world's name, a
    split of the shipped dataset (``train`` or ``heldout``), a World, or a comma-separated
    string / list of these. Raises LookupError naming what could not be resolved.
    """
    items: list[str | World] = []
    if isinstance(spec, World):
        items = [spec]
    elif isinstance(spec, (str, os.PathLike)):
        text = os.fspath(spec)
        items = [part.strip() for part in text.split(",") if part.strip()] if not Path(text).exists() else [text]
    else:
        for item in spec:
            items.extend(resolve_worlds(item))
    if not items:
        raise LookupError(f"no worlds in spec {spec!r}")
    worlds: list[World] = []
    seen: set[object] = set()
    for item in items:
        for world in [item] if isinstance(item, World) else _resolve_one(item):
            key: object = str(world.path) if world.path is not None else id(world)
            if key not in seen:
                seen.add(key)
                worlds.append(world)
    return worlds


# --------------------------------------------------------------------------- policies


def load_policy_spec(spec: str, file_options: Mapping[str, Any] | None = None) -> Policy:
    """A fresh policy for a spec (``dream_gym.policy_files.load_policy``); ``file_options``
    (IsolatedPolicy options such as ``decision_timeout_s`` or ``hash_seed``) apply to policy
    files only."""
    if file_options and spec.endswith(".py"):
        return load_policy(spec, **file_options)
    return load_policy(spec)


def _close(policy: object) -> None:
    close = getattr(policy, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # noqa: BLE001 - closing a broken policy must not end the evaluation
            pass


# --------------------------------------------------------------------------- episodes

#: Seconds a (policy, world) task may go without progress (a decision or a finished episode)
#: before the watchdog ends it (``--task-timeout``). Above the isolated policies' own limits
#: (5 s a decision, 30 s to start), so their finer errors come first.
DEFAULT_TASK_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class _Task:
    """All betas of one (policy, world) pair: the unit of work sent to a worker."""

    policy_index: int
    world_index: int
    policy: str
    world: str | World  # a folder path (workers load it with load_cached), or the World itself
    betas: tuple[float, ...]
    options: Mapping[str, Any]
    file_options: Mapping[str, Any] | None = None


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


def _no_beat(step: int | None = None) -> None:
    pass


def _task_results(task: _Task, beat: Callable[..., None] = _no_beat) -> list[EpisodeResult]:
    """The task's episodes, one per beta in order (a WatchedPool task function: ``beat(i)``
    when episode i starts, ``beat()`` around every decision)."""
    world = task.world if isinstance(task.world, World) else load_cached(task.world)
    options = dict(task.options)
    seed = int(options.pop("seed", 0))
    beat(0)
    try:
        policy: Policy | None = load_policy_spec(task.policy, task.file_options)
        load_error = None
    except Exception as exc:  # noqa: BLE001 - recorded on each of this task's episodes
        policy, load_error = None, f"{type(exc).__name__}: {exc}"
    results: list[EpisodeResult] = []
    try:
        for i, beta in enumerate(task.betas):
            beat(i)
            if policy is None:
                result = result_from_session(ReplaySession(world, beta=beta, **options), task.policy, load_error)
            else:
                watched = policy if beat is _no_beat else _Heartbeat(policy, beat)
                result = run_episode(watched, world, seed=seed, on_error="record", beta=beta, **options)
            result.policy = task.policy  # the spec names the policy in the results, not its class
            results.append(result)
    finally:
        _close(policy)
    return results


def _failed_task(task: _Task, world: World, failure: TaskFailure) -> list[EpisodeResult]:
    """The task's episodes, each with the error that ended the task (its finished episodes are
    lost with its worker: a failed task is recorded whole, the same whatever the timing)."""
    options = dict(task.options)
    options.pop("seed", None)
    kind = {"timeout": "TaskTimeout", "died": "WorkerDied"}.get(failure.kind, "TaskError")
    where = f", in the episode at beta {task.betas[failure.step]:g}" if failure.step is not None else ""
    message = (f"{kind}: policy {task.policy} on world {world.id}{where}: {failure.message.strip()}; "
               f"all {len(task.betas)} episodes of the task are recorded as failed")
    return [result_from_session(ReplaySession(world, beta=beta, **options), task.policy, message)
            for beta in task.betas]


Outcomes = Iterator[tuple[int, list[EpisodeResult] | TaskFailure]]


def _in_process(tasks: list[_Task]) -> Outcomes:
    """Every task in this process, no watchdog (``backend="serial", task_timeout=None``)."""
    for index, task in enumerate(tasks):
        try:
            yield index, _task_results(task)
        except Exception as exc:  # noqa: BLE001 - the same record as a failed task in a worker
            yield index, TaskFailure("error", f"{type(exc).__name__}: {exc}")


def _watched(tasks: list[_Task], jobs: int, task_timeout: float | None) -> Outcomes:
    """Every task in worker processes (dream_gym.workers: fork server, watchdog)."""
    with WatchedPool(_task_results, jobs, task_timeout=task_timeout) as pool:
        yield from pool.run(tasks)


def _run_chunk(tasks: list[tuple[int, _Task]]) -> list[tuple[int, list[EpisodeResult]]]:
    return [(index, _task_results(task)) for index, task in tasks]


def _ray(tasks: list[_Task], jobs: int, chunk_size: int | None) -> Outcomes:
    try:
        import ray
    except ImportError:
        raise ValueError("backend 'ray' needs the ray extra: pip install 'dream-gym[ray]'") from None
    if not ray.is_initialized():
        ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False)
    per_chunk = chunk_size or max(1, math.ceil(len(tasks) / (4 * jobs)))  # a few chunks per process
    numbered = list(enumerate(tasks))
    remote = ray.remote(_run_chunk)
    pending = [remote.remote(numbered[i : i + per_chunk]) for i in range(0, len(numbered), per_chunk)]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        yield from ray.get(done[0])


def result_row(result: EpisodeResult, world: World | None = None, **extra: Any) -> dict[str, Any]:
    """The JSON line of one episode (the EpisodeResult fields, plus the world's folder)."""
    row: dict[str, Any] = {"format": RESULT_FORMAT, **result.to_dict()}
    if world is not None and world.path is not None:
        row["world_path"] = str(world.path)
    row.update(extra)
    return row


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _dumps(row: Mapping[str, Any]) -> str:
    return json.dumps(_finite(dict(row)), allow_nan=False)


def read_results(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a results file written by :func:`evaluate` (one dict per episode)."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}, line {number}: not JSON ({exc})") from None
    return rows


_RESULT_FIELDS = {f.name for f in fields(EpisodeResult)}


def result_from_row(row: Mapping[str, Any]) -> EpisodeResult:
    """An EpisodeResult from a results-file row (extra keys are ignored)."""
    return EpisodeResult(**{k: v for k, v in row.items() if k in _RESULT_FIELDS})


def load_results(path: str | os.PathLike[str]) -> list[EpisodeResult]:
    return [result_from_row(row) for row in read_results(path)]


def _parse_betas(betas: Sequence[float] | str | None) -> tuple[float, ...]:
    if betas is None:
        return DEFAULT_BETA_GRID
    if isinstance(betas, str):
        betas = [float(b) for b in betas.split(",") if b.strip()]
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
    policies: Sequence[str],
    worlds: Any,
    betas: Sequence[float] | str | None = None,
    *,
    jobs: int | None = None,
    workers: int | None = None,
    backend: str = "process",
    out: str | os.PathLike[str] | None = None,
    progress: bool = True,
    max_rounds: int | None = None,
    beta1: float = DEFAULT_BETA1,
    beta2: float = DEFAULT_BETA2,
    lam: float = DEFAULT_LAMBDA,
    seed: int = 0,
    task_timeout: float | None = DEFAULT_TASK_TIMEOUT_S,
    chunk_size: int | None = None,
    file_options: Mapping[str, Any] | None = None,
) -> list[EpisodeResult]:
    """Run every (policy, world, beta) episode and return the results in canonical order.

    Args:
        policies: policy specs (a built-in name, ``module:Class`` or a ``.py`` file run isolated;
            see ``dream_gym.policy_files.load_policy``). The spec labels the policy in the results.
        worlds: anything :func:`resolve_worlds` accepts, or a list of World objects.
        betas: the budget preferences (default: the v2 grid 0.0, 0.1, ..., 1.0), or "0.1,0.5".
        jobs: processes (default: the CPU count); 1 is the serial backend.
        workers: W, the attempts per round every world is replayed at (default: each world's
            recorded W).
        backend: "process" (worker processes of :mod:`dream_gym.workers`: started by a fork
            server, never forked from this process, and watched), "serial" (one task at a
            time: in one watched worker process, or in this process when ``task_timeout`` is
            None) or "ray".
        out: write one JSON line per episode there (in canonical order).
        progress: show a rich progress bar (on stderr).
        max_rounds, beta1, beta2: ReplaySession options (round limit and V's coefficients).
        lam: recorded with the results for the leaderboard (the v2 penalty weight).
        seed: the seed every policy gets in its RunContext.
        task_timeout: seconds a (policy, world) task may go without progress (a decision or
            a finished episode) before its worker is killed and replaced; the episodes it did
            not finish get a ``TaskTimeout`` error. None: no watchdog (the ray backend has none).
        chunk_size: (policy, world) tasks per Ray task (default: balanced for the jobs).
        file_options: IsolatedPolicy options for policy files (``decision_timeout_s``,
            ``episode_timeout_s``, ``memory_mb``, ``hash_seed``, ...).

    A policy that raises, returns an illegal batch, cannot be loaded, hangs (``task_timeout``)
    or kills its worker gets its error in ``EpisodeResult.error``; every other episode still
    runs. An unknown policy name, module or file raises LookupError before anything runs.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    policies = list(policies)
    if not policies:
        raise ValueError("no policies to evaluate")
    if len(set(policies)) != len(policies):
        raise ValueError(f"policies repeat: {policies}")
    for spec in policies:  # fail fast on an unknown name, module or file; built only in workers
        check_policy_spec(spec)
    if task_timeout is not None and not task_timeout > 0:
        raise ValueError(f"task_timeout must be > 0 seconds or None, got {task_timeout}")
    world_list = resolve_worlds(worlds)
    if not world_list:
        raise LookupError("no worlds to evaluate")
    beta_grid = _parse_betas(betas)
    options = {"workers": workers, "beta1": beta1, "beta2": beta2, "max_rounds": max_rounds, "seed": seed}
    tasks = [
        _Task(p, w, spec, str(world.path) if world.path is not None else world, beta_grid, options,
              file_options)
        for p, spec in enumerate(policies)
        for w, world in enumerate(world_list)
    ]
    jobs = max(1, int(jobs if jobs is not None else (os.cpu_count() or 1)))
    if backend == "process" and jobs == 1:
        backend = "serial"
    if backend == "ray":
        runner = _ray(tasks, jobs, chunk_size)
    elif backend == "serial" and task_timeout is None:
        runner = _in_process(tasks)
    else:
        runner = _watched(tasks, jobs if backend == "process" else 1, task_timeout)
    total = len(tasks) * len(beta_grid)
    by_task: dict[int, list[EpisodeResult]] = {}
    label = f"{len(policies)}x{len(world_list)}x{len(beta_grid)} episodes ({backend})"
    with _progress_bar(progress, total, label) as advance:
        for index, outcome in runner:
            task = tasks[index]
            if isinstance(outcome, TaskFailure):
                outcome = _failed_task(task, world_list[task.world_index], outcome)
            by_task[index] = outcome
            advance(len(outcome))
    by_key = {(tasks[i].policy_index, tasks[i].world_index): results for i, results in by_task.items()}
    _record_limits(by_key, world_list, options)
    ordered = [r for key in sorted(by_key) for r in by_key[key]]
    if out is not None:
        world_of = {i: world for i, world in enumerate(world_list)}
        extra = {"workers": workers, "beta1": beta1, "beta2": beta2, "max_rounds": max_rounds, "lam": lam,
                 "seed": seed}
        out_path = Path(out)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = out_path.with_name(out_path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            for key in sorted(by_key):
                for result in by_key[key]:
                    handle.write(_dumps(result_row(result, world_of[key[1]], **extra)) + "\n")
        os.replace(tmp, out_path)
    return ordered


def _record_limits(
    by_key: Mapping[tuple[int, int], list[EpisodeResult]], world_list: Sequence[World], options: Mapping[str, Any]
) -> None:
    """Set each episode's ``limit``: its world's oracle limit at the replayed W, beta1, beta2,
    frontier and round limit (computed once per world, here, outside every policy's reach)."""
    limits: dict[int, float] = {}
    for (_, w), results in by_key.items():
        if w not in limits:
            world = world_list[w]
            limits[w] = oracle_limit(
                world, options.get("workers") or world.workers, options["beta1"], options["beta2"],
                options.get("frontier"), options.get("max_rounds"),
            ).value
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


# --------------------------------------------------------------------------- leaderboard

TIE_TOLERANCE = 1e-9
AGGREGATE = "(mean over worlds)"


@dataclass(frozen=True)
class LeaderboardRow:
    """One policy on one world (or the mean over worlds)."""

    rank: int
    policy: str
    world: str
    worlds: int  # worlds averaged (1 for a per-world row)
    episodes: int
    mean_v: float  # mean replay score V over the betas
    v2: float  # auc - lam * penalty
    auc: float
    penalty: float
    attainment: float  # mean over the betas of clip(best q, 0, 1)
    attempts: float  # mean attempts per episode
    rounds: float  # mean rounds per episode
    errors: int  # episodes that ended with an error
    limit: float = math.nan  # the world's oracle limit (overall: mean over worlds); NaN: unknown
    limit_share: float = math.nan  # mean_v / limit (overall: mean of the per-world shares)
    regret: float = math.nan  # limit - mean_v (overall: mean over worlds)


@dataclass
class Leaderboard:
    """Rows ranked by the v2 objective (then mean V); equal values share a rank."""

    overall: list[LeaderboardRow]
    per_world: dict[str, list[LeaderboardRow]]
    lam: float
    betas: tuple[float, ...]
    rank_by: str = "v2"
    errors: list[tuple[str, str, float, str]] = field(default_factory=list)  # policy, world, beta, message

    COLUMNS = ("rank", "policy", "v2", "auc", "penalty", "mean V", "% of limit", "regret", "quality", "attempts",
               "rounds", "errors")
    # terminal tables: short labels, and no regret column (it is V* - V; the titles give V*)
    SHORT_COLUMNS = ("#", "policy", "v2", "auc", "pen", "V", "%lim", None, "q", "N", "k", "err")

    def _cells(self, row: LeaderboardRow, ties: set[int]) -> list[str]:
        rank = f"{row.rank}=" if row.rank in ties else str(row.rank)
        return [
            rank, row.policy, f"{row.v2:.4f}", f"{row.auc:.4f}", f"{row.penalty:.3f}", f"{row.mean_v:.4f}",
            "n/a" if math.isnan(row.limit_share) else f"{100 * row.limit_share:.1f}%",
            "n/a" if math.isnan(row.regret) else f"{row.regret:.4f}",
            f"{row.attainment:.3f}", f"{row.attempts:.1f}", f"{row.rounds:.1f}",
            f"{row.errors}/{row.episodes}" if row.errors else "0",
        ]

    @staticmethod
    def _ties(rows: Sequence[LeaderboardRow]) -> set[int]:
        ranks = [r.rank for r in rows]
        return {r for r in ranks if ranks.count(r) > 1}

    def tables(self, per_world: bool = True) -> list[tuple[str, list[LeaderboardRow]]]:
        n = len(self.per_world)
        out = [(f"Leaderboard: mean over {n} world{'s' if n != 1 else ''}", self.overall)]
        if per_world and n > 1:
            for name, rows in self.per_world.items():
                limit = rows[0].limit if rows else math.nan
                out.append((f"World {name}" + ("" if math.isnan(limit) else f" (limit V* {limit:.4f})"), rows))
        return out

    def legend(self) -> str:
        """What the short column names mean (printed under the terminal tables)."""
        return (
            f"ranked by {self.rank_by}; v2 = auc - {self.lam:g}*penalty over betas "
            f"{', '.join(f'{b:g}' for b in self.betas)}; pen = mean rounds/attempts, V = mean replay score, "
            "%lim = V as a share of the world's oracle limit V* (overall: mean over worlds), "
            "q = mean attainment, N/k = mean attempts/rounds, err = episodes with an error; "
            "'=' after a rank marks a tie"
        )

    def to_rich(self, per_world: bool = True) -> list[Any]:
        """rich Tables: overall first, then one per world when there are several."""
        from rich import box
        from rich.table import Table

        tables = []
        parts = self.tables(per_world)
        for title, rows in parts:
            table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
            shown = [(j, column) for j, column in enumerate(self.SHORT_COLUMNS) if column is not None]
            for _, column in shown:
                if column == "policy":
                    width = min(40, max([len(r.policy) for r in rows] + [6]))
                    table.add_column(column, justify="left", min_width=width, overflow="fold")
                else:
                    table.add_column(column, justify="right", no_wrap=True)
            ties = self._ties(rows)
            for row in rows:
                cells = self._cells(row, ties)
                table.add_row(*(cells[j] for j, _ in shown), style="red" if row.errors else None)
            tables.append(table)
        return tables

    def print(self, console: Any = None, per_world: bool = True) -> None:
        from rich.console import Console

        console = console or Console()
        for table in self.to_rich(per_world):
            console.print(table)
        # Not a table caption: rich crops a caption wider than its table; plain text wraps.
        console.print(self.legend(), style="dim", highlight=False)
        for policy, world, beta, message in self.errors[:20]:
            console.print(f"[red]error[/red] {policy} on {world} (beta {beta:g}): {message}")
        if len(self.errors) > 20:
            console.print(f"... and {len(self.errors) - 20} more errors")

    def to_markdown(self, per_world: bool = True) -> str:
        """GitHub-flavoured markdown tables (for files and READMEs)."""
        lines: list[str] = []
        for title, rows in self.tables(per_world):
            lines += [f"### {title}", "", "| " + " | ".join(self.COLUMNS) + " |",
                      "|" + "|".join("---" if c == "policy" else "---:" for c in self.COLUMNS) + "|"]
            ties = self._ties(rows)
            lines += ["| " + " | ".join(self._cells(row, ties)) + " |" for row in rows]
            lines.append("")
        lines.append(
            f"Ranked by {self.rank_by}; v2 = auc - {self.lam:g} x penalty over betas "
            f"{', '.join(f'{b:g}' for b in self.betas)}; % of limit = mean V over the betas / the world's "
            "oracle limit V* (the best V any policy can reach; overall: mean over worlds); regret = V* - mean V; "
            "`=` after a rank marks a tie."
        )
        return "\n".join(lines) + "\n"

    def to_text(self, per_world: bool = True) -> str:
        """Plain aligned text (no markup)."""
        chunks = []
        for title, rows in self.tables(per_world):
            ties = self._ties(rows)
            cells = [list(self.COLUMNS)] + [self._cells(r, ties) for r in rows]
            widths = [max(len(row[i]) for row in cells) for i in range(len(self.COLUMNS))]
            body = [
                "  ".join(c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
                for row in cells
            ]
            chunks.append("\n".join([title, *body]))
        return "\n\n".join(chunks) + "\n"


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _mean_known(values: Sequence[float]) -> float:
    """The mean of the values that are not NaN (NaN when none is known)."""
    return _mean([v for v in values if not math.isnan(v)])


def _limit_fields(episodes: Sequence[EpisodeResult], mean_v: float) -> dict[str, float]:
    limits = {r.limit for r in episodes if r.limit is not None}
    if len(limits) != 1:  # unknown (older results files), or episodes of different settings
        return {}
    limit = float(limits.pop())
    return {"limit": limit, "limit_share": mean_v / limit if limit > 0 else math.nan, "regret": limit - mean_v}


def _rank(rows: list[LeaderboardRow], key: Callable[[LeaderboardRow], tuple[float, ...]]) -> list[LeaderboardRow]:
    """Sort best first; rows whose keys are equal (within TIE_TOLERANCE) share a rank (1, 1, 3)."""
    ordered = sorted(rows, key=lambda r: (tuple(-k for k in key(r)), r.policy))
    ranked: list[LeaderboardRow] = []
    for i, row in enumerate(ordered):
        if ranked and all(
            abs(a - b) <= TIE_TOLERANCE for a, b in zip(key(row), key(ordered[i - 1]), strict=True)
        ):
            rank = ranked[-1].rank
        else:
            rank = i + 1
        ranked.append(_replace(row, rank=rank))
    return ranked


def _replace(row: LeaderboardRow, **changes: Any) -> LeaderboardRow:
    from dataclasses import replace

    return replace(row, **changes)


def _as_result(item: EpisodeResult | Mapping[str, Any]) -> EpisodeResult:
    return item if isinstance(item, EpisodeResult) else result_from_row(item)


def leaderboard(
    results: Iterable[EpisodeResult | Mapping[str, Any]], lam: float = DEFAULT_LAMBDA, rank_by: str = "v2"
) -> Leaderboard:
    """Aggregate episodes per (policy, world) and per policy (mean over its worlds).

    Per (policy, world), over its betas: mean V, the v2 objective (score.v2_objective on the
    (work, attainment, rounds, attempts) points), mean attainment ("quality reached"), mean
    attempts and rounds, and the number of episodes that ended with an error. The overall row
    of a policy is the mean of its per-world rows (errors and episodes are summed).
    Ranked by ``rank_by`` ("v2" or "V"), the other as tie-break; equal values share a rank.

    With the oracle limit recorded on the episodes (:func:`evaluate` does it), rows also give V
    as a share of the world's limit (``limit_share``; overall: the mean of the per-world shares,
    over the worlds whose limit is positive) and the regret ``limit - mean V``.
    """
    if rank_by not in ("v2", "V"):
        raise ValueError(f"rank_by must be 'v2' or 'V', got {rank_by!r}")
    items = [_as_result(r) for r in results]
    if not items:
        raise ValueError("no results to rank")
    groups: dict[tuple[str, str], list[EpisodeResult]] = {}
    for result in items:
        groups.setdefault((result.policy, result.world), []).append(result)
    betas = tuple(sorted({r.beta for r in items}))

    def key(row: LeaderboardRow) -> tuple[float, float]:
        return (row.v2, row.mean_v) if rank_by == "v2" else (row.mean_v, row.v2)

    per_world: dict[str, list[LeaderboardRow]] = {}
    by_policy: dict[str, list[LeaderboardRow]] = {}
    for (policy, world), episodes in groups.items():
        episodes.sort(key=lambda r: r.beta)
        v2 = v2_objective([(r.work, r.attainment, r.rounds, r.attempts) for r in episodes], lam=lam)
        mean_v = _mean([r.replay_score for r in episodes])
        row = LeaderboardRow(
            rank=0, policy=policy, world=world, worlds=1, episodes=len(episodes),
            mean_v=mean_v, v2=v2.value, auc=v2.auc, penalty=v2.penalty,
            attainment=_mean([r.attainment for r in episodes]),
            attempts=_mean([float(r.attempts) for r in episodes]),
            rounds=_mean([float(r.rounds) for r in episodes]),
            errors=sum(1 for r in episodes if r.error),
            **_limit_fields(episodes, mean_v),
        )
        per_world.setdefault(world, []).append(row)
        by_policy.setdefault(policy, []).append(row)
    overall = []
    for policy, rows in by_policy.items():
        overall.append(
            LeaderboardRow(
                rank=0, policy=policy, world=AGGREGATE, worlds=len(rows), episodes=sum(r.episodes for r in rows),
                mean_v=_mean([r.mean_v for r in rows]), v2=_mean([r.v2 for r in rows]),
                auc=_mean([r.auc for r in rows]), penalty=_mean([r.penalty for r in rows]),
                attainment=_mean([r.attainment for r in rows]), attempts=_mean([r.attempts for r in rows]),
                rounds=_mean([r.rounds for r in rows]), errors=sum(r.errors for r in rows),
                limit=_mean_known([r.limit for r in rows]), limit_share=_mean_known([r.limit_share for r in rows]),
                regret=_mean_known([r.regret for r in rows]),
            )
        )
    errors = [(r.policy, r.world, r.beta, str(r.error)) for r in items if r.error]
    return Leaderboard(
        overall=_rank(overall, key),
        per_world={world: _rank(rows, key) for world, rows in sorted(per_world.items())},
        lam=lam,
        betas=betas,
        rank_by=rank_by,
        errors=errors,
    )


__all__ = [
    "AGGREGATE",
    "BACKENDS",
    "DEFAULT_TASK_TIMEOUT_S",
    "Leaderboard",
    "LeaderboardRow",
    "evaluate",
    "leaderboard",
    "load_policy_spec",
    "load_results",
    "read_results",
    "resolve_worlds",
    "result_from_row",
    "result_row",
]
