"""Shared test set-up: the real public runs beside the repository.

Tests that read the real OpenEvolve and ShinkaEvolve runs in ``../shared/external-runs`` ask for
the ``external_runs`` fixture (or ``@pytest.mark.usefixtures("external_runs")``). Where that
folder is absent they all skip with one reason, reported at this file, so ``-ra`` folds them into
a single summary line rather than one line per test.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from external_runs import EXTERNAL

NEEDS_SHARED = f"needs the real public runs of ../shared/external-runs, not found at {EXTERNAL}"


@pytest.fixture(scope="session")
def external_runs() -> Path:
    """The folder of the real public runs; skips the test where it is absent."""
    if not EXTERNAL.is_dir():
        pytest.skip(NEEDS_SHARED)
    return EXTERNAL


@pytest.fixture
def short_tmp_path() -> Generator[Path, Any, Any]:
    """A fresh folder directly in /tmp, removed after the test: a short path for a TMPDIR
    (multiprocessing's sockets live below it, and AF_UNIX paths are capped at 108 bytes), in the
    system's temp folder wherever pytest keeps its own."""
    folder = Path(tempfile.mkdtemp(prefix="dg-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


#: What the signals of Ctrl-C and of a polite kill do in every test, as in a terminal's foreground
#: (set by :func:`signals_as_in_a_terminal`).
SIGNALS_IN_A_TERMINAL = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}


@pytest.fixture(autouse=True)
def signals_as_in_a_terminal() -> Generator[None, Any, Any]:
    """Each test starts, and ends, with Ctrl-C's signal raising KeyboardInterrupt and SIGTERM
    ending the process, whatever started the suite and whatever ran before: a shell's background
    job ignores SIGINT, and every process a test starts would inherit that (a test of Ctrl-C then
    waits for a command that cannot hear it); Ray's ``init`` leaves a SIGTERM handler, and a
    notebook's kernel client a SIGINT one, in the process that ran them."""
    def restore() -> None:
        for number, handler in SIGNALS_IN_A_TERMINAL.items():
            if signal.getsignal(number) is not handler:
                signal.signal(number, handler)

    restore()
    yield
    restore()


@pytest.fixture(scope="session", autouse=True)
def sb3_logs_in_the_session_folder(tmp_path_factory: pytest.TempPathFactory) -> Generator[None, Any, Any]:
    """Plain SB3's ``learn()`` makes a folder in the system's temporary folder for every model
    without a logger of its own (``/tmp/SB3-<time>``, empty at verbose 0), as it would for a
    user: the tests' plain-SB3 runs, and the processes they start, make it in the session's
    folder instead of leaving hundreds in /tmp. (``dream-gym train`` gives its model a logger.)"""
    before = os.environ.get("SB3_LOGDIR")
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.getbasetemp() / "sb3-logs")
    yield
    if before is None:
        os.environ.pop("SB3_LOGDIR", None)
    else:
        os.environ["SB3_LOGDIR"] = before


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """Report every skip for want of the real runs at this file, so they fold into one line."""
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple) and report.longrepr[2].endswith(NEEDS_SHARED):
        report.longrepr = (__file__, None, report.longrepr[2])
    return report
