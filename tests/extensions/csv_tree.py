"""A run kept as one CSV file with the header id,parent,score (one row per attempt, in order)."""

from __future__ import annotations

import csv
import os
from pathlib import Path

from dream_gym.datasets.importers.base import (
    Importer,
    ImportReport,
    NotARunError,
    Program,
    check_options,
    check_out_folder,
    write_imported_world,
)
from dream_gym.datasets.importers.tree import build_world_records

LABEL = "CSV tree"
HEADER = "id,parent,score"


def is_csv_tree(path: Path) -> bool:
    """A .csv file whose first line is the header."""
    return path.is_file() and path.suffix == ".csv" and path.read_text(encoding="utf-8").startswith(HEADER)


def import_csv_tree(src: str | os.PathLike[str], out: str | os.PathLike[str], *, metric: str = "score",
                    direction: str = "maximize", world_id: str | None = None, task_name: str | None = None,
                    task_description: str = "", workers: int = 1, orphans: str = "attach") -> ImportReport:
    src = Path(src)
    if not is_csv_tree(src):
        raise NotARunError(src, f"{src}: not a CSV tree (a .csv file starting {HEADER})")
    check_options(direction, orphans)
    out_path = check_out_folder(out)
    report = ImportReport("csv-tree", str(src), LABEL, out=str(out_path), metric=metric)
    with src.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    programs = [Program(id=row["id"], parent=row["parent"] or None, order=i,
                        score=float(row["score"]) if row["score"] else None,
                        error=None if row["score"] else "no score recorded")
                for i, row in enumerate(rows)]
    records = build_world_records(programs, report, orphans=orphans, direction=direction)
    write_imported_world(out_path, records, report, system="csv-tree", source_path=src, run_name=src.stem,
                         world_id=world_id, task_name=task_name, task_description=task_description,
                         direction=direction, workers=workers, orphans=orphans)
    return report


IMPORTER = Importer(label=LABEL, looks_for="a CSV tree (id,parent,score)", detect=is_csv_tree, run=import_csv_tree)
