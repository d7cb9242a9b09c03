"""The second layer of an isolated policy episode: a Python audit hook.

The guarantee is the kernel's (:mod:`dream_gym.infrastructure.sandbox`: Landlock, seccomp, namespaces). On top
of it, :func:`install_audit_hook` refuses in Python, with a clear PermissionError: opening files
outside the Python installation, the ``dream_gym`` package and the policy file, any file write,
listing other folders, subprocesses and exec, ``os.fork``, signals to other processes, ctypes,
sockets and sqlite. Python can undo a hook (through ``gc``, or by editing its module), so nothing
relies on it: it only turns an attempt into an early, readable error. Every value it compares
with is bound when it is built, not looked up when it runs (reassigning ``os.devnull`` or
``os.path.realpath`` changes nothing).

Building the hook (:func:`audit_hook`: the read roots resolved, the sets it compares with) is
done once, in the policy's template; each episode process, forked from it, only installs the
ready function (:func:`install_audit_hook`, microseconds) after its kernel confinement, whose
ctypes calls the hook would refuse.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

AuditHook = Callable[[str, tuple[Any, ...]], None]


def read_roots_of_python(roots: Mapping[str, Sequence[str]] | None = None) -> tuple[list[str], list[str]]:
    """The folders and files the audit hook lets a policy read: the sandbox's own read roots
    (``roots``, by default :func:`dream_gym.infrastructure.sandbox.launch.read_roots`: Python's runtime and the
    code of dream_gym, never its shipped data), so both layers agree on what is readable."""
    if roots is None:
        from dream_gym.infrastructure.sandbox.launch import read_roots

        roots = read_roots()
    trees = [os.path.realpath(p) for p in roots["tree"]]
    folders = [p for p in trees if os.path.isdir(p)]
    files = [p for p in trees if not os.path.isdir(p)] + [os.path.realpath(p) for p in roots["file"]]
    return folders, files


DENIED_EVENTS = frozenset({
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.startfile", "subprocess.Popen",
    "os.fork", "os.forkpty", "pty.spawn", "sqlite3.connect", "sqlite3.connect/handle",
    "os.link", "os.symlink", "os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.chmod",
    "os.chown", "os.truncate", "os.utime", "os.setxattr", "os.removexattr", "os.chflags",
    "shutil.rmtree", "shutil.copyfile", "shutil.move", "webbrowser.open", "urllib.Request",
    "http.client.connect", "ftplib.connect", "smtplib.connect", "poplib.connect",
    "imaplib.open", "telnetlib.Telnet.open", "nntplib.connect",
})
DENIED_PREFIXES = ("ctypes.", "socket.", "_ssl.", "os.exec", "os.spawn", "os.posix_spawn")


def install_audit_hook(hook: AuditHook) -> None:
    """Install a hook built by :func:`audit_hook` (it cannot be removed from this process)."""
    sys.addaudithook(hook)


def audit_hook(read_roots: Sequence[str], read_files: Sequence[str]) -> AuditHook:
    """The hook that refuses what an exploration policy has no business doing (see the module
    docstring), reading only below ``read_roots`` and the files ``read_files``."""
    realpath, fsdecode, getpid, sep = os.path.realpath, os.fsdecode, os.getpid, os.sep
    devnull = "/dev/null"
    roots = tuple(r.rstrip(sep) + sep for r in read_roots)
    files = frozenset(read_files) | {"/dev/urandom", "/dev/random", "/dev/zero"}
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    startswith = str.startswith

    def readable(path: str) -> bool:
        return path in files or startswith(path, roots)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            target, mode, flags = (tuple(args) + (None, None))[:3]
            if target is None or isinstance(target, int):
                return  # an already open descriptor
            path = realpath(fsdecode(target))
            if path == devnull:
                return
            writing = (isinstance(flags, int) and flags & write_flags) or (
                isinstance(mode, str) and any(c in mode for c in "wax+"))
            if writing:
                raise PermissionError(errno.EACCES, "an isolated policy may not write files", path)
            if not readable(path):
                raise PermissionError(errno.EACCES, "an isolated policy may not read this file", path)
        elif event in ("os.listdir", "os.scandir"):
            target = args[0] if args else "."
            if isinstance(target, int):
                return
            path = realpath(fsdecode(target if target is not None else "."))
            if not readable(path.rstrip(sep) + sep) and path not in files:
                raise PermissionError(errno.EACCES, "an isolated policy may not list this folder", path)
        elif event in ("os.kill", "os.killpg"):
            pid = args[0] if args else None
            if pid not in (0, getpid(), -getpid()):
                raise PermissionError(errno.EPERM, f"an isolated policy may not signal process {pid}")
        elif event in DENIED_EVENTS or event.startswith(DENIED_PREFIXES):
            raise PermissionError(errno.EPERM, f"an isolated policy may not use {event}")

    return hook


__all__ = ["DENIED_EVENTS", "DENIED_PREFIXES", "AuditHook", "audit_hook", "install_audit_hook", "read_roots_of_python"]
