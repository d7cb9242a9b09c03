"""Value coercion for foreign run records.

Real output files hold both proper JSON values and stringified ones ("2", "1766687202.86",
"{'rel_depth': 0.5}" Python reprs, "None"). These helpers accept both.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Collection
from typing import Any


def parse_structure(value: Any) -> Any:
    """A dict/list given as itself, as JSON text, or as a Python repr string."""
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "{[":
            try:
                return json.loads(text)
            except ValueError:
                try:
                    return ast.literal_eval(text)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    return value
    return value


def as_dict(value: Any) -> dict[str, Any]:
    """``parse_structure`` that always returns a dict (empty when the value is not one)."""
    parsed = parse_structure(value)
    return parsed if isinstance(parsed, dict) else {}


def as_text(value: Any) -> str | None:
    """The value when it is a string (a program's code), else None."""
    return value if isinstance(value, str) else None


def to_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def to_finite(value: Any) -> float | None:
    """``to_float``, but None for NaN and infinities."""
    number = to_float(value)
    return number if number is not None and math.isfinite(number) else None


def to_int(value: Any) -> int | None:
    number = to_finite(value)
    return None if number is None else int(number)


def to_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "1.0", "yes", "y", "t")
    number = to_float(value)
    return bool(number) if number is not None else bool(value)


def to_id(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return None if text in ("", "None", "null", "none", "NULL") else text


def json_safe(value: Any) -> Any:
    """Recursively make a value JSON-writable: non-finite floats become None, tuples lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def world_name_from(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-._")
    return name or "imported"


def unique_name(base: str, taken: Collection[str]) -> str:
    """``base``, or ``base-2``, ``base-3``, ... : the first that is not ``taken``."""
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    return name
