"""World datasets: ids, the local store, remotes, importers and coverage reports.

Quick tour::

    from dream_gym.datasets import pack, resolve_world_path, coverage_report
    pack(["worlds/a", "worlds/b"], "me/demo-v0", description="two worlds")
    path = resolve_world_path("me/demo-v0/a")           # a world folder in the store
    print(render_text(coverage_report(load_world(path))))

This package imports only the world format, replay mechanics and scores (:mod:`dream_gym.world`,
:mod:`dream_gym.replay`, :mod:`dream_gym.score`, :mod:`dream_gym.oracle`) from the rest of dream_gym.
"""

from __future__ import annotations

import os
from pathlib import Path

from dream_gym.datasets.coverage import CoverageReport, coverage_report, plot_tree, render_text
from dream_gym.datasets.ids import (
    DatasetId,
    DatasetIdError,
    is_dataset_id,
    is_world_ref,
    parse_dataset_id,
    parse_world_ref,
)
from dream_gym.datasets.store import (
    DATASET_FORMAT,
    Dataset,
    DatasetError,
    DatasetNotFoundError,
    IncompatibleDatasetError,
    delete,
    find_dataset,
    list_datasets,
    load_world_ref,
    pack,
    resolve_world_path,
    store_home,
    validate,
)
from dream_gym.world import World, load_world


def load(target: str | os.PathLike[str]) -> World:
    """A world from a folder path or a ``namespace/name-vN/world`` reference."""
    text = os.fspath(target)
    if Path(text).is_dir() or not is_world_ref(text):
        return load_world(text)
    return load_world_ref(text)


def show(target: str | os.PathLike[str], *, plot: str | os.PathLike[str] | None = None) -> str:
    """Text for ``dream-gym worlds show``: dataset metadata and each world's coverage report.

    ``target`` is a dataset id, a world reference or a world folder. With ``plot``, the tree of
    a single world is drawn to that PNG file; for a dataset, one PNG per world is written into
    the folder ``plot`` (``<world>.png``).
    """
    text = os.fspath(target)
    if not Path(text).exists() and is_dataset_id(text):
        dataset = find_dataset(text)
        meta = dataset.meta
        lines = [
            f"dataset {dataset.id}{' (shipped with dream_gym)' if dataset.shipped else ''}",
            f"  path        {dataset.path}",
            f"  description {meta.get('description', '')}",
            f"  author      {meta.get('author', '')}",
            f"  licence     {meta.get('licence', '')}",
            f"  format      {meta['format']} (worlds: {meta.get('world_format')})",
            f"  created     {meta.get('created', '')}",
        ]
        for part, members in dataset.split.items():
            lines.append(f"  split {part:<9} {', '.join(members) or '-'}")
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
    if plot is not None:
        plot_tree(world, plot)
        body += f"\n  tree plot written to {plot}"
    return body


__all__ = [
    "DATASET_FORMAT",
    "CoverageReport",
    "Dataset",
    "DatasetError",
    "DatasetId",
    "DatasetIdError",
    "DatasetNotFoundError",
    "IncompatibleDatasetError",
    "coverage_report",
    "delete",
    "find_dataset",
    "is_dataset_id",
    "is_world_ref",
    "list_datasets",
    "load",
    "load_world_ref",
    "pack",
    "parse_dataset_id",
    "parse_world_ref",
    "plot_tree",
    "render_text",
    "resolve_world_path",
    "show",
    "store_home",
    "validate",
]
