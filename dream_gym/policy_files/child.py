"""The isolated policy child: load the policy, then answer reset/act messages until EOF.

:data:`BOOT` is the program the parent starts with ``python -s -B -c``: it drops the working
folder from ``sys.path`` (as ``-I`` would), sets the resource limits (the source of
:func:`dream_gym.isolation.apply_limits` is pasted in, so nothing else is imported first), then calls :func:`main` with the two protocol pipe descriptors and the JSON
config (spec, params, harden). :func:`main` hardens the process
(:mod:`dream_gym.policy_files.hardening`), builds the policy with
:func:`~dream_gym.policy_files.specs.resolve_in_process` and speaks the protocol of
:mod:`dream_gym.policy_files.wire`. Every failure of the policy is reported as a message; the
child itself only ends at EOF, on ``close``, or when the parent kills it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dream_gym.policy import RunContext, batch_from, policy_name
from dream_gym.policy_files.errors import PolicyNotFoundError
from dream_gym.policy_files.hardening import harden
from dream_gym.policy_files.specs import is_file_spec, resolve_in_process, where
from dream_gym.policy_files.wire import HEADER, MAX_BATCH, decode_view, frame, wire_batch
from dream_gym.view import NodeView

BOOT = """
import os, sys
sys.path[:] = [p for p in sys.path if p not in ("", ".", os.getcwd())]
{limits_src}
apply_limits({memory_mb!r}, {cpu_s!r}, 16, None)
del apply_limits
from dream_gym.policy_files.child import main
main(sys.argv[1:])
"""


def main(args: Sequence[str]) -> None:
    """Run the child: ``args`` = (fd to read from, fd to write to, JSON config)."""
    fd_in, fd_out = int(args[0]), int(args[1])
    config = json.loads(args[2])
    loads, write, read = json.loads, os.write, os.read

    def send(message: dict[str, Any]) -> None:
        view = memoryview(frame(message))
        while view:
            view = view[write(fd_out, view):]

    def recv_exact(n: int) -> bytes | None:
        chunks, got = [], 0
        while got < n:
            chunk = read(fd_in, min(n - got, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    spec = config["spec"]
    source = str(Path(spec).resolve()) if is_file_spec(spec) else spec
    try:
        notes = harden(source if is_file_spec(spec) else None) if config.get("harden", True) else []
        policy = resolve_in_process(spec, config.get("params") or {})
        name = policy_name(policy)
    except BaseException as exc:  # noqa: BLE001  (report anything, then end)
        kind = "notfound" if isinstance(exc, PolicyNotFoundError) else (
            "memory" if isinstance(exc, MemoryError) else "load")
        send({"ok": False, "kind": kind, "error": f"{type(exc).__name__}: {exc}"})
        return
    send({"ok": True, "name": name, "hardening": notes, "pid": os.getpid()})

    nodes: list[NodeView] = []
    while True:
        head = recv_exact(HEADER.size)
        if head is None:
            return
        body = recv_exact(HEADER.unpack(head)[0])
        if body is None:
            return
        message = loads(body)
        op = message.get("op")
        if op == "close":
            return
        try:
            if op == "reset":
                nodes = []
                policy.reset(RunContext(**message["context"]))
                send({"ok": True})
                continue
            view = decode_view(message["view"], nodes)
            result = policy.act(view)
        except MemoryError:
            send({"ok": False, "kind": "memory", "error": f"MemoryError in {op}()"})
            continue
        except BaseException as exc:  # noqa: BLE001  (SystemExit too: the policy's problem)
            send({"ok": False, "kind": "exception",
                  "error": f"{type(exc).__name__}: {exc}"[:2000] + where(exc, source)})
            continue
        try:
            batch = wire_batch(batch_from(result))
            if len(batch) > MAX_BATCH:
                raise TypeError(f"policy returned a batch of {len(batch)} ids")
            send({"ok": True, "batch": batch})
        except MemoryError:
            send({"ok": False, "kind": "memory", "error": "MemoryError while sending the batch"})
        except Exception as exc:
            send({"ok": False, "kind": "protocol", "error": f"{exc}"[:2000]})


__all__ = ["BOOT", "main"]
