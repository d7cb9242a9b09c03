"""Where a ShinkaEvolve run keeps its programs: SQLite databases with a program table."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
# ShinkaEvolve's program table: ``programs`` (evolution_db.sqlite), ``repos`` in newer versions.
SHINKA_TABLES = ("programs", "repos")


@contextmanager
def reading(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection that reads a finished run's database and writes nothing beside it, so that a
    read-only archive imports and a shared one is left as it was. SQLite's ``mode=ro`` still
    creates or changes the ``-shm`` file of a database in WAL mode (and fails where the folder
    is read-only); ``immutable=1`` takes no lock and opens no ``-shm``, but skips the ``-wal``
    file, so a database whose ``-wal`` holds pages (its writer did not close it) is copied with
    that file into a temporary folder and read there."""
    wal = path.with_name(path.name + "-wal")
    if wal.is_file() and wal.stat().st_size:
        with tempfile.TemporaryDirectory(prefix="dream_gym-sqlite-") as scratch:
            copy = Path(scratch) / path.name
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
            conn = _bounded(sqlite3.connect(copy))
            try:
                yield conn
            finally:
                conn.close()
        return
    conn = _bounded(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True))
    try:
        yield conn
    finally:
        conn.close()


#: The longest text or blob a value read from a run's database may be (a program's code, its
#: metadata): SQLite refuses to make a longer one, so a value computed on read cannot grow past it.
MAX_VALUE_BYTES = 16 << 20


def _bounded(conn: sqlite3.Connection) -> sqlite3.Connection:
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    return conn


#: The first bytes of every SQLite database file.
SQLITE_MAGIC = b"SQLite format 3\x00"


def damaged_sqlite(path: Path) -> str | None:
    """Why a file that begins as a SQLite database cannot be read (SQLite's own words: a run's
    database cut short or overwritten); None when it reads, or is no SQLite file at all."""
    try:
        with open(path, "rb") as handle:
            if handle.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                return None
        with reading(path) as conn:
            conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except sqlite3.Error as exc:
        return str(exc)
    except OSError:
        return None
    return None


def sqlite_tables(path: Path) -> list[str] | None:
    """The tables of a SQLite file (read without writing beside it), or None when it is not one."""
    try:
        with reading(path) as conn:
            return [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    except (sqlite3.Error, OSError):
        return None


def shinka_databases(folder: Path) -> list[Path]:
    """SQLite files below ``folder`` that hold a ShinkaEvolve program table, shallowest first."""
    found = [p for p in folder.rglob("*") if p.suffix in SQLITE_SUFFIXES and p.is_file()]
    found = [p for p in found if set(sqlite_tables(p) or ()) & set(SHINKA_TABLES)]
    return sorted(found, key=lambda p: (len(p.parts), p.name != "evolution_db.sqlite", str(p)))
