"""A run kept as one CSV file with the header id,parent,score (one row per attempt, in order)."""

from __future__ import annotations

import csv
import os
from pathlib import Path

from dream_gym.datasets.importers.base import (
    DEFAULT_OPTIONS,
    Importer,
    ImportOptions,
    ImportReport,
    NotARunError,
    Program,
)
from dream_gym.datasets.importers.job import ImportJob

LABEL = "CSV tree"
HEADER = "id,parent,score"


def is_csv_tree(path: Path) -> bool:
    """A .csv file whose first line is the header."""
    return path.is_file() and path.suffix == ".csv" and path.read_text(encoding="utf-8").startswith(HEADER)


def import_csv_tree(src: str | os.PathLike[str], out: str | os.PathLike[str],
                    options: ImportOptions = DEFAULT_OPTIONS) -> ImportReport:
    src = Path(src)
    if not is_csv_tree(src):
        raise NotARunError(src, f"{src}: not a CSV tree (a .csv file starting {HEADER})")
    job = ImportJob.begin("csv-tree", LABEL, src, out, options, metric=options.metric_or("score"))
    with src.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    programs = [Program(id=row["id"], parent=row["parent"] or None, order=i,
                        score=float(row["score"]) if row["score"] else None,
                        error=None if row["score"] else "no score recorded")
                for i, row in enumerate(rows)]
    return job.write(job.build(programs), source_path=src, run_name=src.stem)


IMPORTER = Importer(label=LABEL, looks_for="a CSV tree (id,parent,score)", detect=is_csv_tree, run=import_csv_tree)
