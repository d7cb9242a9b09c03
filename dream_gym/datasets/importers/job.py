"""The frame of every import: the world folder checked and the report begun, the programs read by
the system's importer built into a world (:func:`~.tree.build_world_records`), the world written
with its provenance (:func:`~.base.write_imported_world`), and the time it all took.

An importer finds its run, begins the job (:meth:`ImportJob.begin`), reads the run into
:class:`~.base.Program` objects (adding notes to the job's report), and ends with
:meth:`ImportJob.build` and :meth:`ImportJob.write`; notes that need the built tree (the best
score, the node count) go between the two.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dream_gym.world.writer import check_empty_folder

from .base import ImportOptions, ImportReport, Program, write_imported_world
from .tree import build_world_records


@dataclass
class ImportJob:
    """One import under way: the system, its options, the world folder and the report being filled."""

    system: str
    options: ImportOptions
    out: Path
    report: ImportReport
    started: float

    @classmethod
    def begin(cls, system: str, label: str, source: str | os.PathLike[str], out: str | os.PathLike[str],
              options: ImportOptions, *, metric: str) -> ImportJob:
        """Start the clock, check that ``out`` is free (a :class:`FileExistsError` when it is not
        empty), and begin the report of importing ``source`` by ``metric``."""
        started = time.perf_counter()
        out_path = check_empty_folder(out)
        report = ImportReport(system, str(source), label, out=str(out_path), metric=metric)
        return cls(system, options, out_path, report, started)

    def build(self, programs: Iterable[Program]) -> list[dict[str, Any]]:
        """The programs as node records, orphans and direction as the options say; fills the report."""
        return build_world_records(programs, self.report, orphans=self.options.orphans,
                                   direction=self.options.direction)

    def write(self, records: list[dict[str, Any]], *, source_path: Path, run_name: str,
              options: ImportOptions | None = None) -> ImportReport:
        """Write the world (``options`` overrides the job's, e.g. a description of the system's own)
        and return the finished report."""
        write_imported_world(self.out, records, self.report, system=self.system, source_path=source_path,
                             run_name=run_name, options=options or self.options)
        self.report.seconds = time.perf_counter() - self.started
        return self.report
