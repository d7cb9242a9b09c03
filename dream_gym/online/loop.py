"""The online loop: grow a real world with a discovery agent, an evaluator and a policy (docs/concepts/online.md).

Each round the policy sees the prefix view of the real tree (the same view type as in replay)
and returns a batch; each selection goes to one of W workers (a process pool, or Ray), which
asks the agent for a new candidate from the parent's program, diagnostics and branch history,
evaluates it in an isolated process, and returns the child. Children are written through the
:class:`~dream_gym.world.writer.WorldWriter` (flush + fsync), with their round and worker slot, in
the batch's slot order: each as soon as it and the earlier slots of its round have finished
(:func:`in_slot_order`), so the world does not depend on which worker finished first, replaying
the recording policy on it gives its tree back, ``kill -9`` loses at most the attempts in flight
(and finished ones waiting for an earlier slot), and ``resume`` continues the same world.

Rounds are synchronous: a round's attempts all finish before the next batch is chosen. The run
ends after K1 rounds, when the policy returns [], or when a budget (attempts, seconds, dollars)
runs out. At the end the best candidate goes through the survival check.

Every attempt has deadlines (:class:`Deadlines`): the agent's allowance for proposing a program,
then the task's wall time and a margin for the sandbox and the checks for evaluating it
(``--evaluation-timeout`` sets the second). A worker that overstays one is killed with
everything it started, and its attempt is recorded as a failed node naming the deadline
(``repairable``), so a round always ends.

Online, the future does not exist yet, so the frontier is the reveal rule's with every node's
recorded children unbounded (``reveal_rules.UNRECORDED``): the root (up to W times) and every
leaf of the tree (rule "leaves", default) or every node (rule "any").
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from dream_gym.infrastructure.jobs import JobPool, TaskFailure, job_context
from dream_gym.infrastructure.limits import LeftoverError, max_line_bytes, read_leftover
from dream_gym.infrastructure.locks import folder_lock
from dream_gym.infrastructure.redact import redact_value
from dream_gym.infrastructure.sandbox import require_sandbox
from dream_gym.infrastructure.work_folders import work_folder
from dream_gym.online.agent_base import ParentContext
from dream_gym.online.evidence import EvidenceLedger, Survival, stagnation_class, survival_check
from dream_gym.online.tasks import REPAIRABLE, env_digest, get_task
from dream_gym.policy import Policy, RunContext, batch_from
from dream_gym.replay.mechanics import ROOT, IllegalBatchError
from dream_gym.replay.settings import DEFAULT_BETA, STANDARD_WORKERS, ReplaySettings
from dream_gym.replay.view import NodeView, PrefixView, branch_of_child, node_view_from_record
from dream_gym.world.reveal_rules import UNRECORDED, reveal_rule, root_slots
from dream_gym.world.tree import NODES_FILE, build_world
from dream_gym.world.writer import WorldWriter, new_meta

HISTORY_LIMIT = 12  # ancestors shown to the agent
#: Seconds an agent may take to propose a program: the built-in agents take well under a
#: second; the LLM agent makes up to 3 requests of at most 120 s each, with 1 s and 2 s between.
AGENT_ALLOWANCE_S = {"builtin": 60.0, "llm": 3 * 120.0 + 3.0 + 30.0}
PROPOSAL_SUFFIX = ".proposal.json"  # beside an attempt's workspace: its program, for the record
Finished = TypeVar("Finished")


@dataclass
class GrowConfig:
    """Arguments of one online run (``dream-gym grow``)."""

    task: str
    out: Path
    agent: str = "builtin"  # "builtin" or a litellm model string
    policy: str = "fixed"  # built-in name, module:Class, or a policy file
    policy_params: dict[str, Any] = field(default_factory=dict)  # a built-in's parameters (recorded)
    workers: int = STANDARD_WORKERS  # W (no world is recorded yet to take it from)
    rounds: int = 10  # K1
    seed: int = 0
    beta: float = DEFAULT_BETA
    frontier: str = "leaves"
    max_attempts: int | None = None
    max_seconds: float | None = None
    max_usd: float | None = None
    backend: str = "process"  # "process" | "ray" | "serial"
    api_base: str | None = None
    world_id: str | None = None
    survival_repeats: int | None = None
    resume: bool = False
    command: str | None = None  # the command line that started the run (provenance)
    evaluation_timeout_s: float | None = None  # None: the task's (Deadlines.of)

    @property
    def settings(self) -> ReplaySettings:
        """What the policy is shown: W, beta, the frontier rule and K1 as the round limit."""
        return ReplaySettings(self.workers, self.beta, max_rounds=self.rounds, frontier=self.frontier)


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


@dataclass
class RoundStats:
    round: int
    attempts: int
    failures: int
    best_score: float | None
    seconds: float


@dataclass
class GrowResult:
    folder: Path
    nodes: int
    rounds: int
    attempts: int
    failures: int
    best_score: float | None
    seconds: float
    stopped_by: str
    survival: Survival | None
    round_stats: list[RoundStats] = field(default_factory=list)
    repaired: str | None = None

    def summary(self) -> dict[str, Any]:
        data = asdict(self)
        data["folder"] = str(self.folder)
        return data


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


# -- the view of the real tree ----------------------------------------------------------------
def tree_view(
    records: list[dict[str, Any]], meta: dict[str, Any], settings: ReplaySettings | None = None, *, rounds: int,
    known: Sequence[NodeView] = (), **changes: Any,
) -> PrefixView:
    """The prefix view of a real growing tree: every node is revealed (observed id = line).

    ``settings`` (and ``changes``, its fields by name) are the run's; W and the frontier rule
    default to the ones the world's metadata records. ``known`` is the ``nodes`` of an earlier
    view of a prefix of these same, unchanged records: reused instead of built again, so that a
    caller stepping through a record round by round builds each node's view once."""
    world = build_world(meta, records)
    settings = ReplaySettings.of(settings, **changes).resolved(world)
    workers, frontier = settings.workers_on(world), settings.frontier_on(world)
    nodes: list[NodeView] = list(known[: len(records)])
    opened = sum(1 for node in nodes if node.parent == ROOT)  # the branches the known nodes opened
    for index in range(len(nodes), len(records)):
        record = records[index]
        parent_index = int(world.parent[index])
        parent = nodes[parent_index] if parent_index >= 0 else None
        branch, opened = branch_of_child(parent, opened)
        raw = world.score[index]
        nodes.append(node_view_from_record(
            record, obs_id=index, parent=parent, branch=branch,
            score=None if raw != raw else float(raw), baseline=world.baseline_score,
        ))
    children = np.bincount(world.parent[1:], minlength=len(records)).tolist()
    rule = reveal_rule(frontier)
    legal = [i for i in range(1, len(records)) if rule.is_open(children[i], UNRECORDED)]
    return PrefixView(
        nodes=tuple(nodes), frontier=(ROOT, *legal), root_slots=root_slots(workers, UNRECORDED),
        baseline_score=world.baseline_score,
        workers=workers, beta=settings.beta, beta1=settings.beta1, beta2=settings.beta2, rounds=rounds,
        attempts=len(records) - 1, task_name=world.task_name, task_description=world.task_description,
        direction=world.direction, frontier_rule=frontier, max_rounds=settings.max_rounds,
    )


def check_online_batch(view: PrefixView, batch: list[int]) -> list[int]:
    """The replay rules applied to the real tree (legal ids, root up to W, non-root once)."""
    if len(batch) > view.workers:
        raise IllegalBatchError(f"batch of {len(batch)} selections exceeds W={view.workers} workers")
    legal = set(view.frontier)
    seen: set[int] = set()
    for node_id in batch:
        if isinstance(node_id, bool) or not isinstance(node_id, (int, np.integer)):
            raise IllegalBatchError(f"selection {node_id!r} is not a node id (an int)", node_id)
        if node_id == ROOT:
            continue
        if node_id not in legal:
            raise IllegalBatchError(f"id {node_id} is not on the frontier of the real tree", node_id)
        if node_id in seen:
            raise IllegalBatchError(f"id {node_id} appears twice (a non-root node may be selected once)", node_id)
        seen.add(node_id)
    return [int(i) for i in batch]


def parent_context(records: list[dict[str, Any]], index_of: dict[str, int], index: int) -> ParentContext:
    """What the agent is told about the parent: its program, score, diagnostics, branch history."""
    chain: list[dict[str, Any]] = []
    cursor: int | None = index
    while cursor is not None:
        chain.append(records[cursor])
        parent_id = records[cursor]["parent"]
        cursor = None if parent_id is None else index_of[parent_id]
    chain.reverse()
    history = [
        {k: r.get(k) for k in ("score", "error", "fail_class")}
        | {"diagnostics": str(r.get("diagnostics") or "")[:300], "code": str(r.get("code") or "")}
        for r in chain[-HISTORY_LIMIT:]
    ]
    parent = records[index]
    return ParentContext(
        code=str(parent.get("code") or ""), score=parent.get("score"),
        diagnostics=str(parent.get("diagnostics") or ""), error=parent.get("error"), history=history,
    )


def branch_scores(records: list[dict[str, Any]], index_of: dict[str, int], index: int, negate: bool) -> list[float | None]:
    """Oriented scores from the branch head down to node ``index`` (root excluded)."""
    scores: list[float | None] = []
    cursor = index
    while records[cursor]["parent"] is not None:
        scores.append(_oriented(records[cursor], negate))
        cursor = index_of[records[cursor]["parent"]]
    return scores[::-1]


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
class _Backend:
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


def _error_text(error: BaseException) -> str:
    return str(error) if isinstance(error, AttemptError) else f"{type(error).__name__}: {error}"


def _call(fn: Callable[[Any], AttemptResult], arg: Any) -> AttemptResult | BaseException:
    try:
        return fn(arg)
    except Exception as exc:  # handed to the loop, which records the others first
        return exc


class AttemptFailed(RuntimeError):
    """An attempt could not run (e.g. the LLM is unreachable): not a candidate's outcome, so it
    is not recorded as a node; the run stops after recording the attempts that finished."""


# -- the run -------------------------------------------------------------------------------
def _open_world(config: GrowConfig, task: Any) -> WorldWriter:
    """The world's writer, which holds the folder's lock for the whole run. The lock is taken
    before anything is looked at, so a second grow of the same folder is refused naming the
    first (not told to pass --resume); the writer takes it again (re-entrant) and keeps it."""
    folder = Path(config.out)
    with folder_lock(folder):
        if (folder / NODES_FILE).exists():
            if not config.resume:
                raise FileExistsError(f"{folder} already holds a world; pass --resume to continue it")
            writer = WorldWriter.open(folder)
            if writer.meta["task"]["name"] != task.name:
                writer.close()
                raise ValueError(f"{folder} holds a world of task {writer.meta['task']['name']!r}, not {task.name!r}")
            return writer
        meta = new_meta(
            config.world_id or folder.name, task.name, task.description, direction=task.direction,
            workers=config.workers, frontier=config.frontier,
            source="dream-gym grow (online discovery loop)", licence="CC-BY-4.0",
            policy=config.policy, agent=config.agent, seed=config.seed, beta=config.beta,
            best_known=task.best_known, command=config.command, rounds=config.rounds,
        )
        if config.policy_params:  # what replaying the recording policy needs (dream_gym.fidelity)
            meta["policy_params"] = dict(config.policy_params)
        return WorldWriter.create(folder, meta)


def _evaluate_root(task: Any, workspaces: Path, ledger: EvidenceLedger) -> dict[str, Any]:
    code = task.initial_program()
    evaluation = task.evaluate(code, workspaces / "root")
    if not evaluation.valid:
        raise RuntimeError(f"the initial program of {task.name!r} is invalid: {evaluation.error}")
    ledger.append({**evaluation.evidence, "node": "root", "round": 0, "agent": None})
    return {
        "id": "root", "parent": None, "score": evaluation.score, "round": 0, "code": code,
        "diagnostics": evaluation.diagnostics, "metrics": evaluation.metrics,
        "duration_s": round(evaluation.duration_s, 4),
    }


def grow(
    config: GrowConfig, policy: Policy, *, on_round: Callable[[RoundStats, GrowResult], None] | None = None,
) -> GrowResult:
    """Run the online loop; a round's nodes go to disk in slot order as they finish (see the module doc)."""
    require_sandbox()  # candidates run only where the kernel can sandbox them
    task = get_task(config.task)
    deadlines = Deadlines.of(task, config.agent, config.evaluation_timeout_s)
    started = time.time()
    writer = _open_world(config, task)
    folder = writer.folder
    ledger = EvidenceLedger(folder)
    negate = task.direction == "minimize"
    backend = _Backend(config.backend, config.workers, deadlines)
    result = GrowResult(folder, 0, 0, 0, 0, None, 0.0, "rounds", None, repaired=writer.repaired)
    # Candidates work outside the world (they may write only their own workspace), so none can
    # touch the world it is grown into.
    workspaces = work_folder("grow")
    try:
        if not writer.records:
            writer.append(_evaluate_root(task, workspaces, ledger))
        records = writer.records
        index_of = {r["id"]: i for i, r in enumerate(records)}
        done_rounds = max((int(r.get("round") or 0) for r in records), default=0)
        spent_usd = sum(_usd(r) for r in records)
        view = tree_view(records, writer.meta, config.settings, rounds=done_rounds)
        policy.reset(RunContext.from_view(view, seed=config.seed))
        for round_no in range(done_rounds + 1, config.rounds + 1):
            stop = _budget_stop(config, len(records) - 1, time.time() - started, spent_usd)
            if stop:
                result.stopped_by = stop
                break
            batch = check_online_batch(view, batch_from(policy.act(view)))
            if config.max_attempts is not None:
                batch = batch[: max(0, config.max_attempts - (len(records) - 1))]
            if not batch:
                result.stopped_by = "policy"
                break
            round_started = time.time()
            jobs = [_job(config, records, index_of, parent, round_no, slot, workspaces)
                    for slot, parent in enumerate(batch)]
            failures = 0
            errors: list[BaseException] = []
            for attempt in in_slot_order(backend.run(jobs)):
                if isinstance(attempt, BaseException):
                    errors.append(attempt)
                    continue
                node = attempt.node
                parent_index = index_of[node["parent"]]
                if node["fail_class"] is None:
                    node["fail_class"] = stagnation_class(
                        branch_scores(records, index_of, parent_index, negate), _oriented(node, negate)
                    )
                writer.append(node)
                index_of[node["id"]] = len(records) - 1
                ledger.append(attempt.evidence)
                failures += node["score"] is None
                spent_usd += _usd(node)
            if errors:
                raise AttemptFailed(
                    f"round {round_no}: {len(errors)} of {len(jobs)} attempts could not run "
                    f"({_error_text(errors[0])}); the {len(jobs) - len(errors)} that finished "
                    f"are recorded; fix the cause and continue with --resume"
                ) from errors[0]
            stats = RoundStats(round_no, len(jobs), failures, _best(records, negate), time.time() - round_started)
            result.round_stats.append(stats)
            result.failures += failures
            if on_round:
                on_round(stats, result)
            # a round only appends: the earlier nodes' views stand
            view = tree_view(records, writer.meta, config.settings, rounds=round_no, known=view.nodes)
        else:
            result.stopped_by = "rounds"
        best_index = _best_index(records, negate)
        result.survival = survival_check(
            task, str(records[best_index].get("code") or ""), records[best_index]["score"], config.survival_repeats
        )
        writer.update_meta(survival=result.survival.to_dict() | {"node": records[best_index]["id"]})
        writer.finish()
    finally:
        backend.close()
        ledger.close()
        writer.close()
        shutil.rmtree(workspaces, ignore_errors=True)
    result.nodes = len(writer.records)
    result.attempts = result.nodes - 1
    result.rounds = max((int(r.get("round") or 0) for r in writer.records), default=0)
    result.best_score = _best(writer.records, negate)
    result.seconds = time.time() - started
    return result


def in_slot_order(finished: Iterable[tuple[int, Finished]]) -> Iterator[Finished]:
    """A round's results in the batch's slot order, each as soon as it and every earlier slot
    have finished. The world then stores a round's nodes in the order the policy chose their
    parents (the order replay reveals them in), not in the order the workers happened to finish,
    so replaying the recording policy gives its tree back and the same seed gives the same world."""
    held: dict[int, Finished] = {}
    next_slot = 0
    for slot, result in finished:
        held[slot] = result
        while next_slot in held:
            yield held.pop(next_slot)
            next_slot += 1
    for slot in sorted(held):  # only if a backend skipped a slot: still in slot order
        yield held.pop(slot)


def _job(config: GrowConfig, records: list[dict[str, Any]], index_of: dict[str, int], parent: int,
         round_no: int, slot: int, workspaces: Path) -> AttemptJob:
    node_id = f"r{round_no}w{slot}"
    return AttemptJob(
        task=config.task, agent=config.agent, api_base=config.api_base,
        parent=parent_context(records, index_of, parent), parent_id=records[parent]["id"],
        node_id=node_id, round=round_no, worker=slot, seed=[config.seed, round_no, slot],
        workdir=str(workspaces / node_id),
    )


def _usd(record: dict[str, Any]) -> float:
    cost = record.get("cost")
    value = cost.get("usd", 0.0) if isinstance(cost, dict) else 0.0
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0


def _budget_stop(config: GrowConfig, attempts: int, seconds: float, usd: float) -> str | None:
    if config.max_attempts is not None and attempts >= config.max_attempts:
        return "max_attempts"
    if config.max_seconds is not None and seconds >= config.max_seconds:
        return "max_seconds"
    if config.max_usd is not None and usd >= config.max_usd:
        return "max_usd"
    return None


def _oriented(record: dict[str, Any], negate: bool) -> float | None:
    score = record.get("score")
    return None if score is None else (-score if negate else score)


def _best_index(records: list[dict[str, Any]], negate: bool) -> int:
    scored = [(s, i) for i, r in enumerate(records) if (s := _oriented(r, negate)) is not None]
    return max(scored)[1] if scored else 0


def _best(records: list[dict[str, Any]], negate: bool) -> float | None:
    return records[_best_index(records, negate)].get("score")


def write_summary(result: GrowResult) -> Path:
    path = result.folder / "run_summary.json"
    # the summary quotes the survival check's note, which may quote a candidate's error
    path.write_text(json.dumps(redact_value(result.summary()), indent=2, default=str) + "\n", encoding="utf-8")
    return path
