"""The demo: every built-in baseline on the held-out worlds of the shipped dataset, then one
dreaming step that improves a baseline, and the dreamed policy beside the baselines.

``make demo`` / ``dream-gym demo`` (no API key, no network; about a minute on 2 cores):

1. evaluates the built-in exploration policies on the held-out split of the default shipped dataset
   (``dream-gym/recorded-v1``) over the default beta grid, prints the leaderboard, and writes the
   episode records (``results.jsonl``), the leaderboard (``leaderboard.md``) and the plots to
   ``out/demo``;
2. runs one improvement step (:mod:`dream_gym.dream`): the built-in developer (Optuna over the
   parametric policy family, no LLM) writes a revision of the ``greedy`` baseline, the incumbent
   and the revision are scored on a small history H of train worlds, and the argmax on H is kept;
   one line per version as it is scored (``out/demo/dream/``: versions, ledger, ratchet plot);
3. evaluates the kept version on the held-out split, which took no part in the selection, ranks it
   beside the baselines (``leaderboard_dreamed.md``) and says in one line what the step gained on H
   and on the held-out worlds (or plainly that no revision improved on the incumbent);
4. ends with three commands to run next.

The step's incumbent, history and budget are chosen so that it shows, inside a minute, what
dreaming does: ``greedy`` (always expand the best node) is a baseline the policy family
generalises, H holds one train world of each task (4 of the 16), and one revision is written (M =
2: each version costs two isolated evaluations on H, the determinism gate). Nothing of the
held-out split is used to select, so the held-out gain is an honest one. (With ``fixed`` as the
incumbent the revision gains in V but loses in v2 on the held-out worlds; with a third version,
the developer's random start, H's four worlds select a version that generalises worse.)
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.evaluation.evaluate import evaluate, leaderboard
from dream_gym.evaluation.journal import journal_path
from dream_gym.evaluation.leaderboard import Leaderboard
from dream_gym.evaluation.plots import plot_results
from dream_gym.policies import POLICIES, RECORDERS
from dream_gym.replay.settings import ReplaySettings

#: The improvement step: the incumbent, the history H (the first train world of each task of the
#: shipped dataset), the number of versions M (the incumbent included) and the betas of H's score.
DREAM_INCUMBENT = "greedy"
DREAM_HISTORY = ("ac-fixed-w4-s0", "sd-fixed-w4-s0", "cp26-fixed-w4-s0", "lasso-fixed-w4-s0")
DREAM_REVISIONS = 2
DREAM_BETAS = (0.0, 0.5, 1.0)
DREAMED = "dreamed"  # the kept version (out/dream/chosen.py); short, so that the table shows it whole
#: Statuses of a version whose scores stand (anything else: the step refused it).
SCORED = ("incumbent", "ok")

Say = Callable[[str], None]


def say_now(line: str) -> None:
    """Print a line at once, also into a pipe or a log (progress must not wait in a buffer)."""
    print(line, flush=True)


@dataclass
class Demo:
    """What the demo wrote, what the improvement step kept, and every step that errored."""

    files: list[Path]
    kept: str  # the one-line summary of the improvement step
    failures: list[str] = field(default_factory=list)


def dream_step(out: Path, history: Sequence[str] = DREAM_HISTORY, incumbent: str = DREAM_INCUMBENT,
               jobs: int | None = None, revisions: int = DREAM_REVISIONS, say: Say = say_now) -> Any:
    """One improvement step with the built-in developer from ``incumbent`` on the ``history``
    worlds, a line per scored version through ``say``; returns its PhaseResult."""
    from dream_gym.dream.builtin_developer import BuiltinDeveloper
    from dream_gym.dream.improve import DreamSettings, improvement_step
    from dream_gym.dream.scoring import ScoringSettings
    from dream_gym.evaluation.world_specs import resolve_worlds

    worlds = resolve_worlds(",".join(history))
    shutil.rmtree(out, ignore_errors=True)  # the demo's own folder: a fresh step every time
    settings = DreamSettings(revisions, ScoringSettings(betas=DREAM_BETAS, jobs=jobs))
    say(f"dreaming: the built-in developer (no LLM) revises {incumbent} ({revisions - 1} revision"
        f"{'s' if revisions > 2 else ''});\n  each version is scored on H = {len(worlds)} train worlds "
        f"x betas {_betas(DREAM_BETAS)}, twice")

    def events(kind: str, data: dict[str, Any]) -> None:
        if kind == "version":
            say(version_line(data["record"], data["revisions"], data["best"]))

    return improvement_step(out, 1, incumbent, worlds, BuiltinDeveloper(seed=0), settings, events=events)


def version_line(record: Any, revisions: int, best: Any) -> str:
    """``  revision 1 of 2 ok  mean V on H 0.2754  best: version 1  6.3s``."""
    from dream_gym.dream.versions import version_name

    score = "-" if record.score is None else f"{record.score:.4f}"
    return (f"  {version_name(record, revisions)}  mean V on H {score}  best: version {best.m}  "
            f"{record.seconds:.1f}s")


def step_failures(result: Any) -> list[str]:
    """A line for each version the step refused, and for an incumbent whose episodes failed."""
    lines = [f"dream step: version {v.m} was {v.status}: {v.error}" for v in result.versions if v.status not in SCORED]
    lines += [f"dream step: the incumbent: {v.warning}" for v in result.versions if v.warning]
    return lines


def kept_line(result: Any, gain_held_out: float | None, held_out: str) -> str:
    """The step in one line: what it kept and what that gained on H and on the held-out worlds."""
    if result.gated:
        return (f"the held-out check refused version {result.selected_m} ({result.gain_history:+.4f} on H): "
                "kept version 0, the incumbent")
    if result.deployed_m == 0:
        scores = [v.score for v in result.versions[1:] if v.status in SCORED and v.score is not None]
        best = f"; its best revision {max(scores) - result.incumbent_score:+.4f} on H" if scores else ""
        return f"the step did not improve: kept version 0, the incumbent{best}"
    return f"kept version {result.deployed_m}: {result.gain_history:+.4f} on H, {gain_held_out:+.4f} on {held_out}"


def next_steps(out: Path, split: str) -> list[str]:
    """Three commands to run after the demo."""
    return [
        "next: dream-gym dream --history train --policy puct -M 8 --out out/dream",
        f"      dream-gym eval -p {out / 'dream' / 'chosen.py'} -p recommended -w {split}",
        "      dream-gym train --arch options --timesteps 20000 --out out/ppo",
    ]


def run_demo(out_dir: str | Path = "out/demo", split: str = "heldout", jobs: int | None = None,
             workers: int | None = None, dream_history: Sequence[str] = DREAM_HISTORY,
             dream_revisions: int = DREAM_REVISIONS, say: Say = say_now) -> Demo:
    """Evaluate the built-in exploration policies (not the recorders,
    :data:`~dream_gym.policies.RECORDERS`) on ``split`` (``jobs`` processes; replayed at W =
    ``workers``, default each world's recorded W), dream on ``dream_history`` (at each world's W),
    and rank the kept version beside them on ``split``."""
    from dream_gym.dream.builtin_developer import require_optuna

    require_optuna()  # the dreaming step's: refused before the evaluation, not after it
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results_path = out / "results.jsonl"
    # A demo killed during its evaluation continues it (the same grid, so the journal matches).
    policies = sorted(set(POLICIES) - set(RECORDERS))  # the exploration policies, not the recorders
    progress = sys.stderr.isatty()  # a bar redrawn into a log or a pipe is noise
    results = evaluate(policies, split, settings=ReplaySettings(workers), jobs=jobs, out=results_path,
                       resume=journal_path(results_path).exists(), overwrite=True, progress=progress)
    board = leaderboard(results)
    board.print(per_world=False)  # the per-world tables go to leaderboard.md
    (out / "leaderboard.md").write_text(board.to_markdown() + "\n", encoding="utf-8")
    plots = plot_results(results_path, out)
    failures = [f.line() for f in board.failures()]
    say(f"\n{len(results)} episodes in {time.perf_counter() - started:.1f}s; results, leaderboard and plots "
        f"in {out}/\n")

    started = time.perf_counter()
    result = dream_step(out / "dream", dream_history, jobs=jobs, revisions=dream_revisions, say=say)
    failures += step_failures(result)
    files = [results_path, out / "leaderboard.md", *plots, out / "dream" / "ratchet.png"]
    held_out = _held_out_label(split, dream_history)
    gain = None
    if result.deployed_m != 0:
        say(f"the kept version on the {split} split (not used for selection):")
        dreamed = evaluate([str(out / "dream" / "chosen.py")], split, settings=ReplaySettings(workers), jobs=jobs,
                           progress=progress)
        for episode in dreamed:
            episode.policy = DREAMED
        both = leaderboard(results + dreamed)
        both.print(per_world=False)
        (out / "leaderboard_dreamed.md").write_text(both.to_markdown() + "\n", encoding="utf-8")
        files.append(out / "leaderboard_dreamed.md")
        failures += [f.line() for f in both.failures() if f.policy == DREAMED]
        gain = _mean_v(both, DREAMED) - _mean_v(board, DREAM_INCUMBENT)
    kept = kept_line(result, gain, held_out)
    say(f"\n{kept}")
    say(f"  (mean V; H: {len(dream_history)} train worlds x betas {_betas(DREAM_BETAS)}, used to select;\n"
        f"  {held_out}: the {split} split x the leaderboard's betas, not used; "
        f"{time.perf_counter() - started:.1f}s)\n  ratchet plot: {out / 'dream' / 'ratchet.png'}\n")
    for line in next_steps(out, split):
        say(line)
    return Demo(files, kept, failures)


def _mean_v(board: Leaderboard, policy: str) -> float:
    return next(row.mean_v for row in board.overall if row.policy == policy)


def _held_out_label(split: str, history: Sequence[str]) -> str:
    """``held-out`` when the split shares no world with H; else says that it does."""
    from dream_gym.evaluation.world_specs import resolve_worlds

    shared = {w.id for w in resolve_worlds(split)} & {w.id for w in resolve_worlds(",".join(history))}
    return "held-out" if not shared else f"{split} ({len(shared)} worlds of H, not held out)"


def _betas(betas: Sequence[float]) -> str:
    return ", ".join(f"{b:g}" for b in betas)
