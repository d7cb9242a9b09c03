"""One writer per output (dream_gym.locks): every long loop and results file is refused to a
second writer while a first one runs, with a message naming the first; a lock dies with its
holder (kill -9, and a child the holder started does not keep it); temporary files of two
writers of one target never collide; a finished train re-run changes nothing; and a killed
`dream-gym eval --out` grid resumed with --resume writes the same bytes as an uninterrupted one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_gym.durable import write_atomic
from dream_gym.locks import LockedError, file_lock, folder_lock, lock_file_of

REPO = Path(__file__).resolve().parent.parent
#: Worker processes of the subprocesses import this module (the slow policy below) by name.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}


def _python(code: str) -> subprocess.Popen[str]:
    """A Python subprocess running ``code`` (its own session, so killpg ends all it started)."""
    return subprocess.Popen([sys.executable, "-c", code], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _dream_gym(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "dream_gym", *args], env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dream_gym", *args], env=ENV, capture_output=True, text=True,
                          timeout=120)


def _wait_for(condition: Callable[[], bool], process: subprocess.Popen[str], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"the first process ended before {what}: {process.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _holds(process: subprocess.Popen[str], target: Path, *, folder: bool) -> Callable[[], bool]:
    """True once ``process`` is recorded as the holder of ``target``'s lock."""
    lock = folder_lock(target) if folder else file_lock(target)
    return lambda: (lock.holder() or {}).get("pid") == process.pid


def _kill(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


def _refused_naming(result: subprocess.CompletedProcess[str], holder: subprocess.Popen[str], target: Path) -> None:
    assert result.returncode != 0, result.stdout
    assert f"{target} is being written by pid {holder.pid}" in result.stderr, result.stderr
    assert "wait for it to finish or stop it" in result.stderr


# --------------------------------------------------------------------------- the lock itself


HOLD = """
import sys, time
from dream_gym.locks import folder_lock
lock = folder_lock(sys.argv[1] if len(sys.argv) > 1 else {target!r}).acquire()
{then}
print("locked", flush=True)
time.sleep(600)
"""


def test_a_second_process_is_refused_with_the_holder_and_a_released_lock_is_free(tmp_path: Path) -> None:
    run = tmp_path / "run"
    holder = _python(HOLD.format(target=str(run), then=""))
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(LockedError) as refused:
            folder_lock(run).acquire()
        recorded = refused.value.holder
        assert recorded is not None and recorded["pid"] == holder.pid and recorded["command"].startswith("python -c")
        assert recorded["started"].endswith("Z") and recorded["host"]
        assert str(run) in str(refused.value) and f"pid {holder.pid}" in str(refused.value)
    finally:
        _kill(holder)
    with folder_lock(run) as lock:  # its holder is gone: free, and now recorded as ours
        assert lock.holder() is not None and lock.holder()["pid"] == os.getpid()  # type: ignore[index]
    assert not lock_file_of(run, folder=True).exists()  # a released lock leaves no file


def test_a_lock_file_left_by_kill_9_never_blocks(tmp_path: Path) -> None:
    run = tmp_path / "run"
    holder = _python(HOLD.format(target=str(run), then=""))
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    stale = json.loads((run / ".lock").read_text())
    assert stale["pid"] == holder.pid  # the dead holder's record is still on disk ...
    assert folder_lock(run).holder() is None  # ... but nobody holds the lock
    with folder_lock(run):
        assert json.loads((run / ".lock").read_text())["pid"] == os.getpid()


def test_a_child_of_the_holder_does_not_inherit_the_lock(tmp_path: Path) -> None:
    """The holder starts a long-lived child that keeps every inheritable descriptor
    (close_fds=False), then dies by kill -9: the child must not keep the lock alive."""
    run = tmp_path / "run"
    spawn = ("import subprocess; child = subprocess.Popen(['sleep', '600'], close_fds=False); "
             "print(child.pid, flush=True)")
    holder = _python(HOLD.format(target=str(run), then=spawn))
    assert holder.stdout is not None
    child_pid = int(holder.stdout.readline())
    assert holder.stdout.readline() == "locked\n"
    try:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        os.kill(child_pid, 0)  # the child lives on
        with folder_lock(run):
            pass
    finally:
        os.killpg(holder.pid, signal.SIGKILL)


def test_the_lock_is_re_entrant_in_one_process_and_released_by_the_last_release(tmp_path: Path) -> None:
    outer = folder_lock(tmp_path).acquire()
    with folder_lock(tmp_path):  # e.g. grow's folder lock and its WorldWriter's
        pass
    assert outer.holder() is not None  # still held: the outer acquisition remains
    outer.release()
    assert outer.holder() is None and not (tmp_path / ".lock").exists()


def test_a_file_lock_sits_beside_the_file(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "results.jsonl"
    with file_lock(out) as lock:
        assert lock.path == tmp_path / "sub" / "results.jsonl.lock" and lock.path.is_file()
    assert not lock.path.exists()


WRITE_MANY = """
import sys
from dream_gym.durable import write_atomic
for i in range(300):
    write_atomic(sys.argv[1], sys.argv[2] * 1000)
"""


def test_two_concurrent_write_atomic_to_one_target_never_fail(tmp_path: Path) -> None:
    """With one fixed temporary name, one writer renames the other's temporary file away and
    the other's rename fails with ENOENT (or renames a half-written file)."""
    target = tmp_path / "file.txt"
    writers = [subprocess.Popen([sys.executable, "-c", WRITE_MANY, str(target), letter], env=ENV,
                                stderr=subprocess.PIPE, text=True) for letter in "ab"]
    errors = [w.communicate(timeout=120)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0], errors
    assert target.read_text() in ("a" * 1000, "b" * 1000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]  # no temporary file left


def test_a_failed_write_leaves_no_temporary_file_and_the_old_content(tmp_path: Path) -> None:
    from dream_gym.durable import write_via

    target = write_atomic(tmp_path / "file.txt", "old")

    def broken(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_via(target, broken)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]
