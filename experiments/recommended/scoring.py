"""Evaluations of policy specs on the experiment's world sets, cached per (set, spec).

Each (set, spec) is one ``dream_gym.evaluation.evaluate.evaluate`` over the default beta grid (each world at its
recorded W: 4 for the imported real runs), written to ``out/rec/eval/<set>/<tag>.jsonl``; a file
already there is read back instead of evaluated again (the same results: every policy here is
deterministic, built-ins seeded from the run's seed 0).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dream_gym.evaluation.evaluate import evaluate
from dream_gym.evaluation.results import load_results
from experiments.recommended.common import OUT, SETS, Row, rows_of


def tag(spec: str) -> str:
    short = re.sub(r"[^A-Za-z0-9_.-]+", "_", spec.replace(str(OUT) + "/", ""))[-80:]
    return f"{short}-{hashlib.sha1(spec.encode()).hexdigest()[:8]}"


def results_for(spec: str, which: str, jobs: int = 2) -> list[Any]:
    path = OUT / "eval" / which / f"{tag(spec)}.jsonl"
    if path.is_file():
        cached = load_results(path)
        if not any(r.error for r in cached):
            return cached
        path.unlink()  # an episode failed (a watchdog under load, say): evaluate again
    path.parent.mkdir(parents=True, exist_ok=True)
    # a loaded machine can starve a worker for minutes: a generous watchdog, so no episode is lost to it
    resume = path.with_name(path.name + ".partial").is_file()  # a killed evaluation continues
    return evaluate([spec], SETS[which], None, jobs=jobs, progress=False, out=path, task_timeout=1800, resume=resume)


def rows(specs: Sequence[str], which: str, jobs: int = 2) -> dict[str, Row]:
    results = [r for spec in specs for r in results_for(spec, which, jobs)]
    return rows_of(results)


def label(spec: str) -> str:
    """A short name for a spec in tables."""
    m = re.search(r"runs/([^/]+)/model\.zip$", spec)
    if m:
        return m.group(1)
    if spec.endswith("chosen.py"):
        return "dreamed (" + Path(spec).parent.name + ")"
    if spec.endswith(":AdaptiveSpend"):
        return "AdaptiveSpend"
    return spec
