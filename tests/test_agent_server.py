"""The no-LLM agent server (dream_gym.online.agent_server, `dream-gym serve-agent`).

It is tested against OpenEvolve's real prompt templates and parsers (diff and full-rewrite
modes), over real HTTP with the openai client, and end to end: the real `openevolve-run`
(OpenEvolve's own default parent sampling) against a `dream-gym serve-agent` process, with
dream_gym's task evaluator as the evaluator file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openevolve")

from openevolve.config import PromptConfig  # noqa: E402
from openevolve.prompt.sampler import PromptSampler  # noqa: E402
from openevolve.utils.code_utils import apply_diff_blocks, extract_diffs, parse_full_rewrite  # noqa: E402

from dream_gym.online.agent_base import ParentContext  # noqa: E402
from dream_gym.online.agent_server import (  # noqa: E402
    AgentResponder,
    AgentServer,
    apply_blocks,
    diff_blocks,
    parse_prompt,
)
from dream_gym.online.agents import builtin_agent  # noqa: E402
from dream_gym.online.tasks import get_task  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TASK = "circle-packing-26"


def openevolve_prompt(code: str, *, diff: bool, artifacts: dict[str, str] | None = None,
                      others: list[str] = ()) -> list[dict[str, str]]:
    """A prompt built by OpenEvolve's own PromptSampler and default templates."""
    sampler = PromptSampler(PromptConfig())
    programs = [{"id": f"p{i}", "code": other, "metrics": {"combined_score": 0.5 + i}, "metadata": {}}
                for i, other in enumerate(others)]
    prompt = sampler.build_prompt(
        current_program=code, parent_program=code, program_metrics={"combined_score": 1.25},
        previous_programs=programs, top_programs=programs, inspirations=programs, language="python",
        evolution_round=3, diff_based_evolution=diff, program_artifacts=artifacts, feature_dimensions=[],
    )
    return [{"role": "system", "content": prompt["system"]}, {"role": "user", "content": prompt["user"]}]


def a_child(seed: int = 0) -> str:
    task = get_task(TASK)
    parent = task.initial_program()
    return builtin_agent(TASK).propose(task, ParentContext(code=parent, score=None), np.random.default_rng(seed)).code


@pytest.mark.parametrize("diff", [True, False])
def test_reads_the_current_program_from_openevolves_templates(diff: bool) -> None:
    code = get_task(TASK).initial_program()
    others = [a_child(1), a_child(2)]  # other programs' code in the history and inspirations sections
    parsed = parse_prompt(openevolve_prompt(code, diff=diff, others=others,
                                            artifacts={"diagnostics": "sum of radii 0.98", "error": "NameError: x"}))
    assert parsed.code == code.rstrip("\n") or parsed.code == code
    assert parsed.diff_mode is diff
    assert parsed.fitness == pytest.approx(1.25)
    assert parsed.error == "NameError: x"
    assert parsed.diagnostics == "sum of radii 0.98"
    plain = parse_prompt(openevolve_prompt(code, diff=diff))
    assert plain.error is None and plain.code is not None


@pytest.mark.parametrize("diff", [True, False])
def test_answers_in_the_form_openevolve_parses(diff: bool) -> None:
    task = get_task(TASK)
    code = task.initial_program()
    responder = AgentResponder(TASK, seed=7)
    body = {"model": "m", "seed": 11, "messages": openevolve_prompt(code, diff=diff)}
    reply = responder.reply(body)
    expected = builtin_agent(TASK).propose(
        task, ParentContext(code=code, score=1.25, history=[{"score": 1.25, "code": code}]), responder.rng_for(body)).code
    if diff:
        blocks = extract_diffs(reply)
        assert blocks, reply
        child, applied = apply_diff_blocks(code, blocks)
        assert applied == len(blocks)
        assert len(blocks) < 10 and sum(len(s) for s, _ in blocks) < len(code)  # hunks, not the whole program
    else:
        assert "<<<<<<< SEARCH" not in reply
        child = parse_full_rewrite(reply, "python")
    assert child.rstrip() == expected.rstrip()
    assert child.rstrip() != code.rstrip()


def test_diff_blocks_reproduce_any_edit_under_openevolves_rules() -> None:
    """Random edits of a program with repeated lines: the blocks always rebuild the child exactly
    with OpenEvolve's own apply_diff_blocks (first match, right-stripped texts)."""
    rng = np.random.default_rng(0)
    base = ["def f(x):", "    y = 0", "    y = 0", "    for i in range(3):", "        y += i", "", "    return y", ""]
    for _ in range(300):
        old = [base[int(i)] for i in rng.integers(0, len(base), size=int(rng.integers(3, 20)))]
        new = list(old)
        for _ in range(int(rng.integers(1, 4))):
            kind, at = int(rng.integers(0, 3)), int(rng.integers(0, len(new) + 1))
            if kind == 0:
                new.insert(at, f"    z = {int(rng.integers(0, 5))}")
            elif kind == 1 and new:
                del new[min(at, len(new) - 1)]
            elif new:
                new[min(at, len(new) - 1)] = "    y = 1"
        parent, child = "\n".join(old), "\n".join(new)
        if parent.rstrip() == child.rstrip():
            continue
        blocks = diff_blocks(parent, child)
        text = "\n".join(f"<<<<<<< SEARCH\n{s.rstrip()}\n=======\n{r.rstrip()}\n>>>>>>> REPLACE" for s, r in blocks)
        got, _ = apply_diff_blocks(parent, extract_diffs(text))
        assert got.rstrip() == child.rstrip(), (parent, child, blocks)
        assert apply_blocks(parent, blocks).rstrip() == child.rstrip()


def test_deterministic_for_a_seed() -> None:
    code = get_task(TASK).initial_program()
    body = {"model": "m", "seed": 3, "messages": openevolve_prompt(code, diff=True)}
    first = AgentResponder(TASK, seed=5)
    assert first.reply(body) == first.reply(dict(body)) == AgentResponder(TASK, seed=5).reply(body)
    answers = {AgentResponder(TASK, seed=s).reply(body) for s in range(6)}
    assert len(answers) > 1  # the seed matters
    per_request = {first.reply(dict(body, seed=s)) for s in range(6)}
    assert len(per_request) > 1  # so does the request's seed (OpenEvolve's per-iteration seed)


def test_http_with_the_openai_client() -> None:
    openai = pytest.importorskip("openai")
    code = get_task(TASK).initial_program()
    with AgentServer(TASK, seed=1) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-no-key-required", max_retries=0)
        response = client.chat.completions.create(model="anything", messages=openevolve_prompt(code, diff=False))
        child = parse_full_rewrite(response.choices[0].message.content, "python")
        assert "construct_packing" in child and child.rstrip() != code.rstrip()
        assert response.usage.total_tokens > 0
        with pytest.raises(openai.NotFoundError):
            client.completions.create(model="x", prompt="hi")
        request = urllib.request.Request(server.base_url + "/chat/completions", method="POST",
                                         data=json.dumps({"stream": True, "messages": []}).encode(),
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError, match="400"):
            urllib.request.urlopen(request, timeout=10)
        empty = client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hello"}])
        assert "no program" in empty.choices[0].message.content
        with urllib.request.urlopen(server.base_url + "/models", timeout=10) as reply:
            assert json.load(reply)["data"][0]["task"] == TASK
        assert server.requests == 2
    with pytest.raises(ValueError):
        AgentServer(TASK, host="0.0.0.0")
    with pytest.raises(KeyError, match="unknown task"):
        AgentServer("no-such-task")


def _serve(tmp_path: Path, seed: int = 0) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "dream_gym", "serve-agent", "--task", TASK, "--port", "0",
                             "--seed", str(seed)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert proc.stdout is not None
    base = proc.stdout.readline().strip()
    assert base.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else base
    return proc, base


@pytest.mark.slow
@pytest.mark.parametrize("diff", [True, False])
def test_openevolve_run_with_its_own_sampling_against_the_server(tmp_path: Path, diff: bool) -> None:
    """The real openevolve-run CLI, OpenEvolve's default parent sampling, W = 2, a few iterations,
    against `dream-gym serve-agent`; the evaluator file is dream_gym's (`dream-gym openevolve task`)."""
    proc, base = _serve(tmp_path)
    try:
        folder = tmp_path / "problem"
        subprocess.run([sys.executable, "-m", "dream_gym", "openevolve", "task", TASK, "--out", str(folder),
                        "--api-base", base, "-W", "2"], check=True, capture_output=True)
        config = folder / "config.yaml"
        config.write_text(config.read_text() + "checkpoint_interval: 2\n"
                          + ("" if diff else "diff_based_evolution: false\n"))
        openevolve_run = Path(sys.executable).with_name("openevolve-run")
        started = time.time()
        done = subprocess.run([str(openevolve_run), str(folder / "initial_program.py"), str(folder / "evaluator.py"),
                               "--config", str(config), "--iterations", "6", "--output", str(tmp_path / "oe")],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        assert time.time() - started < 600
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    programs = [json.loads(p.read_text()) for p in (tmp_path / "oe").rglob("programs/*.json")]
    assert programs
    children = [p for p in programs if p.get("parent_id")]
    assert children, "OpenEvolve parsed no answer of the server"
    # OpenEvolve's summary of the change: "Full rewrite", or the SEARCH/REPLACE blocks applied
    kinds = {p["metadata"].get("changes") == "Full rewrite" for p in children}
    assert kinds == {not diff}
    # scored by dream_gym's evaluator: its raw score and combined_score, or its error
    for p in programs:
        assert "combined_score" in p["metrics"]
        assert "score" in p["metrics"] or "error" in p["metrics"]
    assert any("score" in p["metrics"] for p in children)


@pytest.mark.slow
def test_the_guides_flow_leaves_a_run_that_imports(tmp_path: Path) -> None:
    """serve-agent, `openevolve task`, the real openevolve-run with the config it wrote and fewer
    iterations than a checkpoint interval: the import reads the run's evolution trace."""
    proc, base = _serve(tmp_path)
    try:
        folder = tmp_path / "problem"
        subprocess.run([sys.executable, "-m", "dream_gym", "openevolve", "task", TASK, "--out", str(folder),
                        "--api-base", base, "-W", "2"], check=True, capture_output=True)
        openevolve_run = Path(sys.executable).with_name("openevolve-run")
        done = subprocess.run([str(openevolve_run), str(folder / "initial_program.py"), str(folder / "evaluator.py"),
                               "--config", str(folder / "config.yaml"), "--iterations", "3"],
                              capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert not list((folder / "openevolve_output").rglob("checkpoint_*"))  # nothing but the trace to read
    imported = subprocess.run([sys.executable, "-m", "dream_gym", "worlds", "import", str(folder / "openevolve_output"),
                               "--out", str(tmp_path / "world")], capture_output=True, text=True, timeout=300)
    assert imported.returncode == 0, imported.stderr
    from dream_gym import load_world

    assert load_world(tmp_path / "world").size == 4  # the initial program and 3 iterations' children


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_a_port_out_of_range_is_one_error(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    from dream_gym.cli import main

    with pytest.raises(SystemExit) as refused:  # by argparse, naming the option
        main(["serve-agent", "--task", "circle-packing-26", "--port", port])
    said = "must be a port from 0 to 65535" if port == "99999" else "must be at least 0"
    assert refused.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"dream-gym serve-agent: error: argument --port: {said}, got {port}")
