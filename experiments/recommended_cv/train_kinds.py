"""Train the RL kinds of PROTOCOL.md §3 (item 3), one model per (kind, fold), in the protocol's order.

    nice -n 15 .venv/bin/python -m experiments.recommended_cv.train_kinds [--kinds cv-node-v,...] [--folds ...] [--resume]

Several runners may work at once: each (kind, fold) is claimed by one (``claimed`` in its run folder).
Each command is appended to logs/train-commands.md as it starts.
"""

from __future__ import annotations

import argparse

from experiments.recommended_cv.common import KINDS, LOGS, families, train


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--folds", default=",".join(families()))
    parser.add_argument("--resume", action="store_true",
                        help="also continue runs another (dead) runner claimed and left unfinished")
    args = parser.parse_args(argv)
    LOGS.mkdir(exist_ok=True)
    for kind in args.kinds.split(","):
        for fold in args.folds.split(","):
            path = train(kind, fold, LOGS / "train-commands.md", args.resume)
            print(f"{kind} {fold}: {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
