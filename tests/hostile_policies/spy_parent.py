"""Hostile: tries to reach the world through the parent process: its /proc files, its memory
(/proc/<ppid>/mem, searched for the text of an unrevealed node) and signals. Reports by raising
``FOUND=<json list>``; isolated and hardened, the list must be empty."""

import json
import os

NEEDLE = ("FUTURE" + "-MARKER-" + "4242").encode()
SCAN_BYTES = 512 << 20
CHUNK = 4 << 20


def _scan_memory(pid):
    with open(f"/proc/{pid}/maps") as f:
        maps = f.read().splitlines()
    scanned = 0
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            addr, perms = line.split()[:2]
            if not perms.startswith("r") or "[vvar]" in line or "[vsyscall]" in line:
                continue
            start, end = (int(x, 16) for x in addr.split("-"))
            pos = start
            while pos < end and scanned < SCAN_BYTES:
                size = min(CHUNK, end - pos)
                try:
                    mem.seek(pos)
                    data = mem.read(size + len(NEEDLE))
                except OSError:
                    break
                scanned += size
                if NEEDLE in data:
                    return True
                pos += size
    return False


def act(view):
    found = []
    ppid = os.getppid()
    for name in ("cmdline", "environ", "maps", "cwd/"):
        try:
            if name.endswith("/"):
                os.listdir(f"/proc/{ppid}/{name}")
            else:
                with open(f"/proc/{ppid}/{name}", "rb") as f:
                    f.read(1)
            found.append(f"read /proc/<ppid>/{name}")
        except OSError:
            pass
    try:
        if _scan_memory(ppid):
            found.append("parent memory holds an unrevealed node")
    except OSError:
        pass
    try:
        os.kill(ppid, 0)
        found.append("may signal the parent")
    except OSError:
        pass
    raise RuntimeError("FOUND=" + json.dumps(found))
