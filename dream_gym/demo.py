"""The demo: every built-in baseline on the held-out worlds of the shipped dataset.

``make demo`` / ``dream-gym demo``: evaluates the built-in policies on the held-out split of the
default shipped dataset (``dream-gym/recorded-v1``) over the default beta grid, prints the
leaderboard, and writes the episode records (``results.jsonl``), the leaderboard (``leaderboard.md``) and the plots to ``out/demo``.
No API key, no network; under two minutes on 2 cores.
"""

from __future__ import annotations

import time
from pathlib import Path

from dream_gym.evaluate import evaluate, leaderboard
from dream_gym.plots import plot_results
from dream_gym.policies import POLICIES


def run_demo(out_dir: str | Path = "out/demo", split: str = "heldout", jobs: int | None = None,
             workers: int | None = None) -> list[Path]:
    """Evaluate all built-in policies on ``split`` (``jobs`` processes; replayed at W = ``workers``,
    default each world's recorded W); return the files written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results_path = out / "results.jsonl"
    results = evaluate(sorted(POLICIES), split, jobs=jobs, workers=workers, out=results_path)
    board = leaderboard(results)
    board.print(per_world=False)  # the per-world tables go to leaderboard.md
    (out / "leaderboard.md").write_text(board.to_markdown() + "\n", encoding="utf-8")
    plots = plot_results(results_path, out)
    seconds = time.perf_counter() - started
    print(f"\n{len(results)} episodes in {seconds:.1f}s; results, leaderboard and plots in {out}/")
    return [results_path, out / "leaderboard.md", *plots]
