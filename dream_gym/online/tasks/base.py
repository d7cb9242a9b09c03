"""The task interface: an initial program, an isolated evaluator, a description, limits.

The evaluator never trusts the candidate program with its own score. A small *harness* runs in
an isolated child (:mod:`dream_gym.isolation`): it imports the candidate, calls its entry function
and writes the raw answer (e.g. circle centers and radii) as JSON to a result file. The parent
process then validates that answer and computes the score itself, so a program that prints or
returns an inflated score, or monkeypatches the harness, gains nothing.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import platform
import shlex
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.isolation import IsolatedProcess, RunOutcome, start_python

CANDIDATE_FILE = "candidate.py"
HARNESS_FILE = "_harness.py"
RESULT_FILE = "_result.json"
REPAIRABLE, HARD = "repairable", "hard"
# Exceptions of the candidate that mean "fix the code" rather than "the idea is infeasible".
_REPAIRABLE_TYPES = ("SyntaxError", "IndentationError", "TabError", "ImportError", "ModuleNotFoundError",
                     "NameError", "AttributeError", "TypeError", "MemoryError")


@dataclass(frozen=True)
class Limits:
    """Resources of one evaluation: wall-clock seconds and address-space megabytes."""

    wall_s: float
    memory_mb: int


@dataclass
class Evaluation:
    """The evaluator's verdict on one candidate (see the module docstring for the guarantees).

    ``score`` is in the task's own direction (``Task.direction``) and None when invalid.
    ``fail_class`` is None when valid, "repairable" (syntax, import, shape, resource/timeout,
    naming) or "hard" (a well-formed answer that is infeasible or incorrect in substance).
    ``evidence`` is the seed-002 Appendix B record of the run (t, cmd, exit, duration_ms,
    artifacts, env_digest, parsed, admissible).
    """

    score: float | None
    valid: bool
    diagnostics: str
    error: str | None
    fail_class: str | None
    metrics: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class Check:
    """What a task's validator concluded from a parsed answer (score None = invalid)."""

    score: float | None
    diagnostics: str
    error: str | None = None
    fail_class: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    parsed: Any = None  # what goes into the evidence record (a summary when the answer is large)

    @classmethod
    def fail(cls, error: str, fail_class: str, diagnostics: str = "", **metrics: Any) -> Check:
        return cls(None, diagnostics or error, error, fail_class, dict(metrics))


class Task(ABC):
    """A discovery task. Subclasses set the class attributes and implement the two methods."""

    name: str
    description: str
    direction: str = "maximize"
    best_known: float | None = None
    limits: Limits = Limits(wall_s=10.0, memory_mb=1024)
    noisy: bool = False

    @abstractmethod
    def initial_program(self) -> str:
        """Source of the baseline program (the world's root)."""

    @abstractmethod
    def evaluate(self, code: str, workdir: Path) -> Evaluation:
        """Write ``code`` into ``workdir``, run it isolated, validate its answer, score it."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


@functools.lru_cache(maxsize=1)
def env_digest() -> str:
    """``sha256:`` digest of the Python, numpy and scipy versions and the platform."""
    import numpy
    import scipy

    text = f"{sys.version}|numpy {numpy.__version__}|scipy {scipy.__version__}|{platform.platform()}"
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# The harness imports the candidate by path, calls the entry function and writes the raw answer.
# {convert} is task-specific code turning ``answer`` into JSON-able data (raising on bad shapes).
HARNESS_TEMPLATE = '''
import importlib.util, json, os, sys, traceback

def _write(payload):
    tmp = "{result}.tmp"
    with open(tmp, "w") as handle:
        json.dump(payload, handle)
    os.replace(tmp, "{result}")

def _fail(stage, exc):
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:])
    _write({{"ok": False, "stage": stage, "type": type(exc).__name__, "message": str(exc)[:500],
             "traceback": tail[-2000:]}})
    sys.exit(0)

try:
    _spec = importlib.util.spec_from_file_location("candidate", os.path.abspath("{candidate}"))
    candidate = importlib.util.module_from_spec(_spec)
    sys.modules["candidate"] = candidate
    _spec.loader.exec_module(candidate)
    _entry = getattr(candidate, "{entry}", None)
    if not callable(_entry):
        raise AttributeError("the program defines no function {entry}()")
except BaseException as exc:
    _fail("import", exc)
try:
    answer = _entry()
except BaseException as exc:
    _fail("call", exc)
try:
{convert}
except BaseException as exc:
    _fail("convert", exc)
_write({{"ok": True, "answer": data}})
'''


class HarnessTask(Task):
    """A task whose harness calls one entry function and writes its answer as JSON.

    Subclasses give ``entry`` (the function name), ``convert`` (harness code indented by four
    spaces that turns ``answer`` into JSON data ``data``) and :meth:`check`.
    """

    entry: str
    convert: str = "    data = answer"

    def check(self, answer: Any) -> Check:
        """Validate the raw answer and compute the score in the parent process."""
        raise NotImplementedError(f"{type(self).__name__} must implement check or check_with_facts")

    def harness_source(self) -> str:
        return HARNESS_TEMPLATE.format(result=RESULT_FILE, candidate=CANDIDATE_FILE, entry=self.entry,
                                       convert=self.convert)

    def interact(self, child: IsolatedProcess, workdir: Path) -> dict[str, Any]:
        """Talk to the running harness (default: nothing); returns extra facts for check."""
        return {}

    def evaluate(self, code: str, workdir: Path) -> Evaluation:
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        for stale in (RESULT_FILE, RESULT_FILE + ".tmp"):
            (workdir / stale).unlink(missing_ok=True)
        (workdir / CANDIDATE_FILE).write_text(code, encoding="utf-8")
        (workdir / HARNESS_FILE).write_text(self.harness_source(), encoding="utf-8")
        started = time.time()
        child = start_python(workdir / HARNESS_FILE, cwd=workdir, wall_s=self.limits.wall_s,
                             memory_mb=self.limits.memory_mb, max_output_bytes=64 << 10)
        facts = self.interact(child, workdir)
        outcome = child.finish()
        check = self._judge(outcome, workdir, facts)
        return self._evaluation(check, outcome, workdir, started)

    def _judge(self, outcome: RunOutcome, workdir: Path, facts: dict[str, Any]) -> Check:
        result_path = workdir / RESULT_FILE
        if outcome.timed_out:
            return Check.fail(f"timeout after {self.limits.wall_s:g}s", REPAIRABLE,
                              f"The program did not finish within {self.limits.wall_s:g}s of wall time.")
        try:
            payload = json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return self._no_result(outcome)
        if not isinstance(payload, dict) or "ok" not in payload:
            return Check.fail("malformed result file (was it overwritten by the program?)", REPAIRABLE)
        if not payload["ok"]:
            return _exception_check(payload)
        try:
            check = self.check_with_facts(payload.get("answer"), facts)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            # Only a program that tampered with the harness output can get here.
            return Check.fail(f"malformed answer ({type(exc).__name__}: {exc})"[:300], REPAIRABLE)
        if check.parsed is None:
            check.parsed = payload.get("answer")
        return check

    def check_with_facts(self, answer: Any, facts: dict[str, Any]) -> Check:
        """Hook for tasks that need facts measured by :meth:`interact`; default: :meth:`check`."""
        return self.check(answer)

    def _no_result(self, outcome: RunOutcome) -> Check:
        stderr_tail = outcome.stderr.strip().splitlines()[-5:]
        if outcome.memory_exceeded:
            return Check.fail(f"memory limit of {self.limits.memory_mb} MB exceeded", REPAIRABLE,
                              "\n".join(stderr_tail))
        reason = outcome.describe() or "the program exited before the evaluator got an answer"
        return Check.fail(f"no answer: {reason}", REPAIRABLE, "\n".join(stderr_tail) or reason)

    def _evaluation(self, check: Check, outcome: RunOutcome, workdir: Path, started: float) -> Evaluation:
        artifacts = [{"path": name, "sha256": _sha256(workdir / name)}
                     for name in (CANDIDATE_FILE, HARNESS_FILE, RESULT_FILE) if (workdir / name).is_file()]
        admissible = not outcome.timed_out and (workdir / RESULT_FILE).is_file() and check.parsed is not None
        evidence = {
            "t": _dt.datetime.fromtimestamp(started, _dt.timezone.utc).isoformat(timespec="seconds"),
            "actor": "eval",
            "cmd": shlex.join(outcome.argv),
            "exit": outcome.returncode,
            "duration_ms": round(outcome.duration_s * 1000),
            "artifacts": artifacts,
            "env_digest": env_digest(),
            "parsed": check.parsed,
            "admissible": bool(admissible),
        }
        valid = check.score is not None
        return Evaluation(score=check.score, valid=valid, diagnostics=check.diagnostics,
                          error=None if valid else check.error,
                          fail_class=None if valid else (check.fail_class or REPAIRABLE),
                          metrics=check.metrics, duration_s=outcome.duration_s, evidence=evidence)


def _exception_check(payload: dict[str, Any]) -> Check:
    """Turn an exception reported by the harness into a repairable failure with its message."""
    kind, message = str(payload.get("type")), str(payload.get("message", ""))
    stage = payload.get("stage")
    where = {"import": "while importing the program", "call": "inside the entry function",
             "convert": "reading the returned answer"}.get(str(stage), "")
    error = f"{kind}: {message}"[:300]
    diagnostics = f"{error} ({where})\n{payload.get('traceback', '')}".strip()
    check = Check.fail(error, REPAIRABLE, diagnostics, exception=kind, stage=stage)
    check.parsed = {"ok": False, "stage": stage, "type": kind}
    return check
