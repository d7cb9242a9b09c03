"""``dream-gym rsi --system openevolve``: the loop inside OpenEvolve, end to end through the real CLI
(OpenEvolve 0.4 and the no-LLM agent server, the built-in developer), and kill -9 then --resume."""

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
from dream_gym.infrastructure.locks import LockedError, folder_lock
from dream_gym.world.tree import load_world

TASK = "circle-packing-26"


def _rsi(out: Path, *extra: str, revisions: int = 2, budget: int = 8) -> list[str]:
    # no held-out check (--validate none): the loop's runs, pools, phases and resumes do not depend on it
    return [sys.executable, "-m", "dream_gym", "rsi", "--system", "openevolve", "--task", TASK, "--policy", "greedy",
            "-W", "2", "--budget", str(budget), "--revisions", str(revisions), "--betas", "0.5", "-j", "1",
            "--validate", "none", "--out", str(out), *extra]


def test_options_of_the_other_mode_are_refused_with_one_line(tmp_path: Path, capsys):
    from dream_gym.cli import main

    def refused(argv: list[str]) -> str:
        assert main(argv) == 2
        return capsys.readouterr().err

    system = _rsi(tmp_path / "a", "--iterations", "1")[3:]
    for extra, message in ((["--agent", "builtin"], "--agent: not with --system openevolve"),
                           (["--rounds", "3"], "--rounds: not with --system openevolve")):
        error = refused([*system, *extra])
        assert message in error and error.count("\n") == 1
    assert "needs --budget" in refused([a for a in system if a not in ("--budget", "8")])
    grow_mode = ["rsi", "--task", TASK, "--policy", "greedy", "--iterations", "1", "--revisions", "1",
                 "--budget", "8", "--out", str(tmp_path / "c")]
    assert "--budget: only with --system" in refused(grow_mode)
    assert "--read: only with --system" in refused([a for a in grow_mode if a not in ("--budget", "8")] +
                                                   ["--read", str(tmp_path)])
    assert "unknown task 'circle-packin-26'" in refused([*system, "--task", "circle-packin-26"])
    missing = f"{tmp_path / 'initial_program.py'},{tmp_path / 'evaluator.py'}"
    assert "initial_program.py does not exist" in refused([*system, "--task", missing])
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()  # refused before anything is written


def test_a_width_or_rounds_no_run_can_have_is_refused_before_anything_is_written(tmp_path: Path, capsys):
    """-W 0 in either mode, and --rounds 0 (it grew 10-round rollouts: 0 read as "not given")."""
    from dream_gym.cli import main

    system = _rsi(tmp_path / "a", "--iterations", "1")[3:]
    grow_mode = ["rsi", "--task", TASK, "--policy", "greedy", "--iterations", "1", "--revisions", "1",
                 "--out", str(tmp_path / "a")]
    for argv in ([*system, "-W", "0"], [*grow_mode, "-W", "0"]):  # argparse's to refuse, by the option's name
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert capsys.readouterr().err.strip().endswith("dream-gym rsi: error: argument -W/--workers: must be at least "
                                                         "1, got 0")
        assert not (tmp_path / "a").exists()
    with pytest.raises(SystemExit) as exit_info:
        main([*grow_mode, "--rounds", "0"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().endswith("dream-gym rsi: error: argument --rounds: must be at least 1, got 0")
    assert not (tmp_path / "a").exists()


@pytest.mark.slow
def test_two_iterations_deploy_record_pool_dream_and_deploy_the_winner(tmp_path: Path):
    out = tmp_path / "run"
    done = subprocess.run([*_rsi(out, "--iterations", "2")], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()  # its results: what `> log` keeps
    assert [line.split(":")[0] for line in lines[:2]] == ["1/2", "2/2"]  # one line per iteration
    assert all(len(line) <= 80 for line in lines[:2]) and lines[2].startswith("summary: ")
    rows = read_jsonl(out / "rsi.jsonl")
    assert [(r["type"], r["t"]) for r in rows] == [("run", 1), ("pool", 1), ("iteration", 1),
                                                  ("run", 2), ("pool", 2), ("iteration", 2)]
    runs = [load_world(out / "runs" / f"iter-{t}") for t in (1, 2)]
    assert runs[0].meta["policy"] == "greedy"
    assert runs[1].meta["policy"] == str(out / "policies" / "pi_2.py")  # the deployed winner ran next
    assert all(w.meta["source"].startswith("dream-gym openevolve run") for w in runs)
    pooled = load_world(out / "pools" / "iter-2")
    assert pooled.size == sum(w.size for w in runs) - rows[4]["merged"]
    assert pooled.meta["pool"]["runs"] == [{"id": w.id, "sha256": w.meta["sha256"], "nodes": w.size, "added": a}
                                           for w, a in zip(runs, rows[4]["added"], strict=True)]
    phases = [r for r in read_jsonl(out / "dream" / "dream.jsonl") if r["type"] == "phase"]
    assert [p["history"] for p in phases] == [["run-pool1"], ["run-pool2"]]  # each phase on the pool so far
    assert (out / "policies" / "pi_3.py").is_file()
    summary = json.loads((out / "summary.json").read_text())["iterations"]
    assert [s["pool_nodes"] for s in summary] == [rows[1]["nodes"], rows[4]["nodes"]]
    table = (out / "summary.md").read_text().splitlines()  # the same figures in the table
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    for line, s in zip(table[2:], summary, strict=True):
        cells = dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True))
        assert (cells["invalid"], cells["pool"], cells["disagree"]) == (str(s["invalid"]), str(s["pool_nodes"]),
                                                                        str(s["disagreements"]))
    # each stage's progress on stderr while it runs: the run, its end, the pool, the phase's versions
    progress = done.stderr
    for t in (1, 2):
        assert f"iteration {t}/2: policy" in progress
        assert f"  run {t}: openevolve, 8 programs, in {out / 'runs' / f'iter-{t}'}" in progress
        assert f"  run {t} done: {rows[3 * t - 3]['nodes'] - 1} programs ({rows[3 * t - 3]['invalid']} invalid)" in progress
        assert f"  pool of runs 1-{t}: {rows[3 * t - 2]['nodes']} nodes" in progress
        assert f"phase {t} revision 1 of 1 " in progress


def _wait(condition, process: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        if process.poll() is not None:
            raise AssertionError(f"the run ended before the kill: {process.stderr.read().decode()[-2000:]}")
        time.sleep(0.05)
    raise AssertionError("the run never reached the point to kill it at")


@pytest.mark.slow
def test_kill_9_in_the_second_run_then_resume_continues_it_and_redoes_nothing(tmp_path: Path, short_tmp_path: Path):
    out = tmp_path / "run"
    # M = 1 keeps the start policy deployed; the coverage recorder never stops by itself, so run 2 spends its budget
    command = [*_rsi(out, "--iterations", "2", "--quiet", revisions=1, budget=12), "--policy", "coverage"]
    env = {**os.environ, "TMPDIR": str(short_tmp_path)}  # OpenEvolve's leftover program files of the killed run
    process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env=env)
    nodes = out / "runs" / "iter-2" / "nodes.jsonl"
    _wait(lambda: nodes.exists() and nodes.read_bytes().count(b"\n") >= 4, process)
    with pytest.raises(LockedError, match=f"pid {process.pid}"):  # one writer per run folder
        folder_lock(out).acquire()
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    raw = nodes.read_bytes()
    written = raw[: raw.rfind(b"\n") + 1].splitlines()
    before = read_jsonl(out / "rsi.jsonl")
    assert [(r["type"], r["t"]) for r in before] == [("run", 1), ("pool", 1), ("iteration", 1)]
    phase1 = [r for r in read_jsonl(out / "dream" / "dream.jsonl") if r["phase"] == 1]

    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=900, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert nodes.read_bytes().splitlines()[: len(written)] == written  # the same run, continued
    run2 = load_world(out / "runs" / "iter-2")
    assert run2.meta["sha256"] and run2.size == 13  # 12 programs: none lost, none twice
    after = read_jsonl(out / "rsi.jsonl")
    assert after[:3] == before  # nothing of iteration 1 redone
    assert [(r["type"], r["t"]) for r in after[3:]] == [("run", 2), ("pool", 2), ("iteration", 2)]
    assert [r for r in read_jsonl(out / "dream" / "dream.jsonl") if r["phase"] == 1] == phase1
    changed = subprocess.run([*command, "--budget", "9", "--resume"], capture_output=True, text=True)
    assert changed.returncode == 2 and "budget: the run has 12, this command gives 9" in changed.stderr


@pytest.mark.slow
def test_ctrl_c_in_a_run_stops_the_loop_and_resume_finishes_that_run(tmp_path: Path, short_tmp_path: Path):
    # Found by trying: the system's run stopped gracefully at Ctrl-C and the loop took it as finished,
    # dreamed on it and deployed the next run; it ended with exit 0
    out = tmp_path / "run"
    command = [*_rsi(out, "--iterations", "1", "--quiet", revisions=1, budget=12), "--policy", "coverage"]
    env = {**os.environ, "TMPDIR": str(short_tmp_path)}
    process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env=env)
    nodes = out / "runs" / "iter-1" / "nodes.jsonl"
    _wait(lambda: nodes.exists() and nodes.read_bytes().count(b"\n") >= 4, process)
    os.killpg(process.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole group
    stderr = process.communicate(timeout=300)[1].decode()
    assert process.returncode == 130 and stderr.rstrip().endswith("with --resume continues it"), stderr[-3000:]
    assert not (out / "rsi.jsonl").exists() or not read_jsonl(out / "rsi.jsonl")  # no run taken as done
    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=900, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert load_world(out / "runs" / "iter-1").size == 13  # the interrupted run, continued to its budget
