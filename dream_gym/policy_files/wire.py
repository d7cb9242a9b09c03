"""The wire protocol between a parent and an isolated policy's processes.

Messages between the parent and an episode process are framed by a 4-byte big-endian length
(:data:`HEADER`) over that episode's two pipes (parent -> episode, episode -> parent), separate
from the child's stdout and stderr. Each direction has its own encoding, for one reason: the
parent never decodes anything but JSON from untrusted code.

* Parent to episode (:func:`frame_request`): pickled dicts, ``{"op": "reset", "context":
  RunContext}`` and ``{"op": "act", "view": encode_view(view, known)}``. Only the parent
  writes them and only the episode reads them; pickle carries the immutable node views as they
  are, several times faster than JSON both ways (a decision's view is a few kB of code and
  diagnostics).
* Episode to parent (:func:`frame`): JSON, one reply per request: ``{"ok": true}`` after
  reset, ``{"ok": true, "batch": [...]}`` after act, or ``{"ok": false, "kind": "exception" |
  "load" | "memory" | "protocol", "error": text}`` (the episode ends after a failure). A reply
  is read with :func:`parse_reply`: at most :data:`MAX_REPLY_BYTES`, and checked to be one
  object holding at most one list of scalars *before* it is parsed, so that no reply can make
  its reader build more than a few objects per byte.

The template speaks unframed JSON over its control socket (one message per packet): a hello
after loading (``{"ok": true, "name", "hardening", "pid"}`` or ``{"ok": false, "kind",
"error"}``); then it answers ``{"op": "next"}`` with ``{"ok": true}`` and ``{"op": "status"}``
with ``{"ok": false, "kind": "died", "signal" | "exit"}``; ``ahead`` and ``next`` carry the
two pipe ends of an episode to fork, ``close`` ends it.

Views are sent incrementally: ``known`` says how many nodes of the episode the receiver already
holds, and only the nodes after them are sent; :func:`decode_view` rebuilds the same
:class:`~dream_gym.replay.view.PrefixView`. The child never receives a world or a world path.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
import struct
from collections.abc import Mapping
from typing import Any

from dream_gym.replay.node_stores import ReceivedNodes
from dream_gym.replay.node_view import NodeView
from dream_gym.replay.view import PrefixView, SentNodes, unsent_nodes

HEADER = struct.Struct(">I")
MAX_MESSAGE_BYTES = 64 << 20  # a request (a view of a large world) larger than this is refused
#: A reply larger than this is a protocol error: a batch of MAX_BATCH ids of seven digits fits.
#: Small, because this process parses a reply while holding the interpreter's lock, which the
#: work it does for the other episodes of the task needs (a forged 1 MB reply held it 25 ms, a
#: 64 KiB one 1.65 ms: enough to push the answer to the next episode out of its turn).
MAX_REPLY_BYTES = 16 << 10
MAX_CONTROL_BYTES = 1 << 16  # a packet on the template's control socket (hello, reply, status)
MAX_BATCH = 1_024  # far above any W: a longer batch is the policy's protocol error
#: A JSON string, or an unterminated one to the end: every match consumes what it scanned, so
#: blanking the strings of a hostile reply (``"\\"\\"...``) takes one pass, never one per quote.
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.|\\\Z)*+(?:"|\Z)', re.DOTALL)
_REPLY_FIELDS = 8  # the commas a reply needs besides its batch's


def frame(message: Mapping[str, Any]) -> bytes:
    """One reply as bytes on the pipe: the length header, then compact UTF-8 JSON."""
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return HEADER.pack(len(data)) + data


class ReplyError(ValueError):
    """A reply that is no reply: too large, of the wrong shape, or not JSON."""


def parse_reply(body: bytes, limit: int = MAX_REPLY_BYTES) -> dict[str, Any]:
    """One reply from an untrusted process, parsed: a JSON object whose values are scalars and
    at most one list of scalars. The shape is checked on the bytes first (the brackets and
    commas outside strings counted), so a reply of a million empty objects, lists or strings is
    refused before any object is made; :class:`ReplyError` says why. A reply longer than
    ``limit`` bytes is refused first."""
    if len(body) > limit:
        raise ReplyError(f"reply of {len(body)} bytes (limit {limit})")
    problem = _shape_problem(body)
    if problem:
        raise ReplyError(problem)
    try:
        reply = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ReplyError(f"unreadable reply ({exc})") from None
    if not isinstance(reply, dict):
        raise ReplyError("reply is not a JSON object")
    return reply


def _shape_problem(body: bytes) -> str:
    """Why ``body`` cannot be one object holding at most one list of at most :data:`MAX_BATCH`
    values, judged by its brackets and commas outside strings ("" when it can be). A reply with
    few brackets and commas in all (an honest one) needs no look at its strings; otherwise the
    gaps between strings are counted in place, a string at a time, and the count stops at the
    first bound passed (no copy of the reply is made)."""
    most_commas = MAX_BATCH + _REPLY_FIELDS
    counts = [0, 0, 0]  # "{", "[", ","
    start = 0
    quick = body.count(b"{") <= 1 and body.count(b"[") <= 1 and body.count(b",") <= most_commas
    for match in () if quick else _JSON_STRING.finditer(body):
        _count_between(body, start, match.start(), counts)
        start = match.end()
        if counts[0] > 1 or counts[1] > 1 or counts[2] > most_commas:
            break
    else:
        _count_between(body, start, len(body), counts)
    if counts[0] != 1 or counts[1] > 1 or not body.lstrip().startswith(b"{"):
        return "reply is not one JSON object holding at most one list"
    if counts[2] > most_commas:
        return f"reply holds more than {MAX_BATCH} values"
    return ""


def _count_between(body: bytes, start: int, end: int, counts: list[int]) -> None:
    for i, mark in enumerate((b"{", b"[", b",")):
        counts[i] += body.count(mark, start, end)


def frame_request(message: Mapping[str, Any]) -> bytes:
    """One request of the parent as bytes on the pipe: the length header, then the pickle."""
    data = pickle.dumps(dict(message), protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def read_request(body: bytes) -> dict[str, Any]:
    """A request from :func:`frame_request`'s body (in the episode: the parent wrote it)."""
    request = pickle.loads(body)
    if not isinstance(request, dict):
        raise TypeError(f"a request is a dict, not {type(request).__name__}")
    return request


_VIEW_FIELDS = tuple(f.name for f in dataclasses.fields(PrefixView) if f.name != "nodes" and not f.name.startswith("_"))


def encode_view(view: PrefixView, sent: SentNodes | None = None
                ) -> tuple[tuple[int, tuple[NodeView, ...], dict[str, Any]], SentNodes]:
    """What a request carries of a view, and what the receiver holds once it is sent: ``known``
    (how many of the view's nodes the receiver holds, given ``sent``: what it held before), the
    nodes from index ``known`` on, and the view's other fields. A decision costs the nodes
    revealed since the last one, not the episode's (:func:`dream_gym.replay.view.unsent_nodes`)."""
    known, new, holds = unsent_nodes(view, sent)
    return (known, new, {f: getattr(view, f) for f in _VIEW_FIELDS}), holds


def decode_view(data: tuple[int, tuple[NodeView, ...], dict[str, Any]], nodes: ReceivedNodes
                ) -> tuple[PrefixView, ReceivedNodes]:
    """Rebuild a view from :func:`encode_view`'s data over ``nodes`` (the receiver's nodes so
    far): the view, and the store that holds its nodes now (pass it to the next call). The
    view's ``nodes`` tuple is built when the policy first reads it."""
    known, new, fields = data
    nodes = nodes.extended(known, new)
    return PrefixView.over(nodes, len(nodes), fields), nodes


def wire_batch(batch: list[Any]) -> list[Any]:
    """JSON-able batch entries: integers (numpy ones too) as int; other scalars as they are, so
    the replay rules reject them exactly as in-process; anything else as its repr."""
    out: list[Any] = []
    for item in batch:
        if isinstance(item, (bool, str, float)) or item is None:
            out.append(item)
        elif isinstance(item, int):
            out.append(int(item))
        elif hasattr(item, "__index__"):
            out.append(int(item.__index__()))
        else:
            out.append(repr(item)[:200])
    return out


__all__ = ["HEADER", "MAX_BATCH", "MAX_CONTROL_BYTES", "MAX_MESSAGE_BYTES", "MAX_REPLY_BYTES", "ReplyError",
           "decode_view", "encode_view", "frame", "frame_request", "parse_reply", "read_request", "wire_batch"]
