"""Episodes of untrusted code that take turns on a fixed schedule.

The episodes of one (policy, world) task must not pass each other what they revealed, and the
wall clock reaches every process: no sandbox hides it. Played one after another, an episode
could time its last reply and the next read the phase of the clock as it starts. Played side by
side, one could keep a CPU busy or idle and the others time their own loops. So they take turns:
each episode's policy has a template of its own (its process group), and :class:`Turns` lets one
group run at a time, for :data:`QUANTUM_S` each, in a fixed order. An episode that has
finished, or waits for this process, keeps its turns (idle); a turn ends whatever its episode
does, and the next begins without waiting for anything of it. What an episode can time is the
schedule, whose turns last what this process's sleep lasts.

Each turn lasts its full length from its start: a schedule that caught up after a late wake-up
gave some groups turns of no length, and a process continued and stopped again within
microseconds was seen to run on into the next turn. A process in a system call when its turn
ends stops when the call returns; the next turn does not wait for it (waiting let a process that
freed a large block of memory at the end of its turn delay the next one's by tens of
milliseconds, at will).

Its only couplings left are those of a machine's shared state that outlives a turn (the CPU's
caches, the kernel finishing a call of the group before; the work this process does for an
episode, which may run into the next turn: the security model lists them).
"""

from __future__ import annotations

import gc
import os
import select
import signal
import time
from collections.abc import Callable, Sequence
from types import TracebackType

#: Seconds of each turn. Shorter turns cost more switches (two signals to a group each); longer
#: ones make an episode wait longer for its next turn.
QUANTUM_S = 0.002


class Turns:
    """Stops the process groups ``groups`` (their leaders' pids: sandboxes' wardens) on entry
    and, in :meth:`run`, has a process of its own continue them one at a time; every group is
    continued on exit.

    The schedule runs in a fork of this process that does nothing else: in this process a
    turn's end waited for the interpreter's lock, which the work this process does for an
    episode holds (a reply parsed, a view encoded), so an episode could lengthen the turns
    every other episode times. The fork keeps no lock of this process's threads and runs no
    Python code but the schedule; it ends after the turn in which it is told to, or once this
    process is gone."""

    def __init__(self, groups: Sequence[int], quantum_s: float = QUANTUM_S):
        self.groups = list(groups)
        self.quantum_s = quantum_s
        self._scheduler: int | None = None
        self._done = -1

    def __enter__(self) -> Turns:
        for group in self.groups:
            _stop(group)
        return self

    def run(self, finished: Callable[[], bool], poll_s: float = 0.002) -> None:
        """Give each group its turn, in order, until ``finished()`` (asked every ``poll_s``).
        A turn lasts at least ``quantum_s`` from the moment its group is continued."""
        if not self.groups:  # no template is running: the episodes fail at once
            while not finished():
                time.sleep(poll_s)
            return
        done_r, self._done = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the scheduler: nothing but the schedule, then _exit
            code = 1
            try:
                gc.disable()  # no finalizer of this process's objects runs here
                os.close(self._done)
                _schedule(self.groups, self.quantum_s, done_r, parent)
                code = 0
            finally:
                os._exit(code)
        os.close(done_r)
        self._scheduler = pid
        while not finished():
            time.sleep(poll_s)
        self._end_scheduler()

    def _end_scheduler(self) -> None:
        if self._scheduler is None:
            return
        try:
            os.write(self._done, b"x")
        except OSError:
            os.kill(self._scheduler, signal.SIGKILL)
        os.close(self._done)
        os.waitpid(self._scheduler, 0)
        self._scheduler = None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._end_scheduler()
        for group in self.groups:
            _signal(group, signal.SIGCONT)


def _schedule(groups: Sequence[int], quantum_s: float, done: int, parent: int) -> None:
    """Turns, in order, until ``done`` is readable or ``parent`` is gone (asked after each)."""
    while True:
        for group in groups:
            _signal(group, signal.SIGCONT)
            time.sleep(quantum_s)
            _stop(group)
            if os.getppid() != parent or select.select([done], [], [], 0)[0]:
                return


def _stop(group: int) -> None:
    """Stop every process of the group but its leader, the sandbox's warden (trusted code that
    runs none of the policy's: it waits on this process's lifeline, and ends the sandbox when
    this process dies, which a stopped warden could not). The group is stopped whole first: a
    process it forks meanwhile is stopped with it."""
    _signal(group, signal.SIGSTOP)
    try:
        os.kill(group, signal.SIGCONT)
    except (ProcessLookupError, PermissionError):
        pass


def _signal(group: int, sig: signal.Signals) -> None:
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):  # a group killed meanwhile (a timeout)
        pass


__all__ = ["QUANTUM_S", "Turns"]
