"""Hostile: passes a bit from one episode to the next through the pid counter.

Episodes are forked one after another from a template, so the pid an episode gets counts the
episodes forked before it since the template (re)started, and an episode can force a restart
by overstaying its decision timeout. At beta 0 an episode that wants to send a 1 sleeps past
its timeout (the template is restarted and its pids count from the start again); one that sends
a 0 stops at once. Every other episode reads the counter every way it knows and prints
``READ <way> <value>`` on stderr: its own pid, thread id, parent and group; which pids answer a
question about them (a signal 0, their group, session, scheduling, priority); its thread id as a
priority-inheriting futex stores it; a socket pair's peer credentials. The bit to send is
``seed % 2`` (the seed is in the run context)."""

import ctypes
import os
import socket
import struct
import sys
import time

PROBED = range(1, 65)


def _error(exc):
    return f"refused:{type(exc).__name__}"


def _alive(ask):
    """The pids in PROBED that ``ask(pid)`` answers (its errors: a pid that is not there)."""
    found = []
    for pid in PROBED:
        try:
            ask(pid)
        except ProcessLookupError:
            continue
        except OSError as exc:
            if exc.errno == 3:  # ESRCH
                continue
            return _error(exc)
        found.append(pid)
    return ",".join(map(str, found)) or "none"


def _futex_owner():
    """The thread id a priority-inheriting lock of an uncontended word stores."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    word = ctypes.c_uint32(0)
    futex, lock_pi = 202 if os.uname().machine == "x86_64" else 98, 6
    if libc.syscall(futex, ctypes.byref(word), lock_pi, 0, None, None, 0) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return word.value & 0x3FFFFFFF


def _peer_pid():
    left, right = socket.socketpair()
    try:
        return struct.unpack("3i", left.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
    finally:
        left.close()
        right.close()


WAYS = {
    "pid": os.getpid,
    "tid": lambda: ctypes.CDLL(None).gettid(),
    "parent": os.getppid,
    "group": os.getpgrp,
    "signal-0": lambda: _alive(lambda p: os.kill(p, 0)),
    "getpgid": lambda: _alive(os.getpgid),
    "getsid": lambda: _alive(os.getsid),
    "sched": lambda: _alive(os.sched_getparam),
    "priority": lambda: _alive(lambda p: os.getpriority(os.PRIO_PROCESS, p)),
    "futex-pi": _futex_owner,
    "peer-credentials": _peer_pid,
}


def read_all():
    found = {}
    for name, way in WAYS.items():
        try:
            found[name] = way()
        except OSError as exc:
            found[name] = _error(exc)
    return found


class Policy:
    def reset(self, context):
        if context.beta == 0.0:
            if context.seed % 2:
                time.sleep(3600)  # past the decision timeout: the template is restarted
            return
        for name, value in read_all().items():
            sys.stderr.write(f"READ {name} {value}\n")
        sys.stderr.flush()

    def act(self, view):
        return []
