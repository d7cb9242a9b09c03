"""What the online module keeps from Reinforcement Dreaming: the evidence ledger,
failure classes, and the survival check of the final best candidate.

* :class:`EvidenceLedger` appends one admissible record per executed attempt to
  ``evidence.jsonl`` beside the world (flush + fsync, like the world itself), secrets redacted
  (:mod:`dream_gym.infrastructure.redact`).
* :func:`stagnation_class` marks a *valid* attempt ``hard`` when its branch has produced
  ``window`` valid attempts in a row without beating the branch's best: "sustained poor score".
  Invalid attempts are classified by the task's evaluator (``repairable``: syntax, import,
  shape, resource/timeout, naming; ``hard``: a well-formed but infeasible answer).
* :func:`survival_check` re-evaluates a candidate in fresh processes (several times when the
  task's metric is noisy) and reports mean and spread before the run reports it.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.durable import write_atomic
from dream_gym.infrastructure.redact import redact_value

EVIDENCE_FILE = "evidence.jsonl"
STAGNATION_WINDOW = 3


class EvidenceLedger:
    """Append-only evidence records (Reinforcement Dreaming's evidence ledger), one per executed attempt."""

    def __init__(self, folder: str | os.PathLike[str], nodes: Collection[str] | None = None):
        """``nodes``: the ids of the world's nodes; a record of any other node is dropped. A run
        writes an attempt's evidence before its node, so a kill between the two leaves evidence of a
        node the world lacks, whose attempt the resumed run makes again (node first, a kill there
        left a node whose evidence was never written)."""
        self.path = Path(folder) / EVIDENCE_FILE
        self._repair_torn_tail()
        if nodes is not None:
            self._keep(set(nodes))
        self._handle = open(self.path, "ab")

    def _keep(self, nodes: set[str]) -> None:
        if not self.path.exists():
            return
        lines = self.path.read_bytes().splitlines(keepends=True)
        kept = [line for line in lines if _node_of(line) in nodes or _node_of(line) is None]
        if len(kept) != len(lines):
            write_atomic(self.path, b"".join(kept))

    def _repair_torn_tail(self) -> None:
        if not self.path.exists():
            return
        raw = self.path.read_bytes()
        if raw and not raw.endswith(b"\n"):
            with open(self.path, "r+b") as handle:
                handle.truncate(raw.rfind(b"\n") + 1)

    def append(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(redact_value(dict(record)), allow_nan=False, default=str)
        self._handle.write(line.encode() + b"\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()


def _node_of(line: bytes) -> object:
    """The node a ledger line is evidence of (None for a line that is not a record: kept as it is)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record.get("node") if isinstance(record, dict) else None


def read_evidence(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    path = Path(folder) / EVIDENCE_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def stagnation_class(
    branch_scores: Sequence[float | None], score: float | None, window: int = STAGNATION_WINDOW
) -> str | None:
    """``"hard"`` when ``score`` is valid and ends ``window`` valid attempts without a new best.

    Args:
        branch_scores: oriented scores (higher is better; None = invalid) of the branch from its
            head down to the new node's parent.
        score: the new node's oriented score.
    """
    if score is None:
        return None
    valid = [s for s in branch_scores if s is not None] + [score]
    if len(valid) <= window:
        return None
    best_before = max(valid[:-window])
    return "hard" if max(valid[-window:]) <= best_before else None


@dataclass
class Survival:
    """The survival check's verdict."""

    repeats: int
    valid_runs: int
    scores: list[float]
    mean: float | None
    stdev: float | None
    recorded_score: float | None
    survived: bool
    note: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def survival_check(task: Any, code: str, recorded_score: float | None, repeats: int | None = None) -> Survival:
    """Re-evaluate ``code`` in fresh processes; it survives when every run is valid and, for a
    deterministic metric, reproduces the recorded score (noisy metrics report mean and spread)."""
    repeats = repeats or (5 if task.noisy else 1)
    scores: list[float] = []
    errors: list[str] = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="dream-gym-survival-") as workdir:
            evaluation = task.evaluate(code, Path(workdir))
        if evaluation.valid and evaluation.score is not None:
            scores.append(float(evaluation.score))
        else:
            errors.append(str(evaluation.error))
    mean = statistics.fmean(scores) if scores else None
    stdev = statistics.stdev(scores) if len(scores) > 1 else (0.0 if scores else None)
    survived = len(scores) == repeats
    note = "all re-runs valid"
    if errors:
        note = f"{len(errors)} of {repeats} re-runs invalid: {errors[0]}"
    elif not task.noisy and recorded_score is not None and mean is not None:
        if abs(mean - recorded_score) > 1e-9 * max(1.0, abs(recorded_score)):
            survived = False
            note = f"re-run scored {mean!r}, the record says {recorded_score!r}"
    elif recorded_score and mean is not None:  # a noisy metric: valid re-runs survive, and how far they fall
        change = (mean - recorded_score) / abs(recorded_score)
        worse = change < 0 if task.direction != "minimize" else change > 0
        note += (f"; their mean is {abs(change):.0%} {'worse' if worse else 'better'} than the recorded "
                 f"{recorded_score:.6g}" + (" (the best of a noisy metric's runs is chosen partly for its luck)"
                                            if worse else ""))
    return Survival(repeats, len(scores), scores, mean, stdev, recorded_score, survived, note)
