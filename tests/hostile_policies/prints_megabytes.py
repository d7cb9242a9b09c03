"""Hostile: floods stdout and stderr (8 MB per decision). Expect PolicyOutputError; the parent
neither blocks (full pipe) nor keeps the flood in memory."""

import sys

CHUNK = "x" * (1 << 20)


def act(view):
    for _ in range(8):
        print(CHUNK)
        sys.stderr.write(CHUNK)
    return [view.frontier[0]]
