"""Finding worlds by reference: a World, a folder, a shipped world's name, or a dataset id.

* ``World`` objects pass through.
* A path to a world folder is loaded.
* A plain name (``"cp26-fixed-s0"``) is a world of the shipped dataset ``recorded_worlds/``
  (override its location with the environment variable ``DREAM_GYM_SHIPPED``).
* ``namespace/name-vN/<world>`` is a world of a dataset in the local store
  (see :mod:`dream_gym.datasets`).

Loaded worlds are cached by path and file modification time, so an evaluation grid that makes
many envs on one world parses it once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dream_gym.world import WORLD_FILE, World, decompressed, load_world, node_file

_CACHE: dict[tuple[str, int, int], World] = {}


def shipped_worlds_dir() -> Path:
    override = os.environ.get("DREAM_GYM_SHIPPED")
    if override:
        return Path(override)
    return Path(__file__).resolve().parent.parent / "recorded_worlds"


def shipped_world_names() -> list[str]:
    root = shipped_worlds_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / WORLD_FILE).is_file())


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
    path = Path(ref).expanduser()
    if path.is_dir():
        return load_cached(path)
    text = str(ref)
    if _looks_like_dataset_ref(text):
        from dream_gym.datasets.store import resolve_world_path

        return load_cached(resolve_world_path(text))
    shipped = shipped_worlds_dir() / text
    if "/" not in text and (shipped / WORLD_FILE).is_file():
        return load_cached(shipped)
    known = ", ".join(shipped_world_names()) or "none found"
    raise LookupError(
        f"unknown world {text!r}: not a world folder, not a shipped world (shipped: {known}), "
        "and not a dataset reference 'namespace/name-vN/<world>'"
    )


def list_worlds() -> list[dict[str, Any]]:
    """The shipped worlds with their metadata (id, task, direction, W, nodes, split)."""
    root = shipped_worlds_dir()
    split: dict[str, str] = {}
    card = root / "dataset.json"
    if card.is_file():
        data = json.loads(card.read_text(encoding="utf-8"))
        for part, names in (data.get("split") or {}).items():
            for name in names:
                split[name] = part
    rows = []
    for name in shipped_world_names():
        meta = json.loads((root / name / WORLD_FILE).read_text(encoding="utf-8"))
        stored = node_file(root / name)
        nodes = decompressed(stored, stored.read_bytes()).count(b"\n")
        rows.append(
            {
                "name": name,
                "env_id": f"DreamGym/{name}-v0",
                "task": meta.get("task", {}).get("name"),
                "direction": meta.get("direction", "maximize"),
                "workers": meta.get("workers", 1),
                "policy": meta.get("policy"),
                "agent": meta.get("agent"),
                "nodes": nodes,
                "split": split.get(name),
                "path": str(root / name),
            }
        )
    return rows
