"""Import every real run in ../shared/external-runs and a generated resumed run; print the table.

    .venv/bin/python -m benchmarks.import_runs [--repeats 3]

For each run: files read, programs, nodes, migrant/island copies collapsed, phases stitched,
orphans attached, invalid nodes, best score, and the import time (min–max over the repeats)
with its ratio to the reference measured in the same run: parsing every file the import reads
(program JSON, traces, the SQLite table) and nothing else. The generated run is
tests/openevolve_runs.py's four-phase OpenEvolve run (iterations 20/60/60/60, each phase started
from checkpoint 20, 40, 50 of the one before).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
import warnings
from pathlib import Path

from dream_gym.datasets.importers import RunImportError, import_run
from tests.openevolve_runs import write_resumed_run

ROOT = Path(__file__).resolve().parents[1]

EXTERNAL = ROOT.parent / "shared" / "external-runs"
METRICS = {"yunmin-stencil": "gflops"}  # the runs whose score is not combined_score


def parse_only(src: Path) -> None:
    """The reference: read and parse what the importer reads, build nothing."""
    for path in src.rglob("*"):
        if path.suffix == ".json" and path.parent.name in ("programs", "results"):
            json.loads(path.read_text())
        elif path.name == "evolution_trace.jsonl":
            [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        elif path.suffix == ".sqlite":
            conn = sqlite3.connect(path)
            rows = conn.execute("SELECT * FROM programs").fetchall()
            [json.loads(r[20] or "{}") for r in rows]
            conn.close()


def timed(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp())
    runs = sorted(p for system in ("openevolve", "shinkaevolve") for p in (EXTERNAL / system).glob("*")
                  if p.is_dir())
    generated = scratch / "generated-4-phase"
    write_resumed_run(generated, iterations=(20, 60, 60, 60), resume_at=(20, 40, 50))
    runs.append(generated)
    print("| run | files read | programs | nodes | copies | phases stitched | orphans attached | invalid "
          "| best | import | / parse only |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for src in runs:
        reports = []

        def once(src: Path = src, reports: list = reports) -> None:
            out = Path(tempfile.mkdtemp(dir=scratch)) / "w"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                reports.append(import_run("auto", src, out, metric=METRICS.get(src.name, "combined_score")))

        try:
            times = timed(once, args.repeats)
        except RunImportError as exc:  # a run the importer refuses (said in its row, not a crash)
            print(f"| {src.name} | refused: {str(exc).split(': ', 1)[-1][:120]} |" + " |" * 9)
            continue
        reference = min(timed(lambda src=src: parse_only(src), args.repeats))
        r = reports[-1]
        print(f"| {src.name} | {r.files_read} | {r.programs} | {r.nodes} | {r.migrants_collapsed} | "
              f"{r.phases_stitched} | {r.attached} | {r.invalid} | {r.best:.6g} | "
              f"{min(times):.2f}–{max(times):.2f} s | {min(times) / reference:.1f}× |")


if __name__ == "__main__":
    main()
