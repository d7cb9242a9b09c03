"""Make the GEPA run of ``tests/data/gepa/linear-fit/`` with the real ``gepa`` package, no LLM.

GEPA evolves a candidate of two text components, ``slope`` and ``offset`` (``slope = 1``,
``offset = 0``), fitted to the line ``y = 3x + 5``: each validation example is one ``x``; its score is
``1 / (1 + |prediction - y|)``. The reflection "LM" is a deterministic function: it reads the
current text of the component GEPA asks about from the prompt and moves its number by a step drawn
from a seeded generator; two calls in every nine raise (as a timed-out LLM call does: GEPA retries
a failed reflection once, so the second failure loses the iteration's proposal), so the run holds accepted candidates, candidates rejected by GEPA's minibatch test, merges
(``use_merge``) and failed iterations. ``gepa.optimize(run_dir=...)`` writes what GEPA always
writes there: ``gepa_state.bin``, ``run_log.json``, ``candidates.json`` and ``run_log.txt``.

Run with a Python where ``gepa`` is installed (not a dependency of dream_gym)::

    python -m venv /tmp/gepa-venv && /tmp/gepa-venv/bin/pip install gepa==0.1.4
    /tmp/gepa-venv/bin/python tests/data/gepa/make_run.py tests/data/gepa/linear-fit
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import gepa
from gepa.core.adapter import EvaluationBatch

TARGET_SLOPE, TARGET_OFFSET = 3, 5
FAIL_EVERY = 9  # calls 9 and 10, 18 and 19, ... fail


def _number(text: str) -> int:
    match = re.search(r"-?\d+", text)
    return int(match.group()) if match else 0


class LineAdapter:
    """Scores a candidate ``{"slope": "slope = a", "offset": "offset = b"}`` on inputs x."""

    propose_new_texts = None

    def evaluate(self, batch, candidate, capture_traces=False):
        slope, offset = _number(candidate["slope"]), _number(candidate["offset"])
        outputs, scores, trajectories = [], [], []
        for x in batch:
            prediction, target = slope * x + offset, TARGET_SLOPE * x + TARGET_OFFSET
            outputs.append({"x": x, "prediction": prediction})
            scores.append(round(1.0 / (1.0 + abs(prediction - target)), 6))
            trajectories.append({"x": x, "prediction": prediction, "target": target})
        return EvaluationBatch(outputs=outputs, scores=scores, trajectories=trajectories if capture_traces else None)

    def make_reflective_dataset(self, candidate, eval_batch, components_to_update):
        records = [{"Inputs": {"x": t["x"]}, "Generated Outputs": str(t["prediction"]),
                    "Feedback": f"expected {t['target']}"} for t in eval_batch.trajectories]
        return {name: records for name in components_to_update}


class StepLM:
    """A reflection "LM" that moves the number of the text it is shown."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.calls = 0

    def __call__(self, prompt) -> str:
        self.calls += 1
        if self.calls > 1 and self.calls % FAIL_EVERY in (0, 1):
            raise TimeoutError(f"reflection call {self.calls} timed out")
        text = prompt if isinstance(prompt, str) else str(prompt)
        current = text.split("```")[1].strip() if text.count("```") >= 2 else "value = 0"
        name = current.split("=")[0].strip() or "value"
        value = _number(current) + self.rng.choice((-2, -1, 1, 2, 3))
        return f"```\n{name} = {value}\n```"


def main(out: str) -> None:
    run_dir = Path(out)
    if run_dir.exists() and any(run_dir.iterdir()):
        raise SystemExit(f"{run_dir}: exists and is not empty")
    xs = list(range(-4, 8))
    gepa.optimize(
        seed_candidate={"slope": "slope = 1", "offset": "offset = 0"},
        trainset=xs, valset=xs, adapter=LineAdapter(), reflection_lm=StepLM(seed=7),
        reflection_minibatch_size=3, use_merge=True, max_merge_invocations=3, max_metric_calls=420,
        run_dir=str(run_dir), seed=3, raise_on_exception=False, track_best_outputs=False,
        display_progress_bar=False,
    )


if __name__ == "__main__":
    main(sys.argv[1])
