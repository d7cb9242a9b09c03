"""The LLM call journal: written before the request is sent and before the reply is used; an
answered call is never sent again, an unanswered one is."""

from __future__ import annotations

import pytest

from dream_gym.dream.journal import JOURNAL_FILE, Journal, request_key
from dream_gym.dream.runfolder import JsonLog
from dream_gym.infrastructure.durable import read_jsonl
from dream_gym.infrastructure.llm import LLMClient
from tests.openai_server import OpenAICompatServer, Reply

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic.*")
MESSAGES = [{"role": "user", "content": "write a policy"}]


@pytest.mark.slow
def test_request_is_on_disk_before_the_server_answers(tmp_path):
    seen = []

    with OpenAICompatServer() as server:
        def answer(body):
            seen.append([r["type"] for r in read_jsonl(tmp_path / JOURNAL_FILE)])
            return "```python\ndef act(view):\n    return []\n```"

        server.responder = answer
        call = Journal(tmp_path).complete(LLMClient("openai/dev", api_base=server.base_url), MESSAGES, seed=3,
                                          phase=1, revision=2)
    assert seen == [["request"]]  # the server saw the request only after it was journaled
    rows = read_jsonl(tmp_path / JOURNAL_FILE)
    assert [r["type"] for r in rows] == ["request", "reply"]
    assert rows[1]["reply"] == call.completion.reply and rows[1]["tokens_out"] > 0
    assert rows[0]["phase"] == 1 and rows[0]["revision"] == 2 and rows[0]["messages"] == MESSAGES


@pytest.mark.slow
def test_an_answered_call_is_never_sent_again_and_an_unanswered_one_is(tmp_path):
    with OpenAICompatServer() as server:
        client = LLMClient("openai/dev", api_base=server.base_url)
        Journal(tmp_path).complete(client, MESSAGES, seed=1)
        replayed = Journal(tmp_path).complete(client, MESSAGES, seed=1)
        assert len(server.requests) == 1 and replayed.replayed
        # a request line without a reply: the process died while waiting; it is sent again
        other = client.request(MESSAGES, 2)
        JsonLog(tmp_path / JOURNAL_FILE).append({"type": "request", "key": request_key(other), **other})
        sent = Journal(tmp_path).complete(client, MESSAGES, seed=2)
        assert len(server.requests) == 2 and not sent.replayed


def test_server_error_is_journaled_and_raised(tmp_path):
    from dream_gym.infrastructure.llm import LLMError

    with OpenAICompatServer() as server:
        server.push(Reply(status=400))
        with pytest.raises(LLMError, match="request rejected"):
            Journal(tmp_path).complete(LLMClient("openai/dev", api_base=server.base_url, num_retries=0), MESSAGES,
                                       seed=0)
    assert [r["type"] for r in read_jsonl(tmp_path / JOURNAL_FILE)] == ["request", "error"]


def test_journal_holds_no_api_key(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-journal-key")
    with OpenAICompatServer() as server:
        Journal(tmp_path).complete(LLMClient("openai/dev", api_base=server.base_url), MESSAGES, seed=0)
    assert "sk-secret-journal-key" not in (tmp_path / JOURNAL_FILE).read_text()

