"""World statistics of the real public runs and of the shipped worlds, and the built-ins' % of limit.

    python -m experiments.world_stats [--runs ../shared/external-runs] [--workers 4] [-j 2] [--section FILE]

1. Imports every run below ``--runs`` into a temporary folder with ``dream-gym worlds import``
   (``--from openevolve`` for the OpenEvolve folders, ``--from shinkaevolve`` with the run's
   ``evolution_db.sqlite``; W = ``--workers``; when the default metric is missing, again with
   the first of combined_score, overall_score, score, fitness that the importer lists). Every
   command is printed; a run that does not import is skipped with the importer's reason.
2. Prints the statistics table (``dream-gym worlds stats --markdown``) of the real runs and of
   the shipped worlds (one row per world), with the medians over each set.
3. Runs the nine built-in policies over the default beta grid on the shipped held-out split and
   on the imported real runs (``dream-gym eval``) and prints each leaderboard over all worlds,
   with V as a share of the oracle limit.

With ``--section FILE`` the same markdown is also written to FILE (``recorded_worlds/recorded-v1/STATS.md``,
which ``recorded_worlds/recorded-v1/build.py`` appends to the dataset card).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from dream_gym.datasets.stats import STOP_ROUNDS, WorldStats, stats_markdown, world_stats
from dream_gym.evaluation.evaluate import evaluate, leaderboard, resolve_worlds
from dream_gym.policies import POLICIES
from dream_gym.world.registry import DEFAULT_DATASET
from dream_gym.world.tree import World, load_world

DEFAULT_RUNS = Path(__file__).resolve().parents[2] / "shared" / "external-runs"
PREFERRED_METRICS = ("combined_score", "overall_score", "score", "fitness")


def import_command(system: str, src: Path, out: Path, workers: int, metric: str | None) -> list[str]:
    command = [sys.executable, "-m", "dream_gym", "worlds", "import", "--from", system, str(src),
               "--out", str(out), "--workers", str(workers), "--id", out.name]
    return command + (["--metric", metric] if metric else [])


def shown(command: list[str]) -> str:
    return " ".join(["dream-gym", *command[3:]])


def import_runs(runs: Path, into: Path, workers: int, say) -> list[World]:
    worlds = []
    for system in ("openevolve", "shinkaevolve"):
        for run in sorted(p for p in (runs / system).glob("*") if p.is_dir()):
            src = run / "evolution_db.sqlite" if system == "shinkaevolve" else run
            metric = None
            for _ in range(2):
                command = import_command(system, src, into / run.name, workers, metric)
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode == 0:
                    break
                found = re.search(r"metrics found: ([^(]*)", done.stderr)
                names = [m.strip() for m in found.group(1).split(",")] if found else []
                metric = next((m for m in PREFERRED_METRICS if m in names), None)
                if metric is None:
                    break
            if done.returncode != 0:
                reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
                say(f"- skipped {system}/{run.name}: {reason}")
                continue
            world = load_world(into / run.name)
            say(f"- `{shown(command).replace(str(runs), '$RUNS').replace(str(into), '$OUT')}`: {world.size} nodes")
            worlds.append(world)
    return worlds


def medians(stats: list[WorldStats]) -> str:
    def med(values: list[float]) -> float:
        return statistics.median(values)

    stop_gaps = [min(s.limit_minus_stop_r.values()) for s in stats]
    parts = [
        f"q after first W {med([s.q_first_w for s in stats]):.3f}",
        f"q after first 10 {med([s.q_first_10 for s in stats]):.3f}",
        f"new bests {med([s.new_bests for s in stats]):g}",
        f"depth of best {med([s.best_depth for s in stats]):g}",
        f"limit {med([s.limit for s in stats]):.3f}",
        *(f"V* - stop after round {r} {med([s.limit_minus_stop_r[r] for s in stats]):.3f}" for r in STOP_ROUNDS),
        f"worlds where stopping after any of rounds 1-3 loses >= 0.25: "
        f"{sum(g >= 0.25 for g in stop_gaps)}/{len(stats)}",
        f"exact limits {sum(s.limit_exact for s in stats)}/{len(stats)}",
    ]
    return "Medians over " + str(len(stats)) + " worlds: " + "; ".join(parts) + "."


def board(worlds: list[World], jobs: int) -> str:
    results = evaluate(sorted(POLICIES), worlds, None, jobs=jobs, progress=False)
    return leaderboard(results).to_markdown(per_world=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=DEFAULT_RUNS, help="folder of the real runs")
    parser.add_argument("--workers", "-W", type=int, default=4, help="W given to the imported worlds (default 4)")
    parser.add_argument("--jobs", "-j", type=int, default=2, help="processes for the evaluation (default 2)")
    parser.add_argument("--section", type=Path, default=None, help="also write the markdown to this file")
    args = parser.parse_args()
    out: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        out.append(text)

    with tempfile.TemporaryDirectory() as tmp:
        say("### Real runs and shipped worlds: discovery statistics\n")
        say(f"Measured with `python -m experiments.world_stats --workers {args.workers}` (the real runs in "
            "`../shared/external-runs/` = `$RUNS`, imported into a temporary folder `$OUT` with W = "
            f"{args.workers}; then `dream-gym worlds stats --markdown --rows` on them and on the shipped "
            "worlds, at the default beta1, beta2).\n")
        real = import_runs(args.runs, Path(tmp), args.workers, say) if args.runs.is_dir() else []
        if not real:
            say(f"(no real run imported from {args.runs})")
        shipped = resolve_worlds(["train", "heldout"])
        for title, worlds in (("Real runs", real), (f"Shipped worlds (`{DEFAULT_DATASET}`, the default dataset)", shipped)):
            if not worlds:
                continue
            stats = [world_stats(w) for w in worlds]
            say(f"\n#### {title}\n")
            say(stats_markdown(stats, one_row_per_world=True))
            say(medians(stats))
        say("\n#### The nine built-ins on the shipped held-out split (`dream-gym eval`, default beta grid)\n")
        say(board(resolve_worlds("heldout"), args.jobs).replace("### Leaderboard", "Leaderboard"))
        if real:
            say("\n#### The nine built-ins on the imported real runs\n")
            say(board(real, args.jobs).replace("### Leaderboard", "Leaderboard"))
    if args.section is not None:
        args.section.write_text("\n".join(out) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
