"""Hostile: forks a grandchild that would sleep for ten minutes, then reports its pid by raising.
Hardened: os.fork is refused. Unhardened: the grandchild must die with the process group."""

import os
import time


def act(view):
    pid = os.fork()
    if pid == 0:  # the grandchild
        time.sleep(600)
        os._exit(0)
    raise RuntimeError(f"FORKED={pid}")
