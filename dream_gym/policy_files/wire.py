"""The wire protocol between a parent and an isolated policy child.

Messages between the parent and an episode process are JSON objects, each framed by a 4-byte
big-endian length (:data:`HEADER`), over that episode's two pipes (parent -> episode, episode ->
parent), separate from the child's stdout and stderr.

Parent to episode: ``{"op": "reset", "context": RunContext fields}``, ``{"op": "act", "view":
encode_view(view, known)}``. Episode to parent, one reply per message: ``{"ok": true}`` after
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
import struct
from collections.abc import Mapping
from typing import Any

from dream_gym.view import NODE_FIELDS, NodeView, PrefixView, freeze, thaw

HEADER = struct.Struct(">I")
MAX_MESSAGE_BYTES = 64 << 20  # a reply larger than this is a protocol error
MAX_BATCH = 100_000


def frame(message: Mapping[str, Any], *, allow_nan: bool = True) -> bytes:
    """One message as bytes on the pipe: the length header, then compact UTF-8 JSON."""
    data = json.dumps(message, allow_nan=allow_nan, separators=(",", ":")).encode("utf-8")
    return HEADER.pack(len(data)) + data


_VIEW_FIELDS = tuple(f.name for f in dataclasses.fields(PrefixView) if f.name != "nodes" and not f.name.startswith("_"))
_NODE_FIELDS = NODE_FIELDS


def _node_to_wire(n: NodeView) -> dict[str, Any]:
    data = {f: getattr(n, f) for f in _NODE_FIELDS}
    data["cost"] = thaw(n.cost)
    data["metrics"] = thaw(n.metrics)
    return data


def encode_view(view: PrefixView, known: int = 0) -> dict[str, Any]:
    """The view as JSON-ready data, the same as ``view.to_dict()`` except that ``nodes`` holds
    only the nodes from index ``known`` on and ``known`` says how many the receiver keeps."""
    data: dict[str, Any] = {f: getattr(view, f) for f in _VIEW_FIELDS}
    data["frontier"] = list(view.frontier)
    data["known"] = known
    data["nodes"] = [_node_to_wire(n) for n in view.nodes[known:]]
    return data


def decode_view(data: Mapping[str, Any], nodes: list[NodeView]) -> PrefixView:
    """Rebuild a view from :func:`encode_view` data; ``nodes`` (the receiver's list of nodes
    so far) is cut to ``known`` and extended in place."""
    known = int(data.get("known", 0))
    if known > len(nodes):
        raise ValueError(f"view refers to {known} known nodes, only {len(nodes)} received")
    del nodes[known:]
    nodes.extend(NodeView(**{**n, "cost": freeze(n.get("cost")), "metrics": freeze(n.get("metrics"))})
                 for n in data["nodes"])
    fields = {f: data[f] for f in _VIEW_FIELDS}
    fields["frontier"] = tuple(fields["frontier"])
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


__all__ = ["HEADER", "MAX_BATCH", "MAX_MESSAGE_BYTES", "decode_view", "encode_view", "frame", "wire_batch"]
