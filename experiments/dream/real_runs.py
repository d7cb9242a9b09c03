"""Dreaming on real runs: one improvement step from the best built-in policy on the imported real
runs of ../shared/external-runs plus the shipped train split; the chosen policy's held-out score
against every built-in.

    nice -n 5 .venv/bin/python -m experiments.dream.real_runs [--revisions 40] [--out out/bench/dream-real]

Steps, top to bottom:
1. import every run of ../shared/external-runs (OpenEvolve, ShinkaEvolve) into OUT/real/ (outside
   the project; a run that cannot be imported is listed and skipped);
2. history H = the imported real runs + the shipped train split; score every built-in on H
   (mean V over the beta grid, isolated like any version) and take the best as the incumbent;
3. one improvement step (the built-in developer, M versions, determinism gate) on H, in
   OUT/dream/ (resumable: run the script again after a crash);
4. report, for every built-in and the chosen policy: the score on H (selection), the share of the
   oracle limit reached on the real runs (mean V / the world's limit, averaged over the runs), and the
   held-out split's mean V and v2 (never seen by selection).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from dream_gym.datasets.importers import import_run
from dream_gym.dream.builtin_developer import BuiltinDeveloper
from dream_gym.dream.improve import DreamSettings, improvement_step
from dream_gym.dream.scoring import ScoringSettings
from dream_gym.evaluation.evaluate import evaluate, leaderboard, resolve_worlds
from dream_gym.policies import POLICIES
from dream_gym.world.tree import load_world

ROOT = Path(__file__).resolve().parents[2]
EXTERNAL = ROOT.parent / "shared" / "external-runs"
METRICS = {"no-three-in-line": "overall_score"}  # runs whose main metric is not combined_score


@dataclass
class Args:
    revisions: int = 40  # M, the incumbent included
    out: Path = ROOT / "out" / "bench" / "dream-real"  # imported runs and the step's run folder
    train: str = "train"  # the shipped train split (selection)
    heldout: str = "heldout"  # the shipped held-out split (report only)
    jobs: int = 2  # processes for the evaluations
    seed: int = 0


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, value in vars(Args()).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    return Args(**vars(parser.parse_args()))


def import_real_runs(out: Path) -> list:
    """Every run below EXTERNAL imported once into ``out`` (kept between invocations)."""
    worlds = []
    for src in sorted(p for system in ("openevolve", "shinkaevolve") for p in (EXTERNAL / system).glob("*")
                      if p.is_dir()):
        target = out / f"{src.parent.name}-{src.name}"
        if not (target / "world.json").is_file():
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    # W = 1, as the recorded figures were measured (an import now reads W from the
                    # run's configuration file where it has one)
                    import_run("auto", src, target, metric=METRICS.get(src.name, "combined_score"), world_id=src.name,
                               workers=1)
            except Exception as exc:  # noqa: BLE001 - report and go on with the others
                print(f"  skipped {src.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
        worlds.append(load_world(target))
    return worlds


def main() -> None:
    args = parse_args()
    started = time.perf_counter()
    real = import_real_runs(args.out / "real")
    train, heldout = resolve_worlds(args.train), resolve_worlds(args.heldout)
    history = [*real, *train]
    print(f"history: {len(real)} real runs ({', '.join(w.id for w in real)}) + {len(train)} train worlds")
    scoring = ScoringSettings(jobs=args.jobs, seed=args.seed)

    builtins = sorted(POLICIES)
    on_history = evaluate(builtins, history, scoring.betas, jobs=args.jobs, progress=False)
    board = leaderboard(on_history, rank_by="V")
    start = board.overall[0].policy
    print(f"best built-in on the history (mean V): {start} {board.overall[0].mean_v:.4f}")

    settings = DreamSettings(args.revisions, scoring)
    dream_dir = args.out / "dream"
    result = improvement_step(dream_dir, 1, start, history, BuiltinDeveloper(seed=args.seed), settings,
                              events=lambda kind, data: kind == "version" and print(
                                  f"  version {data['record'].m}: {data['record'].status} "
                                  f"{data['record'].score if data['record'].score is not None else '-'} "
                                  f"({data['record'].seconds:.1f}s)", flush=True))
    chosen = str(dream_dir / "chosen.py")
    print(f"chosen version {result.deployed_m}: {result.selected_score:.4f} on H ({result.gain_history:+.4f})")

    candidates = [*builtins, chosen]
    on_real = evaluate(candidates, real, scoring.betas, jobs=args.jobs, progress=False)
    on_heldout = evaluate(candidates, heldout, scoring.betas, jobs=args.jobs, progress=False)
    label = {chosen: "dreamed (chosen.py)"}
    history_board = {r.policy: r for r in board.overall}
    heldout_board = {r.policy: r for r in leaderboard(on_heldout).overall}
    real_board = leaderboard(on_real)
    real_share = {r.policy: r.limit_share for r in real_board.overall}
    limits = {name: rows[0].limit for name, rows in real_board.per_world.items()}
    print(f"oracle limits of the real runs: {', '.join(f'{k} {v:.3f}' for k, v in limits.items())} "
          "(a run without a positive limit is left out of the share)")
    rows = []
    for policy in candidates:
        h = history_board.get(policy)
        rows.append({
            "policy": label.get(policy, policy),
            "history_V": h.mean_v if h else result.selected_score,
            "real_limit_share": real_share[policy],
            "heldout_V": heldout_board[policy].mean_v,
            "heldout_v2": heldout_board[policy].v2,
        })
    rows.sort(key=lambda r: -r["heldout_V"])
    print("\n| policy | H: mean V (selection) | real runs: % of oracle limit | held-out: mean V | held-out: v2 |")
    print("|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['policy']} | {row['history_V']:.4f} | {100 * row['real_limit_share']:.1f}% | "
              f"{row['heldout_V']:.4f} | {row['heldout_v2']:.4f} |")
    (args.out / "report.json").write_text(json.dumps({"rows": rows, "incumbent": start,
                                                      "phase": result.to_dict()}, indent=2, default=str))
    print(f"\n{time.perf_counter() - started:.0f}s; report in {args.out / 'report.json'}")


if __name__ == "__main__":
    main()
