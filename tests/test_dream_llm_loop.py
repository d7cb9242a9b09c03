"""The whole improvement step with an LLM developer over real HTTP (tests/openai_server.py,
real litellm): broken, hanging, illegal and hostile revisions are recorded and fed back, the
loop completes, the good revision is kept only because it scores higher, and a resumed run
sends no answered call again."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dream_gym.dream.improve import DreamSettings, improvement_step
from dream_gym.dream.journal import JOURNAL_FILE
from dream_gym.dream.llm_developer import LLMDeveloper
from dream_gym.dream.scoring import ScoringSettings
from dream_gym.evaluation.evaluate import resolve_worlds
from dream_gym.infrastructure.durable import read_jsonl
from tests import dream_revisions as revs
from tests.openai_server import OpenAICompatServer, Reply

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic.*")

HISTORY = "sd-fixed-s0,lasso-ucb-s0"
SCORING = ScoringSettings(betas=(0.0, 1.0), jobs=2, decision_timeout_s=1.0, episode_timeout_s=30.0)


def _replies(world_file: str) -> list[str]:
    return [
        revs.fenced(revs.SYNTAX_ERROR),
        revs.fenced(revs.INFINITE_LOOP),
        revs.fenced(revs.ILLEGAL_BATCH),
        revs.fenced(revs.reads_world_from_disk(world_file)),
        revs.fenced(revs.READS_WORLD_FROM_MEMORY),
        "Sorry, I cannot write a policy for this.",
        revs.fenced(revs.WEAK),
        revs.fenced(revs.strong()),
    ]


def _responder(replies: list[str]):
    def answer(body: dict) -> str:
        text = body["messages"][-1]["content"]
        m = int(re.search(r"# Revision (\d+) of", text).group(1))
        return replies[m - 1]

    return answer


@pytest.mark.slow
def test_llm_loop_records_every_failure_and_keeps_the_good_revision_only_because_it_scores_higher(tmp_path):
    history = resolve_worlds(HISTORY)
    replies = _replies(str(history[0].path / "nodes.jsonl"))
    settings = DreamSettings(revisions=len(replies) + 1, scoring=SCORING)
    out = tmp_path / "run"
    with OpenAICompatServer() as server:
        server.responder = _responder(replies)
        developer = LLMDeveloper("openai/local-dev", out, api_base=server.base_url, num_retries=0)
        result = improvement_step(out, 1, "greedy", history, developer, settings)
        sent = len(server.requests)
        prompts = [r.messages[-1]["content"] for r in server.requests]

        # resumed: the phase is read back, nothing is sent again
        again = improvement_step(out, 1, "greedy", history,
                                 LLMDeveloper("openai/local-dev", out, api_base=server.base_url), settings)
        assert len(server.requests) == sent == len(replies)
    assert again.deployed_m == result.deployed_m

    status = {v.m: (v.status, v.error or "") for v in result.versions}
    assert status[1][0] == "invalid" and "SyntaxError" in status[1][1]
    assert status[2][0] == "invalid" and "PolicyTimeout" in status[2][1]
    assert status[3][0] == "invalid" and "IllegalBatchError" in status[3][1]
    assert status[4][0] == "invalid" and "may not read this file" in status[4][1]
    assert status[5][0] == "invalid" and "no world in memory" in status[5][1]
    assert status[6][0] == "invalid" and "no code found" in status[6][1]
    assert status[7][0] == "ok" and status[8][0] == "ok"
    scores = {v.m: v.score for v in result.versions}
    assert scores[7] < scores[0] < scores[8]  # the weak revision loses, the strong one wins
    assert result.selected_m == result.deployed_m == 8
    assert (out / "chosen.py").read_text() == (out / "revisions/1/8.py").read_text() == revs.strong().rstrip() + "\n"

    # every failure was fed back: the last prompt reports the earlier errors
    last = prompts[-1]
    for needle in ("SyntaxError", "PolicyTimeout", "IllegalBatchError", "may not read this file",
                   "no world in memory", "no code found"):
        assert needle in last, needle
    assert "### Revision 7: ok, score" in last
    # the prompt holds the interface, the incumbent's code and its replay traces
    first = prompts[0]
    assert "reset(context)" in first and "root_slots" in first and "fail_class" in first
    assert "_builtin('greedy')" in first and "class GreedyPolicy" in first
    assert "### sd-fixed-s0" in first and "quality rose at attempts" in first

    # the run folder: ledger, per-version files, journal with one request and one reply per call
    ledger = read_jsonl(out / "dream.jsonl")
    assert [r["m"] for r in ledger if r["type"] == "revision"] == list(range(len(replies) + 1))
    assert [r["type"] for r in ledger].count("phase") == 1
    for m in range(1, len(replies) + 1):
        assert (out / f"revisions/1/{m}.py").exists() and (out / f"revisions/1/{m}.json").exists()
        assert "Revision" in (out / f"revisions/1/{m}.prompt.md").read_text()
        assert (out / f"revisions/1/{m}.reply.md").read_text() == replies[m - 1]
    journal = read_jsonl(out / JOURNAL_FILE)
    assert [r["type"] for r in journal] == ["request", "reply"] * len(replies)
    assert all(r["tokens_in"] > 0 and r["seconds"] >= 0 and "usd" in r for r in journal if r["type"] == "reply")
    assert result.cost["calls"] == len(replies) and result.cost["tokens_in"] > 0
    assert (out / "ratchet.png").stat().st_size > 0
    assert json.loads((out / "revisions/1/8.json").read_text())["status"] == "ok"


def test_a_call_answered_before_a_crash_is_not_sent_again(tmp_path):
    """The journal holds the reply: a developer in a new process (here: a new object) reuses it."""
    from dream_gym.dream.developer import EarlierRevision, Feedback

    feedback = Feedback(phase=1, m=1, revisions=2, incumbent=EarlierRevision(0, "def act(view):\n    return []\n",
                        "incumbent", 0.5), traces="", earlier=(), select="V", betas=(0.5,), history=("w",))
    with OpenAICompatServer() as server:
        server.push(revs.fenced(revs.WEAK))
        first = LLMDeveloper("openai/local-dev", tmp_path, api_base=server.base_url).propose(feedback)
        second = LLMDeveloper("openai/local-dev", tmp_path, api_base=server.base_url).propose(feedback)
        assert len(server.requests) == 1
    assert first.code == second.code == revs.WEAK.rstrip() + "\n"
    assert "reply from the journal" in second.notes
    rows = read_jsonl(tmp_path / JOURNAL_FILE)
    assert [r["type"] for r in rows] == ["request", "reply"]


def test_unreachable_llm_is_journaled_and_stops_the_step_with_a_clear_error(tmp_path):
    from dream_gym.infrastructure.llm import LLMError

    history = resolve_worlds("sd-fixed-s0")
    developer = LLMDeveloper("openai/nobody", tmp_path, api_base="http://127.0.0.1:9/v1", num_retries=0)
    with pytest.raises(LLMError, match="transport error"):
        improvement_step(tmp_path, 1, "greedy", history, developer,
                         DreamSettings(revisions=2, scoring=ScoringSettings(betas=(0.5,), jobs=1)))
    journal = read_jsonl(tmp_path / JOURNAL_FILE)
    assert [r["type"] for r in journal] == ["request", "error"]
    ledger = read_jsonl(tmp_path / "dream.jsonl")
    assert [r["m"] for r in ledger] == [0]  # the incumbent's evaluation is kept for the resume
    assert Path(tmp_path / "revisions/1/0.py").exists()


def test_a_reply_cut_at_the_token_limit_is_refused_saying_so(tmp_path):
    """The next prompt said only "SyntaxError: '(' was never closed": the model mended the
    symptom. The refusal now says the reply was cut and to write a shorter file."""
    history = resolve_worlds("sd-fixed-s0")
    half = revs.fenced(revs.WEAK)[: len(revs.fenced(revs.WEAK)) // 2]
    with OpenAICompatServer() as server:
        server.push(Reply(content=half, finish_reason="length"))
        developer = LLMDeveloper("openai/local-dev", tmp_path, api_base=server.base_url, num_retries=0)
        result = improvement_step(tmp_path, 1, "greedy", history, developer,
                                  DreamSettings(revisions=2, scoring=ScoringSettings(betas=(0.5,), jobs=1)))
    [cut] = [v for v in result.versions if v.m == 1]
    assert cut.status == "invalid" and cut.error is not None
    assert cut.error.endswith("; the reply was cut at the token limit (finish_reason=length): write a shorter file")
