"""kill -9 of a real `dream-gym rsi` process, then --resume: in the middle of a dream phase (an
LLM developer over real HTTP: no answered call is sent again, no finished version is redone) and
in the middle of an online rollout (no finished attempt is lost, no finished phase redone)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dream_gym.infrastructure.durable import read_jsonl
from dream_gym.world.tree import load_world
from tests import dream_revisions as revs
from tests.openai_server import OpenAICompatServer, Reply

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning:pydantic.*")]


def _rsi(out: Path, *extra: str, policy: str = "fixed") -> list[str]:
    # no held-out check (--validate none): what is killed and resumed here does not depend on it
    return [sys.executable, "-m", "dream_gym", "rsi", "--task", "sum-difference", "--policy", policy,
            "--workers", "2", "--betas", "0.5", "-j", "1", "--validate", "none", "--out", str(out), "--quiet", *extra]


def _wait(condition, process: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        if process.poll() is not None:
            raise AssertionError(f"the run ended before the kill: {process.stderr.read().decode()[-2000:]}")
        time.sleep(0.05)
    raise AssertionError("the run never reached the point to kill it at")


def _kill(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _user_prompts(server: OpenAICompatServer) -> list[str]:
    """The prompts the server received whole (a request cut off by the kill has no messages)."""
    return [r.messages[-1]["content"] for r in server.requests if r.messages]


def test_kill_9_in_a_dream_phase_then_resume_sends_no_answered_call_and_redoes_no_version(tmp_path):
    out = tmp_path / "run"
    ledger = out / "dream" / "dream.jsonl"
    with OpenAICompatServer() as server:
        server.responder = lambda body: Reply(content=revs.fenced(revs.WEAK), delay_s=0.4)
        command = _rsi(out, "--iterations", "1", "--rounds", "3", "--revisions", "6", "--developer",
                       "openai/local-dev", "--api-base", server.base_url)
        process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)

        def mid_phase() -> bool:
            rows = read_jsonl(ledger)
            return sum(r["type"] == "revision" for r in rows) >= 3

        _wait(mid_phase, process)
        _kill(process)
        before = read_jsonl(ledger)
        assert not any(r["type"] == "phase" for r in before)
        journal = read_jsonl(out / "dream" / "journal.jsonl")
        answered = [r["key"] for r in journal if r["type"] == "reply"]
        answered_prompts = [r["messages"][-1]["content"] for r in journal
                            if r["type"] == "request" and r["key"] in answered]
        assert len(answered) >= 2
        requests_at_kill = len(_user_prompts(server))

        resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        prompts = _user_prompts(server)
    for prompt in answered_prompts:  # an answered call went out once, before the kill, never again
        assert prompts.count(prompt) == 1
    assert len(prompts) - requests_at_kill == 5 - len(answered)  # only the calls not answered yet
    after = read_jsonl(ledger)
    assert after[: len(before)] == before  # finished versions kept as they were
    versions = [(r["phase"], r["m"]) for r in after if r["type"] == "revision"]
    assert versions == [(1, m) for m in range(6)]  # each exactly once: none redone
    assert sum(r["type"] == "phase" for r in after) == 1
    assert json.loads((out / "summary.json").read_text())["iterations"][0]["development"]["calls"] == 5


def test_kill_9_in_an_online_rollout_then_resume_loses_no_attempt_and_redoes_no_phase(tmp_path):
    out = tmp_path / "run"
    wide = tmp_path / "wide.py"  # never stops: rollouts run all K1 rounds (M = 1 keeps it deployed)
    wide.write_text("def act(view):\n    return [0] * min(view.workers, view.root_slots)\n")
    command = _rsi(out, "--iterations", "2", "--rounds", "14", "--revisions", "1", policy=str(wide))
    process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    nodes = out / "worlds" / "iter-2" / "nodes.jsonl"
    _wait(lambda: nodes.exists() and nodes.read_bytes().count(b"\n") >= 6, process)
    _kill(process)
    raw = nodes.read_bytes()
    complete = raw[: raw.rfind(b"\n") + 1].splitlines()
    assert not json.loads((out / "worlds/iter-2/world.json").read_text()).get("sha256")  # not finished
    phase1 = [r for r in read_jsonl(out / "dream" / "dream.jsonl") if r["phase"] == 1]
    assert [r["type"] for r in phase1] == ["revision", "phase"]

    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    world = load_world(out / "worlds" / "iter-2")  # validates: unique ids, parents first, checksum
    assert nodes.read_bytes().splitlines()[: len(complete)] == complete  # nothing written was lost
    assert world.size >= len(complete)
    assert [r for r in read_jsonl(out / "dream" / "dream.jsonl") if r["phase"] == 1] == phase1  # not redone
    rollouts = [r["t"] for r in read_jsonl(out / "rsi.jsonl") if r["type"] == "rollout"]
    assert rollouts == [1, 2]
    assert [r["t"] for r in json.loads((out / "summary.json").read_text())["iterations"]] == [1, 2]
