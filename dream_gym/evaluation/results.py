"""Results files (``dream-gym-results/1``): one JSON line per evaluated episode.

Written by :func:`dream_gym.evaluation.evaluate.evaluate`, read by the leaderboard, the plots and the
dreaming loop. Non-finite floats are stored as ``null`` so every line is strict JSON, and
secrets are redacted (:mod:`dream_gym.infrastructure.redact`; an episode's ``error`` is untrusted text).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.durable import json_safe, read_jsonl
from dream_gym.infrastructure.redact import redact_value
from dream_gym.policy import EpisodeResult
from dream_gym.replay.settings import is_whole
from dream_gym.world.tree import World, is_number

RESULT_FORMAT = "dream-gym-results/1"
#: What every row holds (the episode's fields without a default).
_REQUIRED_FIELDS = tuple(f.name for f in fields(EpisodeResult) if f.default is MISSING and f.default_factory is MISSING)


def result_row(result: EpisodeResult, world: World | None = None, **extra: Any) -> dict[str, Any]:
    """The JSON line of one episode (the EpisodeResult fields, plus the world's folder)."""
    row: dict[str, Any] = {"format": RESULT_FORMAT, **result.to_dict()}
    if world is not None and world.path is not None:
        row["world_path"] = str(world.path)
    row.update(extra)
    return row


def check_results_target(path: str | os.PathLike[str]) -> None:
    """Before a run: ``path`` may take its results file (absent, empty, or a results file, which
    the run replaces when it ends if it may: see ``evaluate``'s ``overwrite``). A folder, or a
    file that holds something else, is refused naming it: the run would end by failing after all
    its episodes, or by replacing the file."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; the results go to a file (e.g. {path / 'results.jsonl'})")
    if not path.exists():
        return
    if not path.is_file():
        raise FileExistsError(f"{path} is not a regular file; the results go to a file")
    with open(path, "rb") as handle:
        first = handle.readline(1 << 16)
    try:
        row = json.loads(first) if first.strip() else {"format": RESULT_FORMAT}
    except ValueError:
        row = None
    if not isinstance(row, dict) or row.get("format") != RESULT_FORMAT:
        raise FileExistsError(f"{path} exists and is not a results file (the run would replace it); "
                              "give another path, or remove it")


def dumps_row(row: Mapping[str, Any]) -> str:
    """One results-file line: strict JSON, non-finite floats as null, secrets redacted."""
    return json.dumps(redact_value(json_safe(dict(row))), allow_nan=False)


def read_results(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a results file written by :func:`dream_gym.evaluation.evaluate.evaluate` (one dict per
    episode). The file is written whole, so every line counts, the last one too."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"no results file at {path}")
    rows = read_jsonl(path, torn_tail=False)
    for number, row in enumerate(rows, 1):
        problem = row_problem(row)
        if problem:
            raise ValueError(f"{path}, line {number}: not a results row ({problem}); "
                             "a results file is what `dream-gym eval --out` writes")
    return rows


_RESULT_FIELDS = {f.name for f in fields(EpisodeResult)}


def _batches(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(b, list) and all(map(is_whole, b)) for b in value)


#: What each field of a row holds: its check, and what to call it. A float may be null (a
#: non-finite value is written so); the fields that may be absent are the defaulted ones.
_FIELD_KINDS: dict[str, tuple[Any, str]] = {
    "world": (lambda v: isinstance(v, str), "a string"), "policy": (lambda v: isinstance(v, str), "a string"),
    **{name: (lambda v: v is None or is_number(v), "a number") for name in (
        "beta", "replay_score", "best_q", "best_score", "work", "attainment", "limit", "answerable")},
    "attempts": (is_whole, "a whole number"), "rounds": (is_whole, "a whole number"),
    "refused": (lambda v: v is None or is_whole(v), "a whole number"),
    "batches": (_batches, "a list of lists of node ids"),
    **{name: (lambda v: isinstance(v, bool), "true or false") for name in ("terminated", "truncated")},
    "cut_short": (lambda v: v is None or isinstance(v, bool), "true or false"),
    "error": (lambda v: v is None or isinstance(v, str), "a string"),
}


def row_problem(row: Any) -> str | None:
    """What is wrong with a results row (None when nothing): not an object, a field missing, a
    value of the wrong kind, or another format. A row is read back from a file anyone can edit,
    and a wrong value failed later, far from the file (the leaderboard's mean of a string)."""
    if not isinstance(row, Mapping):
        return f"a results row is a JSON object, got {type(row).__name__}"
    missing = [name for name in _REQUIRED_FIELDS if name not in row]
    if missing:
        return f"it lacks {', '.join(missing)}"
    if row.get("format", RESULT_FORMAT) != RESULT_FORMAT:
        return f"format {str(row['format'])[:40]!r}, where this version reads {RESULT_FORMAT!r}"
    for name, (check, kind) in _FIELD_KINDS.items():
        if name in row and not check(row[name]):
            return f"{name!r} must be {kind}, got {json.dumps(row[name], default=str)[:40]}"
    if "world_path" in row and not isinstance(row["world_path"], str):
        return f"'world_path' must be a string, got {json.dumps(row['world_path'], default=str)[:40]}"
    return None


def result_from_row(row: Mapping[str, Any]) -> EpisodeResult:
    """An EpisodeResult from a results-file row (extra keys are ignored)."""
    return EpisodeResult(**{k: v for k, v in row.items() if k in _RESULT_FIELDS})


def load_results(path: str | os.PathLike[str]) -> list[EpisodeResult]:
    return [result_from_row(row) for row in read_results(path)]
