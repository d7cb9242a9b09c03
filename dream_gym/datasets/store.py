"""The local dataset store, ``dataset.json`` and the shipped dataset.

Layout (``DREAM_GYM_HOME`` overrides the default ``~/.dream_gym``)::

    $DREAM_GYM_HOME/datasets/<namespace>/<name>-vN/
        dataset.json
        <world>/world.json
        <world>/nodes.jsonl      (or nodes.jsonl.gz)
        README.md                (optional dataset card)

``dataset.json`` (format ``dream-gym-dataset/1``)::

    {"format": "dream-gym-dataset/1", "id": "ns/name-v0", "description": "...",
     "author": "...", "licence": "...", "world_format": "dream-gym-world/1",
     "created": "...", "worlds": [{"name": "w1", "task": "...", "nodes": 40}, ...],
     "split": {"train": ["w1", ...], "held_out": [...]},
     "files": {"w1/world.json": "<sha256>", "w1/nodes.jsonl": "<sha256>", ...}}

``files`` lists every file of the dataset except ``dataset.json`` with its sha256; downloads
and :func:`validate` check each one, and the ``nodes`` a world entry declares (a positive
integer) must be the world's size. dataset.json is read within the limits of
:mod:`dream_gym.infrastructure.limits` (at most 16 MB, ``DREAM_GYM_MAX_LINE_MB``; JSON nested at most 100
deep). The shipped datasets (``recorded_worlds/recorded-vN/`` of the repository or of the installed
package's data, or below the folder named by ``DREAM_GYM_SHIPPED``: :func:`dream_gym.world.shipped.shipped_root`;
:mod:`dream_gym.world.registry` finds them) are resolved like
stored ones, after the local store. Importing this module makes it the registry's lookup of
dataset references (:func:`dream_gym.world.registry.use_dataset_store`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from dream_gym.datasets.ids import (
    DatasetId,
    DatasetIdError,
    DatasetName,
    check_world_name,
    is_dataset_id,
    is_dataset_ref,
    parse_dataset_id,
    parse_dataset_ref,
    parse_world_ref,
)
from dream_gym.infrastructure.limits import (
    LimitError,
    line_limit_problem,
    loads_bounded,
    max_line_bytes,
    read_bounded,
)
from dream_gym.infrastructure.printable import printable
from dream_gym.world.registry import (
    DATASET_FILE,
    shipped_dataset_dir,
    shipped_world_folder,
    use_dataset_store,
)
from dream_gym.world.registry import shipped_dataset_folders as shipped_folders
from dream_gym.world.tree import FORMAT as WORLD_FORMAT
from dream_gym.world.tree import (
    NODE_FILES,
    WORLD_FILE,
    World,
    WorldFormatError,
    is_present,
    load_world,
    open_world_file,
    sha256_stream,
)

DATASET_FORMAT = "dream-gym-dataset/1"
HOME_ENV = "DREAM_GYM_HOME"
# What a refusal to replace a dataset ends with, wherever it stands (the store, a remote, the Hub).
REPLACE_HINT = "(--force replaces it; in Python overwrite=True)"


class DatasetError(ValueError):
    """A dataset folder or its ``dataset.json`` is broken; the message names the file."""


class DatasetNotFoundError(LookupError):
    """The dataset (or world) is neither in the local store nor shipped."""


class IncompatibleDatasetError(DatasetError):
    """The dataset was written in a format version this dream_gym cannot read."""


# --------------------------------------------------------------------------- locations


def store_home() -> Path:
    """The store's root folder: ``$DREAM_GYM_HOME`` or ``~/.dream_gym``."""
    env = os.environ.get(HOME_ENV)
    return Path(env).expanduser() if env else Path.home() / ".dream_gym"


def datasets_root() -> Path:
    return store_home() / "datasets"


def shipped_path(dataset_id: str | None = None) -> Path | None:
    """The folder of a shipped dataset, or None: ``dataset_id``, by default the default dataset
    (``dream-gym/recorded-v1``; see :mod:`dream_gym.world.registry`)."""
    return shipped_dataset_dir(None if dataset_id is None else str(parse_dataset_id(dataset_id)))


def local_path(dataset_id: str | DatasetId) -> Path:
    """Where ``dataset_id`` lives (or would live) in the local store."""
    did = dataset_id if isinstance(dataset_id, DatasetId) else parse_dataset_id(dataset_id)
    return datasets_root() / did.namespace / f"{did.name}-v{did.version}"


def remove_if_empty(folder: Path) -> None:
    """Remove ``folder`` when it holds nothing (a namespace folder a failed download made, or the
    last dataset of it deleted)."""
    try:
        folder.rmdir()
    except OSError:  # not empty (another dataset of the namespace came meanwhile), or gone
        pass


def staging_folder(did: DatasetId, kind: str) -> tuple[Path, bool]:
    """A new hidden folder beside where ``did`` goes in the store, to build it in before it is
    moved into place (``kind``: what builds it, in the folder's name), and whether the namespace
    folder was made for it (to remove after a failure). A store that cannot be written is a
    PermissionError naming the store, not the hidden folder's name."""
    import tempfile

    parent = local_path(did).parent
    made = not parent.exists()
    try:
        parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{kind}{did.name}-v{did.version}.", dir=parent)), made
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        raise PermissionError(f"the dataset store {datasets_root()} cannot be written ({HOME_ENV} chooses where it is); "
                              "nothing was changed") from None


def download_hint(dataset_id: str) -> str:
    return (
        f"download it with `dream-gym worlds download {dataset_id} --remote URL` "
        "(URL: any fsspec location, e.g. file:///path/to/remote or hf://datasets/OWNER/REPO; "
        "with DREAM_GYM_REMOTE=URL set, --remote can be left out), "
        f"or make it with `dream-gym worlds pack WORLD_FOLDER... --id {dataset_id}`"
    )


# --------------------------------------------------------------------------- dataset.json


def check_dataset_format(path: Path | str, value: Any) -> None:
    """Accept ``dream-gym-dataset/1`` and ``/1.x``; refuse other majors (as Minari checks versions)."""
    name, _, version = str(value).partition("/")
    expected_name, expected_major = DATASET_FORMAT.split("/")
    if name != expected_name or not version:
        raise DatasetError(f"{path}: 'format' must be like {DATASET_FORMAT!r}, got {value!r}")
    if version.split(".", 1)[0] != expected_major:
        raise IncompatibleDatasetError(
            f"{path}: dataset format {value!r} is not compatible with this dream_gym, which reads "
            f"{DATASET_FORMAT!r}; upgrade dream_gym or fetch a version of the dataset in this format"
        )


def check_world_format(path: Path | str, value: Any) -> None:
    name, _, version = str(value).partition("/")
    expected_name, expected_major = WORLD_FORMAT.split("/")
    if name != expected_name or version.split(".", 1)[0] != expected_major:
        raise IncompatibleDatasetError(
            f"{path}: the dataset's worlds use format {value!r}; this dream_gym reads "
            f"{WORLD_FORMAT!r} (and its minor versions)"
        )


def safe_relative_path(path: Path | str, rel: Any) -> PurePosixPath:
    """A dataset-relative file name that cannot escape its folder."""
    if not isinstance(rel, str) or not rel or "\\" in rel or "\x00" in rel:
        raise DatasetError(f"{path}: unsafe file name {rel!r} in 'files'")
    pure = PurePosixPath(rel)
    if pure.is_absolute() or any(part in ("", ".", "..") for part in rel.split("/")):
        raise DatasetError(f"{path}: unsafe file name {rel!r} in 'files' (absolute or with '..')")
    if rel == DATASET_FILE:
        raise DatasetError(f"{path}: 'files' must not list {DATASET_FILE} itself")
    return pure


def validate_dataset_meta(path: Path | str, meta: Any) -> dict[str, Any]:
    """Check a parsed dataset.json; return it. Raises :class:`DatasetError` naming the file."""
    if not isinstance(meta, dict):
        raise DatasetError(f"{path}: must hold a JSON object")
    if "format" not in meta:
        raise DatasetError(f"{path}: missing required key 'format'")
    check_dataset_format(path, meta["format"])
    check_world_format(path, meta.get("world_format", WORLD_FORMAT))
    try:
        parse_dataset_id(meta.get("id"))  # type: ignore[arg-type]
    except DatasetIdError as exc:
        raise DatasetError(f"{path}: {exc}") from None
    worlds = meta.get("worlds")
    if not isinstance(worlds, list) or not worlds:
        raise DatasetError(f"{path}: 'worlds' must be a non-empty list")
    names = []
    for entry in worlds:
        if not isinstance(entry, dict) or "name" not in entry:
            raise DatasetError(f"{path}: each entry of 'worlds' must be an object with a 'name'")
        try:
            names.append(check_world_name(entry["name"]))
        except DatasetIdError as exc:
            raise DatasetError(f"{path}: {exc}") from None
        nodes = entry.get("nodes")
        if nodes is not None and (not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1):
            raise DatasetError(f"{path}: world {entry['name']!r}: 'nodes' must be a positive integer, got {nodes!r:.80}")
    if len(set(names)) != len(names):
        raise DatasetError(f"{path}: duplicate world names in 'worlds'")
    files = meta.get("files")
    if not isinstance(files, dict):
        raise DatasetError(f"{path}: 'files' must map each file to its sha256")
    for rel, digest in files.items():
        safe_relative_path(path, rel)
        if not isinstance(digest, str) or len(digest) != 64:
            raise DatasetError(f"{path}: file {rel!r} has no valid sha256")
    for name in names:
        if f"{name}/{WORLD_FILE}" not in files:
            raise DatasetError(f"{path}: world {name!r} lacks {WORLD_FILE} in 'files'")
        stored = [f for f in NODE_FILES if f"{name}/{f}" in files]
        if len(stored) != 1:
            raise DatasetError(
                f"{path}: world {name!r} must list exactly one of {' or '.join(NODE_FILES)} in 'files'"
            )
    split = meta.get("split", {})
    if not isinstance(split, dict):
        raise DatasetError(f"{path}: 'split' must be an object")
    for part, members in split.items():
        if not isinstance(members, list) or any(m not in names for m in members):
            raise DatasetError(f"{path}: split {part!r} must list worlds of this dataset")
    return meta


def parse_dataset_json(path: Path | str, stream: Any, *, validate: bool = True) -> tuple[bytes, Any]:
    """Read a dataset.json from a binary stream within the limits; return its bytes and its
    contents (validated unless ``validate`` is false). Raises :class:`DatasetError` naming ``path``."""
    limit = max_line_bytes()
    raw = read_bounded(stream, limit)
    if raw is None:
        raise DatasetError(f"{path}: " + line_limit_problem(limit, "file"))
    try:
        meta = loads_bounded(raw.decode("utf-8"))
    except LimitError as exc:
        raise DatasetError(f"{path}: {exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: bad JSON: {exc}") from None
    return raw, validate_dataset_meta(path, meta) if validate else meta


def read_dataset_meta(folder: Path) -> dict[str, Any]:
    path = folder / DATASET_FILE
    if not is_present(path):
        raise DatasetError(f"{path}: missing (a dataset folder holds a {DATASET_FILE})")
    with open_dataset_file(path) as stream:
        return parse_dataset_json(path, stream)[1]


def open_dataset_file(path: Path) -> IO[bytes]:
    """One of a dataset's files, opened for reading only when it is a regular file (never through
    a symbolic link, never a FIFO or a device: :func:`dream_gym.world.tree.open_world_file`)."""
    try:
        return open_world_file(path, owner="a dataset")
    except WorldFormatError as exc:
        raise DatasetError(str(exc)) from None


def check_declared_size(path: Path | str, entry: Mapping[str, Any], world: World) -> None:
    """A world entry's declared ``nodes`` must be what the world holds."""
    declared = entry.get("nodes")
    if declared is not None and declared != world.size:
        raise DatasetError(f"{path}: world {entry['name']!r} declares {declared} nodes but holds {world.size}")


@dataclass
class Dataset:
    """One dataset on disk: its folder and its validated ``dataset.json``."""

    path: Path
    meta: dict[str, Any]
    shipped: bool = False

    @property
    def id(self) -> str:
        return str(self.meta["id"])

    @property
    def world_names(self) -> list[str]:
        return [str(w["name"]) for w in self.meta["worlds"]]

    @property
    def split(self) -> dict[str, list[str]]:
        return {str(k): list(v) for k, v in self.meta.get("split", {}).items()}

    def world_path(self, name: str) -> Path:
        """The folder of world ``name``; DatasetNotFoundError names the worlds the dataset holds."""
        if name not in self.world_names:
            raise DatasetNotFoundError(
                f"dataset {self.id} has no world {name!r}; it holds: {', '.join(self.world_names)}"
            )
        return self.path / name

    def load(self, name: str) -> World:
        """The world ``name`` of this dataset (one of :attr:`world_names`)."""
        return load_world(self.world_path(name))

    def __repr__(self) -> str:  # its meta lists every file's sha256: thousands of characters
        return (f"Dataset({self.id!r}, {len(self.world_names)} worlds, path={str(self.path)!r}"
                f"{', shipped' if self.shipped else ''})")


def open_dataset_folder(folder: str | os.PathLike[str], *, shipped: bool = False) -> Dataset:
    folder = Path(folder)
    return Dataset(folder, read_dataset_meta(folder), shipped=shipped)


# --------------------------------------------------------------------------- lookup


def find_dataset(dataset_id: str) -> Dataset:
    """The dataset with this id: from the local store, else the shipped one; ``namespace/name``
    without a version is the newest version there is of it (:func:`latest_local_version`).

    Raises :class:`DatasetNotFoundError` with a message that says how to download it.
    """
    ref = parse_dataset_ref(dataset_id)
    if isinstance(ref, DatasetName):
        version = latest_local_version(ref)
        if version is None:
            raise DatasetNotFoundError(  # namespace/name is also how a folder path reads: both are said
                f"{ref}: no such folder ({Path(str(ref)).absolute()}), and no version of dataset {ref} is in "
                f"the local store ({datasets_root()}) nor shipped with dream_gym; fetch the newest with "
                f"`dream-gym worlds download {ref} --remote URL` (or load(..., download=True); the remote "
                "defaults to $DREAM_GYM_REMOTE)")
        return find_dataset(str(ref.version(version)))
    did = ref
    folder = local_path(did)
    if is_present(folder / DATASET_FILE):
        dataset = open_dataset_folder(folder)
        if dataset.id != str(did):
            raise DatasetError(f"{folder / DATASET_FILE}: says id {dataset.id!r}, stored as {did}")
        return dataset
    shipped = shipped_path(str(did))
    if shipped is not None:
        return open_dataset_folder(shipped, shipped=True)
    raise DatasetNotFoundError(
        f"dataset {did} is not in the local store ({datasets_root()}) nor shipped with dream_gym; "
        + download_hint(str(did))
    )


def latest_local_version(name: str | DatasetName) -> int | None:
    """The newest version of ``namespace/name`` in the local store or shipped, or None."""
    ref = parse_dataset_ref(name) if isinstance(name, str) else name
    if isinstance(ref, DatasetId):
        ref = ref.unversioned
    versions: set[int] = set()
    folder = datasets_root() / ref.namespace
    if folder.is_dir():
        for child in folder.iterdir():
            if child.name.startswith(f"{ref.name}-v") and (child / "dataset.json").is_file():
                found = _version_of(f"{ref.namespace}/{child.name}", ref)
                if found is not None:
                    versions.add(found)
    for shipped in shipped_folders():
        try:
            shipped_id = str(open_dataset_folder(shipped, shipped=True).id)
        except DatasetError:
            continue
        found = _version_of(shipped_id, ref)
        if found is not None:
            versions.add(found)
    return max(versions) if versions else None


def _version_of(text: str, ref: DatasetName) -> int | None:
    try:
        did = parse_dataset_id(text)
    except DatasetIdError:
        return None
    return did.version if did.unversioned == ref else None


def resolve_world_path(ref: str) -> Path:
    """Map ``namespace/name-vN/world`` (or ``namespace/name/world``: the newest version's) to that
    world's folder (local store, then shipped)."""
    dataset, _, world = ref.rpartition("/")
    if is_dataset_ref(dataset) and not is_dataset_id(dataset):
        return find_dataset(dataset).world_path(check_world_name(world))
    did, world = parse_world_ref(ref)
    return find_dataset(str(did)).world_path(world)


def load_world_ref(ref: str) -> World:
    return load_world(resolve_world_path(ref))


use_dataset_store(resolve_world_path)


@dataclass
class DatasetSummary:
    id: str
    path: Path
    worlds: int
    description: str
    shipped: bool = False
    problem: str | None = None


def list_datasets() -> list[DatasetSummary]:
    """All datasets in the local store, plus the shipped one; a broken one is listed with its problem."""
    found: list[DatasetSummary] = []
    root = datasets_root()
    seen: set[str] = set()
    if root.is_dir():
        for meta_path in sorted(root.glob(f"*/*/{DATASET_FILE}")):
            folder = meta_path.parent
            name = f"{folder.parent.name}/{folder.name}"
            try:
                dataset = open_dataset_folder(folder)
            except DatasetError as exc:
                found.append(DatasetSummary(name, folder, 0, "", problem=str(exc)))
                continue
            seen.add(dataset.id)
            found.append(
                DatasetSummary(dataset.id, folder, len(dataset.world_names), str(dataset.meta.get("description", "")))
            )
    for shipped in shipped_folders():
        try:
            dataset = open_dataset_folder(shipped, shipped=True)
        except DatasetError as exc:
            found.append(DatasetSummary("(shipped)", shipped, 0, "", shipped=True, problem=str(exc)))
            continue
        if dataset.id not in seen:
            seen.add(dataset.id)
            found.append(
                DatasetSummary(
                    dataset.id, shipped, len(dataset.world_names),
                    str(dataset.meta.get("description", "")), shipped=True,
                )
            )
    return found


# --------------------------------------------------------------------------- validate


@dataclass
class ValidationResult:
    path: Path
    kind: str  # "dataset" | "world"
    dataset_id: str | None
    worlds: dict[str, int] = field(default_factory=dict)  # world name -> nodes
    unfinished: list[str] = field(default_factory=list)  # worlds without their checksum: a run stopped or running

    def summary(self) -> str:
        what = f"dataset {self.dataset_id}" if self.kind == "dataset" else "world"
        sizes = ", ".join(f"{printable(k)} ({v} nodes)" for k, v in self.worlds.items())  # a world's own id
        note = (f"\nnote: not finished (world.json holds no checksum: its run stopped before its end, or is "
                f"running): {', '.join(map(printable, self.unfinished))}" if self.unfinished else "")
        return f"OK: {what} at {self.path}: {len(self.worlds)} world(s): {sizes}{note}"


def verify_files(folder: Path, meta: Mapping[str, Any]) -> None:
    """Check every file listed in dataset.json exists with its sha256; name the first bad one."""
    for rel, digest in meta["files"].items():
        safe_relative_path(folder / DATASET_FILE, rel)
        path = folder / rel
        if not is_present(path):
            raise DatasetError(f"{path}: listed in {DATASET_FILE} but missing")
        with open_dataset_file(path) as handle:  # a symbolic link, a FIFO or a device is refused, naming it
            actual = sha256_stream(handle)
        if actual != digest:
            raise DatasetError(
                f"{path}: sha256 mismatch (dataset.json says {digest}, the file has {actual}); "
                "the file was modified or corrupted"
            )


def validate(target: str | os.PathLike[str]) -> ValidationResult:
    """Validate a dataset (id or folder), a dataset's world (ns/name-vN/world), a shipped world's
    name or a world folder; raise naming the problem."""
    text = os.fspath(target)
    path = Path(text)
    if not path.exists() and "/" not in text and (shipped := shipped_world_folder(text)) is not None:
        path = shipped
    if not path.exists() and text.count("/") == 2 and not text.startswith((".", "/", "~")):
        world_path = resolve_world_path(text)
        world = load_world(world_path)
        return ValidationResult(world_path, "world", text.rsplit("/", 1)[0], {world.id: world.size},
                                [] if world.meta.get("sha256") else [world.id])
    if not path.exists() and "/" in text and not text.startswith((".", "/")):
        try:
            dataset = find_dataset(text)
        except DatasetIdError:
            raise FileNotFoundError(f"{text}: no such folder, and not a dataset id") from None
        path = dataset.path
    if is_present(path / DATASET_FILE):
        meta = read_dataset_meta(path)
        verify_files(path, meta)
        result = ValidationResult(path, "dataset", str(meta["id"]))
        for entry in meta["worlds"]:
            world = load_world(path / entry["name"])
            check_declared_size(path / DATASET_FILE, entry, world)
            result.worlds[entry["name"]] = world.size
            if not world.meta.get("sha256"):
                result.unfinished.append(entry["name"])
        return result
    if path.is_dir() or any(is_present(path / name) for name in (WORLD_FILE, *NODE_FILES)):
        world = load_world(path)  # a folder without world.json: named, with the import that makes a world
        return ValidationResult(path, "world", None, {world.id: world.size},
                                [] if world.meta.get("sha256") else [world.id])
    raise FileNotFoundError(f"{path}: no such folder, nor a dataset id, a dataset's world (namespace/name-vN/world) "
                            "or a shipped world's name")


__all__ = [
    "DATASET_FILE",
    "DATASET_FORMAT",
    "Dataset",
    "DatasetError",
    "DatasetNotFoundError",
    "DatasetSummary",
    "IncompatibleDatasetError",
    "ValidationResult",
    "datasets_root",
    "find_dataset",
    "list_datasets",
    "load_world_ref",
    "local_path",
    "open_dataset_folder",
    "resolve_world_path",
    "shipped_folders",
    "shipped_path",
    "store_home",
    "validate",
    "verify_files",
]
