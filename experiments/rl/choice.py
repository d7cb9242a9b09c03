"""What the RL choice scripts (``rl_pools.py``, ``rl_budget.py``, ``rl_entropy.py``) share: a table of
model variants, the pre-declared rule that picks one per kind on the validation set, and the test
sets printed beside it, marked "reported, not used".

Variants of a kind are trained over the same seeds; ``models[kind, variant]`` lists their model zips,
the kind's incumbent (the option in force before the choice) first.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from dream_gym.evaluation.evaluate import resolve_worlds
from dream_gym.policies import POLICIES
from experiments.rl.results import best_builtins, cell, own_score, real_runs, run, scored
from experiments.world_stats import DEFAULT_RUNS

VALIDATION = "dream-gym/recorded-v0:heldout"  # no test set: 11 short runs of recorded-v0's tasks
Models = dict[tuple[str, str], list[str]]


def add_choice_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every choice script has: seeds, the real runs, skipping the test sets, jobs."""
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--runs", type=Path, default=DEFAULT_RUNS, help="real runs to import (W = 4)")
    parser.add_argument("--skip-tests", action="store_true", help="print the validation table only")
    parser.add_argument("-j", "--jobs", type=int, default=2)


def seed_list(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def train_variant(kind: str, seeds: list[int], folder: Path, name: str, steps: int, options: list[str]) -> list[str]:
    """Train (or reuse) one variant of a kind over the seeds, in ``folder/<name>-s<seed>``; its model zips."""
    outs = [folder / f"{name}-s{seed}" for seed in seeds]
    for seed, out in zip(seeds, outs, strict=True):
        run(kind, seed, out, steps, options)
    return [str(out / "model.zip") for out in outs]


def variants_table(title: str, models: Models, column: str, worlds: Any, jobs: int) -> tuple[str, dict[tuple[str, str], float]]:
    """A markdown table of model variants, one row per (kind, variant) with mean +- sd over its seeds
    and the best built-in per score; and each row's mean of its kind's own score (v2, or mean V for a
    ``-v`` kind), the number a variant is chosen by."""
    specs = [m for ms in models.values() for m in ms] + list(POLICIES)
    rows = {r.policy: r for r in scored(specs, worlds, jobs)[0].overall}
    best = best_builtins(rows)
    lines = [f"**{title}** ({len(worlds)} worlds)", "", f"| model | {column} | v2 | mean V | % of limit | attempts |",
             "|---|---|---:|---:|---:|---:|"]
    means = {}
    for (kind, variant), ms in models.items():
        got = [rows[m] for m in ms]
        means[kind, variant] = statistics.fmean(getattr(r, own_score(kind)) for r in got)
        lines.append(f"| ppo-{kind} | {variant} | {cell([r.v2 for r in got])} | {cell([r.mean_v for r in got])} | "
                     f"{cell([r.limit_share for r in got], percent=True)} | "
                     f"{statistics.fmean(r.attempts for r in got):.1f} |")
    lines.append(f"| best built-in | | {best['v2'].v2:.4f} ({best['v2'].policy}) | "
                 f"{best['mean_v'].mean_v:.4f} ({best['mean_v'].policy}) | | |")
    return "\n".join(lines) + "\n", means


def choose(models: Models, column: str, margin: float, jobs: int) -> dict[str, str]:
    """Print the validation table and, per kind, the variant the rule picks: the one with the best
    mean of the kind's own score, unless it beats the incumbent (the kind's first variant) by less
    than ``margin``."""
    text, means = variants_table(f"Validation: {VALIDATION}", models, column, resolve_worlds(VALIDATION), jobs)
    print(text)
    chosen = {}
    for kind in dict.fromkeys(k for k, _ in models):
        variants = [v for k, v in models if k == kind]
        best = max(variants, key=lambda v: means[kind, v])
        gain = means[kind, best] - means[kind, variants[0]]
        chosen[kind] = best if gain >= margin else variants[0]
        scores = ", ".join(f"{v}: {means[kind, v]:.4f}" for v in variants)
        print(f"chosen for ppo-{kind}: {column} {chosen[kind]} (validation "
              f"{own_score(kind).replace('mean_v', 'mean V')} {scores}; incumbent {variants[0]}, margin {margin})")
    return chosen


def report_tests(models: Models, column: str, runs: Path, jobs: int) -> None:
    """The two test sets for every variant, marked "reported, not used": recorded-v1's held-out split
    and the real runs of ``runs`` imported with W = 4."""
    print("\n" + variants_table("Reported, not used: recorded-v1 held-out split", models, column,
                                resolve_worlds("heldout"), jobs)[0])
    if runs.is_dir():
        with tempfile.TemporaryDirectory() as tmp:
            print(variants_table("Reported, not used: real runs imported with W = 4", models, column,
                                 real_runs(runs, Path(tmp)), jobs)[0])
