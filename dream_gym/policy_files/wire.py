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
  "load" | "memory" | "protocol", "error": text}`` (the episode ends after a failure).

The template speaks unframed JSON over its control socket (one message per packet): a hello
after loading (``{"ok": true, "name", "hardening", "pid"}`` or ``{"ok": false, "kind",
"error"}``); then it answers ``{"op": "next"}`` with ``{"ok": true}`` and ``{"op": "status"}``
with ``{"ok": false, "kind": "died", "signal" | "exit"}``; ``ahead`` and ``next`` carry the
two pipe ends of an episode to fork, ``close`` ends it.

Views are sent incrementally: ``known`` says how many nodes of the episode the receiver already
holds, and only the nodes after them are sent; :func:`decode_view` rebuilds the same
:class:`~dream_gym.view.PrefixView`. The child never receives a world or a world path.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import struct
from collections.abc import Mapping
from typing import Any

from dream_gym.view import NodeView, PrefixView

HEADER = struct.Struct(">I")
MAX_MESSAGE_BYTES = 64 << 20  # a reply larger than this is a protocol error
MAX_CONTROL_BYTES = 1 << 16  # a packet on the template's control socket (hello, reply, status)
MAX_BATCH = 100_000


def frame(message: Mapping[str, Any]) -> bytes:
    """One reply as bytes on the pipe: the length header, then compact UTF-8 JSON."""
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return HEADER.pack(len(data)) + data


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


def encode_view(view: PrefixView, known: int = 0) -> tuple[int, tuple[NodeView, ...], dict[str, Any]]:
    """What a request carries of a view: ``known``, the nodes from index ``known`` on (the
    receiver keeps the ones before) and the view's other fields."""
    return known, view.nodes[known:], {f: getattr(view, f) for f in _VIEW_FIELDS}


def decode_view(data: tuple[int, tuple[NodeView, ...], dict[str, Any]], nodes: list[NodeView]) -> PrefixView:
    """Rebuild a view from :func:`encode_view`'s data; ``nodes`` (the receiver's list of nodes
    so far) is cut to ``known`` and extended in place."""
    known, new, fields = data
    if known > len(nodes):
        raise ValueError(f"view refers to {known} known nodes, only {len(nodes)} received")
    del nodes[known:]
    nodes.extend(new)
    return PrefixView.build(fields, nodes=tuple(nodes))


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


__all__ = ["HEADER", "MAX_BATCH", "MAX_CONTROL_BYTES", "MAX_MESSAGE_BYTES", "decode_view", "encode_view", "frame", "frame_request",
           "read_request", "wire_batch"]
