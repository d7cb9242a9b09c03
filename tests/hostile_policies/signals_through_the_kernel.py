"""Hostile: passes a message from one episode to the next through state the kernel shares.

No memory of the process survives an episode, so this file writes into what outlives it: the
page cache (which files are cached), the dentry cache (which names were looked up), the pid
counter (how many threads it started) and its template's scheduling priority (which the next
episodes forked inherit). At beta 0 an episode writes ``message(seed)``, 16 bits, into each;
at any other beta it reads each one and prints ``READ <channel> <value>`` (the value a bit
string, a count, or the error that stopped it) on stdout, then stops. Both episodes know the
seed (it is in the run context): only the message travels through the kernel."""

import os
import sys
import threading
import time

BITS = 16


def message(seed):
    return format((seed * 2654435761) % (1 << BITS), f"0{BITS}b")


def _names(seed):
    folder = os.path.dirname(os.__file__)
    return [os.path.join(folder, f"dg-{seed}-{i}") for i in range(BITS)]


def _files(seed):
    """16 of the standard library's module files (named, not listed: listing is refused)."""
    folder = os.path.dirname(os.__file__)
    named = [os.path.join(folder, f"{name}.py") for name in sorted(sys.stdlib_module_names)]
    pool = [path for path in named if os.path.isfile(path)] or named  # no stat: the opens say why
    start = (seed * 7919) % max(1, len(pool) - BITS)
    return pool[start:start + BITS]


def _timed(action):
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _stat(path):
    try:
        os.stat(path)
    except FileNotFoundError:
        pass


def _first_page(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.pread(fd, 4096, 0)
    finally:
        os.close(fd)


def _bits(seconds):
    """The fast ones are 1: below the middle of the slowest and the fastest."""
    cut = (min(seconds) + max(seconds)) / 2
    return "".join("1" if s < cut else "0" for s in seconds)


# -- the channels: write(seed, bits), read(seed) -> str ------------------------------------------
def write_dentries(seed, bits):
    for name, bit in zip(_names(seed), bits, strict=True):
        if bit == "1":
            _stat(name)


def read_dentries(seed):
    for _ in range(3):  # the first lookups of a fresh process are slow whatever the name
        _stat(_names(seed + 1)[0])
    return _bits([_timed(lambda n=n: _stat(n)) for n in _names(seed)])


def write_page_cache(seed, bits):
    for path, bit in zip(_files(seed), bits, strict=False):
        fd = os.open(path, os.O_RDONLY)
        try:
            if bit == "1":
                os.pread(fd, 1 << 20, 0)
            else:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_page_cache(seed):
    _first_page(os.__file__)
    return _bits([_timed(lambda p=p: _first_page(p)) for p in _files(seed)])


def write_threads(seed, bits):
    for _ in range(int(bits[-5:], 2) + 1):  # 1 to 32 threads, each ended at once
        thread = threading.Thread(target=int)
        thread.start()
        thread.join()


def read_threads(seed):
    ids = []
    thread = threading.Thread(target=lambda: ids.append(threading.get_native_id()))
    thread.start()
    thread.join()
    return str(ids[0] - os.getpid())  # the tids handed out since this episode was forked


def write_priority(seed, bits):
    """Lower the template's priority; an episode told no parent pid tries every small pid
    (the template is one of the first processes of its PID namespace)."""
    parent = os.getppid()
    refused = None
    for pid in [parent] if parent > 0 else range(1, 65):
        try:
            os.setpriority(os.PRIO_PROCESS, pid, int(bits[-4:], 2) + 1)
            return
        except OSError as exc:
            refused = exc
    raise refused


def read_priority(seed):
    return str(os.getpriority(os.PRIO_PROCESS, 0))


CHANNELS = {"dentries": (write_dentries, read_dentries), "page-cache": (write_page_cache, read_page_cache),
            "threads": (write_threads, read_threads), "priority": (write_priority, read_priority)}


class Policy:
    def reset(self, context):
        self.seed, self.writer = context.seed, context.beta == 0.0

    def act(self, view):
        for name, (write, read) in CHANNELS.items():
            try:
                if self.writer:
                    write(self.seed, message(self.seed))
                    value = "written"
                else:
                    value = read(self.seed)
            except Exception as exc:  # noqa: BLE001 - the refusal is the report
                value = f"refused:{type(exc).__name__}"
            print(f"{'WROTE' if self.writer else 'READ'} {name} {value}", flush=True)
        return []
