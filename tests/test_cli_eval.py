"""``dream-gym eval`` and ``dream-gym plot`` through the CLI entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dream_gym.cli import main
from tests.test_evaluate import make_world


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli-worlds")
    for seed in range(2):
        make_world(root / f"w{seed}", 30, seed)
    return root


def test_eval_prints_leaderboard_and_writes_results(worlds: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out, md = tmp_path / "results.jsonl", tmp_path / "board.md"
    code = main(["eval", "--policy", "greedy", "--policy", "fixed", "--worlds", str(worlds), "--betas", "0.1,0.9",
                 "--jobs", "2", "--backend", "process", "--out", str(out), "--markdown", str(md), "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "Leaderboard" in printed and "greedy" in printed and "fixed" in printed
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 * 2 * 2
    assert [(r["policy"], r["world"], r["beta"]) for r in rows][:2] == [("greedy", "w0", 0.1), ("greedy", "w0", 0.9)]
    assert md.read_text().startswith("### Leaderboard: mean over 2 worlds")

    serial = tmp_path / "serial.jsonl"
    assert main(["eval", "-p", "greedy", "-p", "fixed", "-w", str(worlds), "--betas", "0.1,0.9",
                 "--backend", "serial", "-o", str(serial), "--no-progress"]) == 0
    assert serial.read_text() == out.read_text()

    assert main(["plot", str(out), "--out", str(tmp_path / "figs")]) == 0
    listed = capsys.readouterr().out.split()
    assert [Path(p).name for p in listed[-3:]] == ["anytime.png", "pareto.png", "tree_w0.png"]
    assert all(Path(p).stat().st_size > 0 for p in listed[-3:])


def test_eval_errors_are_reported_without_traceback(worlds: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "-p", "greedy", "-w", str(worlds / "missing"), "--no-progress"]) == 2
    assert "cannot resolve worlds" in capsys.readouterr().err
    assert main(["eval", "-p", "nope", "-w", str(worlds), "--no-progress"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["eval", "-p", "greedy", "-w", str(worlds), "--betas", "2", "--no-progress"]) == 2
    assert "beta must be in [0, 1]" in capsys.readouterr().err
    assert main(["eval", "-p", str(worlds), "-w", str(worlds), "--no-progress"]) == 2  # a folder, not a policy
    assert f"policy {worlds} is a folder; a policy is a .py file" in capsys.readouterr().err
    world_json = next(worlds.rglob("world.json"))
    assert main(["replay", str(world_json)]) == 2  # the file, not its folder
    assert f"is a file; a world is the folder that holds world.json and nodes.jsonl: pass its folder, " \
           f"{world_json.parent}" in capsys.readouterr().err


def test_outputs_and_settings_that_cannot_be_used_are_refused_before_any_episode(
        worlds: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder as --out or --markdown, or a --markdown through a file or where no file can be
    made, failed after the whole run (and left a journal that refused the next run); a file that is not a results file was replaced; a negative --lam reversed the
    penalty; a negative --task-timeout was named as a clash with --decision-timeout."""
    folder = tmp_path / "folder"
    folder.mkdir()
    notes = tmp_path / "notes.txt"
    notes.write_text("keep")
    base = ["eval", "-p", "greedy", "-w", str(worlds), "--betas", "0.5", "--no-progress"]
    for extra, message in ((["--out", str(folder)], "is a folder; the results go to a file"),
                           (["--markdown", str(folder)], "is a folder; it names the file to write"),
                           (["--markdown", str(notes / "board.md")], "notes.txt is a file, where a folder is wanted"),
                           (["--markdown", "/proc/board.md"], "no file can be written in /proc"),
                           (["--out", "/proc/results.jsonl"], "--out /proc/results.jsonl: no file can be written in /proc"),
                           (["--out", str(notes)], "notes.txt exists and is not a results file"),
                           # --markdown replaced any file: a world's nodes.jsonl, a results file, notes
                           (["--markdown", str(notes)], "notes.txt exists and is not a leaderboard eval wrote"),
                           (["--task-timeout", "-1"], "--task-timeout must be >= 0 seconds"),
                           (["--resume"], "--resume needs --out")):
        assert main([*base, *extra]) == 2, extra
        said = capsys.readouterr()
        assert message in said.err and said.err.count("error:") == 1, (extra, said.err)
        assert not said.out, extra  # no episode ran: no leaderboard
    with pytest.raises(SystemExit):  # a negative --lam: refused by argparse (tests/test_cli_naming.py)
        main([*base, "--lam", "-1"])
    assert "argument --lam: must be a number >= 0, got -1" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "notes.txt"] and notes.read_text() == "keep"
    assert not list(folder.iterdir())
    # the decision timeout is a policy file's: built-in policies run under any task timeout
    assert main([*base, "--task-timeout", "3", "--out", str(tmp_path / "r.jsonl")]) == 0
    # an earlier evaluation's results are kept, and replaced with --force
    assert main([*base, "--task-timeout", "3", "--out", str(tmp_path / "r.jsonl")]) == 2
    assert main([*base, "--task-timeout", "3", "--out", str(tmp_path / "r.jsonl"), "--force"]) == 0
    kept = (tmp_path / "r.jsonl").read_bytes()
    assert main([*base, "--markdown", str(tmp_path / "r.jsonl")]) == 2
    assert "r.jsonl exists and is not a leaderboard eval wrote" in capsys.readouterr().err
    assert (tmp_path / "r.jsonl").read_bytes() == kept
    for _ in range(2):  # its own markdown, it replaces
        assert main([*base, "--markdown", str(tmp_path / "board.md")]) == 0
    assert (tmp_path / "board.md").read_text().startswith("### Leaderboard")


@pytest.mark.parametrize("source, error", [("def act(view)\n    return []\n", "SyntaxError: expected ':'"),
                                           ("import no_such_module_anywhere\n", "ModuleNotFoundError"),
                                           ("x = 1\n", "defines no policy")])
def test_a_policy_file_that_does_not_load_fails_once_before_its_episodes(
        worlds: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, error: str) -> None:
    """No episode runs, no all-zero row is printed and no results file is written: the load
    error is said once, and the command exits 2 (as for an unknown policy name)."""
    bad, out = tmp_path / "bad.py", tmp_path / "results.jsonl"
    bad.write_text(source)
    assert main(["eval", "-p", "greedy", "-p", str(bad), "-w", str(worlds), "--no-progress", "-o", str(out)]) == 2
    printed = capsys.readouterr()
    assert printed.out == "" and not out.exists()
    assert printed.err.count("error:") == 1 and error in printed.err, printed.err
    good = tmp_path / "good.py"  # the control: a file that loads runs as before
    good.write_text("def act(view):\n    return []\n")
    assert main(["eval", "-p", str(good), "-w", str(worlds), "--no-progress", "--betas", "0.5"]) == 0


def test_whether_a_file_may_be_replaced_is_asked_of_the_file_each_time(tmp_path: Path) -> None:
    """The same question about the same path is answered by what the path holds now (an answer
    kept from an earlier call let a file written since be replaced)."""
    from dream_gym.infrastructure.durable import check_replaceable

    board = tmp_path / "board.md"
    check_replaceable(board, "--markdown board.md", b"### Leaderboard", "a leaderboard")  # absent: may be written
    board.write_text("my notes\n")
    with pytest.raises(FileExistsError, match="board.md exists and is not a leaderboard"):
        check_replaceable(board, "--markdown board.md", b"### Leaderboard", "a leaderboard")


def test_an_unfinished_world_is_said_once_with_whether_a_run_is_writing_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A world read while its run writes it (a deploy in another terminal) was replayed as the
    attempts it held so far, with nothing said: its figures were taken for the whole run's."""
    from dream_gym.infrastructure.locks import folder_lock

    folder = make_world(tmp_path / "w", 20, 0, world_id="growing")
    meta = json.loads((folder / "world.json").read_text())
    del meta["sha256"]  # as a run leaves it until it ends
    (folder / "world.json").write_text(json.dumps(meta))
    command = ["eval", "-p", "greedy", "--worlds", str(folder), "--betas", "0.5", "-j", "1", "--no-progress"]
    assert main(command) == 0
    err = capsys.readouterr().err
    assert err.count("note: world growing is not finished (its run stopped before its end; --resume of that run "
                     "finishes it): it is replayed as the 19 attempts it holds so far") == 1, err
    with folder_lock(folder):
        assert main(command) == 0
    assert f"note: world growing is not finished (a run is writing it (pid {os.getpid()}))" in capsys.readouterr().err


def test_a_world_of_its_initial_program_alone_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Such a world (an import warns of it) scores 0 for every policy: in a dream's history it
    halved the score (0.99 -> 0.499) without a word."""
    folder = make_world(tmp_path / "w", 1, 0, world_id="lonely")
    assert main(["eval", "-p", "greedy", "--worlds", str(folder), "--betas", "0.5", "-j", "1", "--no-progress"]) == 0
    assert capsys.readouterr().err.count("note: world lonely holds its initial program alone: every policy scores 0") == 1


SLOW_POLICY = '''
import os, time
from dream_gym.policies import GreedyPolicy

class Slow(GreedyPolicy):
    def act(self, view):
        if os.environ.get("SLOW_WORLD") and view.task_name == os.environ["SLOW_WORLD"]:
            time.sleep(600)
        return super().act(view)
'''


def test_a_resumed_eval_says_how_many_tasks_it_kept(tmp_path: Path) -> None:
    """grow, fidelity, import and train say what a resume kept; eval's resume said nothing."""
    (tmp_path / "slowpol.py").write_text(SLOW_POLICY)
    out = tmp_path / "results.jsonl"
    command = [sys.executable, "-m", "dream_gym", "eval", "-p", "slowpol:Slow", "-w", "sd-fixed-s0,lasso-fixed-s0",
               "--betas", "0.5", "-j", "1", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "SLOW_WORLD": "lasso-path"}
    first = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = Path(f"{out}.partial")
    deadline = time.monotonic() + 120
    while not (journal.exists() and len(journal.read_text().splitlines()) >= 2) and time.monotonic() < deadline:
        time.sleep(0.1)  # the first task (sd-fixed-s0) is journaled; the second hangs
    first.kill()
    first.wait(timeout=30)
    env.pop("SLOW_WORLD")
    resumed = subprocess.run([*command, "--resume"], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed: 1 of 2 (policy, world) tasks were finished before and kept; the others ran now" in resumed.stderr
