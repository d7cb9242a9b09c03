"""Worlds specs: what ``--worlds``/``--history`` accept, turned into World objects.

A spec is a world folder, a folder of worlds, a dataset id (``namespace/name-vN``), a shipped
world's name or ``ns/name-vN/<world>``, a split name of the default dataset (``train``,
``heldout``), a split of any dataset (``ns/name-vN:train``), or a comma-separated list of any
of these (:func:`resolve_worlds`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dream_gym.world.files import WORLD_FILE
from dream_gym.world.registry import is_path, load_cached, resolve_world, shipped_worlds_dir
from dream_gym.world.runs import runs_twice, same_run
from dream_gym.world.tree import World

SPLIT_ALIASES = {"train": ("train",), "heldout": ("heldout", "held_out"), "held_out": ("held_out", "heldout")}


def _is_world_folder(path: Path) -> bool:
    return (path / WORLD_FILE).is_file()


#: How deep a folder of worlds is looked into: ``worlds/`` holding ``worlds/all/<world>`` (a folder
#: import's output) beside worlds of its own.
FOLDER_DEPTH = 3


def worlds_below(folder: Path, depth: int) -> list[Path]:
    """The world folders below ``folder`` (not itself), to ``depth`` levels, in path order; a world's
    own folder is not looked into, nor hidden folders or links to folders."""
    found: list[Path] = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")):
        if _is_world_folder(sub):
            found.append(sub)
        elif depth > 1:
            found += worlds_below(sub, depth - 1)
    return found


def _shipped_dataset_meta() -> tuple[Path, dict[str, Any]] | None:
    try:
        from dream_gym.datasets.store import shipped_path
    except ImportError:  # the store is optional for this module
        candidate = shipped_worlds_dir()
        root: Path | None = candidate if (candidate / "dataset.json").is_file() else None
    else:
        root = shipped_path()
    if root is None:
        return None
    return root, json.loads((root / "dataset.json").read_text(encoding="utf-8"))


def _split_members(split: dict[str, Any], name: str, owner: str) -> list[str]:
    """The world names of split ``name`` (either spelling of held-out); LookupError naming the splits."""
    for key in SPLIT_ALIASES.get(name, (name,)):
        if key in split:
            if not split[key]:  # else "no worlds in spec []"
                raise LookupError(f"{owner} has no world in its {key} split")
            return [str(world) for world in split[key]]
    raise LookupError(f"{owner} has no split {name!r}; it has: {', '.join(split) or 'none'}")


def _split_worlds(name: str) -> list[World]:
    found = _shipped_dataset_meta()
    if found is None:
        raise LookupError(
            f"split {name!r} needs the shipped dataset (recorded_worlds/dataset.json, or "
            "$DREAM_GYM_SHIPPED), which is not present"
        )
    root, meta = found
    members = _split_members(meta.get("split") or {}, name, f"the shipped dataset {root}")
    return [load_cached(root / world) for world in members]


def _dataset_worlds(dataset_id: str) -> list[World]:
    from dream_gym.datasets.store import find_dataset

    dataset = find_dataset(dataset_id)
    return [load_cached(dataset.world_path(name)) for name in dataset.world_names]


def _dataset_split_worlds(dataset_id: str, name: str) -> list[World]:
    from dream_gym.datasets.store import find_dataset

    dataset = find_dataset(dataset_id)
    members = _split_members(dataset.split, name, f"dataset {dataset_id}")
    return [load_cached(dataset.world_path(world)) for world in members]


def _looks_like_dataset_id(text: str) -> bool:
    """``namespace/name-vN``, or ``namespace/name`` (its newest version)."""
    try:
        from dream_gym.datasets.ids import is_dataset_ref
    except ImportError:
        return False
    return bool(is_dataset_ref(text))


def _resolve_one(spec: str) -> list[World]:
    path = Path(spec).expanduser()
    if is_path(path, "is_dir"):
        if _is_world_folder(path):
            return [load_cached(path)]
        children = worlds_below(path, FOLDER_DEPTH)
        if not children:
            raise LookupError(f"{spec!r} is a folder but neither a world (no {WORLD_FILE}) nor a folder of worlds; "
                              f"a discovery run's output becomes a world with: dream-gym worlds import {spec} "
                              "--out WORLD_FOLDER")
        return [load_cached(p) for p in children]
    if spec in SPLIT_ALIASES:
        return _split_worlds(spec)
    if _looks_like_dataset_id(spec):
        return _dataset_worlds(spec)
    dataset_id, colon, split_name = spec.rpartition(":")
    if colon and _looks_like_dataset_id(dataset_id):
        return _dataset_split_worlds(dataset_id, split_name)
    try:
        return [resolve_world(spec)]  # a shipped world name or ns/name-vN/<world>
    except LookupError as exc:
        raise LookupError(
            f"cannot resolve worlds {spec!r}: not a world folder, a folder of worlds, a dataset id "
            f"'namespace/name-vN', a split name (train, heldout), a dataset split 'namespace/name-vN:train' "
            f"or a shipped world ({exc})"
        ) from None


def resolve_worlds(spec: str | os.PathLike[str] | World | Iterable[str | os.PathLike[str] | World]) -> list[World]:
    """The worlds a spec names, in order, without duplicates.

    ``spec`` is a world folder, a folder of worlds (every world below it, to :data:`FOLDER_DEPTH`
    levels, in path order), a dataset id (``ns/name-vN``), a world of a dataset
    (``ns/name-vN/world``), a shipped world's name, a split of the shipped dataset (``train`` or
    ``heldout``), a split of any dataset (``ns/name-vN:train``), a World, or a comma-separated
    string / list of these. Raises LookupError naming what could not be resolved.
    """
    items: list[str | World] = []
    if isinstance(spec, World):
        items = [spec]
    elif isinstance(spec, (str, os.PathLike)):
        text = os.fspath(spec)
        items = [part.strip() for part in text.split(",") if part.strip()] if not is_path(text) else [text]
    else:
        for item in spec:
            items.extend(resolve_worlds(item))
    if not items:
        raise LookupError(f"no worlds in spec {spec!r}")
    worlds: list[World] = []
    seen: set[object] = set()
    for item in items:
        for world in [item] if isinstance(item, World) else _resolve_one(item):
            key: object = str(world.path) if world.path is not None else id(world)
            if key not in seen:
                seen.add(key)
                worlds.append(world)
    _check_distinct_ids(worlds)
    return worlds


def _check_distinct_ids(worlds: list[World]) -> None:
    """Refuses two worlds with one id: results, journals, leaderboards and plots keep episodes
    by world id, so the two would be counted as one world (an OpenEvolve run imported from its
    default ``openevolve_output`` folder is named that unless given an id)."""
    first: dict[str, World] = {}
    for world in worlds:
        other = first.setdefault(world.id, world)
        if other is not world:
            raise LookupError(
                f"two worlds have the id {world.id!r} ({_where(other)} and {_where(world)}); results are kept by "
                "world id, so their episodes would be counted as one world's: give one of them another id "
                "(dream-gym worlds import --id NAME, or 'id' in its world.json)"
            )


def check_distinct_runs(worlds: Iterable[World], what: str = "worlds") -> None:
    """Refuses two worlds that record one run (:func:`~dream_gym.world.runs.same_run`: one run
    imported twice, under two names, or deployed and its system's output imported) where a mean
    over ``what`` is taken (an evaluation, a history, a training pool): it would count that run
    twice."""
    twins = runs_twice(worlds)
    if twins is not None:
        first, second = twins
        raise LookupError(
            f"one run is twice in the {what}: {first.id!r} ({_where(first)}) and {second.id!r} ({_where(second)}) "
            "hold the same programs (ids, parents, scores, code: imported twice, or a deployed run and its "
            "system's output imported?), and a mean over the worlds would count it twice; leave one of them out"
        )


def check_held_out(used: Iterable[World], held_out: Iterable[World], used_as: str, hint: str = "") -> None:
    """Refuses held-out worlds that are also ``used_as`` (the history a policy is selected on, the
    pool a model is trained on): figures on them would be called held out and be neither. A world
    is the same by its id or by its programs (:func:`~dream_gym.world.runs.same_run`: one run
    imported twice, into two folders, or deployed and its system's output imported)."""
    used = list(used)
    used_ids = {w.id for w in used}
    overlap = []
    for world in held_out:
        if world.id in used_ids:
            overlap.append(repr(world.id))
        elif (twin := next((w.id for w in used if same_run(w, world)), None)) is not None:
            overlap.append(f"{world.id!r} (the run of the {used_as}'s {twin!r})")
    if overlap:
        raise ValueError(f"held-out worlds must not be in the {used_as}: [{', '.join(sorted(overlap))}]{hint}")


def _where(world: World) -> str:
    return str(world.path) if world.path is not None else "a World built in memory"


# --------------------------------------------------------------------------- policies
