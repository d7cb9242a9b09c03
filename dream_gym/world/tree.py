"""The recorded world: interchange format ``dream-gym-world/1`` and its loader.

A world is a folder with two files (the node file stored plain or gzip-compressed):

``world.json``
    ``format`` ("dream-gym-world/1"), ``id``, ``task`` ({"name", "description"}),
    ``direction`` ("maximize" | "minimize"), ``baseline_score`` (optional; else the root's
    score), ``workers`` (W used online), ``frontier`` ("leaves" default | "any"), and optional
    ``source``/``provenance``, ``licence``, ``created``, ``policy``, ``agent`` and ``sha256``
    (of the stored node file, compressed or not; verified whenever present). Unknown keys are
    kept in ``World.meta``.

``nodes.jsonl`` or ``nodes.jsonl.gz``
    One JSON object a line, in creation order, root first. Required keys: ``id`` (string),
    ``parent`` (the id of an earlier line; null only for the root) and ``score`` (a finite
    number, or null for an attempt without a valid score). Optional keys (``code``,
    ``diagnostics``, ``error``, ``fail_class``, ``round``, ``worker``, ``duration_s``,
    ``cost``, ``metrics``, ``tags``) and unknown keys are kept. A finished world may be stored
    as ``nodes.jsonl.gz`` instead (:func:`compress_world`, ``WorldWriter.finish(compress=True)``;
    line numbers in errors count lines of the decompressed text); a folder holding both files
    is an error, since either could be the stale one.

Every file of a world is a regular file: a ``world.json``, ``nodes.jsonl`` or ``nodes.jsonl.gz``
that is a symbolic link (to a valid file elsewhere, to ``/dev/zero``, to a secret), a FIFO, a
device or a folder is refused with an error naming it (:func:`open_world_file`: the file is opened
with ``O_NOFOLLOW``, without blocking, and checked with ``fstat`` on the open descriptor, which is
then the one read). The world folder itself may be a symbolic link: it is the path the caller
names.

Bounds (:mod:`dream_gym.infrastructure.limits`): node files are read as a stream, a line at a time; the node
lines of a world may hold at most 256 MB (``DREAM_GYM_MAX_DECOMPRESSED_MB``, counted after
decompression), a line (and world.json) at most 16 MB (``DREAM_GYM_MAX_LINE_MB``), a JSON value
nests at most 100 deep; ``workers`` is at most :data:`MAX_WORKERS` and a node's ``round`` at most
:data:`MAX_ROUND`. Each error names the file, the line, the limit and how to raise it.

In memory a :class:`World` holds numpy arrays (parent index, oriented score, children in
creation order as CSR) so that replay is pointer work. ``direction: minimize`` is handled here:
scores are negated at load time so that everything downstream reads "higher is better".

Writing worlds (:class:`~dream_gym.world.writer.WorldWriter`, :func:`~dream_gym.world.writer.new_meta`,
compression) lives in :mod:`dream_gym.world.writer`. This module imports nothing else of dream_gym
but :mod:`dream_gym.infrastructure.limits`.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import gzip
import hashlib
import io
import json
import math
import os
import stat
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

import numpy as np

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
from dream_gym.world.reveal_rules import REVEAL_RULES

FORMAT = "dream-gym-world/1"
FORMAT_NAME, FORMAT_MAJOR = FORMAT.split("/")
WORLD_FILE = "world.json"
NODES_FILE = "nodes.jsonl"
NODES_GZ_FILE = "nodes.jsonl.gz"
NODE_FILES = (NODES_FILE, NODES_GZ_FILE)
DIRECTIONS = ("maximize", "minimize")
FRONTIER_RULES = tuple(REVEAL_RULES)  # the frontier rules a world may declare
#: The most workers a world may declare: W sizes every batch, action space and mask downstream,
#: so an absurd W (10**12) would ask for terabytes; the real runs here use 1 to 8.
MAX_WORKERS = 4096
#: The highest round number a node may carry (the real runs here reach 993 rounds).
MAX_ROUND = 1_000_000


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


def _reject_constant(name: str) -> float:
    # json accepts NaN/Infinity by default; the format does not.
    raise ValueError(f"non-finite number {name} is not allowed")


def _loads_finite(text: str | bytes) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def loads_strict(text: str | bytes) -> Any:
    """Strict JSON (no NaN/Infinity), nested at most ``limits.MAX_JSON_DEPTH`` deep; a deeper value
    raises ``limits.LimitError`` (a ValueError)."""
    return loads_bounded(text, _loads_finite)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_score(value: Any) -> str | None:
    """Return the problem with a node's ``score`` value, or None when it is acceptable."""
    if value is None:
        return None
    if not _is_number(value):
        return f"score must be a number or null, got {type(value).__name__} {_short(value)}"
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int too large for a float
        finite = False
    if not finite:
        return f"score must be finite, got {_short(value)}"
    return None


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


def check_format(path: str | os.PathLike[str], value: Any) -> None:
    """Accept ``dream-gym-world/1`` and later minor versions (``/1.x``); refuse other majors."""
    if not isinstance(value, str) or "/" not in value:
        raise WorldFormatError(path, f"'format' must be like {FORMAT!r}, got {_short(value)}")
    name, version = value.split("/", 1)
    major = version.split(".", 1)[0]
    if name != FORMAT_NAME:
        raise WorldFormatError(path, f"'format' {_short(value)} is not a dream-gym world format")
    if major != FORMAT_MAJOR:
        raise WorldFormatError(
            path,
            f"unknown major format version {_short(value)}; this dream_gym reads {FORMAT!r}",
        )


def validate_meta(path: str | os.PathLike[str], meta: Any) -> dict[str, Any]:
    """Check world.json's contents; return them with defaults filled in."""
    if not isinstance(meta, dict):
        raise WorldFormatError(path, f"must hold a JSON object, got {type(meta).__name__}")
    meta = dict(meta)
    if "format" not in meta:
        raise WorldFormatError(path, "missing required key 'format'")
    check_format(path, meta["format"])
    if not isinstance(meta.get("id"), str) or not meta["id"]:
        raise WorldFormatError(path, "'id' must be a non-empty string")
    task = meta.get("task")
    if not isinstance(task, dict) or not isinstance(task.get("name"), str):
        raise WorldFormatError(path, "'task' must be an object with a string 'name'")
    task.setdefault("description", "")
    meta.setdefault("direction", "maximize")
    if meta["direction"] not in DIRECTIONS:
        raise WorldFormatError(path, f"'direction' must be one of {DIRECTIONS}, got {_short(meta['direction'])}")
    meta.setdefault("frontier", "leaves")
    if meta["frontier"] not in FRONTIER_RULES:
        raise WorldFormatError(path, f"'frontier' must be one of {FRONTIER_RULES}, got {_short(meta['frontier'])}")
    workers = meta.get("workers", 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= MAX_WORKERS:
        raise WorldFormatError(path, f"'workers' must be an integer from 1 to {MAX_WORKERS}, got {_short(workers)}")
    meta["workers"] = workers
    baseline = meta.get("baseline_score")
    problem = check_score(baseline)
    if problem:
        raise WorldFormatError(path, f"'baseline_score': {problem}")
    checksum = meta.get("sha256")
    if checksum is not None and not (isinstance(checksum, str) and len(checksum) == 64):
        raise WorldFormatError(path, f"'sha256' must be 64 hex digits, got {_short(checksum)}")
    return meta


def _short(value: Any, limit: int = 80) -> str:
    """repr of a bad value, cut so that an error message stays one readable line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True, eq=False)
class World:
    """An immutable recorded discovery tree.

    Node ``i`` is the i-th line of nodes.jsonl (creation order); node 0 is the root.

    Attributes:
        meta: world.json with defaults filled in.
        ids: the recorded node ids, in creation order.
        parent: int32 array, parent index of each node (-1 for the root).
        score: float64 array of oriented scores (higher is better; NaN where unscored).
        children_start, children: CSR layout; the children of node i, in creation order, are
            ``children[children_start[i]:children_start[i + 1]]``.
        records: the parsed node lines (read-only by convention; replay hands out copies).
        baseline_score: oriented baseline (world.json's, else the root's score).
        best_score: the best oriented score recorded in the world.
    """

    meta: dict[str, Any]
    ids: tuple[str, ...]
    parent: np.ndarray
    score: np.ndarray
    children_start: np.ndarray
    children: np.ndarray
    records: tuple[dict[str, Any], ...] = field(repr=False)
    baseline_score: float
    best_score: float
    path: Path | None = None

    @property
    def id(self) -> str:
        return str(self.meta["id"])

    @property
    def size(self) -> int:
        return len(self.ids)

    @property
    def workers(self) -> int:
        return int(self.meta["workers"])

    @property
    def frontier_rule(self) -> str:
        return str(self.meta["frontier"])

    @property
    def direction(self) -> str:
        return str(self.meta["direction"])

    @property
    def task_name(self) -> str:
        return str(self.meta["task"]["name"])

    @property
    def task_description(self) -> str:
        return str(self.meta["task"].get("description", ""))

    @functools.cached_property
    def tree_lists(self) -> tuple[list[int], list[int], list[int]]:
        """(children_start, children, number of children) as Python lists: replay's hot path
        indexes them one element at a time, which lists do several times faster than arrays."""
        starts = self.children_start.tolist()
        counts = np.diff(self.children_start).tolist()
        return starts, self.children.tolist(), counts

    @functools.cached_property
    def score_list(self) -> list[float | None]:
        """Oriented scores as Python floats, None where unscored (replay's hot path)."""
        return [None if s != s else s for s in self.score.tolist()]

    def children_of(self, index: int) -> np.ndarray:
        return self.children[self.children_start[index] : self.children_start[index + 1]]

    def orient(self, raw: float | None) -> float | None:
        """Map a recorded score to the higher-is-better scale used everywhere downstream."""
        if raw is None:
            return None
        return -float(raw) if self.direction == "minimize" else float(raw)

    def __repr__(self) -> str:
        return f"World(id={self.id!r}, nodes={self.size}, task={self.task_name!r})"


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
                "remove the line or resume with WorldWriter.open")
    return ("truncated last line (no trailing newline): the writer was probably interrupted; "
            "resume with WorldWriter.open (which cuts it) or end the line with a newline")


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


def check_node(
    path: Path, number: int, record: dict[str, Any], index_of: dict[str, int]
) -> int:
    """Validate one node line against the nodes before it; return its parent index (-1: root)."""
    for key in ("id", "parent", "score"):
        if key not in record:
            raise WorldFormatError(path, f"missing required key {key!r}", number)
    node_id = record["id"]
    if not isinstance(node_id, str) or not node_id:
        raise WorldFormatError(path, f"'id' must be a non-empty string, got {_short(node_id)}", number)
    if node_id in index_of:
        raise WorldFormatError(
            path, f"duplicate id {_short(node_id)} (first on line {index_of[node_id] + 1})", number
        )
    problem = check_score(record["score"])
    if problem:
        raise WorldFormatError(path, f"node {_short(node_id)}: {problem}", number)
    _check_round(path, number, node_id, record.get("round"))
    parent_id = record["parent"]
    if parent_id is None:
        if index_of:
            raise WorldFormatError(
                path, f"second root {_short(node_id)}: only the first line may have parent null", number
            )
        return -1
    if not index_of:
        raise WorldFormatError(path, f"first line must be the root (parent null), got parent {_short(parent_id)}", number)
    if not isinstance(parent_id, str) or parent_id not in index_of:
        raise WorldFormatError(
            path, f"node {_short(node_id)}: parent {_short(parent_id)} is not defined on an earlier line", number
        )
    return index_of[parent_id]


def _check_round(path: Path, number: int, node_id: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_ROUND:
        raise WorldFormatError(
            path, f"node {_short(node_id)}: 'round' must be an integer from 0 to {MAX_ROUND}, got {_short(value)}", number
        )


def build_world(
    meta: Mapping[str, Any],
    records: list[dict[str, Any]],
    *,
    source: str | os.PathLike[str] = "<memory>",
    path: Path | None = None,
) -> World:
    """Validate node records (creation order, root first) and build the array form."""
    src = Path(source)
    if not records:
        raise WorldFormatError(src, "file is empty: a world needs at least its root line")
    index_of: dict[str, int] = {}
    parents = np.empty(len(records), dtype=np.int32)
    for i, record in enumerate(records):
        parents[i] = check_node(src, i + 1, record, index_of)
        index_of[record["id"]] = i

    negate = meta["direction"] == "minimize"
    scores = np.array(
        [np.nan if r["score"] is None else float(r["score"]) for r in records], dtype=np.float64
    )
    if negate:
        scores = -scores
    # Children in creation order: a stable sort of node indices by parent keeps file order.
    order = np.argsort(parents[1:], kind="stable").astype(np.int32) + 1
    counts = np.bincount(parents[1:], minlength=len(records)) if len(records) > 1 else np.zeros(1, np.int64)
    starts = np.zeros(len(records) + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])

    baseline_raw = meta.get("baseline_score")
    if baseline_raw is None:
        if records[0]["score"] is None:
            raise WorldFormatError(
                src, "the root has no score and world.json gives no 'baseline_score'", 1
            )
        baseline = float(scores[0])
    else:
        baseline = -float(baseline_raw) if negate else float(baseline_raw)
    valid = ~np.isnan(scores)
    best = float(np.max(scores[valid])) if valid.any() else baseline
    for array in (parents, scores, starts, order):
        array.setflags(write=False)
    return World(
        meta=dict(meta),
        ids=tuple(index_of),
        parent=parents,
        score=scores,
        children_start=starts,
        children=order,
        records=tuple(records),
        baseline_score=baseline,
        best_score=best,
        path=path,
    )


def prefix_world(world: World, attempts: int) -> World:
    """The world of the same run stopped after its first ``attempts`` attempts.

    Nodes are stored in creation order and every parent precedes its children, so the first
    ``attempts + 1`` lines are exactly what the run had recorded at that moment: a valid world,
    with its own best recorded score (q is renormalised to it). Its id is ``<id>@<attempts>``.
    Training pools use prefixes to cover run lengths the recorded worlds do not (a policy never
    sees a world's size, so it must do well on short runs and long ones alike).
    """
    if not 1 <= attempts < world.size - 1:
        raise ValueError(f"{world.id}: a prefix keeps 1 to {world.size - 2} attempts (the world has "
                         f"{world.size - 1}), got {attempts}")
    meta = {k: v for k, v in world.meta.items() if k != "sha256"}
    meta["id"] = f"{world.id}@{attempts}"
    meta["prefix_of"] = {"id": world.id, "attempts": attempts}
    return build_world(meta, [dict(r) for r in world.records[: attempts + 1]], source=f"<{meta['id']}>")


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


def read_meta(meta_path: Path) -> dict[str, Any]:
    if not is_present(meta_path):
        raise WorldFormatError(meta_path, "missing (a world folder holds world.json and nodes.jsonl)")
    return validate_meta(meta_path, read_json_document(meta_path))


def _check_sha256(meta: Mapping[str, Any], path: Path, handle: IO[bytes], consequence: str = "") -> None:
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


def load_world(folder: str | os.PathLike[str]) -> World:
    """Load and validate a world folder. Raises :class:`WorldFormatError` naming file and line."""
    folder = Path(folder)
    if not folder.is_dir():
        raise WorldFormatError(folder, "is not a world folder (no such directory)")
    meta = read_meta(folder / WORLD_FILE)
    nodes_path = node_file(folder)
    with open_world_file(nodes_path) as stored:  # one descriptor: the bytes checked are the bytes parsed
        _check_sha256(meta, nodes_path, stored)
        records = read_node_file(nodes_path, stored)
    return build_world(meta, records, source=nodes_path, path=folder)
