"""Durable files: what every long loop (grow, dream, rsi, train) and every writer of a finished
file uses, so a ``kill -9`` at any moment leaves the old file or the new one, never half of one.

* :func:`write_via` lets a writer (``model.save``, numpy, text) write a temporary file, then
  fsyncs it, renames it onto the target and fsyncs the folder (so the rename itself survives).
* :func:`write_atomic` and :func:`write_json_atomic` are that for text/bytes and a JSON document;
  text and JSON are redacted first (:mod:`dream_gym.infrastructure.redact`: no secret reaches a file).
* :func:`json_safe` makes a value strict-JSON-ready (non-finite floats as null).
* :func:`read_jsonl` reads a JSON-lines file that is appended to line by line: a torn last line
  (the one being written when the process died) is skipped; a bad complete line is an error.

This module imports nothing of dream_gym but :mod:`dream_gym.infrastructure.redact` (every layer may use it).
"""

from __future__ import annotations

import functools
import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.redact import redact, redact_value


def json_safe(value: Any) -> Any:
    """A JSON-safe copy: non-finite floats become None, tuples lists, keys and paths strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_via(path: str | os.PathLike[str], write: Callable[[Path], object]) -> Path:
    """``write(tmp)``, then fsync ``tmp``, rename it onto ``path`` and fsync the folder.

    ``tmp`` is a new file of its own beside ``path`` (``.<name>.<random>.tmp``, already created,
    empty), so two writers of one target never write or rename each other's temporary file; it
    is removed when ``write`` or the rename fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, _new_file_mode())  # mkstemp makes it 0600; the target gets the usual mode
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return path


def check_replaceable(path: str | os.PathLike[str], named: str, starts: bytes, kind: str) -> None:
    """Refuse to replace a file that is not one of ours: ``path`` (``named``: how the message names
    it, an option and its value) may be absent, empty, or a file whose bytes begin with ``starts``
    (``kind``: what such a file is). A results file, a world's nodes.jsonl or anyone's notes named
    by mistake as an output was replaced without a word."""
    target = Path(path)
    if not target.is_file() or target.stat().st_size == 0:
        return
    with open(target, "rb") as handle:
        head = handle.read(len(starts))
    if head != starts:
        raise FileExistsError(f"{named} exists and is not {kind} (it would be replaced); give another path, "
                              "or remove it")


def read_json_object(path: str | os.PathLike[str], fields: Mapping[str, type] | None = None) -> dict[str, Any]:
    """A JSON object read from ``path`` that a run wrote and reads back (its state on a resume),
    each of ``fields`` present of its type (an int is a float too; a bool is neither); ValueError
    naming the file otherwise: a file edited, cut or replaced made tracebacks or errors that named
    no file ("Expecting value: line 1 column 1")."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not JSON ({exc}); it is not what the run wrote") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: a JSON object was expected, found {type(value).__name__}; it is not what the run "
                         "wrote")
    for name, kind in (fields or {}).items():
        if name in value:
            found = value[name]
            kinds = (int, float) if kind is float else (kind,)
            if isinstance(found, bool) and kind is not bool or not isinstance(found, kinds):
                raise ValueError(f"{path}: {name!r} must be {kind.__name__}, got {str(found)[:40]!r}; it is not what "
                                 "the run wrote")
    return value


@functools.cache
def _new_file_mode() -> int:
    """The mode ``open(path, "w")`` would give a new file: 0666 less this process's umask (read
    from /proc where it can be, since setting it to read it is not thread-safe)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            umask = next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        umask = os.umask(0o022)
        os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8, secrets redacted; bytes as they are) to ``path`` through a
    temporary file."""
    payload = redact(data).encode("utf-8") if isinstance(data, str) else data
    return write_via(path, lambda tmp: tmp.write_bytes(payload))


def write_json_atomic(
    path: str | os.PathLike[str], data: Any, *, indent: int = 2, default: Any = None, allow_nan: bool = False
) -> Path:
    """One JSON document, newline-terminated, written atomically (strict JSON unless allow_nan),
    its strings redacted before they are escaped (a secret holding a quote would hide in JSON)."""
    text = json.dumps(redact_value(data), indent=indent, allow_nan=allow_nan, default=default)
    return write_atomic(path, text + "\n")


def read_jsonl(path: str | os.PathLike[str], *, torn_tail: bool = True) -> list[dict[str, Any]]:
    """The complete lines of a JSON-lines file, [] when it does not exist. A torn last line (no
    newline yet) is skipped when ``torn_tail`` (files appended to while a loop runs), else read
    like the others (files written whole); a line that is not JSON raises ValueError naming file
    and line."""
    path = Path(path)
    if not path.exists():
        return []
    raw = path.read_bytes()
    complete = raw if raw.endswith(b"\n") or not torn_tail else raw[: raw.rfind(b"\n") + 1]
    rows = []
    for number, line in enumerate(complete.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}, line {number}: not JSON ({exc})") from None
    return rows
