"""Hostile: keeps what it learned in the open file descriptions of its stdio, and cheats with it.

Processes forked from one parent share the *open file descriptions* of the descriptors they
inherit: what one sets on them (the signal ``F_SETSIG`` names, the status flags, a pipe's size,
the owner) the next one reads back, whatever happened to the process that set it. With nothing
remembered, an episode reveals everything it can, finds the best node and writes its branch and
depth into every channel below; with a memory, it walks straight to that node and stops, which
in-process replay would score near the oracle limit. Each episode prints ``READ <channel>
<value>`` (what it found, or the error that stopped the read) and ``WROTE <channel> <result>``
on stderr; :func:`store` and :func:`recall` also work outside dream_gym (the tests' control)."""

import fcntl
import os
import sys

CHANNELS = ("signal", "flags", "pipe-size", "owner", "nonblocking-ioctl")
_FLAG_BITS = (os.O_APPEND, os.O_NONBLOCK, getattr(os, "O_ASYNC", 0o20000))
_FIONBIO = 0x5421


def _error(exc):
    return f"refused:{type(exc).__name__}"


# -- one writer and one reader per channel: write(branch, depth), read() -> (branch, depth) ------
def _write_signal(branch, depth):
    fcntl.fcntl(1, fcntl.F_SETSIG, branch + 1)
    fcntl.fcntl(2, fcntl.F_SETSIG, depth + 1)


def _read_signal():
    branch, depth = fcntl.fcntl(1, fcntl.F_GETSIG), fcntl.fcntl(2, fcntl.F_GETSIG)
    return (branch - 1, depth - 1) if branch and depth else None


def _bits_on(fd, value):
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    for i, bit in enumerate(_FLAG_BITS):
        flags = flags | bit if value >> i & 1 else flags & ~bit
    fcntl.fcntl(fd, fcntl.F_SETFL, flags)


def _bits_of(fd):
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    return sum(1 << i for i, bit in enumerate(_FLAG_BITS) if flags & bit)


def _write_flags(branch, depth):
    # 3 bits a descriptor: a marker on stdin, then the branch and the depth, each below 8
    _bits_on(0, 0b101)
    _bits_on(1, branch & 7)
    _bits_on(2, depth & 7)


def _read_flags():
    return (_bits_of(1), _bits_of(2)) if _bits_of(0) == 0b101 else None


def _write_pipe_size(branch, depth):
    fcntl.fcntl(1, fcntl.F_SETPIPE_SZ, 4096 << (branch % 8))
    fcntl.fcntl(2, fcntl.F_SETPIPE_SZ, 4096 << (depth % 8))


def _read_pipe_size():
    sizes = [fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) for fd in (1, 2)]
    if sizes == [65536, 65536]:  # what a new pipe holds
        return None
    return tuple(size.bit_length() - 13 for size in sizes)


def _write_owner(branch, depth):
    # an owner must be a live process: pid 1 (the sandbox's init, or the machine's) is one bit
    fcntl.fcntl(1, fcntl.F_SETOWN, 1 if branch % 2 else 0)


def _read_owner():
    return (fcntl.fcntl(1, fcntl.F_GETOWN), None)


def _write_nonblocking_ioctl(branch, depth):
    fcntl.ioctl(2, _FIONBIO, (1).to_bytes(4, sys.byteorder))


def _read_nonblocking_ioctl():
    return (int(bool(fcntl.fcntl(2, fcntl.F_GETFL) & os.O_NONBLOCK)), None)


WRITERS = {"signal": _write_signal, "flags": _write_flags, "pipe-size": _write_pipe_size,
           "owner": _write_owner, "nonblocking-ioctl": _write_nonblocking_ioctl}
READERS = {"signal": _read_signal, "flags": _read_flags, "pipe-size": _read_pipe_size,
           "owner": _read_owner, "nonblocking-ioctl": _read_nonblocking_ioctl}


def store(branch, depth):
    """Write (branch, depth) into every channel; what each write gave, by channel."""
    wrote = {}
    for name in CHANNELS:
        try:
            WRITERS[name](branch, depth)
            wrote[name] = "written"
        except OSError as exc:
            wrote[name] = _error(exc)
    return wrote


def read_all():
    """What each channel holds now (None: nothing written), by channel."""
    found = {}
    for name in CHANNELS:
        try:
            found[name] = READERS[name]()
        except OSError as exc:
            found[name] = _error(exc)
    return found


def recall():
    """The (branch, depth) the signal channel carries, the widest one; None when it carries none."""
    value = read_all()["signal"]
    return value if isinstance(value, tuple) else None


def _say(kind, values):
    for name, value in values.items():
        sys.stderr.write(f"{kind} {name} {value}\n")
    sys.stderr.flush()


class Policy:
    def reset(self, context):
        found = read_all()
        _say("READ", found)
        self.memory = recall()

    def act(self, view):
        if self.memory is None:
            return self._explore(view)
        return self._walk(view, *self.memory)

    def _explore(self, view):
        scored = [n for n in view.nodes[1:] if n.score is not None]
        if scored:
            best = max(scored, key=lambda n: n.score)
            wrote = store(best.branch, best.depth)
            if not getattr(self, "said", False):
                _say("WROTE", wrote)
                self.said = True
        batch = [0] * view.root_slots + [i for i in view.frontier if i != 0]
        return batch[: view.workers]

    def _walk(self, view, branch, depth):
        heads = [n for n in view.nodes[1:] if n.parent == 0]
        if len(heads) <= branch:
            return [0] * min(view.workers, branch + 1 - len(heads), view.root_slots)
        leaf = max((n for n in view.nodes if n.branch == branch), key=lambda n: n.depth)
        if leaf.depth >= depth or leaf.id not in view.frontier:
            return []
        return [leaf.id]
