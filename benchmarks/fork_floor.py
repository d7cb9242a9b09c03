"""The floor of a fresh process per episode on this machine: what any design that forks one
process per episode pays, before a sandbox, a policy or a message format.

    .venv/bin/python -m benchmarks.fork_floor [--episodes 176] [--decisions 10] [--concurrent 1] [--numpy]

A bare "template" (this process: the standard library imported, and numpy with ``--numpy`` as
the policy template imports it for a file that uses installed packages; its objects frozen out
of the collector's view, as the policy template does) forks one process per episode. The
episode answers ``--decisions`` round trips of a 200-byte message with a 50-byte reply over its
own two pipes, then exits. With ``--concurrent 1`` the episodes run one after another and the
next one is forked ahead while the current one answers (the design of
:mod:`dream_gym.policy_files`); with more, that many episodes are in flight at once (latency
hidden, both cores busy). Prints milliseconds per episode. No sandbox, no JSON, no policy code:
a real isolated episode costs more than this.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import select
import time

REQUEST, REPLY = b"x" * 200, b"r" * 50


def _episode(requests: int, replies: int, decisions: int) -> None:
    for _ in range(decisions):
        if not os.read(requests, 4096):
            break
        os.write(replies, REPLY)
    os._exit(0)


def _fork(decisions: int) -> tuple[int, int, int]:
    """(pid, fd to the episode, fd from it)."""
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(to_w)
        os.close(from_r)
        _episode(to_r, from_w, decisions)
    os.close(to_r)
    os.close(from_w)
    return pid, to_w, from_r


def one_after_another(episodes: int, decisions: int) -> float:
    """Seconds for ``episodes`` episodes in sequence, each forked ahead, reaped later."""
    start = time.perf_counter()
    ahead, dying = _fork(decisions), []
    for _ in range(episodes):
        pid, to_w, from_r = ahead
        for decision in range(decisions):
            os.write(to_w, REQUEST)
            os.read(from_r, 4096)
            if decision == 0:
                ahead = _fork(decisions)
        os.close(to_w)
        os.close(from_r)
        dying.append(pid)
        if len(dying) > 2:
            os.waitpid(dying.pop(0), 0)
    for pid in (*dying, ahead[0]):
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    return time.perf_counter() - start


def in_flight(episodes: int, decisions: int, concurrent: int) -> float:
    """Seconds for ``episodes`` episodes with ``concurrent`` of them in flight at once."""
    start = time.perf_counter()
    active: dict[int, list[int]] = {}  # fd from the episode -> [pid, fd to it, decisions answered]
    poller = select.poll()
    started = 0

    def begin() -> None:
        nonlocal started
        pid, to_w, from_r = _fork(decisions)
        os.write(to_w, REQUEST)
        active[from_r] = [pid, to_w, 0]
        poller.register(from_r, select.POLLIN)
        started += 1

    while started < min(concurrent, episodes):
        begin()
    while active:
        for fd, _ in poller.poll():
            os.read(fd, 4096)
            state = active[fd]
            state[2] += 1
            if state[2] < decisions:
                os.write(state[1], REQUEST)
                continue
            poller.unregister(fd)
            os.close(fd)
            os.close(state[1])
            os.waitpid(state[0], 0)
            del active[fd]
            if started < episodes:
                begin()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=176)
    parser.add_argument("--decisions", type=int, default=10)
    parser.add_argument("--concurrent", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--numpy", action="store_true", help="import numpy first (a fork copies its page tables too)")
    args = parser.parse_args()
    if min(args.episodes, args.decisions, args.concurrent, args.repeats) < 1:
        parser.error("--episodes, --decisions, --concurrent and --repeats count: 1 or more")
    if args.numpy:
        importlib.import_module("numpy")
    gc.freeze()
    runs = [one_after_another(args.episodes, args.decisions) if args.concurrent == 1
            else in_flight(args.episodes, args.decisions, args.concurrent) for _ in range(args.repeats)]
    print(f"{1000 * min(runs) / args.episodes:.3f}")


if __name__ == "__main__":
    main()
