"""The isolated policy's processes: a template, and one fresh fork of it per episode.

:func:`main` is the payload the sandbox's warden (:mod:`dream_gym.sandbox.warden`) runs for an
:class:`~dream_gym.policy_files.isolated.IsolatedPolicy`. It is the *template*:

1. with trusted code only, it imports what policies use (numpy, dream_gym's views and
   built-ins), reads and compiles the policy file (or imports the ``module:Class``), and
   confines itself (the trusted layer: no exec, sockets, ptrace, ... but fork);
2. it forks a probe episode that builds the policy once, so a file that defines no policy or
   fails to import is a load error at once, then says hello to the parent;
3. for every ``reset`` it forks a new **episode** process, which confines itself further (no
   new processes, signals only to itself, a nested Landlock domain, the audit hook), executes
   the policy file's module code afresh and builds a fresh policy object. The template relays
   the episode's messages over pipes of that episode only, and kills and reaps it at the next
   ``reset`` or ``close``.

So every episode starts from the same process state, one in which no earlier episode ran: no
class attribute, module global, cache, open descriptor or pipe content survives an episode,
and the policy's own code never runs in the template. An episode that dies (a crash, the CPU
or memory limit) is reported as ``{"ok": false, "kind": "died", ...}``; the template goes on.
If the parent dies, the template sees its pipe close, kills the episode and exits.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  (imported by the trusted template, so episodes need not read it)

from dream_gym.policy import Policy, RunContext, batch_from, policy_name
from dream_gym.policy_files.errors import PolicyNotFoundError
from dream_gym.policy_files.hardening import install_audit_hook, read_roots_of_python
from dream_gym.policy_files.inprocess import (
    is_file_spec,
    load_module_attr,
    module_attr,
    policy_from_code,
    resolve_in_process,
    where,
)
from dream_gym.policy_files.wire import HEADER, MAX_BATCH, MAX_MESSAGE_BYTES, decode_view, frame, wire_batch
from dream_gym.view import NodeView

Builder = Callable[[], Policy]


# -- framing ----------------------------------------------------------------------------------
def _send(fd: int, message: Mapping[str, Any]) -> None:
    _write_all(fd, frame(message))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read_frame(fd: int) -> bytes | None:
    """One framed message (header included), None at EOF or past the size limit."""
    head = _read_exact(fd, HEADER.size)
    if head is None:
        return None
    size = HEADER.unpack(head)[0]
    if size > MAX_MESSAGE_BYTES:
        return None
    body = _read_exact(fd, size)
    return None if body is None else head + body


# -- what an episode builds -------------------------------------------------------------------
def _builder(spec: str, params: Mapping[str, Any]) -> Builder:
    """A function that builds a fresh policy: for a file, by executing its compiled module code
    in a new module (the source is read and compiled here, in the trusted template)."""
    if is_file_spec(spec):
        path = str(Path(spec).resolve())
        if not Path(path).is_file():
            raise PolicyNotFoundError(f"policy file {path} does not exist")
        code = compile(Path(path).read_bytes(), path, "exec")
        return lambda: policy_from_code(code, path)
    if ":" in spec:
        module_attr(spec)  # import now, in the trusted template
        return lambda: load_module_attr(spec, params)
    resolve_in_process(spec, params)  # an unknown name fails here
    return lambda: resolve_in_process(spec, params)


class _Episode:
    """One episode process and the template's ends of its two pipes."""

    def __init__(self, build: Builder, confinement: Any, harden: bool, source: str, parent_fds: Sequence[int]):
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        self.status: int | None = None  # the wait status, once reaped
        self.pid = os.fork()
        if self.pid == 0:
            for fd in (*parent_fds, self.to_child, self.from_child):
                os.close(fd)
            _episode_main(to_child_r, from_child_w, build, confinement, harden, source)
        os.close(to_child_r)
        os.close(from_child_w)

    def call(self, message: bytes, parent_in: int) -> bytes:
        """Forward one framed message and return the episode's framed reply (or a report of its
        death). Ends the template if the parent goes away meanwhile."""
        try:
            _write_all(self.to_child, message)
        except OSError:
            return frame(self._died())
        poller = select.poll()
        poller.register(self.from_child, select.POLLIN)
        poller.register(parent_in, select.POLLHUP)
        while True:
            events = dict(poller.poll())
            if self.from_child in events:
                break
            if events.get(parent_in, 0) & (select.POLLHUP | select.POLLERR):
                self.end()
                os._exit(0)
        reply = _read_frame(self.from_child)
        if reply is None:
            return frame(self._died())
        return reply

    def _died(self) -> dict[str, Any]:
        self.end()  # a process that closed its pipe but runs on is killed; a dead one keeps its status
        status = self.status
        if status is not None and os.WIFSIGNALED(status):
            return {"ok": False, "kind": "died", "signal": signal.Signals(os.WTERMSIG(status)).name}
        code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
        return {"ok": False, "kind": "died", "exit": code}

    def end(self) -> None:
        """Kill (a no-op on a process that already ended) and reap the episode, close its pipes."""
        if self.pid <= 0:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, self.status = os.waitpid(self.pid, 0)
        self.pid = -1
        for fd in (self.to_child, self.from_child):
            os.close(fd)


def _episode_main(fd_in: int, fd_out: int, build: Builder, confinement: Any, harden: bool, source: str) -> None:
    """An episode process: confine, build a fresh policy, answer until EOF (never returns)."""
    code = 0
    try:
        confinement.confine_episode()
        if harden:
            folders, files = read_roots_of_python()
            install_audit_hook(folders, [*files, *([source] if is_file_spec(source) else [])])
        _serve(fd_in, fd_out, build, source)
    except BaseException:  # noqa: BLE001 - whatever happened, this process ends here
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _serve(fd_in: int, fd_out: int, build: Builder, source: str) -> None:
    policy: Policy | None = None
    nodes: list[NodeView] = []
    while True:
        message = _read_frame(fd_in)
        if message is None:
            return
        request = json.loads(message[HEADER.size:])
        op = request.get("op")
        try:
            if policy is None:
                policy = _build(build, source)
            if op == "probe":
                result: Any = {"ok": True, "name": policy_name(policy)}
            elif op == "reset":
                nodes = []
                policy.reset(RunContext(**request["context"]))
                result = {"ok": True}
            else:
                result = policy.act(decode_view(request["view"], nodes))
        except _BuildError as exc:
            reply = {"ok": False, "kind": "load", "error": str(exc)}
        except MemoryError:
            reply = {"ok": False, "kind": "memory", "error": f"MemoryError in {op}()"}
        except BaseException as exc:  # noqa: BLE001  (SystemExit too: the policy's problem)
            reply = {"ok": False, "kind": "exception",
                     "error": f"{type(exc).__name__}: {exc}"[:2000] + where(exc, source)}
        else:
            reply = result if op in ("probe", "reset") else _batch_reply(result)
        _send(fd_out, reply)
        if not reply["ok"]:
            return  # a failure ends the episode, and its process with it


class _BuildError(Exception):
    pass


def _build(build: Builder, source: str) -> Policy:
    try:
        return build()
    except MemoryError:
        raise
    except BaseException as exc:  # noqa: BLE001 - any failure to build is a load error
        raise _BuildError(f"{type(exc).__name__}: {exc}{where(exc, source)}") from None


def _batch_reply(result: Any) -> dict[str, Any]:
    try:
        batch = wire_batch(batch_from(result))
        if len(batch) > MAX_BATCH:
            raise TypeError(f"policy returned a batch of {len(batch)} ids")
        return {"ok": True, "batch": batch}
    except MemoryError:
        return {"ok": False, "kind": "memory", "error": "MemoryError while sending the batch"}
    except Exception as exc:  # noqa: BLE001 - a result that is no batch is a protocol error
        return {"ok": False, "kind": "protocol", "error": f"{exc}"[:2000]}


# -- the template -----------------------------------------------------------------------------
def main(args: Sequence[str], confinement: Any) -> None:
    """The template: ``args`` = (fd to read from, fd to write to, JSON config)."""
    fd_in, fd_out = int(args[0]), int(args[1])
    config = json.loads(args[2])
    spec, harden = config["spec"], bool(config.get("harden", True))
    source = str(Path(spec).resolve()) if is_file_spec(spec) else spec
    try:
        build = _builder(spec, config.get("params") or {})
    except BaseException as exc:  # noqa: BLE001  (report anything, then end)
        kind = "notfound" if isinstance(exc, PolicyNotFoundError) else (
            "memory" if isinstance(exc, MemoryError) else "load")
        _send(fd_out, {"ok": False, "kind": kind, "error": f"{type(exc).__name__}: {exc}{where(exc, source)}"})
        return
    try:
        notes = confinement.confine(untrusted=False)
    except Exception as exc:  # noqa: BLE001 - the kernel refused a layer: nothing untrusted runs
        _send(fd_out, {"ok": False, "kind": "sandbox", "error": str(exc)})
        return
    probe = _Episode(build, confinement, harden, source, (fd_in, fd_out))
    hello = json.loads(probe.call(frame({"op": "probe"}), fd_in)[HEADER.size:])
    probe.end()
    if not hello.get("ok"):
        _send(fd_out, hello if hello.get("kind") != "died" else {
            "ok": False, "kind": "load", "error": f"the policy's process died while loading ({_how(hello)})"})
        return
    _send(fd_out, {"ok": True, "name": hello.get("name"), "pid": os.getpid(),
                   "hardening": [*notes, *(["audit-hook"] if harden else [])]})
    _relay(fd_in, fd_out, build, confinement, harden, source)


def _how(died: Mapping[str, Any]) -> str:
    return f"killed by {died['signal']}" if died.get("signal") else f"exit code {died.get('exit')}"


def _relay(fd_in: int, fd_out: int, build: Builder, confinement: Any, harden: bool, source: str) -> None:
    episode: _Episode | None = None
    while True:
        message = _read_frame(fd_in)
        op = None if message is None else json.loads(message[HEADER.size:]).get("op")
        if op in (None, "close"):
            if episode is not None:
                episode.end()
            return
        if op == "reset":
            if episode is not None:
                episode.end()
            episode = _Episode(build, confinement, harden, source, (fd_in, fd_out))
        if episode is None:
            _send(fd_out, {"ok": False, "kind": "protocol", "error": f"{op} before reset"})
            continue
        assert message is not None
        _write_all(fd_out, episode.call(message, fd_in))


__all__ = ["main"]
