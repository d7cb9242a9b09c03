"""Ctrl-C while a discovery system waits on its model: the run says it is stopping, and a second
Ctrl-C stops it at once, whatever the model's server does (it hangs, or answers 500 to every ask
while the system retries). Before, SkyDiscover's run ignored both signals while an LLM call hung
(the loop's shutdown joined the thread making the call; only ``kill -9`` ended it) and said
nothing; ShinkaEvolve's first signal waited, silently, for a round that never ends.

The systems run for real (installed packages, the CLI as users run it) against the test's
OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from openai_server import OpenAICompatServer, Reply

from dream_gym.integrations.stopping import run_coroutine


def deploy_command(system: str, out: Path, base_url: str) -> list[str]:
    return [sys.executable, "-m", "dream_gym", "deploy", "--system", system, "--task", "sum-difference",
            "--policy", "greedy", "-W", "2", "--budget", "4", "--model", "openai/m", "--api-base", base_url,
            "--out", str(out)]


def wait_for(condition, seconds: float = 120.0) -> None:  # noqa: ANN001
    deadline = time.time() + seconds
    while not condition():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def read_stderr(proc: subprocess.Popen[str], into: list[str]) -> threading.Thread:
    thread = threading.Thread(target=lambda: into.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread


@pytest.mark.parametrize("system, reply", [
    ("skydiscover", Reply(delay_s=3600)),  # a call that hangs
    ("shinkaevolve", Reply(status=500)),  # retried without end (a call that hangs stops the same way)
], ids=["skydiscover-hangs", "shinkaevolve-500"])
def test_a_run_waiting_on_its_model_says_it_is_stopping_and_a_second_ctrl_c_stops_it(
        tmp_path: Path, system: str, reply: Reply) -> None:
    pytest.importorskip("skydiscover" if system == "skydiscover" else "shinka")
    out = tmp_path / "world"
    with OpenAICompatServer() as server:
        server.responder = lambda body: reply
        proc = subprocess.Popen(deploy_command(system, out, server.base_url), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        said: list[str] = []
        reader = read_stderr(proc, said)
        try:
            wait_for(lambda: len(server.requests) >= 1)
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            wait_for(lambda: any("stopping after" in line for line in said), 60)
            assert proc.poll() is None  # the first signal waits for the work in flight
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
        finally:
            proc.kill()
        reader.join(10)
    stderr = "".join(said)
    assert proc.returncode == 130, stderr[-3000:]
    assert "Ctrl-C again stops at once" in stderr and "Traceback" not in stderr
    assert stderr.rstrip().endswith("with --resume continues it")
    assert (out / "nodes.jsonl").exists()  # the root, recorded before the model was asked


def test_a_coroutine_stopped_while_a_call_in_its_executor_hangs_returns_at_once() -> None:
    """The loop's own shutdown does not wait for a call that never returns (asyncio.run joined it)."""
    hung = threading.Event()

    async def waits_on_a_call() -> None:
        call = asyncio.get_running_loop().run_in_executor(None, hung.wait)
        await asyncio.sleep(0.05)
        raise KeyboardInterrupt  # what a signal handler's exception looks like to the loop
        await call

    done = threading.Event()

    def run() -> None:
        with pytest.raises(KeyboardInterrupt):
            run_coroutine(waits_on_a_call())
        done.set()

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        assert done.wait(30), "run_coroutine waited for the hung call"
    finally:
        hung.set()  # else the interpreter's exit joins the call's thread


def test_a_finished_coroutine_gets_its_calls_results() -> None:
    async def adds() -> int:
        loop = asyncio.get_running_loop()
        values = await asyncio.gather(*(loop.run_in_executor(None, lambda k=k: k * k) for k in range(5)))
        with pytest.raises(ZeroDivisionError):
            await loop.run_in_executor(None, lambda: 1 / 0)
        return sum(values)

    assert run_coroutine(adds()) == 30


@pytest.mark.parametrize("system", ["openevolve", "shinkaevolve"])
def test_the_systems_own_selection_stops_at_an_initial_program_that_failed(tmp_path: Path, system: str) -> None:
    """With ``--policy native`` (the default) a broken evaluator was known after the root's
    evaluation, yet the system ran its whole budget (an LLM call a program; SkyDiscover made 12
    programs at --budget 4) and then exited 1. It stops there now, as a policy's run does (exit 2,
    one line saying what the folder keeps). (SkyDiscover: tests/test_skydiscover_bridge.py.)"""
    pytest.importorskip({"shinkaevolve": "shinka"}.get(system, system))
    (tmp_path / "initial_program.py").write_text("# EVOLVE-BLOCK-START\ndef f(x):\n    return x\n# EVOLVE-BLOCK-END\n")
    (tmp_path / "evaluator.py").write_text("def evaluate(program_path):\n    raise RuntimeError('broken on purpose')\n")
    out = tmp_path / "world"
    done = subprocess.run([sys.executable, "-m", "dream_gym", "deploy", "--system", system, "--task",
                           f"{tmp_path / 'initial_program.py'},{tmp_path / 'evaluator.py'}", "--budget", "4", "-W",
                           "2", "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and done.stderr.count("error:") == 1 and "Traceback" not in done.stderr
    assert "the initial program failed its evaluation, so the run has no scored program to start from: " in done.stderr
    assert "broken on purpose" in done.stderr and f"{out} keeps that evaluation" in done.stderr
    assert (out / "nodes.jsonl").read_text().count("\n") == 1  # the root's evaluation alone
