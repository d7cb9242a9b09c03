"""Run the RSI-vs-native study: per task and seed, one native OpenEvolve run and one RSI run.

One run at a time, task by task, seed by seed (native then RSI), so a stop leaves whole seed
pairs. Resumable: a finished run is skipped, an interrupted one continues (``--resume``).
Every command and its wall time go to ``OUT/commands.log``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

FMIN = "/work/shared/openevolve-examples/function_minimization"
TASKS = {
    "circle-packing-26": "circle-packing-26",
    "sum-difference": "sum-difference",
    "function_minimization": f"{FMIN}/initial_program.py,{FMIN}/evaluator.py",
}
BUDGET, ITERATIONS, WORKERS, REVISIONS = 60, 3, 2, 4
DREAM_GYM = str(Path(sys.executable).with_name("dream-gym"))


def seeds_of(text: str) -> list[int]:
    if "-" in text:
        low, high = text.split("-")
        return list(range(int(low), int(high) + 1))
    return [int(s) for s in text.split(",")]


def finished_world(folder: Path) -> bool:
    meta = folder / "world.json"
    return meta.is_file() and bool(json.loads(meta.read_text()).get("sha256"))


def native_command(task: str, seed: int, folder: Path) -> list[str] | None:
    if finished_world(folder):
        return None
    if folder.exists() and not (folder / "nodes.jsonl").exists():
        shutil.rmtree(folder)
    resume = ["--resume"] if (folder / "nodes.jsonl").exists() else []
    return [DREAM_GYM, "deploy", "--system", "openevolve", "--task", TASKS[task], "--policy", "native",
            "-W", str(WORKERS), "--budget", str(BUDGET), "--seed", str(seed), "--out", str(folder), *resume]


def rsi_command(task: str, seed: int, folder: Path, start: str = "openevolve") -> list[str] | None:
    summary = folder / "summary.json"
    if summary.is_file() and len(json.loads(summary.read_text())["iterations"]) == ITERATIONS:
        return None
    resume = ["--resume"] if (folder / "fingerprint.json").exists() else []
    return [DREAM_GYM, "rsi", "--system", "openevolve", "--task", TASKS[task], "--policy", start,
            "-T", str(ITERATIONS), "--budget", str(BUDGET // ITERATIONS), "-W", str(WORKERS),
            "-M", str(REVISIONS), "--betas", "0.5", "-j", "1", "--seed", str(seed), "--out", str(folder), *resume]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", default="0-9")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--start", default="openevolve", help="RSI's start policy")
    parser.add_argument("--rsi-name", default="rsi", help="the RSI runs' folder name under each task")
    parser.add_argument("--stop-at", default=None, help="UTC HH:MM after which no new run starts")
    args = parser.parse_args()
    log = args.out / "commands.log"
    args.out.mkdir(parents=True, exist_ok=True)
    for task in args.tasks.split(","):
        for seed in seeds_of(args.seeds):
            for side in ("native", args.rsi_name):
                now = dt.datetime.now(dt.timezone.utc)
                if args.stop_at and now.strftime("%H:%M") >= args.stop_at:
                    print(f"stop: {now:%H:%M} >= {args.stop_at}", flush=True)
                    return 0
                folder = args.out / task / side / f"seed-{seed}"
                command = (native_command(task, seed, folder) if side == "native"
                           else rsi_command(task, seed, folder, args.start))
                if command is None:
                    continue
                start = time.monotonic()
                done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                line = (f"{now:%H:%M:%S} {task} {side} seed {seed}: exit {done.returncode}, "
                        f"{time.monotonic() - start:.0f}s: {' '.join(command[1:])}")
                print(line, flush=True)
                with log.open("a") as handle:
                    handle.write(line + "\n")
                    if done.returncode:
                        handle.write(done.stderr[-2000:] + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
