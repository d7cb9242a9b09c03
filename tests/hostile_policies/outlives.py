"""Hostile: leaves a timer behind that says it is alive, and counts its descriptors.

Each episode draws a token, starts a timer whose handler prints ``ALIVE <token>`` on stderr
every 10 ms, forever (an episode may start no thread), replaces ``os._exit`` so that its process
does not end when its pipe closes, prints ``REPORT FDS=<n> PID=<pid> TOKEN=<token>`` (its open
descriptors, the pid it is told) on stdout and stops. An episode process must be gone before the
next one sees its first message (its timer never prints again), and an episode forked ahead,
while another ran, must hold nothing of that one: its own stdio and its own two pipes."""

import fcntl
import os
import signal
import sys
import time

TOKEN = os.urandom(8).hex()  # drawn afresh each episode: the module runs anew in each


def _say_alive(signum, frame):
    sys.stderr.write(f"ALIVE {TOKEN}\n")
    sys.stderr.flush()


def _open_descriptors():
    count = 0
    for fd in range(1024):
        try:
            fcntl.fcntl(fd, fcntl.F_GETFD)
        except OSError:
            continue
        count += 1
    return count


def _never_exit(code):
    while True:
        time.sleep(1)


def act(view):
    fds = _open_descriptors()
    signal.signal(signal.SIGALRM, _say_alive)
    signal.setitimer(signal.ITIMER_REAL, 0.01, 0.01)
    os._exit = _never_exit
    print(f"REPORT FDS={fds} PID={os.getpid()} TOKEN={TOKEN}", flush=True)
    return []
