"""Every string of a JSON-like value, mapped: the one walk that redaction, the removal of a
workspace's path from what an evaluation returned, and the marking of text that is no Unicode
(an imported run's, a candidate's exception message) each need."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


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


def without_lone_surrogates(value: Any) -> tuple[Any, int]:
    """``value`` with every lone surrogate of its strings (keys too) shown as U+FFFD, and how many
    strings held one. A JSON escape such as ``\\ud800`` parses into half of a UTF-16 pair, which
    no UTF-8 file, and so no world, can store."""
    marked = 0

    def mark(text: str) -> str:
        nonlocal marked
        cleaned, count = _LONE_SURROGATE.subn("\ufffd", text)
        marked += count > 0
        return cleaned

    return map_strings(value, mark), marked


__all__ = ["map_strings", "without_lone_surrogates"]
