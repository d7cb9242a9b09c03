"""Hostile: counts episodes by what its template's garbage collector says.

The template allocates between forks; an episode inherits the collector's generation counts,
its statistics and the allocator's block count. The file raises ``COLLECTOR=<all three>``."""

import gc
import sys


def act(view):
    stats = [entry["collections"] for entry in gc.get_stats()]
    raise RuntimeError(f"COLLECTOR={gc.get_count()} {stats} {sys.getallocatedblocks()}")
