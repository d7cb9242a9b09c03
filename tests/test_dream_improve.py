"""The improvement step: M counts the incumbent, the argmax keeps the incumbent on a tie and never
scores below it, the determinism gate refuses an unseeded random policy, validation worlds and
the gate, resume after an interrupted phase."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dream_gym.dream import improve
from dream_gym.dream.builtin_developer import BuiltinDeveloper
from dream_gym.dream.developer import Feedback, Revision
from dream_gym.dream.improve import DreamSettings, improvement_step
from dream_gym.dream.scoring import ScoringSettings, score_policy
from dream_gym.dream.versions import TIE_TOLERANCE, VersionRecord, incumbent_source, select
from dream_gym.evaluation.evaluate import resolve_worlds
from dream_gym.infrastructure.durable import read_jsonl
from tests import dream_revisions as revs

SCORING = ScoringSettings(betas=(0.0, 1.0), jobs=1, decision_timeout_s=2.0)


class ScriptedDeveloper:
    """A developer that answers with given files, in order (a real Developer, no LLM)."""

    name = "scripted"

    def __init__(self, codes: list[str]):
        self.codes = list(codes)
        self.asked: list[int] = []

    def propose(self, feedback: Feedback) -> Revision:
        self.asked.append(feedback.m)
        return Revision(code=self.codes[feedback.m - 1], notes="scripted")


def _history() -> list:
    return resolve_worlds("sd-fixed-s0")


# ------------------------------------------------------------------------- selection (pure)

statuses = st.sampled_from(("ok", "invalid", "failed", "nondeterministic"))


@st.composite
def phases(draw):
    incumbent = VersionRecord(1, 0, "0.py", "incumbent", score=draw(st.floats(-1, 2)))
    others = []
    for m in range(1, draw(st.integers(0, 8)) + 1):
        status = draw(statuses)
        score = None if status == "invalid" else draw(st.one_of(st.floats(-1, 2), st.just(incumbent.score)))
        others.append(VersionRecord(1, m, f"{m}.py", status, score=score))
    return [incumbent, *draw(st.permutations(others))]


@settings(max_examples=300, deadline=None)
@given(phases())
def test_selected_version_never_scores_below_the_incumbent_and_is_the_argmax(versions):
    chosen = select(versions)
    incumbent = versions[[v.m for v in versions].index(0)]
    assert chosen.score >= incumbent.score
    assert chosen.status in ("incumbent", "ok")
    better = [v for v in versions if v.status == "ok" and v.score > incumbent.score + TIE_TOLERANCE]
    if better:
        best = max(v.score for v in better)
        assert best - chosen.score <= TIE_TOLERANCE  # the argmax, up to the tie tolerance
    else:
        assert chosen.m == 0  # ties and losers keep the incumbent


# ------------------------------------------------------------------------- the step


@pytest.mark.slow
def test_m_counts_the_incumbent_and_a_tie_keeps_it(tmp_path):
    wrapper, _ = incumbent_source("fixed")
    developer = ScriptedDeveloper([wrapper, wrapper])  # revisions identical to the incumbent
    result = improvement_step(tmp_path, 1, "fixed", _history(), developer, DreamSettings(3, SCORING))
    assert developer.asked == [1, 2]  # M = 3: the incumbent and two revisions
    assert [v.m for v in result.versions] == [0, 1, 2]
    assert sorted(p.name for p in (tmp_path / "revisions/1").glob("*.py")) == ["0.py", "1.py", "2.py", "chosen.py"]
    assert {v.score for v in result.versions} == {result.incumbent_score}
    assert result.selected_m == result.deployed_m == 0


@pytest.mark.slow
def test_determinism_gate_refuses_an_unseeded_random_policy(tmp_path):
    developer = ScriptedDeveloper([revs.UNSEEDED_RANDOM])
    result = improvement_step(tmp_path, 1, "greedy", _history(), developer, DreamSettings(2, SCORING))
    version = result.versions[1]
    assert version.status == "nondeterministic"
    assert "two evaluations in separate processes differ" in version.error
    assert result.selected_m == 0


@pytest.mark.slow
def test_determinism_gate_refuses_a_policy_that_depends_on_the_hash_seed(tmp_path):
    history = resolve_worlds("sd-fixed-s0,lasso-ucb-s0")
    result = improvement_step(tmp_path, 1, "greedy", history, ScriptedDeveloper([revs.HASH_ORDER]),
                              DreamSettings(2, SCORING))
    assert result.versions[1].status == "nondeterministic"


@pytest.mark.slow
def test_kept_policy_never_scores_below_the_incumbent_on_a_fresh_evaluation(tmp_path):
    history = resolve_worlds("sd-fixed-s0,lasso-ucb-s0")
    result = improvement_step(tmp_path, 1, "fixed", history, BuiltinDeveloper(seed=3), DreamSettings(4, SCORING))
    incumbent = score_policy("fixed", history, SCORING).score
    kept = score_policy(tmp_path / "chosen.py", history, SCORING).score
    assert kept >= incumbent - 1e-12
    assert result.incumbent_score == pytest.approx(incumbent, abs=1e-12)  # the wrapper scores as the built-in


OVERFIT = revs.strong().replace(
    "    def act(self, view):\n",
    "    def act(self, view):\n        if view.task_name == 'lasso-path':\n            return [0] if view.rounds == 0 else []\n",
)


def test_gate_keeps_the_incumbent_when_the_validation_score_drops(tmp_path):
    history, validation = resolve_worlds("sd-fixed-s0"), resolve_worlds("lasso-ucb-s0")
    result = improvement_step(tmp_path, 1, "greedy", history, ScriptedDeveloper([OVERFIT]),
                              DreamSettings(2, SCORING, gate=True), validation=validation)
    assert result.selected_m == 1 and result.gain_history > 0  # better on the history ...
    assert result.validation["gain"] < 0  # ... worse on the worlds it was not selected on
    assert result.gated and result.deployed_m == 0
    assert (tmp_path / "chosen.py").read_text() == (tmp_path / "revisions/1/0.py").read_text()


def test_validation_gain_is_reported_when_the_margin_only_reports(tmp_path):
    history, validation = resolve_worlds("sd-fixed-s0"), resolve_worlds("lasso-ucb-s0")
    result = improvement_step(tmp_path, 1, "greedy", history, ScriptedDeveloper([OVERFIT]),
                              DreamSettings(2, SCORING, held_out_margin=math.inf), validation=validation)
    assert result.deployed_m == 1 and not result.gated and result.validation["gain"] < 0
    assert "deployed but scores" in result.warning


class CrashAt:
    """Answers like ScriptedDeveloper but dies (as a killed process would) when asked for m."""

    name = "crashing"

    def __init__(self, codes: list[str], crash_at: int):
        self.inner, self.crash_at = ScriptedDeveloper(codes), crash_at

    def propose(self, feedback: Feedback) -> Revision:
        if feedback.m == self.crash_at:
            raise KeyboardInterrupt("simulated crash")
        return self.inner.propose(feedback)


@pytest.mark.slow
def test_an_interrupted_phase_resumes_with_its_next_version_and_redoes_none(tmp_path):
    codes = [revs.WEAK, revs.SYNTAX_ERROR, revs.WEAK]
    with pytest.raises(KeyboardInterrupt):
        improvement_step(tmp_path, 1, "greedy", _history(), CrashAt(codes, 3), DreamSettings(4, SCORING))
    before = read_jsonl(tmp_path / "dream.jsonl")
    assert [r["m"] for r in before] == [0, 1, 2]
    resumed = ScriptedDeveloper(codes)
    result = improvement_step(tmp_path, 1, "greedy", _history(), resumed, DreamSettings(4, SCORING))
    assert resumed.asked == [3]
    after = read_jsonl(tmp_path / "dream.jsonl")
    assert after[:3] == before and [r.get("m") for r in after[3:]] == [3, None]
    assert [v.m for v in result.versions] == [0, 1, 2, 3]


def test_bad_arguments_are_refused_with_the_reason(tmp_path):
    history = _history()
    with pytest.raises(ValueError, match="M, the incumbent included"):
        DreamSettings(0)
    with pytest.raises(ValueError, match="needs held-out worlds"):
        improvement_step(tmp_path, 1, "greedy", history, ScriptedDeveloper([]), DreamSettings(1, SCORING, gate=True),
                         validation=[])
    with pytest.raises(ValueError, match="held-out worlds must not be in the history"):
        improvement_step(tmp_path, 1, "greedy", history, ScriptedDeveloper([]), DreamSettings(1, SCORING),
                         validation=history)
    with pytest.raises(ValueError, match="held_out_margin must be >= 0"):
        DreamSettings(1, held_out_margin=-0.1)
    with pytest.raises(ValueError, match="distinct ids"):
        improvement_step(tmp_path, 1, "greedy", history + history, ScriptedDeveloper([]), DreamSettings(1, SCORING))
    with pytest.raises(LookupError, match="unknown built-in policy"):
        improvement_step(tmp_path, 1, "nope", history, ScriptedDeveloper([]), DreamSettings(1, SCORING))
    with pytest.raises(ValueError, match="select"):
        ScoringSettings(select="mean")
    assert not Path(tmp_path / "dream.jsonl").exists() or read_jsonl(tmp_path / "dream.jsonl") == []


def test_a_nondeterministic_incumbent_stays_the_fallback_with_a_warning(tmp_path):
    incumbent = tmp_path / "incumbent.py"
    incumbent.write_text(revs.UNSEEDED_RANDOM)
    result = improvement_step(tmp_path / "run", 1, str(incumbent), _history(), ScriptedDeveloper([]),
                              DreamSettings(1, SCORING))
    version = result.versions[0]
    assert version.status == "incumbent" and version.score is not None
    assert "nondeterministic" in version.warning
    assert result.deployed_m == 0


@pytest.mark.slow
def test_ctrl_c_after_an_evaluation_wrote_its_results_then_resume_redoes_that_version_and_check(tmp_path, monkeypatch):
    """Interrupted during the determinism gate's second evaluation (the first's results file is
    whole) and between the held-out check's two evaluations: each resume redoes that version or
    check and ends as an uninterrupted run does (it refused to overwrite the results before)."""
    history, held_out_worlds = _history(), resolve_worlds("lasso-ucb-s0")
    codes = [revs.WEAK, revs.strong()]

    def step(out: Path) -> object:
        return improvement_step(out, 1, "greedy", history, ScriptedDeveloper(codes), DreamSettings(3, SCORING),
                                validation=held_out_worlds)

    whole = step(tmp_path / "whole")
    assert whole.selected_m == 2 and whole.validation is not None  # the check ran

    real = improve.score_policy

    def interrupt_at(file: str, held_out_check: bool):
        def score_policy(spec, worlds, settings, *, out=None, extra_file_options=None):
            if Path(spec).name == file and (out is not None and ".held_out." in str(out)) == held_out_check \
                    and (held_out_check or out is None):  # the gate's second evaluation has no results file
                raise KeyboardInterrupt("Ctrl-C")
            return real(spec, worlds, settings, out=out, extra_file_options=extra_file_options)
        return score_policy

    out, versions = tmp_path / "run", tmp_path / "run" / "revisions" / "1"
    monkeypatch.setattr(improve, "score_policy", interrupt_at("2.py", held_out_check=False))
    with pytest.raises(KeyboardInterrupt):
        step(out)
    assert (versions / "2.results.jsonl").stat().st_size and not (versions / "2.json").exists()
    monkeypatch.setattr(improve, "score_policy", interrupt_at("0.py", held_out_check=True))
    with pytest.raises(KeyboardInterrupt):
        step(out)
    assert (versions / "2.json").exists() and (versions / "2.held_out.results.jsonl").stat().st_size
    monkeypatch.setattr(improve, "score_policy", real)
    resumed = step(out)

    def outcome(result) -> list[tuple]:
        return [(v.m, v.status, v.score, v.per_world) for v in result.versions]

    assert outcome(resumed) == outcome(whole)
    assert (resumed.selected_m, resumed.deployed_m, resumed.validation) == \
        (whole.selected_m, whole.deployed_m, whole.validation)
    assert [r.get("m") for r in read_jsonl(out / "dream.jsonl")] == [0, 1, 2, None]
