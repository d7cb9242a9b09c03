"""Evaluations of policy specs on real runs at the protocol's settings, cached per (setting, spec, runs).

Each is one ``dream_gym.evaluation.evaluate.evaluate`` over the β grid 0, 0.1, ..., 1 at the setting's W, β1
and β2 (the code `dream-gym eval` runs; seed 0), written to ``out/rcv/eval/<setting>/<tag>.jsonl``; a
file already there is read back instead of evaluated again (every policy here is deterministic
given the seed). ``figures`` turns the episodes into per-run V½ and v2.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dream_gym.evaluation.evaluate import evaluate
from dream_gym.evaluation.results import load_results
from dream_gym.replay.score import DEFAULT_BETA_GRID, v2_objective
from experiments.recommended_cv.common import OUT, REAL, REPO, SETTING

GRID = DEFAULT_BETA_GRID


def tag(spec: str, runs: Sequence[str]) -> str:
    short = re.sub(r"[^A-Za-z0-9_.-]+", "_", spec.replace(str(REPO) + "/", ""))[-80:]
    key = spec + "|" + ",".join(sorted(runs))
    return f"{short}-{hashlib.sha1(key.encode()).hexdigest()[:10]}"


def results_for(spec: str, setting: str, runs: Sequence[str], jobs: int = 1) -> list[Any]:
    """The episodes of ``spec`` on ``runs`` at ``setting`` (cached)."""
    path = OUT / "eval" / setting / f"{tag(spec, runs)}.jsonl"
    if path.is_file():
        cached = load_results(path)
        if not any(r.error for r in cached):
            return cached
        path.unlink()  # an episode failed (a watchdog under load, say): evaluate again
    path.parent.mkdir(parents=True, exist_ok=True)
    s = SETTING[setting]
    resume = path.with_name(path.name + ".partial").is_file()  # a killed evaluation continues
    worlds = ",".join(str(REAL / run) for run in runs)
    return evaluate([spec], worlds, list(GRID), jobs=jobs, workers=s.workers, beta1=s.beta1, beta2=s.beta2,
                    progress=False, out=path, task_timeout=3600, resume=resume, backend="serial" if jobs == 1
                    else "process")


def figures(results: Sequence[Any]) -> dict[str, dict[str, float]]:
    """Per run (world id): ``v_half`` (V at β = 0.5) and ``v2`` over the grid; errors refused."""
    failed = [r for r in results if r.error]
    if failed:
        r = failed[0]
        raise RuntimeError(f"{len(failed)} episodes ended with an error, e.g. {r.policy} on {r.world} "
                           f"(beta {r.beta:g}): {r.error}")
    by_world: dict[str, list[Any]] = {}
    for r in results:
        by_world.setdefault(r.world, []).append(r)
    out = {}
    for world, episodes in by_world.items():
        half = [r for r in episodes if abs(r.beta - 0.5) < 1e-9]
        if len(half) != 1 or len(episodes) != len(GRID):
            raise RuntimeError(f"{world}: {len(episodes)} episodes, {len(half)} at beta 0.5")
        v2 = v2_objective([(r.work, r.attainment, r.rounds, r.attempts) for r in episodes]).value
        out[world] = {"v_half": half[0].replay_score, "v2": v2}
    return out


def run_figures(spec: str, setting: str, runs: Sequence[str], jobs: int = 1) -> dict[str, dict[str, float]]:
    got = figures(results_for(spec, setting, runs, jobs))
    missing = set(runs) - set(got)
    if missing:
        raise RuntimeError(f"{spec} at {setting}: no episodes of {sorted(missing)}")
    return {run: got[run] for run in runs}


def label(spec: str) -> str:
    """A short name for a spec in tables."""
    path = Path(spec)
    if spec.endswith("model.zip"):
        return path.parent.name
    return path.name if spec.endswith((".zip", ".py")) else spec
