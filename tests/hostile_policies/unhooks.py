"""Hostile: switches off the audit hook of its episode, hoping the next episode finds it off.

Every episode's audit hook is one function the template built once; each episode process
installs it anew. This file first asks whether the hook refuses ``os.fork`` (it should), then
edits the hook's closure cells and globals through ``gc`` (unfreezing the objects the template
froze first) so that it allows everything, and
forks again (only the kernel refuses now). It reports both answers by raising
``FIRST=<who> SECOND=<who>``, who being ``hook``, ``kernel`` or ``nobody``. If the switched-off
hook outlived the episode, the next episode's first answer would be ``kernel``."""

import gc
import os
import types


def _who_refuses_fork():
    try:
        pid = os.fork()
    except PermissionError as exc:
        return "hook" if "may not use os.fork" in str(exc) else "kernel"
    if pid == 0:
        os._exit(0)
    return "nobody"


def _switch_off_the_hook():
    gc.unfreeze()  # the template froze its objects out of the collector's view: bring them back
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and obj.__code__.co_name == "hook" and obj.__closure__:
            for name, cell in zip(obj.__code__.co_freevars, obj.__closure__, strict=True):
                if name == "readable":
                    cell.cell_contents = lambda path: True
            obj.__globals__["DENIED_EVENTS"] = frozenset()
            obj.__globals__["DENIED_PREFIXES"] = ("\0",)


def act(view):
    first = _who_refuses_fork()
    _switch_off_the_hook()
    raise RuntimeError(f"FIRST={first} SECOND={_who_refuses_fork()}")
