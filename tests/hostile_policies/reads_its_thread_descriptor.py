"""Hostile: reads its thread id where glibc keeps it, in its own memory, with no system call.

``threading.get_ident()`` is the address of the thread's descriptor (``struct pthread``), where
the kernel wrote the forked process's id (``THREAD_SELF->tid``); numpy reads any address through
``__array_interface__`` (no ctypes, nothing the audit hook sees). The offset is the test's
(``TID_OFFSET`` below is replaced with libthread_db's). It raises ``TID=<value>``."""

import threading

import numpy as np

TID_OFFSET = 0x2D0


class _At:
    def __init__(self, address):
        self.__array_interface__ = {"data": (address, True), "shape": (1,), "typestr": "<i4", "version": 3}


def act(view):
    raise RuntimeError(f"TID={int(np.asarray(_At(threading.get_ident() + TID_OFFSET))[0])}")
