"""What every remote shares: its error, its listing rows, and the checks a fetched dataset passes
before it joins the local store (the fsspec remotes of :mod:`dream_gym.datasets.remote` and the
Hub of :mod:`dream_gym.datasets.hub` alike)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dream_gym.datasets.ids import DatasetId
from dream_gym.datasets.packing import install_staged
from dream_gym.datasets.store import (
    DATASET_FILE,
    REPLACE_HINT,
    Dataset,
    DatasetError,
    check_declared_size,
    find_dataset,
    local_path,
    read_dataset_meta,
    shipped_path,
)
from dream_gym.infrastructure.printable import printable
from dream_gym.world.tree import World, WorldFormatError, load_world


class RemoteError(OSError):
    """A remote cannot be reached or used (bad URL, missing fsspec backend, no network)."""


@dataclass
class RemoteDataset:
    """One dataset a remote lists, as its ``dataset.json`` says (unchecked: nothing is fetched
    but that file). The fields are the remote's own text: show them through
    :func:`dream_gym.infrastructure.printable.printable`."""

    id: str
    location: str
    kind: str  # "folder" | "archive"
    description: str = ""
    worlds: int | None = None


def listed(meta: Any, location: str) -> RemoteDataset:
    """The listing row of a dataset folder whose ``dataset.json`` (not validated) holds ``meta``."""
    fields = meta if isinstance(meta, dict) else {}
    worlds = fields.get("worlds")
    return RemoteDataset(str(fields.get("id")), location, "folder", str(fields.get("description", "")),
                         len(worlds) if isinstance(worlds, list) else None)


def install_verified(source: str, staging: Path, did: DatasetId, target: Path, *, overwrite: bool) -> None:
    """Load every world of a fetched dataset whose files passed their sha256 check (world format
    version, structure, declared size), then move it into the store. Errors name ``source``."""
    staged = read_dataset_meta(staging)
    for entry in staged["worlds"]:
        world = _load_staged(source, staging, entry["name"])  # world format version and structure
        check_declared_size(staging / DATASET_FILE, entry, world)
    install_staged(staging, target, f"dataset {did}", overwrite=overwrite)


def _load_staged(source: str, staging: Path, name: str) -> World:
    """Load a fetched world; an error names it in the remote's terms (the staging folder is
    deleted once the download is refused)."""
    try:
        return load_world(staging / name)
    except WorldFormatError as exc:
        where = Path(exc.path).relative_to(staging).as_posix() if Path(exc.path).is_relative_to(staging) else exc.path
        line = "" if exc.line is None else f", line {exc.line}"
        raise DatasetError(f"{source}: {where}{line}: {exc.problem}; download refused") from None


def check_not_shipped(did: DatasetId) -> None:
    """Refuse to download a version dream_gym ships: it is installed already, and a copy in the
    store under its id would shadow it (some commands would read the copy, others the shipped
    worlds), as ``pack`` refuses to make one."""
    if shipped_path(str(did)) is not None:
        raise DatasetError(f"{did} is a dataset dream_gym ships: it is installed already, and a downloaded copy under "
                           "its id would shadow it; nothing was fetched")


def local_copy(did: DatasetId, *, overwrite: bool, skip_existing: bool) -> Dataset | None:
    """What a download of ``did`` finds in the store before it fetches anything: the local copy to
    return as it is (``skip_existing``), or None when the download goes on (no copy, or
    ``overwrite``). A copy and neither flag is a FileExistsError; a version dream_gym ships is
    refused (:func:`check_not_shipped`)."""
    check_not_shipped(did)
    target = local_path(did)
    if (target / DATASET_FILE).exists() and not overwrite:
        if skip_existing:
            return find_dataset(str(did))
        raise FileExistsError(f"dataset {did} is already in the local store at {target} {REPLACE_HINT}")
    return None


def check_id(where: str, meta: dict[str, Any], expected: str) -> None:
    if meta.get("id") != expected:
        raise DatasetError(f"{where}: holds dataset {printable(repr(meta.get('id')))}, not {expected!r}")


__all__ = ["RemoteDataset", "RemoteError", "check_id", "check_not_shipped", "install_verified", "listed", "local_copy"]
