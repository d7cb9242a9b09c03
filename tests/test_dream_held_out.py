"""The held-out check before `dream-gym dream` deploys: a revision that behaves only on its
history's task (and stops at once on any other) wins on the history, is reported near 0 on
held-out worlds of other tasks beside the incumbent, and is not deployed; without the check it
would have been; an honest revision is reported close to its selection score and deployed."""

from __future__ import annotations

import math

import pytest

from dream_gym.cli import main
from dream_gym.dream.held_out import HELD_OUT_MARGIN, auto_held_out, refusal
from dream_gym.evaluation.results import read_results
from dream_gym.evaluation.world_specs import resolve_worlds
from dream_gym.infrastructure.durable import read_jsonl
from tests import dream_revisions as revs
from tests.openai_server import OpenAICompatServer

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic.*")

HISTORY = "sd-greedy-w8-s0"  # sum-difference
TASK = "sum-difference"


def _dream(tmp_path, code: str, *options: str) -> tuple[int, dict, object]:
    """`dream-gym dream` from greedy with one revision, ``code``, written by an LLM developer over
    HTTP; the exit code, the phase's line of dream.jsonl and the run folder."""
    out = tmp_path / "dream"
    with OpenAICompatServer() as server:
        server.responder = lambda body: revs.fenced(code)
        status = main(["dream", "--history", HISTORY, "--policy", "greedy", "--developer", "openai/local-dev",
                       "--api-base", server.base_url, "--revisions", "2", "--betas", "0,1", "-j", "1",
                       "--quiet", "--out", str(out), *options])
    phase = next(row for row in read_jsonl(out / "dream.jsonl") if row["type"] == "phase")
    return status, phase, out


def test_an_off_task_revision_wins_on_the_history_and_is_not_deployed(tmp_path, capsys):
    status, phase, out = _dream(tmp_path, revs.off_task(TASK))
    printed = capsys.readouterr().out
    assert status == 0
    assert phase["selected_m"] == 1 and phase["gain_history"] > 0.5  # the history cannot tell it apart
    check = phase["validation"]
    assert check["auto"] and check["worlds"]
    assert all(world.task_name != TASK for world in resolve_worlds(",".join(check["worlds"])))
    assert check["selected"] == 0.0 and check["incumbent"] > HELD_OUT_MARGIN  # it stops at once there
    assert check["verdict"] == "refused" and phase["gated"] and phase["deployed_m"] == 0
    assert "NOT deployed" in phase["warning"] and "more than the margin 0.1" in phase["warning"]
    assert (out / "chosen.py").read_text() == (out / "revisions/1/0.py").read_text()
    episodes = read_results(out / "revisions/1/1.held_out.results.jsonl")
    assert {row["world"] for row in episodes} == set(check["worlds"]) and all(r["attempts"] == 0 for r in episodes)
    assert "held-out worlds (one shipped held-out world per task the history does not hold)" in printed
    assert f"version 1 {0.0:.4f}" in printed and "refused" in printed and "WARNING: version 1 is NOT deployed" in printed


def test_without_the_check_the_off_task_revision_is_deployed(tmp_path, capsys):
    status, phase, out = _dream(tmp_path, revs.off_task(TASK), "--validate", "none")
    assert status == 0 and phase["validation"] is None
    assert phase["selected_m"] == phase["deployed_m"] == 1  # the attack works without the defence
    # a model litellm has no price for (a local one): its calls are said to be unpriced, not "$0.0000"
    assert "development cost: 1 LLM call, " in (printed := capsys.readouterr().out)
    assert "tokens, $0.0000 (every call unpriced: litellm knows no price for the model)" in printed
    assert (out / "chosen.py").read_text() == (out / "revisions/1/1.py").read_text()
    assert "held-out check: none" in printed


def test_an_honest_revision_is_reported_close_to_its_selection_score_and_deployed(tmp_path):
    status, phase, out = _dream(tmp_path, revs.strong())
    check = phase["validation"]
    assert status == 0 and phase["selected_m"] == phase["deployed_m"] == 1 and not phase["gated"]
    assert check["verdict"] == "deployed" and phase["warning"] is None and check["gain"] > 0
    assert check["selected"] >= 2 / 3 * phase["selected_score"]  # most of its score carries over
    assert (out / "chosen.py").read_text() == revs.strong()


def test_report_only_margin_deploys_and_still_warns(tmp_path):
    status, phase, _ = _dream(tmp_path, revs.off_task(TASK), "--held-out-margin", "inf")
    assert phase["deployed_m"] == 1 and phase["validation"]["verdict"] == "deployed"
    assert "deployed but scores" in phase["warning"]


# ------------------------------------------------------------------------- the rule and the worlds


def test_the_rule_refuses_errors_and_a_drop_past_the_margin_and_the_gate_any_drop():
    assert refusal(0.5, 0.45, [], 0.1, gate=False) is None
    assert "more than the margin 0.1" in refusal(0.5, 0.35, [], 0.1, gate=False)
    assert "gate allows no drop" in refusal(0.5, 0.45, [], 0.1, gate=True)
    assert refusal(0.5, 0.9, [], 0.1, gate=True) is None
    assert "ended with an error; first: w (beta 0): Boom" in refusal(0.5, 0.9, ["w (beta 0): Boom"], 0.1, gate=False)
    assert refusal(0.5, -5.0, [], math.inf, gate=False) is None


def test_auto_held_out_takes_other_tasks_first_and_never_a_history_world():
    worlds = auto_held_out(resolve_worlds(HISTORY))
    assert len({w.task_name for w in worlds}) == len(worlds) >= 3 and TASK not in {w.task_name for w in worlds}
    train = resolve_worlds("train")  # every task but circle-packing-32
    assert [w.task_name for w in auto_held_out(train)] == ["circle-packing-32"]
    assert auto_held_out(resolve_worlds("heldout")) == []  # nothing left that selection did not see


def test_an_llm_that_fails_every_retry_ends_the_run_saying_resume_continues_it(tmp_path, capsys):
    """A 500 on every attempt (or a timeout) ended in one line that did not say the run was kept;
    the same command with --resume, the server mended, continues it."""
    from tests.openai_server import Reply

    out = tmp_path / "dream"
    command = ["dream", "--history", HISTORY, "--policy", "greedy", "--developer", "openai/local-dev",
               "--revisions", "2", "--betas", "0", "-j", "1", "--validate", "none", "--quiet", "--out", str(out)]
    with OpenAICompatServer() as server:
        server.responder = lambda body: Reply(content=None, status=500)
        assert main([*command, "--api-base", server.base_url]) == 2
        err = capsys.readouterr().err
        assert err.count("error:") == 1 and "transport error" in err
        assert err.rstrip().endswith(f"what was finished is kept in {out}: the same command with --resume "
                                     "continues it")
        server.responder = lambda body: revs.fenced(revs.WEAK)
        assert main([*command, "--api-base", server.base_url, "--resume"]) == 0


def test_a_retried_call_is_said_as_it_happens(tmp_path, capsys):
    """A call that timed out three times was 15 minutes in which nothing was said (and a 429 or a
    500 retried was silent too): each retry is now a progress line on stderr."""
    from tests.openai_server import Reply

    out = tmp_path / "dream"
    with OpenAICompatServer() as server:
        server.push(Reply(content=None, status=500), revs.fenced(revs.WEAK))
        assert main(["dream", "--history", HISTORY, "--policy", "greedy", "--developer", "openai/local-dev",
                     "--api-base", server.base_url, "--revisions", "2", "--betas", "0", "-j", "1", "--validate",
                     "none", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "developer: attempt 1 of 3 failed (InternalServerError: " in err
    assert "; asking again in 1 s (timeout 300 s)" in err
