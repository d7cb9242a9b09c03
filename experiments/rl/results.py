"""The RL results (docs/results/rl.md): every model kind over seeds against every built-in policy.

    .venv/bin/python -m experiments.rl.results                        # seeds 0,1,2; every kind
    .venv/bin/python -m experiments.rl.results --seeds 0,1,2 --out out/rl

1. Trains ``dream-gym train --arch A --seed S --out OUT/K-sS --timesteps STEPS[K]`` for every model
   kind K and seed, each in its own process (a finished run, i.e. one with ``summary.json``, is reused;
   a killed one resumes from its checkpoint). A kind is an arch (``macro``, ``node``: the beta-priced
   objective v2), an arch with ``-v`` (``macro-v``, ``node-v``: ``--objective v``, plain V) or
   ``options-long`` (v2 at the price chosen for long runs, in OPTIONS). Extra
   arguments after ``--`` go to every ``dream-gym train``.
2. Evaluates every trained model and the nine built-ins over the default beta grid on the held-out
   split and on the real runs of ``../shared/external-runs`` imported with W = 4 (experiments/
   world_stats.py's importer), and prints per set one leaderboard: each model kind as mean +-
   standard deviation over its seeds (v2, mean V, % of the oracle limit), each built-in once.
   ``--skip-real`` leaves out the real runs.
3. Prints training time and fps per model kind and writes ``OUT/training_curves.png`` (v2 and
   mean V on the train pool and on the held-out worlds against steps, from each run's ``evals.jsonl``).

Shipping the models is its own command, :mod:`experiments.rl.ship` (the same ``--kinds``, ``--seeds``,
``--out`` and ``--ensemble``): it copies the chosen seeds to ``agents/models`` and writes the model card.

``--ensemble node`` (kinds adopted as seed ensembles on the validation set, docs/results/rl.md, "Seed
ensembles") also trains the seeds of ``--ensemble-groups`` (default 0-4,5-9,10-14) and reports
each group's :class:`dream_gym.rl.EnsemblePolicy` (spec ``a.zip+b.zip+...``) as one row, mean +- sd
over the groups.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from dream_gym.evaluation.evaluate import evaluate, leaderboard, resolve_worlds
from dream_gym.policies import POLICIES
from experiments.rl.seeds import spread
from experiments.world_stats import DEFAULT_RUNS, import_runs

REPO = Path(__file__).resolve().parents[2]
# The final runs' budget and options per model kind, each chosen on the validation set by a rule
# fixed before its runs (docs/results/rl.md, "The training budget" and "PPO's entropy coefficient"): env steps
# (experiments/rl/budget.py; the long runs evaluate every 120k steps, not the default 50k, which would
# evaluate the 103-world pool ten times) and the macro models' entropy coefficients
# (experiments/rl/entropy.py, for the v2 and the V objective). The choice scripts pass
# their own, earlier, budgets and options.
# The options kinds (docs/results/rl.md, "Options over the built-ins") take the macro kinds' entropy and, fixed
# before their first run, the macro v2 budget and half the macro V budget. ``options-long`` is
# ``options`` at the price range experiments/rl/price_range.py chose for it on recorded-v1's long train
# worlds (docs/results/rl.md, "Options priced for long runs").
STEPS = {"macro": 120_000, "node": 240_000, "macro-v": 480_000, "node-v": 480_000, "options": 120_000,
         "options-v": 240_000, "options-long": 120_000}
OPTIONS = {"macro": ["--ent-coef", "0.003"], "macro-v": ["--eval-every", "120000", "--ent-coef", "0.003"],
           "node-v": ["--eval-every", "120000"], "options": ["--ent-coef", "0.003"],
           "options-v": ["--eval-every", "120000", "--ent-coef", "0.003"],
           "options-long": ["--ent-coef", "0.003", "--price-high", "2", "--price-low", "0.1"]}
# A kind is an arch, optionally with a variant: -v trains on plain V, -long is priced by its OPTIONS.
VARIANTS = {"": [], "v": ["--objective", "v"], "long": []}


def kind_options(kind: str) -> tuple[str, list[str]]:
    """(arch, options) of a model kind: ``macro``/``node``/``options`` (objective v2), or the same with
    ``-v`` (V) or ``-long`` (v2 at the price in OPTIONS)."""
    arch, _, variant = kind.partition("-")
    if kind not in STEPS:
        raise ValueError(f"unknown model kind {kind!r}: one of {', '.join(STEPS)}")
    return arch, VARIANTS[variant]


def train_command(kind: str, seed: int, out: Path, steps: int, extra: list[str]) -> list[str]:
    """The ``dream-gym train`` command of a kind and seed: ``steps`` env steps, options ``extra``."""
    arch, options = kind_options(kind)
    return [sys.executable, "-m", "dream_gym", "train", "--arch", arch, "--seed", str(seed),
            "--timesteps", str(steps), "--out", str(out), *options, *extra]


def split_extra(argv: list[str]) -> tuple[list[str], list[str]]:
    """(own arguments, arguments after ``--`` for every ``dream-gym train``)."""
    if "--" not in argv:
        return argv, []
    return argv[: argv.index("--")], argv[argv.index("--") + 1:]


def scored(specs: list[str], worlds: Any, jobs: int) -> tuple[Any, list[Any]]:
    """(leaderboard, results) of ``specs`` on ``worlds``; refuses any episode that ended with an
    error (a model whose worker timed out under load, say): a table must not average it in."""
    results = evaluate(specs, worlds, None, jobs=jobs, progress=False)
    board = leaderboard(results)
    if board.errors:
        policy, world, beta, message = board.errors[0]
        raise RuntimeError(f"{len(board.errors)} episodes ended with an error, e.g. {policy} on {world} "
                           f"(beta {beta:g}): {message}; re-run on a less loaded machine or with fewer --jobs")
    return board, results


def best_builtins(rows: dict[str, Any]) -> dict[str, Any]:
    """The built-in's leaderboard row with the best v2 and the one with the best mean V."""
    return {key: max((rows[p] for p in POLICIES), key=lambda r: getattr(r, key)) for key in ("v2", "mean_v")}


def real_runs(runs: Path, into: Path) -> list[Any]:
    """The real runs imported with W = 4 (experiments/world_stats.py's importer) into ``into``; a run
    recorded as its root alone has no limit and is left out."""
    return [w for w in import_runs(runs, into, 4, lambda _: None) if w.size > 1]


def shown(command: list[str]) -> str:
    return " ".join(["dream-gym", *command[3:]]).replace(str(REPO) + "/", "")


def run(kind: str, seed: int, out: Path, steps: int, extra: list[str]) -> dict[str, Any]:
    command = train_command(kind, seed, out, steps, extra)
    if not (out / "summary.json").is_file():
        out.mkdir(parents=True, exist_ok=True)
        print(f"training: {shown(command)}", flush=True)
        with open(out / "train.log", "a", encoding="utf-8") as log:
            subprocess.run(["nice", "-n", "5", *command], check=True, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    summary = dict(json.loads((out / "summary.json").read_text()))
    summary["command"] = shown(command)
    return summary


def cell(values: list[float], percent: bool = False) -> str:
    scale = 100.0 if percent else 1.0
    mean = statistics.fmean(values) * scale
    sd = (statistics.stdev(values) if len(values) > 1 else 0.0) * scale
    return f"{mean:.1f}% ± {sd:.1f}" if percent else f"{mean:.4f} ± {sd:.4f}"


def own_score(kind: str) -> str:
    """The leaderboard score a kind's objective is judged by: mean V for a ``-v`` kind, else v2."""
    return "mean_v" if kind.endswith("-v") else "v2"


def table(title: str, models: dict[str, list[str]], worlds: Any, jobs: int) -> str:
    """One leaderboard: every model and built-in on ``worlds``; models grouped by kind. An ensemble
    row's members are evaluated alone too, for :func:`members_lines`."""
    members = [part for ms in models.values() for m in ms if "+" in m for part in m.split("+")]
    specs = list(dict.fromkeys([m for ms in models.values() for m in ms] + members))
    board, results = scored(specs + list(POLICIES), worlds, jobs)
    rows = {r.policy: r for r in board.overall}
    lines = [f"**{title}** ({len(board.per_world)} worlds)", "",
             "| policy | v2 | mean V | % of limit | attempts | rounds |", "|---|---:|---:|---:|---:|---:|"]
    entries = []
    for kind, ms in models.items():
        got = [rows[m] for m in ms]
        unit = "ensembles" if "+" in ms[0] else "seeds"
        entries.append((statistics.fmean(r.v2 for r in got), f"| **ppo-{kind}** ({len(got)} {unit}) | "
                        f"{cell([r.v2 for r in got])} | {cell([r.mean_v for r in got])} | "
                        f"{cell([r.limit_share for r in got], percent=True)} | "
                        f"{statistics.fmean(r.attempts for r in got):.1f} | {statistics.fmean(r.rounds for r in got):.1f} |"))
    for name in POLICIES:
        r = rows[name]
        entries.append((r.v2, f"| {name} | {r.v2:.4f} | {r.mean_v:.4f} | {100 * r.limit_share:.1f}% | "
                              f"{r.attempts:.1f} | {r.rounds:.1f} |"))
    lines += [line for _, line in sorted(entries, key=lambda e: -e[0])]
    lines += ["", *spend(models, results), *seed_lines(models, rows), *members_lines(models, rows)]
    return "\n".join(lines) + "\n"


def seed_lines(models: dict[str, list[str]], rows: dict[str, Any]) -> list[str]:
    """Per kind, v2 and mean V of each seed's model (or ensemble) in order: how many seeds pass a line."""
    return [f"- ppo-{kind} per seed: v2 {', '.join(f'{rows[m].v2:.4f}' for m in ms)}; mean V "
            f"{', '.join(f'{rows[m].mean_v:.4f}' for m in ms)}" for kind, ms in models.items()]


def members_lines(models: dict[str, list[str]], rows: dict[str, Any]) -> list[str]:
    """Per ensemble row, each ensemble against the mean of its members alone, and all members' mean."""
    lines = []
    for label, ms in models.items():
        groups = [m.split("+") for m in ms if "+" in m]
        for group, ensemble in zip(groups, ms, strict=False):
            got = [rows[m] for m in group]
            lines.append(f"- ppo-{label}, members {', '.join(group)}: members' mean v2 "
                         f"{statistics.fmean(r.v2 for r in got):.4f}, mean V {statistics.fmean(r.mean_v for r in got):.4f}"
                         f" -> ensemble v2 {rows[ensemble].v2:.4f}, mean V {rows[ensemble].mean_v:.4f}")
        if groups:
            every = [rows[m] for g in groups for m in g]
            lines.append(f"- ppo-{label}: all {len(every)} members alone: v2 {cell([r.v2 for r in every])}, "
                         f"mean V {cell([r.mean_v for r in every])}")
    return lines


def spend(models: dict[str, list[str]], results: list[Any], betas: tuple[float, ...] = (0.0, 0.5, 1.0)) -> list[str]:
    """Per kind, mean attempts and attainment at a few betas (over seeds and worlds): does beta move it?"""
    lines = []
    for kind, ms in models.items():
        at = {b: [r for r in results if r.policy in ms and abs(r.beta - b) < 1e-9] for b in betas}
        attempts = " / ".join(f"{statistics.fmean(r.attempts for r in at[b]):.1f}" for b in betas)
        attain = " / ".join(f"{statistics.fmean(r.attainment for r in at[b]):.2f}" for b in betas)
        lines.append(f"- ppo-{kind} at beta = {' / '.join(f'{b:g}' for b in betas)}: attempts {attempts}, "
                     f"attainment {attain}")
    return lines


def curves(summaries: dict[str, dict[int, dict[str, Any]]], out: Path, runs: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 6.4), sharex=True, sharey="row")
    for row, (score, ylabel) in enumerate((("v2", "v2 (auc - 0.1 penalty)"), ("mean_v", "mean V"))):
        for ax, part, label in ((axes[row, 0], "train", "train pool"), (axes[row, 1], "heldout", "held-out worlds")):
            for i, (kind, seeds) in enumerate(summaries.items()):
                for j, seed in enumerate(seeds):
                    rows = [json.loads(x) for x in (runs / f"{kind}-s{seed}" / "evals.jsonl").read_text().splitlines()]
                    ax.plot([r["timesteps"] for r in rows], [r[f"{part}_{score}"] for r in rows], color=f"C{i}",
                            alpha=0.8, label=f"ppo-{kind}" if j == 0 else None)
            ax.set_title(f"{ylabel.split(' (')[0]} on the {label}")
            ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1000:g}")
            ax.grid(alpha=0.3)
        axes[row, 0].set_ylabel(ylabel)
    for ax in axes[1]:
        ax.set_xlabel("env steps (thousands)")
    axes[0, 0].legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return out


def seed_groups(text: str) -> list[list[int]]:
    """``0-4,5-9`` -> [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]] (each group two or more seeds)."""
    groups = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        first, _, last = part.partition("-")
        groups.append(list(range(int(first), int(last or first) + 1)))
        if len(groups[-1]) < 2:
            raise ValueError(f"an ensemble group needs two or more seeds, got {part!r}")
    return groups


def run_choice(args: argparse.Namespace) -> tuple[list[int], list[str], list[str], list[list[int]]]:
    """The seeds, kinds, ensemble kinds and ensemble seed groups that ``--seeds``, ``--kinds``,
    ``--ensemble`` and ``--ensemble-groups`` name; an ensemble kind must be among the kinds."""
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    kinds = [a for a in args.kinds.split(",") if a.strip()]
    ensembles = [a for a in args.ensemble.split(",") if a.strip()]
    if not set(ensembles) <= set(kinds):
        raise SystemExit(f"--ensemble {args.ensemble}: not among --kinds {args.kinds}")
    return seeds, kinds, ensembles, seed_groups(args.ensemble_groups)


def ensemble_label(kind: str, groups: list[list[int]]) -> str:
    return f"{kind} ×{len(groups[0])}"


def main(argv: list[str] | None = None) -> int:
    own, extra = split_extra(list(sys.argv[1:] if argv is None else argv))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--kinds", default="macro,node,macro-v,node-v", help="model kinds (see 1. above)")
    parser.add_argument("--out", type=Path, default=REPO / "out" / "rl")
    parser.add_argument("--runs", type=Path, default=DEFAULT_RUNS, help="real runs to import (W = 4)")
    parser.add_argument("--heldout", default="heldout")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--skip-real", action="store_true", help="leave out the real runs")
    parser.add_argument("--ensemble", default="", help="kinds also reported as seed ensembles")
    parser.add_argument("--ensemble-groups", default="0-4,5-9,10-14", help="the seeds of each ensemble")
    args = parser.parse_args(own)
    seeds, kinds, ensembles, groups = run_choice(args)

    def trained(kind: str, seed: int) -> dict[str, Any]:
        return run(kind, seed, args.out / f"{kind}-s{seed}", STEPS[kind], [*OPTIONS.get(kind, []), *extra])

    def zip_of(kind: str, seed: int) -> str:
        return str(args.out / f"{kind}-s{seed}" / "model.zip")

    summaries = {kind: {seed: trained(kind, seed) for seed in seeds} for kind in kinds}
    members = {kind: {seed: trained(kind, seed) for g in groups for seed in g} for kind in ensembles}
    models = {kind: [zip_of(kind, seed) for seed in seeds] for kind in kinds}
    for kind in ensembles:
        models[ensemble_label(kind, groups)] = ["+".join(zip_of(kind, seed) for seed in g) for g in groups]
    print("\n## Training\n")
    for kind, runs in summaries.items():
        first = next(iter(runs.values()))
        print(f"- ppo-{kind}: `{first['command']}` (seeds {', '.join(map(str, seeds))}): "
              f"{first['timesteps']} steps, {spread([s['seconds'] for s in runs.values()])} s, "
              f"{spread([s['fps'] for s in runs.values()])} steps/s; train-pool v2 "
              f"{spread([s['final']['train_v2'] for s in runs.values()])}, mean V "
              f"{spread([s['final']['train_mean_v'] for s in runs.values()])}")
    for kind, runs in members.items():
        print(f"- ppo-{ensemble_label(kind, groups)}: ensembles of seeds {groups}, trained as above; train-pool v2 "
              f"of the {len(runs)} members {spread([s['final']['train_v2'] for s in runs.values()])}")
    print(f"- determinism: {first['determinism']}")
    print(f"- curves: {curves(summaries, args.out / 'training_curves.png', args.out)}\n")
    print(table("Held-out split", models, resolve_worlds(args.heldout), args.jobs))
    if args.runs.is_dir() and not args.skip_real:
        with tempfile.TemporaryDirectory() as tmp:
            print(table("Real runs imported with W = 4", models, real_runs(args.runs, Path(tmp)), args.jobs))

    return 0


if __name__ == "__main__":
    raise SystemExit(main())
