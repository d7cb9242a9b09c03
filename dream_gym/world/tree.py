"""The recorded world: format ``dream-gym-world/1``, the :class:`World` it loads into and its loader.

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

How the files are read (regular files only, strict JSON, node lines streamed within the bounds of
:mod:`dream_gym.infrastructure.limits`, the checksum) is :mod:`dream_gym.world.files`'s; its names
are still found here. The format's own bounds: ``workers`` is at most :data:`MAX_WORKERS` and a
node's ``round`` at most :data:`MAX_ROUND`. Each error names the file, the line and the problem.

In memory a :class:`World` holds numpy arrays (parent index, oriented score, children in
creation order as CSR) so that replay is pointer work. ``direction: minimize`` is handled here:
scores are negated at load time so that everything downstream reads "higher is better".

Writing worlds (:class:`~dream_gym.world.writer.WorldWriter`, :func:`~dream_gym.world.writer.new_meta`,
compression) lives in :mod:`dream_gym.world.writer`. This module imports nothing else of dream_gym
but :mod:`dream_gym.world.files` and :mod:`dream_gym.world.reveal_rules`.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dream_gym.world.files import (
    NODE_FILES,
    NODES_FILE,
    NODES_GZ_FILE,
    WORLD_FILE,
    WorldFormatError,
    check_sha256,
    count_node_lines,
    decompressed,
    is_present,
    loads_strict,
    node_file,
    open_node_text,
    open_world_file,
    parse_node_lines,
    read_json_document,
    read_node_file,
    read_node_lines,
    sha256_file,
    sha256_stream,
)
from dream_gym.world.reveal_rules import REVEAL_RULES

FORMAT = "dream-gym-world/1"
FORMAT_NAME, FORMAT_MAJOR = FORMAT.split("/")
DIRECTIONS = ("maximize", "minimize")
FRONTIER_RULES = tuple(REVEAL_RULES)  # the frontier rules a world may declare
#: The most workers a world may declare: W sizes every batch, action space and mask downstream,
#: so an absurd W (10**12) would ask for terabytes; the real runs here use 1 to 8.
MAX_WORKERS = 4096
#: The highest round number a node may carry (the real runs here reach 993 rounds).
MAX_ROUND = 1_000_000


def is_number(value: Any) -> bool:
    """A JSON number as a record holds one: an int or a float, not a bool (True is 1)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_score(value: Any) -> str | None:
    """Return the problem with a node's ``score`` value, or None when it is acceptable."""
    if value is None:
        return None
    if not is_number(value):
        return f"score must be a number or null, got {type(value).__name__} {_short(value)}"
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int too large for a float
        finite = False
    if not finite:
        return f"score must be finite, got {_short(value)}"
    return None


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
                src, "the root has no score (its initial program failed its evaluation) and world.json "
                "gives no 'baseline_score': a replay has no scored program to start from", 1
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


def read_meta(meta_path: Path) -> dict[str, Any]:
    if not is_present(meta_path):
        raise WorldFormatError(meta_path, "missing (a world folder holds world.json and nodes.jsonl; a discovery "
                                          "run's output becomes one with: dream-gym worlds import "
                                          f"{meta_path.parent} --out WORLD_FOLDER)")
    return validate_meta(meta_path, read_json_document(meta_path))


def load_world(folder: str | os.PathLike[str]) -> World:
    """Load and validate a world folder. Raises :class:`WorldFormatError` naming file and line."""
    if not isinstance(folder, (str, os.PathLike)):  # a World, a None: pathlib's TypeError names neither
        raise TypeError(f"load_world takes a world folder's path, got {type(folder).__name__} "
                        "(dream_gym.resolve_world takes a World, a path, a shipped name or a dataset reference)")
    folder = Path(folder)
    if not folder.is_dir():
        what = "a file" if folder.exists() else "no such directory"
        raise WorldFormatError(folder, f"is not a world folder ({what})")
    meta = read_meta(folder / WORLD_FILE)
    nodes_path = node_file(folder)
    with open_world_file(nodes_path) as stored:  # one descriptor: the bytes checked are the bytes parsed
        check_sha256(meta, nodes_path, stored)
        records = read_node_file(nodes_path, stored)
    return build_world(meta, records, source=nodes_path, path=folder)


# How a world's files are read has a module of its own (dream_gym.world.files); the names it took
# from here are still found here, where the docs and earlier code import them from.
__all__ = [
    "DIRECTIONS", "FORMAT", "FORMAT_MAJOR", "FORMAT_NAME", "FRONTIER_RULES", "MAX_ROUND", "MAX_WORKERS",
    "NODE_FILES", "NODES_FILE", "NODES_GZ_FILE", "WORLD_FILE", "World", "WorldFormatError", "build_world",
    "check_format", "check_node", "check_score", "count_node_lines", "decompressed", "is_number", "is_present",
    "load_world", "loads_strict", "node_file", "open_node_text", "open_world_file", "parse_node_lines",
    "prefix_world", "read_json_document", "read_meta", "read_node_file", "read_node_lines", "sha256_file",
    "sha256_stream", "validate_meta",
]
