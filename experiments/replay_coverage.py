"""Replay's coverage: how much of the built-ins' replay rests on what the record holds, and does
request mode (or coverage beside V) rank policies closer to their real OpenEvolve runs?

    nice -n 10 .venv/bin/python -m experiments.replay_coverage --out out/replay_coverage [--replicates 3]

1. **Coverage of the built-ins** (docs/concepts/coverage.md), over the default beta grid, under each
   world's own frontier rule and in request mode: mean V, the share of requests the record answered,
   the share of episodes it answered whole ("on record"), cut short, and the mean share of the online
   choices the record held per decision. On the shipped worlds (``dream-gym/recorded-v1``) and on the
   real OpenEvolve runs of ``--runs`` (each imported with ``dream-gym worlds import --from auto``;
   a run that does not import is listed with the importer's reason).
2. **Ranking against the online outcome.** experiments/openevolve_redeploy ran 10 policies (the
   nine built-ins and ppo-macro-v) online through the OpenEvolve bridge, 5 seeds x 2 tasks
   (``results.json``: each run's final best). Replay needs the arm-A worlds (OpenEvolve's own
   sampling, W = 2, 80 iterations) those were compared on; they are not kept, and OpenEvolve at
   W = 2 does not repeat a run exactly, so they are grown again here, ``--replicates`` times per
   (task, seed) (``dream-gym openevolve run --policy native`` then ``worlds import``; resumable).
   Each policy's replay score on a seed is its mean over that seed's replicate worlds, at
   beta 0.5 (the online runs' beta); its score on the task is the mean over seeds. Spearman's rho
   between each replay score and the online median final best over the 10 policies; a 95 %
   bootstrap interval over seeds (seeds resampled with replacement, the same resample for the
   replay and the online side; 2,000 resamples). Scores compared, fixed before looking:

   * ``V (rule)``: replay V under the world's rule, as today;
   * ``V (requests)``: replay V in request mode (refusals not charged);
   * ``V (requests, charged)``: the same episodes with every refused request counted as an
     attempt (``q - beta1 (N + R) + beta2 (N + R) / k``: the trajectory is the uncharged one);
   * ``asks beyond the record``: 1 - the share of requests answered in request mode (coverage
     alone: does going where the record stops predict running well online?);
   * ``V (rule) + coverage``: the mean of the policy's ranks by ``V (rule)`` and by ``asks
     beyond the record`` (V together with coverage, in the simplest form).

Writes ``OUT/coverage.md`` and ``OUT/coverage.json``; prints both tables.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from scipy.stats import rankdata, spearmanr

from dream_gym.evaluation.evaluate import evaluate
from dream_gym.evaluation.world_specs import resolve_worlds
from dream_gym.policy import EpisodeResult
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2
from dream_gym.world.tree import World, load_world

ROOT = Path(__file__).resolve().parents[1]
REDEPLOY = ROOT / "experiments" / "openevolve_redeploy" / "results.json"
DEFAULT_RUNS = ROOT.parent / "shared" / "external-runs" / "openevolve"
BUILTINS = ("greedy", "fixed", "ucb", "puct", "hyperband", "shinka", "stagnation", "openevolve", "random")
ARM_C = str(ROOT / "tests" / "data" / "models" / "ppo-macro-v.zip")  # the redeploy's arm C
TASKS = ("circle-packing-26", "sum-difference")
SEEDS = (0, 1, 2, 3, 4)
W, ITERATIONS, BETA = 2, 80, 0.5
BOOTSTRAP = 2000
DREAM_GYM = [sys.executable, "-m", "dream_gym"]


def run(command: list[str]) -> None:
    print("+ dream-gym " + " ".join(command[3:]), flush=True)
    done = subprocess.run(["nice", "-n", "10", *command], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


# -- 1. coverage of the built-ins ---------------------------------------------------------------------
def import_real_runs(runs: Path, into: Path) -> tuple[list[World], list[str]]:
    worlds, skipped = [], []
    for run_folder in sorted(p for p in runs.glob("*") if p.is_dir()):
        out = into / run_folder.name
        if not (out / "world.json").is_file():
            # -W 1, as the recorded figures were measured (without it an import reads W from the run's
            # configuration file where it has one)
            command = [*DREAM_GYM, "worlds", "import", "--from", "auto", str(run_folder), "--out", str(out), "-W", "1"]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                skipped.append(f"{run_folder.name}: {done.stderr.strip().splitlines()[-1]}")
                continue
        worlds.append(load_world(out))
    return worlds, skipped


def coverage_rows(worlds: Sequence[World]) -> list[dict]:
    policies = [*BUILTINS, "recommended"]
    rows = []
    for requests in (False, True):
        results = evaluate(policies, list(worlds), jobs=1, backend="serial", task_timeout=None, progress=False,
                           requests=requests)
        for policy in policies:
            mine = [r for r in results if r.policy == policy]
            rows.append({
                "policy": policy, "mode": "requests" if requests else "rule",
                "V": statistics.mean(r.replay_score for r in mine),
                "answered": sum(r.attempts for r in mine) / max(1, sum(r.attempts + (r.refused or 0) for r in mine)),
                "on_record": statistics.mean(bool(r.on_record) for r in mine),
                "cut_short": statistics.mean(bool(r.cut_short) for r in mine),
                "choices": statistics.mean(r.answerable or 0.0 for r in mine),
                "attempts": statistics.mean(r.attempts for r in mine),
                "errors": sum(1 for r in mine if r.error),
            })
    return rows


def coverage_table(title: str, rows: list[dict]) -> list[str]:
    lines = [f"### {title}", "", "| policy | V (rule) | V (requests) | requests answered | on record (rule / requests) "
             "| cut short (rule / requests) | online choices held (rule / requests) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    by = {(r["policy"], r["mode"]): r for r in rows}
    for policy in dict.fromkeys(r["policy"] for r in rows):
        rule, req = by[(policy, "rule")], by[(policy, "requests")]
        lines.append(f"| {policy} | {rule['V']:.3f} | {req['V']:.3f} | {100 * req['answered']:.0f}% | "
                     f"{100 * rule['on_record']:.0f}% / {100 * req['on_record']:.0f}% | "
                     f"{100 * rule['cut_short']:.0f}% / {100 * req['cut_short']:.0f}% | "
                     f"{100 * rule['choices']:.0f}% / {100 * req['choices']:.0f}% |")
    return lines + [""]


# -- 2. ranking against the online outcome ----------------------------------------------------------
def arm_a_worlds(out: Path, replicates: int) -> dict[tuple[str, int], list[World]]:
    """The arm-A worlds, grown and imported ``replicates`` times per (task, seed) (resumable)."""
    worlds: dict[tuple[str, int], list[World]] = {}
    for task in TASKS:
        for seed in SEEDS:
            for rep in range(1, replicates + 1):
                runs = out / "arm-a" / f"r{rep}" / "runs" / task / f"s{seed}"
                world = out / "arm-a" / f"r{rep}" / "imported" / task / f"A-s{seed}"
                if not (runs / "run_summary.json").is_file():
                    if runs.exists():
                        run([*DREAM_GYM, "openevolve", "run", "--task", task, "--policy", "native", "-W", str(W),
                             "--iterations", str(ITERATIONS), "--seed", str(seed), "--out", str(runs), "--resume"])
                    else:
                        runs.parent.mkdir(parents=True, exist_ok=True)
                        run([*DREAM_GYM, "openevolve", "run", "--task", task, "--policy", "native", "-W", str(W),
                             "--iterations", str(ITERATIONS), "--seed", str(seed), "--out", str(runs)])
                if not (world / "world.json").is_file():
                    world.parent.mkdir(parents=True, exist_ok=True)
                    run([*DREAM_GYM, "worlds", "import", "--from", "openevolve", str(runs / "openevolve"), "--out",
                         str(world), "-W", str(W), "--id", f"{task}-A-s{seed}-r{rep}", "--task", task])
                worlds.setdefault((task, seed), []).append(load_world(world))
    return worlds


def charged(r: EpisodeResult) -> float:
    """V of the same episode with every refused request counted as an attempt."""
    asked = r.attempts + (r.refused or 0)
    return r.best_q - DEFAULT_BETA1 * asked + DEFAULT_BETA2 * asked / max(1, r.rounds)


def per_seed_scores(worlds: dict[tuple[str, int], list[World]], task: str, policies: list[str],
                    replicate: int | None = None) -> dict[str, dict[str, list[float]]]:
    """scores[name][policy] = one value per seed (mean over that seed's replicate worlds, or the
    ``replicate``-th alone)."""
    chosen = {s: worlds[(task, s)] if replicate is None else [worlds[(task, s)][replicate]] for s in SEEDS}
    every = [w for s in SEEDS for w in chosen[s]]
    rule = evaluate(policies, every, [BETA], jobs=1, backend="serial", task_timeout=None, progress=False)
    requests = evaluate(policies, every, [BETA], jobs=1, backend="serial", task_timeout=None, progress=False,
                        requests=True)
    seed_of = {w.id: s for s in SEEDS for w in chosen[s]}

    def by_seed(results: list[EpisodeResult], value: Callable[[EpisodeResult], float]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for policy in policies:
            out[policy] = [statistics.mean(value(r) for r in results if r.policy == policy and seed_of[r.world] == s)
                           for s in SEEDS]
        return out

    return {
        "V (rule)": by_seed(rule, lambda r: r.replay_score),
        "V (requests)": by_seed(requests, lambda r: r.replay_score),
        "V (requests, charged)": by_seed(requests, charged),
        "asks beyond the record": by_seed(requests, lambda r: 1.0 - (r.coverage if r.coverage is not None else 1.0)),
        "requests answered": by_seed(requests, lambda r: r.coverage if r.coverage is not None else 1.0),
        "cut short (requests)": by_seed(requests, lambda r: float(bool(r.cut_short))),
        "errors": by_seed(rule + requests, lambda r: float(bool(r.error))),
    }


def online_bests(task: str) -> dict[str, list[float]]:
    rows = json.loads(REDEPLOY.read_text())["tasks"][task]["rows"]
    return {("C" if r["arm"] == "C" else r["arm"]): r["bests"] for r in rows}


def rho(x: Sequence[float], y: Sequence[float]) -> float:
    value = spearmanr(x, y).statistic
    return float(value) if value == value else math.nan


def score_of(name: str, scores: dict[str, dict[str, list[float]]], policies: list[str], seeds: Sequence[int]
             ) -> list[float]:
    """One value per policy over the (resampled) seed positions."""
    if name == "V (rule) + coverage":  # the mean of the two ranks
        v = rankdata([np.mean([scores["V (rule)"][p][i] for i in seeds]) for p in policies])
        c = rankdata([np.mean([scores["asks beyond the record"][p][i] for i in seeds]) for p in policies])
        return list((v + c) / 2)
    return [float(np.mean([scores[name][p][i] for i in seeds])) for p in policies]


RANKED = ("V (rule)", "V (requests)", "V (requests, charged)", "asks beyond the record", "V (rule) + coverage")


def ranking(task: str, worlds: dict[tuple[str, int], list[World]]) -> dict:
    policies = [ARM_C, *BUILTINS]
    names = ["C", *BUILTINS]
    scores = per_seed_scores(worlds, task, policies)
    bests = online_bests(task)
    online = [[bests[n][i] for i in range(len(SEEDS))] for n in names]
    rng = np.random.default_rng(20261205)
    resamples = [rng.integers(0, len(SEEDS), len(SEEDS)) for _ in range(BOOTSTRAP)]
    out: dict = {"policies": names, "scores": {k: {n: v[p] for n, p in zip(names, policies, strict=True)}
                                              for k, v in scores.items()},
                 "online_median_best": {n: statistics.median(b) for n, b in zip(names, online, strict=True)},
                 "rho": {}}
    for name in RANKED:
        point = rho(score_of(name, scores, policies, range(len(SEEDS))), [statistics.median(b) for b in online])
        boot = [rho(score_of(name, scores, policies, sample), [float(np.median(np.asarray(b)[sample])) for b in online])
                for sample in resamples]
        boot = [b for b in boot if not math.isnan(b)]
        out["rho"][name] = {"rho": point, "low": float(np.percentile(boot, 2.5)), "high": float(np.percentile(boot, 97.5)),
                            "resamples": len(boot)}
    # which OpenEvolve run replay is played on matters too: rho with each replicate's worlds alone
    replicates = len(worlds[(task, SEEDS[0])])
    medians = [statistics.median(b) for b in online]
    for index in range(replicates if replicates > 1 else 0):
        alone = per_seed_scores(worlds, task, policies, index)
        for name in RANKED:
            out["rho"][name].setdefault("by_replicate", []).append(
                rho(score_of(name, alone, policies, range(len(SEEDS))), medians))
    return out


def ranking_table(task: str, result: dict, replicates: int) -> list[str]:
    lines = [f"### {task}: replay on OpenEvolve's own trees vs the online runs ({replicates} arm-A world(s) per seed)",
             "", "| replay score | Spearman rho vs online median final best | 95% bootstrap interval over seeds "
             "| rho on each replicate's worlds alone |", "|---|---:|---:|---:|"]
    for name, r in result["rho"].items():
        alone = ", ".join(f"{x:.2f}" for x in r.get("by_replicate", [])) or "-"
        lines.append(f"| {name} | {r['rho']:.2f} | [{r['low']:.2f}, {r['high']:.2f}] | {alone} |")
    lines += ["", "| policy | online median best | V (rule) | V (requests) | V (requests, charged) | requests answered "
              "| cut short (requests) |", "|---|---:|---:|---:|---:|---:|---:|"]
    s = result["scores"]
    for n in result["policies"]:
        lines.append(f"| {n} | {result['online_median_best'][n]:.6g} | {statistics.mean(s['V (rule)'][n]):.3f} | "
                     f"{statistics.mean(s['V (requests)'][n]):.3f} | {statistics.mean(s['V (requests, charged)'][n]):.3f} | "
                     f"{100 * statistics.mean(s['requests answered'][n]):.0f}% | "
                     f"{100 * statistics.mean(s['cut short (requests)'][n]):.0f}% |")
    return lines + [""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "replay_coverage")
    parser.add_argument("--runs", type=Path, default=DEFAULT_RUNS, help="real OpenEvolve runs (one folder each)")
    parser.add_argument("--replicates", type=int, default=3, help="arm-A worlds grown per (task, seed)")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {}
    lines = ["## Coverage of the built-ins (beta grid 0-1; rule = each world's own frontier rule)", ""]
    shipped = resolve_worlds("dream-gym/recorded-v1")
    report["shipped"] = coverage_rows(shipped)
    lines += coverage_table(f"Shipped worlds (dream-gym/recorded-v1, {len(shipped)} worlds)", report["shipped"])
    if args.runs.is_dir():
        real, skipped = import_real_runs(args.runs, out / "real")
        report["real"], report["real_skipped"] = coverage_rows(real), skipped
        lines += coverage_table(f"Real OpenEvolve runs ({len(real)} imported with --from auto)", report["real"])
        lines += [f"Not imported: {s}" for s in skipped] + [""]
    worlds = arm_a_worlds(out, args.replicates)
    lines += ["## Ranking against the online runs (experiments/openevolve_redeploy)", ""]
    report["ranking"] = {}
    for task in TASKS:
        report["ranking"][task] = ranking(task, worlds)
        lines += ranking_table(task, report["ranking"][task], args.replicates)
    (out / "coverage.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "coverage.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
