"""The dreamed candidate of PROTOCOL.md §3 (item 6): one ``dream-gym dream`` per fold.

History: the fold's real training runs (links in ``out/rcv/history/<fold>``, replayed at their
recorded W, 4); incumbent: the built-in with the best selection score on the fold's training
families (family-balanced mean of the runs' V½ averaged over the four settings, from the built-ins'
CV figures). The command of each fold is appended to logs/dream-commands.md.

    nice -n 15 .venv/bin/python -m experiments.recommended_cv.dream_folds [--folds a,b]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from experiments.recommended_cv.candidates import dream_dir
from experiments.recommended_cv.common import (
    BUILTINS,
    LOGS,
    OUT,
    REAL,
    REPO,
    claim,
    families,
    shown,
    train_runs,
)
from experiments.recommended_cv.fit import aggregate, balanced, training_families
from experiments.recommended_cv.run_cv import FIGURES


def incumbent(fold: str) -> str:
    fams = training_families(fold)
    runs = [r for f in fams for r in families()[f]]
    scores = {}
    for name in BUILTINS:
        figures = json.loads((FIGURES / f"{name}.json").read_text(encoding="utf-8"))
        per_setting = {s: {r: v["v_half"] for r, v in runs_.items()} for s, runs_ in figures.items()}
        scores[name] = balanced({r: aggregate(per_setting, r) for r in runs}, fams)
    return max(BUILTINS, key=lambda n: scores[n])


def history(fold: str) -> str:
    folder = OUT / "history" / fold
    for run in train_runs(fold):
        link = folder / run
        if not link.exists():
            folder.mkdir(parents=True, exist_ok=True)
            link.symlink_to(REAL / run, target_is_directory=True)
    return str(folder.relative_to(REPO))


def command(fold: str) -> list[str]:
    return ["nice", "-n", "15", sys.executable, "-m", "dream_gym", "dream", "--developer", "builtin", "-M", "6",
            "--betas", "0.2,0.5,0.8", "--validate", "none", "--seed", "0", "-j", "1", "--quiet",
            "--history", history(fold), "--policy", incumbent(fold),
            "--out", str(dream_dir(fold).relative_to(REPO))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", default=",".join(families()))
    args = parser.parse_args(argv)
    for fold in args.folds.split(","):
        folder = dream_dir(fold)
        done = folder / "chosen.py"
        if done.is_file() or not claim(folder.with_name(folder.name + ".claim")):
            continue
        cmd = command(fold)
        with open(LOGS / "dream-commands.md", "a", encoding="utf-8") as f:
            f.write(f"- `{shown(cmd)}`\n")
        with open(folder.with_name(folder.name + ".log"), "a", encoding="utf-8") as out:
            subprocess.run(cmd, check=True, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        print(f"dreamed {fold}: {done}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
