"""Writing the local store: a dataset packed from world folders, a staged dataset folder installed
under its lock (packing and downloading both end so), a dataset deleted."""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from dream_gym.datasets.ids import (
    DatasetIdError,
    check_world_name,
    parse_dataset_id,
)
from dream_gym.datasets.store import (
    DATASET_FORMAT,
    REPLACE_HINT,
    Dataset,
    DatasetError,
    DatasetNotFoundError,
    datasets_root,
    local_path,
    open_dataset_file,
    open_dataset_folder,
    remove_if_empty,
    shipped_path,
    staging_folder,
    validate_dataset_meta,
)
from dream_gym.infrastructure.locks import file_lock
from dream_gym.infrastructure.printable import printable
from dream_gym.world.registry import DATASET_FILE
from dream_gym.world.tree import FORMAT as WORLD_FORMAT
from dream_gym.world.tree import (
    WORLD_FILE,
    World,
    is_present,
    load_world,
    node_file,
    open_world_file,
    sha256_stream,
)


def file_digests(folder: Path) -> dict[str, str]:
    """sha256 of every regular file below ``folder`` (except dataset.json), by relative path."""
    digests: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            raise DatasetError(f"{path}: symbolic links are not allowed in a dataset")
        if not path.is_file() or (path.parent == folder and path.name == DATASET_FILE):
            continue
        with open_dataset_file(path) as handle:
            digests[path.relative_to(folder).as_posix()] = sha256_stream(handle)
    return dict(sorted(digests.items()))


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


#: The largest README a dataset takes: a dataset card is prose (a page is a few kB).
MAX_README_BYTES = 1 << 20


def check_readme(path: Path) -> None:
    """A README is a regular file of at most :data:`MAX_README_BYTES` (``/dev/zero`` given as one
    was copied without end)."""
    if not path.is_file():
        raise DatasetError(f"--readme {path}: not a regular file")
    if path.stat().st_size > MAX_README_BYTES:
        raise DatasetError(f"--readme {path}: {path.stat().st_size:,} bytes; a README holds at most "
                           f"{MAX_README_BYTES:,}")


def pack(
    world_folders: Sequence[str | os.PathLike[str]],
    dataset_id: str,
    *,
    description: str = "",
    author: str = "",
    licence: str = "",
    held_out: Iterable[str] = (),
    readme: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> Dataset:
    """Make a dataset in the local store from world folders (each validated first).

    World names are the worlds' ids from world.json. ``held_out`` names the worlds of the
    held-out split; the others form the train split.
    """
    did = parse_dataset_id(dataset_id)
    if isinstance(world_folders, (str, os.PathLike)) or isinstance(held_out, str):  # not one name a letter
        raise TypeError("pack takes a list of world folders and a list of held-out world names")
    if shipped_path(str(did)) is not None:  # the store's copy would shadow it, and not everywhere alike
        raise DatasetError(f"{did} is the id of a dataset dream_gym ships; pack under another id "
                           "(your own namespace: me/name-v0)")
    if not world_folders:
        raise DatasetError("pack needs at least one world folder")
    worlds: list[tuple[Path, World]] = []
    for folder in world_folders:
        world = load_world(folder)
        try:
            check_world_name(world.id)
        except DatasetIdError as exc:
            raise DatasetError(f"{folder}: world id cannot name a world of a dataset: {exc}") from None
        worlds.append((Path(folder), world))
    names = [w.id for _, w in worlds]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise DatasetError(f"two world folders have the same world id: {', '.join(duplicates)}")
    held = list(held_out)
    unknown = [h for h in held if h not in names]
    if unknown:
        raise DatasetError(f"held-out world(s) {', '.join(unknown)} are not among the packed worlds")

    if readme is not None:
        check_readme(Path(readme))
    target = local_path(did)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target}: dataset {did} already exists in the local store {REPLACE_HINT}")
    staging, _ = staging_folder(did, "")
    try:
        for folder, world in worlds:
            dest = staging / world.id
            dest.mkdir()
            for source in (folder / WORLD_FILE, node_file(folder)):
                with open_world_file(source) as original, open(dest / source.name, "xb") as copy:
                    shutil.copyfileobj(original, copy)  # a file swapped for a link since it loaded is refused
        if readme is not None:
            shutil.copyfile(readme, staging / "README.md")
        meta = {
            "format": DATASET_FORMAT,
            "id": str(did),
            "description": description,
            "author": author,
            "licence": licence,
            "world_format": WORLD_FORMAT,
            "created": _utc_now(),
            "worlds": [
                {"name": w.id, "task": w.task_name, "nodes": w.size, "direction": w.direction}
                for _, w in worlds
            ],
            "split": {"train": [n for n in names if n not in held], "held_out": held},
            "files": file_digests(staging),
        }
        validate_dataset_meta(staging / DATASET_FILE, meta)
        (staging / DATASET_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        install_staged(staging, target, f"dataset {did}", overwrite=overwrite)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return open_dataset_folder(target)


def install_staged(staging: Path, target: Path, what: str, *, overwrite: bool) -> None:
    """Move a staged dataset folder onto ``target`` under the lock ``<target>.lock`` (one writer
    of a dataset at a time: a second pack or download of the same id, started while the first
    copies, is refused naming it, instead of deleting the folder the first just installed)."""
    with file_lock(target):
        if (target / DATASET_FILE).exists() and not overwrite:  # installed while this one was staging
            raise FileExistsError(f"{target}: {what} already exists in the local store {REPLACE_HINT}")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)


def delete(dataset_id: str) -> Path:
    """Remove a dataset from the local store (the shipped dataset cannot be deleted)."""
    did = parse_dataset_id(dataset_id)
    folder = local_path(did)
    if not is_present(folder / DATASET_FILE):
        shipped = shipped_path(str(did))
        if shipped is not None:
            raise PermissionError(f"dataset {did} is shipped with dream_gym ({shipped}); it cannot be deleted")
        raise DatasetNotFoundError(f"dataset {did} is not in the local store ({datasets_root()})")
    try:
        shutil.rmtree(folder)
    except PermissionError as exc:
        raise PermissionError(f"dataset {did}: {folder} cannot be deleted ({exc.strerror}: "
                              f"{printable(str(exc.filename))})") from None
    remove_if_empty(folder.parent)  # the namespace folder, when now empty
    return folder


__all__ = ["delete", "file_digests", "install_staged", "pack"]
