"""A world's files, read safely: regular files only, strict JSON, node lines streamed within the limits.

The folder holds ``world.json`` and its node file, ``nodes.jsonl`` or (a finished world)
``nodes.jsonl.gz``; a folder holding both is an error, since either could be the stale one. What
the files must say is the format's (:mod:`dream_gym.world.tree`); this module reads them and
raises :class:`WorldFormatError`, naming the file and the line, when they cannot be read.

Every file of a world is a regular file: a ``world.json``, ``nodes.jsonl`` or ``nodes.jsonl.gz``
that is a symbolic link (to a valid file elsewhere, to ``/dev/zero``, to a secret), a FIFO, a
device or a folder is refused with an error naming it (:func:`open_world_file`: the file is opened
with ``O_NOFOLLOW``, without blocking, and checked with ``fstat`` on the open descriptor, which is
then the one read). The world folder itself may be a symbolic link: it is the path the caller
names.

Bounds (:mod:`dream_gym.infrastructure.limits`): node files are read as a stream, a line at a time; the node
lines of a world may hold at most 256 MB (``DREAM_GYM_MAX_DECOMPRESSED_MB``, counted after
decompression; line numbers in errors count lines of the decompressed text), a line (and
world.json) at most 16 MB (``DREAM_GYM_MAX_LINE_MB``), a JSON value nests at most 100 deep. Each
error names the file, the line, the limit and how to raise it.

When world.json gives the node file's ``sha256``, :func:`check_sha256` compares it with the stored
bytes and says how a file that differs was changed (cut short, or rewritten). This module imports
nothing else of dream_gym but :mod:`dream_gym.infrastructure.limits`.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import io
import json
import os
import stat
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, cast

from dream_gym.infrastructure.limits import (
    LimitError,
    Readable,
    bounded_lines,
    decompressed_limit_problem,
    line_limit_problem,
    loads_bounded,
    max_decompressed_bytes,
    max_line_bytes,
    read_bounded,
)

WORLD_FILE = "world.json"
NODES_FILE = "nodes.jsonl"
NODES_GZ_FILE = "nodes.jsonl.gz"
NODE_FILES = (NODES_FILE, NODES_GZ_FILE)
#: What a run that recorded the world did (grow, deploy): beside the world's files, not part of it.
RUN_SUMMARY_FILE = "run_summary.json"


class WorldFormatError(ValueError):
    """A world folder or one of its files breaks the ``dream-gym-world/1`` format.

    The message names the file, the line (when there is one) and the problem.
    """

    def __init__(self, path: str | os.PathLike[str], problem: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = self.path if line is None else f"{self.path}, line {line}"
        super().__init__(f"{where}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        # rebuilt from its three parts: the default rebuilds an exception from its message alone,
        # which this constructor does not take (a worker process's error would not come back)
        return (WorldFormatError, (self.path, self.problem, self.line))


def _reject_constant(name: str) -> float:
    # json accepts NaN/Infinity by default; the format does not.
    raise ValueError(f"non-finite number {name} is not allowed")


def _loads_finite(text: str | bytes) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def loads_strict(text: str | bytes) -> Any:
    """Strict JSON (no NaN/Infinity), nested at most ``limits.MAX_JSON_DEPTH`` deep; a deeper value
    raises ``limits.LimitError`` (a ValueError)."""
    return loads_bounded(text, _loads_finite)


def sha256_file(path: str | os.PathLike[str]) -> str:
    with open(path, "rb") as handle:
        return sha256_stream(handle)


def sha256_stream(handle: IO[bytes]) -> str:
    """The sha256 of what ``handle`` holds from where it stands to its end."""
    digest = hashlib.sha256()
    for block in iter(lambda: handle.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


_FILE_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
#: How :func:`open_world_file` opens: read, read and write (cutting a torn line), append (created if missing).
_OPEN_FLAGS = {"rb": os.O_RDONLY, "r+b": os.O_RDWR, "ab": os.O_WRONLY | os.O_APPEND | os.O_CREAT}


def open_world_file(path: str | os.PathLike[str], mode: str = "rb", owner: str = "a world") -> IO[bytes]:
    """One of a world's files, opened only when it is a regular file (``mode``: "rb", "r+b" or "ab").

    A symbolic link is refused (``O_NOFOLLOW``), and so is a FIFO, a device, a socket or a folder:
    the open does not block (``O_NONBLOCK``, so a FIFO without a writer cannot hang the loader)
    and the kind is read with ``fstat`` from the open descriptor, which is the one returned, so the
    file checked is the file read. The error names the file: ``world.json is a symbolic link;
    a world's files must be regular files``. ``owner`` says whose files they are ("a dataset").
    """
    path = Path(path)
    rule = f"{owner}'s files must be regular files"
    try:
        fd = os.open(path, _OPEN_FLAGS[mode] | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP and path.is_symlink():  # ELOOP also means a loop in the folders above
            raise WorldFormatError(path.parent, f"{path.name} is a symbolic link; {rule}") from None
        raise
    try:
        kind = os.fstat(fd).st_mode
        if not stat.S_ISREG(kind):
            what = next((name for test, name in _FILE_KINDS if test(kind)), "not a regular file")
            raise WorldFormatError(path.parent, f"{path.name} is {what}; {rule}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode)
    except BaseException:
        os.close(fd)
        raise


def is_present(path: Path) -> bool:
    """Whether a world's file is there, whatever its kind (a dangling symbolic link included:
    opening it names it)."""
    return os.path.lexists(path)


def is_finished(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds a finished world: its world.json records the node file's sha256
    (written when its run ended; a run writing it, or killed, left none). False where there is
    no readable world.json."""
    try:
        meta = json.loads((Path(folder) / WORLD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and bool(meta.get("sha256"))


def node_file(folder: str | os.PathLike[str]) -> Path:
    """The node file a world folder stores: ``nodes.jsonl`` or ``nodes.jsonl.gz`` (not both)."""
    folder = Path(folder)
    present = [folder / name for name in NODE_FILES if is_present(folder / name)]
    if not present:
        raise WorldFormatError(
            folder / NODES_FILE, f"missing (a world folder holds world.json and {NODES_FILE} or {NODES_GZ_FILE})"
        )
    if len(present) > 1:
        raise WorldFormatError(
            folder,
            f"holds both {NODES_FILE} and {NODES_GZ_FILE}: keep one (an interrupted compress_world "
            "is finished by running it again)",
        )
    return present[0]


def parse_node_lines(path: Path, raw: bytes) -> list[dict[str, Any]]:
    """The node records of node-file text held in memory (see :func:`read_node_lines`)."""
    return read_node_lines(path, io.BytesIO(raw))


def read_node_lines(path: Path, stream: Readable) -> list[dict[str, Any]]:
    """Parse node lines from a binary stream (decompressed already), a line at a time, within
    the limits of :mod:`dream_gym.infrastructure.limits`; raise :class:`WorldFormatError` naming file and line."""
    records: list[dict[str, Any]] = []
    first_blank: int | None = None  # blank lines before the root: an error unless the file is all blank
    torn_at: int | None = None
    try:
        for number, line, ended in bounded_lines(stream, max_line=max_line_bytes(), max_total=max_decompressed_bytes()):
            if not line.strip():
                if records:
                    raise WorldFormatError(path, "blank line (every line must hold one node)", number)
                first_blank = first_blank or number
                continue
            if first_blank is not None:
                raise WorldFormatError(path, "blank line (every line must hold one node)", first_blank)
            records.append(_parse_node_line(path, number, line, ended))
            torn_at = None if ended else number
            del line  # a long line is not kept while the next one is read
    except LimitError as exc:
        raise WorldFormatError(path, exc.problem, exc.line) from None
    if not records:
        raise WorldFormatError(path, "file is empty: a world needs at least its root line")
    if torn_at is not None:
        raise WorldFormatError(path, _torn_problem(path, valid_json=True), torn_at)
    return records


def _is_compressed(path: Path) -> bool:
    return path.name.endswith(".gz")


def _torn_problem(path: Path, *, valid_json: bool) -> str:
    """What a last line without its newline means: in a plain node file, an interrupted writer
    (WorldWriter.open cuts the line); a compressed one is written whole, so it is damaged."""
    if _is_compressed(path):
        return ("truncated last line (no newline" + (")" if valid_json else " and not valid JSON)")
                + ": a compressed world is written whole, so this file is damaged or was not made by dream_gym")
    if not valid_json:
        return ("truncated last line (no newline and not valid JSON): the writer was probably interrupted; "
                "remove the line, or continue the run with --resume (in Python WorldWriter.open), which cuts it")
    return ("truncated last line (no trailing newline): the writer was probably interrupted; "
            "continue the run with --resume (in Python WorldWriter.open), which cuts it, or end the line with a newline")


def _parse_node_line(path: Path, number: int, line: bytes, ended: bool) -> dict[str, Any]:
    try:
        record = loads_strict(line.decode("utf-8"))
    except LimitError as exc:
        raise WorldFormatError(path, exc.problem, number) from None
    except (ValueError, UnicodeDecodeError) as exc:
        if not ended:
            raise WorldFormatError(path, _torn_problem(path, valid_json=False), number) from None
        raise WorldFormatError(path, f"bad JSON: {exc}", number) from None
    if not isinstance(record, dict):
        raise WorldFormatError(path, f"must be a JSON object, got {type(record).__name__}", number)
    return record


def _gzip_problem(exc: BaseException) -> str:
    return f"not a valid gzip file ({exc}); the file is truncated or corrupt"


@contextlib.contextmanager
def open_node_text(path: Path, stored: IO[bytes] | None = None) -> Iterator[IO[bytes]]:
    """A binary stream of a node file's lines (inflated on the fly for ``.gz``), read from
    ``stored`` when given (the file opened already; closed with the stream), else from the file
    opened by :func:`open_world_file`."""
    with stored if stored is not None else open_world_file(path) as raw:
        if path.name != NODES_GZ_FILE:
            yield raw
        else:
            with gzip.GzipFile(fileobj=raw, mode="rb") as inflated:
                yield cast(IO[bytes], inflated)


def read_node_file(path: Path, stored: IO[bytes] | None = None) -> list[dict[str, Any]]:
    """The node records of a stored node file (``stored``: the file opened already), streamed
    within the limits (see the module docstring)."""
    with open_node_text(path, stored) as stream:
        try:
            return read_node_lines(path, stream)
        except (OSError, EOFError, zlib.error) as exc:
            if not _is_compressed(path):
                raise
            raise WorldFormatError(path, _gzip_problem(exc)) from None


def decompressed(path: Path, stored: bytes) -> bytes:
    """The node lines of a stored node file (gzip-decompressed for ``.gz``), at most
    ``limits.max_decompressed_bytes()`` of them: a larger inflation stops there with an error."""
    if path.name != NODES_GZ_FILE:
        return stored
    limit = max_decompressed_bytes()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(stored)) as stream:
            data = read_bounded(stream, limit)
    except (OSError, EOFError, zlib.error) as exc:
        raise WorldFormatError(path, _gzip_problem(exc)) from None
    if data is None:
        raise WorldFormatError(path, decompressed_limit_problem(limit))
    return data


def count_node_lines(path: Path) -> int:
    """Lines of a stored node file, counted as a stream (nothing is held in memory)."""
    lines, total, limit = 0, 0, max_decompressed_bytes()
    with open_node_text(path) as stream:
        try:
            while block := stream.read(1 << 20):
                total += len(block)
                if total > limit:
                    raise WorldFormatError(path, decompressed_limit_problem(limit))
                lines += block.count(b"\n")
        except (OSError, EOFError, zlib.error) as exc:
            if not _is_compressed(path):
                raise
            raise WorldFormatError(path, _gzip_problem(exc)) from None
    return lines


def read_json_document(path: Path, owner: str = "a world") -> Any:
    """A whole JSON file (world.json, dataset.json) of at most ``limits.max_line_bytes()``,
    strict and nested within the limit; :class:`WorldFormatError` names the file. It must be a
    regular file (:func:`open_world_file`; ``owner`` names whose file it is in that error)."""
    limit = max_line_bytes()
    with open_world_file(path, owner=owner) as handle:
        raw = read_bounded(handle, limit)
    if raw is None:
        raise WorldFormatError(path, line_limit_problem(limit, "file"))
    try:
        return loads_strict(raw.decode("utf-8"))
    except LimitError as exc:
        raise WorldFormatError(path, exc.problem) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise WorldFormatError(path, f"bad JSON: {exc}") from None


def check_sha256(meta: Mapping[str, Any], path: Path, handle: IO[bytes], consequence: str = "") -> None:
    """Refuse a stored node file (``handle``, read from its start and left there) whose sha256 is not
    the one world.json gives, saying how it differs; nothing is checked when world.json gives none."""
    if meta.get("sha256"):
        actual = sha256_stream(handle)
        handle.seek(0)
        if actual != meta["sha256"]:
            why = _how_it_differs(path, handle)
            handle.seek(0)
            raise WorldFormatError(
                path, f"checksum mismatch: {why}; world.json says sha256 {meta['sha256']}, the file has {actual}{consequence}"
            )


def _how_it_differs(path: Path, handle: IO[bytes]) -> str:
    """Why a node file's checksum may not match, from the file alone: cut short (a torn last
    line, or a compressed stream without its end), or otherwise changed since it was recorded."""
    cut_short = "it was cut short (an interrupted copy or download?): fetch or copy the world again"
    if path.name.endswith(".gz"):
        import gzip
        import zlib

        try:
            with gzip.GzipFile(fileobj=handle) as inflated:  # no further than a node file may inflate
                budget = max_decompressed_bytes()
                while budget > 0 and (chunk := inflated.read(1 << 20)):
                    budget -= len(chunk)
        except EOFError:
            return f"the compressed file ends before its end marker: {cut_short}"
        except (OSError, zlib.error):
            return "the file is not a whole gzip stream"
    else:
        handle.seek(0, os.SEEK_END)
        if handle.tell() > 0:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                return f"its last line ends mid-record: {cut_short}"
    return "the file was changed after world.json was written (it is not the file the world was recorded with)"
