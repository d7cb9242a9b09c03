"""One writer per output: an advisory exclusive lock for every long loop and results file.

Every writer of a run folder, a world folder or a results file (``grow``, ``dream``, ``rsi``,
``train``, ``eval --out``) holds a :class:`WriterLock` on it while it writes, so a second writer
started on the same output is refused at once with a :class:`LockedError` naming the holder,
instead of both interleaving lines in one file.

Where the lock lives (one convention for every target):

* a folder's lock is the file ``<folder>/.lock`` (see :func:`folder_lock`);
* a file's lock is the file ``<file>.lock`` beside it (see :func:`file_lock`).

The lock itself is ``flock(LOCK_EX | LOCK_NB)`` on that file, so the kernel releases it when
its holder dies, ``kill -9`` included: a lock file left behind never blocks anyone. The file
records its holder as JSON (pid, command line, host, start time) for the refusal message; a
released lock's file is removed. The descriptor is opened ``O_CLOEXEC``, so a program the
holder starts does not inherit it (and cannot keep the lock alive after its parent died).

Within one process the lock is re-entrant: taking it again (a grow run whose WorldWriter locks
the same folder) counts up instead of conflicting with itself, and only the last release lets
go. Two threads of one process are therefore one writer as far as this module is concerned.

This module imports nothing of dream_gym.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import os
import shlex
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

#: The lock file of a folder, inside it.
FOLDER_LOCK_NAME = ".lock"
#: The suffix that makes a file's lock file, beside it.
FILE_LOCK_SUFFIX = ".lock"


class LockedError(RuntimeError):
    """Another process holds the lock: the message names the target and its holder."""

    def __init__(self, target: Path, holder: dict[str, Any] | None):
        self.target, self.holder = target, holder
        super().__init__(f"{target} is being written by {describe_holder(holder)}; wait for it to finish or stop it")


def describe_holder(holder: dict[str, Any] | None) -> str:
    """``pid 1234 (dream-gym grow ...) since 2026-12-02T06:10:00Z`` (the host when not this one)."""
    if not holder:
        return "another process (it has not recorded itself yet)"
    where = f" on host {holder['host']}" if holder.get("host") not in (None, socket.gethostname()) else ""
    command = f" ({holder['command']})" if holder.get("command") else ""
    return f"pid {holder.get('pid')}{where}{command} since {holder.get('started')}"


def command_line(argv: list[str] | None = None) -> str:
    """This process's command line, shell-quoted, with the program's own name (not its path)."""
    argv = list(sys.argv if argv is None else argv)
    if not argv or not argv[0]:
        return ""
    if argv[0] == "-c":  # python -c ...: sys.argv[0] is "-c"
        return shlex.join(["python", *argv])
    return shlex.join([Path(argv[0]).name, *argv[1:]])


def _holder_record() -> dict[str, Any]:
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    return {"pid": os.getpid(), "command": command_line(), "host": socket.gethostname(),
            "started": now.isoformat().replace("+00:00", "Z")}


def _read_holder(fd: int) -> dict[str, Any] | None:
    """The holder recorded in a lock file (None when it has not written itself yet)."""
    for _ in range(20):  # the holder truncates, then writes: wait out that moment
        raw = os.pread(fd, 65536, 0)
        try:
            holder = json.loads(raw.decode("utf-8")) if raw.strip() else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            holder = None
        if isinstance(holder, dict):
            return holder
        time.sleep(0.005)
    return None


class _Held:
    """One process's hold on one lock file: its descriptor and how many acquisitions share it."""

    def __init__(self, fd: int):
        self.fd, self.count, self.pid = fd, 1, os.getpid()


# Locks this process holds, by lock-file path. A forked child inherits the dict, so an entry
# counts only in the process that made it (``_Held.pid``).
_held: dict[str, _Held] = {}
_held_guard = threading.Lock()


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (a releasing holder removes it)."""
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino)


def _lock_fd(path: Path, target: Path) -> int:
    """Open and flock ``path``; raise LockedError naming the holder when another process has it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_holder(fd) if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES) else None
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LockedError(target, holder) from None
            raise
        if _same_file(fd, path):
            return fd
        # We locked a file its holder removed while releasing it: the lock is the new file's now.
        os.close(fd)


def _record_holder(fd: int) -> None:
    data = json.dumps(_holder_record()).encode("utf-8") + b"\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


class WriterLock:
    """The exclusive lock of one output (a folder or a file; see the module docstring).

    ``with folder_lock(run): ...``, or ``lock = file_lock(out).acquire()`` ... ``lock.release()``.
    A second process gets :class:`LockedError`; this process may take it again (re-entrant).
    """

    def __init__(self, target: str | os.PathLike[str], *, folder: bool):
        self.target = Path(target)
        self.folder = folder
        self.path = lock_file_of(self.target, folder=folder)
        self._key = os.path.abspath(self.path)
        self._acquired = False

    def acquire(self) -> WriterLock:
        """Take the lock (creating the folder, or the file's parent folder, if missing)."""
        if self._acquired:
            raise RuntimeError(f"the lock of {self.target} is already taken by this WriterLock")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _held_guard:
            held = _held.get(self._key)
            if held is not None and held.pid == os.getpid():
                held.count += 1
            else:
                fd = _lock_fd(self.path, self.target)
                _record_holder(fd)
                _held[self._key] = _Held(fd)
        self._acquired = True
        return self

    def release(self) -> None:
        """Let go (the last release of this process removes the lock file and unlocks it)."""
        if not self._acquired:
            return
        self._acquired = False
        with _held_guard:
            held = _held.get(self._key)
            if held is None or held.pid != os.getpid():
                return
            held.count -= 1
            if held.count > 0:
                return
            del _held[self._key]
            # Remove the file while still holding it, so that no one locks a file about to vanish
            # (a waiter that opened it before sees it is gone and takes the new one).
            try:
                if _same_file(held.fd, self.path):
                    self.path.unlink(missing_ok=True)
            except OSError:  # a folder made read-only meanwhile: the error that ends the run is another's
                pass
            finally:
                os.close(held.fd)  # closing the last descriptor releases the flock

    @property
    def held(self) -> bool:
        return self._acquired

    def holder(self) -> dict[str, Any] | None:
        """Who holds the lock now, as recorded in its file (None when free or not recorded)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _read_holder(fd)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None  # nobody holds it: a file left by a process that died
        finally:
            os.close(fd)

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"WriterLock({str(self.target)!r}, folder={self.folder}, held={self._acquired})"


def lock_file_of(target: str | os.PathLike[str], *, folder: bool) -> Path:
    """The lock file of ``target``: ``<folder>/.lock`` for a folder, ``<file>.lock`` for a file."""
    target = Path(target)
    return target / FOLDER_LOCK_NAME if folder else target.with_name(target.name + FILE_LOCK_SUFFIX)


def folder_lock(folder: str | os.PathLike[str]) -> WriterLock:
    """The lock of a run or world folder (not yet taken): ``<folder>/.lock``."""
    return WriterLock(folder, folder=True)


def file_lock(path: str | os.PathLike[str]) -> WriterLock:
    """The lock of a results file (not yet taken): ``<file>.lock``."""
    return WriterLock(path, folder=False)



def holds_only_its_lock(folder: str | os.PathLike[str]) -> bool:
    """Whether an existing ``folder`` holds nothing but its lock file (a run's own lock is no content)."""
    return all(entry.name == FOLDER_LOCK_NAME for entry in Path(folder).iterdir())

__all__ = [
    "FILE_LOCK_SUFFIX",
    "FOLDER_LOCK_NAME",
    "LockedError",
    "WriterLock",
    "describe_holder",
    "file_lock",
    "folder_lock",
    "holds_only_its_lock",
    "lock_file_of",
]
