"""Hardening of the isolated policy child, installed before the policy file is loaded.

* a **seccomp filter** (:func:`install_seccomp`): execve, execveat, ptrace, process_vm_readv/
  writev, setsid and setpgid fail with EPERM (Linux x86_64 and aarch64);
* a **Python audit hook** (:func:`install_audit_hook`) that refuses: opening files outside the
  Python installation, the ``dream_gym`` package and the policy file (so no world files, no
  ``/proc/<parent>``), any file write, listing other folders, subprocesses and exec,
  ``os.fork``, signals to other processes, ctypes, sockets and sqlite.

This is defence in depth against curious or sloppy code, not a jail against a determined
attacker with native code: run truly hostile code in a container or as another user. The
limits on time, memory and output, the scrubbed environment and the process group are set by
:mod:`dream_gym.policy_files.isolated` and :mod:`dream_gym.isolation`.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def harden(policy_file: str | None) -> list[str]:
    """Install both layers in this process; return notes for the parent (``seccomp`` or why it
    is missing, then ``audit-hook``). ``policy_file`` is the one extra file the child may read."""
    import numpy  # noqa: F401  (imported before the audit hook: it loads ctypes)

    import dream_gym

    notes = [install_seccomp() or "seccomp"]
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             str(Path(dream_gym.__file__).resolve().parent)}
    install_audit_hook(sorted(os.path.realpath(r) for r in roots), [policy_file] if policy_file else [])
    notes.append("audit-hook")
    return notes


def install_seccomp() -> str | None:
    """Refuse execve, ptrace and friends with EPERM (Linux x86_64/aarch64); a note on failure."""
    import ctypes

    tables = {
        "x86_64": (0xC000003E, (59, 322, 101, 310, 311, 112, 109)),
        "aarch64": (0xC00000B7, (221, 281, 117, 270, 271, 157, 154)),
    }  # execve, execveat, ptrace, process_vm_readv, process_vm_writev, setsid, setpgid
    machine = os.uname().machine
    if machine not in tables:
        return f"no seccomp filter for {machine}"
    arch, numbers = tables[machine]
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    deny, allow = 0x00050000 | errno.EPERM, 0x7FFF0000
    program = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, deny), (ld, 0, 0, 0)]
    if machine == "x86_64":
        program += [(jge, 0, 1, 0x40000000), (ret, 0, 0, deny)]  # the x32 ABI
    for number in numbers:
        program += [(jeq, 0, 1, number), (ret, 0, 0, deny)]
    program.append((ret, 0, 0, allow))

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                    ("k", ctypes.c_uint)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    filters = (SockFilter * len(program))(*[SockFilter(*ins) for ins in program])
    prog = SockFprog(len(program), filters)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
        prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        if prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            return f"no_new_privs failed: errno {ctypes.get_errno()}"
        if prctl(22, 2, ctypes.addressof(prog), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
            return f"seccomp failed: errno {ctypes.get_errno()}"
    except (OSError, AttributeError) as exc:
        return f"seccomp unavailable: {exc}"
    return None


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


def install_audit_hook(read_roots: Sequence[str], read_files: Sequence[str]) -> None:
    """Refuse what an exploration policy has no business doing (see the module docstring)."""
    realpath, fsdecode, getpid = os.path.realpath, os.fsdecode, os.getpid
    roots = tuple(r.rstrip(os.sep) + os.sep for r in read_roots)
    files = frozenset(read_files) | {"/dev/urandom", "/dev/random", "/dev/zero"}
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def readable(path: str) -> bool:
        own = f"/proc/{getpid()}"
        return (path in files or path.startswith(roots) or path == own
                or path.startswith(own + os.sep))

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            target, mode, flags = (tuple(args) + (None, None))[:3]
            if target is None or isinstance(target, int):
                return  # an already open descriptor
            path = realpath(fsdecode(target))
            if path == os.devnull:
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
            if not readable(path.rstrip(os.sep) + os.sep) and path not in files:
                raise PermissionError(errno.EACCES, "an isolated policy may not list this folder", path)
        elif event in ("os.kill", "os.killpg"):
            pid = args[0] if args else None
            if pid not in (0, getpid(), -getpid()):
                raise PermissionError(errno.EPERM, f"an isolated policy may not signal process {pid}")
        elif event in DENIED_EVENTS or event.startswith(DENIED_PREFIXES):
            raise PermissionError(errno.EPERM, f"an isolated policy may not use {event}")

    sys.addaudithook(hook)


__all__ = ["DENIED_EVENTS", "DENIED_PREFIXES", "harden", "install_audit_hook", "install_seccomp"]
