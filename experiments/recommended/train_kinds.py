"""Train kinds x seeds of PROTOCOL.md §3 (a finished run is reused), ``--jobs`` at a time.

    .venv/bin/python -m experiments.recommended.train_kinds --kinds macro-d,options-d --seeds 0,1,2 --jobs 1

Every ``dream-gym train`` command is appended to ``logs/train-commands.md`` before it runs; each run
folder (``out/rec/runs/<kind>-s<seed>``) holds its train.log, config.json and summary.json.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor

from experiments.recommended.common import KINDS, LOGS, train


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", required=True)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    for kind in kinds:
        if kind not in KINDS:
            raise SystemExit(f"unknown kind {kind}: one of {', '.join(KINDS)}")
    seeds = [int(s) for s in args.seeds.split(",") if s]
    jobs = [(k, s) for s in seeds for k in kinds]
    LOGS.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        for (kind, seed), summary in zip(jobs, pool.map(lambda j: train(*j, LOGS / "train-commands.md"), jobs), strict=True):
            final = summary["final"]
            print(f"{kind} seed {seed}: {summary['timesteps']} steps in {summary['seconds']:.0f} s; train-pool v2 "
                  f"{final['train_v2']:.4f}, mean V {final['train_mean_v']:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
