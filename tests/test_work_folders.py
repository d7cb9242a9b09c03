"""Work folders: named after their process, swept once that process is gone."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dream_gym.infrastructure import work_folders as folders


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folders.sweep_left_behind.cache_clear()
    yield tmp_path
    folders.sweep_left_behind.cache_clear()


_KILLED_MID_WORK = """
import os, signal, sys
from dream_gym.infrastructure.work_folders import work_folder
folder = work_folder("policy")
(folder / "left.txt").write_text("work")
print(folder, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_folder_left_by_a_killed_process_is_swept_by_the_next_one(temp_root: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _KILLED_MID_WORK], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TMPDIR": str(temp_root)})
    assert done.returncode == -9, done.stderr
    left = Path(done.stdout.strip())
    assert left.parent == temp_root and (left / "left.txt").is_file()
    mine = folders.work_folder("grow")  # the first folder of this process sweeps
    assert not left.exists()
    assert mine.is_dir() and mine.name.startswith(f"dream_gym_grow.{os.getpid()}.")


def test_a_folder_of_a_live_process_and_other_names_are_kept(temp_root: Path) -> None:
    live = temp_root / f"dream_gym_policy.{os.getppid()}.abc"  # pytest's parent: alive
    other = temp_root / "dream_gym_notes"
    for folder in (live, other):
        folder.mkdir()
    assert folders.sweep_left_behind() == 0
    assert live.is_dir() and other.is_dir()


def test_a_kind_is_a_plain_name() -> None:
    with pytest.raises(ValueError, match="lower-case letters"):
        folders.work_folder("../x")
