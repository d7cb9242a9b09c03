"""Reading the files of a run as data: regular files only, bounded, content-addressed blobs verified.

A run folder may come from anyone (a downloaded corpus, a colleague's archive), so the importers
that read a layout of their own (:mod:`.evotrace`, :mod:`.gepa`) read it as data, never trusting a
name: a file is opened without following a symbolic link and without waiting for a writer, and only
a regular file of bounded size is read (:func:`dream_gym.infrastructure.limits.read_leftover`); a JSON-lines file
is streamed a line at a time under the line and total limits of :mod:`dream_gym.infrastructure.limits`, each line
parsed with :func:`~dream_gym.infrastructure.limits.loads_bounded`; a content-addressed blob is read only by a name
that is a hash, and its bytes must hash to that name. Each refusal is a
:class:`~.base.RunImportError` naming the file and the problem.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.limits import (
    LeftoverError,
    LimitError,
    bounded_lines,
    leftover_problem,
    loads_bounded,
    max_decompressed_bytes,
    max_line_bytes,
    read_leftover,
)

from .base import RunImportError

SHA256_NAME = re.compile(r"^[0-9a-f]{64}$")


def present(path: Path) -> bool:
    """A file of that name is there, whatever its kind (a link or a FIFO included), but not a folder:
    detection names a run by its files, and reading it then says what is wrong with one."""
    return os.path.lexists(path) and not path.is_dir()


def read_data(path: Path, limit: int, *, label: str | None = None) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; anything else is refused by name."""
    label = label or str(path)
    try:
        return read_leftover(path, limit)
    except LeftoverError as exc:
        raise RunImportError(f"{label} {exc.problem}; a run's files are read as data only") from None
    except FileNotFoundError:
        raise RunImportError(f"{label}: no such file") from None
    except OSError as exc:  # the folder holding it is a link (ELOOP), or it cannot be opened
        raise RunImportError(f"{label}: cannot be read as data ({exc.strerror or exc})") from None


def read_json(path: Path, *, label: str | None = None) -> Any:
    """A JSON document of at most the line limit (16 MB), nested at most 100 deep."""
    label = label or str(path)
    data = read_data(path, max_line_bytes(), label=label)
    try:
        return loads_bounded(data)
    except LimitError as exc:
        raise RunImportError(f"{label}: {exc.problem}") from None
    except ValueError as exc:
        raise RunImportError(f"{label}: not valid JSON ({exc})") from None


def optional_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object of a side file a run may hold (a checkpoint's metadata, the run's own
    summary, a generation's results), or None when it is absent or holds no JSON object: such
    files add notes and never fail an import, but one that is no regular file (a link, a FIFO)
    or passes the line limit is refused by name, as every file of a run is."""
    if not os.path.lexists(path):
        return None
    data = read_data(path, max_line_bytes())
    try:
        value = loads_bounded(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def data_text(path: Path, *, label: str | None = None) -> str:
    """A regular file's text of at most the line limit (a program's code), read as data."""
    return read_data(path, max_line_bytes(), label=label).decode("utf-8", errors="replace")


def data_lines(path: Path, *, label: str | None = None) -> Iterator[bytes]:
    """Each line of a regular file (decompressed when it ends ``.gz``), read as data: no link
    followed, no wait for a writer, a line of at most 16 MB and at most 256 MB in all (the
    decompressed size of a ``.gz``). A truncated ``.gz`` ends the lines (``EOFError``, as a
    plain read of one raises)."""
    import gzip

    label = label or str(path)
    with os.fdopen(open_regular(path, label), "rb") as raw:
        # read1: what each call decompresses is returned before a cut-off member's EOFError
        stream: Any = _ReadOne(gzip.GzipFile(fileobj=raw)) if path.name.endswith(".gz") else raw
        try:
            for _, line, _ in bounded_lines(stream, max_line=max_line_bytes(), max_total=max_decompressed_bytes()):
                yield line
        except LimitError as exc:
            where = f" line {exc.line}" if exc.line is not None else ""
            raise RunImportError(f"{label}{where}: {exc.problem}") from None


class _ReadOne:
    """A stream whose ``read`` is another's ``read1``: at most one buffer's worth a call."""

    def __init__(self, stream: Any):
        self.stream = stream

    def read(self, size: int) -> bytes:
        return bytes(self.stream.read1(size))


def open_regular(path: Path, label: str) -> int:
    """A descriptor of ``path`` opened as data (no link followed, no wait for a writer), or a
    :class:`~.base.RunImportError` when it is not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise RunImportError(f"{label}: no such file") from None
    except OSError:
        info = os.lstat(path)
        raise RunImportError(f"{label} {leftover_problem(info.st_mode, 0, 1) or 'cannot be opened'}; "
                             "a run's files are read as data only") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise RunImportError(f"{label} {leftover_problem(mode, 0, 1)}; a run's files are read as data only")
    return fd


def jsonl_objects(path: Path, *, label: str | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line of a JSON-lines file, streamed: a line of
    more than 16 MB, a file of more than 256 MB (``DREAM_GYM_MAX_LINE_MB``,
    ``DREAM_GYM_MAX_DECOMPRESSED_MB``), JSON nested deeper than 100 levels, or a line that is not
    a JSON object is refused, naming the line."""
    label = label or str(path)
    with os.fdopen(open_regular(path, label), "rb") as stream:
        try:
            for number, line, _ in bounded_lines(stream, max_line=max_line_bytes(), max_total=max_decompressed_bytes()):
                if not line.strip():
                    continue
                try:
                    value = loads_bounded(line)
                except ValueError as exc:  # a LimitError is a ValueError
                    raise RunImportError(f"{label} line {number}: {getattr(exc, 'problem', None) or exc}") from None
                if not isinstance(value, dict):
                    raise RunImportError(f"{label} line {number}: not a JSON object")
                yield number, value
        except LimitError as exc:
            where = f" line {exc.line}" if exc.line is not None else ""
            raise RunImportError(f"{label}{where}: {exc.problem}") from None


class Blobs:
    """A folder of content-addressed blobs ``<folder>/<sha[:2]>/<sha>.<ext>``, read by hash and verified."""

    def __init__(self, folder: Path, label: str):
        self.folder, self.label = folder, label
        self.missing: list[str] = []
        info = os.lstat(folder) if os.path.lexists(folder) else None
        self.present = info is not None and stat.S_ISDIR(info.st_mode)
        if info is not None and not self.present:
            raise RunImportError(f"{label} {leftover_problem(info.st_mode, 0, 1)}, not a folder of blobs")

    def read(self, sha: Any, ext: str, *, limit: int | None = None) -> bytes | None:
        """The verified bytes of blob ``sha`` (None when it is absent: counted in :attr:`missing`)."""
        if not isinstance(sha, str) or not SHA256_NAME.match(sha):
            raise RunImportError(f"{self.label}: {str(sha)[:80]!r} is not a sha256 blob name (64 hex digits)")
        name = f"{sha[:2]}/{sha}.{ext}"
        path = self.folder / sha[:2] / f"{sha}.{ext}"
        if not os.path.lexists(path):
            self.missing.append(name)
            return None
        data = read_data(path, limit or max_line_bytes(), label=f"{self.label}/{name}")
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha:
            raise RunImportError(f"{self.label}/{name}: its content hashes to sha256 {actual}, not to its name: "
                                 "the blob was altered or is not the one the record names")
        return data
