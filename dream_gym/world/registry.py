"""Finding worlds by reference: a World, a folder, a shipped world's name, or a dataset id.

* ``World`` objects pass through.
* A path to a world folder is loaded.
* A plain name (``"cp26-greedy-w4-s0"``) is a world of a shipped dataset: the folders of
  ``recorded_worlds/`` (:func:`dream_gym.world.shipped.shipped_root`: the repository's, or the
  installed package's data; override with the environment variable ``DREAM_GYM_SHIPPED``) that hold a
  ``dataset.json`` (``recorded-v0/``, ``recorded-v1/``; or that folder itself when it holds one).
  World names are unique across the shipped datasets; the default dataset wins a tie.
* ``namespace/name-vN/<world>`` is a world of a dataset in the local store or shipped
  (see :mod:`dream_gym.datasets`). The dataset store sits above this module, which never imports
  it: the store plugs its lookup in (:func:`use_dataset_store`) when it is imported, and
  ``import dream_gym`` imports it.

The default dataset (``DEFAULT_DATASET``, ``dream-gym/recorded-v1``) is what ``shipped_worlds_dir``,
the ``train`` / ``heldout`` splits and the demo use. Each shipped world is registered with
Gymnasium as ``DreamGym/<name>-v<N>``, N the version of its dataset (``-v0`` for recorded-v0
worlds, ``-v1`` for recorded-v1 worlds).

Loaded worlds are cached by path and file modification time, so an evaluation grid that makes
many envs on one world parses it once.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dream_gym.world.files import NODE_FILES, WORLD_FILE, count_node_lines, node_file, read_json_document
from dream_gym.world.shipped import shipped_root
from dream_gym.world.tree import World, load_world

_CACHE: dict[tuple[str, int, int], World] = {}
DEFAULT_DATASET = "dream-gym/recorded-v1"
DATASET_FILE = "dataset.json"

#: ``namespace/name-vN/<world>`` -> that world's folder: set by :mod:`dream_gym.datasets.store`.
_dataset_world_folder: Callable[[str], Path] | None = None


def use_dataset_store(world_folder: Callable[[str], Path]) -> None:
    """Resolve dataset references with ``world_folder`` (the dataset store's lookup, which raises
    naming what it tried)."""
    global _dataset_world_folder
    _dataset_world_folder = world_folder


def shipped_dataset_folders() -> list[Path]:
    """Every folder holding a shipped dataset (``recorded_worlds/recorded-vN/``, or the shipped root
    itself when it holds a dataset.json), broken ones included: the one scan of the shipped data."""
    root = shipped_root()
    if (root / DATASET_FILE).is_file():
        return [root]
    return sorted(p for p in root.iterdir() if (p / DATASET_FILE).is_file()) if root.is_dir() else []


def shipped_datasets() -> dict[str, Path]:
    """Dataset id -> folder of every shipped dataset (default dataset first, then newest first)."""
    found: dict[str, Path] = {}
    for folder in shipped_dataset_folders():
        try:
            dataset_id = read_json_document(folder / DATASET_FILE, owner="a dataset")["id"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a broken dataset.json is reported by dream_gym.datasets.store, not here
        found.setdefault(str(dataset_id), folder)
    order = sorted(found, key=lambda i: (i != DEFAULT_DATASET, -_version(i), i))
    return {i: found[i] for i in order}


def _version(dataset_id: str) -> int:
    tail = dataset_id.rsplit("-v", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def shipped_dataset_dir(dataset_id: str | None = None) -> Path | None:
    """The folder of a shipped dataset (default: the default dataset, else the first shipped)."""
    datasets = shipped_datasets()
    if dataset_id is not None:
        return datasets.get(dataset_id)
    return next(iter(datasets.values()), None)


def shipped_worlds_dir() -> Path:
    """The folder of the default shipped dataset (the shipped root when none is there)."""
    return shipped_dataset_dir() or shipped_root()


def _world_names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if (p / WORLD_FILE).is_file()) if folder.is_dir() else []


def shipped_world_names(dataset_id: str | None = None) -> list[str]:
    """Names of the worlds of one shipped dataset (default: the default dataset)."""
    folder = shipped_dataset_dir(dataset_id)
    return _world_names(folder) if folder is not None else _world_names(shipped_root())


def shipped_env_ids() -> dict[str, str]:
    """Gymnasium id ``DreamGym/<name>-v<N>`` -> world name, for every world of every shipped dataset."""
    ids: dict[str, str] = {}
    datasets = shipped_datasets() or {"": shipped_root()}
    for dataset_id, folder in datasets.items():
        version = max(_version(dataset_id), 0)
        for name in _world_names(folder):
            ids.setdefault(f"DreamGym/{name}-v{version}", name)
    return ids


def is_path(path: str | os.PathLike[str], test: str = "exists") -> bool:
    """Whether ``path`` names an existing path (``test``: "exists", "is_dir" or "is_file"); a string
    no file system accepts as a name (a long comma list of world ids, say) names none, and nor
    does an empty one (which ``Path`` reads as the current folder)."""
    if not os.fspath(path).strip():
        return False
    try:
        return bool(getattr(Path(path).expanduser(), test)())
    except (OSError, ValueError):  # ENAMETOOLONG and the like: pathlib ignores only "not found"
        return False


def shipped_world_folder(name: str) -> Path | None:
    """The folder of the shipped world ``name``, or None."""
    datasets = shipped_datasets() or {"": shipped_root()}
    for folder in datasets.values():
        if is_path(folder / name / WORLD_FILE, "is_file"):
            return folder / name
    return None


def load_cached(folder: str | os.PathLike[str]) -> World:
    folder = Path(folder).resolve()
    try:
        key = (
            str(folder),
            (folder / WORLD_FILE).stat().st_mtime_ns,
            node_file(folder).stat().st_mtime_ns,
        )
    except (OSError, ValueError):
        return load_world(folder)  # let the loader name what is missing
    if key not in _CACHE:
        _CACHE[key] = load_world(folder)
    return _CACHE[key]


def _looks_like_dataset_ref(ref: str) -> bool:
    return ref.count("/") >= 2 and not ref.startswith((".", "/", "~"))


def resolve_world(ref: World | str | os.PathLike[str]) -> World:
    """Load the world a reference names; LookupError says what was tried."""
    if isinstance(ref, World):
        return ref
    if not isinstance(ref, (str, os.PathLike)):  # None, a number: pathlib's TypeError names no argument
        raise TypeError(f"a world reference is a World, a folder, a shipped world's name or a dataset's world, "
                        f"got {type(ref).__name__}")
    if not str(ref).strip():  # Path("") is the current folder
        raise LookupError("the world reference is empty: name a world folder, a shipped world or a dataset's world")
    path = Path(ref).expanduser()
    if is_path(path, "is_dir"):
        return load_cached(path)
    if is_path(path, "is_file"):
        hint = f": pass its folder, {path.parent}" if path.name in (WORLD_FILE, *NODE_FILES) else ""
        raise LookupError(f"{ref} is a file; a world is the folder that holds world.json and nodes.jsonl{hint}")
    text = str(ref)
    if _looks_like_dataset_ref(text):
        if _dataset_world_folder is None:
            raise LookupError(f"world {text!r} names a dataset, and no dataset store is in use "
                              "(import dream_gym.datasets)")
        return load_cached(_dataset_world_folder(text))
    shipped = shipped_world_folder(text) if "/" not in text else None
    if shipped is not None:
        return load_cached(shipped)
    known = sorted({n for f in shipped_datasets().values() for n in _world_names(f)})
    near = difflib.get_close_matches(text, known, n=3)  # the whole list is a page of names
    hint = f"; did you mean {' or '.join(map(repr, near))}?" if near else ""
    raise LookupError(
        f"unknown world {text!r}: not a world folder, not one of the {len(known)} shipped worlds "
        f"(dream_gym.list_worlds() lists them), and not a dataset reference 'namespace/name-vN/<world>'{hint}"
    )


def list_worlds(dataset: str | None = None) -> list[dict[str, Any]]:
    """The shipped worlds with their metadata (dataset, env id, task, direction, W, nodes, split).

    ``dataset`` keeps one shipped dataset (e.g. ``"dream-gym/recorded-v0"``); default: all of
    them, the default dataset first.
    """
    datasets = shipped_datasets() or {"": shipped_root()}
    if dataset is not None and not isinstance(dataset, str):
        raise TypeError(f"dataset must be a shipped dataset's id (a str), got {type(dataset).__name__}")
    if dataset is not None and dataset not in datasets:  # else an empty list, as if it held no world
        raise LookupError(f"{dataset!r} is not a dataset dream_gym ships (it ships: {', '.join(datasets) or 'none'}); "
                          "the worlds of a dataset in the store: dream_gym.datasets.load(id).world_names")
    rows = []
    for dataset_id, root in datasets.items():
        if dataset is not None and dataset_id != dataset:
            continue
        split: dict[str, str] = {}
        card = root / DATASET_FILE
        if card.is_file():
            data = read_json_document(card, owner="a dataset")
            for part, names in (data.get("split") or {}).items():
                for name in names:
                    split[name] = part
        version = max(_version(dataset_id), 0)
        for name in _world_names(root):
            meta = read_json_document(root / name / WORLD_FILE)
            rows.append(
                {
                    "name": name,
                    "dataset": dataset_id or None,
                    "env_id": f"DreamGym/{name}-v{version}",
                    "task": meta.get("task", {}).get("name"),
                    "direction": meta.get("direction", "maximize"),
                    "workers": meta.get("workers", 1),
                    "policy": meta.get("policy"),
                    "agent": meta.get("agent"),
                    "nodes": _count_nodes(root / name),
                    "split": split.get(name),
                    "path": str(root / name),
                }
            )
    return rows


def _count_nodes(folder: Path) -> int:
    return count_node_lines(node_file(folder))
