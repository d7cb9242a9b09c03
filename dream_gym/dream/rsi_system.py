"""The outer loop inside a discovery system: ``dream-gym rsi --system openevolve``.

For t = 1 … T: the incumbent policy π_t is deployed through the system's bridge
(:func:`dream_gym.integrations.deploy.deploy`: OpenEvolve's own loop with π_t choosing the
parents, the children from the no-LLM agent server or ``model``), which records its run as a
world; every run of the loop so far is pooled into one world (:func:`dream_gym.datasets.pool.
pool_worlds`); an improvement step builds M versions of π_t and keeps the argmax on that pooled
world (and the ``history`` worlds); the deployed version is π_(t+1).

**Why one pooled world, not the runs side by side.** Replay answers only what was recorded,
and each run recorded where its own policy went. Pooled, a request that one run cannot answer
and another can (a node one run stopped at and another continued, a branch one opened) is
answered; side by side, each version would be scored on each run's narrower record and the
scores averaged, so a version that goes where a later policy went would be refused on every
earlier run. The pool lists the runs oldest first, so its order is the order of first
creation; the task's runs merge where they made the same program from the same parent chain.
Runs of a noisy task (or of a task given as files, whose evaluations are seeded from each run's
seed) can score the same program differently: ``scores`` says what the pool does then (default
``"first"``: the first-recorded score is kept; the count is in the ledger).

The run folder::

    fingerprint.json       settings; --resume with other settings is refused, naming the difference
    rsi.jsonl              one line per finished run, pool and iteration
    runs/iter-<t>/         the world deployment t recorded (the system's own output inside)
    pools/iter-<t>/        runs 1 … t pooled: the history phase t dreams on
    dream/                 the improvement steps (dream.jsonl, journal.jsonl, revisions/<t>/, ratchet.png)
    policies/pi_<t>.py     the policy deployed for run t (t >= 2; run 1 runs the start policy itself)
    summary.json, .md      per iteration: programs (invalid ones too), best score, scores on the
                           history, costs, the pool's size, merged copies and score disagreements

``kill -9`` at any moment, then ``resume``: a finished run, pool or phase is read back; an
interrupted run continues the same world (the bridge's own resume); an interrupted pool is
written again (it is a function of the runs); an interrupted phase continues with its next
version. The run holds its folder's lock throughout.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from dream_gym.datasets.pool import POOL_SCORES
from dream_gym.dream.improve import DreamSettings, PhaseResult, improvement_step
from dream_gym.dream.rsi import (
    Events,
    Iteration,
    LoopRun,
    _best_raw,
    _better,
    _discovery_cost,
    run_loop,
)
from dream_gym.infrastructure.durable import write_atomic
from dream_gym.replay.settings import DEFAULT_BETA
from dream_gym.world.files import NODES_FILE, is_finished
from dream_gym.world.tree import World, load_world

LEDGER_FILE = "rsi.jsonl"


@dataclass(frozen=True)
class SystemRsiConfig:
    """Arguments of ``dream-gym rsi --system``."""

    system: str
    task: str  # a built-in task or initial_program.py,evaluator.py
    policy: str  # START: π_1
    out: Path
    iterations: int  # T
    settings: DreamSettings
    budget: int  # programs each deployment proposes
    workers: int = 2  # W: the system's parallel evaluations
    developer: str = "builtin"
    model: str | None = None  # the system's LLM; None: dream_gym's no-LLM agent server
    api_base: str | None = None
    history: str | None = None  # extra worlds in H from the start, beside the pool
    beta: float = DEFAULT_BETA
    scores: str = POOL_SCORES
    options: dict[str, Any] = field(default_factory=dict)  # the system's settings
    read: tuple[Path, ...] = ()  # folders a task given as files may read (deploy's --read)
    validate: str | None = None  # held-out worlds of every phase (None: automatic; "none": no check)
    resume: bool = False
    command: str | None = None

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise ValueError(f"iterations must be >= 1, got {self.iterations}")
        if self.budget < 1 or self.workers < 1:
            raise ValueError(f"budget and workers (W) must be >= 1, got {self.budget} and {self.workers}")
        from dream_gym.dream.developers import check_api_base_used, check_developer

        check_api_base_used(self.api_base, self.developer, self.model)  # before the run folder is made
        check_developer(self.developer, self.api_base)


@dataclass
class SystemIteration(Iteration):
    """One iteration's record: the rollout is the system's run; ``pool`` the history it joined."""

    system: str = ""
    invalid: int = 0  # programs of the run without a valid score
    stopped_by: str = ""  # why the run ended (budget, the policy, ...)
    pool: str = ""  # the pooled world's folder (relative to the run folder)
    pool_nodes: int = 0
    merged: int = 0  # copies the pool merged into a node an earlier run recorded
    disagreements: int = 0  # merged copies whose score differed (kept by the pool's rule)

    #: rsi's columns, the run's invalid programs after N, and the pool's size, merged copies and
    #: score disagreements at the end
    columns: ClassVar[tuple[str, ...]] = (*Iteration.columns[:2], "invalid", *Iteration.columns[2:], "pool",
                                          "merged", "disagree")

    def cells(self) -> list[str]:
        row = super().cells()
        return [*row[:2], str(self.invalid), *row[2:], str(self.pool_nodes), str(self.merged), str(self.disagreements)]


class _SystemRun(LoopRun):
    config: SystemRsiConfig

    def fingerprint(self) -> dict[str, Any]:
        c = self.config
        return {**self.shared_fingerprint(), "system": c.system, "model": c.model, "budget": c.budget,
                "options": dict(c.options), "read": [str(path) for path in c.read], "scores": c.scores}

    def row(self, kind: str, t: int) -> dict[str, Any] | None:
        return next((r for r in self.rows if r.get("type") == kind and r["t"] == t), None)

    def note(self, row: dict[str, Any]) -> None:
        self.ledger.append(row)
        self.rows.append(row)

    def once(self, kind: str, t: int, folder: Path, make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The ledger's ``kind`` row of iteration t, made by ``make`` (its world in ``folder``)
        and said to the events where the ledger does not hold it yet."""
        done = self.row(kind, t)
        if done is None:
            done = {"type": kind, "t": t, "world": str(folder.relative_to(self.out)), **make()}
            self.note(done)
            self.events(kind, {"row": done})
        return done

    # -- the deployment -----------------------------------------------------------------------
    def run_dir(self, t: int) -> Path:
        return self.out / "runs" / f"iter-{t}"

    def deployment(self, t: int) -> tuple[World, dict[str, Any]]:
        """Run t's world and what the bridge said of it (read back when the ledger has it)."""
        folder = self.run_dir(t)
        done = self.once("run", t, folder, lambda: self._deploy(t, folder))
        return load_world(folder), done

    def _deploy(self, t: int, folder: Path) -> dict[str, Any]:
        from dream_gym.integrations.deploy import DeployRequest, deploy
        from dream_gym.integrations.world_run import was_interrupted

        c = self.config
        if folder.exists() and not (folder / NODES_FILE).exists():
            shutil.rmtree(folder)  # killed before its first node: nothing was recorded
        if is_finished(folder) and not was_interrupted(folder):  # killed between the run's end and its ledger line
            world = load_world(folder)
            invalid = sum(1 for r in world.records[1:] if r.get("score") is None)
            return {"nodes": world.size, "invalid": invalid, "stopped_by": "-", "version": "-", "seconds": 0.0}
        request = DeployRequest(
            system=c.system, task=c.task, out=folder, policy=self.policy_of(t), workers=c.workers, budget=c.budget,
            seed=c.settings.scoring.seed * 1000 + t, model=c.model, api_base=c.api_base, beta=c.beta,
            resume=(folder / NODES_FILE).exists(), world_id=f"{self.out.name}-run{t}", command=c.command,
            options=dict(c.options), read=tuple(c.read),
        )
        self.events("deploy", {"t": t, "folder": folder, "budget": c.budget})
        try:
            result = deploy(request)
        finally:
            self.events("deploy_end", {"t": t})
        if result.stopped_by == "shutdown":  # Ctrl-C or SIGTERM reached the system's run: the loop stops with it
            raise KeyboardInterrupt  # (the CLI says "interrupted"; --resume continues this run)
        return {"nodes": result.nodes, "invalid": result.invalid, "stopped_by": result.stopped_by,
                "version": result.version, "seconds": result.seconds}

    # -- the pool -------------------------------------------------------------------------------
    def pool_dir(self, t: int) -> Path:
        return self.out / "pools" / f"iter-{t}"

    def pool(self, t: int) -> tuple[World, dict[str, Any]]:
        """Runs 1 … t pooled (written again when a kill interrupted it: it is a function of the runs)."""
        folder = self.pool_dir(t)
        done = self.once("pool", t, folder, lambda: self._pool(t, folder))
        return load_world(folder), done

    def _pool(self, t: int, folder: Path) -> dict[str, Any]:
        from dream_gym.datasets.pool import pool_worlds

        if folder.exists():
            shutil.rmtree(folder)
        runs = [load_world(self.run_dir(i)) for i in range(1, t + 1)]
        result = pool_worlds(runs, folder, world_id=f"{self.out.name}-pool{t}", scores=self.config.scores)
        return {"nodes": result.nodes, "recorded": result.recorded, "merged": result.merged,
                "disagreements": result.disagreements, "added": result.added}

    # -- the iteration --------------------------------------------------------------------------
    def dream(self, t: int, pooled: World) -> PhaseResult:
        from dream_gym.dream.developers import make_developer, say_retries

        c = self.config
        developer = make_developer(c.developer, self.out / "dream", api_base=c.api_base, seed=c.settings.scoring.seed)
        say_retries(developer, lambda text: self.events("llm_retry", {"text": text}))
        return improvement_step(self.out / "dream", t, self.policy_of(t), [*self.extra, pooled], developer,
                                c.settings, validation=self.validation, events=self.events)

    def iteration(self, t: int) -> SystemIteration:
        done = self.row("iteration", t)
        if done is not None:
            return SystemIteration(**{k: v for k, v in done.items() if k != "type"})
        self.events("iteration", {"t": t, "iterations": self.config.iterations, "policy": self.policy_of(t)})
        world, run = self.deployment(t)
        pooled, pool = self.pool(t)
        phase = self.dream(t, pooled)
        deployed = self.out / "policies" / f"pi_{t + 1}.py"
        write_atomic(deployed, (self.out / "dream" / phase.deployed).read_text(encoding="utf-8"))
        previous = self.row("iteration", t - 1)
        discovery = _discovery_cost(world)
        rounds = max((int(r.get("round") or 0) for r in world.records), default=0)
        record = SystemIteration(
            t=t, policy=self.policy_of(t), world=run["world"], attempts=world.size - 1, rounds=rounds,
            best_score=_best_raw(world), attempts_per_round=(world.size - 1) / max(1, rounds),
            best_so_far=_better(previous["best_so_far"] if previous else None, _best_raw(world), world.direction),
            discovery=discovery, development=dict(phase.cost),
            total_usd=discovery["usd"] + phase.cost.get("usd", 0.0), incumbent_score=phase.incumbent_score,
            deployed_score=next((v.score for v in phase.versions if v.m == phase.deployed_m), None),
            deployed=str(deployed.relative_to(self.out)), deployed_m=phase.deployed_m,
            system=self.config.system, invalid=int(run["invalid"]), stopped_by=str(run["stopped_by"]),
            pool=pool["world"], pool_nodes=int(pool["nodes"]), merged=int(pool["merged"]),
            disagreements=int(pool["disagreements"]),
        )
        self.note(record.to_dict())
        self.events("iteration_done", {"record": record, "phase": phase})
        return record


def run_system_rsi(config: SystemRsiConfig, events: Events | None = None) -> list[SystemIteration]:
    """Run (or resume) the loop inside ``config.system``; returns one record per iteration."""
    from dream_gym.integrations.deploy import SYSTEMS

    if config.system not in SYSTEMS:
        raise ValueError(f"unknown system {config.system!r}; one of {', '.join(sorted(SYSTEMS))}")
    if "," in config.task:  # initial_program.py,evaluator.py: checked before the run folder is made
        for part in config.task.split(",", 1):
            if not Path(part.strip()).is_file():
                raise FileNotFoundError(f"--task {config.task}: {part.strip()} does not exist")
    events = events or (lambda kind, data: None)
    return run_loop(config, lambda: _SystemRun(config, events))


def iteration_line(record: SystemIteration, iterations: int) -> str:
    """The iteration's one line (at most 80 columns for scores of up to 8 characters)."""
    best = "-" if record.best_score is None else f"{record.best_score:.6g}"
    before = "-" if record.incumbent_score is None else f"{record.incumbent_score:.4f}"
    after = "-" if record.deployed_score is None else f"{record.deployed_score:.4f}"
    return (f"{record.t}/{iterations}: {record.attempts} programs ({record.invalid} invalid) best {best}; "
            f"pool {record.pool_nodes}; H {before}->{after} v{record.deployed_m}")

