"""Durable files of a dreaming run: append-only JSON-lines logs, atomic writes, the fingerprint.

* :class:`JsonLog` appends one JSON object a line, flushed and fsynced before ``append`` returns,
  so ``kill -9`` loses at most the line being written; reading skips (and reopening cuts) a torn
  last line. Every line is redacted (:mod:`dream_gym.infrastructure.redact`): ``dream.jsonl``, the journal of
  LLM calls and the rsi ledger never hold a secret.
* :func:`write_json` writes run data atomically (:mod:`dream_gym.infrastructure.durable`).
* :func:`check_fingerprint` stores the settings of a run in its folder on the first start and, on
  ``--resume``, refuses other settings with a message naming every difference.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.durable import json_safe, read_jsonl, write_json_atomic
from dream_gym.infrastructure.locks import holds_only_its_lock
from dream_gym.infrastructure.redact import redact_value

FINGERPRINT_FILE = "fingerprint.json"


def dumps(value: Any) -> str:
    return json.dumps(json_safe(value), allow_nan=False, default=str)


class JsonLog:
    """An append-only JSON-lines file (flush + fsync per line)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            raw = self.path.read_bytes()
            if raw and not raw.endswith(b"\n"):  # a torn line from a crash: cut it
                with open(self.path, "r+b") as handle:
                    handle.truncate(raw.rfind(b"\n") + 1)

    def append(self, record: Mapping[str, Any]) -> None:
        line = dumps(redact_value(dict(record))).encode("utf-8") + b"\n"
        with open(self.path, "ab") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(read_jsonl(self.path))


def write_json(path: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    """A JSON document of run data (non-finite floats as null, paths as strings), atomically."""
    return write_json_atomic(path, json_safe(dict(data)), default=str)


class SettingsChanged(ValueError):
    """``--resume`` with settings other than the run's own; the message names each difference."""


def check_fingerprint(folder: str | os.PathLike[str], settings: Mapping[str, Any], *, resume: bool,
                      command: str) -> None:
    """Record ``settings`` in ``folder/fingerprint.json``, or compare them on resume.

    A new run refuses a folder that already has a fingerprint (pass ``--resume``); a resumed run
    refuses settings that differ from the recorded ones, naming every difference.
    """
    Path(folder).mkdir(parents=True, exist_ok=True)
    path = Path(folder) / FINGERPRINT_FILE
    current = redact_value(json_safe(dict(settings)))  # as the file holds them
    if not path.exists():
        if not holds_only_its_lock(folder):
            raise SettingsChanged(f"{folder} is not empty and has no {FINGERPRINT_FILE}: it is not a {command} "
                                  "run folder; give a new or empty folder")
        write_json(path, current)
        return
    if not resume:
        raise FileExistsError(f"{folder} already holds a {command} run; pass --resume to continue it")
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        recorded = exc
    if not isinstance(recorded, dict):
        raise SettingsChanged(f"{path} is not the settings of a {command} run ({str(recorded)[:60]}); "
                              "start again in a new --out")
    differences = [
        f"{key}: the run has {_said(recorded.get(key), current.get(key))}, this command gives "
        f"{_said(current.get(key), recorded.get(key))}"
        for key in sorted(set(recorded) | set(current))
        if recorded.get(key) != current.get(key) and not _same_policy_file(key, recorded, current)
    ]
    if differences:
        raise SettingsChanged(
            f"cannot resume {folder} with other settings ({len(differences)} difference"
            f"{'s' if len(differences) != 1 else ''}): " + "; ".join(differences)
        )


def _same_policy_file(key: str, recorded: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """A policy file (or model) named by another path, ``./pol.py`` for ``pol.py``: its contents'
    digest is what identifies it, and that is unchanged."""
    digest = recorded.get("policy_sha256")
    return key == "policy" and digest is not None and digest == current.get("policy_sha256")


def _said(value: Any, other: Any = None) -> str:
    """A setting as a refusal names it: ``none`` for one not set; for a mapping of worlds (id to
    checksum, or to :func:`~dream_gym.evaluation.journal.world_identity`) their ids when ``other``
    names other worlds, else what it records of each; else its repr."""
    if value is None or (value == {} and _worlds(other)):  # --validate none against some worlds
        return "none"
    if _worlds(value):
        if not _worlds(other) or set(other) != set(value):
            return "the worlds " + ", ".join(map(str, value))
        return "the worlds " + ", ".join(f"{key} ({_world_said(entry)})" for key, entry in value.items())
    return repr(value)


def _worlds(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(
        (isinstance(v, str) and len(v) == 64) or (isinstance(v, dict) and "sha256" in v) for v in value.values())


def _world_said(entry: Any) -> str:
    """A world's identity in a few words: its W, rule, direction, baseline and its nodes' checksum."""
    if isinstance(entry, str):
        return f"nodes {entry[:12]}"
    return (f"W {entry.get('workers')}, frontier {entry.get('frontier')}, {entry.get('direction')}, baseline "
            f"{entry.get('baseline')}, nodes {str(entry.get('sha256'))[:12]}")
