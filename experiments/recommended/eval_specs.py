"""Evaluate policy specs on world sets of the experiment (cached: experiments/recommended/scoring.py).

    .venv/bin/python -m experiments.recommended.eval_specs --sets real-val,v0-heldout --specs builtins,shipped
"""

from __future__ import annotations

import argparse
import time

from dream_gym.policies import POLICIES
from dream_gym.policies.trained import SHIPPED_MODELS
from experiments.recommended.common import SETS
from experiments.recommended.scoring import label, rows

ADAPTIVE = "experiments.recommended.adaptive:AdaptiveSpend"
OLD_SHIPPED = ("ppo-macro", "ppo-node", "ppo-macro-v", "ppo-node-v", "ppo-options", "ppo-options-v", "ppo-options-long")


def expand(text: str) -> list[str]:
    specs: list[str] = []
    for part in (p for p in text.split(",") if p):
        if part == "builtins":
            specs += list(POLICIES)
        elif part == "shipped":
            specs += [name for name in OLD_SHIPPED if name in SHIPPED_MODELS]
        elif part == "adaptive":
            specs.append(ADAPTIVE)
        else:
            specs.append(part)
    return specs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", required=True, help=f"comma list of {', '.join(SETS)}")
    parser.add_argument("--specs", required=True, help="comma list: builtins, shipped, adaptive or specs")
    parser.add_argument("-j", "--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    specs = expand(args.specs)
    for which in (s for s in args.sets.split(",") if s):
        for spec in specs:
            started = time.perf_counter()
            row = rows([spec], which, args.jobs)[spec]
            print(f"{which}: {label(spec)}: V(0.5) {row.v_half:.4f}  mean V {row.mean_v:.4f}  v2 {row.v2:.4f}  "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
