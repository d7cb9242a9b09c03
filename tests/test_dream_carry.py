"""Knowledge carried across phases: earlier versions are completed exactly on the grown history
(only the new worlds are evaluated), a revision with the same code reuses those scores, the
built-in developer learns from them and re-proposes the best, a resumed phase proposes exactly
what an uninterrupted one does, and the kept policy never scores below the incumbent."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from once import built_once

from dream_gym.dream import family_policy
from dream_gym.dream.builtin_developer import BuiltinDeveloper, family_file
from dream_gym.dream.carry import Carried, choose, code_key
from dream_gym.dream.developer import EarlierRevision, Feedback, Revision
from dream_gym.dream.improve import DreamSettings, improvement_step
from dream_gym.dream.scoring import ScoringSettings, score_policy
from dream_gym.evaluation.evaluate import resolve_worlds
from dream_gym.infrastructure.durable import read_jsonl
from tests import dream_revisions as revs

SCORING = ScoringSettings(betas=(0.0, 1.0), jobs=1, decision_timeout_s=2.0)


class Scripted:
    name = "scripted"

    def __init__(self, codes: list[str]):
        self.codes, self.seen = list(codes), []

    def propose(self, feedback: Feedback) -> Revision:
        self.seen.append(feedback)
        return Revision(code=self.codes[feedback.m - 1], notes="scripted")


class CrashAt:
    name = "crashing"

    def __init__(self, inner, m: int):
        self.inner, self.m = inner, m

    def propose(self, feedback: Feedback) -> Revision:
        if feedback.m == self.m:
            raise KeyboardInterrupt("simulated crash")
        return self.inner.propose(feedback)


def _worlds():
    return resolve_worlds("sd-fixed-s0"), resolve_worlds("lasso-ucb-s0")


def _phase_one(out):
    """Phase 1 of the next two tests: greedy, then the weak and the strong revision."""
    return improvement_step(out, 1, "greedy", _worlds()[0], Scripted([revs.WEAK, revs.strong()]),
                            DreamSettings(3, SCORING))


@pytest.fixture()
def after_phase_one(tmp_path_factory, tmp_path):
    """A copy of a run folder after :func:`_phase_one`, which runs once per session (the tests
    continue it each in its copy; ``improvement_step`` reads the finished phase back)."""
    out = tmp_path / "run"
    shutil.copytree(built_once(tmp_path_factory, "dream-carry-phase-1", _phase_one), out)
    return out


@pytest.mark.slow
def test_carried_versions_are_scored_exactly_on_the_grown_history_evaluating_only_the_new_world(after_phase_one):
    out = after_phase_one
    scripted = Scripted([revs.WEAK])
    first, second = _worlds()
    one = _phase_one(out)
    two = improvement_step(out, 2, str(out / one.deployed), first + second, scripted,
                           DreamSettings(2, SCORING))
    carried = [r for r in read_jsonl(out / "dream.jsonl") if r.get("type") == "carry"]
    deployed_key = code_key((out / one.deployed).read_text())
    assert len(carried) == 2  # phase 1's three versions but the one deployed (the incumbent of phase 2)
    for row in carried:
        assert row["phase"] == 2 and row["status"] == "ok"
        assert row["evaluated"] == [w.id for w in second]  # only the world added since phase 1
        assert code_key((out / row["file"]).read_text()) != deployed_key
        fresh = score_policy(out / row["file"], first + second, SCORING)
        assert row["score"] == pytest.approx(fresh.score, abs=1e-12)  # exact: what a full re-run gives
        assert row["per_world"] == pytest.approx(fresh.per_world, abs=1e-12)
    past = scripted.seen[0].past
    assert [(p.phase, p.m) for p in past] == [tuple(r["source"]) for r in
                                              sorted(carried, key=lambda r: -r["score"])]
    assert all(p.score == pytest.approx(next(r["score"] for r in carried if tuple(r["source"]) == (p.phase, p.m)))
               for p in past)
    assert [c["source"] for c in two.carried] == [[p.phase, p.m] for p in past]


@pytest.mark.slow
def test_a_revision_with_the_code_of_a_carried_version_reuses_its_scores(after_phase_one):
    out = after_phase_one
    first, second = _worlds()
    one = _phase_one(out)
    carried_code = revs.WEAK if one.deployed_m != 1 else revs.strong()
    again = "# the same policy under another comment\n" + carried_code
    two = improvement_step(out, 2, str(out / one.deployed), first + second, Scripted([again]),
                           DreamSettings(2, SCORING))
    version = two.versions[1]
    assert "reused from phase 1" in version.notes
    assert not (out / "revisions/2/1.results.jsonl").exists()  # nothing was evaluated for it
    assert version.score == pytest.approx(score_policy(out / version.file, first + second, SCORING).score,
                                          abs=1e-12)


@pytest.mark.slow
def test_builtin_developer_carries_earlier_phases_and_resume_proposes_the_same(tmp_path):
    first, second = _worlds()
    a, b = tmp_path / "a", tmp_path / "b"
    # no held-out check (validation=[]): what is carried and resumed here does not depend on it
    one = improvement_step(a, 1, "greedy", first, BuiltinDeveloper(seed=4), DreamSettings(4, SCORING), validation=[])
    shutil.copytree(a, b)
    history, settings_2 = first + second, DreamSettings(5, SCORING)
    straight = improvement_step(a, 2, str(a / one.deployed), history, BuiltinDeveloper(seed=4), settings_2,
                                validation=[])
    with pytest.raises(KeyboardInterrupt):
        improvement_step(b, 2, str(b / one.deployed), history, CrashAt(BuiltinDeveloper(seed=4), 3), settings_2,
                         validation=[])
    resumed = improvement_step(b, 2, str(b / one.deployed), history, BuiltinDeveloper(seed=4), settings_2,
                               validation=[])
    for m in range(5):  # the same files, proposal by proposal
        assert (a / f"revisions/2/{m}.py").read_text() == (b / f"revisions/2/{m}.py").read_text()
    assert [v.score for v in straight.versions] == [v.score for v in resumed.versions]
    carries = [r for r in read_jsonl(b / "dream.jsonl") if r.get("type") == "carry"]
    assert len({tuple(r["source"]) for r in carries}) == len(carries)  # no completion redone after the crash
    notes = [v.notes for v in straight.versions[1:]]
    assert any("carried from earlier phases" in n or "proposed again" in n for n in notes)
    kept = score_policy(a / "chosen.py", history, SCORING).score
    assert kept >= straight.incumbent_score - 1e-12  # never below the incumbent on the history


def _feedback(past, incumbent_score, earlier=()):
    incumbent = EarlierRevision(0, family_file(family_policy.PARAMS), "incumbent", incumbent_score,
                                params=dict(family_policy.PARAMS))
    return Feedback(phase=3, m=1 + len(earlier), revisions=8, incumbent=incumbent, traces="", earlier=tuple(earlier),
                    select="V", betas=(0.5,), history=("a", "b", "c"), past=tuple(past))


def _params(i: int) -> dict:
    return {**family_policy.PARAMS, "patience_lo": 1 + i % 9, "rounds_lo": 1 + i}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1, 1), min_size=0, max_size=5), st.floats(-1, 1))
def test_best_carried_version_is_proposed_again_only_when_it_beats_the_incumbent(scores, incumbent_score):
    past = [EarlierRevision(i, family_file(_params(i)), "ok", s, params=_params(i), phase=1 + i % 2)
            for i, s in enumerate(scores)]
    revision = BuiltinDeveloper(seed=0).propose(_feedback(past, incumbent_score))
    better = [p for p in past if p.score > incumbent_score + 1e-9]
    if better:
        top = max(p.score for p in better)
        assert revision.params in [p.params for p in better if p.score == top] and "proposed again" in revision.notes
    else:
        assert "proposed again" not in revision.notes
        assert (revision.params != dict(family_policy.PARAMS)) or not past  # a TPE proposal, not the default


def test_a_carried_version_already_proposed_in_this_phase_is_not_proposed_twice():
    past = [EarlierRevision(4, family_file(_params(4)), "ok", 0.9, params=_params(4), phase=2)]
    earlier = [EarlierRevision(1, family_file(_params(4)), "ok", 0.9, params=_params(4))]
    revision = BuiltinDeveloper(seed=0).propose(_feedback(past, 0.1, earlier))
    assert "proposed again" not in revision.notes


def test_choose_ranks_by_the_known_scores_and_skips_the_incumbent():
    versions = [Carried(1, 1, "1.py", "k1", {"a": 0.1}), Carried(1, 2, "2.py", "k2", {"a": 0.5}),
                Carried(2, 1, "3.py", "k3", {"a": 0.3, "b": 0.9}), Carried(2, 2, "4.py", "k4", {})]
    assert [v.key for v in choose(versions, ["a", "b", "c"], 3, exclude={"k3"})] == ["k2", "k1", "k4"]
    assert [v.key for v in choose(versions, ["a", "b"], 1, exclude=set())] == ["k3"]
    assert choose(versions, ["a"], 0, exclude=set()) == []
    assert code_key("x = 1  # one") == code_key("# header\nx = 1\n") != code_key("x = 2")
    assert code_key("def (") is None
