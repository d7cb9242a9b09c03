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

One attempt, its deadlines and the backends that run a round's attempts are
:mod:`dream_gym.online.attempts`; the view of the real tree the policy and the agent see is
:mod:`dream_gym.online.real_tree`. This module holds the run and still names what they hold.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from dream_gym.infrastructure.jobs import require_ray
from dream_gym.infrastructure.locks import folder_lock
from dream_gym.infrastructure.redact import redact_value
from dream_gym.infrastructure.sandbox import require_sandbox
from dream_gym.infrastructure.seeds import check_seed
from dream_gym.infrastructure.work_folders import work_folder
from dream_gym.online.attempts import (
    AGENT_ALLOWANCE_S,
    PROPOSAL_SUFFIX,
    PROPOSED,
    WORKSPACE,
    AttemptError,
    AttemptFailed,
    AttemptJob,
    AttemptResult,
    Backend,
    Deadlines,
    error_text,
    make_agent,
    overstayed,
    run_attempt,
)
from dream_gym.online.catch_up import catch_up
from dream_gym.online.evidence import EvidenceLedger, Survival, stagnation_class, survival_check
from dream_gym.online.real_tree import (
    HISTORY_LIMIT,
    branch_scores,
    check_online_batch,
    oriented,
    parent_context,
    tree_view,
)
from dream_gym.online.tasks import get_task
from dream_gym.policy import Policy, RunContext, batch_from
from dream_gym.policy_files.specs import with_recorded_policy
from dream_gym.replay.settings import DEFAULT_BETA, STANDARD_WORKERS, ReplaySettings
from dream_gym.world.files import NODES_GZ_FILE, RUN_SUMMARY_FILE
from dream_gym.world.tree import MAX_WORKERS, NODES_FILE
from dream_gym.world.writer import (
    WorldWriter,
    check_empty_folder,
    check_resumable_folder,
    check_resumed_settings,
    new_meta,
)

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

    def __post_init__(self) -> None:
        """Refuse a setting no run can have when the config is made: before any folder is."""
        if self.workers < 1 or self.rounds < 1:
            raise ValueError(f"workers (W) and rounds must be >= 1, got {self.workers} and {self.rounds}")
        if self.workers > MAX_WORKERS:  # a world holds no more
            raise ValueError(f"workers (W) must be at most {MAX_WORKERS}, got {self.workers}")
        check_seed(self.seed)
        for name in ("max_attempts", "max_seconds", "max_usd", "evaluation_timeout_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:  # NaN too
                raise ValueError(f"{name} must be > 0 (or not given), got {value}")
        self.settings  # noqa: B018 - ReplaySettings checks W, beta and the frontier rule
        if self.agent != "builtin":
            from dream_gym.infrastructure.llm import (
                check_access,
                check_model_name,
                check_priced,
                require_litellm,
            )

            require_litellm()
            check_model_name(self.agent)
            if self.max_usd is not None:
                check_priced(self.agent)
            check_access(self.agent, self.api_base)
        elif self.max_usd is not None:  # the run would say "stopped by rounds" of a limit that never applied
            raise ValueError("max_usd: the built-in agent makes no LLM call, so it spends nothing; a dollar limit "
                             "applies to an LLM agent (--agent MODEL)")
        if self.backend not in ("process", "ray", "serial"):
            raise ValueError(f"backend must be 'process', 'ray' or 'serial', got {self.backend!r}")
        if self.backend == "ray":
            require_ray()

    @property
    def settings(self) -> ReplaySettings:
        """What the policy is shown: W, beta, the frontier rule and K1 as the round limit."""
        return ReplaySettings(self.workers, self.beta, max_rounds=self.rounds, frontier=self.frontier)


@dataclass
class RoundStats:
    round: int
    attempts: int
    failures: int
    best_score: float | None
    seconds: float


@dataclass
class GrowResult:
    """A run of ``grow``: the world's nodes, rounds, attempts, failed attempts and best score
    (all of it, a resumed run's earlier part too), and what this run did: its attempts, failed
    attempts, seconds and rounds (``round_stats``)."""

    folder: Path
    nodes: int
    rounds: int
    attempts: int
    failures_this_run: int
    best_score: float | None
    seconds: float
    stopped_by: str
    survival: Survival | None
    round_stats: list[RoundStats] = field(default_factory=list)
    repaired: str | None = None
    resumed: str | None = None  # how a resumed run caught up (dream_gym.online.catch_up)
    failures: int = 0  # failed attempts in the world
    attempts_this_run: int = 0

    def summary(self) -> dict[str, Any]:
        data = asdict(self)
        data["folder"] = str(self.folder)
        return data


# -- the run -------------------------------------------------------------------------------
def _check_policy_takes(config: GrowConfig, task: Any, policy: Policy) -> None:
    """Start ``policy`` on the run it is about to play, before its world is made: one that refuses
    it (a model trained at another W) leaves no world whose W a retry could not change. The run
    resets it again once the root is recorded (:func:`~dream_gym.online.catch_up.catch_up`)."""
    settings = config.settings
    policy.reset(RunContext(
        workers=config.workers, beta=settings.beta, beta1=settings.beta1, beta2=settings.beta2,
        max_rounds=settings.max_rounds, task_name=task.name, task_description=task.description,
        direction=task.direction, frontier_rule=config.frontier, seed=config.seed))


def _open_world(config: GrowConfig, task: Any) -> WorldWriter:
    """The world's writer, which holds the folder's lock for the whole run. The lock is taken
    before anything is looked at, so a second grow of the same folder is refused naming the
    first (not told to pass --resume); the writer takes it again (re-entrant) and keeps it."""
    folder = Path(config.out)
    with folder_lock(folder):
        if (folder / NODES_GZ_FILE).exists():  # a finished world, compressed: it grows as its plain nodes file
            raise FileExistsError(f"{folder} holds a compressed world ({NODES_GZ_FILE}), which does not grow as it "
                                  f"is: `dream-gym worlds decompress {folder}` first, then --resume")
        if (folder / NODES_FILE).exists():
            if not config.resume:
                raise FileExistsError(f"{folder} already holds a world; pass --resume to continue it")
            writer = WorldWriter.open(folder)
            try:
                if writer.meta["task"]["name"] != task.name:
                    raise ValueError(f"{folder} holds a world of task {writer.meta['task']['name']!r}, not {task.name!r}")
                check_resumed_settings(folder, with_recorded_policy({"policy_params": {}, **writer.meta}), {
                    **with_recorded_policy({"policy": config.policy, "policy_params": dict(config.policy_params)}),
                    "workers": config.workers, "frontier": config.frontier, "agent": config.agent,
                    "seed": config.seed, "beta": config.beta})
                recorded_rounds = writer.meta.get("rounds")
                grown = max((int(r.get("round") or 0) for r in writer.records), default=0)
                if isinstance(recorded_rounds, int) and config.rounds != recorded_rounds and config.rounds >= grown:
                    # grown to another limit: world.json says how many rounds and by which command
                    extended: dict[str, Any] = {"rounds": config.rounds}
                    if config.command:
                        extended["command"] = config.command
                    writer.update_meta(**extended)
            except BaseException:
                writer.close()
                raise
            return writer
        if config.resume:  # a resumed run killed before its world was made left nothing but its lock
            check_resumable_folder(folder)
        else:
            check_empty_folder(folder)
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
    if not (Path(config.out) / NODES_FILE).exists():
        _check_policy_takes(config, task, policy)
    writer = _open_world(config, task)
    folder = writer.folder
    ledger = EvidenceLedger(folder, [r["id"] for r in writer.records])
    negate = task.direction == "minimize"
    backend = Backend(config.backend, config.workers, deadlines)
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
        resumed = catch_up(policy, records, writer.meta, config.settings, config.seed, config.max_attempts)
        view, missing = resumed.view, resumed.missing
        if done_rounds:
            result.resumed = resumed.note or (
                f"the policy chose its {done_rounds} recorded round(s) again"
                + (f"; round {done_rounds}'s {len(missing)} slot(s) with no node (cut short by a kill or by "
                   "--max-attempts) are run now" if missing else ""))
        first_round = done_rounds if missing else done_rounds + 1
        for round_no in range(first_round, config.rounds + 1):
            if missing:  # the slots of the cut round that the kill lost, chosen again
                slots, missing = missing, []
            else:
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
                slots = list(enumerate(batch))
            round_started = time.time()
            jobs = [_job(config, records, index_of, parent, round_no, slot, workspaces) for slot, parent in slots]
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
                        branch_scores(records, index_of, parent_index, negate), oriented(node, negate)
                    )
                ledger.append(attempt.evidence)  # first: a kill between the two leaves no node without it
                writer.append(node)
                index_of[node["id"]] = len(records) - 1
                failures += node["score"] is None
                spent_usd += _usd(node)
            if errors:
                raise AttemptFailed(
                    f"round {round_no}: {len(errors)} of {len(jobs)} attempts could not run "
                    f"({error_text(errors[0])}); the {len(jobs) - len(errors)} that finished "
                    f"are recorded; fix the cause and continue with --resume"
                ) from errors[0]
            stats = RoundStats(round_no, len(jobs), failures, _best(records, negate), time.time() - round_started)
            result.round_stats.append(stats)
            result.failures_this_run += failures
            result.attempts_this_run += len(jobs)
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
    result.failures = sum(1 for record in writer.records[1:] if record.get("score") is None)
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


def _best_index(records: list[dict[str, Any]], negate: bool) -> int:
    scored = [(s, i) for i, r in enumerate(records) if (s := oriented(r, negate)) is not None]
    return max(scored)[1] if scored else 0


def _best(records: list[dict[str, Any]], negate: bool) -> float | None:
    return records[_best_index(records, negate)].get("score")


def write_summary(result: GrowResult) -> Path:
    path = result.folder / RUN_SUMMARY_FILE
    # the summary quotes the survival check's note, which may quote a candidate's error
    path.write_text(json.dumps(redact_value(result.summary()), indent=2, default=str) + "\n", encoding="utf-8")
    return path


# One attempt and the real tree's views have modules of their own; the loop's docs (this
# module's docstring) and its users name them here, where they imported them from.
__all__ = ["AGENT_ALLOWANCE_S", "HISTORY_LIMIT", "PROPOSAL_SUFFIX", "PROPOSED", "WORKSPACE", "AttemptError",
           "AttemptFailed", "AttemptJob", "AttemptResult", "Deadlines", "Finished", "GrowConfig", "GrowResult",
           "RoundStats", "branch_scores", "check_online_batch", "grow", "in_slot_order", "make_agent", "overstayed",
           "parent_context", "run_attempt", "tree_view", "write_summary"]
