"""Where a ShinkaEvolve run keeps its programs: SQLite databases with a program table."""

from __future__ import annotations

import sqlite3
from pathlib import Path

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
