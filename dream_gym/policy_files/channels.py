"""An isolated policy's episode pipes, and releasing a launched template.

An episode talks to the parent over two pipes of its own (:class:`Channel`, made for it alone
and handed to the template, which forks the episode on them). A wait on one, or on the
template's control socket, ends in a reply, a deadline passed (:class:`Deadline`) or a closed
end (:class:`Closed`). :func:`cleanup` releases what a launched template holds: its process
group, the control socket, the episodes' pipes and its temp folder.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

from dream_gym.infrastructure.sandbox import Launched
from dream_gym.policy_files.output import Output, kill_group


def cleanup(launched: Launched, control: socket.socket, channels: list[Channel], tmp: str) -> None:
    """Kill the process group, reap, close the control socket and the episodes' pipes, remove
    the temp folder."""
    proc = launched.proc
    kill_group(proc.pid)
    launched.release()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover (SIGKILL cannot be ignored)
        pass
    control.close()
    for channel in channels:
        channel.close()
    shutil.rmtree(tmp, ignore_errors=True)


class Channel:
    """The parent's ends of one episode's two pipes (to it, from it) and the bytes read past its
    last whole reply. :meth:`pair` also gives the ends the episode gets: those two, and the write
    ends of its own stdout and stderr, whose read ends ``output`` drains."""

    def __init__(self, to_episode: int, from_episode: int, number: int = 0):
        self.to_episode, self.from_episode = to_episode, from_episode
        self.number = number  # the episode's, among this policy's (what it prints is tagged with it)
        self.pending = b""
        os.set_blocking(to_episode, False)

    @classmethod
    def pair(cls, output: Output, number: int) -> tuple[Channel, tuple[int, int, int, int]]:
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe()
        output.watch(out_r, "stdout", number)
        output.watch(err_r, "stderr", number)
        return cls(to_w, from_r, number), (to_r, from_w, out_w, err_w)

    def close(self) -> None:
        for fd in (self.to_episode, self.from_episode):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.to_episode = self.from_episode = -1


class Deadline(Exception):
    """A wait on an episode's pipe or the control socket outlived its deadline."""


class Closed(Exception):
    """The other end of an episode's pipe or the control socket closed: its process died (or is
    about to)."""


__all__ = ["Channel", "Closed", "Deadline", "cleanup"]
