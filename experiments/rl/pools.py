"""The choice of the RL training pool (docs/results/rl.md), made on a validation set that is never a test set.

    nice -n 5 .venv/bin/python -m experiments.rl.pools --out out/rl-pools

A policy never sees a world's size, and recorded-v1's train worlds are all long (250 or 1,000
attempts) with progress that keeps coming; discovery runs come in every length, and many saturate
early. Three pools, each trained with ``dream-gym train --arch macro`` for both objectives (v2,
``--objective v``) and every seed:

* ``A``: recorded-v1's train split (16 worlds), the default;
* ``B``: A plus each world stopped after 50, 100 and 200 attempts (``--prefixes 50,100,200``);
* ``C``: B's construction over recorded-v1's and recorded-v0's train splits (16 + 13 worlds).

The rule, fixed before the runs: per objective, the pool with the best mean over seeds on the
**validation set**, recorded-v0's held-out split (11 worlds of 151 nodes; v2 for the v2 objective,
mean V for ``--objective v``). The two test sets — recorded-v1's held-out split and the real runs
of ``../shared/external-runs`` (imported with W = 4) — are printed for every pool as well, marked
"reported, not used": they are never part of the choice. Finished runs (``summary.json``) are
reused; a killed one resumes from its checkpoint.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.rl.choice import add_choice_arguments, choose, report_tests, seed_list, train_variant

REPO = Path(__file__).resolve().parents[2]
PREFIXES = "50,100,200"
POOLS = {
    "A": [],
    "B": ["--prefixes", PREFIXES],
    "C": ["--worlds", "train,dream-gym/recorded-v0:train", "--prefixes", PREFIXES],
}
KINDS = ("macro", "macro-v")  # each chosen by its own objective's score (v2, mean V)
# The v2 runs use the price range in force when the pool was chosen; the range was re-chosen on pool
# C afterwards (experiments/rl/price_range.py), which moved the default to 2 -> 0.5.
KIND_OPTIONS = {"macro": ["--price-high", "2", "--price-low", "0.1"], "macro-v": []}
STEPS = 120_000  # the macro budget when the pool was chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "out" / "rl-pools")
    add_choice_arguments(parser)
    args = parser.parse_args(argv)
    seeds = seed_list(args.seeds)

    models: dict[tuple[str, str], list[str]] = {}
    for kind in KINDS:
        for pool, options in POOLS.items():
            models[kind, pool] = train_variant(kind, seeds, args.out, f"{kind}-{pool}", STEPS,
                                               [*options, *KIND_OPTIONS[kind]])

    choose(models, "pool", 0.0, args.jobs)
    if not args.skip_tests:
        report_tests(models, "pool", args.runs, args.jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
