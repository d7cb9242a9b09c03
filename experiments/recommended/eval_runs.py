"""Evaluate trained runs on world sets as soon as they finish (fills the cache of scoring.py).

    .venv/bin/python -m experiments.recommended.eval_runs --kinds macro-d,... --seeds 0,1,2 --sets real-val,v0-heldout
"""

from __future__ import annotations

import argparse
import time

from experiments.recommended.common import KINDS, model_zip, run_dir
from experiments.recommended.scoring import rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--sets", default="real-val,v0-heldout")
    parser.add_argument("-j", "--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    todo = [(k, int(s)) for s in args.seeds.split(",") for k in args.kinds.split(",")]
    while todo:
        ready = [(k, s) for k, s in todo if (run_dir(k, s) / "summary.json").is_file()]
        if not ready:
            time.sleep(20)
            continue
        for kind, seed in ready:
            for which in args.sets.split(","):
                row = rows([model_zip(kind, seed)], which, args.jobs)[model_zip(kind, seed)]
                print(f"{which}: {kind} s{seed}: V(0.5) {row.v_half:.4f}  mean V {row.mean_v:.4f}  v2 {row.v2:.4f}",
                      flush=True)
            todo.remove((kind, seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
