"""World datasets: ids, the local store, remotes, importers and coverage reports.

Quick tour::

    from dream_gym import load_world
    from dream_gym.datasets import coverage_report, pack, render_text, resolve_world_path
    pack(["worlds/a", "worlds/b"], "me/demo-v0", description="two worlds")
    path = resolve_world_path("me/demo-v0/a")           # a world folder in the store
    print(render_text(coverage_report(load_world(path))))

Sharing, with verbs like Minari's (``remote`` defaults to ``$DREAM_GYM_REMOTE``, e.g. ``hf://me``)::

    import dream_gym.datasets as ds
    ds.upload("me/demo-v0", remote="hf://me")           # one commit: hf://datasets/me/demo/v0
    ds.list_remote("hf://me")                           # every version there
    ds.download("me/demo")                              # the newest version, every sha256 checked
    dataset = ds.load("me/demo", download=True)         # the newest version, fetched if missing
    world = ds.load("me/demo-v0/a", download=True)      # one world of one version

This package imports only the world format, replay mechanics and scores (:mod:`dream_gym.world.tree`,
:mod:`dream_gym.replay.mechanics`, :mod:`dream_gym.replay.score`, :mod:`dream_gym.replay.oracle`) from the rest of dream_gym.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dream_gym.datasets.ids import (
    DatasetId,
    DatasetIdError,
    DatasetName,
    is_dataset_id,
    is_dataset_ref,
    is_world_ref,
    parse_dataset_id,
    parse_dataset_ref,
    parse_world_ref,
)
from dream_gym.datasets.packing import delete, pack
from dream_gym.datasets.store import (
    DATASET_FORMAT,
    Dataset,
    DatasetError,
    DatasetNotFoundError,
    IncompatibleDatasetError,
    find_dataset,
    latest_local_version,
    list_datasets,
    load_world_ref,
    resolve_world_path,
    store_home,
    validate,
)
from dream_gym.infrastructure.durable import check_replaceable
from dream_gym.infrastructure.printable import TEXT_CHARS, printable
from dream_gym.world.registry import resolve_world
from dream_gym.world.tree import World, load_world

PNG_START = b"\x89PNG\r\n\x1a\n"  # the signature of every PNG file: the one kind of file --plot replaces

if TYPE_CHECKING:
    from dream_gym.datasets.coverage import CoverageReport, coverage_report, plot_tree, render_text
    from dream_gym.datasets.remote import (
        REMOTE_ENV,
        RemoteDataset,
        RemoteError,
        default_remote,
        download,
        latest_version,
        list_remote,
        upload,
    )

# Coverage reports (matplotlib, the oracle) and remotes (the Hub client) load when first named:
# ``import dream_gym`` imports the store, and so this package, and must stay light.
_LAZY = {
    "CoverageReport": "coverage", "coverage_report": "coverage", "plot_tree": "coverage",
    "render_text": "coverage", "REMOTE_ENV": "remote", "RemoteDataset": "remote",
    "RemoteError": "remote", "default_remote": "remote", "download": "remote",
    "latest_version": "remote", "list_remote": "remote", "upload": "remote",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"dream_gym.datasets.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load(target: str | os.PathLike[str], *, download: bool = False, remote: str | None = None) -> Any:
    """A dataset or a world, fetched first when ``download`` is true and it is not in the store.

    * ``namespace/name-vN`` -> that :class:`Dataset`; ``namespace/name`` -> its newest version:
      the newest in the local store (or shipped), or with ``download=True`` the newest at the
      remote (fetched unless already in the store);
    * ``namespace/name-vN/world`` (or ``namespace/name/world``: the newest version's) -> that
      :class:`~dream_gym.world.tree.World` (its dataset fetched when missing and ``download`` is true);
    * a world folder, or a shipped world's name -> its World.

    ``remote`` defaults to ``$DREAM_GYM_REMOTE``. Without network the error is a
    :class:`RemoteError` naming the remote and the cause.
    """
    text = os.fspath(target)
    if not text.strip():  # Path("") is the current folder
        raise ValueError("load: the reference is empty: name a dataset (namespace/name-vN), a dataset's world, "
                         "a world folder or a shipped world")
    if Path(text).is_dir() or text.startswith((".", "/", "~")):
        return load_world(text)
    if is_world_ref(text):
        did, world = parse_world_ref(text)
        return load_dataset(str(did), download=download, remote=remote).load(world)
    dataset, _, world = text.rpartition("/")
    if text.count("/") == 2 and is_dataset_ref(dataset):  # namespace/name/world: the newest version's
        return load_dataset(dataset, download=download, remote=remote).load(world)
    if is_dataset_ref(text):
        return load_dataset(text, download=download, remote=remote)
    return resolve_world(text)  # a shipped world's name, as gym.make and evaluate take it


def load_dataset(dataset_id: str, *, download: bool = False, remote: str | None = None) -> Dataset:
    """The dataset ``namespace/name-vN`` (or the newest of ``namespace/name``); see :func:`load`."""
    from dream_gym.datasets import remote as fetch

    ref = parse_dataset_ref(dataset_id)
    if isinstance(ref, DatasetId):
        try:
            return find_dataset(str(ref))
        except DatasetNotFoundError:
            if not download:
                raise
        return fetch.download(str(ref), remote, skip_existing=True)
    if download:
        return fetch.download(str(ref), remote, skip_existing=True)
    return find_dataset(str(ref))  # the newest version in the store or shipped


def show(target: str | os.PathLike[str], *, plot: str | os.PathLike[str] | None = None) -> str:
    """Text for ``dream-gym worlds show``: dataset metadata and each world's coverage report.

    ``target`` is a dataset id, a world reference or a world folder. With ``plot``, the tree of
    a single world is drawn to that PNG file; for a dataset, one PNG per world is written into
    the folder ``plot`` (``<world>.png``); for a world, ``plot`` is the PNG file, or a folder
    (one that exists, or a name without a suffix) to hold ``<world>.png``.
    """
    from dream_gym.datasets.coverage import coverage_report, plot_tree, render_text

    text = os.fspath(target)
    if not Path(text).exists() and is_dataset_ref(text):
        dataset = find_dataset(text)
        meta = dataset.meta
        lines = [  # every field of dataset.json is shown escaped and cut (printable): others wrote it
            f"dataset {dataset.id}{' (shipped with dream_gym)' if dataset.shipped else ''}",
            f"  path        {dataset.path}",
            f"  description {printable(meta.get('description', ''), TEXT_CHARS)}",
            f"  author      {printable(meta.get('author', ''))}",
            f"  licence     {printable(meta.get('licence', ''))}",
            f"  format      {printable(meta['format'])} (worlds: {printable(meta.get('world_format'))})",
            f"  created     {printable(meta.get('created') or 'not recorded')}",
        ]
        for part, members in dataset.split.items():
            lines.append(f"  split {printable(part):<9} {', '.join(members) or '-'}")
        if plot is not None:
            Path(plot).mkdir(parents=True, exist_ok=True)
        for name in dataset.world_names:
            world = dataset.load(name)
            lines.append("")
            lines.append(render_text(coverage_report(world)))
            if plot is not None:
                plot_tree(world, Path(plot) / f"{name}.png")
        return "\n".join(lines)
    world = load(text)
    body = render_text(coverage_report(world))
    if plot is not None:  # a file; a folder (existing, or named without a suffix) gets <world>.png
        target = Path(plot)
        if target.is_dir() or not target.suffix:
            target = target / f"{plot_name(world.id)}.png"
        if target.suffix.lower() == ".png":
            check_replaceable(target, f"the plot file {target}", PNG_START, "a PNG image")
        target.parent.mkdir(parents=True, exist_ok=True)
        body += f"\n  tree plot written to {plot_tree(world, target)}"
    return body


def plot_name(world_id: str) -> str:
    """A file name for a world's plot: its id is its author's text (``../x`` or ``/abs/x`` would
    place the file outside the folder the user named), so only letters, digits, ``.``, ``_`` and
    ``-`` are kept, every other run of characters becomes ``_``."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", world_id).lstrip("._-")[:100] or "world"


__all__ = [
    "DATASET_FORMAT",
    "REMOTE_ENV",
    "CoverageReport",
    "Dataset",
    "DatasetError",
    "DatasetId",
    "DatasetIdError",
    "DatasetName",
    "DatasetNotFoundError",
    "IncompatibleDatasetError",
    "RemoteDataset",
    "RemoteError",
    "World",
    "coverage_report",
    "default_remote",
    "delete",
    "download",
    "find_dataset",
    "is_dataset_id",
    "is_dataset_ref",
    "is_world_ref",
    "latest_local_version",
    "latest_version",
    "list_datasets",
    "list_remote",
    "load",
    "load_dataset",
    "load_world_ref",
    "pack",
    "parse_dataset_id",
    "parse_dataset_ref",
    "parse_world_ref",
    "plot_tree",
    "render_text",
    "resolve_world_path",
    "show",
    "store_home",
    "upload",
    "validate",
]
