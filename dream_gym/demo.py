"""The demo: every built-in baseline on the held-out worlds of the shipped dataset, then a short
improvement step and the dreamed policy beside the baselines.

``make demo`` / ``dream-gym demo``: evaluates the built-in policies on the held-out split of the
default shipped dataset (``dream-gym/recorded-v1``) over the default beta grid, prints the
leaderboard, and writes the episode records (``results.jsonl``), the leaderboard
(``leaderboard.md``) and the plots to ``out/demo``. It ends with a short improvement step
(``dream_gym.dream``): the built-in developer writes a few revisions of the best built-in policy on
the *train* split (selection sees only train worlds), and the chosen policy is evaluated on the
held-out split and ranked beside the baselines (``out/demo/dream/``: revisions, ledger, ratchet
plot; ``leaderboard_dreamed.md``).
No API key, no network; under two minutes on 2 cores.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from dream_gym.eval_journal import journal_path
from dream_gym.evaluate import evaluate, leaderboard
from dream_gym.plots import plot_results
from dream_gym.policies import POLICIES

#: The demo's improvement step: a few revisions, scored over a small beta grid on the train split.
DREAM_REVISIONS = 4
DREAM_BETAS = (0.0, 0.5, 1.0)
DREAMED = "dreamed (chosen.py)"


def dream_step(out: Path, split: str, jobs: int | None, revisions: int = DREAM_REVISIONS) -> tuple[Path, str]:
    """The improvement step of the demo: from the best built-in on ``split`` (by mean V), the
    built-in developer writes ``revisions - 1`` revisions; returns chosen.py and a summary line."""
    from dream_gym.dream.builtin_developer import BuiltinDeveloper
    from dream_gym.dream.improve import DreamSettings, improvement_step
    from dream_gym.dream.scoring import ScoringSettings
    from dream_gym.world_specs import resolve_worlds

    worlds = resolve_worlds(split)
    board = leaderboard(evaluate(sorted(POLICIES), worlds, DREAM_BETAS, jobs=jobs, progress=False), rank_by="V")
    start = board.overall[0].policy
    shutil.rmtree(out, ignore_errors=True)  # the demo's own folder: a fresh step every time
    settings = DreamSettings(revisions, ScoringSettings(betas=DREAM_BETAS, jobs=jobs))
    result = improvement_step(out, 1, start, worlds, BuiltinDeveloper(seed=0), settings)
    line = (f"improvement step on the {split} split ({len(worlds)} worlds, betas {', '.join(f'{b:g}' for b in DREAM_BETAS)}): "
            f"incumbent {start} (mean V {result.incumbent_score:.4f}) -> version {result.deployed_m} of "
            f"{revisions - 1} revisions (mean V {result.selected_score:.4f}, {result.gain_history:+.4f}); "
            f"ratchet: {out / 'ratchet.png'}")
    return out / "chosen.py", line


def run_demo(out_dir: str | Path = "out/demo", split: str = "heldout", jobs: int | None = None,
             workers: int | None = None, dream_split: str = "train",
             dream_revisions: int = DREAM_REVISIONS) -> list[Path]:
    """Evaluate all built-in policies on ``split`` (``jobs`` processes; replayed at W = ``workers``,
    default each world's recorded W), then dream on ``dream_split`` (at each world's W) and rank
    the chosen policy beside them on ``split``; return the files written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results_path = out / "results.jsonl"
    # A demo killed during its evaluation continues it (the same grid, so the journal matches).
    results = evaluate(sorted(POLICIES), split, jobs=jobs, workers=workers, out=results_path,
                       resume=journal_path(results_path).exists())
    board = leaderboard(results)
    board.print(per_world=False)  # the per-world tables go to leaderboard.md
    (out / "leaderboard.md").write_text(board.to_markdown() + "\n", encoding="utf-8")
    plots = plot_results(results_path, out)
    seconds = time.perf_counter() - started
    print(f"\n{len(results)} episodes in {seconds:.1f}s; results, leaderboard and plots in {out}/\n")

    started = time.perf_counter()
    chosen, line = dream_step(out / "dream", dream_split, jobs, dream_revisions)
    dreamed = evaluate([str(chosen)], split, jobs=jobs, workers=workers, progress=False)
    for result in dreamed:
        result.policy = DREAMED
    both = leaderboard(results + dreamed)
    print(line)
    print(f"the chosen policy beside the baselines on the {split} split (not used for selection):")
    both.print(per_world=False)
    (out / "leaderboard_dreamed.md").write_text(both.to_markdown() + "\n", encoding="utf-8")
    print(f"improvement step and its held-out evaluation in {time.perf_counter() - started:.1f}s; "
          f"{out / 'leaderboard_dreamed.md'}")
    return [results_path, out / "leaderboard.md", *plots, out / "leaderboard_dreamed.md", out / "dream" / "ratchet.png"]
