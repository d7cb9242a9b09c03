"""Hostile: asks for executable memory of its own, where it could run machine code the
interpreter cannot (a red-team file ran clflush and rdtsc there to time which lines of the
libraries' shared code pages another episode of its grid had loaded: Flush+Reload). It first
switches off its audit hook, as ``unhooks.py`` does, so only the kernel can refuse; then each
episode tries each call once and prints ``CALL <name> <result>`` (``ok``, or what refused it)."""

import ctypes
import gc
import mmap
import types

PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4
PAGE = mmap.PAGESIZE
PKEY_MPROTECT = 329  # x86_64


def _switch_off_the_hook():
    gc.unfreeze()
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and obj.__code__.co_name == "hook" and obj.__closure__:
            for name, cell in zip(obj.__code__.co_freevars, obj.__closure__, strict=True):
                if name == "readable":
                    cell.cell_contents = lambda path: True
            obj.__globals__["DENIED_EVENTS"] = frozenset()
            obj.__globals__["DENIED_PREFIXES"] = ("\0",)


def _mapped(prot):
    def run():
        mmap.mmap(-1, PAGE, prot=prot).close()
    return run


def _protected(call):
    def run():
        page = mmap.mmap(-1, PAGE, prot=PROT_READ | PROT_WRITE)
        address = ctypes.addressof(ctypes.c_char.from_buffer(page))
        if call(address) != 0:
            raise OSError(ctypes.get_errno(), "refused")
    return run


def _attempt(action):
    try:
        action()
        return "ok"
    except OSError as exc:
        return f"refused:{exc.errno}"


class Policy:
    def reset(self, context):
        _switch_off_the_hook()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        calls = (
            ("mmap-exec", _mapped(PROT_READ | PROT_EXEC)),
            ("mprotect-exec", _protected(lambda a: libc.mprotect(ctypes.c_void_p(a), PAGE, PROT_READ | PROT_EXEC))),
            ("pkey_mprotect-exec", _protected(lambda a: libc.syscall(PKEY_MPROTECT, ctypes.c_void_p(a), PAGE,
                                                                     PROT_READ | PROT_EXEC, -1))),
            ("mprotect-read", _protected(lambda a: libc.mprotect(ctypes.c_void_p(a), PAGE, PROT_READ))),
            ("plain", _mapped(PROT_READ | PROT_WRITE)),
        )
        for name, action in calls:
            print(f"CALL {name} {_attempt(action)}", flush=True)

    def act(self, view):
        return []
