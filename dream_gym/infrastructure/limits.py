"""Bounds on what dream_gym reads from files it did not write (worlds, datasets, archives).

A world or dataset may come from anyone (a remote, an archive, an import), so every reader
streams its input and stops at a limit with an error that names the file, the limit and how to
raise it, instead of exhausting memory or the interpreter's stack:

* :data:`MAX_DECOMPRESSED_MB` (256; environment variable ``DREAM_GYM_MAX_DECOMPRESSED_MB``): the
  bytes of one file once inflated: a world's node lines (``nodes.jsonl``, or ``nodes.jsonl.gz``
  decompressed) and each member of a dataset archive. The largest real world measured here
  holds 11.3 MB of node lines (an imported OpenEvolve run); the largest shipped one 2.8 MB.
  A loaded world keeps its node lines in memory, so this limit also bounds what a bomb of valid
  lines can make a loader hold; lower it where memory is tight.
* :data:`MAX_LINE_MB` (16; ``DREAM_GYM_MAX_LINE_MB``): one line of a node file, and a whole
  ``world.json`` or ``dataset.json``. The longest real line measured here is 345 KB (an
  imported program with its prompts). Parsing a line briefly takes about three times its size.
* :data:`MAX_JSON_DEPTH` (100): nesting of arrays and objects in one JSON value; real worlds
  nest 7 deep. Deeper values would exhaust the interpreter's stack in the parser or later.
* :data:`MAX_READ_BYTES` (4 MiB): one read from an archive's decompressed stream (a tar
  header's own data, such as a long name, is read whole by :mod:`tarfile`).

The environment variables take a size in MB (a positive number) and are read at each call.

**Files left by untrusted code.** A candidate program may leave anything where the parent
expects its answer: a FIFO (a plain ``open`` blocks for ever), a symbolic link to
``/dev/zero`` (a plain ``read`` never ends) or to a file outside its workspace, a file of any
size, JSON that parses into millions of objects. :func:`read_leftover` reads such a file as data
only (no link followed, nothing but a regular file opened, at most a given number of bytes,
under a deadline) and raises :class:`LeftoverError` naming what it found instead;
:func:`json_containers` counts the arrays and objects a JSON text would build, before it is
parsed.

This module imports nothing of dream_gym.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

MAX_DECOMPRESSED_MB = 256
DECOMPRESSED_ENV = "DREAM_GYM_MAX_DECOMPRESSED_MB"
MAX_LINE_MB = 16
LINE_ENV = "DREAM_GYM_MAX_LINE_MB"
MAX_JSON_DEPTH = 100
MAX_READ_BYTES = 4 << 20
_CHUNK = 1 << 20  # bytes read at a time from a (decompressed) stream
_MB = 1 << 20


class Readable(Protocol):
    """A binary stream: a file, a gzip reader, a tar member."""

    def read(self, size: int = -1, /) -> bytes: ...


class LimitError(ValueError):
    """Input exceeds one of the limits above; the message says which and how to raise it.

    Readers catch it and re-raise their own error type with the file (and ``line``, when there
    is one) named.
    """

    def __init__(self, problem: str, line: int | None = None):
        super().__init__(problem)
        self.problem, self.line = problem, line


def _limit_mb(env: str, default_mb: float) -> float:
    text = os.environ.get(env, "").strip()
    if not text:
        return default_mb
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{env}={text!r}: must be a positive size in MB")
    return value


def max_decompressed_bytes() -> int:
    """The inflated-size limit in bytes (``DREAM_GYM_MAX_DECOMPRESSED_MB``, else 256 MB)."""
    return int(_limit_mb(DECOMPRESSED_ENV, MAX_DECOMPRESSED_MB) * _MB)


def max_line_bytes() -> int:
    """The line (and JSON document) limit in bytes (``DREAM_GYM_MAX_LINE_MB``, else 16 MB)."""
    return int(_limit_mb(LINE_ENV, MAX_LINE_MB) * _MB)


def _mb(n_bytes: int) -> str:
    return f"{round(n_bytes / _MB, 3):g} MB"


def decompressed_limit_problem(limit: int, lead: str = "holds") -> str:
    return (f"{lead} more than {_mb(limit)} uncompressed, the limit on decompressed data; "
            f"set {DECOMPRESSED_ENV} to a larger size in MB to read it")


def line_limit_problem(limit: int, what: str = "line") -> str:
    return f"{what} longer than {_mb(limit)}, the limit; set {LINE_ENV} to a larger size in MB to read it"


def bounded_lines(stream: Readable, *, max_line: int, max_total: int) -> Iterator[tuple[int, bytes, bool]]:
    """``(line number, line without its newline, whether a newline ended it)`` for each line of
    a binary stream, read a chunk at a time: memory stays within one line plus one chunk (when
    the caller drops each line before asking for the next).

    Raises :class:`LimitError` (with the line number for a long line) once the stream passes
    ``max_total`` bytes or a line passes ``max_line`` bytes.
    """
    pending: list[bytes] = []  # pieces of the line being read
    pending_size, number, total = 0, 0, 0
    while chunk := stream.read(_CHUNK):
        total += len(chunk)
        if total > max_total:
            raise LimitError(decompressed_limit_problem(max_total))
        pieces = chunk.split(b"\n")
        for piece in pieces[:-1]:
            number += 1
            if pending_size + len(piece) > max_line:
                raise LimitError(line_limit_problem(max_line), number)
            pending.append(piece)
            line = b"".join(pending)
            pending, pending_size = [], 0  # the pieces are freed before the line is parsed
            yield number, line, True
            del line  # not kept while the next line is assembled
        pending.append(pieces[-1])
        pending_size += len(pieces[-1])
        if pending_size > max_line:
            raise LimitError(line_limit_problem(max_line), number + 1)
    if pending_size:
        yield number + 1, b"".join(pending), False


def read_bounded(stream: Readable, limit: int) -> bytes | None:
    """All of a stream if it holds at most ``limit`` bytes, else None (read at most limit + 1)."""
    data = stream.read(limit + 1)
    return None if len(data) > limit else data


def json_depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def depth_problem(max_depth: int = MAX_JSON_DEPTH) -> str:
    return f"JSON nested deeper than {max_depth} levels (the limit on nesting)"


def loads_bounded(text: str | bytes, loads: Callable[[str | bytes], Any] = json.loads,
                  max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``loads(text)``, refusing values nested deeper than ``max_depth`` with :class:`LimitError`
    (the parser's own RecursionError on far deeper input is turned into the same error)."""
    try:
        value = loads(text)
    except RecursionError:
        raise LimitError(depth_problem(max_depth)) from None
    # a value cannot nest deeper than the brackets its text holds: most lines need no walk
    opened = text.count("[") + text.count("{") if isinstance(text, str) else text.count(b"[") + text.count(b"{")
    if opened > max_depth and json_depth(value) > max_depth:
        raise LimitError(depth_problem(max_depth))
    return value


class BoundedStream:
    """A read-only binary stream over ``inner`` (a decompressing reader) that refuses to go past
    ``max_total`` bytes, by reading or by seeking, and refuses any single read larger than
    ``max_read``: what :mod:`tarfile` reads through it cannot exhaust memory."""

    def __init__(self, inner: Any, *, max_total: int, max_read: int = MAX_READ_BYTES):
        self.inner, self.max_total, self.max_read = inner, max_total, max_read

    def _check(self, end: int) -> None:
        if end > self.max_total:
            raise LimitError(decompressed_limit_problem(self.max_total))

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0 or size > self.max_read:
            raise LimitError(f"a single read of {'all' if size is None or size < 0 else size} bytes "
                             f"(more than {_mb(self.max_read)}): a header too large for an archive of worlds")
        data = self.inner.read(size)
        self._check(self.inner.tell())
        return data

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        target = offset if whence == os.SEEK_SET else self.inner.tell() + offset if whence == os.SEEK_CUR else None
        if target is None:
            raise OSError("a bounded stream cannot seek from its end")
        self._check(target)
        return self.inner.seek(target)

    def tell(self) -> int:
        return self.inner.tell()

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.inner.close()


# -- files left by untrusted code ------------------------------------------------------------
#: Seconds a read of a file left by untrusted code may take (a regular file on a local disk is
#: read in milliseconds; the bound is for a file system that stalls).
LEFTOVER_DEADLINE_S = 10.0
_FILE_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFLNK: "a symbolic link", stat.S_IFDIR: "a folder",
               stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}


class LeftoverError(ValueError):
    """A file left by untrusted code cannot be read as data; ``problem`` says why, as the end of
    a sentence whose subject the caller names ("result file " + "is a FIFO, not a regular file")."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


def size_text(n_bytes: int) -> str:
    """A size for a message: ``256 KB``, ``1.5 MB``, ``100 bytes``."""
    if n_bytes < 1024:
        return f"{n_bytes} bytes"
    if n_bytes < _MB:
        return f"{round(n_bytes / 1024, 1):g} KB"
    return _mb(n_bytes)


def leftover_problem(mode: int, size: int, limit: int) -> str | None:
    """What keeps a file of this ``st_mode`` and ``st_size`` from being read as data of at most
    ``limit`` bytes (None: nothing)."""
    kind = stat.S_IFMT(mode)
    if kind != stat.S_IFREG:
        return f"is {_FILE_KINDS.get(kind, 'of an unknown type')}, not a regular file"
    if size > limit:
        return f"is larger than {size_text(limit)}"
    return None


def read_leftover(path: str | os.PathLike[str], limit: int, *, deadline_s: float = LEFTOVER_DEADLINE_S) -> bytes:
    """The bytes of ``path``, a file that untrusted code may have replaced by anything.

    The folder holding it is opened without following a link in its last component, the file
    without following any link (``O_NOFOLLOW``) and without waiting for a writer
    (``O_NONBLOCK``: a FIFO opens at once, and is then refused); only a regular file of at most
    ``limit`` bytes is read, and only while ``deadline_s`` lasts. Raises :class:`LeftoverError`
    naming what was found instead, :class:`FileNotFoundError` when nothing is there.
    """
    path = os.fspath(path)
    folder, name = os.path.split(path)
    folder_fd = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fd = _open_leftover(name, folder_fd)
    finally:
        os.close(folder_fd)
    try:
        info = os.fstat(fd)
        problem = leftover_problem(info.st_mode, info.st_size, limit)
        if problem:
            raise LeftoverError(problem)
        return _read_within(fd, limit, time.monotonic() + deadline_s, deadline_s)
    finally:
        os.close(fd)


def _open_leftover(name: str, folder_fd: int) -> int:
    try:
        return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):  # a link, a socket, a folder
            info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
            raise LeftoverError(leftover_problem(info.st_mode, info.st_size, 0) or "cannot be opened") from None
        raise


def _read_within(fd: int, limit: int, stop: float, deadline_s: float) -> bytes:
    pieces, total = [], 0
    while chunk := os.read(fd, min(_CHUNK, limit + 1 - total)):
        pieces.append(chunk)
        total += len(chunk)
        if total > limit:  # it grew after fstat
            raise LeftoverError(f"is larger than {size_text(limit)}")
        if time.monotonic() > stop:
            raise LeftoverError(f"could not be read within {deadline_s:g} s")
    return b"".join(pieces)


def json_containers(text: bytes) -> int:
    """How many arrays and objects parsing the JSON ``text`` would build (brackets outside
    strings), counted in one pass without building anything. Parsing builds some 20 times the
    text's size in Python objects when it is all ``[]`` or ``{}``; a caller that knows how many
    containers a valid value holds refuses the rest before :func:`json.loads`."""
    count, position, end = 0, 0, len(text)
    while position < end:
        quote = text.find(b'"', position)
        stop = end if quote < 0 else quote
        count += text.count(b"[", position, stop) + text.count(b"{", position, stop)
        if quote < 0:
            break
        position = _string_end(text, quote + 1)
    return count


def _string_end(text: bytes, position: int) -> int:
    """The index after the quote closing the string whose body starts at ``position`` (the
    end of ``text`` when none closes it)."""
    while True:
        quote = text.find(b'"', position)
        if quote < 0:
            return len(text)
        backslashes = 0
        while text[quote - 1 - backslashes] == 0x5C:  # a quote after an odd run of \ is escaped
            backslashes += 1
        if backslashes % 2 == 0:
            return quote + 1
        position = quote + 1


__all__ = ["DECOMPRESSED_ENV", "LEFTOVER_DEADLINE_S", "LINE_ENV", "MAX_DECOMPRESSED_MB", "MAX_JSON_DEPTH", "MAX_LINE_MB",
           "MAX_READ_BYTES", "BoundedStream", "LeftoverError", "LimitError", "Readable", "bounded_lines", "json_containers",
           "json_depth", "leftover_problem", "loads_bounded", "max_decompressed_bytes", "max_line_bytes", "read_bounded",
           "read_leftover", "size_text"]
