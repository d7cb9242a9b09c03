"""Every string of a JSON-like value, mapped: the one walk that redaction, the removal of a
workspace's path from what an evaluation returned, and an import's marking of text that is no
Unicode each need."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """A copy of ``value`` with ``change`` applied to every string, recursively through mappings
    (keys too, giving dicts), lists and tuples; other values are kept as they are."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, Mapping):
        return {map_strings(k, change): map_strings(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [map_strings(v, change) for v in value]
    if isinstance(value, tuple):
        return tuple(map_strings(v, change) for v in value)
    return value


__all__ = ["map_strings"]
