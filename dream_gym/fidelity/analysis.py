"""The analysis of a fidelity study: every policy replayed on every recorder's worlds, ranked against the runs.

:func:`analyse` takes a study whose online runs are all finished (:mod:`dream_gym.fidelity.study`
makes them), replays every policy on every recorder's world of the same seed (at the study's W
and beta, with the seed of that world's run; coverage beside V); and compares, per recorder, the
policies' ranking by mean replay V with their ranking online:

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

The report is what the study folder's ``fidelity.json`` holds; :func:`config_from_report` gives
back the settings it was made with.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dream_gym.fidelity.config import STUDY_FORMAT, FidelityConfig, is_pool, study_identity
from dream_gym.fidelity.reproduce import recorded_setting, reproduce
from dream_gym.fidelity.runs import NATIVE, read_journal, run_folder
from dream_gym.fidelity.stats import Interval, bootstrap_interval, kendall, spearman, split_half
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2, replay_score
from dream_gym.replay.settings import ReplaySettings
from dream_gym.world.tree import World, load_world

BOOTSTRAP_SEED = 20261206  # the bootstrap's own generator: the same study gives the same intervals
OUTCOMES = ("final_best", "online_V")
POOLED = "all recorders"  # the mean of the single-run recorders' replay V (not a pooled world)


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


__all__ = ["BOOTSTRAP_SEED", "OUTCOMES", "POOLED", "analyse", "config_from_report", "pool_folder", "pool_world"]
