"""Which system wrote a run folder: used by ``--from auto`` and to say so when it is the wrong one."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from .base import SYSTEM_NAMES

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
# ShinkaEvolve's program table: ``programs`` (evolution_db.sqlite), ``repos`` in newer versions.
SHINKA_TABLES = ("programs", "repos")


def sqlite_tables(path: Path) -> list[str] | None:
    """The tables of a SQLite file (read-only), or None when it is not one."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        return [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    except sqlite3.DatabaseError:
        return None
    finally:
        conn.close()


def shinka_databases(folder: Path) -> list[Path]:
    """SQLite files below ``folder`` that hold a ShinkaEvolve program table, shallowest first."""
    found = [p for p in folder.rglob("*") if p.suffix in SQLITE_SUFFIXES and p.is_file()]
    found = [p for p in found if set(sqlite_tables(p) or ()) & set(SHINKA_TABLES)]
    return sorted(found, key=lambda p: (len(p.parts), p.name != "evolution_db.sqlite", str(p)))


def detect_system(path: str | os.PathLike[str]) -> str | None:
    """``openevolve``, ``shinkaevolve`` or None (neither layout found)."""
    path = Path(path)
    if path.is_file():
        from .openevolve_trace import is_trace_file

        if is_trace_file(path):
            return "openevolve"
        return "shinkaevolve" if set(sqlite_tables(path) or ()) & set(SHINKA_TABLES) else None
    if not path.is_dir():
        return None
    if any(p.parent.name == "programs" for p in path.rglob("*.json")):
        return "openevolve"
    if shinka_databases(path):
        return "shinkaevolve"
    return None


def wrong_system_hint(path: Path, expected: str) -> str:
    """A sentence for an error message when ``path`` looks like another system's run."""
    if (path / "world.json").is_file():
        return "; it is already a dream-gym world folder (load it directly)"
    found = detect_system(path)
    if found is None or found == expected:
        return ""
    return (f"; it looks like a {SYSTEM_NAMES[found]} run instead: import it with --from {found}")
