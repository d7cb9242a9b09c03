"""The real public runs in ../shared/external-runs, imported into worlds for tests and benchmarks.

Each run is imported with the importer of its system; a run whose default metric is missing is
retried with the metric the importer names first among the usual ones. A run that does not
import (importers are still growing) is skipped with its reason, never silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from dream_gym.world.tree import World, load_world

EXTERNAL = Path(__file__).resolve().parents[2] / "shared" / "external-runs"
PREFERRED_METRICS = ("combined_score", "overall_score", "score", "fitness")


def run_sources() -> list[tuple[str, str, Path]]:
    """(system, run name, importer source) of every run in the folder (empty when absent)."""
    found = []
    for system in ("openevolve", "shinkaevolve"):
        for run in sorted((EXTERNAL / system).glob("*")) if (EXTERNAL / system).is_dir() else []:
            if run.is_dir():
                src = run / "evolution_db.sqlite" if system == "shinkaevolve" else run
                found.append((system, run.name, src))
    return found


def import_run(system: str, name: str, src: Path, out: Path) -> World:
    """Import one run into ``out``; raises the importer's error when it cannot."""
    from dream_gym.datasets.importers import import_run as import_one

    try:
        import_one(system, src, out / name, metric=PREFERRED_METRICS[0], world_id=name)
    except Exception as exc:  # the importer names the metrics it found
        found = re.search(r"metrics found: ([^(]*)", str(exc))
        names = [m.strip() for m in found.group(1).split(",")] if found else []
        metric = next((m for m in PREFERRED_METRICS if m in names), None)
        if metric is None:
            raise
        import_one(system, src, out / f"{name}-{metric}", metric=metric, world_id=name)
        return load_world(out / f"{name}-{metric}")
    return load_world(out / name)


def import_all(out: Path, report: Callable[[str], None] = print) -> list[World]:
    """Every run that imports, as worlds under ``out``; each failure is reported with its reason."""
    worlds = []
    for system, name, src in run_sources():
        try:
            worlds.append(import_run(system, name, src, out))
        except Exception as exc:
            report(f"skipped {system}/{name}: {type(exc).__name__}: {exc}")
    return worlds
