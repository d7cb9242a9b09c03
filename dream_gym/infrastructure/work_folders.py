"""Work folders in the temp folder, and the sweep of those a killed process left behind.

A work folder (a policy template's HOME, a candidate's workspace, multiprocessing's folder for
the fork server's socket) is made in the system's temp folder and removed by the process that
made it when it is done with it. A process killed
with ``kill -9`` removes nothing: its folders are named after it (``dream_gym_<kind>.<pid>.*``),
and the first folder any later dream_gym process makes sweeps away those whose process is gone.
A folder whose pid lives (its own process, or one that reused the number) is kept.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
from pathlib import Path

_PREFIX = "dream_gym_"
_NAMED = re.compile(rf"{_PREFIX}[a-z_]+\.(\d+)\.")


def work_folder(kind: str) -> Path:
    """A new, empty folder of this process (``kind``: lower-case letters and ``_``), after a
    sweep of the folders that dead processes left (once a process)."""
    if not re.fullmatch("[a-z_]+", kind):
        raise ValueError(f"a work folder's kind is lower-case letters and '_', not {kind!r}")
    sweep_left_behind()
    return Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{kind}.{os.getpid()}."))


@functools.cache
def sweep_left_behind() -> int:
    """Remove the work folders in the temp folder whose process is gone; returns how many."""
    removed = 0
    root = Path(tempfile.gettempdir())
    try:
        names = [entry.name for entry in os.scandir(root) if entry.name.startswith(_PREFIX)]
    except OSError:
        return 0
    for name in names:
        match = _NAMED.match(name)
        if match and not _alive(int(match.group(1))):
            shutil.rmtree(root / name, ignore_errors=True)
            removed += not (root / name).exists()
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


__all__ = ["sweep_left_behind", "work_folder"]
