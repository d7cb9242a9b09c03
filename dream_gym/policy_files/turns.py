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
        """Give each group its turn, in order, until ``finished()`` (asked after every round).
        A turn lasts at least ``quantum_s`` from the moment its group is continued."""
        while not finished():
            for group in self.groups:
                _signal(group, signal.SIGCONT)
                self.turns += 1
                time.sleep(self.quantum_s)
                _stop(group)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        for group in self.groups:
            _signal(group, signal.SIGCONT)


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
