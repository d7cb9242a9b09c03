"""Episodes of untrusted code that take turns on a fixed schedule.

The episodes of one (policy, world) task must not pass each other what they revealed, and the
wall clock reaches every process: no sandbox hides it. Played one after another, an episode
could time its last reply and the next read the phase of the clock as it starts. Played side by
side, one could keep a CPU busy or idle and the others time their own loops. So they take turns:
each episode's policy has a template of its own (its process group), and :class:`Turns` lets one
group run at a time, for :data:`QUANTUM_S` each, in a fixed order, on a schedule of the wall clock
that no episode's behaviour moves. An episode that has finished, or waits for this process,
keeps its turns (idle); a turn ends whatever its episode does. What an episode can time is the
schedule, the same for every behaviour of the others.

Its only couplings left are those of a machine's shared state that outlives a turn (the CPU's
caches; the work this process does for an episode, which may run into the next turn: the
security model lists them).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from types import TracebackType

#: Seconds of each turn. Shorter turns cost more switches (two signals to a group each); longer
#: ones make an episode wait longer for its next turn.
QUANTUM_S = 0.002


class Turns:
    """Stops the process groups ``groups`` (their leaders' pids: sandboxes' wardens) on entry
    and, in :meth:`run`, continues one at a time; every group is continued on exit."""

    def __init__(self, groups: Sequence[int], quantum_s: float = QUANTUM_S):
        self.groups = list(groups)
        self.quantum_s = quantum_s
        self.turns = 0

    def __enter__(self) -> Turns:
        for group in self.groups:
            _stop(group)
        return self

    def run(self, finished: Callable[[], bool]) -> None:
        """Give each group its turn, in order, until ``finished()`` (asked after every round)."""
        start = time.monotonic()
        while not finished():
            for group in self.groups:
                _signal(group, signal.SIGCONT)
                self.turns += 1
                _sleep_until(start + self.turns * self.quantum_s)
                _stop(group)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        for group in self.groups:
            _signal(group, signal.SIGCONT)


def _stop(group: int) -> None:
    """Stop every process of the group but its leader, the sandbox's warden (trusted code that
    runs none of the policy's: it waits on this process's lifeline, and ends the sandbox when
    this process dies, which a stopped warden could not), and wait until they are stopped. The
    group is stopped whole first: a process it forks meanwhile is stopped with it. A stop is
    taken when the process next leaves the kernel, so a process that was not on a CPU is
    stopped only once it has one: until then the next group waits."""
    _signal(group, signal.SIGSTOP)
    try:
        os.kill(group, signal.SIGCONT)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + STOP_WAIT_S
    while not all(_state(pid) in _STOPPED for pid in _descendants(group)) and time.monotonic() < deadline:
        time.sleep(0)


#: The states of /proc/PID/stat in which a process runs no code: stopped, or dead.
_STOPPED = frozenset("TtZX")
#: Seconds the next turn waits for a group to stop (past it the turn begins anyway).
STOP_WAIT_S = 1.0


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (not itself), from /proc's children lists. Each process of a
    sandbox has one thread (untrusted code may start none; the template forks from its main
    thread), so its main thread's list is all its children."""
    found, pending = [], [pid]
    while pending:
        parent = pending.pop()
        try:
            with open(f"/proc/{parent}/task/{parent}/children", "rb") as handle:
                children = [int(child) for child in handle.read().split()]
        except OSError:
            continue
        found.extend(children)
        pending.extend(children)
    return found


def _state(pid: int) -> str:
    """The process's state letter (X: gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return chr(handle.read().rsplit(b")", 1)[1][1])
    except (OSError, IndexError):
        return "X"


def _signal(group: int, sig: signal.Signals) -> None:
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):  # a group killed meanwhile (a timeout)
        pass


def _sleep_until(deadline: float) -> None:
    """Sleep to ``deadline`` (on the schedule's own clock: a late wake-up shortens the next
    turn, it does not move the ones after it)."""
    remaining = deadline - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)


__all__ = ["QUANTUM_S", "Turns"]
