"""The choice of PPO's entropy coefficient (docs/results/rl.md), made on the validation set.

    nice -n 5 .venv/bin/python -m experiments.rl.entropy --base out/rl-v1d --out out/rl-ent \\
        -- --worlds train,dream-gym/recorded-v0:train --prefixes 50,100,200
    nice -n 5 .venv/bin/python -m experiments.rl.entropy --kinds macro-v,node-v --seeds 0,1,2,3,4 \\
        --base out/rl-v1e --out out/rl-ent -- --worlds train,dream-gym/recorded-v0:train --prefixes 50,100,200

With the budget chosen (``rl_budget.py``: 120k macro, 240k node steps for the v2 models), the v2
models sat 0.06 below the best built-in's v2 on the validation set. PPO's entropy bonus
(``--ent-coef``, 0.01 in ``dream-gym train``) is the regulariser SB3 users tune first. The macro
model is trained with each of ``--values`` (0.003, 0.03) over the same seeds and options (after
``--``), beside its incumbent, the 0.01 runs ``BASE/macro-s<seed>``. The rule, fixed before the
runs: the value with the best mean validation v2 (recorded-v0's held-out split), unless it beats
0.01 by less than ``--margin`` (0.005). Only if the macro model moves is the node model trained with
the chosen value (beside ``BASE/node-s<seed>``), and the same rule decides for it. The test sets
are printed for every variant, marked "reported, not used". Finished runs are reused.
``--kinds macro-v,node-v`` asks the same of the V models (480k steps, evaluated every 120k, as
their budget choice trained them; judged by validation mean V).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.rl.choice import Models, add_choice_arguments, choose, report_tests, seed_list, train_variant
from experiments.rl.results import split_extra

REPO = Path(__file__).resolve().parents[2]
INCUMBENT = "0.01"  # dream-gym train's default
STEPS = {"macro": 120_000, "node": 240_000, "macro-v": 480_000, "node-v": 480_000}  # rl_budget.py's choices
OPTIONS = {"macro-v": ["--eval-every", "120000"], "node-v": ["--eval-every", "120000"]}


def train_variants(kind: str, values: list[str], seeds: list[int], base: Path, out: Path, extra: list[str]) -> Models:
    """The incumbent runs of ``base`` and one run per value and seed under ``out``."""
    options = [*OPTIONS.get(kind, []), *extra]
    models: Models = {(kind, INCUMBENT): train_variant(kind, seeds, base, kind, STEPS[kind], options)}
    for value in values:
        models[kind, value] = train_variant(kind, seeds, out, f"{kind}-e{value}", STEPS[kind],
                                            [*options, "--ent-coef", value])
    return models


def main(argv: list[str] | None = None) -> int:
    own, extra = split_extra(list(sys.argv[1:] if argv is None else argv))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--values", default="0.003,0.03", help="entropy coefficients tried beside 0.01")
    parser.add_argument("--base", type=Path, default=REPO / "out" / "rl", help="experiments.rl.results' run folders")
    parser.add_argument("--out", type=Path, default=REPO / "out" / "rl-ent")
    parser.add_argument("--margin", type=float, default=0.005, help="a smaller validation gain keeps 0.01")
    parser.add_argument("--kinds", default="macro,node", help="the kind tried first, then the one tried if it moves")
    add_choice_arguments(parser)
    args = parser.parse_args(own)
    seeds = seed_list(args.seeds)
    values = [v for v in args.values.split(",") if v.strip()]
    first, then = args.kinds.split(",")

    models = train_variants(first, values, seeds, args.base, args.out, extra)
    chosen = choose(models, "ent_coef", args.margin, args.jobs)[first]
    if chosen != INCUMBENT:
        node = train_variants(then, [chosen], seeds, args.base, args.out, extra)
        choose(node, "ent_coef", args.margin, args.jobs)
        models.update(node)
    if not args.skip_tests:
        report_tests(models, "ent_coef", args.runs, args.jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
