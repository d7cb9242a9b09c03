"""One attempt of the online loop and where it runs.

An attempt (:class:`AttemptJob`, picklable) asks the agent for a new candidate from the parent's
program, diagnostics and branch history, evaluates it in an isolated process and returns the child
node and its evidence (:class:`AttemptResult`): :func:`run_attempt`, in a worker. A :class:`Backend`
runs a round's attempts on W workers: a watched job pool (``process``), Ray (``ray``) or this
process (``serial``).

Every attempt has deadlines (:class:`Deadlines`): the agent's allowance for proposing a program,
then the task's wall time and a margin for the sandbox and the checks for evaluating it
(``--evaluation-timeout`` sets the second). A worker that overstays one is killed with
everything it started, and its attempt is recorded as a failed node naming the deadline
(``repairable``, :func:`overstayed`), so a round always ends.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from dream_gym.infrastructure.jobs import JobPool, TaskFailure, job_context
from dream_gym.infrastructure.limits import LeftoverError, max_line_bytes, read_leftover
from dream_gym.online.agent_base import ParentContext
from dream_gym.online.tasks import REPAIRABLE, env_digest, get_task

#: Seconds an agent may take to propose a program: the built-in agents take well under a
#: second; the LLM agent makes up to 3 requests of at most 120 s each, with 1 s and 2 s between.
AGENT_ALLOWANCE_S = {"builtin": 60.0, "llm": 3 * 120.0 + 3.0 + 30.0}
PROPOSAL_SUFFIX = ".proposal.json"  # beside an attempt's workspace: its program, for the record


@dataclass
class AttemptJob:
    """Everything a worker needs for one attempt (picklable)."""

    task: str
    agent: str
    api_base: str | None
    parent: ParentContext
    parent_id: str
    node_id: str
    round: int
    worker: int
    seed: list[int]
    workdir: str
    evaluation_s: float | None = None  # the evaluation's deadline, told to the watchdog when it starts


@dataclass
class AttemptResult:
    node: dict[str, Any]
    evidence: dict[str, Any]


def make_agent(spec: str, task_name: str, api_base: str | None = None) -> Any:
    """``builtin`` → the task's built-in agent; anything else is a litellm model string."""
    if spec == "builtin":
        from dream_gym.online.agents import builtin_agent

        return builtin_agent(task_name)
    from dream_gym.online.llm_agent import LiteLLMAgent

    return LiteLLMAgent(spec, api_base=api_base)


PROPOSED = 1  # the step a worker reports once the agent has proposed: the evaluation starts


@dataclass(frozen=True)
class Deadlines:
    """How long each phase of an attempt may take before its worker is killed."""

    propose_s: float  # the agent's allowance (:data:`AGENT_ALLOWANCE_S`)
    evaluate_s: float  # the task's wall time, the sandbox's start and the parent's checks

    @classmethod
    def of(cls, task: Any, agent: str, evaluation_s: float | None = None) -> Deadlines:
        """The agent's allowance and the task's evaluation deadline (``evaluation_s`` instead)."""
        if evaluation_s is None:
            evaluation_s = float(task.limits.deadline_s)
        elif not 0 < evaluation_s < math.inf:
            raise ValueError(f"the evaluation timeout must be a positive number of seconds, got {evaluation_s:g}")
        return cls(AGENT_ALLOWANCE_S["builtin" if agent == "builtin" else "llm"], evaluation_s)


def run_attempt(job: AttemptJob, beat: Callable[..., None] | None = None) -> AttemptResult:
    """One attempt in a worker: the agent writes a candidate, the task evaluates it isolated.
    ``beat`` (a watched pool's) hears when the evaluation starts, and its deadline."""
    task = get_task(job.task)
    agent = make_agent(job.agent, job.task, job.api_base)
    rng = np.random.default_rng(job.seed)
    started = time.time()
    proposal = agent.propose(task, job.parent, rng)
    workdir = Path(job.workdir)
    _keep_proposal(workdir, proposal)
    if beat is not None:
        beat(PROPOSED, job.evaluation_s)
    try:
        evaluation = task.evaluate(proposal.code, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    _proposal_path(workdir).unlink(missing_ok=True)  # kept when the worker is stopped: the parent reads it
    node: dict[str, Any] = {
        "id": job.node_id,
        "parent": job.parent_id,
        "score": evaluation.score if evaluation.valid else None,
        "round": job.round,
        "worker": job.worker,
        "code": proposal.code,
        "diagnostics": _without_workspace(evaluation.diagnostics, workdir),
        "error": _without_workspace(evaluation.error, workdir),
        "fail_class": evaluation.fail_class,
        "metrics": evaluation.metrics,
        "duration_s": round(time.time() - started, 4),
        "eval_s": round(evaluation.duration_s, 4),
        "cost": proposal.cost,
        "notes": proposal.notes,
    }
    if proposal.prompt is not None:
        node["prompt"] = proposal.prompt
    evidence = {**evaluation.evidence, "node": job.node_id, "round": job.round, "agent": job.agent}
    return AttemptResult(node, evidence)


WORKSPACE = "<workspace>"  # what a candidate's traceback shows for its workspace folder


def _without_workspace(text: Any, workdir: Path) -> Any:
    """``text`` with the attempt's workspace folder (a random temporary path) written as
    :data:`WORKSPACE`, so that a traceback, which the agent sees and the world keeps, is the
    same in every run of one seed."""
    return text.replace(str(workdir), WORKSPACE) if isinstance(text, str) else text


def _keep_proposal(workdir: Path, proposal: Any) -> None:
    """Write the proposed program beside its workspace (out of the candidate's reach), so that
    an attempt whose worker is killed at its deadline is still recorded with its program."""
    record = {"code": proposal.code, "cost": proposal.cost, "notes": proposal.notes, "prompt": proposal.prompt}
    workdir.parent.mkdir(parents=True, exist_ok=True)
    _proposal_path(workdir).write_text(json.dumps(record, default=str), encoding="utf-8")


def _proposal_path(workdir: Path) -> Path:
    return workdir.with_name(workdir.name + PROPOSAL_SUFFIX)


def overstayed(job: AttemptJob, seconds: float, how: str) -> AttemptResult:
    """The failed node of an attempt whose worker was killed (``how``: past a deadline of
    ``seconds``, or it died), with its program when the agent had proposed one."""
    proposal: dict[str, Any] = {}
    try:
        proposal = json.loads(read_leftover(_proposal_path(Path(job.workdir)), max_line_bytes()))
    except (OSError, LeftoverError, ValueError):
        pass  # killed before the agent proposed a program
    _proposal_path(Path(job.workdir)).unlink(missing_ok=True)
    if not isinstance(proposal, dict):
        proposal = {}
    error = f"{how}; its worker and everything it started were killed"
    node: dict[str, Any] = {
        "id": job.node_id, "parent": job.parent_id, "score": None, "round": job.round, "worker": job.worker,
        "code": str(proposal.get("code") or ""), "diagnostics": error, "error": error, "fail_class": REPAIRABLE,
        "metrics": {}, "duration_s": round(seconds, 4), "eval_s": None,
        "cost": proposal.get("cost") if isinstance(proposal.get("cost"), dict) else None,
        "notes": str(proposal.get("notes") or "the agent had not proposed a program"),
    }
    if proposal.get("prompt") is not None:
        node["prompt"] = str(proposal["prompt"])
    evidence: dict[str, Any] = {
        "t": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "actor": "eval", "cmd": None,
        "exit": None, "duration_ms": None, "artifacts": [], "env_digest": env_digest(), "parsed": None,
        "admissible": False, "node": job.node_id, "round": job.round, "agent": job.agent, "error": error,
    }
    return AttemptResult(node, evidence)


# -- execution backends ---------------------------------------------------------------------
class Backend:
    """Runs a round's attempts on W workers: a watched job pool (``process``: each worker is a
    job of :class:`~dream_gym.infrastructure.jobs.JobPool`, killed and replaced when its attempt overstays a
    deadline), Ray (``ray``: tasks past the round's deadline are cancelled with their worker)
    or this process (``serial``, for debugging: no deadline, each evaluation has its own)."""

    def __init__(self, kind: str, workers: int, deadlines: Deadlines):
        self.kind, self.workers, self.deadlines = kind, workers, deadlines
        self._pool: JobPool | None = None
        if kind == "process":  # workers from dream_gym's fork server: safe in a threaded parent
            self._pool = JobPool(_pool_task, workers, task_timeout=deadlines.propose_s,
                                 context=job_context(preload=(__name__,)))
            # Start every worker and import the heavy modules now, not inside round 1's clock.
            list(self._pool.run([None] * workers))
        elif kind == "serial":
            self._pool = None
        elif kind == "ray":
            import ray

            if not ray.is_initialized():
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            self._remote = ray.remote(run_attempt)
        else:
            raise ValueError(f"backend must be 'process', 'ray' or 'serial', got {kind!r}")

    def run(self, jobs: list[AttemptJob]) -> Iterator[tuple[int, AttemptResult | BaseException]]:
        """Yield each attempt's index in ``jobs`` and its result (or the exception it raised) as
        attempts finish, so the attempts that did finish are recorded even when another one fails."""
        if self.kind == "serial":
            for index, job in enumerate(jobs):
                yield index, _call(run_attempt, job)
        elif self.kind == "process":
            assert self._pool is not None
            jobs = [replace(job, evaluation_s=self.deadlines.evaluate_s) for job in jobs]
            for index, outcome in self._pool.run(jobs):
                yield index, self._from_pool(jobs[index], outcome)
        else:
            yield from self._run_ray(jobs)

    def _from_pool(self, job: AttemptJob, outcome: Any) -> AttemptResult | BaseException:
        if not isinstance(outcome, TaskFailure):
            return outcome
        proposing = outcome.step != PROPOSED
        seconds = self.deadlines.propose_s if proposing else self.deadlines.evaluate_s
        if outcome.kind == "timeout":
            phase = "the agent did not propose a program" if proposing else "the evaluation did not finish"
            return overstayed(job, seconds, f"{phase} within its deadline of {seconds:g}s")
        if outcome.kind == "died":
            return overstayed(job, seconds, "the attempt's " + outcome.message.replace("its job process", "worker"))
        return AttemptError(outcome.message.splitlines()[0])  # run_attempt raised: not a candidate's doing

    def _run_ray(self, jobs: list[AttemptJob]) -> Iterator[tuple[int, AttemptResult | BaseException]]:
        import ray

        pending = {self._remote.remote(job): index for index, job in enumerate(jobs)}
        waves = -(-len(jobs) // self.workers)  # attempts beyond W wait for a free CPU
        seconds = self.deadlines.propose_s + self.deadlines.evaluate_s
        stop = time.monotonic() + seconds * waves
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=max(0.0, stop - time.monotonic()))
            if not done:  # the round's deadline: end the attempts still running, with their workers
                for ref, index in pending.items():
                    ray.cancel(ref, force=True)
                    yield index, overstayed(jobs[index], seconds,
                                            f"the attempt did not finish within its deadline of {seconds:g}s")
                return
            yield pending.pop(done[0]), _call(ray.get, done[0])

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()


def _pool_task(job: AttemptJob | None, beat: Callable[..., None]) -> AttemptResult | None:
    """A job of the process backend: an attempt, or (None) the warm-up of a fresh worker."""
    if job is None:
        import dream_gym.online.agents  # noqa: F401  (numpy and the tasks come with it)

        return None
    return run_attempt(job, beat)


class AttemptError(RuntimeError):
    """An attempt that raised in its worker: the message is the exception's type and text."""


def error_text(error: BaseException) -> str:
    """What an attempt that raised says: an :class:`AttemptError`'s text, else the exception's type and text."""
    return str(error) if isinstance(error, AttemptError) else f"{type(error).__name__}: {error}"


def _call(fn: Callable[[Any], AttemptResult], arg: Any) -> AttemptResult | BaseException:
    try:
        return fn(arg)
    except Exception as exc:  # handed to the loop, which records the others first
        return exc


class AttemptFailed(RuntimeError):
    """An attempt could not run (e.g. the LLM is unreachable): not a candidate's outcome, so it
    is not recorded as a node; the run stops after recording the attempts that finished."""
