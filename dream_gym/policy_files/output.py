"""What a policy's sandboxed processes print, drained with bounded tails.

A thread of the parent (:func:`drain`) reads the template's stdout and stderr from its start,
and each episode's own two pipes once :meth:`Output.watch` is given their read ends, until every
one of them has closed, so a policy that prints never blocks on a full pipe. It keeps byte counts
and a bounded tail per stream (:class:`Output`), so printing cannot fill the parent's memory:
past the per-episode limit it kills the policy's process group (:func:`kill_group`), and the
parent, waiting on a reply, sees the overflow and reports it.
"""

from __future__ import annotations

import functools
import os
import select
import signal
import threading
from collections.abc import Callable
from typing import Any

TAIL_BYTES = 8192


class Output:
    """What a policy's processes printed: byte counts and bounded tails per stream; trips
    ``overflow`` past a limit. The template's stdout and stderr are drained from its start, each
    episode's own two pipes from when :meth:`watch` is given their read ends."""

    def __init__(self, limit: int, pgid: int):
        self.limit, self.pgid = limit, pgid
        self.episode_bytes = 0  # what the current episode (and the template) printed
        self.retired_bytes = 0  # what earlier episodes printed since the current one started
        self.total = 0
        self.overflow = False
        self.tails: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self.current: int | None = None  # the episode whose output the tails hold (see start)
        self.lock = threading.Lock()
        self.waiting: list[tuple[int, str, int | None]] = []  # read ends given to watch, not yet drained
        self.done = False  # the drain thread has ended: a read end given now is closed at once
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)

    def start(self, episode: int) -> None:
        """Episode ``episode`` runs from now: the tails hold its output (and the template's)
        alone, so an error quotes nothing an earlier episode printed (which could misname it)."""
        with self.lock:
            self.current = episode
            self.episode_bytes = self.retired_bytes = 0
            for tail in self.tails.values():
                tail.clear()

    def add(self, stream: str, data: bytes, episode: int | None = None) -> None:
        """``data`` printed on ``stream`` by ``episode`` (None: the template)."""
        with self.lock:
            self.total += len(data)
            if episode is not None and episode != self.current:
                # A retired episode's last words (what its pipes held when the template killed
                # it): not quoted, and not charged to the episode now running, which they would
                # push past its limit. Bounded on their own: a retired episode that is not dead
                # and floods is stopped as an episode that floods.
                self.retired_bytes += len(data)
                self._check(self.retired_bytes)
                return
            self.episode_bytes += len(data)
            tail = self.tails[stream]
            tail += data
            if len(tail) > 2 * TAIL_BYTES:
                del tail[:-TAIL_BYTES]
            self._check(self.episode_bytes)

    def _check(self, printed: int) -> None:
        if printed > self.limit and not self.overflow:
            self.overflow = True
            kill_group(self.pgid)

    def tail(self, stream: str, limit: int = 2000) -> str:
        with self.lock:
            return bytes(self.tails[stream][-limit:]).decode("utf-8", "replace")

    def watch(self, fd: int, stream: str, episode: int | None = None) -> None:
        """Drain ``fd``, a read end this object now owns (closed at its EOF), into ``stream``, as
        what ``episode`` prints."""
        with self.lock:
            if self.done:
                os.close(fd)
                return
            self.waiting.append((fd, stream, episode))
            try:
                os.write(self.wake_w, b"w")
            except BlockingIOError:
                pass  # the thread has wake-ups waiting already

    def take_waiting(self, finish: bool = False) -> list[tuple[int, str, int | None]]:
        """The read ends given since the last call; with ``finish``, none can be given later."""
        with self.lock:
            waiting, self.waiting = self.waiting, []
            if finish and not waiting:
                self.done = True
                os.close(self.wake_r)
                os.close(self.wake_w)
            return waiting


def drain(template: dict[str, Any], output: Output) -> None:
    """Read what the policy's processes print until the template's stdout and stderr and every
    episode's pipes have closed (runs in a daemon thread)."""
    poller = select.poll()
    streams: dict[int, tuple[str, Callable[[], None], int | None]] = {}

    def follow(fd: int, name: str, close: Callable[[], None], episode: int | None = None) -> None:
        poller.register(fd, select.POLLIN)
        streams[fd] = (name, close, episode)

    for name, stream in template.items():
        follow(stream.fileno(), name, stream.close)
    template_fds = set(streams)
    poller.register(output.wake_r, select.POLLIN)
    while True:
        for fd, _ in poller.poll():
            if fd == output.wake_r:
                os.read(fd, 1 << 12)
                for episode_fd, name, episode in output.take_waiting():
                    follow(episode_fd, name, functools.partial(os.close, episode_fd), episode)
                continue
            name, close, episode = streams[fd]
            data = os.read(fd, 1 << 16)
            if data:
                output.add(name, data, episode)
            else:
                poller.unregister(fd)
                close()
                del streams[fd]
                template_fds.discard(fd)
        if not template_fds and not streams:  # the sandbox is gone: no episode will print again
            late = output.take_waiting(finish=True)
            if not late:
                return
            for late_fd, name, episode in late:  # sent to no process, or to one now dead: at EOF soon
                follow(late_fd, name, functools.partial(os.close, late_fd), episode)


def kill_group(pgid: int) -> None:
    """SIGKILL process group ``pgid``, a launched policy's (a group already gone is no error)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


__all__ = ["TAIL_BYTES", "Output", "drain", "kill_group"]
