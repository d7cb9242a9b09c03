"""``info["frontier"]``: a read-only dict the env brings up to date with the ids a step changed."""

from __future__ import annotations

from typing import Any, NoReturn

from dream_gym.replay.mechanics import ROOT


class FrontierCounts(dict[int, int]):
    """``info["frontier"]``: {id: how many times the next batch may hold it}, the root first
    (while it may open a branch), then the other ids ascending.

    A read-only dict: the env brings one up to date again, with only the ids the steps since
    changed, once nobody holds it (so a step costs the nodes it reveals, not the frontier's
    size), and refuses changes to it. ``dict(info["frontier"])`` or ``.copy()`` is a plain dict
    to change. ``copy.copy`` and ``copy.deepcopy`` return it: it never changes while held.
    """

    __slots__ = ()

    def __copy__(self) -> FrontierCounts:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrontierCounts:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrontierCounts, (dict(self),))


def _refuse_change(self: FrontierCounts, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError("info['frontier'] is read-only (the env brings it up to date again once nobody holds it): "
                    "change a copy, dict(info['frontier'])")


for _name in ("__setitem__", "__delitem__", "__ior__", "clear", "pop", "popitem", "setdefault", "update"):
    setattr(FrontierCounts, _name, _refuse_change)
# the env's own changes (dict's methods, which the class above refuses to callers). ``pop``, not
# ``__delitem__``: a method is called without the argument tuple a slot wrapper builds. Ids join
# as ``dict.fromkeys(ids, 1)``, which ``update`` merges as a dict, faster than from (id, 1) pairs.
# Together: 1.6 -> 1.1 us for the 8 ids out and 8 in of a bushy world's step.
set_count, drop_id, add_counts, ones_for = dict.__setitem__, dict.pop, dict.update, dict.fromkeys


def frontier_of(counts: FrontierCounts, ids: list[int], removed: int, root_slots: int) -> FrontierCounts:
    """``info["frontier"]`` from the engine's output: ``counts`` (a dict nobody else holds, as of
    the buffer set's rows) brought up to date with the ``removed`` ids that left and the ids that
    joined (``ids``, in that order), or (``removed`` -1) a new one holding ``ids``, the whole
    frontier; the root's multiplicity set."""
    if removed < 0:
        counts = FrontierCounts(ones_for(ids, 1))
        if root_slots:
            set_count(counts, ROOT, root_slots)
        return counts
    for obs_id in ids[:removed]:
        drop_id(counts, obs_id)
    if root_slots:
        set_count(counts, ROOT, root_slots)  # in place: the root never leaves and comes back
    elif ROOT in counts:
        drop_id(counts, ROOT)
    if len(ids) > removed:
        add_counts(counts, ones_for(ids[removed:], 1))
    return counts
