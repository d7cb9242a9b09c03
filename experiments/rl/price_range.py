"""The choice of the v2 objective's price range (docs/results/rl.md), made on the train split only.

    nice -n 5 .venv/bin/python -m experiments.rl.price_range --out out/rl-price
    nice -n 5 .venv/bin/python -m experiments.rl.price_range --worlds POOL --out DIR -- --prefixes 50,100,200
    nice -n 5 .venv/bin/python -m experiments.rl.price_range --arch options --seeds 0,1 --check-within train \
        --rule v2 --worlds train,dream-gym/recorded-v0:train --out DIR -- --prefixes 50,100,200 --ent-coef 0.003

The train split (16 worlds of recorded-v1) is cut in two by :func:`inner_split`: per task, the
worlds in the split's order alternate between the part trained on ("fit") and the part scored
("check"). For each candidate range ``HIGH:LOW`` it trains ``dream-gym train --arch ARCH --seed S
--price-high HIGH --price-low LOW --worlds FIT --heldout CHECK`` (and, as a reference row, the same
with ``--objective v``), then evaluates every model and the nine built-ins over the default beta
grid on the check part and prints one table. The held-out split never enters. Arguments after
``--`` go to every ``dream-gym train`` (e.g. ``--prefixes``: the fit part's prefixes are trained on,
the check part is scored as recorded).

``--check-within POOL`` draws the check part from ``POOL``'s inner split alone (its "check" half) and
trains on every other world of ``--worlds``: e.g. long worlds scored, the whole pool trained on.
``--arch`` picks the architecture (``macro``, ``options``), ``--seeds`` the training seeds (each
candidate's scores are averaged over them) and ``-p`` how many trainings run at once.

The rule, fixed before the runs: the chosen range is the candidate with the largest v2 + mean V on
the check part (the two targets weighted alike; both are scores on [0, 1]-like scales), or with
``--rule v2`` the largest v2 (for a kind whose target is v2 alone). Finished runs (``summary.json``)
are reused; a killed one resumes from its checkpoint.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dream_gym.evaluation.evaluate import resolve_worlds
from dream_gym.policies import POLICIES
from dream_gym.world.tree import World
from experiments.rl.results import best_builtins, run, scored, split_extra

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = "5:0.1,2:0.1,1:0.05,2:0.5"
STEPS = 120_000  # the macro budget of both recorded runs


def inner_split(worlds: list[World]) -> tuple[list[World], list[World]]:
    """(fit, check): per task (the id's first dash-separated field), the 1st, 3rd, ... world fit, the
    2nd, 4th, ... check, so both parts hold every task and the check part other worlds of it."""
    fit: list[World] = []
    check: list[World] = []
    seen: dict[str, int] = {}
    for world in worlds:
        task = world.id.split("-")[0]
        (fit if seen.get(task, 0) % 2 == 0 else check).append(world)
        seen[task] = seen.get(task, 0) + 1
    return fit, check


def parts(pool: list[World], within: list[World] | None) -> tuple[list[World], list[World]]:
    """(fit, check) of ``pool``: its inner split, or with ``within`` the check half of ``within``'s
    inner split scored and every other world of ``pool`` trained on."""
    if within is None:
        return inner_split(pool)
    check = inner_split(within)[1]
    held = {w.id for w in check}
    return [w for w in pool if w.id not in held], check


def main(argv: list[str] | None = None) -> int:
    argv, extra = split_extra(list(sys.argv[1:] if argv is None else argv))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", default=CANDIDATES, help="comma list of HIGH:LOW price ranges")
    parser.add_argument("--seeds", default="0", help="comma list of training seeds")
    parser.add_argument("--arch", default="macro", choices=("macro", "options"))
    parser.add_argument("--worlds", default="train", help="the pool to split (never the held-out split)")
    parser.add_argument("--check-within", default="", help="draw the check part from this pool's inner split only")
    parser.add_argument("--rule", default="v2+v", choices=("v2+v", "v2"), help="what the chosen range maximises")
    parser.add_argument("--out", type=Path, default=REPO / "out" / "rl-price")
    parser.add_argument("--no-v", action="store_true", help="leave out the --objective v reference row")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("-p", "--parallel", type=int, default=1, help="trainings run at once")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]

    within = resolve_worlds(args.check_within) if args.check_within else None
    fit, check = parts(resolve_worlds(args.worlds), within)
    print(f"fit ({len(fit)}): {', '.join(w.id for w in fit)}\ncheck ({len(check)}): {', '.join(w.id for w in check)}")
    pools = ["--worlds", ",".join(w.id for w in fit), "--heldout", ",".join(w.id for w in check)]
    variants: dict[str, list[str]] = {}
    for pair in args.candidates.split(","):
        high, low = pair.split(":")
        variants[f"v2 {high} -> {low}"] = ["--price-high", high, "--price-low", low]
    if not args.no_v:
        variants["v (plain V)"] = ["--objective", "v"]
    jobs = {(label, seed): (args.out / f"c{i}-s{seed}", options)
            for i, (label, options) in enumerate(variants.items()) for seed in seeds}
    with ThreadPoolExecutor(args.parallel) as pool:
        futures = {key: pool.submit(run, args.arch, key[1], out, STEPS, [*pools, *options, *extra])
                   for key, (out, options) in jobs.items()}
        summaries = {key: future.result() for key, future in futures.items()}
    models = {key: str(out / "model.zip") for key, (out, _) in jobs.items()}

    board = scored([*models.values(), *POLICIES], check, args.jobs)[0]
    rows = {r.policy: r for r in board.overall}
    best = best_builtins(rows)

    def mean(label: str, value: Any) -> float:
        return statistics.fmean(value(key) for key in jobs if key[0] == label)

    def score(label: str, key: str) -> float:
        return mean(label, lambda k: getattr(rows[models[k]], key))

    first = summaries[next(iter(summaries))]
    print(f"\n**Inner split of the train pool** ({args.arch}, seeds {args.seeds}, {first['timesteps']} steps; "
          f"fit {len(fit)} worlds, scored on the {len(check)} check worlds; mean over the seeds)\n")
    print("| objective | fit v2 | check v2 | check mean V | check % of limit | attempts |")
    print("|---|---:|---:|---:|---:|---:|")
    for label in variants:
        print(f"| {label} | {mean(label, lambda k: summaries[k]['final']['train_v2']):.4f} | {score(label, 'v2'):.4f} | "
              f"{score(label, 'mean_v'):.4f} | {100 * score(label, 'limit_share'):.1f}% | {score(label, 'attempts'):.1f} |")
    print(f"| best built-in | | {best['v2'].v2:.4f} ({best['v2'].policy}) | "
          f"{best['mean_v'].mean_v:.4f} ({best['mean_v'].policy}) | | |")
    if len(seeds) > 1:
        print("\nper seed, check v2: " + "; ".join(
            f"{label}: " + ", ".join(f"{rows[models[(label, seed)]].v2:.4f}" for seed in seeds) for label in variants))
    priced = [label for label in variants if label.startswith("v2 ")]
    rule = {"v2+v": lambda label: score(label, "v2") + score(label, "mean_v"), "v2": lambda label: score(label, "v2")}
    chosen = max(priced, key=rule[args.rule])
    print(f"\nchosen (largest check {'v2' if args.rule == 'v2' else 'v2 + mean V'}): {chosen}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
