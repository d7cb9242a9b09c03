"""Writing worlds: fresh ``world.json`` dicts, the durable append-only :class:`WorldWriter`,
:func:`write_world`, and compressing a finished world's node file (and back).

Every write is atomic or append-and-fsync, so a world folder interrupted at any point (``kill -9``
while growing, compressing or decompressing) is resumed or finished by running the same call again;
the format and its validation are :mod:`dream_gym.world.tree`'s. Every node and world.json are
redacted before they are written (:mod:`dream_gym.infrastructure.redact`): a secret that leaked into a
candidate's error, code or prompt never reaches a world.
"""

from __future__ import annotations

import datetime as _dt
import gzip
import hashlib
import json
import os
import shlex
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dream_gym.infrastructure.durable import fsync_dir, write_atomic, write_json_atomic
from dream_gym.infrastructure.locks import FOLDER_LOCK_NAME, WriterLock, folder_lock
from dream_gym.infrastructure.printable import a_few
from dream_gym.infrastructure.redact import redact_value
from dream_gym.world.files import (
    NODE_FILES,
    NODES_FILE,
    NODES_GZ_FILE,
    WORLD_FILE,
    WorldFormatError,
    decompressed,
    is_present,
    node_file,
    open_world_file,
    parse_node_lines,
    sha256_file,
)
from dream_gym.world.tree import FORMAT, build_world, check_node, load_world, read_meta, validate_meta

#: The hidden folder inside a world's folder where :func:`write_world` writes the world before
#: moving it up; one left by a killed write is removed by the next.
STAGING_NAME = ".writing"


def _read_world_file(path: Path) -> bytes:
    """A world file's bytes, refused unless it is a regular file (:func:`~dream_gym.world.files.open_world_file`)."""
    with open_world_file(path) as handle:
        return handle.read()


def _finish_interrupted(folder: Path, meta: Mapping[str, Any]) -> bytes:
    """Both node files present (a compress or decompress was interrupted): check they hold the
    same nodes and that world.json's sha256 is one of theirs; return the node lines."""
    plain, packed = folder / NODES_FILE, folder / NODES_GZ_FILE
    data, stored = _read_world_file(plain), _read_world_file(packed)
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
    interrupted run. The gzip bytes are reproducible (no timestamp, no file name). It holds the
    folder's lock while it works: a world being grown is refused (LockedError naming the grower).
    """
    return _locked(Path(folder), _compress_world)


def _locked(folder: Path, change: Callable[[Path], Path]) -> Path:
    """``change(folder)`` under the folder's lock (a missing folder: ``change`` names what is missing)."""
    if not folder.is_dir():
        return change(folder)
    with folder_lock(folder):
        return change(folder)


def _compress_world(folder: Path) -> Path:
    plain, packed = folder / NODES_FILE, folder / NODES_GZ_FILE
    meta = read_meta(folder / WORLD_FILE)
    if packed.is_file() and plain.is_file():
        _finish_interrupted(folder, meta)
    elif packed.is_file():
        load_world(folder)
        return packed
    else:
        if plain.is_file() and not meta.get("sha256"):
            raise WorldFormatError(plain, "the world is not finished (no sha256 in world.json); finish it first")
        load_world(folder)
        write_atomic(packed, gzip.compress(_read_world_file(plain), compresslevel=9, mtime=0))
    meta["sha256"] = sha256_file(packed)
    write_world_json(folder / WORLD_FILE, meta)
    plain.unlink()
    return packed


def decompress_world(folder: str | os.PathLike[str]) -> Path:
    """The inverse of :func:`compress_world` (e.g. to resume growing a world); return the path."""
    return _locked(Path(folder), _decompress_world)


def _decompress_world(folder: Path) -> Path:
    plain, packed = folder / NODES_FILE, folder / NODES_GZ_FILE
    meta = read_meta(folder / WORLD_FILE)
    if packed.is_file() and plain.is_file():
        data = _finish_interrupted(folder, meta)
    elif packed.is_file():
        load_world(folder)
        data = decompressed(packed, _read_world_file(packed))
        write_atomic(plain, data)
    else:
        node_file(folder)  # names what is missing
        return plain
    if meta.get("sha256"):
        meta["sha256"] = hashlib.sha256(data).hexdigest()
        write_world_json(folder / WORLD_FILE, meta)
    packed.unlink()
    return plain


def write_world_json(path: Path, meta: Mapping[str, Any]) -> None:
    """world.json, key order kept (it is read by people too), written atomically."""
    write_json_atomic(path, dict(meta))


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


def check_empty_folder(folder: str | os.PathLike[str]) -> Path:
    """``folder`` as a Path when it is absent or empty (its lock file, and what a killed
    :func:`write_world` left, aside): a new run or import writes its world there. A folder holding
    anything else is a FileExistsError naming a few of its entries, before anything is written:
    the world's files would land among files of something else (and a later --resume would find
    them)."""
    folder = Path(folder)
    if shown := _others_in(folder, {FOLDER_LOCK_NAME, STAGING_NAME}):
        raise FileExistsError(f"{folder}: output folder exists and is not empty (it holds {shown}); "
                              "give a new or empty folder")
    return folder


def check_resumable_folder(folder: str | os.PathLike[str], leftovers: Iterable[str] = ()) -> Path:
    """``folder`` as a Path when a ``--resume`` may start its run there though it holds no world:
    it holds nothing but what a run killed before its world was made leaves (its lock, atomic-write
    temporaries, and ``leftovers``, such as a deploy's task files). Anything else is a
    FileExistsError: the run would start among another command's files."""
    folder = Path(folder)
    if shown := _others_in(folder, {FOLDER_LOCK_NAME, STAGING_NAME, *leftovers}, temporaries=True):
        raise FileExistsError(f"--resume: {folder} holds no world to continue (no {NODES_FILE}), but other files "
                              f"({shown}): give the folder of the run to continue")
    return folder


def _others_in(folder: Path, aside: set[str], *, temporaries: bool = False) -> str:
    """A few of the entries of ``folder`` that are not ``aside`` (nor, with ``temporaries``, an
    atomic write's ``.*.tmp``), as a phrase; empty when there are none or no folder."""
    if not folder.is_dir():
        return ""
    return a_few(sorted(entry.name for entry in folder.iterdir() if entry.name not in aside
                        and not (temporaries and entry.name.startswith(".") and entry.name.endswith(".tmp"))))


def check_resumed_settings(folder: str | os.PathLike[str], meta: Mapping[str, Any], given: Mapping[str, Any]) -> None:
    """Refuse to continue a run with other settings than its world.json records (``given``: the
    run's W, policy, seed, beta and the like, by their world.json keys): world.json would describe
    another run than the one its later nodes come from, and replaying the recording policy (the
    fidelity study does) would replay the wrong one. A key the world does not record is not compared."""
    differences = [f"{key} {meta[key]!r}, not {value!r}" for key, value in given.items()
                   if key in meta and meta[key] != value]
    if differences:
        again = "run the first command again"
        if isinstance(command := meta.get("command"), str) and command:  # the command as the world records it
            try:
                words = [word for word in shlex.split(command) if word != "--resume"]
                again = f"give its command again with --resume: {shlex.join([*words, '--resume'])}"
            except ValueError:  # a command no shell could split: said the general way
                pass
        raise ValueError(f"{folder} holds a run recorded with {'; '.join(differences)}: --resume continues a run "
                         f"with the settings it was started with ({again}; or start a new --out)")


class WorldWriter:
    """Appends nodes to a world folder one line at a time, each flushed and fsynced.

    A crash loses at most the line being written; :meth:`open` repairs such a torn last line
    (and reports it in ``repaired``) so that a run can resume. Nodes are validated before they
    are written, so a bad node never reaches the file. From :meth:`create` or :meth:`open` to
    :meth:`close` the writer holds the folder's lock (``<folder>/.lock``, dream_gym.infrastructure.locks): a
    second writer of the same world, in another process, gets LockedError naming this one::

        with WorldWriter.create("worlds/cp26", new_meta("cp26", "circle-packing-26")) as w:
            w.append({"id": "root", "parent": None, "score": 0.96, "code": "..."})
            w.append({"id": "n1", "parent": "root", "score": 1.91, "round": 1})
            w.finish()   # writes the sha256 of nodes.jsonl into world.json
    """

    def __init__(self, folder: Path, meta: dict[str, Any], records: list[dict[str, Any]],
                 lock: WriterLock | None = None):
        self.folder = folder
        self.meta = meta
        self.repaired: str | None = None
        self._index_of = {r["id"]: i for i, r in enumerate(records)}
        self._records = records
        self._lock = lock  # released by close()
        self._handle = open_world_file(folder / NODES_FILE, "ab")  # never appends through a symbolic link

    @classmethod
    def create(cls, folder: str | os.PathLike[str], meta: Mapping[str, Any]) -> WorldWriter:
        """Start a new world; refuses a folder that already holds one."""
        folder = Path(folder)
        meta = validate_meta(folder / WORLD_FILE, redact_value(dict(meta)))
        meta.pop("sha256", None)
        lock = folder_lock(folder).acquire()  # before looking, so two creators cannot both see no world
        try:
            if any(is_present(folder / name) for name in (*NODE_FILES, WORLD_FILE)):
                raise FileExistsError(f"{folder} already holds a world; write the new one to another folder")
            write_world_json(folder / WORLD_FILE, meta)
            (folder / NODES_FILE).touch()
            return cls(folder, meta, [], lock)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def open(cls, folder: str | os.PathLike[str]) -> WorldWriter:
        """Reopen a world to append more nodes, cutting a torn last line if a crash left one."""
        folder = Path(folder)
        meta_path = folder / WORLD_FILE
        if not is_present(meta_path):
            raise WorldFormatError(meta_path, "missing: nothing to resume")
        lock = folder_lock(folder).acquire()  # before the torn-line repair: another writer may be mid-line
        try:
            return cls._reopen(folder, lock)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def _reopen(cls, folder: Path, lock: WriterLock) -> WorldWriter:
        meta_path, nodes_path = folder / WORLD_FILE, folder / NODES_FILE
        meta = read_meta(meta_path)  # bounded, strict, a regular file
        for leftover in folder.glob(f".{WORLD_FILE}.*.tmp"):  # world.json's next copy, cut short by a kill
            leftover.unlink(missing_ok=True)  # (the lock is ours: no writer is making one now)
        if is_present(folder / NODES_GZ_FILE):
            raise WorldFormatError(
                folder / NODES_GZ_FILE,
                "a compressed world is finished and cannot be resumed as is; "
                "dream_gym.world.writer.decompress_world(folder) turns it back into nodes.jsonl",
            )
        raw = _read_world_file(nodes_path) if is_present(nodes_path) else b""
        if meta.get("sha256") and hashlib.sha256(raw).hexdigest() != meta["sha256"]:
            # a finished world changed behind our back: resuming would re-checksum the damage
            raise WorldFormatError(
                nodes_path, f"checksum mismatch: world.json says sha256 {meta['sha256']}; refusing to resume"
            )
        repaired = None
        if raw and not raw.endswith(b"\n"):
            cut = raw.rfind(b"\n") + 1
            repaired = f"cut a torn last line of {len(raw) - cut} bytes (an interrupted write)"
            with open_world_file(nodes_path, "r+b") as handle:
                handle.truncate(cut)
                handle.flush()
                os.fsync(handle.fileno())
            raw = raw[:cut]
        records = parse_node_lines(nodes_path, raw) if raw.strip() else []
        if records:
            build_world(meta, records, source=nodes_path)  # validates every line
        # a finished world keeps its sha256 until the first change (_unfinish): a resume refused
        # after opening (another policy, W or task) leaves the world as it was
        writer = cls(folder, meta, records, lock)
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
        """Redact and validate one node and write it durably (flush + fsync) before returning."""
        record = dict(redact_value(record))  # the kept record is the written one
        path = self.folder / NODES_FILE
        check_node(path, len(self._records) + 1, record, self._index_of)
        self._unfinish()
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

    def _unfinish(self) -> None:
        """Before the first change of a reopened finished world: world.json drops its sha256
        (nodes.jsonl is about to change; finish records the new one)."""
        if self.meta.pop("sha256", None) is not None:
            write_world_json(self.folder / WORLD_FILE, self.meta)

    def update_meta(self, **changes: Any) -> None:
        self.meta.update(redact_value(changes))
        self.meta = validate_meta(self.folder / WORLD_FILE, self.meta)
        self.meta.pop("sha256", None)
        write_world_json(self.folder / WORLD_FILE, self.meta)

    def finish(self, compress: bool = False) -> str:
        """Mark the world finished: record the sha256 of nodes.jsonl in world.json.

        With ``compress``, store the nodes as ``nodes.jsonl.gz`` (see :func:`compress_world`);
        the writer is closed and the sha256 returned is the compressed file's.
        """
        self._handle.flush()
        os.fsync(self._handle.fileno())
        digest = sha256_file(self.folder / NODES_FILE)
        self.meta["sha256"] = digest
        write_world_json(self.folder / WORLD_FILE, self.meta)
        if compress:
            self.close()
            digest = sha256_file(compress_world(self.folder))
            self.meta["sha256"] = digest
        return digest

    def close(self) -> None:
        """Close the node file and release the folder's lock (a second close does nothing)."""
        if not self._handle.closed:
            self._handle.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

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
    """Write a whole world at once (validated, finished with its checksum; gzip with ``compress``).

    The world appears whole or not at all: it is written into ``folder/.writing`` and moved up
    when finished, its node file first and world.json last, so an import or a pool stopped
    part-way (Ctrl-C, ``kill -9``) leaves no world that loads as if it were the whole run.
    """
    folder = Path(folder)
    with folder_lock(folder):  # also makes the folder
        if any(is_present(folder / name) for name in (*NODE_FILES, WORLD_FILE)):
            raise FileExistsError(f"{folder} already holds a world; write the new one to another folder")
        staging = folder / STAGING_NAME
        shutil.rmtree(staging, ignore_errors=True)  # left by a write that was killed
        try:
            try:
                with WorldWriter.create(staging, meta) as writer:
                    writer.extend(records)
                    writer.finish(compress=compress)
            except WorldFormatError as exc:
                if not exc.path.startswith(str(staging)):
                    raise
                # the staging file is gone when the error is read: name the record, not the file
                raise WorldFormatError(folder, f"node record {exc.line} of the world being written: {exc.problem}"
                                       if exc.line else exc.problem) from None
            for name in (*NODE_FILES, WORLD_FILE):  # world.json last: then the world is there
                if is_present(staging / name):
                    os.replace(staging / name, folder / name)
            fsync_dir(folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return folder
