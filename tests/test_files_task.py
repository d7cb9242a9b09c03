"""A task given as files (initial program, evaluator) is evaluated in dream_gym's sandbox, by every bridge.

The evaluations of dream_gym.integrations.files_task are attacked through the public API with
hostile candidates written for these tests (tests/data/files_task_hostile): reading a file outside
the workspace and the evaluator's folder, writing outside, connecting to a port, starting a process,
replacing the result file with a FIFO. Each is contained and recorded as that program's failure;
the control runs the same candidate with the task's evaluator unsandboxed, as OpenEvolve itself
runs it, where each attack works. The evaluator's folder and the `--read` folders are readable
(a folder below the home folder also at the same place below the sandbox's home). The three
systems run a task given as files without a key through the CLI: OpenEvolve with a hostile initial
program and with `--read`, ShinkaEvolve (OpenEvolve's evaluator form) and SkyDiscover on the
project's own task, each twice with the same seed; OpenEvolve's run that records the hostile
initial program and ShinkaEvolve's run of its own evaluation script call the public API (`deploy`)
in the test's process (importing a system costs seconds a process).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dream_gym.integrations.files_task import (
    SCRIPT,
    FilesTask,
    evaluation_seed,
    parse_result,
    read_folders,
    sandbox_wall_s,
)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
TASK_DIR = DATA / "openevolve_task"
HOSTILE = DATA / "files_task_hostile"
READS = DATA / "files_task_reads"
SHINKA_TASK = DATA / "shinka_task"
FILES = f"{TASK_DIR / 'initial_program.py'},{TASK_DIR / 'evaluator.py'}"

# The unsandboxed control: the task's evaluator imported and called in a plain Python process, as
# OpenEvolve's worker processes run it.
PLAIN = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("evaluation_module", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
result = module.evaluate(sys.argv[2])
print(json.dumps(getattr(result, "metrics", result)))
"""


def hostile(name: str, folder: Path, target: object = "") -> Path:
    """A hostile candidate of tests/data/files_task_hostile with its target filled in, as a file in ``folder``."""
    text = (HOSTILE / f"{name}.py").read_text(encoding="utf-8").replace("__TARGET__", str(target))
    path = folder / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    return path


def plain(evaluator: Path, program: Path, cwd: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", PLAIN, str(evaluator), str(program)], capture_output=True,
                          text=True, timeout=120, cwd=cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def sandboxed(evaluator: Path = HOSTILE / "evaluator.py", **settings: object) -> FilesTask:
    return FilesTask.of(evaluator, wall_s=float(settings.pop("wall_s", 60)), **settings)  # type: ignore[arg-type]


# -- one evaluation, attacked -----------------------------------------------------------------------------------------
def test_the_tasks_evaluator_scores_in_the_sandbox_seeded_by_the_run_and_the_program() -> None:
    import importlib.util

    program = TASK_DIR / "initial_program.py"
    spec = importlib.util.spec_from_file_location("raw_fixture_evaluator", TASK_DIR / "evaluator.py")
    raw = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(raw)  # type: ignore[union-attr]
    assert raw.evaluate(str(program))["combined_score"] != raw.evaluate(str(program))["combined_score"]  # the control
    task = sandboxed(TASK_DIR / "evaluator.py", seed=5)
    first = task.evaluate(program)
    assert first.failure is None and set(first.metrics) == {"combined_score", "mse", "coverage"}
    assert task.evaluate(program).metrics == first.metrics  # the same seed and program: the same score
    other = sandboxed(TASK_DIR / "evaluator.py", seed=6).evaluate(program)
    assert other.metrics["combined_score"] != first.metrics["combined_score"]
    assert evaluation_seed(5, program.read_bytes()) != evaluation_seed(6, program.read_bytes())


@pytest.mark.parametrize("attack", ["reads_outside", "writes_outside", "opens_socket"])
def test_a_candidate_reaches_nothing_outside_its_workspace(attack: str, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's secret", encoding="utf-8")
    escaped = tmp_path / "escaped.txt"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    target = {"reads_outside": secret, "writes_outside": escaped, "opens_socket": listener.getsockname()[1]}[attack]
    program = hostile(attack, tmp_path, target)

    def connected() -> bool:
        try:
            listener.accept()[0].close()
        except BlockingIOError:
            return False
        return True

    try:
        evaluation = sandboxed().evaluate(program)
        assert evaluation.metrics["combined_score"] == 0.0
        assert "PermissionError" in evaluation.metrics["error"]
        assert "the user's secret" not in json.dumps(evaluation.metrics)
        assert not escaped.exists() and not connected()
        control = plain(HOSTILE / "evaluator.py", program, tmp_path)  # as plain OpenEvolve runs it
        assert "error" not in control
        if attack == "reads_outside":
            assert control["combined_score"] == len("the user's secret")
        if attack == "writes_outside":
            assert escaped.read_text(encoding="utf-8") == "written by a candidate"
        if attack == "opens_socket":
            assert connected()
    finally:
        listener.close()


def test_a_result_file_replaced_by_a_fifo_is_the_programs_failure(tmp_path: Path) -> None:
    program = hostile("fifo_result", tmp_path)
    evaluation = sandboxed().evaluate(program)
    assert evaluation.failure == "result file is a FIFO, not a regular file"
    assert evaluation.metrics == {"combined_score": 0.0, "error": evaluation.failure}
    # the control: a harness that writes its result as ours does finds a FIFO in its place
    script = ("import importlib.util, os, sys\n"
              "spec = importlib.util.spec_from_file_location('candidate', sys.argv[1])\n"
              "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
              "open('_result.json.tmp', 'w').write('{\"ok\": true}')\n"
              "os.replace('_result.json.tmp', '_result.json')\n")
    subprocess.run([sys.executable, "-c", script, str(program)], check=True, cwd=tmp_path, timeout=60)
    assert stat.S_ISFIFO(os.lstat(tmp_path / "_result.json").st_mode)


def test_an_evaluation_that_starts_a_process_fails_naming_it(tmp_path: Path) -> None:
    program = hostile("starts_process", tmp_path)
    evaluation = sandboxed().evaluate(program)
    assert evaluation.metrics["combined_score"] == 0.0
    assert "subprocess.Popen ['echo', '7']" in evaluation.metrics["error"]
    assert "allows threads but no new process" in evaluation.metrics["error"]
    assert evaluation.artifacts["sandbox"].startswith("refused: subprocess.Popen ['echo', '7']")
    assert plain(HOSTILE / "evaluator.py", program, tmp_path)["combined_score"] == 7.0  # the control
    # an evaluator that runs the program in a process of its own fails once, naming what it started
    evaluator = tmp_path / "subprocess_evaluator.py"
    evaluator.write_text("import subprocess, sys\n\n\ndef evaluate(program_path):\n"
                         "    done = subprocess.run([sys.executable, program_path], capture_output=True, text=True)\n"
                         "    return {'combined_score': float(done.stdout)}\n", encoding="utf-8")
    runs = tmp_path / "prints.py"
    runs.write_text("print(3)\n", encoding="utf-8")
    refused = sandboxed(evaluator).evaluate(runs)
    assert refused.failure is not None and refused.failure.startswith("PermissionError: subprocess.Popen [")
    assert "'<workdir>/program.py']" in refused.failure and "no new process" in refused.failure
    assert plain(evaluator, runs, tmp_path)["combined_score"] == 3.0  # the control


def test_threads_run_and_a_timeout_is_the_programs_failure(tmp_path: Path) -> None:
    evaluator = tmp_path / "threads_evaluator.py"
    evaluator.write_text(
        "import concurrent.futures, importlib.util\n\n\ndef evaluate(program_path):\n"
        "    spec = importlib.util.spec_from_file_location('program', program_path)\n"
        "    program = importlib.util.module_from_spec(spec)\n    spec.loader.exec_module(program)\n"
        "    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:\n"
        "        return {'combined_score': float(pool.submit(program.run).result())}\n", encoding="utf-8")
    quick, slow = tmp_path / "quick.py", tmp_path / "slow.py"
    quick.write_text("def run():\n    return 0.25\n", encoding="utf-8")
    slow.write_text("import time\n\n\ndef run():\n    time.sleep(600)\n", encoding="utf-8")
    assert sandboxed(evaluator).evaluate(quick).metrics == {"combined_score": 0.25}
    timed_out = sandboxed(evaluator, wall_s=2).evaluate(slow)
    assert timed_out.failure == "timeout: the evaluation did not finish within 2s"
    assert sandbox_wall_s(300) == 290 and sandbox_wall_s(None) == 290 and sandbox_wall_s(20) == 18


def test_what_an_evaluation_returns_is_read_as_bounded_printable_data(tmp_path: Path) -> None:
    shown = sandboxed().evaluate(hostile("terminal_text", tmp_path))
    assert shown.metrics == {"combined_score": 0.5}
    note = shown.artifacts["note"]
    assert "\x1b" not in note and "\u202e" not in note and "\r" not in note
    assert note.startswith("\\x1b]52;") and "\\u202e" in note
    for forged, problem in [
        (b'{"ok": true, "metrics": {"x": [' + b",".join([b"[]"] * 5000) + b"]}}", "more than the 4096"),
        (b'{"ok": true, "metrics": ' + b"[" * 40 + b"]" * 40 + b"}", "deeper than 32 levels"),
        (b"not json", "malformed result file"),
        (b'["ok", true]', "malformed result file"),
    ]:
        with pytest.raises(ValueError, match=problem):
            parse_result(forged)


def test_the_evaluators_folder_and_the_read_folders_are_readable(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    data = home / "datasets" / "target"
    data.mkdir(parents=True)
    (data / "value.txt").write_text("3.0\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    program = READS / "initial_program.py"
    without = sandboxed(READS / "evaluator.py").evaluate(program)  # the control: the data set is not given
    assert without.metrics["combined_score"] == 0.0 and "the data set is not readable" in without.metrics["error"]
    given = sandboxed(READS / "evaluator.py", read=[data]).evaluate(program)
    assert given.failure is None and given.metrics == {"combined_score": pytest.approx(2.0 / 3.0)}
    with pytest.raises(ValueError, match="not a folder"):
        read_folders([tmp_path / "missing"])


def test_threadpoolctl_limits_threads_while_proc_stays_closed(tmp_path: Path) -> None:
    pytest.importorskip("threadpoolctl")
    evaluator = tmp_path / "limits_evaluator.py"
    evaluator.write_text("import numpy as np\nfrom threadpoolctl import threadpool_limits\n\n\ndef evaluate(program_path):\n"
                         "    with threadpool_limits(limits=1):\n"
                         "        return {'combined_score': float(np.linalg.norm(np.eye(3)))}\n", encoding="utf-8")
    program = tmp_path / "program.py"
    program.write_text("VALUE = 1\n", encoding="utf-8")
    assert sandboxed(evaluator).evaluate(program).metrics == {"combined_score": pytest.approx(3 ** 0.5)}
    reads_proc = tmp_path / "proc_evaluator.py"  # the control: /proc itself is not readable
    reads_proc.write_text("def evaluate(program_path):\n    return {'combined_score': len(open('/proc/self/maps').read())}\n",
                          encoding="utf-8")
    refused = sandboxed(reads_proc).evaluate(program)
    assert refused.failure is not None and refused.failure.startswith("PermissionError")


# -- the bridges, through the CLI -------------------------------------------------------------------------------------
def deploy(system: str, task: str, out: Path, *extra: str, policy: str = "greedy", budget: int = 8, seed: int = 0,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`dream-gym deploy` with no --model and no key in its environment."""
    base = {k: v for k, v in os.environ.items() if "API_KEY" not in k and "API_BASE" not in k}
    return subprocess.run([sys.executable, "-m", "dream_gym", "deploy", "--system", system, "--task", task,
                           "--policy", policy, "-W", "2", "--budget", str(budget), "--seed", str(seed),
                           "--out", str(out), *extra], capture_output=True, text=True, timeout=900,
                          cwd=out.parent, env={**base, **(env or {})})


def nodes(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "nodes.jsonl").read_text().splitlines() if line.strip()]


def tree(folder: Path) -> list[tuple]:
    """Each node's parent (as an index), score, error and code: the tree whatever the ids."""
    records = nodes(folder)
    index = {r["id"]: i for i, r in enumerate(records)}
    return [(index.get(r["parent"]), r["score"], r.get("error"), r.get("code")) for r in records]


def test_read_is_refused_for_a_built_in_task_and_when_it_names_no_folder(tmp_path: Path) -> None:
    for task, folder, problem in [("circle-packing-26", tmp_path, "circle-packing-26 is a built-in task"),
                                  (FILES, tmp_path / "missing", "not a folder")]:
        done = deploy("openevolve", task, tmp_path / "world", "--read", str(folder), budget=2)
        assert done.returncode != 0 and done.stderr.count(problem) == 1, done.stderr[-2000:]
        assert not (tmp_path / "world").exists()


def test_openevolve_records_a_hostile_initial_program_as_its_failure(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's secret", encoding="utf-8")
    program = hostile("reads_outside", tmp_path, secret)
    from dream_gym.integrations.deploy import DeployRequest
    from dream_gym.integrations.deploy import deploy as deploy_api

    out = tmp_path / "world"
    with pytest.raises(ValueError, match="the initial program failed its evaluation"):  # the system's own selection
        deploy_api(DeployRequest(system="openevolve", task=f"{program},{HOSTILE / 'evaluator.py'}", out=out,
                                 policy="native", workers=2, budget=2, seed=0))
    records = nodes(out)
    assert records[0]["score"] is None and "Permission denied" in records[0]["error"]
    everything = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    assert "the user's secret" not in everything
    refused = deploy("openevolve", f"{program},{HOSTILE / 'evaluator.py'}", tmp_path / "greedy", budget=2)
    assert refused.returncode != 0 and refused.stderr.count("the initial program failed its evaluation") == 1
    assert "Permission denied" in refused.stderr


def test_openevolve_reads_a_folder_below_home_given_with_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    data = home / "datasets" / "target"
    data.mkdir(parents=True)
    (data / "value.txt").write_text("3.0\n", encoding="utf-8")
    out = tmp_path / "world"
    task = f"{READS / 'initial_program.py'},{READS / 'evaluator.py'}"
    done = deploy("openevolve", task, out, "--read", str(data), budget=4, env={"HOME": str(home)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert ", stopped by budget, " in done.stdout, done.stdout[-3000:]  # OpenEvolve's iterations, in deploy's word
    records = nodes(out)
    assert records[0]["score"] == pytest.approx(2.0 / 3.0) and len(records) >= 3
    meta = json.loads((out / "world.json").read_text())
    assert meta["openevolve"]["read"] == [str(data.resolve())]
    assert "--read" in meta["command"]


@pytest.mark.slow
@pytest.mark.parametrize("system", ["shinkaevolve", "skydiscover"])
def test_shinkaevolve_and_skydiscover_run_a_task_given_as_files_without_a_key(system: str, tmp_path: Path) -> None:
    pytest.importorskip({"shinkaevolve": "shinka", "skydiscover": "skydiscover"}[system])
    first, second = tmp_path / "first", tmp_path / "second"
    done = deploy(system, FILES, first, "--policy-arg", "patience=100", budget=6)
    assert done.returncode == 0, done.stderr[-3000:]
    assert ", stopped by budget, " in done.stdout, done.stdout[-3000:]  # one word for every system
    records = nodes(first)
    # every proposal a node (SkyDiscover retries a failed evaluation with a new program, also a node)
    assert len(records) >= 7 and all(r.get("code") for r in records)
    valid = [r for r in records[1:] if r["score"] is not None]
    assert len(valid) >= 3 and records[0]["score"] > 0.3
    if system == "skydiscover":  # the same seed, the same tree (ShinkaEvolve's: test_shinkaevolve_bridge.py)
        assert deploy(system, FILES, second, "--policy-arg", "patience=100", budget=6).returncode == 0
        assert tree(second) == tree(first)
    meta = json.loads((first / "world.json").read_text())
    assert meta["agent"] == "dream-gym serve-agent (generic agent)" and meta["task"]["name"] == "openevolve_task"
    wrapper = (first / "task" / ("evaluate.py" if system == "shinkaevolve" else "evaluator.py")).read_text()
    assert "run in dream_gym's sandbox" in wrapper and str(TASK_DIR / "evaluator.py") in wrapper


@pytest.mark.slow
def test_shinkaevolve_runs_its_own_evaluation_script_in_the_sandbox(tmp_path: Path) -> None:
    pytest.importorskip("shinka")
    evaluation = sandboxed(SHINKA_TASK / "evaluate.py").evaluate(SHINKA_TASK / "initial.py", contract=SCRIPT)
    assert evaluation.correct == {"correct": True, "error": None}
    assert evaluation.metrics["combined_score"] == pytest.approx(1.0 / 3.0)
    from dream_gym.integrations.deploy import DeployRequest
    from dream_gym.integrations.deploy import deploy as deploy_api

    out = tmp_path / "world"
    # every evaluation imports ShinkaEvolve (seconds each): the root and two children are enough
    deploy_api(DeployRequest(system="shinkaevolve", task=f"{SHINKA_TASK / 'initial.py'},{SHINKA_TASK / 'evaluate.py'}",
                             out=out, policy="greedy", workers=2, budget=2, seed=0))
    records = nodes(out)
    assert records[0]["score"] == pytest.approx(1.0 / 3.0) and len(records) >= 3
    assert "ShinkaEvolve's evaluation script" in (out / "task" / "evaluate.py").read_text()


def test_a_file_the_sandbox_keeps_from_the_evaluator_is_said_with_the_option_that_gives_it(tmp_path: Path) -> None:
    """An evaluator that reads data outside its task's folder fails with PermissionError: the
    failure says which folders an evaluation reads and that --read gives one."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "value.txt").write_text("3.0\n", encoding="utf-8")
    task = tmp_path / "task"
    task.mkdir()
    evaluator = task / "evaluator.py"
    evaluator.write_text(f"def evaluate(program_path):\n    with open({str(elsewhere / 'value.txt')!r}) as f:\n"
                         "        return {'combined_score': float(f.read())}\n", encoding="utf-8")
    program = READS / "initial_program.py"
    refused = sandboxed(evaluator).evaluate(program)
    assert refused.failure is not None and refused.failure.startswith("PermissionError: [Errno 13]")
    assert "read the task's folder and the --read folders only: --read DIR for data kept elsewhere" in refused.failure
    given = sandboxed(evaluator, read=[elsewhere]).evaluate(program)  # the option it names
    assert given.failure is None and given.metrics == {"combined_score": 3.0}


def test_a_task_file_that_is_not_utf8_is_refused_before_its_world_is_made(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # the run failed after making --out ("'utf-8' codec can't decode byte 0xe9", no file named), and the
    # world it left (no node) refused the corrected command
    from dream_gym.cli import main

    program = tmp_path / "initial_program.py"
    program.write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + (TASK_DIR / "initial_program.py").read_bytes())
    out = tmp_path / "world"
    for system in ("openevolve", "shinkaevolve", "skydiscover"):
        assert main(["deploy", "--system", system, "--task", f"{program},{TASK_DIR / 'evaluator.py'}",
                     "--budget", "2", "--out", str(out)]) == 2
        error = capsys.readouterr().err
        assert f"{program} is not UTF-8 text (invalid continuation byte at byte 31)" in error and not out.exists()


def test_an_evaluator_without_evaluate_is_refused_before_the_run_for_the_systems_that_call_it(tmp_path: Path) -> None:
    """A ShinkaEvolve evaluation script given to SkyDiscover (or OpenEvolve) was evaluated, its world
    left to remove, and the failure said "(while importing the evaluator)", though the import worked."""
    from dream_gym.cli import main
    from dream_gym.integrations.files_task import check_evaluate_defined

    initial = tmp_path / "initial.py"
    initial.write_text("def f(x):\n    return x\n")
    for text in ("def evaluate(program_path):\n    return {}\n", "from scoring import evaluate\n",
                 "from scoring import *\n", "evaluate = lambda path: {}\n", "import x\nif x:\n    def evaluate(p): ...\n"):
        (tmp_path / "ok.py").write_text(text)
        check_evaluate_defined(f"{initial},{tmp_path / 'ok.py'}", "SkyDiscover")  # bound, one way or another
    script = tmp_path / "script.py"
    script.write_text("import json\nif __name__ == '__main__':\n    json.dump({'correct': True}, open('c.json', 'w'))\n")
    out = tmp_path / "world"
    for system in ("skydiscover", "openevolve"):
        assert main(["deploy", "--system", system, "--task", f"{initial},{script}", "--policy", "greedy",
                     "--budget", "2", "--out", str(out)]) == 2
        assert not out.exists()
    with pytest.raises(ValueError, match=r"script.py defines no function evaluate\(program_path\), which SkyDiscover "
                                         r"calls for each program \(a ShinkaEvolve evaluation script runs with "
                                         r"--system shinkaevolve\)"):
        check_evaluate_defined(f"{initial},{script}", "SkyDiscover")
