"""The choice of the RL training budget (docs/results/rl.md), made on a validation set that is never a test set.

    nice -n 5 .venv/bin/python -m experiments.rl.budget --base out/rl-v1d --out out/rl-v1e \\
        -- --worlds train,dream-gym/recorded-v0:train --prefixes 50,100,200

At the budget ``experiments.rl.results`` used before this choice (120k macro, 240k node steps) the train-pool
curves of every kind were still rising. Per model kind two budgets, each over the same seeds and with
every other option as given after ``--`` (the final table's pool):

* that budget, ``SHORT[arch]`` (or ``--short``): the runs ``BASE/<kind>-s<seed>`` (reused);
* ``--long`` steps (480k): new runs ``OUT/<kind>-s<seed>``.

Runs longer than ``SHORT[arch]`` are evaluated every ``--eval-every`` (120k) steps. The second use,
``--kinds macro-v --seeds 0,1,2,3,4 --short 480000 --long 960000 --base out/rl-v1e --out out/rl-v1g``,
asked the same question one step further for the V macro model, whose train-pool curve was still
rising at 480k.

The rule, fixed before the runs: per kind, the budget with the better mean over seeds of the kind's
own score (v2, or mean V for a ``-v`` kind) on the **validation set**, recorded-v0's held-out split;
a gain below ``--margin`` (0.005) keeps the shorter budget. The two test sets — recorded-v1's held-out
split and the real runs (imported with W = 4) — are printed for every variant too, marked "reported,
not used". Finished runs (``summary.json``) are reused; a killed one resumes from its checkpoint.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.rl.choice import add_choice_arguments, choose, report_tests, seed_list, train_variant
from experiments.rl.results import kind_options, split_extra

REPO = Path(__file__).resolve().parents[2]
SHORT = {"macro": 120_000, "node": 240_000}  # experiments.rl.results STEPS when the budget was chosen


def main(argv: list[str] | None = None) -> int:
    own, extra = split_extra(list(sys.argv[1:] if argv is None else argv))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kinds", default="macro,macro-v,node,node-v")
    parser.add_argument("--base", type=Path, default=REPO / "out" / "rl", help="experiments.rl.results' run folders")
    parser.add_argument("--out", type=Path, default=REPO / "out" / "rl-budget", help="the long runs' folders")
    parser.add_argument("--short", type=int, default=0, help="the shorter budget (default: SHORT of the arch)")
    parser.add_argument("--long", type=int, default=480_000, help="the longer budget, in env steps")
    parser.add_argument("--eval-every", type=int, default=120_000, help="the long runs' evaluation period")
    parser.add_argument("--margin", type=float, default=0.005, help="a smaller validation gain keeps the shorter budget")
    add_choice_arguments(parser)
    args = parser.parse_args(own)
    seeds = seed_list(args.seeds)
    kinds = [k for k in args.kinds.split(",") if k.strip()]

    models: dict[tuple[str, str], list[str]] = {}
    for kind in kinds:
        arch = kind_options(kind)[0]
        for steps, folder in ((args.short or SHORT[arch], args.base), (args.long, args.out)):
            # runs longer than the results' first budget are evaluated every --eval-every steps
            options = ["--eval-every", str(args.eval_every)] if steps > SHORT[arch] else []
            models[kind, f"{steps // 1000}k"] = train_variant(kind, seeds, folder, kind, steps, [*extra, *options])

    choose(models, "steps", args.margin, args.jobs)
    if not args.skip_tests:
        report_tests(models, "steps", args.runs, args.jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
