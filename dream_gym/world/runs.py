"""Whether two worlds record one run, whoever wrote them.

A discovery system's own output imported with ``worlds import`` and dream_gym's record of the same
run (``deploy``) hold the same programs under the same ids, parents and scores, but not the same
file: the import's rounds are the system's iterations, its W and task name its own, an error's
wording can differ. A world's checksum tells files apart, not runs, so the checks that keep one run
from counting twice in a mean, or from standing among the held-out worlds of the runs a policy was
chosen on, compare what this module reads instead: each node's id, parent, score and code.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Iterable

from dream_gym.world.tree import World

#: (id, parent id, recorded score, sha256 of the code) of one node
NodeKey = tuple[str, "str | None", "float | None", str]

_KEYS: weakref.WeakKeyDictionary[World, frozenset[NodeKey]] = weakref.WeakKeyDictionary()


def node_keys(world: World) -> frozenset[NodeKey]:
    """What makes ``world``'s nodes one run's, whoever wrote the world (kept per world object)."""
    keys = _KEYS.get(world)
    if keys is None:
        keys = _KEYS[world] = frozenset(map(_key, world.records))
    return keys


def _key(record: dict) -> NodeKey:
    parent = record.get("parent")
    code = hashlib.sha256(str(record.get("code") or "").encode("utf-8")).hexdigest()
    return str(record.get("id")), None if parent is None else str(parent), record.get("score"), code


def same_run(a: World, b: World) -> bool:
    """Whether ``a`` and ``b`` record one run: every node of the one with fewer is a node of the
    other (the same run, or a part of it, as an import taken while the run was being written).
    A world of the root alone is no run: the runs of one task share their initial program."""
    small, large = sorted((node_keys(a), node_keys(b)), key=len)
    return len(small) > 1 and small <= large


def runs_twice(worlds: Iterable[World]) -> tuple[World, World] | None:
    """The first two of ``worlds`` that record one run (:func:`same_run`), or None. Only worlds
    that begin with the same root are compared."""
    by_root: dict[NodeKey, list[World]] = {}
    for world in worlds:
        earlier = by_root.setdefault(_key(world.records[0]), [])
        twin = next((other for other in earlier if same_run(other, world)), None)
        if twin is not None:
            return twin, world
        earlier.append(world)
    return None


__all__ = ["NodeKey", "node_keys", "runs_twice", "same_run"]
