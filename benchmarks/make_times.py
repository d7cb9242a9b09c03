"""How long the README's commands take here: ``make demo``, ``make test-fast`` and (``--full``) ``make test``.

    .venv/bin/python -m benchmarks.make_times [--full] [--out benchmarks/make-times.md]

Runs each target once, in this checkout (its ``.venv`` already built, so set-up is not timed;
each target's output in ``out/make-times/<target>.log``),
and writes the wall time of each, the machine's cores and its load average before and after, the
date and the commit to ``--out``, which the development page includes. The README quotes no time:
a figure lives only where this script wrote it, beside the load it was measured at.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = ("demo", "test-fast")


LOGS = REPO / "out" / "make-times"


def timed(target: str) -> tuple[float, int]:
    """Seconds ``make <target>`` took and its exit code; its output goes to out/make-times/<target>.log."""
    LOGS.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with (LOGS / f"{target}.log").open("w", encoding="utf-8") as log:
        done = subprocess.run(["make", target], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    return time.perf_counter() - started, done.returncode


def commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                          text=True).stdout.strip() or "unknown"


def report(rows: list[tuple[str, float, int, tuple[float, float]]]) -> str:
    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "<!-- written by: .venv/bin/python -m benchmarks.make_times --full -->",
        f"Measured {today} at commit `{commit()}` on {os.cpu_count()} cores, the `.venv` already built:",
        "",
        "| command | wall time | exit | load average before → after |",
        "|---|---:|---:|---|",
    ]
    for target, seconds, code, (before, after) in rows:
        shown = f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.0f} s"
        lines.append(f"| `make {target}` | {shown} | {code} | {before:.1f} → {after:.1f} |")
    lines += ["", "A load above the core count means other work shared the machine: the times are upper bounds then."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="also time make test (the whole suite)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "make-times.md")
    args = parser.parse_args()
    rows = []
    for target in (*TARGETS, *(("test",) if args.full else ())):
        before = os.getloadavg()[0]
        seconds, code = timed(target)
        rows.append((target, seconds, code, (before, os.getloadavg()[0])))
        print(f"make {target}: {seconds:.1f} s, exit {code}", flush=True)
        args.out.write_text(report(rows), encoding="utf-8")  # after each target: the docs build of make test includes it
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
