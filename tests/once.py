"""Expensive test artefacts (an installed wheel, a trained model) built once per test session.

A module-scoped fixture runs once in every pytest-xdist worker that gets one of its module's
tests; the artefacts here are built by whichever worker asks first, under a file lock in the
session's shared temporary folder, and the others wait for it and reuse it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name``, filled by ``build(folder)`` once per session; a build that failed
    (raised) is retried by the next worker that asks, from an empty folder."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the session's, not the worker's
    folder, built = shared / name, shared / f"{name}.built"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            built.touch()
    return folder
