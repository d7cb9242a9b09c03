"""The outer loop (Dream-RSI's recursive self-improvement, docs/concepts/dreaming.md): ``dream-gym rsi``.

For t = 1 … T: an online rollout with π_t (the online module, ``dream_gym.online.loop.grow``:
W attempts per round, at most K1 rounds) grows a new world; the world joins the history H (the
``--history`` worlds plus every world grown so far); an improvement step builds M versions of
π_t and keeps the argmax on H; the deployed version is π_(t+1). Only the policy changes: the
task, the discovery agent, the evaluator and every interface stay fixed.

The run folder::

    fingerprint.json         settings; --resume with other settings is refused, naming the difference
    rsi.jsonl                one line per finished rollout and per finished iteration (costs included)
    worlds/iter-<t>/         the world grown in iteration t (resumed by grow after a crash)
    dream/                   the improvement steps: dream.jsonl, journal.jsonl, revisions/<t>/, ratchet.png
    policies/pi_<t>.py       the policy deployed for rollout t (t >= 2; rollout 1 runs --policy itself)
    summary.json, summary.md per iteration: discovery and development cost, scores, attempts per round

``kill -9`` at any moment, then ``--resume``: a finished rollout or phase is read back, an
interrupted rollout continues the same world (no finished attempt is lost), an interrupted
phase continues with its next version (no finished version is redone), and an LLM call whose
reply is in the journal is not sent again.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from dream_gym.dream.held_out import HELD_OUT_MARGIN
from dream_gym.dream.improve import NO_HELD_OUT, DreamSettings, PhaseResult, improvement_step
from dream_gym.dream.runfolder import JsonLog, check_fingerprint, write_json
from dream_gym.evaluation.journal import policy_digest, world_identity
from dream_gym.infrastructure.durable import read_jsonl, write_atomic
from dream_gym.infrastructure.locks import folder_lock
from dream_gym.replay.settings import DEFAULT_BETA, STANDARD_WORKERS
from dream_gym.world.files import NODES_FILE, WORLD_FILE
from dream_gym.world.tree import World, load_world

LEDGER_FILE = "rsi.jsonl"


@dataclass(frozen=True)
class RsiConfig:
    """Arguments of ``dream-gym rsi``."""

    task: str
    policy: str  # START: π_1
    out: Path
    iterations: int  # T
    settings: DreamSettings  # M and the replay scoring
    agent: str = "builtin"
    developer: str = "builtin"
    workers: int = STANDARD_WORKERS  # W (no world is recorded yet to take it from)
    rounds: int = 10  # K1
    history: str | None = None  # extra worlds in H from the start
    beta: float = DEFAULT_BETA  # the budget preference the policy sees online
    api_base: str | None = None
    backend: str = "process"  # the online worker pool
    validate: str | None = None  # held-out worlds of every phase (None: automatic; "none": no check)
    resume: bool = False
    command: str | None = None

    def __post_init__(self) -> None:
        """Refuse, before the run folder is made, what the first iteration would: the iterations,
        the developer's package, and what grow refuses (W, the rounds, the agent's litellm, the backend)."""
        if self.iterations < 1:
            raise ValueError(f"iterations must be >= 1, got {self.iterations}")
        from dream_gym.dream.developers import check_api_base_used, check_developer
        from dream_gym.online.loop import GrowConfig

        check_api_base_used(self.api_base, self.developer, self.agent)
        check_developer(self.developer, self.api_base)
        GrowConfig(task=self.task, out=self.out, agent=self.agent, workers=self.workers, rounds=self.rounds,
                   beta=self.beta, backend=self.backend)


#: t, attempts N, rounds k, attempts per round, best of the rollout, best of rollouts 1..t, the incumbent's
#: and the deployed version's score on H, the deployed version m*, the discovery attempts' tokens and
#: USD, the development calls, their tokens and USD, and both summed.
SUMMARY_COLUMNS = ("t", "N", "k", "N/k", "best", "best<=t", "H:π_t", "H:π_t+1", "m*", "disc tok", "disc $",
                   "dev calls", "dev tok", "dev $", "total tok", "total $")


@dataclass
class Iteration:
    """One iteration's record (a line of rsi.jsonl and a row of the summary)."""

    t: int
    policy: str  # π_t
    world: str  # the grown world's folder (relative to the run folder)
    attempts: int
    rounds: int
    best_score: float | None  # best of this rollout (the task's own scale and direction)
    best_so_far: float | None  # over every rollout up to t
    attempts_per_round: float
    discovery: dict[str, float] = field(default_factory=dict)  # attempts, tokens_in, tokens_out, usd
    development: dict[str, float] = field(default_factory=dict)  # calls, tokens_in, tokens_out, usd, seconds
    total_usd: float = 0.0
    incumbent_score: float | None = None
    deployed_score: float | None = None
    deployed: str = ""  # π_(t+1)
    deployed_m: int = 0

    #: the summary's columns (summary.md and rsi's table)
    columns: ClassVar[tuple[str, ...]] = SUMMARY_COLUMNS

    def to_dict(self) -> dict[str, Any]:
        return {"type": "iteration", **asdict(self)}

    def cells(self) -> list[str]:
        """The row of the summary, one cell per column."""
        def num(value: float | None, fmt: str = ".4f") -> str:
            return "-" if value is None else format(value, fmt)

        dev_tokens = self.development.get("tokens_in", 0.0) + self.development.get("tokens_out", 0.0)
        disc_tokens = self.discovery.get("tokens_in", 0.0) + self.discovery.get("tokens_out", 0.0)
        return [
            str(self.t), str(self.attempts), str(self.rounds), f"{self.attempts_per_round:.2f}",
            num(self.best_score, ".6g"), num(self.best_so_far, ".6g"), num(self.incumbent_score),
            num(self.deployed_score), str(self.deployed_m), f"{disc_tokens:.0f}", f"{self.discovery.get('usd', 0.0):.4f}",
            f"{self.development.get('calls', 0.0):.0f}", f"{dev_tokens:.0f}", f"{self.development.get('usd', 0.0):.4f}",
            f"{disc_tokens + dev_tokens:.0f}", f"{self.total_usd:.4f}",
        ]


Events = Callable[[str, dict[str, Any]], None]


def _discovery_cost(world: World) -> dict[str, float]:
    totals = {"attempts": float(world.size - 1), "tokens_in": 0.0, "tokens_out": 0.0, "usd": 0.0}
    for record in world.records[1:]:
        cost = record.get("cost")
        if isinstance(cost, dict):
            for key in ("tokens_in", "tokens_out", "usd"):
                value = cost.get(key)
                if isinstance(value, (int, float)) and math.isfinite(value):
                    totals[key] += float(value)
    return totals


def _better(a: float | None, b: float | None, direction: str) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b) if direction == "maximize" else min(a, b)


class LoopRun:
    """What both outer loops hold (``dream-gym rsi`` with grow, and with a system): the
    configuration, the run folder, its ledger and rows, the extra history worlds, the settings
    both record and where each iteration's policy is."""

    def __init__(self, config: Any, events: Events):
        self.config = config  # each loop's own configuration (each subclass names its type)
        self.events = events
        self.out = Path(config.out)
        self.ledger = JsonLog(self.out / LEDGER_FILE)
        self.rows = read_jsonl(self.ledger.path)
        self.extra, self.validation = loop_worlds(config)

    def shared_fingerprint(self) -> dict[str, Any]:
        """The settings both loops record in fingerprint.json (each adds its own)."""
        c = self.config
        s = c.settings.scoring
        return {
            "task": c.task, "policy": c.policy, "policy_sha256": policy_digest(c.policy),
            "developer": c.developer, "revisions": c.settings.revisions, "carry": c.settings.carry,
            "workers": c.workers, "max_rounds": s.replay.max_rounds, "betas": list(s.betas),
            "beta1": s.replay.beta1, "beta2": s.replay.beta2, "select": s.select, "lam": s.lam, "beta": c.beta, "seed": s.seed,
            "history": {w.id: world_identity(w) for w in self.extra},
            **self._held_out_fingerprint(),
        }

    def _held_out_fingerprint(self) -> dict[str, Any]:
        """The held-out settings where they are not the defaults (a run from before they could be
        set records none, and resumes)."""
        settings = self.config.settings
        recorded: dict[str, Any] = {}
        if self.validation is not None:
            recorded["validate"] = {w.id: world_identity(w) for w in self.validation}
        if settings.gate:
            recorded["gate"] = True
        if settings.held_out_margin != HELD_OUT_MARGIN:  # inf (report only) as text: JSON has no inf
            margin = settings.held_out_margin
            recorded["held_out_margin"] = margin if math.isfinite(margin) else str(margin)
        return recorded

    def policy_of(self, t: int) -> str:
        """The policy iteration ``t`` runs: the configured one first, then each dreamed one."""
        return self.config.policy if t == 1 else str(self.out / "policies" / f"pi_{t}.py")

    def fingerprint(self) -> dict[str, Any]:
        """The settings fingerprint.json records (:meth:`shared_fingerprint` and the loop's own)."""
        raise NotImplementedError(type(self).__name__)

    def iteration(self, t: int) -> Iteration:
        """Run (or finish, or read back) iteration ``t``."""
        raise NotImplementedError(type(self).__name__)


def loop_worlds(config: Any) -> tuple[list[World], list[World] | None]:
    """The extra history worlds of either loop and its held-out worlds (None: each phase's
    automatic ones; empty: no check); held-out worlds that are in the history are refused."""
    from dream_gym.evaluation.evaluate import resolve_worlds
    from dream_gym.evaluation.world_specs import check_distinct_runs, check_held_out

    extra = resolve_worlds(config.history) if config.history else []
    check_distinct_runs(extra, "history")
    if config.validate is None:
        return extra, None
    validation = [] if config.validate == NO_HELD_OUT else resolve_worlds(config.validate)
    check_held_out(extra, validation, "history")
    return extra, validation


def run_loop(config: Any, make_run: Callable[[], LoopRun]) -> list[Any]:
    """Either outer loop to its end: one writer per run folder (the lock taken before
    ``make_run`` reads the ledger), a resumed run's settings checked, every iteration, then the
    summaries."""
    loop_worlds(config)  # what it refuses is refused before the run folder is made
    with folder_lock(config.out):
        run = make_run()
        check_fingerprint(run.out, run.fingerprint(), resume=config.resume, command="dream-gym rsi")
        finished = max((int(r["t"]) for r in run.rows if r.get("type") == "iteration"), default=0)
        if finished > config.iterations:  # the summaries would be cut to the first iterations, the rest kept
            raise ValueError(f"{run.out} has finished {finished} iterations: --iterations {config.iterations} is "
                             f"fewer (it may grow; give {finished} or more)")
        records = [run.iteration(t) for t in range(1, config.iterations + 1)]
        write_json(run.out / "summary.json", {"iterations": [asdict(r) for r in records]})
        write_atomic(run.out / "summary.md", summary_markdown(records))
    return records


class _Run(LoopRun):
    config: RsiConfig

    def fingerprint(self) -> dict[str, Any]:
        c = self.config
        return {**self.shared_fingerprint(), "agent": c.agent, "rounds": c.rounds}

    def world_dir(self, t: int) -> Path:
        return self.out / "worlds" / f"iter-{t}"

    # -- the online rollout -----------------------------------------------------------------
    def rollout(self, t: int) -> World:
        folder = self.world_dir(t)
        if any(r.get("type") == "rollout" and r["t"] == t for r in self.rows):
            return load_world(folder)
        meta_path = folder / WORLD_FILE
        finished = meta_path.is_file() and json.loads(meta_path.read_text(encoding="utf-8")).get("sha256")
        if not finished:
            self._grow(t, folder)
        world = load_world(folder)
        row = {"type": "rollout", "t": t, "world": str(folder.relative_to(self.out)), "nodes": world.size}
        self.ledger.append(row)
        self.rows.append(row)
        return world

    def _grow(self, t: int, folder: Path) -> None:
        from dream_gym.online.loop import GrowConfig, grow, write_summary
        from dream_gym.policy_files import load_policy

        c = self.config
        if (folder / WORLD_FILE).is_file() and not (folder / NODES_FILE).exists():
            shutil.rmtree(folder)  # killed between creating world.json and nodes.jsonl: nothing recorded
        grow_config = GrowConfig(
            task=c.task, out=folder, agent=c.agent, policy=self.policy_of(t), workers=c.workers, rounds=c.rounds,
            seed=c.settings.scoring.seed * 1000 + t, beta=c.beta, backend=c.backend, api_base=c.api_base,
            world_id=f"{self.out.name}-iter{t}", resume=(folder / NODES_FILE).exists(), command=c.command,
        )
        policy = load_policy(self.policy_of(t))
        try:
            result = grow(grow_config, policy, on_round=lambda stats, _: self.events("round", {"t": t, "stats": stats}))
        finally:
            close = getattr(policy, "close", None)
            if callable(close):
                close()
        write_summary(result)

    # -- the improvement step and deployment ------------------------------------------------
    def history(self, t: int) -> list[World]:
        return [*self.extra, *(load_world(self.world_dir(i)) for i in range(1, t + 1))]

    def dream(self, t: int) -> PhaseResult:
        from dream_gym.dream.developers import make_developer, say_retries

        c = self.config
        developer = make_developer(c.developer, self.out / "dream", api_base=c.api_base, seed=c.settings.scoring.seed)
        say_retries(developer, lambda text: self.events("llm_retry", {"text": text}))
        return improvement_step(self.out / "dream", t, self.policy_of(t), self.history(t), developer, c.settings,
                                validation=self.validation, events=self.events)

    def iteration(self, t: int) -> Iteration:
        done = next((r for r in self.rows if r.get("type") == "iteration" and r["t"] == t), None)
        if done is not None:
            return Iteration(**{k: v for k, v in done.items() if k != "type"})
        self.events("iteration", {"t": t, "iterations": self.config.iterations, "policy": self.policy_of(t)})
        world = self.rollout(t)
        self.events("rollout", {"t": t, "world": world})
        phase = self.dream(t)
        deployed = self.out / "policies" / f"pi_{t + 1}.py"
        write_atomic(deployed, (self.out / "dream" / phase.deployed).read_text(encoding="utf-8"))
        previous = next((r for r in self.rows if r.get("type") == "iteration" and r["t"] == t - 1), None)
        best_so_far = _better(previous["best_so_far"] if previous else None, _best_raw(world), world.direction)
        discovery = _discovery_cost(world)
        rounds = max((int(r.get("round") or 0) for r in world.records), default=0)
        record = Iteration(
            t=t, policy=self.policy_of(t), world=str(self.world_dir(t).relative_to(self.out)),
            attempts=world.size - 1, rounds=rounds, best_score=_best_raw(world),
            best_so_far=best_so_far, attempts_per_round=(world.size - 1) / max(1, rounds), discovery=discovery,
            development=dict(phase.cost), total_usd=discovery["usd"] + phase.cost.get("usd", 0.0),
            incumbent_score=phase.incumbent_score, deployed_score=next(
                (v.score for v in phase.versions if v.m == phase.deployed_m), None),
            deployed=str(deployed.relative_to(self.out)), deployed_m=phase.deployed_m,
        )
        self.ledger.append(record.to_dict())
        self.rows.append(record.to_dict())
        self.events("iteration_done", {"record": record, "phase": phase})
        return record


def _best_raw(world: World) -> float | None:
    """The best recorded score of a world in the task's own scale (None when nothing scored)."""
    scores = [r["score"] for r in world.records if r.get("score") is not None]
    if not scores:
        return None
    return max(scores) if world.direction == "maximize" else min(scores)


def run_rsi(config: RsiConfig, events: Events | None = None) -> list[Iteration]:
    """Run (or resume) the outer loop; returns one record per iteration."""
    events = events or (lambda kind, data: None)
    return run_loop(config, lambda: _Run(config, events))


def summary_markdown(records: list[Iteration]) -> str:
    columns = type(records[0]).columns if records else Iteration.columns
    lines = ["| " + " | ".join(columns) + " |", "|" + "---:|" * len(columns)]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in records]
    return "\n".join(lines) + "\n"
