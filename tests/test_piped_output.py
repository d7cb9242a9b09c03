"""What the long-running commands print stays readable when piped to a file or another program
(not a terminal, 80 columns): one whole line per event, no table redrawn, no line broken
mid-phrase, no line glued to a table's border."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "dream_gym", *args], capture_output=True, text=True, timeout=600,
                          cwd=REPO, env={**os.environ, "COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    return done


def _piped(*args: str) -> list[str]:
    done = _run(*args)
    return (done.stdout + done.stderr).splitlines()


def test_grow_prints_a_line_a_round_and_its_summary_on_its_own_line(tmp_path: Path) -> None:
    # its summary goes to stdout, as deploy's and import's do (`> log` kept nothing), the rounds to stderr
    done = _run("grow", "--task", "circle-packing-26", "--policy", "greedy", "-W", "2", "--max-attempts", "4",
                "--out", str(tmp_path / "w"))
    lines = (done.stdout + done.stderr).splitlines()
    rounds = [line for line in done.stderr.splitlines() if line.startswith("round ")]
    assert len(rounds) == 4 and all("best score" in line for line in rounds), lines
    summary = done.stdout.splitlines()[0]
    assert summary.startswith("5 nodes, 4 rounds") and "stopped by --max-attempts" in summary, lines
    assert done.stdout.splitlines()[-1] == f"summary: {tmp_path / 'w' / 'run_summary.json'}", lines
    assert not any(c in "".join(lines) for c in "┌└│"), lines  # no table redrawn into the log
    assert not any("own stop rule" in line for line in lines), lines  # the limit ended it, not the policy


@pytest.mark.slow
def test_dreams_progress_is_one_whole_line_per_version(tmp_path: Path) -> None:
    lines = _piped("dream", "--history", "sd-fixed-w4-s0", "--policy", "fixed", "--developer", "builtin", "-M", "2",
                   "--betas", "0.5", "--out", str(tmp_path / "dream"))
    versions = [line for line in lines if line.startswith(("phase 1 incumbent", "phase 1 revision"))]
    assert len(versions) == 2 and all("best so far version 0 (" in line for line in versions), lines
    score = next(line for line in lines if line.startswith("score: mean V over"))
    assert len(score) > 80 and score.endswith("world)"), lines  # longer than the width, and whole


def _in_a_terminal(*args: str, columns: int = 80) -> list[str]:
    """``dream-gym ARGS`` with a terminal of ``columns`` for its stdout and stderr (a pty)."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    process = subprocess.Popen([sys.executable, "-m", "dream_gym", *args], stdin=subprocess.DEVNULL,
                               stdout=follower, stderr=follower, cwd=REPO, env={**env, "TERM": "dumb"})
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other side closed: the command ended
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=600) == 0, b"".join(chunks)[-2000:]
    return b"".join(chunks).decode("utf-8", "replace").replace("\r", "").splitlines()


@pytest.mark.slow
def test_in_an_80_column_terminal_dreams_lines_fit_or_break_between_words(tmp_path: Path) -> None:
    """A terminal wrapped the progress and result lines (88-104 characters) mid-word."""
    lines = _in_a_terminal("dream", "--history", "sd-fixed-w4-s0", "--policy", "fixed", "--developer", "builtin",
                           "-M", "2", "--betas", "0.5", "--out", str(tmp_path / "dream"))
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    score = next(i for i, line in enumerate(lines) if line.startswith("score: mean V over"))
    assert lines[score + 1] == "world)", lines  # the line too long for the terminal broke between words


def test_in_an_80_column_terminal_an_import_report_breaks_between_words(tmp_path: Path) -> None:
    """The report's notes and warnings ran to 150-260 characters, which a terminal broke mid-word."""
    from tests.openevolve_runs import write_resumed_run

    src = tmp_path / "run"
    write_resumed_run(src)
    lines = _in_a_terminal("worlds", "import", str(src), "--out", str(tmp_path / "w"))
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    piped = _piped("worlds", "import", str(src), "--out", str(tmp_path / "w2"))
    assert any(len(line) > 80 for line in piped)  # the control: in a log the same lines stay whole


def test_in_an_80_column_terminal_a_folder_imports_refusals_break_between_words(short_tmp_path: Path) -> None:
    """A folder of runs: the tables fit, and a run refused with a long reason (here 150 or so
    characters) and a one-node run's warning broke wherever column 80 fell. (A short folder: a path
    longer than the terminal is one word, which no break between words can fit.)"""
    from tests.openevolve_runs import write_resumed_run

    tmp_path = short_tmp_path
    runs = tmp_path / "runs"
    for name in ("a", "b"):
        write_resumed_run(runs / name, iterations=(6,), resume_at=())
    (runs / "c" / "programs").mkdir(parents=True)  # an OpenEvolve layout without an initial program: refused
    (runs / "c" / "programs" / "p1.json").write_text(json.dumps({"id": "p1", "parent_id": "p0", "code": "x = 1",
                                                                  "metrics": {"combined_score": 1.0}}))
    lines = _in_a_terminal("worlds", "import", str(runs), "--out", str(tmp_path / "w"))
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    refused = next(i for i, line in enumerate(lines) if line.startswith("refused c:"))
    assert lines[refused + 1].startswith("  ")  # continued, indented, between words


def test_in_an_80_column_terminal_replays_lines_break_between_words_and_piped_stay_whole() -> None:
    """The coverage line (about 180 characters) was broken by the terminal wherever column 80 fell."""
    lines = _in_a_terminal("replay", "cp26-fixed-w4-s0", "-p", "greedy")
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    coverage = next(i for i, line in enumerate(lines) if line.startswith("coverage ("))
    assert lines[coverage + 1].startswith("  (100.0%)"), lines  # its continuation, indented, whole words
    piped = _piped("replay", "cp26-fixed-w4-s0", "-p", "greedy")
    assert len(next(line for line in piped if line.startswith("coverage ("))) > 80  # one line in a log
