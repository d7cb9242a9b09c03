"""A fidelity study: how well does replay rank policies against the runs it stands for?

``dream-gym fidelity`` (:func:`run_study`) runs every policy online on every seed (``dream-gym
grow``, or OpenEvolve through the bridge), each run recorded as a world; takes the worlds of
each *recorder* (a policy whose runs are replayed on: any policy spec, or ``native``, the
system's own selection; a recorder among the policies reuses their runs); replays every policy
on every recorder's world of the same seed (at the study's W and beta, with the seed of that
world's run; coverage beside V); and compares, per recorder, the policies' ranking by mean replay
V with their ranking online:

* by the **final best score** of their runs (mean over seeds), and
* by the runs' own **V** (q from 0 at the run's baseline to 1 at the best score any run of the
  study reached on that seed: a run's V against its own best would be 1 minus costs for every
  run), mean over seeds;

with Spearman's rho and Kendall's tau-b, each with a 95 % bootstrap interval over seeds (the
seeds resampled with replacement, the same resample on both sides). The **online ceiling** says
how far the online runs agree with themselves: the split-half reliability of either online
ranking over seeds, corrected by Spearman-Brown, averaged over splits. A replay rho near the
ceiling is as good as another set of online runs; far below, replay ranks worse than the
online noise explains.

A recorder may also be a **pool**: ``pool:A+B`` (or ``pool:all``, every policy's run) is, per
seed, the runs of ``A`` and ``B`` on that seed merged into one world
(:func:`dream_gym.datasets.pool.pool_worlds`, in the order given, copies whose scores differ
kept as first recorded), written to ``pools/<name>/s<seed>/``. Replay on a pool is held to the
online runs' budget (``ceil(iterations / W)`` rounds): a pool records several runs' attempts,
and a policy that never stops would otherwise spend them all. Each recorder's cost is reported
as the attempts spent recording its worlds (a pool: its runs' attempts summed).

Every run also checks that replay gives it back: its own policy, replayed on its world with its
seed (:func:`dream_gym.fidelity.reproduce.reproduce`), must reveal the recorded tree exactly.

The study folder ``out`` holds ``study.json`` (the settings every run shares: the same command
must give the same ones), ``runs/<policy>/s<seed>/`` (one world each), ``logs/``,
``runs.jsonl`` (the journal of finished runs), and once analysed ``fidelity.json`` and
``fidelity.txt`` (the table). The study holds the folder's lock; killed, the same command
continues (finished runs kept, a cut run resumed).
"""

from __future__ import annotations

import hashlib
import math
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dream_gym.fidelity.reproduce import recorded_setting, reproduce
from dream_gym.fidelity.runs import (
    BACKENDS,
    NATIVE,
    SYSTEMS,
    RunSpec,
    execute,
    journal_run,
    read_journal,
    run_folder,
    run_specs,
)
from dream_gym.fidelity.stats import Interval, bootstrap_interval, kendall, spearman, split_half
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2, replay_score
from dream_gym.replay.settings import DEFAULT_BETA, ReplaySettings
from dream_gym.world.tree import World, load_world

STUDY_FORMAT = "dream-gym-fidelity/1"
STUDY_FILE = "study.json"
REPORT_FILE = "fidelity.json"
TABLE_FILE = "fidelity.txt"
BOOTSTRAP_SEED = 20261206  # the bootstrap's own generator: the same study gives the same intervals
OUTCOMES = ("final_best", "online_V")
POOLED = "all recorders"  # the mean of the single-run recorders' replay V (not a pooled world)
POOL_PREFIX = "pool:"  # a recorder pooling runs: pool:A+B, or pool:all (every policy's run)
POOL_ALL = "all"
DEFAULT_FRONTIER = {"grow": "leaves", "openevolve": "any"}  # the bridge's rule is OpenEvolve's: any program


@dataclass
class FidelityConfig:
    """One study (see the module docstring). ``task``: a built-in task, or for OpenEvolve
    ``initial_program.py,evaluator.py``; ``recorders`` default to the policies themselves."""

    task: str
    policies: Sequence[str]
    seeds: Sequence[int]
    iterations: int
    workers: int
    out: Path
    recorders: Sequence[str] = ()
    system: str = "grow"
    beta: float = DEFAULT_BETA
    frontier: str | None = None  # grow's rule ("leaves" by default); OpenEvolve's is "any"
    backend: str = "process"
    jobs: int | None = None  # online runs at a time (default: the CPUs over W)
    requests: bool = False  # replay in request mode (docs/concepts/coverage.md)
    bootstrap: int = 2000

    @property
    def recorder_list(self) -> list[str]:
        return list(dict.fromkeys(self.recorders or self.policies))

    @property
    def run_recorders(self) -> list[str]:
        """The recorders that are runs of their own (not pools of runs)."""
        return [r for r in self.recorder_list if not is_pool(r)]

    def pool_members(self, recorder: str) -> list[str]:
        """The runs a pool recorder merges, in order (``pool:all``: every policy's, as given)."""
        named = recorder[len(POOL_PREFIX):]
        return list(self.policies) if named == POOL_ALL else [m.strip() for m in named.split("+")]

    @property
    def rule(self) -> str:
        return self.frontier or DEFAULT_FRONTIER[self.system]

    def runs(self) -> list[tuple[str, int]]:
        """Every (policy spec, seed) run the study needs: the policies', then the other recorders'."""
        specs = list(dict.fromkeys([*self.policies, *self.run_recorders]))
        return [(spec, seed) for spec in specs for seed in self.seeds]


def is_pool(recorder: str) -> bool:
    """Whether a recorder spec names a pool of runs (``pool:A+B``, ``pool:all``)."""
    return recorder.startswith(POOL_PREFIX)


@dataclass
class Progress:
    """What :func:`run_study` reports as it goes (for a command's log lines)."""

    on_run: Callable[[RunSpec, dict[str, Any] | str, int, int], None] | None = None
    on_phase: Callable[[str], None] | None = None

    def phase(self, text: str) -> None:
        if self.on_phase is not None:
            self.on_phase(text)


def check_config(config: FidelityConfig) -> None:
    """Every setting checked before anything runs; ValueError (or LookupError) naming the problem."""
    if config.system not in SYSTEMS:
        raise ValueError(f"--system must be one of {', '.join(SYSTEMS)}, got {config.system!r}")
    if config.backend not in BACKENDS:
        raise ValueError(f"--backend must be one of {', '.join(BACKENDS)}, got {config.backend!r}")
    if not config.policies:
        raise ValueError("give at least one --policy to compare")
    if len(set(config.policies)) != len(config.policies):
        raise ValueError(f"a --policy repeats: {list(config.policies)}")
    if not config.seeds or len(set(config.seeds)) != len(config.seeds):
        raise ValueError(f"--seeds must name distinct seeds, got {list(config.seeds)}")
    if config.iterations < 1 or config.workers < 1:
        raise ValueError("--iterations and -W must be at least 1")
    if not 0.0 <= config.beta <= 1.0:
        raise ValueError(f"--beta must be in [0, 1], got {config.beta}")
    if config.jobs is not None and config.jobs < 1:
        raise ValueError(f"-j must be at least 1, got {config.jobs}")
    if config.bootstrap < 1:
        raise ValueError(f"--bootstrap must be at least 1, got {config.bootstrap}")
    if config.frontier not in (None, "leaves", "any"):
        raise ValueError(f"--frontier must be 'leaves' or 'any', got {config.frontier!r}")
    if config.system == "openevolve" and config.rule != "any":
        raise ValueError("OpenEvolve may continue any program it holds: its runs are recorded under the "
                         "frontier rule 'any' (leave --frontier out)")
    if NATIVE in config.policies:
        raise ValueError(f"'{NATIVE}' is the system's own parent selection: it has no policy to replay; give it "
                         "as --recorder to replay the policies on its runs")
    if config.system == "grow" and NATIVE in config.recorder_list:
        raise ValueError(f"dream-gym grow has no selection of its own: '{NATIVE}' is a recorder of --system "
                         "openevolve")
    _check_pools(config)
    _check_task(config)
    from dream_gym.policy_files import check_policy_spec

    for spec in config.runs():
        if spec[0] != NATIVE:
            check_policy_spec(spec[0])


def _check_pools(config: FidelityConfig) -> None:
    """A pool merges two or more distinct runs the study makes (its policies' or its recorders')."""
    runs = [*config.policies, *config.run_recorders]
    for recorder in config.recorder_list:
        if not is_pool(recorder):
            continue
        members = config.pool_members(recorder)
        unknown = [m for m in members if m not in runs]
        if unknown:
            raise ValueError(f"--recorder {recorder}: {', '.join(unknown)} is not a --policy or --recorder of the "
                             f"study (a pool merges the study's own runs: pool:A+B, or pool:{POOL_ALL})")
        if len(members) < 2 or len(set(members)) != len(members):
            raise ValueError(f"--recorder {recorder}: a pool merges two or more distinct runs")


def _check_task(config: FidelityConfig) -> None:
    if "," in config.task:
        if config.system == "grow":
            raise ValueError("dream-gym grow runs built-in tasks only; a task given as initial_program.py,"
                             "evaluator.py runs with --system openevolve")
        for path in (p.strip() for p in config.task.split(",", 1)):
            if not Path(path).is_file():
                raise FileNotFoundError(f"--task {config.task}: {path} does not exist")
        return
    from dream_gym.online.tasks import get_task

    get_task(config.task)  # KeyError listing the tasks
    if config.system == "openevolve":
        from dream_gym.integrations.openevolve.run import check_openevolve

        check_openevolve()


def _task_identity(task: str) -> dict[str, Any]:
    """The task as the runs depend on it: a built-in's name, or each file's sha256."""
    if "," not in task:
        return {"name": task}
    paths = [Path(p.strip()).resolve() for p in task.split(",", 1)]
    return {"files": {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}}


def study_identity(config: FidelityConfig) -> dict[str, Any]:
    """What every run of a study shares; a study folder holds runs of one identity only."""
    return {"format": STUDY_FORMAT, "task": _task_identity(config.task), "system": config.system,
            "iterations": config.iterations, "workers": config.workers, "beta": config.beta,
            "frontier": config.rule}


def _claim_folder(config: FidelityConfig) -> None:
    """Write study.json, or check that the folder's is this study's (the same command continues)."""
    import json

    from dream_gym.infrastructure.durable import write_json_atomic

    out = Path(config.out)
    mine = study_identity(config)
    path = out / STUDY_FILE
    if path.is_file():
        theirs = json.loads(path.read_text(encoding="utf-8"))
        different = [f"{key} {theirs.get(key)!r} there, {mine[key]!r} here" for key in mine if theirs.get(key) != mine[key]]
        if different:
            raise ValueError(f"{out} holds a study of other settings ({'; '.join(different)}): give another --out, "
                             "or the settings it was started with")
        return
    others = [p.name for p in out.iterdir() if p.name not in (".lock",)] if out.is_dir() else []
    if others:
        raise FileExistsError(f"{out} is not empty and holds no {STUDY_FILE}: not a fidelity study's folder; "
                              "give a new or empty --out")
    write_json_atomic(path, mine)


def run_study(config: FidelityConfig, progress: Progress | None = None) -> dict[str, Any]:
    """Run what the study still lacks, analyse it, write ``fidelity.json`` and ``fidelity.txt``;
    the report. RuntimeError naming every run that failed (the others are kept)."""
    from dream_gym.fidelity.table import render
    from dream_gym.infrastructure.durable import write_atomic, write_json_atomic
    from dream_gym.infrastructure.locks import folder_lock

    check_config(config)
    progress = progress or Progress()
    out = Path(config.out)
    with folder_lock(out):  # a second study of the same folder is refused naming this one
        _claim_folder(config)
        _online(config, progress)
        progress.phase("replaying every policy on every recorded world")
        report = analyse(config)
        write_json_atomic(out / REPORT_FILE, report)
        write_atomic(out / TABLE_FILE, render(report, width=80) + "\n")
    return report


def _online(config: FidelityConfig, progress: Progress) -> None:
    out = Path(config.out)
    specs = run_specs(config.task, config.system, config.runs(), out=out, iterations=config.iterations,
                      workers=config.workers, beta=config.beta, frontier=config.rule)
    finished = read_journal(out)
    pending = [spec for spec in specs if (spec.policy, spec.seed) not in finished]
    jobs = config.jobs or max(1, (os.cpu_count() or 1) // config.workers)
    progress.phase(f"{len(specs) - len(pending)} of {len(specs)} online runs done; running {len(pending)} "
                   f"({config.backend}, {min(jobs, max(1, len(pending)))} at a time)")
    failures: list[str] = []
    done = len(specs) - len(pending)
    for spec, outcome in execute(pending, backend=config.backend, jobs=jobs, workers=config.workers):
        if isinstance(outcome, dict):
            journal_run(out, outcome)
            done += 1
        else:
            failures.append(outcome)
        if progress.on_run is not None:
            progress.on_run(spec, outcome, done, len(specs))
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(pending)} online runs failed; the finished ones are kept, so "
                           f"the same command continues once the cause is fixed. First: {failures[0]}")


# -- the analysis --------------------------------------------------------------------------------
@dataclass
class _Run:
    policy: str
    seed: int
    world: World
    resumed: bool
    final_best: float = math.nan
    online_V: float = math.nan  # noqa: N815 - the score's name
    reproduced: bool | None = None
    reproduction: str | None = None


@dataclass
class _Replay:
    recorder: str
    seed: int
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # policy -> episode figures


def analyse(config: FidelityConfig) -> dict[str, Any]:
    """The report of a study whose runs are all in its journal (see the module docstring)."""
    out = Path(config.out)
    journal = read_journal(out)
    runs = {}
    for spec, seed in config.runs():
        row = journal.get((spec, seed))
        if row is None:
            raise RuntimeError(f"the run of {spec} on seed {seed} is not finished; run the study to finish it")
        runs[(spec, seed)] = _Run(spec, seed, load_world(run_folder(out, spec, seed)), bool(row.get("resumed")))
    _online_outcomes(config, runs)
    _reproductions(config, runs)
    replays = _replays(config, runs)
    return _report(config, runs, replays)


def _online_outcomes(config: FidelityConfig, runs: dict[tuple[str, int], _Run]) -> None:
    """Each run's final best (oriented) and its V with q against the best of its seed's runs."""
    for seed in config.seeds:
        mine = [run for run in runs.values() if run.seed == seed]
        reference = max(run.world.best_score for run in mine)
        for run in mine:
            world = run.world
            span = reference - world.baseline_score
            q = (world.best_score - world.baseline_score) / span if span > 0 else 0.0
            attempts = world.size - 1
            rounds = max((int(r.get("round") or 0) for r in world.records), default=0)
            run.final_best = world.best_score
            run.online_V = replay_score(min(1.0, max(0.0, q)), attempts, rounds, DEFAULT_BETA1, DEFAULT_BETA2)


def _reproductions(config: FidelityConfig, runs: dict[tuple[str, int], _Run]) -> None:
    """Replay each run's own policy on its world: does it give the run back?"""
    from dream_gym.policy_files.specs import PolicySource

    for (spec, _seed), run in runs.items():
        if spec == NATIVE:
            continue
        setting = recorded_setting(run.world)
        source = PolicySource(spec)
        try:
            result = reproduce(run.world, source.new(), seed=run.seed, settings=setting.settings)
        finally:
            source.close()
        run.reproduced, run.reproduction = result.exact, result.reason


def _replays(config: FidelityConfig, runs: dict[tuple[str, int], _Run]) -> list[_Replay]:
    """Every policy on every recorder's world, at the study's beta, with the seed of that run."""
    from dream_gym.evaluation.evaluate import evaluate

    shown = config.iterations if config.system == "grow" else None  # what the policies were shown online
    budget = math.ceil(config.iterations / config.workers)  # the online runs' rounds, for pools
    replays = []
    for recorder in config.recorder_list:
        for seed in config.seeds:
            pool = is_pool(recorder)
            world = pool_world(config, runs, recorder, seed) if pool else runs[(recorder, seed)].world
            settings = ReplaySettings(config.workers, max_rounds=budget if pool else shown, requests=config.requests)
            results = evaluate(list(config.policies), [world], [config.beta], settings=settings, seed=seed,
                               progress=False)
            replay = _Replay(recorder, seed)
            for result in results:
                replay.rows[result.policy] = {
                    "V": result.replay_score, "best_q": result.best_q, "attempts": result.attempts,
                    "rounds": result.rounds, "coverage": result.coverage, "on_record": result.on_record,
                    "cut_short": result.cut_short, "held": result.answerable, "error": result.error,
                }
            replays.append(replay)
    return replays


def pool_folder(out: Path, recorder: str, seed: int) -> Path:
    """Where a pool recorder's world of ``seed`` is written in the study folder ``out``."""
    from dream_gym.fidelity.runs import slug

    return Path(out) / "pools" / slug(recorder) / f"s{seed}"


def pool_world(config: FidelityConfig, runs: dict[tuple[str, int], _Run], recorder: str, seed: int) -> World:
    """The pool recorder's world of ``seed``: its runs on that seed merged, written afresh."""
    import shutil

    from dream_gym.datasets.pool import POOL_SCORES, pool_worlds

    folder = pool_folder(config.out, recorder, seed)
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    worlds = [runs[(member, seed)].world for member in config.pool_members(recorder)]
    pool_worlds(worlds, folder, world_id=f"{folder.parent.name}-s{seed}", scores=POOL_SCORES)
    return load_world(folder)


def _recorder_costs(config: FidelityConfig, runs: dict[tuple[str, int], _Run]) -> dict[str, dict[str, Any]]:
    """Per recorder, the attempts spent recording its worlds (a pool: its runs' summed), mean over seeds."""
    costs = {}
    for recorder in config.recorder_list:
        members = config.pool_members(recorder) if is_pool(recorder) else [recorder]
        spent = [sum(runs[(m, s)].world.size - 1 for m in members) for s in config.seeds]
        costs[recorder] = {"runs": members, "attempts": statistics.mean(spent)}
    return costs


def _report(config: FidelityConfig, runs: dict[tuple[str, int], _Run], replays: list[_Replay]) -> dict[str, Any]:
    policies, seeds = list(config.policies), list(config.seeds)
    online = {name: [[getattr(runs[(p, s)], name) for s in seeds] for p in policies] for name in OUTCOMES}
    by_recorder: dict[str, list[list[float]]] = {}
    for recorder in config.recorder_list:
        mine = {r.seed: r for r in replays if r.recorder == recorder}
        by_recorder[recorder] = [[mine[s].rows[p]["V"] for s in seeds] for p in policies]
    singles = [by_recorder[r] for r in config.run_recorders]
    if len(singles) > 1:
        by_recorder[POOLED] = np.mean(np.array(singles), axis=0).tolist()
    agreement = {recorder: {name: _agreement(v, online[name], config.bootstrap) for name in OUTCOMES}
                 for recorder, v in by_recorder.items()}
    ceiling = {name: split_half(online[name]).to_dict() for name in OUTCOMES}
    return {
        "format": STUDY_FORMAT,
        "study": {**study_identity(config), "task_spec": config.task, "policies": policies,
                  "recorders": config.recorder_list, "seeds": seeds, "requests": config.requests,
                  "bootstrap": config.bootstrap},
        "runs": [_run_row(run) for run in runs.values()],
        "replays": [{"recorder": r.recorder, "seed": r.seed, "policy": p, **row}
                    for r in replays for p, row in r.rows.items()],
        "policies": {p: _policy_row(p, i, runs, replays, seeds, by_recorder) for i, p in enumerate(policies)},
        "agreement": agreement,
        "recorders": _recorder_costs(config, runs),
        "ceiling": ceiling,
    }


def _run_row(run: _Run) -> dict[str, Any]:
    return {"policy": run.policy, "seed": run.seed, "world": run.world.id, "nodes": run.world.size,
            "rounds": max((int(r.get("round") or 0) for r in run.world.records), default=0),
            "final_best": _json_float(run.final_best), "online_V": _json_float(run.online_V),
            "resumed": run.resumed, "reproduced": run.reproduced, "reproduction": run.reproduction}


def _policy_row(policy: str, index: int, runs: dict[tuple[str, int], _Run], replays: list[_Replay],
                seeds: list[int], by_recorder: dict[str, list[list[float]]]) -> dict[str, Any]:
    mine = [runs[(policy, s)] for s in seeds]
    checked = [r.reproduced for r in mine if r.reproduced is not None]
    replay = {}
    for recorder, values in by_recorder.items():
        episodes = [r.rows[policy] for r in replays
                    if r.recorder == recorder or (recorder == POOLED and not is_pool(r.recorder))]
        replay[recorder] = {
            "V": _json_float(float(np.mean(values[index]))),
            "coverage": _mean(e["coverage"] for e in episodes),
            "on_record": _mean(float(e["on_record"]) for e in episodes if e["on_record"] is not None),
            "cut_short": _mean(float(e["cut_short"]) for e in episodes if e["cut_short"] is not None),
            "held": _mean(e["held"] for e in episodes),
            "errors": sum(1 for e in episodes if e["error"]),
        }
    return {"final_best": _json_float(statistics.mean(r.final_best for r in mine)),
            "online_V": _json_float(statistics.mean(r.online_V for r in mine)),
            "reproduced": sum(checked), "checked": len(checked), "replay": replay}


def _agreement(replay: list[list[float]], online: list[list[float]], resamples: int) -> dict[str, Any]:
    """Spearman and Kendall between the policies' mean replay V and mean online outcome, with
    bootstrap intervals over seeds (the same resample of seeds on both sides)."""
    x, y = np.asarray(replay, dtype=float), np.asarray(online, dtype=float)
    seeds = x.shape[1]
    found: dict[str, Any] = {}
    for name, statistic in (("spearman", spearman), ("kendall", kendall)):
        def over(sample: np.ndarray, statistic: Callable[..., float] = statistic) -> float:
            return statistic(x[:, sample].mean(axis=1), y[:, sample].mean(axis=1))

        interval: Interval = bootstrap_interval(over, seeds, resamples=resamples,
                                                rng=np.random.default_rng(BOOTSTRAP_SEED))
        found[name] = {"rho": _json_float(over(np.arange(seeds))), "interval": interval.to_dict()}
    return found


def _mean(values: Any) -> float | None:
    kept = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return statistics.mean(kept) if kept else None


def _json_float(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def config_from_report(report: dict[str, Any], out: Path) -> FidelityConfig:
    """The configuration a report was made with (to analyse its folder again)."""
    study = report["study"]
    return FidelityConfig(task=study["task_spec"], policies=study["policies"], seeds=study["seeds"],
                          iterations=study["iterations"], workers=study["workers"], out=out,
                          recorders=study["recorders"], system=study["system"], beta=study["beta"],
                          frontier=study["frontier"], requests=study["requests"], bootstrap=study["bootstrap"])


__all__ = ["DEFAULT_FRONTIER", "OUTCOMES", "POOLED", "POOL_PREFIX", "REPORT_FILE", "STUDY_FILE", "TABLE_FILE", "FidelityConfig",
           "Progress", "analyse", "check_config", "config_from_report", "is_pool", "pool_folder", "pool_world", "run_study",
           "study_identity"]
