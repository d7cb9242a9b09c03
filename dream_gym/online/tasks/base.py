"""The task interface: an initial program, an isolated evaluator, a description, limits.

The evaluator never trusts the candidate program with its own score. A small *harness* runs in
an isolated child (:mod:`dream_gym.infrastructure.isolation`): it imports the candidate, calls its entry function
and writes the raw answer (e.g. circle centers and radii) as JSON to a result file. The parent
process then validates that answer and computes the score itself, so a program that prints or
returns an inflated score, or monkeypatches the harness, gains nothing.

Nor does the parent trust what the program leaves behind. Its working folder holds at most
``Limits.workspace_mb`` (a tmpfs where the kernel allows it), and only the result file comes
back from it. The result file is read as data (:func:`dream_gym.infrastructure.limits.read_leftover`: a
regular file, no link followed, at most :attr:`HarnessTask.max_result_bytes`) and parsed only when
it holds at most :attr:`HarnessTask.max_result_containers` arrays and objects, so a FIFO, a link
to ``/dev/zero`` or to a file outside, a huge file or JSON of a million empty lists fails the
attempt with a named cause ("result file is a FIFO, not a regular file") instead of hanging or
exhausting the evaluating process. The evidence hashes what the parent wrote and read, never a
file read again.

**Result-file caps.** The largest answers a valid or honestly failing candidate can produce,
measured (``tests/test_candidate_leftovers.py`` writes each and checks it fits with room to
spare): circle-packing-32 with every coordinate at full precision 2.2 KB and 36 containers;
sum-difference's 512 largest values 4.6 KB; autocorrelation's 1,000 heights at full precision
26 KB; lasso-path 38 bytes (its coefficients travel in their own files, 120 KB each); a harness
failure report (a 500-character message and a 2,000-character traceback, all outside ASCII)
30 KB. The cap, 256 KB, is eight times the largest. Once the containers are bounded (4,096, a
hundred times circle-packing-32's), parsing 256 KB of JSON builds at most about 3.3 MB of
objects (13 times the text, for a list of two-letter strings; 9 times for floats); 256 KB of
empty lists would build 20 times its size.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import platform
import shlex
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.isolation import DEFAULT_WORKSPACE_MB, IsolatedProcess, RunOutcome, start_python
from dream_gym.infrastructure.limits import (
    LeftoverError,
    LimitError,
    json_containers,
    loads_bounded,
    read_leftover,
)
from dream_gym.infrastructure.walk import without_lone_surrogates

CANDIDATE_FILE = "candidate.py"
HARNESS_FILE = "_harness.py"
RESULT_FILE = "_result.json"
REPAIRABLE, HARD = "repairable", "hard"
# Exceptions of the candidate that mean "fix the code" rather than "the idea is infeasible".
_REPAIRABLE_TYPES = ("SyntaxError", "IndentationError", "TabError", "ImportError", "ModuleNotFoundError",
                     "NameError", "AttributeError", "TypeError", "MemoryError")


#: Nesting of a result file's JSON (an answer nests 4 deep at most).
RESULT_MAX_DEPTH = 32
#: Seconds an evaluation may take beyond the program's wall time: the sandbox's start (at most
#: 30 s: :func:`dream_gym.infrastructure.isolation.start_python`) and the parent's checks.
EVALUATION_MARGIN_S = 60.0


@dataclass(frozen=True)
class Limits:
    """Resources of one evaluation: wall-clock seconds, address-space megabytes, and the
    megabytes its working folder may hold in all (files, HOME, TMPDIR)."""

    wall_s: float
    memory_mb: int
    workspace_mb: int = DEFAULT_WORKSPACE_MB

    @property
    def deadline_s(self) -> float:
        """The longest a whole evaluation can take: the wall time and :data:`EVALUATION_MARGIN_S`."""
        return self.wall_s + EVALUATION_MARGIN_S


@dataclass
class Evaluation:
    """The evaluator's verdict on one candidate (see the module docstring for the guarantees).

    ``score`` is in the task's own direction (``Task.direction``) and None when invalid.
    ``fail_class`` is None when valid, "repairable" (syntax, import, shape, resource/timeout,
    naming) or "hard" (a well-formed answer that is infeasible or incorrect in substance).
    ``evidence`` is Reinforcement Dreaming's evidence record of the run (t, cmd, exit, duration_ms,
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


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
    #: Bytes and containers (arrays, objects) a result file may hold (see the module docstring).
    max_result_bytes: int = 256 << 10
    max_result_containers: int = 4096

    def check(self, answer: Any) -> Check:
        """Validate the raw answer and compute the score in the parent process."""
        raise NotImplementedError(f"{type(self).__name__} must implement check or check_with_facts")

    def harness_source(self) -> str:
        return HARNESS_TEMPLATE.format(result=RESULT_FILE, candidate=CANDIDATE_FILE, entry=self.entry,
                                       convert=self.convert)

    def interact(self, child: IsolatedProcess, workdir: Path) -> dict[str, Any]:
        """Talk to the running harness (default: nothing); returns extra facts for check."""
        return {}

    def outputs(self) -> dict[str, int]:
        """The files the harness leaves for the parent: a name pattern of the working folder →
        the most bytes such a file may hold. Nothing else comes back from the workspace."""
        return {RESULT_FILE: self.max_result_bytes}

    def evaluate(self, code: str, workdir: Path) -> Evaluation:
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        for stale in (RESULT_FILE, RESULT_FILE + ".tmp"):
            (workdir / stale).unlink(missing_ok=True)
        harness = self.harness_source()
        (workdir / CANDIDATE_FILE).write_text(code, encoding="utf-8")
        (workdir / HARNESS_FILE).write_text(harness, encoding="utf-8")
        started = time.time()
        child = start_python(workdir / HARNESS_FILE, cwd=workdir, wall_s=self.limits.wall_s,
                             memory_mb=self.limits.memory_mb, max_output_bytes=64 << 10,
                             workspace_mb=self.limits.workspace_mb, outputs=self.outputs())
        facts = self.interact(child, workdir)
        outcome = child.finish()
        result = self._read_result(outcome, workdir)
        check = result if isinstance(result, Check) else self._judge(outcome, result, facts)
        written = {CANDIDATE_FILE: code.encode("utf-8"), HARNESS_FILE: harness.encode("utf-8")}
        return self._evaluation(check, outcome, written, None if isinstance(result, Check) else result, started)

    def _read_result(self, outcome: RunOutcome, workdir: Path) -> bytes | Check:
        """The result file's bytes, or the failed check that says why there are none to judge."""
        if outcome.timed_out:
            return Check.fail(f"timeout after {self.limits.wall_s:g}s", REPAIRABLE,
                              f"The program did not finish within {self.limits.wall_s:g}s of wall time.")
        try:
            return read_leftover(workdir / RESULT_FILE, self.max_result_bytes)
        except LeftoverError as exc:
            problem: str | None = exc.problem
        except FileNotFoundError:  # the warden may have refused to hand it back from the workspace
            problem = outcome.refused_outputs.get(RESULT_FILE)
        except OSError:
            problem = None
        return self._left_behind(problem) if problem else self._no_result(outcome)

    def _left_behind(self, problem: str) -> Check:
        if problem.startswith("is larger"):
            problem += f", the limit on an answer of {self.name}"
        return Check.fail(f"result file {problem}", REPAIRABLE, f"The program left a {RESULT_FILE} that the "
                          f"evaluator does not read: it {problem}. Only the harness writes that file.")

    def _parse_result(self, data: bytes) -> Any:
        """The result file's JSON, refused (:class:`LimitError`) when it holds more arrays and
        objects than an answer can, before anything is built."""
        containers = json_containers(data)
        if containers > self.max_result_containers:
            raise LimitError(f"holds {containers} arrays and objects, more than the {self.max_result_containers} "
                             f"an answer of {self.name} may hold")
        try:
            return loads_bounded(data, max_depth=RESULT_MAX_DEPTH)
        except LimitError:
            raise LimitError(f"nests arrays and objects deeper than {RESULT_MAX_DEPTH} levels") from None

    def _judge(self, outcome: RunOutcome, data: bytes, facts: dict[str, Any]) -> Check:
        try:
            payload, _ = without_lone_surrogates(self._parse_result(data))  # an exception message may hold one
        except LimitError as exc:
            return Check.fail(f"result file {exc.problem}", REPAIRABLE)
        except ValueError:
            return self._no_result(outcome)
        if not isinstance(payload, dict) or "ok" not in payload:
            return Check.fail("malformed result file (was it overwritten by the program?)", REPAIRABLE)
        if not payload["ok"]:
            check = _exception_check(payload)
            if outcome.workspace_problem:  # the program failed once its folder was full: say so
                check.error = f"{outcome.workspace_problem} ({check.error})"[:300]
            return check
        try:  # the outputs the warden kept back, for tasks whose harness leaves more files
            check = self.check_with_facts(payload.get("answer"), {**facts, "refused": outcome.refused_outputs})
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
            # A program that tampered with the harness output, or an answer no float holds
            # (2 ** 1100): a failed attempt, not the end of the run.
            return Check.fail(f"malformed answer ({type(exc).__name__}: {exc})"[:300], REPAIRABLE)
        if check.parsed is None:
            check.parsed = payload.get("answer")
        return check

    def check_with_facts(self, answer: Any, facts: dict[str, Any]) -> Check:
        """Hook for tasks that need facts measured by :meth:`interact`; default: :meth:`check`."""
        return self.check(answer)

    def _no_result(self, outcome: RunOutcome) -> Check:
        stderr_tail = outcome.stderr.strip().splitlines()[-5:]
        if outcome.workspace_problem:
            return Check.fail(outcome.workspace_problem, REPAIRABLE,
                              f"{outcome.workspace_problem}: the program's working folder (its files, HOME and "
                              f"TMPDIR) may hold {self.limits.workspace_mb} MB in all.\n" + "\n".join(stderr_tail))
        if outcome.memory_exceeded:
            return Check.fail(f"memory limit of {self.limits.memory_mb} MB exceeded", REPAIRABLE,
                              "\n".join(stderr_tail))
        reason = outcome.describe() or "the program exited before the evaluator got an answer"
        return Check.fail(f"no answer: {reason}", REPAIRABLE, "\n".join(stderr_tail) or reason)

    def _evaluation(self, check: Check, outcome: RunOutcome, written: dict[str, bytes], result: bytes | None,
                    started: float) -> Evaluation:
        """The verdict and its evidence: the hashes of the files the parent wrote (as written)
        and of the result file (the bytes that were judged)."""
        files = {**written, **({RESULT_FILE: result} if result is not None else {})}
        artifacts = [{"path": name, "sha256": _sha256(data)} for name, data in files.items()]
        admissible = not outcome.timed_out and result is not None and check.parsed is not None
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
    stage = None if payload.get("stage") is None else str(payload.get("stage"))[:40]  # NaN: no JSON number
    where = {"import": "while importing the program", "call": "inside the entry function",
             "convert": "reading the returned answer"}.get(str(stage), "")
    error = f"{kind}: {message}"[:300]
    diagnostics = f"{error} ({where})\n{payload.get('traceback', '')}".strip()
    check = Check.fail(error, REPAIRABLE, diagnostics, exception=kind, stage=stage)
    check.parsed = {"ok": False, "stage": stage, "type": kind}
    return check
