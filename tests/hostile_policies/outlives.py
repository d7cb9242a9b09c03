"""Hostile: leaves a thread behind that says it is alive, and counts its descriptors.

Each episode starts a thread that prints ``ALIVE <pid>`` on stderr every 10 ms, forever,
replaces ``os._exit`` so that its process does not end when its pipe closes, prints
``REPORT FDS=<n> PID=<pid>`` (its open descriptors) on stdout and stops. An episode
process must be gone before the next one sees its first message (its thread never prints
again), and an episode forked ahead, while another ran, must hold nothing of that one: stdio
and its own two pipes."""

import os
import sys
import threading
import time


def _say_alive():
    while True:
        sys.stderr.write(f"ALIVE {os.getpid()}\n")
        sys.stderr.flush()
        time.sleep(0.01)


def _open_descriptors():
    count = 0
    for fd in range(1024):
        try:
            os.fstat(fd)
        except OSError:
            continue
        count += 1
    return count


def _never_exit(code):
    while True:
        time.sleep(1)


def act(view):
    fds = _open_descriptors()
    threading.Thread(target=_say_alive, daemon=True).start()
    os._exit = _never_exit
    print(f"REPORT FDS={fds} PID={os.getpid()}", flush=True)
    return []
