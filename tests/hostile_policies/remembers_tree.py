"""Hostile: learns the tree in one episode and cheats in the next.

With nothing remembered it reveals everything it can and remembers where the best node was
(its branch and depth), in every place it knows that might outlive an episode: a class
attribute, a module global, ``builtins``, ``sys.modules``, ``os.environ``, files (``/tmp``, its
HOME, its working folder, ``/dev/shm``) and a SysV shared-memory segment. When it finds a memory
it walks straight to that node and stops. Replay in one process would score it far above any
honest policy; isolated, every episode must start from a state where no earlier one ran."""

import builtins
import ctypes
import json
import os
import sys

KEY = "dream_gym_hostile_memory"
FILES = ["/tmp/" + KEY, os.path.join(os.path.expanduser("~"), KEY), KEY, "/dev/shm/" + KEY]
SHM_KEY, SHM_SIZE = 0x44524D47, 4096
_GLOBAL = {}


def _shm(create):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    shmid = libc.shmget(SHM_KEY, SHM_SIZE, (0o1600 if create else 0o600))
    if shmid < 0:
        return None
    address = libc.shmat(shmid, None, 0)
    return None if address in (None, ctypes.c_void_p(-1).value) else address


def _store(memory):
    text = json.dumps(memory)
    Memory.best = memory
    _GLOBAL["best"] = memory
    builtins.__dict__[KEY] = memory
    sys.modules[KEY] = memory
    os.environ[KEY] = text
    for path in FILES:
        try:
            with open(path, "w") as handle:
                handle.write(text)
        except OSError:
            pass
    try:
        address = _shm(create=True)
        if address:
            ctypes.memmove(address, text.encode() + b"\0", len(text) + 1)
    except (OSError, AttributeError):
        pass


def _recall():
    for memory in (Memory.best, _GLOBAL.get("best"), builtins.__dict__.get(KEY), sys.modules.get(KEY)):
        if isinstance(memory, dict):
            return memory
    texts = [os.environ.get(KEY)]
    for path in FILES:
        try:
            with open(path) as handle:
                texts.append(handle.read())
        except OSError:
            pass
    try:
        address = _shm(create=False)
        if address:
            texts.append(ctypes.string_at(address).decode())
    except (OSError, AttributeError, UnicodeDecodeError):
        pass
    for text in texts:
        try:
            return json.loads(text)
        except (TypeError, ValueError):
            continue
    return None


class Memory:
    best = None


class Policy:
    def reset(self, context):
        self.memory = _recall()

    def act(self, view):
        if self.memory is None:
            return self._explore(view)
        return self._walk(view, self.memory["branch"], self.memory["depth"])

    def _explore(self, view):
        scored = [n for n in view.nodes[1:] if n.score is not None]
        if scored:
            best = max(scored, key=lambda n: n.score)
            _store({"branch": best.branch, "depth": best.depth})
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
