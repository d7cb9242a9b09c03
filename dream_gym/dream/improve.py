"""The improvement step (one dreaming phase, docs/concepts/dreaming.md): write, check, score and select versions.

:func:`improvement_step` builds M versions π⁰ (the incumbent) … π^(M−1) of the exploration
policy, each a policy file, and keeps the argmax on the history:

1. π⁰ is the incumbent (a built-in or installed policy becomes a small wrapper file);
2. for m = 1 … M−1 the developer reads the feedback (the incumbent's code and replay traces,
   this phase's earlier revisions with their scores and errors) and writes revision m;
3. each revision is validated (parse, interface, a short isolated episode on a tiny world),
   then evaluated isolated on every world of the history at every beta, twice, in separate
   processes (the determinism gate): a revision whose two evaluations differ is refused;
4. the argmax over the selectable versions, the incumbent included, is selected (a tie keeps
   the incumbent);
5. before a selected revision is deployed, it and the incumbent are scored on held-out worlds
   it was not selected on (the validation worlds, or by default one shipped held-out world of
   each task the history does not hold) and the revision is deployed only when the rule of
   :mod:`dream_gym.dream.held_out` allows it: not when any of its episodes there fails or it
   scores more than :data:`~dream_gym.dream.held_out.HELD_OUT_MARGIN` below the incumbent there
   (with ``gate``: below it by any amount). The check is printed and recorded either way.

From phase 2 on, before the first revision, the ``carry`` best versions of earlier phases are
scored exactly on this phase's history (evaluated only on the worlds added since; see
:mod:`dream_gym.dream.carry`) and shown to the developer; a revision whose code is one of them
reuses those scores instead of being evaluated again.

Everything is written to the run folder as it happens (``dream.jsonl``: one line per finished
version and one per finished phase; see :mod:`dream_gym.dream.versions` for the files of each
version), so a run killed at any moment resumes where it was: finished versions and phases are
read back, never redone, and an LLM call whose reply is in the journal is not sent again.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.dream import held_out
from dream_gym.dream.carry import DEFAULT_CARRY, Carried, choose, code_key, complete, earlier_versions
from dream_gym.dream.developer import Developer, EarlierRevision, Feedback, Revision
from dream_gym.dream.runfolder import JsonLog, write_json
from dream_gym.dream.scoring import Scored, ScoringSettings, first_difference, score_policy
from dream_gym.dream.traces import policy_traces
from dream_gym.dream.validate import validate_policy_file
from dream_gym.dream.versions import (
    VersionRecord,
    check_ledger,
    file_sha256,
    incumbent_source,
    phase_dir,
    select,
    version_path,
)
from dream_gym.evaluation.evaluate import load_results
from dream_gym.evaluation.journal import journal_path, policy_digest, world_identity
from dream_gym.evaluation.world_specs import check_distinct_runs, check_held_out
from dream_gym.infrastructure.durable import read_jsonl, write_atomic
from dream_gym.infrastructure.locks import folder_lock
from dream_gym.infrastructure.sandbox import require_sandbox
from dream_gym.world.tree import World

LEDGER_FILE = "dream.jsonl"
#: The ``--validate`` value that turns the held-out check off.
NO_HELD_OUT = "none"
#: PYTHONHASHSEED of the isolated children of the determinism gate's two evaluations.
GATE_HASH_SEEDS = (1, 2)
CHOSEN_FILE = "chosen.py"
RATCHET_FILE = "ratchet.png"


@dataclass(frozen=True)
class DreamSettings:
    """Settings of an improvement step (the same for every phase of a run)."""

    revisions: int  # M, the incumbent included
    scoring: ScoringSettings = field(default_factory=ScoringSettings)
    gate: bool = False  # deploy only when the held-out score does not drop at all
    validation_rounds: int = 3  # decisions of the validation episode on the tiny world
    carry: int = DEFAULT_CARRY  # earlier phases' versions scored exactly on each new history (0: none)
    # a revision more than this below the incumbent on the held-out worlds is not deployed (inf: report only)
    held_out_margin: float = held_out.HELD_OUT_MARGIN

    def __post_init__(self) -> None:
        if self.revisions < 1:
            raise ValueError(f"revisions (M, the incumbent included) must be >= 1, got {self.revisions}")
        if self.carry < 0:
            raise ValueError(f"carry must be >= 0, got {self.carry}")
        if not self.held_out_margin >= 0:
            raise ValueError(f"held_out_margin must be >= 0 (inf: report only), got {self.held_out_margin}")


@dataclass
class PhaseResult:
    """What one phase selected and deployed."""

    phase: int
    incumbent: str  # file of version 0 (relative to the run folder)
    incumbent_score: float | None
    selected_m: int
    selected_score: float | None
    deployed_m: int
    deployed: str  # file of the deployed version
    gain_history: float  # selected - incumbent, on the history
    history: list[str]
    # the held-out check (dream_gym.dream.held_out.report): its worlds, the incumbent's and the
    # selected version's scores there, the gain, errors, the margin and the verdict
    validation: dict[str, Any] | None = None
    gated: bool = False  # the held-out check kept the incumbent although a revision scored higher on H
    warning: str | None = None  # the loud line of a revision refused, or losing ground, on the held-out worlds
    cost: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    carried: list[dict[str, Any]] = field(default_factory=list)  # earlier versions re-scored on this history
    versions: list[VersionRecord] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("versions")
        return {"type": "phase", **data}

    @classmethod
    def from_dict(cls, row: dict[str, Any], versions: list[VersionRecord]) -> PhaseResult:
        data = {k: v for k, v in row.items() if k != "type"}
        return cls(**data, versions=versions)


Events = Callable[[str, dict[str, Any]], None]


def _no_events(kind: str, data: dict[str, Any]) -> None:
    pass


def _sum_costs(records: Sequence[VersionRecord]) -> dict[str, float]:
    keys = ("calls", "tokens_in", "tokens_out", "usd", "seconds", "unpriced")
    return {k: float(sum(r.cost.get(k, 0.0) for r in records)) for k in keys}


class _Phase:
    """One phase's state and steps (the public entry point is :func:`improvement_step`)."""

    def __init__(self, out: Path, phase: int, history: Sequence[World], developer: Developer,
                 settings: DreamSettings, events: Events):
        self.out, self.phase, self.history = out, phase, list(history)
        self.developer, self.settings, self.events = developer, settings, events
        self.scoring = settings.scoring
        self.ledger = JsonLog(out / LEDGER_FILE)
        self.all_rows = read_jsonl(self.ledger.path)
        check_ledger(out, self.all_rows, LEDGER_FILE)
        rows = [r for r in self.all_rows if r.get("phase") == phase]
        self.done_row = next((r for r in rows if r.get("type") == "phase"), None)
        self.records: dict[int, VersionRecord] = {
            r["m"]: VersionRecord.from_dict(r) for r in rows if r.get("type") == "revision"
        }
        self.carry_rows = {tuple(r["source"]): r for r in rows if r.get("type") == "carry"}
        self.past: list[tuple[Carried, dict[str, Any]]] = []  # (version, its completion row), best first
        self.reference = ""

    def rel(self, path: Path) -> str:
        return str(path.relative_to(self.out))

    # -- one version ------------------------------------------------------------------------
    def _gated(self, path: Path, worlds: Sequence[World], out: Path | None = None) -> tuple[Scored, str, str | None]:
        """Score a checked file on ``worlds`` twice, in processes with other hash seeds: the
        first evaluation, and its status ("ok", "failed" or "nondeterministic") with the reason."""
        if out is not None:
            _discard_unfinished(out)
        first = score_policy(path, worlds, self.scoring, extra_file_options={"hash_seed": GATE_HASH_SEEDS[0]},
                             out=out)
        if first.errors:
            more = f" (and {len(first.errors) - 1} more episodes)" if len(first.errors) > 1 else ""
            return first, "failed", first.errors[0] + more
        second: Scored = score_policy(path, worlds, self.scoring, extra_file_options={"hash_seed": GATE_HASH_SEEDS[1]})
        difference = first_difference(first, second)
        if difference is not None:
            return first, "nondeterministic", (
                f"refused as nondeterministic: two evaluations in separate processes differ: {difference}")
        return first, "ok", None

    def _evaluate(self, record: VersionRecord, path: Path) -> VersionRecord:
        """Score a checked version on the history through the determinism gate."""
        scored, status, error = self._gated(path, self.history,
                                            out=version_path(self.out, self.phase, record.m, ".results.jsonl"))
        record.score, record.per_world = scored.score, scored.per_world
        if status != "ok":
            record.status, record.error = status, error
        return record

    # -- versions of earlier phases ---------------------------------------------------------
    def carry_over(self) -> None:
        """Score the best earlier versions exactly on this history (see dream_gym.dream.carry)."""
        if self.phase < 2 or self.settings.carry == 0:
            return
        ids = [w.id for w in self.history]
        versions = earlier_versions(self.all_rows, self.phase, lambda f: (self.out / f).read_text(encoding="utf-8"))
        incumbent_key = code_key((self.out / self.records[0].file).read_text(encoding="utf-8"))
        exclude = {incumbent_key} if incumbent_key is not None else set()
        for version in choose(versions, ids, self.settings.carry, exclude=exclude):
            row = self.carry_rows.get((version.phase, version.m))
            if row is None:
                row = complete(version, self.history, self.out, self.phase, self._completion)
                self.ledger.append(row)
                self.carry_rows[(version.phase, version.m)] = row
                self.events("carry", {"row": row})
            if row["status"] == "ok":
                self.past.append((version, row))
        self.past.sort(key=lambda item: (-item[1]["score"], item[0].phase, item[0].m))

    def _completion(self, path: Path, worlds: list[World]) -> tuple[dict[str, float], str | None, str]:
        scored, status, error = self._gated(path, worlds)
        return scored.per_world, error, status

    def _reuse(self, record: VersionRecord, code: str) -> bool:
        """Give a revision the exact scores of an earlier version with the same code (no re-run)."""
        key = code_key(code)
        for version, row in self.past:
            if version.key == key:
                record.score, record.per_world = row["score"], dict(row["per_world"])
                record.notes += (f"; scores on this history reused from phase {version.phase} version {version.m} "
                                 "(the same code, completed exactly on this history)")
                return True
        return False

    def incumbent(self, spec: str) -> VersionRecord:
        text, self.reference = incumbent_source(spec)
        path = version_path(self.out, self.phase, 0)
        if 0 in self.records:
            return self.records[0]
        started = time.perf_counter()
        write_atomic(path, text)
        record = VersionRecord(self.phase, 0, self.rel(path), "incumbent", notes=f"the incumbent: {spec}")
        record = self._evaluate(record, path)
        if record.status != "incumbent":  # the fallback stays selectable (not refused); say what is wrong with it
            warning = record.error.replace("refused as ", "", 1) if record.error else None
            record.warning, record.status, record.error = warning, "incumbent", None
        record.seconds = time.perf_counter() - started
        self._finish(record)
        return record

    def revision(self, m: int) -> VersionRecord:
        started = time.perf_counter()
        revision = self.developer.propose(self._feedback(m))
        path = version_path(self.out, self.phase, m)
        if revision.prompt is not None:
            write_atomic(version_path(self.out, self.phase, m, ".prompt.md"), revision.prompt)
        if revision.reply is not None:
            write_atomic(version_path(self.out, self.phase, m, ".reply.md"), revision.reply)
        write_atomic(path, revision.code if revision.code is not None else "")
        record = VersionRecord(self.phase, m, self.rel(path), "ok", notes=revision.notes, params=revision.params,
                               cost=dict(revision.cost))
        if revision.code is None:
            record.status, record.error = "invalid", (revision.error or "the developer returned no code") + _cut_note(
                revision)
        else:
            problem = validate_policy_file(
                path, rounds=self.settings.validation_rounds, decision_timeout_s=self.scoring.decision_timeout_s,
                episode_timeout_s=max(self.scoring.decision_timeout_s * self.settings.validation_rounds, 5.0),
                memory_mb=self.scoring.memory_mb,
            )
            if problem is not None:
                record.status, record.error = "invalid", f"validation failed: {problem}{_cut_note(revision)}"
            elif not self._reuse(record, revision.code):
                record = self._evaluate(record, path)
        record.seconds = time.perf_counter() - started
        self._finish(record)
        return record

    def _finish(self, record: VersionRecord) -> None:
        path = self.out / record.file
        record.sha256 = file_sha256(path) if path.is_file() else None
        write_json(version_path(self.out, self.phase, record.m, ".json"), record.to_dict())
        self.ledger.append(record.to_dict())
        self.records[record.m] = record
        self.events("version", {"record": record, "revisions": self.settings.revisions,
                                "best": select(list(self.records.values()))})

    def _earlier(self, record: VersionRecord) -> EarlierRevision:
        code = (self.out / record.file).read_text(encoding="utf-8")
        return EarlierRevision(record.m, code, record.status, record.score if record.selectable else None,
                               record.error, record.params)

    def _feedback(self, m: int) -> Feedback:
        incumbent = self.records[0]
        results = load_results(version_path(self.out, self.phase, 0, ".results.jsonl"))
        traces = policy_traces(self.history, results, self.scoring.replay, lam=self.scoring.lam)
        return Feedback(
            phase=self.phase, m=m, revisions=self.settings.revisions, incumbent=self._earlier(incumbent),
            traces=traces, earlier=tuple(self._earlier(self.records[k]) for k in range(1, m)),
            select=self.scoring.select, betas=tuple(self.scoring.betas), history=tuple(w.id for w in self.history),
            seed=self.scoring.seed, reference=self.reference,
            past=tuple(EarlierRevision(v.m, (self.out / v.file).read_text(encoding="utf-8"), "ok", row["score"],
                                       params=v.params, phase=v.phase) for v, row in self.past),
        )

    # -- the held-out check ------------------------------------------------------------------
    def _on_held_out(self, version: VersionRecord, worlds: Sequence[World]) -> Scored:
        """A version's score on the held-out worlds (its episodes in ``<m>.held_out.results.jsonl``)."""
        out = version_path(self.out, self.phase, version.m, ".held_out.results.jsonl")
        _discard_unfinished(out)
        return score_policy(self.out / version.file, worlds, self.scoring, out=out)

    def held_out_check(self, incumbent: VersionRecord, selected: VersionRecord, worlds: Sequence[World],
                       auto: bool) -> tuple[dict[str, Any], str | None]:
        """Score the incumbent and the selected revision on the held-out worlds; the record of the
        check and why the revision must not be deployed (None: it may be)."""
        self.events("held_out", {"worlds": worlds, "m": selected.m})
        mine, theirs = self._on_held_out(selected, worlds), self._on_held_out(incumbent, worlds)
        refused = held_out.refusal(theirs.score, mine.score, mine.errors, self.settings.held_out_margin,
                                   self.settings.gate)
        check = held_out.report(worlds, auto, theirs.score, mine.score, mine.per_world, mine.errors,
                                self.settings.held_out_margin, refused)
        return check, refused

    # -- the phase --------------------------------------------------------------------------
    def run(self, spec: str, held_out_worlds: Sequence[World], auto: bool) -> PhaseResult:
        started = time.perf_counter()
        versions = [self.incumbent(spec)]
        if self.settings.revisions > 1:
            self.carry_over()
        for m in range(1, self.settings.revisions):
            versions.append(self.records[m] if m in self.records else self.revision(m))
        incumbent, selected = versions[0], select(versions)
        deployed, gated, check, warning = selected, False, None, None
        if held_out_worlds and selected.m != 0:  # a revision is about to be deployed: check it first
            check, refused = self.held_out_check(incumbent, selected, held_out_worlds, auto)
            warning = held_out.warning(selected.m, check, refused)
            if refused is not None:
                deployed, gated = incumbent, True
        gain = (selected.score or 0.0) - (incumbent.score or 0.0) if selected.score is not None else 0.0
        result = PhaseResult(
            phase=self.phase, incumbent=incumbent.file, incumbent_score=incumbent.score, selected_m=selected.m,
            selected_score=selected.score, deployed_m=deployed.m, deployed=deployed.file, gain_history=gain,
            history=[w.id for w in self.history], validation=check, gated=gated, warning=warning,
            cost=_sum_costs(versions), seconds=time.perf_counter() - started, versions=versions,
            carried=[{"source": [v.phase, v.m], "score": row["score"], "evaluated": row["evaluated"]}
                     for v, row in self.past],
        )
        shutil.copyfile(self.out / deployed.file, phase_dir(self.out, self.phase) / CHOSEN_FILE)
        self.ledger.append(result.to_dict())
        self.events("phase", {"result": result})
        return result


def _discard_unfinished(out: Path) -> None:
    """Remove what an evaluation into ``out`` left when its version or held-out check was cut
    short (a kill, Ctrl-C) before its record was written: its journal, and its results file when
    the interruption came after it was whole (during the determinism gate's second evaluation,
    or between the check's two evaluations). The version or check is redone whole; keeping the
    file made the resumed run refuse to overwrite it."""
    journal_path(out).unlink(missing_ok=True)
    out.unlink(missing_ok=True)


def improvement_step(out: str | Path, phase: int, incumbent: str, history: Sequence[World], developer: Developer,
                     settings: DreamSettings, *, validation: Sequence[World] | None = None,
                     events: Events | None = None) -> PhaseResult:
    """Run (or resume, or read back) phase ``phase`` in the run folder ``out``.

    Args:
        out: the run folder (``dream.jsonl``, ``revisions/<phase>/``, ``chosen.py``, ``ratchet.png``).
        phase: the phase number (1, 2, ... in ``dream-gym rsi``; 1 for ``dream-gym dream``).
        incumbent: π⁰, a built-in name, ``module:Class`` or a policy ``.py`` file.
        history: the worlds versions are scored and selected on.
        developer: writes revisions 1 … M−1.
        settings: M, the scoring settings, the gate and the held-out margin.
        validation: the held-out worlds, not used for selection, that a selected revision is
            checked on before it is deployed (:mod:`dream_gym.dream.held_out`); None (default):
            :func:`~dream_gym.dream.held_out.auto_held_out` of the history; empty: no check.
        events: ``events(kind, data)`` for progress: ``"version"`` after each version,
            ``"held_out"`` when the held-out check starts, ``"phase"`` at the end.
    """
    require_sandbox()  # revisions are policy files: they run only where the kernel can sandbox them
    out = Path(out)
    ids = [w.id for w in history]
    if not ids:
        raise ValueError("the history holds no worlds")
    if len(set(ids)) != len(ids):
        raise ValueError(f"history worlds must have distinct ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    auto = validation is None
    worlds = held_out.auto_held_out(history) if validation is None else list(validation)
    if settings.gate and not worlds:
        raise ValueError("the gate needs held-out worlds (--validate)")
    check_distinct_runs(history, "history")
    check_held_out(history, worlds, "history")
    with folder_lock(out):  # one writer per run folder: a second one would write the same versions
        state = _Phase(out, phase, history, developer, settings, events or _no_events)
        if state.done_row is not None:
            versions = [state.records[m] for m in sorted(state.records)]
            result = PhaseResult.from_dict(state.done_row, versions)
        else:
            result = state.run(incumbent, worlds, auto)
        shutil.copyfile(out / result.deployed, out / CHOSEN_FILE)
        from dream_gym.evaluation.plots import plot_ratchet

        plot_ratchet(read_jsonl(out / LEDGER_FILE), out / RATCHET_FILE)
    return result


# --------------------------------------------------------------------------- dream-gym dream


@dataclass(frozen=True)
class DreamRun:
    """Arguments of ``dream-gym dream`` (one improvement step as a command)."""

    history: str  # worlds spec (see dream_gym.evaluation.evaluate.resolve_worlds)
    policy: str  # the incumbent
    developer: str  # "builtin" or a litellm model string
    out: Path
    settings: DreamSettings
    validate: str | None = None  # held-out worlds spec, not used for selection (None: automatic; "none": no check)
    api_base: str | None = None
    resume: bool = False


def run_dream(run: DreamRun, events: Events | None = None) -> PhaseResult:
    """Resolve the worlds, check the run folder's fingerprint, and run (or resume) the step."""
    from dream_gym.dream.developers import check_api_base_used, check_developer, make_developer, say_retries
    from dream_gym.dream.runfolder import check_fingerprint
    from dream_gym.evaluation.evaluate import resolve_worlds

    check_api_base_used(run.api_base, run.developer)
    check_developer(run.developer, run.api_base)
    history = resolve_worlds(run.history)
    validation = None if run.validate is None else [] if run.validate == NO_HELD_OUT else resolve_worlds(run.validate)
    held = held_out.auto_held_out(history) if validation is None else validation
    check_distinct_runs(history, "history")  # before the fingerprint is written: a refused run leaves no folder
    check_held_out(history, held, "history")
    scoring = run.settings.scoring
    fingerprint = {
        "history": {w.id: world_identity(w) for w in history},
        "validate": {w.id: world_identity(w) for w in held}, "held_out_margin": run.settings.held_out_margin,
        "policy": run.policy, "policy_sha256": policy_digest(run.policy), "developer": run.developer,
        "revisions": run.settings.revisions, "gate": run.settings.gate, "carry": run.settings.carry,
        "betas": list(scoring.betas),
        "select": scoring.select, "lam": scoring.lam, "beta1": scoring.replay.beta1,
        "beta2": scoring.replay.beta2, "max_rounds": scoring.replay.max_rounds, "seed": scoring.seed,
    }
    if scoring.decision_timeout_s != ScoringSettings.decision_timeout_s:  # it decides which episodes fail
        fingerprint["decision_timeout_s"] = scoring.decision_timeout_s  # (absent at the default: older runs resume)
    if scoring.memory_mb != ScoringSettings.memory_mb:  # it too decides which episodes fail
        fingerprint["memory_mb"] = scoring.memory_mb
    with folder_lock(run.out):  # held from the fingerprint check on (improvement_step takes it again)
        check_fingerprint(run.out, fingerprint, resume=run.resume, command="dream-gym dream")
        developer = make_developer(run.developer, run.out, api_base=run.api_base, seed=scoring.seed)
        say_retries(developer, lambda text: (events or _no_events)("llm_retry", {"text": text}))
        return improvement_step(run.out, 1, run.policy, history, developer, run.settings, validation=validation,
                                events=events)


def _cut_note(revision: Revision) -> str:
    """What a refusal adds when the reply was cut at the token limit: the error (a SyntaxError at
    the cut, say) alone would have the next revision mend the symptom."""
    return ("; the reply was cut at the token limit (finish_reason=length): write a shorter file"
            if revision.truncated else "")
