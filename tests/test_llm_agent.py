"""LiteLLMAgent against a real OpenAI-compatible HTTP server on 127.0.0.1 (real litellm, no mocks)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dream_gym.infrastructure.extras import install_command
from dream_gym.online.agent_base import Agent, ParentContext, Proposal
from dream_gym.online.llm_agent import (
    LOCAL_PLACEHOLDER_KEY,
    AgentError,
    LiteLLMAgent,
    build_user_prompt,
    extract_code,
)

try:  # tests/ may or may not be a package
    from tests.openai_server import OpenAICompatServer, Reply
except ImportError:  # pragma: no cover
    from openai_server import OpenAICompatServer, Reply  # type: ignore[no-redef]

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the price map

REPO = Path(__file__).resolve().parents[1]

# pydantic schema warnings raised lazily inside litellm on the first call: not ours
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic.*")


@dataclass
class _Task:
    name: str = "pack-circles"
    description: str = "Place 26 circles in the unit square to maximise the sum of radii. Define solve()."
    direction: str = "maximize"
    best_known: float | None = 2.635

    def initial_program(self) -> str:
        return "def solve():\n    return []\n"


PARENT_CODE = "def solve():\n    # PARENT-MARKER-7731\n    return [0.1] * 26\n"


def _parent(**over: Any) -> ParentContext:
    kw: dict[str, Any] = dict(
        code=PARENT_CODE,
        score=1.234567,
        diagnostics="overlap penalty 0.031 between circles 4 and 9 (DIAG-MARKER)",
        error=None,
        history=[
            {"score": None, "error": "Traceback ...\nZeroDivisionError: division by zero",
             "fail_class": "repairable", "diagnostics": ""},
            {"score": 0.98, "error": None, "fail_class": None, "diagnostics": "ok"},
            {"score": 1.234567, "error": None, "fail_class": None, "diagnostics": "overlap"},
        ],
    )
    kw.update(over)
    return ParentContext(**kw)


@pytest.fixture(autouse=True)
def _quiet_litellm() -> Iterator[None]:
    import litellm

    saved = (list(litellm.callbacks), list(litellm.success_callback), list(litellm.failure_callback))
    litellm.callbacks, litellm.success_callback, litellm.failure_callback = [], [], []
    yield
    litellm.callbacks, litellm.success_callback, litellm.failure_callback = (
        saved[0], saved[1], saved[2])


@pytest.fixture
def server() -> Iterator[OpenAICompatServer]:
    with OpenAICompatServer() as srv:
        yield srv


def _agent(srv: OpenAICompatServer, model: str = "openai/test-model", **kw: Any) -> LiteLLMAgent:
    kw.setdefault("api_key", "sk-test-key")
    kw.setdefault("timeout_s", 10)
    kw.setdefault("retry_backoff_s", 0.0)
    return LiteLLMAgent(model, api_base=srv.base_url, **kw)


# ------------------------------------------------------------------------------------------------
# prompt
# ------------------------------------------------------------------------------------------------

def test_prompt_reaches_server_with_parent_code_diagnostics_and_history(server: OpenAICompatServer) -> None:
    agent = _agent(server, temperature=0.3, max_tokens=777)
    prop = agent.propose(_Task(), _parent(), np.random.default_rng(0))
    assert isinstance(prop, Proposal) and isinstance(agent, Agent)
    assert agent.name == "litellm:openai/test-model"
    assert len(server.requests) == 1
    req = server.requests[0]
    assert req.path == "/v1/chat/completions"
    body = req.body
    assert body["model"] == "test-model"
    assert body["temperature"] == 0.3 and body["max_tokens"] == 777
    assert isinstance(body["seed"], int)
    roles = [m["role"] for m in req.messages]
    assert roles == ["system", "user"]
    user = req.messages[-1]["content"]
    assert PARENT_CODE.strip() in user
    assert "DIAG-MARKER" in user
    assert "Place 26 circles" in user
    assert "maximize" in user and "higher is better" in user and "2.635" in user
    assert "1.23457" in user  # parent score
    # history: every ancestor, root first, the error's last line
    assert "depth 0: score=none" in user and "ZeroDivisionError: division by zero" in user
    assert "depth 1: score=0.98" in user and "depth 2 (parent): score=1.23457" in user
    assert user.index("depth 0") < user.index("depth 1") < user.index("depth 2")
    assert "```python" in req.messages[0]["content"] + user
    assert prop.prompt == user


def test_prompt_for_failed_parent_shows_error_and_minimize() -> None:
    err = "Traceback (most recent call last):\n  File 'x.py', line 3\nIndexError: list index out of range"
    p = build_user_prompt(_Task(direction="minimize", best_known=None),
                          _parent(score=None, error=err, diagnostics=""))
    assert "IndexError: list index out of range" in p
    assert "FAILED" in p and "lower is better" in p and "Best known value: unknown" in p
    assert "Evaluator diagnostics" not in p  # empty diagnostics are left out


def test_history_is_bounded_most_recent_last() -> None:
    hist = [{"score": float(i), "error": "E" * 5000 if i % 7 == 0 else None, "fail_class": None,
             "diagnostics": "d" * 5000} for i in range(200)]
    p = build_user_prompt(_Task(), _parent(history=hist, diagnostics="x" * 50_000))
    assert "188 earlier attempt(s)" in p
    assert "depth 199 (parent): score=199" in p and "depth 188: score=188" in p
    assert "depth 187:" not in p
    assert p.index("depth 188") < p.index("depth 199")
    assert len(p) < 12_000  # 200 ancestors and 50k of diagnostics still give a compact prompt
    assert "characters omitted" in p


# ------------------------------------------------------------------------------------------------
# code extraction
# ------------------------------------------------------------------------------------------------

FULL = "import math\n\ndef solve():\n    return [math.pi] * 26\n"


@pytest.mark.parametrize(
    ("reply", "expected", "method"),
    [
        (f"Sure.\n```python\n{FULL}```\nDone.", FULL, "python-block"),
        # an earlier draft and a final version of similar length: the last one wins
        ("Draft:\n```python\ndef solve():\n    return [1] * 26\n```\nFinal:\n```python\n"
         "def solve():\n    return [2] * 26\n```", "def solve():\n    return [2] * 26\n", "python-block"),
        # the full program then a short usage snippet: the longest wins
        (f"```python\n{FULL}```\nRun it with:\n```python\nsolve()\n```", FULL, "python-block"),
        # python-tagged beats an untagged block
        (f"```\nnot this\n```\n```py\n{FULL}```", FULL, "python-block"),
        (f"```\n{FULL}```", FULL, "fenced-block"),
        (f"~~~\n{FULL}~~~", FULL, "fenced-block"),
        # reply cut by max_tokens: unclosed fence runs to the end
        (f"Here:\n```python\n{FULL}", FULL, "python-block"),
        # fences indented inside a list
        ("1. Replace it:\n\n    ```python\n    def solve():\n        return 3\n    ```\n",
         "def solve():\n    return 3\n", "python-block"),
        # a reasoning model's scratchpad is ignored
        (f"<think>maybe\n```python\nwrong()\n```\n</think>\n```python\n{FULL}```", FULL, "python-block"),
        (FULL, FULL, "whole-reply"),
    ],
)
def test_extract_code_variants(reply: str, expected: str, method: str) -> None:
    ext = extract_code(reply)
    assert ext.method == method
    assert ext.code == expected
    assert ext.usable


@pytest.mark.parametrize("reply", ["I'm sorry, I cannot help with that.", "", None, "hello", "```python\n```"])
def test_extract_code_unusable_reply_returns_raw(reply: str | None) -> None:
    ext = extract_code(reply)
    assert ext.method == "raw-reply" and not ext.usable
    assert ext.code == (reply or "")


def test_code_extracted_from_real_reply(server: OpenAICompatServer) -> None:
    server.push(f"I vectorised the inner loop.\n\n```python\n{FULL}```\n\nThis should score higher.")
    prop = _agent(server).propose(_Task(), _parent(), np.random.default_rng(1))
    assert prop.code == FULL
    assert "extraction=python-block" in prop.notes and "finish_reason=stop" in prop.notes


def test_reply_as_function_of_request(server: OpenAICompatServer) -> None:
    """A scripted responder that edits the parent code it finds in the prompt."""

    def responder(body: dict[str, Any]) -> str:
        user = body["messages"][-1]["content"]
        code = user.split("```python\n", 1)[1].split("```", 1)[0]
        return "```python\n" + code.replace("0.1", "0.11") + "```"

    server.responder = responder
    prop = _agent(server).propose(_Task(), _parent(), np.random.default_rng(2))
    assert prop.code == PARENT_CODE.replace("0.1", "0.11")


def test_garbage_reply_gives_proposal_with_notes(server: OpenAICompatServer) -> None:
    server.push("I'm sorry, but I can't produce that program.", Reply(content=None))
    agent = _agent(server)
    prop = agent.propose(_Task(), _parent(), np.random.default_rng(3))
    assert prop.code == "I'm sorry, but I can't produce that program."
    assert "extraction=raw-reply" in prop.notes and "no code found" in prop.notes
    empty = agent.propose(_Task(), _parent(), np.random.default_rng(3))
    assert empty.code == "" and "empty reply" in empty.notes


def test_truncated_reply_is_noted(server: OpenAICompatServer) -> None:
    server.push(Reply(content=f"```python\n{FULL}", finish_reason="length"))
    prop = _agent(server).propose(_Task(), _parent(), np.random.default_rng(4))
    assert prop.code == FULL and "truncated by max_tokens" in prop.notes


# ------------------------------------------------------------------------------------------------
# cost, seed
# ------------------------------------------------------------------------------------------------

def test_usage_to_cost_unknown_model(server: OpenAICompatServer) -> None:
    server.push(Reply(prompt_tokens=1234, completion_tokens=567, delay_s=0.2))
    prop = _agent(server, model="openai/my-local-coder").propose(_Task(), _parent(), np.random.default_rng(5))
    assert set(prop.cost) == {"seconds", "tokens_in", "tokens_out", "usd"}
    assert prop.cost["tokens_in"] == 1234 and prop.cost["tokens_out"] == 567
    assert prop.cost["usd"] == 0.0 and "no litellm price for 'openai/my-local-coder'" in prop.notes
    assert 0.2 <= prop.cost["seconds"] < 5


def test_usage_to_cost_known_model(server: OpenAICompatServer) -> None:
    import litellm

    server.push(Reply(prompt_tokens=10_000, completion_tokens=2_000))
    prop = _agent(server, model="openai/gpt-4o-mini").propose(_Task(), _parent(), np.random.default_rng(6))
    price = litellm.model_cost["gpt-4o-mini"]
    expected = 10_000 * price["input_cost_per_token"] + 2_000 * price["output_cost_per_token"]
    assert prop.cost["usd"] > 0
    assert prop.cost["usd"] == pytest.approx(expected, rel=1e-9)
    assert "no litellm price" not in prop.notes


def test_missing_usage_gives_zero_tokens_and_note(server: OpenAICompatServer) -> None:
    server.push(Reply(include_usage=False))
    prop = _agent(server).propose(_Task(), _parent(), np.random.default_rng(7))
    assert prop.cost["tokens_in"] == 0 and prop.cost["tokens_out"] == 0
    assert "no token usage in the response" in prop.notes
    assert prop.code.startswith("def solve")


def test_seed_is_derived_from_rng(server: OpenAICompatServer) -> None:
    agent = _agent(server)
    for s in (11, 11, 12):
        agent.propose(_Task(), _parent(), np.random.default_rng(s))
    seeds = [r.body["seed"] for r in server.requests]
    assert seeds[0] == seeds[1] != seeds[2]
    assert all(0 <= x < 2**31 for x in seeds)


# ------------------------------------------------------------------------------------------------
# transport errors
# ------------------------------------------------------------------------------------------------

def test_http_500_raises_agent_error_after_retries(server: OpenAICompatServer) -> None:
    server.push(Reply(status=500), Reply(status=500), Reply(status=500), Reply(status=500))
    agent = _agent(server, model="openai/broken-model", num_retries=2)
    with pytest.raises(AgentError) as ei:
        agent.propose(_Task(), _parent(), np.random.default_rng(0))
    msg = str(ei.value)
    assert "openai/broken-model" in msg and server.base_url in msg
    assert "after 3 attempt(s)" in msg and "transport error" in msg
    assert ei.value.attempts == 3 and ei.value.model == "openai/broken-model"
    assert len(server.requests) == 3  # 1 + num_retries, no hidden client retries


def test_http_500_then_success_is_retried(server: OpenAICompatServer) -> None:
    server.push(Reply(status=503), f"```python\n{FULL}```")
    prop = _agent(server, num_retries=1).propose(_Task(), _parent(), np.random.default_rng(0))
    assert prop.code == FULL and "attempts=2" in prop.notes
    assert len(server.requests) == 2


def test_a_rate_limited_server_is_asked_again_after_the_wait_it_gave(server: OpenAICompatServer) -> None:
    """A 429 with ``Retry-After: 1.5``: the client waited its own backoff (here none) instead, and
    used its retries up before the server was ready again."""
    server.push(Reply(status=429, headers={"Retry-After": "1.5"}), f"```python\n{FULL}```")
    agent = _agent(server, num_retries=1, retry_backoff_s=0.0)
    started = time.perf_counter()
    prop = agent.propose(_Task(), _parent(), np.random.default_rng(0))
    assert prop.code == FULL and len(server.requests) == 2
    assert time.perf_counter() - started >= 1.5  # a lower bound the client owes the server, not a speed


def test_connection_refused_raises_agent_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"
    agent = LiteLLMAgent("openai/offline-model", api_base=base, api_key="sk-x", num_retries=1,
                         retry_backoff_s=0.0, timeout_s=5)
    with pytest.raises(AgentError) as ei:
        agent.propose(_Task(), _parent(), np.random.default_rng(0))
    assert "openai/offline-model" in str(ei.value) and base in str(ei.value)
    assert ei.value.attempts == 2


def test_slow_reply_times_out(server: OpenAICompatServer) -> None:
    server.push(Reply(delay_s=3.0), Reply(delay_s=3.0))
    agent = _agent(server, timeout_s=0.4, num_retries=1)
    t0 = time.perf_counter()
    with pytest.raises(AgentError) as ei:
        agent.propose(_Task(), _parent(), np.random.default_rng(0))
    assert time.perf_counter() - t0 < 2.5
    assert "Timeout" in str(ei.value) and "timeout 0.4s" in str(ei.value)
    assert len(server.requests) == 2


def test_auth_rejection_is_not_retried(server: OpenAICompatServer) -> None:
    server.push(Reply(status=401))
    with pytest.raises(AgentError) as ei:
        _agent(server, num_retries=3).propose(_Task(), _parent(), np.random.default_rng(0))
    assert "request rejected" in str(ei.value) and "AuthenticationError" in str(ei.value)
    assert len(server.requests) == 1


# ------------------------------------------------------------------------------------------------
# API keys
# ------------------------------------------------------------------------------------------------

SECRET = "sk-proj-SECRETSECRET-0123456789abcdef"


def _all_text(prop: Proposal) -> str:
    return json.dumps({"code": prop.code, "notes": prop.notes, "cost": prop.cost, "prompt": prop.prompt})


def test_env_api_key_reaches_server_but_not_the_proposal(server: OpenAICompatServer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    agent = LiteLLMAgent("openai/test-model", api_base=server.base_url, retry_backoff_s=0.0)
    prop = agent.propose(_Task(), _parent(), np.random.default_rng(0))
    assert server.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in _all_text(prop) and SECRET not in repr(agent)
    assert SECRET not in repr(vars(agent))  # the env key is read by litellm, never stored


def test_key_never_in_error_messages(server: OpenAICompatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {SECRET}.",
                                 "type": "invalid_request_error", "code": "invalid_api_key"}}).encode()
    server.push(Reply(status=401, raw_body=body))
    agent = LiteLLMAgent("openai/test-model", api_base=server.base_url, retry_backoff_s=0.0)
    with pytest.raises(AgentError) as ei:
        agent.propose(_Task(), _parent(), np.random.default_rng(0))
    assert "Incorrect API key provided: ***" in str(ei.value)
    assert SECRET not in str(ei.value) and ei.value.__cause__ is None


def test_explicit_api_key(server: OpenAICompatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent = LiteLLMAgent("openai/test-model", api_base=server.base_url, api_key=SECRET)
    prop = agent.propose(_Task(), _parent(), np.random.default_rng(0))
    assert server.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in _all_text(prop) and SECRET not in repr(agent) and SECRET not in agent.name


def test_keyless_local_server_gets_placeholder(server: OpenAICompatServer,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent = LiteLLMAgent("openai/test-model", api_base=server.base_url)
    prop = agent.propose(_Task(), _parent(), np.random.default_rng(0))
    assert server.requests[-1].headers["authorization"] == f"Bearer {LOCAL_PLACEHOLDER_KEY}"
    assert prop.code.startswith("def solve")


def test_api_base_credentials_redacted() -> None:
    agent = LiteLLMAgent("openai/x", api_base="http://user:hunter2@127.0.0.1:9/v1", api_key="k")
    assert "hunter2" not in repr(agent)


# ------------------------------------------------------------------------------------------------
# optional dependency
# ------------------------------------------------------------------------------------------------

def test_module_import_does_not_import_litellm() -> None:
    code = ("import sys, dream_gym.online.llm_agent as m; "
            "assert 'litellm' not in sys.modules, 'litellm imported eagerly'; print(m.LiteLLMAgent.__name__)")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "LiteLLMAgent"


def test_missing_litellm_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)  # makes `import litellm` raise ImportError
    with pytest.raises(RuntimeError, match=re.escape(install_command("llm"))):  # the CLI says it in one line
        LiteLLMAgent("openai/gpt-4o-mini")


# ------------------------------------------------------------------------------------------------
# with a real task and its evaluator
# ------------------------------------------------------------------------------------------------

def test_real_task_round_trip_through_evaluator(server: OpenAICompatServer, tmp_path: Path) -> None:
    """The proposal's code is what the evaluator runs: a fenced reply scores, prose fails repairable."""
    from dream_gym.online.tasks import REPAIRABLE, get_task

    task = get_task("circle-packing-26")
    root = task.initial_program()
    server.push(f"Same layout, re-submitted.\n\n```python\n{root}```\n",
                "Sorry, I am unable to write that program.")
    agent = _agent(server)
    parent = ParentContext(code=root, score=None, diagnostics="", error=None, history=[])
    good = agent.propose(task, parent, np.random.default_rng(0))
    user = server.requests[0].messages[-1]["content"]
    assert root.strip() in user and task.description[:60] in user
    assert "(no earlier attempts on this branch)" in user
    ev = task.evaluate(good.code, tmp_path / "good")
    assert ev.valid and ev.score is not None and ev.score > 0, ev.error
    bad = agent.propose(task, parent, np.random.default_rng(1))
    assert "no code found" in bad.notes
    ev_bad = task.evaluate(bad.code, tmp_path / "bad")
    assert not ev_bad.valid and ev_bad.fail_class == REPAIRABLE
