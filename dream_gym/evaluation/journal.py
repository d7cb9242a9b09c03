"""The journal of an evaluation into a results file: what ``dream-gym eval --resume`` continues.

While ``evaluate(..., out=FILE)`` runs, every finished (policy, world) task's episodes are
appended to ``FILE.partial`` (one line a task, flushed and fsynced before the next task is
awaited). Its first line is the run's identity: the policies (with the sha256 of policy files
and model zips), the worlds (ids and content checksums), the betas and every replay option
(W, beta1, beta2, max_rounds, seed, lam, file_options). When the grid is done the results file
is written whole, in canonical order, and the journal removed.

A run killed on the way leaves the journal. The same command with ``resume`` keeps its
finished tasks and runs only the missing ones; the results file is then byte for byte the
one an uninterrupted run writes (an episode depends only on its policy, world, beta and
options, and the oracle limits are computed at the end, for every row). A journal whose
identity differs from the command's is refused, naming what differs, and a command without
``resume`` refuses a journal too: results of two runs are never mixed silently.

The journal is private to the run that holds the results file's lock (dream_gym.infrastructure.locks);
its lines may hold NaN and Infinity (Python's JSON), so that episodes round-trip exactly, and
are redacted like the results file (dream_gym.infrastructure.redact: an episode's error is untrusted text).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from dream_gym.evaluation.results import row_problem
from dream_gym.infrastructure.durable import json_safe, read_jsonl, write_atomic
from dream_gym.infrastructure.redact import redact_value
from dream_gym.policy import EpisodeResult
from dream_gym.world.files import sha256_file
from dream_gym.world.tree import World

JOURNAL_FORMAT = "dream-gym-eval-journal/1"
JOURNAL_SUFFIX = ".partial"

TaskKey = tuple[int, int]  # (policy index, world index)


def journal_path(out: str | os.PathLike[str]) -> Path:
    """The journal beside a results file: ``<out>.partial``."""
    out = Path(out)
    return out.with_name(out.name + JOURNAL_SUFFIX)


def finished_tasks(out: str | os.PathLike[str]) -> int:
    """How many (policy, world) tasks the journal of ``out`` holds finished (0: no journal)."""
    path = journal_path(out)
    return max(0, len(read_jsonl(path)) - 1) if path.exists() else 0


class JournalMismatch(ValueError):
    """``resume`` with a journal of another run; the message names each difference."""


# --------------------------------------------------------------------------- identity


def policy_digest(spec: str) -> str | None:
    """sha256 of what a spec loads from disk (a policy file, or a model's zips); None otherwise."""
    from dream_gym.policy_files.specs import PolicySpec

    files = PolicySpec.of(spec).files()
    if not files:
        return None
    if len(files) == 1:
        return sha256_file(files[0])
    return hashlib.sha256("".join(sha256_file(f) for f in files).encode("ascii")).hexdigest()


def world_checksum(world: World) -> str:
    """The world's recorded sha256, or one of its nodes computed now (an unfinished world): the one
    digest of a world that a run's identity records (eval's journal, dream's and rsi's fingerprints)."""
    recorded = world.meta.get("sha256")
    if recorded:
        return str(recorded)
    canonical = json.dumps(list(world.records), sort_keys=True, default=str, allow_nan=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def world_identity(world: World) -> dict[str, Any]:
    """What a run's results on ``world`` depend on: its nodes (:func:`world_checksum`) and the
    settings world.json gives its replay (the recorded W, the frontier rule, the direction, the
    baseline). A world imported again with another W keeps its checksum: a resumed run mixed
    episodes replayed at the old W with new ones."""
    return {"sha256": world_checksum(world), "workers": world.workers, "frontier": world.frontier_rule,
            "direction": world.direction, "baseline": world.meta.get("baseline_score")}


def run_identity(policies: Sequence[str], worlds: Sequence[World], betas: Sequence[float],
                 options: Mapping[str, Any], file_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Everything the episodes of an evaluation depend on (what a resumed run must repeat), as
    plain JSON values. ``options`` holds workers, beta1, beta2, max_rounds, seed and lam."""
    identity = {
        "policies": [{"spec": spec, "sha256": policy_digest(spec)} for spec in policies],
        "worlds": [{"id": world.id, **world_identity(world)} for world in worlds],
        "betas": [float(beta) for beta in betas],
        **{key: options[key] for key in sorted(options)},
        "file_options": dict(file_options or {}),
    }
    plain: dict[str, Any] = json.loads(json.dumps(json_safe(identity), default=str))
    return plain


def _describe(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 200 else text[:197] + "..."


def identity_differences(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """One line per setting that differs between a journal's identity and a command's."""
    differences = []
    for key in sorted(set(recorded) | set(current)):
        theirs, mine = recorded.get(key), current.get(key)
        if theirs == mine:
            continue
        if key in ("policies", "worlds") and isinstance(theirs, list) and isinstance(mine, list):
            differences.extend(_list_differences(key, theirs, mine))
        else:
            differences.append(f"{key}: the journal has {_describe(theirs)}, this command gives {_describe(mine)}")
    return differences


def _list_differences(key: str, theirs: list[Any], mine: list[Any]) -> list[str]:
    """Policies or worlds: a different list of names, or the same names with other contents."""
    name = "spec" if key == "policies" else "id"
    names_theirs, names_mine = [e.get(name) for e in theirs], [e.get(name) for e in mine]
    if names_theirs != names_mine:
        return [f"{key}: the journal has {_describe(names_theirs)}, this command gives {_describe(names_mine)}"]
    return [f"{key[:-1]} {a[name]}: its content changed (sha256 {a.get('sha256')} in the journal, "
            f"{b.get('sha256')} now)" for a, b in zip(theirs, mine, strict=True) if a != b]


# --------------------------------------------------------------------------- the journal


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"value of type {type(value).__name__} is not JSON serialisable")


def _task_line(key: TaskKey, results: Sequence[EpisodeResult]) -> bytes:
    row = {"type": "task", "policy": key[0], "world": key[1],
           "episodes": [redact_value(r.to_dict()) for r in results]}
    return json.dumps(row, allow_nan=True, default=_plain).encode("utf-8") + b"\n"


class EvalJournal:
    """An open journal: the tasks it holds (``finished``) and :meth:`append` for new ones."""

    def __init__(self, path: Path, identity: dict[str, Any], finished: dict[TaskKey, list[EpisodeResult]]):
        self.path, self.identity, self.finished = path, identity, finished
        self._handle: BinaryIO | None = open(path, "ab")

    @classmethod
    def open(cls, out: str | os.PathLike[str], identity: dict[str, Any], *, resume: bool) -> EvalJournal:
        """Start the journal of ``out``, or (``resume``) continue the one a killed run left.

        Raises FileExistsError for a journal without ``resume`` and JournalMismatch for one
        whose identity differs from ``identity``."""
        path = journal_path(out)
        rows = read_jsonl(path) if path.exists() else []  # a torn last line (the kill) is skipped
        if path.exists() and not resume:
            raise FileExistsError(
                f"{path} holds {max(0, len(rows) - 1)} finished (policy, world) tasks of an interrupted "
                f"evaluation into {out}; pass --resume (resume=True) to continue it, or delete {path} to start over")
        if not rows:  # no journal (or one killed before its first line was whole): a fresh start
            write_atomic(path, json.dumps({"type": "identity", "format": JOURNAL_FORMAT, **identity}) + "\n")
            return cls(path, identity, {})
        if not isinstance(rows[0], dict) or rows[0].get("type") != "identity" or rows[0].get("format") != JOURNAL_FORMAT:
            raise JournalMismatch(f"{path} is not the journal of an evaluation (its first line is not a "
                                  f"{JOURNAL_FORMAT} identity); delete it, or give --out another path")
        recorded = {k: v for k, v in rows[0].items() if k not in ("type", "format")}
        differences = identity_differences(recorded, identity)
        if differences:
            raise JournalMismatch(
                f"cannot resume the evaluation into {out}: its journal {path} is of another run "
                f"({len(differences)} difference{'s' if len(differences) != 1 else ''}): " + "; ".join(differences)
                + f"; run the same command as before, or delete {path} to start over")
        _cut_torn_tail(path)
        finished = {}
        for number, row in enumerate(rows[1:], 2):
            key, results = _read_task(path, number, row, identity)
            finished[key] = results
        return cls(path, identity, finished)

    def append(self, key: TaskKey, results: Sequence[EpisodeResult]) -> None:
        """Write one finished task durably (flush + fsync) before returning."""
        assert self._handle is not None, "the journal is closed"
        self._handle.write(_task_line(key, results))
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self.finished[key] = list(results)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def remove(self) -> None:
        """The results file is written: the journal is not needed any more."""
        self.close()
        self.path.unlink(missing_ok=True)


def _cut_torn_tail(path: Path) -> None:
    """Drop a torn last line (the one being written at the kill) so that appends start clean."""
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        with open(path, "r+b") as handle:
            handle.truncate(raw.rfind(b"\n") + 1)
            handle.flush()
            os.fsync(handle.fileno())


def _read_task(path: Path, number: int, row: Mapping[str, Any], identity: Mapping[str, Any]
               ) -> tuple[TaskKey, list[EpisodeResult]]:
    """One task line, checked against the identity (its indices, policy, world and betas)."""
    try:
        key = (int(row["policy"]), int(row["world"]))
        spec, world = identity["policies"][key[0]]["spec"], identity["worlds"][key[1]]["id"]
        problem = next(filter(None, map(row_problem, row["episodes"])), None)
        if problem:
            raise ValueError(f"an episode is not a results row: {problem}")
        results = [EpisodeResult(**episode) for episode in row["episodes"]]
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}, line {number}: not a task of this journal ({type(exc).__name__}: {exc}); "
                         f"delete {path} to start over") from None
    found = [(r.policy, r.world, r.beta) for r in results]
    if found != [(spec, world, beta) for beta in identity["betas"]]:
        raise ValueError(f"{path}, line {number}: its episodes are not those of policy {spec} on world {world}")
    return key, results


__all__ = ["JOURNAL_FORMAT", "JOURNAL_SUFFIX", "EvalJournal", "JournalMismatch", "identity_differences",
           "journal_path", "policy_digest", "run_identity", "world_checksum", "world_identity"]
