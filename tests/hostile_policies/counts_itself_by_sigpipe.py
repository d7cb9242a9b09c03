"""Hostile: learns its own pid, which counts the episodes its template forked before it.

``getpid`` answers 0 in an episode, but the kernel stamps the SIGPIPE a process raises on itself
(a write to a pipe whose read end it closed) with the sender's pid: blocked, the signal waits,
and ``sigtimedwait`` returns its siginfo. The file raises ``PID=<si_pid or the error>``."""

import os
import signal


def _own_pid():
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            os.write(write_end, b"x")
        except BrokenPipeError:
            pass
        os.close(write_end)
        info = signal.sigtimedwait({signal.SIGPIPE}, 0)
        return "none" if info is None else str(info.si_pid)
    except OSError as exc:
        return type(exc).__name__


def act(view):
    raise RuntimeError(f"PID={_own_pid()} GETPID={os.getpid()}")
