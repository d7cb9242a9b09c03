"""Hostile: asks the kernel for work the turns cannot stop.

A process stopped at the end of its turn stops when its system call returns; a mapping the
kernel fills whole before returning (``MAP_POPULATE``, ``madvise(MADV_POPULATE_*)``) keeps a core
busy into the other episodes' turns, for as long as the episode chooses, and the others can count
their turns getting longer. Each episode tries the calls once and prints ``CALL <name> <result>``
(``ok``, or the error that refused it) on stdout, then stops."""

import mmap

MAP_POPULATE = 0x8000
SIZE = 1 << 20


def _attempt(action):
    try:
        action()
        return "ok"
    except OSError as exc:
        return f"refused:{type(exc).__name__}"


def _populated():
    mmap.mmap(-1, SIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_POPULATE).close()


def _advised(advice):
    def run():
        mapped = mmap.mmap(-1, SIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        try:
            mapped.madvise(advice)
        finally:
            mapped.close()
    return run


def _plain():  # the control: a mapping touched a page at a time
    mapped = mmap.mmap(-1, SIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for offset in range(0, SIZE, 4096):
        mapped[offset] = 1
    mapped.close()


class Policy:
    def reset(self, context):
        for name, action in (("populate", _populated), ("populate-read", _advised(22)),
                             ("populate-write", _advised(23)), ("plain", _plain)):
            print(f"CALL {name} {_attempt(action)}", flush=True)

    def act(self, view):
        return []
