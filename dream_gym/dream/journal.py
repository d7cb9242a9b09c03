"""The journal of LLM calls: every request and its reply, on disk before the reply is used.

``journal.jsonl`` in the run folder holds, per call, a ``request`` line (the messages, model,
sampling settings, where in the run it was made) written and fsynced *before* the request is
sent, then a ``reply`` line (the text, finish reason, tokens, USD, latency, attempts) written and
fsynced *before* the reply is handed back, or an ``error`` line when the LLM could not be reached.

A call is keyed by the sha256 of its request content (model, messages, temperature, max_tokens,
seed). On resume, :meth:`Journal.complete` returns the stored reply of an answered call and never
sends it again; a call that was sent but not answered (the process died while waiting) is sent
again. API keys are never part of a request record.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dream_gym.dream.runfolder import JsonLog
from dream_gym.infrastructure.durable import read_jsonl
from dream_gym.infrastructure.llm import Completion, LLMClient

JOURNAL_FILE = "journal.jsonl"


def request_key(request: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of a request's content."""
    return hashlib.sha256(json.dumps(dict(request), sort_keys=True, ensure_ascii=True).encode()).hexdigest()


@dataclass(frozen=True)
class JournaledCall:
    """One answered call as the journal holds it."""

    key: str
    phase: int | None
    revision: int | None
    completion: Completion
    replayed: bool  # True when the reply came from the journal (not sent in this process)


class Journal:
    """The run folder's LLM call journal (see the module docstring)."""

    def __init__(self, folder: str | os.PathLike[str]):
        self.path = Path(folder) / JOURNAL_FILE
        self._log = JsonLog(self.path)
        self._replies: dict[str, dict[str, Any]] = {
            row["key"]: row for row in read_jsonl(self.path) if row.get("type") == "reply"
        }

    def complete(self, client: LLMClient, messages: list[dict[str, str]], *, seed: int,
                 phase: int | None = None, revision: int | None = None) -> JournaledCall:
        """The reply to ``messages``: from the journal when answered before, else sent now
        (request line first, reply line before returning). Raises ``LLMError`` when the LLM
        cannot be reached (an ``error`` line is written first)."""
        request = client.request(messages, seed)
        key = request_key(request)
        stored = self._replies.get(key)
        if stored is not None:
            return JournaledCall(key, phase, revision, _completion(stored), replayed=True)
        self._log.append({"type": "request", "key": key, "phase": phase, "revision": revision,
                          "t": time.time(), **request})
        try:
            done = client.complete(messages, seed)
        except Exception as exc:
            self._log.append({"type": "error", "key": key, "phase": phase, "revision": revision,
                              "t": time.time(), "error": f"{type(exc).__name__}: {exc}"})
            raise
        row = {"type": "reply", "key": key, "phase": phase, "revision": revision, "t": time.time(),
               **asdict(done)}
        self._log.append(row)
        self._replies[key] = row
        return JournaledCall(key, phase, revision, done, replayed=False)


def _completion(row: Mapping[str, Any]) -> Completion:
    return Completion(
        reply=str(row.get("reply") or ""), finish_reason=row.get("finish_reason"),
        tokens_in=float(row.get("tokens_in") or 0), tokens_out=float(row.get("tokens_out") or 0),
        usd=float(row.get("usd") or 0), seconds=float(row.get("seconds") or 0),
        attempts=int(row.get("attempts") or 0), notes=tuple(row.get("notes") or ()),
        priced=bool(row.get("priced", True)),
    )

