"""``sleep-task``: a measurement tool for the worker pool, not a discovery problem.

Every evaluation runs an isolated child that sleeps until a fixed 0.5 s have passed since the
evaluation started, so W workers should finish W evaluations in about 0.5 s if the pool is truly
parallel. The score is a deterministic function of the code (a hash mapped into [0, 1)); a
program that does not parse is invalid (repairable), so failures can be exercised too.
"""

from __future__ import annotations

import ast
import hashlib
import time
from pathlib import Path
from typing import Any

from dream_gym.online.tasks.base import REPAIRABLE, Check, HarnessTask, Limits

SLEEP_S = 0.5

INITIAL_PROGRAM = '''"""sleep-task: any program works; its score is a hash of its text."""


def payload():
    return 0
'''


def code_score(code: str) -> float:
    """The sleep-task score of a program text: sha256 mapped into [0, 1)."""
    return int(hashlib.sha256(code.encode("utf-8")).hexdigest()[:13], 16) / 16**13


class SleepTask(HarnessTask):
    """Fixed-duration evaluation (~0.5 s) for measuring worker-pool parallel efficiency."""

    name = "sleep-task"
    entry = "payload"
    direction = "maximize"
    best_known = 1.0
    limits = Limits(wall_s=5.0, memory_mb=512)
    noisy = False
    description = ("Measurement tool: each evaluation takes about 0.5 s; the score is a hash of the program "
                   "text in [0, 1). Useful for timing a worker pool, not for discovery.")

    def __init__(self) -> None:
        self._deadline = 0.0
        self._code = ""

    def initial_program(self) -> str:
        return INITIAL_PROGRAM

    def harness_source(self) -> str:
        # The candidate is not imported: only its text matters, and the sleep must be exact.
        return (f"import time\ntime.sleep(max(0.0, {self._deadline!r} - time.time()))\n"
                "import json\njson.dump({'ok': True, 'answer': None}, open('_result.json', 'w'))\n")

    def evaluate(self, code: str, workdir: Path) -> Any:
        # A fresh instance per call keeps the deadline private to this evaluation (thread safety).
        clone = SleepTask()
        clone._deadline = time.time() + SLEEP_S
        clone._code = code
        return HarnessTask.evaluate(clone, code, workdir)

    def check(self, answer: Any) -> Check:
        try:
            ast.parse(self._code)
        except SyntaxError as exc:
            return Check.fail(f"SyntaxError: {exc.msg} (line {exc.lineno})", REPAIRABLE)
        score = code_score(self._code)
        return Check(score, f"slept {SLEEP_S} s; score = hash of the code = {score:.6f}",
                     metrics={"sleep_s": SLEEP_S}, parsed={"score_from_code_hash": score})
