"""The recorded world: interchange format ``dream-gym-world/1``, its loader and its writer.

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

In memory a :class:`World` holds numpy arrays (parent index, oriented score, children in
creation order as CSR) so that replay is pointer work. ``direction: minimize`` is handled here:
scores are negated at load time so that everything downstream reads "higher is better".

This module imports nothing else of dream_gym.
"""

from __future__ import annotations

import datetime as _dt
import functools
import gzip
import hashlib
import json
import math
import os
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "dream-gym-world/1"
FORMAT_NAME, FORMAT_MAJOR = FORMAT.split("/")
WORLD_FILE = "world.json"
NODES_FILE = "nodes.jsonl"
NODES_GZ_FILE = "nodes.jsonl.gz"
NODE_FILES = (NODES_FILE, NODES_GZ_FILE)
DIRECTIONS = ("maximize", "minimize")
FRONTIER_RULES = ("leaves", "any")


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


def _loads_strict(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_score(value: Any) -> str | None:
    """Return the problem with a node's ``score`` value, or None when it is acceptable."""
    if value is None:
        return None
    if not _is_number(value):
        return f"score must be a number or null, got {type(value).__name__} {value!r}"
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int too large for a float
        finite = False
    if not finite:
        return f"score must be finite, got {value!r}"
    return None


def sha256_file(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_format(path: str | os.PathLike[str], value: Any) -> None:
    """Accept ``dream-gym-world/1`` and later minor versions (``/1.x``); refuse other majors."""
    if not isinstance(value, str) or "/" not in value:
        raise WorldFormatError(path, f"'format' must be like {FORMAT!r}, got {value!r}")
    name, version = value.split("/", 1)
    major = version.split(".", 1)[0]
    if name != FORMAT_NAME:
        raise WorldFormatError(path, f"'format' {value!r} is not a dream-gym world format")
    if major != FORMAT_MAJOR:
        raise WorldFormatError(
            path,
            f"unknown major format version {value!r}; this dream_gym reads {FORMAT!r}",
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
        raise WorldFormatError(path, f"'direction' must be one of {DIRECTIONS}, got {meta['direction']!r}")
    meta.setdefault("frontier", "leaves")
    if meta["frontier"] not in FRONTIER_RULES:
        raise WorldFormatError(path, f"'frontier' must be one of {FRONTIER_RULES}, got {meta['frontier']!r}")
    workers = meta.get("workers", 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise WorldFormatError(path, f"'workers' must be a positive integer, got {workers!r}")
    meta["workers"] = workers
    baseline = meta.get("baseline_score")
    problem = check_score(baseline)
    if problem:
        raise WorldFormatError(path, f"'baseline_score': {problem}")
    checksum = meta.get("sha256")
    if checksum is not None and not (isinstance(checksum, str) and len(checksum) == 64):
        raise WorldFormatError(path, f"'sha256' must be 64 hex digits, got {checksum!r}")
    return meta


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


def _parse_node_lines(path: Path, raw: bytes) -> list[dict[str, Any]]:
    if not raw.strip():
        raise WorldFormatError(path, "file is empty: a world needs at least its root line")
    lines = raw.split(b"\n")
    torn_tail = not raw.endswith(b"\n")
    if not torn_tail:
        lines.pop()  # the empty string after the final newline
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise WorldFormatError(path, "blank line (every line must hold one node)", number)
        try:
            record = _loads_strict(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            if torn_tail and number == len(lines):
                raise WorldFormatError(
                    path,
                    "truncated last line (no newline and not valid JSON): the writer was "
                    "probably interrupted; remove the line or resume with WorldWriter.open",
                    number,
                ) from None
            raise WorldFormatError(path, f"bad JSON: {exc}", number) from None
        if not isinstance(record, dict):
            raise WorldFormatError(path, f"must be a JSON object, got {type(record).__name__}", number)
        records.append(record)
    if torn_tail:
        # Every line the writer writes ends with a newline; WorldWriter.open would cut this one.
        raise WorldFormatError(
            path,
            "truncated last line (no trailing newline): the writer was probably interrupted; "
            "resume with WorldWriter.open (which cuts it) or end the line with a newline",
            len(lines),
        )
    return records


def _check_node(
    path: Path, number: int, record: dict[str, Any], index_of: dict[str, int]
) -> int:
    """Validate one node line against the nodes before it; return its parent index (-1: root)."""
    for key in ("id", "parent", "score"):
        if key not in record:
            raise WorldFormatError(path, f"missing required key {key!r}", number)
    node_id = record["id"]
    if not isinstance(node_id, str) or not node_id:
        raise WorldFormatError(path, f"'id' must be a non-empty string, got {node_id!r}", number)
    if node_id in index_of:
        raise WorldFormatError(
            path, f"duplicate id {node_id!r} (first on line {index_of[node_id] + 1})", number
        )
    problem = check_score(record["score"])
    if problem:
        raise WorldFormatError(path, f"node {node_id!r}: {problem}", number)
    parent_id = record["parent"]
    if parent_id is None:
        if index_of:
            raise WorldFormatError(
                path, f"second root {node_id!r}: only the first line may have parent null", number
            )
        return -1
    if not index_of:
        raise WorldFormatError(path, f"first line must be the root (parent null), got parent {parent_id!r}", number)
    if not isinstance(parent_id, str) or parent_id not in index_of:
        raise WorldFormatError(
            path, f"node {node_id!r}: parent {parent_id!r} is not defined on an earlier line", number
        )
    return index_of[parent_id]


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
        parents[i] = _check_node(src, i + 1, record, index_of)
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


def node_file(folder: str | os.PathLike[str]) -> Path:
    """The node file a world folder stores: ``nodes.jsonl`` or ``nodes.jsonl.gz`` (not both)."""
    folder = Path(folder)
    present = [folder / name for name in NODE_FILES if (folder / name).is_file()]
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


def decompressed(path: Path, stored: bytes) -> bytes:
    """The node lines of a stored node file (gzip-decompressed for ``.gz``)."""
    if path.name != NODES_GZ_FILE:
        return stored
    try:
        return gzip.decompress(stored)
    except (OSError, EOFError, zlib.error) as exc:
        raise WorldFormatError(path, f"not a valid gzip file ({exc}); the file is truncated or corrupt") from None


def _read_meta(meta_path: Path) -> dict[str, Any]:
    if not meta_path.is_file():
        raise WorldFormatError(meta_path, "missing (a world folder holds world.json and nodes.jsonl)")
    try:
        meta_raw = _loads_strict(meta_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise WorldFormatError(meta_path, f"bad JSON: {exc}") from None
    return validate_meta(meta_path, meta_raw)


def _check_sha256(meta: Mapping[str, Any], path: Path, stored: bytes, consequence: str = "") -> None:
    if meta.get("sha256"):
        actual = hashlib.sha256(stored).hexdigest()
        if actual != meta["sha256"]:
            raise WorldFormatError(
                path, f"checksum mismatch: world.json says sha256 {meta['sha256']}, the file has {actual}{consequence}"
            )


def load_world(folder: str | os.PathLike[str]) -> World:
    """Load and validate a world folder. Raises :class:`WorldFormatError` naming file and line."""
    folder = Path(folder)
    if not folder.is_dir():
        raise WorldFormatError(folder, "is not a world folder (no such directory)")
    meta = _read_meta(folder / WORLD_FILE)
    nodes_path = node_file(folder)
    stored = nodes_path.read_bytes()
    _check_sha256(meta, nodes_path, stored)
    records = _parse_node_lines(nodes_path, decompressed(nodes_path, stored))
    return build_world(meta, records, source=nodes_path, path=folder)


def _write_bytes_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _finish_interrupted(folder: Path, meta: Mapping[str, Any]) -> bytes:
    """Both node files present (a compress or decompress was interrupted): check they hold the
    same nodes and that world.json's sha256 is one of theirs; return the node lines."""
    plain, packed = folder / NODES_FILE, folder / NODES_GZ_FILE
    data, stored = plain.read_bytes(), packed.read_bytes()
    if decompressed(packed, stored) != data:
        raise WorldFormatError(folder, f"holds both {NODES_FILE} and {NODES_GZ_FILE} with different nodes")
    digests = {hashlib.sha256(data).hexdigest(), hashlib.sha256(stored).hexdigest()}
    if meta.get("sha256") and meta["sha256"] not in digests:
        raise WorldFormatError(folder / WORLD_FILE, "checksum mismatch: the sha256 matches neither node file")
    return data


def compress_world(folder: str | os.PathLike[str]) -> Path:
    """Store a finished world's nodes as ``nodes.jsonl.gz`` (checksum updated); return its path.

    The world is validated first. Each step is durable and ordered (gzip file written, then
    world.json's sha256, then nodes.jsonl removed), and running it again finishes an
    interrupted run. The gzip bytes are reproducible (no timestamp, no file name).
    """
    folder = Path(folder)
    plain, packed = folder / NODES_FILE, folder / NODES_GZ_FILE
    meta = _read_meta(folder / WORLD_FILE)
    if packed.is_file() and plain.is_file():
        _finish_interrupted(folder, meta)
    elif packed.is_file():
        load_world(folder)
        return packed
    else:
        if plain.is_file() and not meta.get("sha256"):
            raise WorldFormatError(plain, "the world is not finished (no sha256 in world.json); finish it first")
        load_world(folder)
        _write_bytes_atomic(packed, gzip.compress(plain.read_bytes(), compresslevel=9, mtime=0))
    meta["sha256"] = sha256_file(packed)
    _write_json_atomic(folder / WORLD_FILE, meta)
    plain.unlink()
    return packed


def decompress_world(folder: str | os.PathLike[str]) -> Path:
    """The inverse of :func:`compress_world` (e.g. to resume growing a world); return the path."""
    folder = Path(folder)
    plain, packed = folder / NODES_FILE, folder / NODES_GZ_FILE
    meta = _read_meta(folder / WORLD_FILE)
    if packed.is_file() and plain.is_file():
        data = _finish_interrupted(folder, meta)
    elif packed.is_file():
        load_world(folder)
        data = decompressed(packed, packed.read_bytes())
        _write_bytes_atomic(plain, data)
    else:
        node_file(folder)  # names what is missing
        return plain
    if meta.get("sha256"):
        meta["sha256"] = hashlib.sha256(data).hexdigest()
        _write_json_atomic(folder / WORLD_FILE, meta)
    packed.unlink()
    return plain


def new_meta(
    world_id: str,
    task_name: str,
    task_description: str = "",
    *,
    direction: str = "maximize",
    workers: int = 1,
    frontier: str = "leaves",
    baseline_score: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A fresh world.json dict (validated), stamped with today's creation date."""
    meta: dict[str, Any] = {
        "format": FORMAT,
        "id": world_id,
        "task": {"name": task_name, "description": task_description},
        "direction": direction,
        "workers": workers,
        "frontier": frontier,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    if baseline_score is not None:
        meta["baseline_score"] = baseline_score
    meta.update(extra)
    return validate_meta("<new world.json>", meta)


def _write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=False, allow_nan=False)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class WorldWriter:
    """Appends nodes to a world folder one line at a time, each flushed and fsynced.

    A crash loses at most the line being written; :meth:`open` repairs such a torn last line
    (and reports it in ``repaired``) so that a run can resume. Nodes are validated before they
    are written, so a bad node never reaches the file::

        with WorldWriter.create("worlds/cp26", new_meta("cp26", "circle-packing-26")) as w:
            w.append({"id": "root", "parent": None, "score": 0.96, "code": "..."})
            w.append({"id": "n1", "parent": "root", "score": 1.91, "round": 1})
            w.finish()   # writes the sha256 of nodes.jsonl into world.json
    """

    def __init__(self, folder: Path, meta: dict[str, Any], records: list[dict[str, Any]]):
        self.folder = folder
        self.meta = meta
        self.repaired: str | None = None
        self._index_of = {r["id"]: i for i, r in enumerate(records)}
        self._records = records
        self._handle = open(folder / NODES_FILE, "ab")

    @classmethod
    def create(cls, folder: str | os.PathLike[str], meta: Mapping[str, Any]) -> WorldWriter:
        """Start a new world; refuses a folder that already holds one."""
        folder = Path(folder)
        meta = validate_meta(folder / WORLD_FILE, dict(meta))
        meta.pop("sha256", None)
        if any((folder / name).exists() for name in (*NODE_FILES, WORLD_FILE)):
            raise FileExistsError(f"{folder} already holds a world; use WorldWriter.open to resume it")
        folder.mkdir(parents=True, exist_ok=True)
        _write_json_atomic(folder / WORLD_FILE, meta)
        (folder / NODES_FILE).touch()
        return cls(folder, meta, [])

    @classmethod
    def open(cls, folder: str | os.PathLike[str]) -> WorldWriter:
        """Reopen a world to append more nodes, cutting a torn last line if a crash left one."""
        folder = Path(folder)
        meta_path, nodes_path = folder / WORLD_FILE, folder / NODES_FILE
        if not meta_path.is_file():
            raise WorldFormatError(meta_path, "missing: nothing to resume")
        try:
            meta = validate_meta(meta_path, _loads_strict(meta_path.read_text(encoding="utf-8")))
        except ValueError as exc:
            if isinstance(exc, WorldFormatError):
                raise
            raise WorldFormatError(meta_path, f"bad JSON: {exc}") from None
        if (folder / NODES_GZ_FILE).exists():
            raise WorldFormatError(
                folder / NODES_GZ_FILE,
                "a compressed world is finished and cannot be resumed as is; "
                "dream_gym.world.decompress_world(folder) turns it back into nodes.jsonl",
            )
        raw = nodes_path.read_bytes() if nodes_path.exists() else b""
        if meta.get("sha256") and hashlib.sha256(raw).hexdigest() != meta["sha256"]:
            # a finished world changed behind our back: resuming would re-checksum the damage
            raise WorldFormatError(
                nodes_path, f"checksum mismatch: world.json says sha256 {meta['sha256']}; refusing to resume"
            )
        repaired = None
        if raw and not raw.endswith(b"\n"):
            cut = raw.rfind(b"\n") + 1
            repaired = f"cut a torn last line of {len(raw) - cut} bytes (an interrupted write)"
            with open(nodes_path, "r+b") as handle:
                handle.truncate(cut)
                handle.flush()
                os.fsync(handle.fileno())
            raw = raw[:cut]
        records = _parse_node_lines(nodes_path, raw) if raw.strip() else []
        if records:
            build_world(meta, records, source=nodes_path)  # validates every line
        if meta.pop("sha256", None) is not None:
            _write_json_atomic(meta_path, meta)  # the file is about to change
        writer = cls(folder, meta, records)
        writer.repaired = repaired
        return writer

    @property
    def records(self) -> list[dict[str, Any]]:
        """The nodes written so far (do not mutate)."""
        return self._records

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._index_of

    def append(self, record: Mapping[str, Any]) -> None:
        """Validate one node and write it durably (flush + fsync) before returning."""
        record = dict(record)
        path = self.folder / NODES_FILE
        _check_node(path, len(self._records) + 1, record, self._index_of)
        try:
            line = json.dumps(record, allow_nan=False, ensure_ascii=False, default=_json_default).encode("utf-8")
        except (TypeError, ValueError) as exc:  # NaN in another field, an unserialisable value
            raise WorldFormatError(
                path, f"node {record['id']!r} cannot be written as JSON: {exc}", len(self._records) + 1
            ) from None
        self._handle.write(line + b"\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._index_of[record["id"]] = len(self._records)
        self._records.append(record)

    def extend(self, records: Iterable[Mapping[str, Any]]) -> None:
        for record in records:
            self.append(record)

    def update_meta(self, **changes: Any) -> None:
        self.meta.update(changes)
        self.meta = validate_meta(self.folder / WORLD_FILE, self.meta)
        self.meta.pop("sha256", None)
        _write_json_atomic(self.folder / WORLD_FILE, self.meta)

    def finish(self, compress: bool = False) -> str:
        """Mark the world finished: record the sha256 of nodes.jsonl in world.json.

        With ``compress``, store the nodes as ``nodes.jsonl.gz`` (see :func:`compress_world`);
        the writer is closed and the sha256 returned is the compressed file's.
        """
        self._handle.flush()
        os.fsync(self._handle.fileno())
        digest = sha256_file(self.folder / NODES_FILE)
        self.meta["sha256"] = digest
        _write_json_atomic(self.folder / WORLD_FILE, self.meta)
        if compress:
            self.close()
            digest = sha256_file(compress_world(self.folder))
            self.meta["sha256"] = digest
        return digest

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.close()

    def __enter__(self) -> WorldWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"value of type {type(value).__name__} is not JSON serialisable")


def write_world(
    folder: str | os.PathLike[str],
    meta: Mapping[str, Any],
    records: Iterable[Mapping[str, Any]],
    *,
    compress: bool = False,
) -> Path:
    """Write a whole world at once (validated, finished with its checksum; gzip with ``compress``)."""
    with WorldWriter.create(folder, meta) as writer:
        writer.extend(records)
        writer.finish(compress=compress)
    return Path(folder)
