"""Shared test set-up: the real public runs beside the repository.

Tests that read the real OpenEvolve and ShinkaEvolve runs in ``../shared/external-runs`` ask for
the ``external_runs`` fixture (or ``@pytest.mark.usefixtures("external_runs")``). Where that
folder is absent they all skip with one reason, reported at this file, so ``-ra`` folds them into
a single summary line rather than one line per test.
"""

from __future__ import annotations

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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """Report every skip for want of the real runs at this file, so they fold into one line."""
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple) and report.longrepr[2].endswith(NEEDS_SHARED):
        report.longrepr = (__file__, None, report.longrepr[2])
    return report
