"""The README's choice of the v2 objective's price range, made on the train split only.

    nice -n 5 .venv/bin/python benchmarks/rl_price_range.py --out out/rl-price
    nice -n 5 .venv/bin/python benchmarks/rl_price_range.py --worlds POOL --out DIR -- --prefixes 50,100,200

The train split (16 worlds of recorded-v1) is cut in two by :func:`inner_split`: per task, the
worlds in the split's order alternate between the part trained on ("fit") and the part scored
("check"). For each candidate range ``HIGH:LOW`` it trains ``dream-gym train --arch macro --seed 0
--price-high HIGH --price-low LOW --worlds FIT --heldout CHECK`` (and, as a reference row, the same
with ``--objective v``), then evaluates every model and the nine built-ins over the default beta
grid on the check part and prints one table. The held-out split never enters. Arguments after
``--`` go to every ``dream-gym train`` (e.g. ``--prefixes``: the fit part's prefixes are trained on,
the check part is scored as recorded).

The rule, fixed before the runs: the chosen range is the candidate with the largest v2 + mean V on
the check part (the two targets weighted alike; both are scores on [0, 1]-like scales). Finished
runs (``summary.json``) are reused; a killed one resumes from its checkpoint.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rl_results import best_builtins, run, scored, split_extra

from dream_gym.evaluate import resolve_worlds
from dream_gym.policies import POLICIES
from dream_gym.world import World

REPO = Path(__file__).resolve().parents[1]
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


def main(argv: list[str] | None = None) -> int:
    argv, extra = split_extra(list(sys.argv[1:] if argv is None else argv))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", default=CANDIDATES, help="comma list of HIGH:LOW price ranges")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worlds", default="train", help="the pool to split (never the held-out split)")
    parser.add_argument("--out", type=Path, default=REPO / "out" / "rl-price")
    parser.add_argument("--no-v", action="store_true", help="leave out the --objective v reference row")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args(argv)

    fit, check = inner_split(resolve_worlds(args.worlds))
    print(f"fit ({len(fit)}): {', '.join(w.id for w in fit)}\ncheck ({len(check)}): {', '.join(w.id for w in check)}")
    pools = ["--worlds", ",".join(w.id for w in fit), "--heldout", ",".join(w.id for w in check)]
    variants: dict[str, list[str]] = {}
    for pair in args.candidates.split(","):
        high, low = pair.split(":")
        variants[f"v2 {high} -> {low}"] = ["--price-high", high, "--price-low", low]
    if not args.no_v:
        variants["v (plain V)"] = ["--objective", "v"]
    models: dict[str, str] = {}
    summaries = {}
    for i, (label, options) in enumerate(variants.items()):
        out = args.out / f"c{i}-s{args.seed}"
        summaries[label] = run("macro", args.seed, out, STEPS, [*pools, *options, *extra])
        models[label] = str(out / "model.zip")

    board = scored([*models.values(), *POLICIES], check, args.jobs)[0]
    rows = {r.policy: r for r in board.overall}
    best = best_builtins(rows)
    print(f"\n**Inner split of the train pool** (macro, seed {args.seed}, "
          f"{summaries[next(iter(summaries))]['timesteps']} steps; fit {len(fit)} worlds, scored on the "
          f"{len(check)} check worlds)\n")
    print("| objective | fit v2 | check v2 | check mean V | check % of limit | attempts |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, path in models.items():
        r = rows[path]
        print(f"| {label} | {summaries[label]['final']['train_v2']:.4f} | {r.v2:.4f} | {r.mean_v:.4f} | "
              f"{100 * r.limit_share:.1f}% | {r.attempts:.1f} |")
    print(f"| best built-in | | {best['v2'].v2:.4f} ({best['v2'].policy}) | "
          f"{best['mean_v'].mean_v:.4f} ({best['mean_v'].policy}) | | |")
    priced = [label for label in models if label.startswith("v2 ")]
    chosen = max(priced, key=lambda label: rows[models[label]].v2 + rows[models[label]].mean_v)
    print(f"\nchosen (largest check v2 + mean V): {chosen}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
