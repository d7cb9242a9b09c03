"""A world's files are regular files: world.json, nodes.jsonl and nodes.jsonl.gz that are symbolic
links (to a valid file elsewhere, to /dev/zero) or FIFOs are refused, naming the file, by the
loader (``dream-gym worlds validate``, ``dream-gym replay``, ``gym.make``), the writer and
``pack``; a FIFO never hangs them (the subprocesses' timeout is only a guard against a hang).

The controls: the same world with its files in place loads, a symbolic link's valid target
copied in loads, and a world folder that is itself a symbolic link (a path the user names) loads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_gym.datasets.packing import pack
from dream_gym.datasets.store import DatasetError, local_path
from dream_gym.world.tree import WorldFormatError, load_world
from dream_gym.world.writer import WorldWriter, compress_world, new_meta, write_world

DREAM_GYM = str(Path(sys.executable).with_name("dream-gym"))
GUARD_S = 120  # a hang fails the test instead of stopping the suite


def make_world(folder: Path, world_id: str = "w", *, gz: bool = False) -> Path:
    records = [{"id": "root", "parent": None, "score": 1.0},
               {"id": "n1", "parent": "root", "score": 2.0, "round": 1}]
    write_world(folder, new_meta(world_id, "toy"), records)
    if gz:
        compress_world(folder)
    return folder


def link_to_copy_elsewhere(path: Path) -> str:
    """Move the file out of the world and link to it: a valid file, reached through a link."""
    elsewhere = path.parent.parent / f"elsewhere-{path.parent.name}-{path.name}"
    shutil.move(path, elsewhere)
    path.symlink_to(elsewhere)
    return "is a symbolic link"


def link_to_dev_zero(path: Path) -> str:
    path.unlink()
    path.symlink_to("/dev/zero")
    return "is a symbolic link"


def fifo(path: Path) -> str:
    path.unlink()
    os.mkfifo(path)
    return "is a FIFO (named pipe)"


KINDS: dict[str, Callable[[Path], str]] = {"link-to-valid-file": link_to_copy_elsewhere,
                                           "link-to-dev-zero": link_to_dev_zero, "fifo": fifo}
FILES = [("world.json", False), ("nodes.jsonl", False), ("nodes.jsonl.gz", True)]


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DREAM_GYM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DREAM_GYM_SHIPPED", str(tmp_path / "none"))
    return tmp_path


def broken_world(tmp_path: Path, name: str, gz: bool, kind: str) -> tuple[Path, str]:
    """A valid world whose file ``name`` is then replaced as ``kind`` says; the error expected."""
    folder = make_world(tmp_path / "world", gz=gz)
    assert load_world(folder).size == 2  # the control: it loads before
    problem = KINDS[kind](folder / name)
    return folder, f"{name} {problem}; a world's files must be regular files"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DREAM_GYM, *args], capture_output=True, text=True, timeout=GUARD_S)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("name", "gz"), FILES, ids=[f for f, _ in FILES])
def test_the_cli_refuses_a_world_file_that_is_not_a_regular_file(home, name, gz, kind):
    folder, expected = broken_world(home, name, gz, kind)
    for command in (["worlds", "validate", str(folder)], ["replay", str(folder), "--policy", "greedy"]):
        done = cli(*command)
        assert done.returncode == 2, done.stderr
        assert expected in done.stderr and done.stderr.count("\n") == 1  # one line, naming the file
        assert done.stdout == ""


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("name", "gz"), FILES, ids=[f for f, _ in FILES])
def test_gym_make_refuses_it_too(home, name, gz, kind):
    folder, expected = broken_world(home, name, gz, kind)
    program = ("import gymnasium as gym, dream_gym, sys\n"
               "try:\n    gym.make('DreamGym/Replay-v1', world=sys.argv[1])\n"
               "except Exception as exc:\n    print(type(exc).__name__, exc)\nelse:\n    print('loaded')\n")
    done = subprocess.run([sys.executable, "-c", program, str(folder)], capture_output=True, text=True,
                          timeout=GUARD_S)
    assert done.stdout.startswith("WorldFormatError ") and expected in done.stdout, done.stdout + done.stderr


def test_the_target_of_a_link_is_a_valid_world_file(home):
    """The control of the link cases: the file the link points to, copied into the world, loads."""
    folder, _ = broken_world(home, "nodes.jsonl", False, "link-to-valid-file")
    target = folder / "nodes.jsonl"
    data = target.read_bytes()
    target.unlink()
    target.write_bytes(data)
    assert load_world(folder).size == 2
    assert cli("worlds", "validate", str(folder)).returncode == 0


def test_a_world_folder_that_is_a_link_is_the_users_choice(home):
    """The folder named on the command line may be a symbolic link; only the files in it may not."""
    real = make_world(home / "real")
    (home / "linked").symlink_to(real)
    done = cli("worlds", "validate", str(home / "linked"))
    assert done.returncode == 0 and "OK: world" in done.stdout
    assert load_world(home / "linked").size == 2


def test_resuming_never_writes_through_a_linked_node_file(home):
    """WorldWriter.open would append to (and cut a torn line of) whatever the link points to."""
    folder = make_world(home / "world")
    victim = home / "victim.txt"
    victim.write_bytes(b"precious data without a newline at the end")
    (folder / "nodes.jsonl").unlink()
    (folder / "nodes.jsonl").symlink_to(victim)
    meta = json.loads((folder / "world.json").read_text())
    meta.pop("sha256")
    (folder / "world.json").write_text(json.dumps(meta))
    with pytest.raises(WorldFormatError, match="nodes.jsonl is a symbolic link"):
        WorldWriter.open(folder)
    assert victim.read_bytes() == b"precious data without a newline at the end"


def test_pack_and_compress_refuse_a_linked_file(home):
    folder, expected = broken_world(home, "world.json", False, "link-to-valid-file")
    with pytest.raises(WorldFormatError, match=expected):
        pack([folder], "me/linked-v0")
    assert not local_path("me/linked-v0").exists()
    with pytest.raises(WorldFormatError, match=expected):
        compress_world(folder)


def test_a_dataset_json_that_is_a_link_is_refused(home):
    pack([make_world(home / "src" / "a", "a")], "me/toy-v0")
    meta_file = local_path("me/toy-v0") / "dataset.json"
    elsewhere = home / "dataset.json"
    shutil.move(meta_file, elsewhere)
    meta_file.symlink_to(elsewhere)
    expected = "dataset.json is a symbolic link; a dataset's files must be regular files"
    done = cli("worlds", "validate", "me/toy-v0")
    assert done.returncode == 2 and expected in done.stderr
    listed = cli("worlds", "list")
    assert "BROKEN" in listed.stdout and expected in " ".join(listed.stdout.split())
    with pytest.raises(DatasetError, match=expected):
        from dream_gym.datasets.store import find_dataset

        find_dataset("me/toy-v0")


def test_a_linked_world_file_inside_a_dataset_is_refused(home):
    pack([make_world(home / "src" / "a", "a")], "me/toy-v0")
    nodes = local_path("me/toy-v0") / "a" / "nodes.jsonl"
    elsewhere = home / "nodes.jsonl"
    shutil.move(nodes, elsewhere)
    nodes.symlink_to(elsewhere)
    done = cli("worlds", "validate", "me/toy-v0")
    assert done.returncode == 2 and "nodes.jsonl is a symbolic link; a dataset's files must be regular files" in done.stderr
