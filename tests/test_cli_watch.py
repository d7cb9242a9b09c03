"""A run's progress on a terminal (``dream_gym.cli.watch``): read from its world as it is written,
shown only where stderr is a terminal."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dream_gym.cli.watch import NodesWatch


def test_the_watch_counts_whole_lines_as_they_come(tmp_path: Path) -> None:
    watch = NodesWatch(tmp_path, 5, "run", enabled=False)
    assert watch.count() == 0  # no nodes file yet
    nodes = tmp_path / "nodes.jsonl"
    nodes.write_text('{"id": "0"}\n{"id": "1"')
    assert watch.count() == 1  # the line being written counts once it ends
    with open(nodes, "a") as more:
        more.write('}\n{"id": "2"}\n')
    assert watch.count() == 3 and watch.count() == 3


def test_the_bar_shows_the_nodes_against_the_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "nodes.jsonl").write_text("{}\n" * 3)
    with NodesWatch(tmp_path, 5, "openevolve run", enabled=True):
        pass
    shown = capsys.readouterr().err
    assert "openevolve run" in shown and "3/5 nodes" in shown, shown
    with NodesWatch(tmp_path, 5, "openevolve run"):  # stderr is no terminal here: nothing
        pass
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_deploy_on_a_terminal_shows_its_nodes_as_they_come(tmp_path: Path) -> None:
    """A deploy printed nothing until its end (16.6 s for a budget of 40 keyless; minutes with an
    LLM); on a terminal it now shows the nodes its world holds against the budget."""
    pytest.importorskip("openevolve")
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "dream_gym", "deploy", "--system", "openevolve", "--task", "circle-packing-26",
             "--policy", "greedy", "-W", "2", "--budget", "4", "--out", str(tmp_path / "w")],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower, timeout=600,
            env={**os.environ, "COLUMNS": "80"})
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other end is closed: all read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.decode(errors="replace"))  # the terminal's colours
    assert done.returncode == 0, text[-3000:]
    assert "openevolve run" in text and "5/5 nodes" in text, text[-3000:]
    assert b"5 nodes (" in done.stdout and b"world: " in done.stdout  # the summary, on stdout as before
