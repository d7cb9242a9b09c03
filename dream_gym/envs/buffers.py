"""Observation buffers that the replay envs write again only once nobody holds them.

Gymnasium's contract is that an observation an env returned never changes later. Copying the
whole observation every step would make a step cost the capacity (``max_nodes`` rows); instead an
env keeps a few *buffer sets* (one block of memory each, holding one step's observation and
action mask) and writes into a set that no caller holds, only the rows revealed since that set
was last returned. In the usual ``obs, ... = env.step(a)`` loop two sets take turns; a caller who
keeps every observation gets a new set each step (a full copy, as without the pool).

Callers read a set through read-only arrays over read-only memory: numpy cannot make them
writeable, so no caller changes what a later step returns. A set is free once the caller has
dropped its arrays and every numpy view of them: a view refers to the array it views, which
``sys.getrefcount`` counts (a weak reference does not keep a set).

:class:`dream_gym.envs.env.ReplayEnv` and :class:`dream_gym.envs.vector_env.ReplayVectorEnv` keep
their sets in a :class:`BufferPool`; ReplayEnv's step has the pool's common case inline.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from dream_gym.replay.layout import MAX_SETS

#: An array of a buffer set: (dtype, shape, byte offset in the set's memory).
ArrayLayout = tuple[Any, tuple[int, ...], int]


class BufferSet(Protocol):
    """What the pool needs of a set: what callers get (read-only arrays) and the arrays numpy
    views of them refer to."""

    @property
    def out(self) -> tuple[np.ndarray, ...]: ...

    @property
    def bases(self) -> tuple[np.ndarray, ...]: ...


Set = TypeVar("Set", bound=BufferSet)


def read_only_arrays(memory: memoryview, layout: Sequence[ArrayLayout]) -> tuple[np.ndarray, ...]:
    """The arrays of a buffer set over read-only ``memory`` (numpy cannot make them writeable):
    one per ``(dtype, shape, offset)`` of ``layout``."""
    arrays = []
    for dtype, shape, offset in layout:
        flat = np.frombuffer(memory, dtype=dtype, count=int(np.prod(shape)), offset=offset)
        arrays.append(flat.reshape(shape) if len(shape) > 1 else flat)
    return tuple(arrays)


def bases_of(out: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """The arrays that numpy views of ``out``'s matrices refer to (the one-dimensional array under
    each); a view of a vector refers to the vector itself."""
    return tuple(array.base for array in out if array.ndim > 1)  # type: ignore[misc]


def is_held(entry: BufferSet) -> bool:
    """Whether anyone but the pool refers to a set's arrays or to a numpy view of them."""
    refs = sys.getrefcount
    for array in entry.out:  # the set's tuple, this loop's name, getrefcount's argument
        if refs(array) != 3:
            return True
    for base in entry.bases:  # the same, and the array over it
        if refs(base) != 4:
            return True
    return False


class BufferPool(Generic[Set]):
    """The buffer sets of one env, at most :data:`~dream_gym.replay.layout.MAX_SETS`.

    Args:
        new_set: a set in its first state.
        on_new: called with a set's index when it is replaced or added (the env forgets what it
            wrote there).
    """

    def __init__(self, new_set: Callable[[], Set], on_new: Callable[[int], None] | None = None):
        self._new_set = new_set
        self._on_new = on_new
        self.sets: list[Set] = [self._fresh()]
        self.last = 0  # the set returned last

    def _fresh(self) -> Set:
        entry = self._new_set()
        assert not is_held(entry), "the reference counts of a fresh buffer set"
        return entry

    def free(self) -> int:
        """The index of a set nobody but the pool holds, the one after the last returned first;
        a new set when the caller holds every one (at the limit, the oldest becomes the caller's)."""
        sets, count = self.sets, len(self.sets)
        index = self.last
        for _ in range(count):
            index = index + 1 if index + 1 < count else 0
            if not is_held(sets[index]):
                return index
        if count < MAX_SETS:
            sets.append(self._fresh())
            index = count
        else:
            index = self.last + 1 if self.last + 1 < count else 0
            sets[index] = self._fresh()
        if self._on_new is not None:
            self._on_new(index)
        return index


__all__ = ["ArrayLayout", "BufferPool", "BufferSet", "bases_of", "is_held", "read_only_arrays"]
