"""GEPA's saved state (``gepa_state.bin``), read as plain data, and the reasons its log gives.

``GEPAState.save`` (``gepa/core/state.py`` of github.com/gepa-ai/gepa) pickles the state's
``__dict__`` to ``<run_dir>/gepa_state.bin``: lists, dicts, sets, numbers and strings, plus
whatever an adapter put in optional fields. Unpickling runs code named by the pickle, so the state
is read with an unpickler that resolves no name at all: a pickle that names any class or function
(an adapter's output object, an evaluation cache, a cloudpickled state) is refused, naming it, and
nothing it names is imported or called. The file must be a regular file of at most the decompressed
limit (256 MB, ``DREAM_GYM_MAX_DECOMPRESSED_MB``).

The fields read (the legacy layout of GEPA before schema 2, with lists instead of dicts, is read
too): ``program_candidates`` (each a dict of component name -> text), ``parent_program_for_candidate``
(each a list of parent indices, ``[None]`` for the seed, two for a merge),
``prog_candidate_val_subscores`` (validation score by example), ``prog_candidate_objective_scores``,
``num_metric_calls_by_discovery`` and ``full_program_trace`` (one entry per iteration ``i``:
``selected_program_candidate``, ``subsample_scores`` and ``new_subsample_scores`` of the minibatch
test, ``new_program_idx`` when the proposal was accepted, ``tasks`` for several proposals, and
``merged_entities``, ``id1_subsample_scores``, ``id2_subsample_scores``,
``new_program_subsample_scores`` for a merge).
"""

from __future__ import annotations

import io
import math
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.limits import LimitError, bounded_lines, max_decompressed_bytes, max_line_bytes

from .base import RunImportError
from .coerce import to_int
from .files import open_regular, present, read_data

STATE_NAME = "gepa_state.bin"


class _Named(Exception):
    """The pickle names something to import: it is not plain data."""


class _PlainData(pickle.Unpickler):
    """An unpickler that builds dicts, lists, tuples, sets, numbers, strings and bytes, and nothing
    else: every name a pickle asks for (``GLOBAL``, ``STACK_GLOBAL``, ``INST``, extension codes)
    and every persistent reference is refused before anything is imported."""

    def find_class(self, module: str, name: str) -> Any:
        raise _Named(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise _Named("a persistent reference")


def load_plain_pickle(path: Path) -> Any:
    """The plain data of a pickle file, or a :class:`RunImportError` naming why it is refused."""
    data = read_data(path, max_decompressed_bytes())
    try:
        loaded = _PlainData(io.BytesIO(data)).load()
        _check_expanded(loaded, 10 * len(data) + 100_000)
        return loaded
    except _Named as named:
        raise RunImportError(
            f"{path}: the pickle names {str(named)[:200]}, not plain data; unpickling it would import and run "
            "that code, so a GEPA state is read only when it holds dicts, lists, sets, numbers and strings"
        ) from None
    except _Expands as expands:
        raise RunImportError(f"{path}: the pickle {expands}, so the world written from it would be far larger "
                             "than the file; a GEPA state holds each value once") from None
    except Exception as exc:  # a truncated or corrupt pickle fails in any of the parser's ways
        raise RunImportError(f"{path}: not a readable GEPA state ({type(exc).__name__}: {str(exc)[:200]})") from None


class _Expands(Exception):
    """The data shares containers so that written out in full it would be huge (or endless)."""


def _check_expanded(data: Any, limit: int) -> None:
    """Refuse ``data`` whose size written out in full (every shared list or dict copied, as JSON
    writes it) passes ``limit`` values: a pickle refers to a container again in two bytes, so 531
    bytes made 2^24 values; or that holds itself."""
    sizes: dict[int, int] = {}
    open_ids: set[int] = set()

    def size(value: Any) -> int:
        if not isinstance(value, (list, tuple, set, frozenset, dict)):
            return 1
        key = id(value)
        if key in sizes:
            return sizes[key]
        if key in open_ids:
            raise _Expands("holds a container inside itself")
        open_ids.add(key)
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        total = 1
        for item in items:
            total += size(item)
            if total > limit:
                raise _Expands(f"would write out more than {limit:,} values")
        open_ids.discard(key)
        sizes[key] = total
        return total

    size(data)


@dataclass
class GepaState:
    """The fields of a GEPA state the importer reads, checked and normalised."""

    candidates: list[dict[str, str]]
    parents: list[list[int | None]]
    val_subscores: list[dict[str, float]]
    objectives: list[dict[str, float]]
    metric_calls: list[int | None]
    trace: list[dict[str, Any]]
    iterations: int | None
    total_evals: int | None
    extra_fields: list[str] = field(default_factory=list)
    unreadable_trace: int = 0  # entries of full_program_trace that are no iteration's record

    def val_score(self, k: int) -> float | None:
        """GEPA's score of candidate ``k``: the mean of its validation scores (over the examples evaluated)."""
        values = list(self.val_subscores[k].values())
        return sum(values) / len(values) if values else None


def _as_list(state: dict[str, Any], key: str, path: Path, length: int | None = None) -> list[Any]:
    value = state.get(key, [] if length is None else None)
    if not isinstance(value, list) or (length is not None and len(value) != length):
        want = "a list" if length is None else f"a list of {length} (one per candidate)"
        raise RunImportError(f"{path}: field {key!r} is not {want}")
    return value


def _scores(value: Any, path: Path, what: str) -> dict[str, float]:
    """Scores by example id (a dict, or the legacy list), finite numbers only."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else None
    if items is None:
        raise RunImportError(f"{path}: {what} is not a dict or list of scores")
    scores = {}
    for key, score in items:
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise RunImportError(f"{path}: {what} holds {str(score)[:40]!r} for example {str(key)[:40]}, not a finite score")
        scores[str(key)] = float(score)
    return scores


def _candidate(value: Any, path: Path, k: int) -> dict[str, str]:
    if not isinstance(value, dict) or not value or not all(isinstance(t, str) for t in value.values()):
        raise RunImportError(f"{path}: candidate {k} is not a mapping of component names to texts")
    return {str(name): text for name, text in value.items()}


def _parent_list(value: Any, path: Path, k: int) -> list[int | None]:
    if not isinstance(value, list) or not all(p is None or (isinstance(p, int) and not isinstance(p, bool))
                                              for p in value):
        raise RunImportError(f"{path}: the parents of candidate {k} are not a list of candidate indices")
    return list(value)


def read_state(path: Path) -> GepaState:
    """Read and check ``gepa_state.bin``."""
    state = load_plain_pickle(path)
    if not isinstance(state, dict) or "program_candidates" not in state:
        raise RunImportError(f"{path}: not a GEPA state (a pickled dict with 'program_candidates')")
    raw_candidates = _as_list(state, "program_candidates", path)
    n = len(raw_candidates)
    if not n:
        raise RunImportError(f"{path}: the state holds no candidate")
    candidates = [_candidate(c, path, k) for k, c in enumerate(raw_candidates)]
    parents = [_parent_list(p, path, k) for k, p in enumerate(_as_list(state, "parent_program_for_candidate", path, n))]
    subscores = [_scores(s, path, f"the validation scores of candidate {k}")
                 for k, s in enumerate(_as_list(state, "prog_candidate_val_subscores", path, n))]
    objectives_raw = state.get("prog_candidate_objective_scores") or [{} for _ in range(n)]
    if not isinstance(objectives_raw, list) or len(objectives_raw) != n:
        raise RunImportError(f"{path}: field 'prog_candidate_objective_scores' is not a list of {n} (one per candidate)")
    objectives = [_scores(o or {}, path, f"the objective scores of candidate {k}") for k, o in enumerate(objectives_raw)]
    calls_raw = state.get("num_metric_calls_by_discovery")
    metric_calls: list[int | None] = [None] * n
    if isinstance(calls_raw, list) and len(calls_raw) == n:
        metric_calls = [to_int(c) for c in calls_raw]
    entries = _as_list(state, "full_program_trace", path)
    trace = [t for t in entries if isinstance(t, dict) and isinstance(t.get("i"), int)]
    return GepaState(candidates, parents, subscores, objectives, metric_calls, trace,
                     to_int(state.get("i")), to_int(state.get("total_num_evals")),
                     unreadable_trace=len(entries) - len(trace))


def find_states(folder: Path) -> list[Path]:
    """``gepa_state.bin`` in ``folder`` or in one of its subfolders (a run kept under ``raw/``)."""
    found = [folder / STATE_NAME] if present(folder / STATE_NAME) else []
    if not found:
        found = sorted(p for p in folder.glob(f"*/{STATE_NAME}") if present(p))
    return found


# ------------------------------------------------------------------ the log's reasons
_ITERATION_LINE = re.compile(r"^Iteration (\d+): (.*)$")
# GEPA's own lines that say nothing about why an iteration made no candidate.
_ROUTINE = ("Selected program", "Proposed new text", "No merge candidates", "Merged programs",
            "Base program full valset score")
_UNNUMBERED = ("Per-task reflection failed", "Batched reflection failed")
LOG_NAMES = ("run_log.txt", "*.log")
_REASON_CHARS = 500


def iteration_reasons(folder: Path, rounds: set[int]) -> dict[int, list[str]]:
    """What GEPA's log (``run_log.txt``, the copy of its output ``gepa.optimize(run_dir=...)``
    writes, or a ``*.log`` of its output) says about iterations ``rounds`` (GEPA's numbering,
    ``i + 1``): its ``Iteration N: ...`` lines other than the routine ones, and the unnumbered
    lines of a failed reflection. Logs are read as data; an unreadable one is skipped."""
    reasons: dict[int, list[str]] = {}
    if not rounds:
        return reasons
    for path in sorted({p for name in LOG_NAMES for p in folder.glob(name)}):
        try:
            _scan_log(path, rounds, reasons)
        except (RunImportError, LimitError, OSError):
            continue
    return reasons


def _scan_log(path: Path, rounds: set[int], reasons: dict[int, list[str]]) -> None:
    current: int | None = None
    with open(open_regular(path, str(path)), "rb", closefd=True) as stream:
        for _, raw, _ in bounded_lines(stream, max_line=max_line_bytes(), max_total=max_decompressed_bytes()):
            line = raw.decode("utf-8", errors="replace").rstrip()
            match = _ITERATION_LINE.match(line)
            if match:
                current = int(match.group(1))
                message = match.group(2).strip()
                if current in rounds and not message.startswith(_ROUTINE):
                    _add(reasons, current, message)
            elif current in rounds and line.startswith(_UNNUMBERED):
                _add(reasons, current, line)


def _add(reasons: dict[int, list[str]], round_: int, message: str) -> None:
    kept = reasons.setdefault(round_, [])
    message = message[:_REASON_CHARS]
    if message not in kept and len(kept) < 8:
        kept.append(message)
