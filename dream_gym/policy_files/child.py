"""The isolated policy's processes: a template, and one fresh fork of it per episode.

:func:`main` is the payload the sandbox's warden (:mod:`dream_gym.infrastructure.sandbox.warden`) runs for an
:class:`~dream_gym.policy_files.isolated.IsolatedPolicy`. It is the *template*:

1. with trusted code only, it imports the policy interface (not numpy, nor the replay), reads
   and compiles the policy file (or imports the ``module:Class``), confines itself (the
   trusted layer: no exec, sockets, ptrace, ... but fork), then imports every module the
   file names (:mod:`dream_gym.policy_files.ahead`: an episode reads no file);
2. it forks a probe episode that builds the policy once, so a file that defines no policy or
   fails to import is a load error at once, then says hello to the parent over its *control
   socket* (one end of a socket pair; the only descriptor it holds besides stdio);
3. with every set of four pipe ends the parent sends over that socket (requests, replies,
   stdout, stderr) it forks one **episode** process, ahead of its use: while the current
   episode runs, the next one is forked and confined. An episode process confines itself
   further at once (no new processes, no signals, no pid of its own, a nested Landlock domain,
   the audit hook the template built) and waits; at its ``reset`` it executes the policy
   file's module code afresh and builds a fresh policy object. It talks to the parent directly
   over its own two pipes (no process in between, so a decision costs one round trip) and
   prints on its own two; the template keeps no copy of them. At the parent's ``next`` the
   template kills the current episode before the parent sends the next one anything, and
   reaps it later.

So every episode starts from the same process state, one in which no earlier episode ran: no
class attribute, module global, cache, open descriptor, open file description (not even
stdio's: its flags, owner or signal) or pipe content survives an episode, and the policy's own
code never runs in the template. An episode that dies (a crash, the CPU
or memory limit) closes its pipe; the parent asks the template how it ended (``status``). If
the parent dies, the template sees its socket close, kills its episodes and exits; an
episode sees its pipe close and exits.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import select
import signal
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from dream_gym.infrastructure.printable import NAME_CHARS, TEXT_CHARS, printable
from dream_gym.policy import Policy, batch_from, policy_name
from dream_gym.policy_files.ahead import import_ahead, named_in, only_imported_modules
from dream_gym.policy_files.errors import PolicyNotFoundError
from dream_gym.policy_files.hardening import AuditHook, audit_hook, install_audit_hook, read_roots_of_python
from dream_gym.policy_files.inprocess import (
    is_file_spec,
    load_module_attr,
    module_attr,
    policy_from_code,
    resolve_in_process,
    where,
)
from dream_gym.policy_files.wire import (
    HEADER,
    MAX_BATCH,
    MAX_CONTROL_BYTES,
    MAX_MESSAGE_BYTES,
    ReplyError,
    decode_view,
    frame,
    frame_request,
    parse_reply,
    read_request,
    wire_batch,
)
from dream_gym.replay.node_stores import ReceivedNodes

Builder = Callable[[], Policy]


# -- framing ----------------------------------------------------------------------------------
def _send(fd: int, message: Mapping[str, Any]) -> None:
    _write_all(fd, frame(message))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class _Frames:
    """Framed messages read from ``fd`` in as few reads as they were written in (the bytes read
    past a whole message wait for the next one)."""

    def __init__(self, fd: int, limit: int = MAX_MESSAGE_BYTES):
        self.fd, self.limit = fd, limit
        self.pending = b""

    def next(self, ready: Callable[[int], None] | None = None) -> bytes | None:
        """The next message (header included); None at EOF or past the size limit. ``ready(fd)``
        is asked before each read (waits, and may raise)."""
        data = bytearray(self.pending)
        while True:
            size = HEADER.unpack_from(data)[0] if len(data) >= HEADER.size else 0
            if size > self.limit:
                return None
            if len(data) >= HEADER.size and len(data) >= HEADER.size + size:
                # copied out through a memoryview: slicing the bytearray would copy the message once
                # more (a view of a large world held three times in the episode's memory limit)
                with memoryview(data) as read:
                    self.pending = bytes(read[HEADER.size + size:])
                    return bytes(read[:HEADER.size + size])
            if ready is not None:
                ready(self.fd)
            chunk = os.read(self.fd, max(1 << 16, min(HEADER.size + size - len(data), 1 << 24)))
            if not chunk:
                return None
            data += chunk


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


#: The largest reply of the probe, which the template reads (not the evaluating process, whose
#: limit is MAX_REPLY_BYTES): a name too long is then said to be too long.
PROBE_REPLY_BYTES = 1 << 20
#: The pipe ends an episode is forked on: requests in, replies out, its stdout, its stderr.
Channel = tuple[int, int, int, int]
#: The most descriptors an episode may hold. Pipe buffers count against one quota per user
#: (``/proc/sys/fs/pipe-user-pages-soft``, 16,384 pages by default), past which every new pipe of
#: that user gets one page: an episode with thousands of pipes could make that visible to an
#: episode running beside it. 64 descriptors of 16 pages each stay far below the quota.
EPISODE_DESCRIPTORS = 64


class _Episode:
    """One episode process (fresh for each episode) and, for the probe only, the template's ends
    of its pipes.

    The process is forked, confined and hardened at once, then waits for its first message.
    An episode of the parent talks to the parent over the pipe ends the parent sent for it
    (``channel``; the template keeps no copy); the probe talks to the template. Forked, it keeps
    no descriptor but its pipe ends: not the control socket, not another episode's pipes, and
    not the template's stdio either. Its stdin, stdout and stderr are pipes made for it alone
    (the parent's, for an episode; the template's, for the probe, which forwards what it
    prints), so nothing it sets on an open file description (its flags, owner, signal, a
    pipe's size) is seen by a process forked after it."""

    def __init__(self, build: Builder, confinement: Any, hook: AuditHook | None, source: str,
                 channel: Channel | None = None):
        self.output: dict[int, int] = {}  # the probe's: its stdout/stderr read end -> the template's fd
        if channel is None:
            to_child_r, self.to_child = os.pipe()
            from_child, from_child_w = os.pipe()
            (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe()
            self.output = {out_r: 1, err_r: 2}
            self.replies: _Frames | None = _Frames(from_child, PROBE_REPLY_BYTES)
        else:
            (to_child_r, from_child_w, out_w, err_w), self.to_child, self.replies = channel, -1, None
        self.status: int | None = None  # the wait status, once reaped
        for stream in (sys.stdout, sys.stderr):
            _flush(stream)  # nothing of the template's buffers is printed again by the episode
        self.pid = os.fork()
        if self.pid == 0:
            _forget_earlier_episodes(self)
            gc.collect()  # the generations' counts, which the template's allocations moved, start at 0
            gc.enable()
            _own_stdio(out_w, err_w)
            _keep_only(to_child_r, from_child_w)
            resource.setrlimit(resource.RLIMIT_NOFILE, (EPISODE_DESCRIPTORS, EPISODE_DESCRIPTORS))
            _episode_main(to_child_r, from_child_w, build, confinement, hook, source)
        for fd in (to_child_r, from_child_w, out_w, err_w):
            os.close(fd)

    def call(self, message: bytes, parent: int) -> tuple[dict[str, Any], bool]:
        """Forward one framed message to the probe and return its reply and whether it is the
        template's own report of the probe's death (trusted) rather than what the probe said;
        raises :class:`_ParentGone` if the parent goes away meanwhile."""
        assert self.replies is not None
        try:
            _write_all(self.to_child, message)
        except OSError:
            return self.died(), True

        def ready(fd: int) -> None:
            if not _readable(fd, parent, self.output):
                raise _ParentGone

        reply = self.replies.next(ready)
        if reply is None:
            return self.died(), True
        try:
            return parse_reply(reply[HEADER.size:], PROBE_REPLY_BYTES), False
        except ReplyError as exc:
            return {"ok": False, "kind": "protocol", "error": str(exc)}, False

    def died(self) -> dict[str, Any]:
        """How the process ended: it is killed first if it runs on (it closed its pipe)."""
        self.end()  # a dead one keeps its status
        status = self.status
        if status is not None and os.WIFSIGNALED(status):
            return {"ok": False, "kind": "died", "signal": signal.Signals(os.WTERMSIG(status)).name}
        code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
        return {"ok": False, "kind": "died", "exit": code}

    def kill(self) -> None:
        """Kill the process (a no-op on one that already ended) and close the template's pipe
        ends: it runs no more of its code; :meth:`reap` collects its status."""
        if self.pid > 0:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.to_child >= 0:
            os.close(self.to_child)
            self.to_child = -1
        if self.replies is not None:
            os.close(self.replies.fd)
            self.replies = None
        for fd in self.output:
            os.close(fd)
        self.output = {}

    def reap(self, block: bool = True) -> bool:
        """Collect the status of the killed process (True once it is collected)."""
        if self.pid > 0:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
            if pid == 0:
                return False
            self.pid, self.status = -1, status
        return True

    def end(self) -> None:
        """Kill and reap the episode."""
        self.kill()
        self.reap()


class _ParentGone(Exception):
    pass


def _readable(fd: int, parent_in: int, forward: dict[int, int]) -> bool:
    """Wait until ``fd`` can be read; False when the parent's pipe closes first. Meanwhile what
    arrives on a ``forward`` pipe is written to the descriptor it maps to (the probe's output,
    to the template's own stdout and stderr, which the parent drains)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poller.register(parent_in, select.POLLHUP)
    for source in forward:
        poller.register(source, select.POLLIN)
    while True:
        events = dict(poller.poll())
        for source, target in forward.items():
            if events.get(source):
                data = os.read(source, 1 << 16)
                if data:
                    _write_all(target, data)
                else:
                    poller.unregister(source)
        if fd in events:
            return True
        if events.get(parent_in, 0) & (select.POLLHUP | select.POLLERR):
            return False


def _own_stdio(out_w: int, err_w: int) -> None:
    """In a freshly forked episode: stdin a pipe of its own whose write end is closed (a read
    ends at once), stdout and stderr the write ends made for it."""
    stdin_r, stdin_w = os.pipe()
    os.close(stdin_w)
    for fd, target in ((stdin_r, 0), (out_w, 1), (err_w, 2)):
        os.dup2(fd, target)
        os.close(fd)


def _flush(stream: Any) -> None:
    try:
        stream.flush()
    except (OSError, ValueError):
        pass


def _keep_only(*fds: int) -> None:
    """Close every descriptor above stderr but ``fds`` (in a freshly forked episode)."""
    low = 3
    for fd in sorted(fds):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


#: The modules of the file that the template failed to import, with their errors (set once in
#: the template, before it forks an episode).
_FAILED_AHEAD: dict[str, str] = {}


def _forget_earlier_episodes(episode: _Episode) -> None:
    """In a just-forked episode: drop the template's record of the episodes it forked before
    (the one running, those retired and not yet reaped, their pids and statuses). The template's
    frames are on the episode's stack, reachable from untrusted code (a caught exception's
    traceback); what they hold must be the same for every episode, or it counts them."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        for value in frame.f_locals.values():
            if isinstance(value, _Episodes):
                value.dying, value.ready, value.current, value.fork_error = [], None, None, ""
            elif isinstance(value, _Episode) and value is not episode:
                value.__dict__.clear()
        frame = frame.f_back


def _episode_main(fd_in: int, fd_out: int, build: Builder, confinement: Any, hook: AuditHook | None,
                  source: str) -> None:
    """An episode process: confine, build a fresh policy, answer until EOF (never returns)."""
    code = 0
    try:
        confinement.confine_episode()
        if not confinement.unsafe:
            only_imported_modules(_FAILED_AHEAD)
        if hook is not None:  # after the confinement: its ctypes calls are what the hook refuses
            install_audit_hook(hook)
        _serve(fd_in, fd_out, build, source)
    except BaseException:  # noqa: BLE001 - whatever happened, this process ends here
        code = 1
    for stream in (sys.stdout, sys.stderr):
        _flush(stream)
    os._exit(code)


def _serve(fd_in: int, fd_out: int, build: Builder, source: str) -> None:
    policy: Policy | None = None
    nodes = ReceivedNodes()
    requests = _Frames(fd_in)
    while True:
        message = requests.next()
        if message is None:
            return
        request = read_request(message[HEADER.size:])
        op = request.get("op")
        try:
            if policy is None:
                policy = _build(build, source)
            if op == "probe":
                result: Any = {"ok": True, "name": policy_name(policy)}
            elif op == "reset":
                nodes = ReceivedNodes()
                policy.reset(request["context"])
                result = {"ok": True}
            else:
                view, nodes = decode_view(request["view"], nodes)
                result = policy.act(view)
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
def _name_the_temp_folder() -> None:
    """``tempfile`` finds its folder by writing a file in it, and raises where it cannot: a
    package that asks for the folder as it imports (dill, and torch where dill is installed)
    failed to import. The folder is named instead, before the file's imports (a retry after one
    failed would find a package such as torch half imported); writing there still fails."""
    import tempfile

    tempfile.tempdir = os.environ.get("TMPDIR") or "/tmp"


def main(args: Sequence[str], confinement: Any) -> None:
    """The template: ``args`` = (the control socket's descriptor, JSON config)."""
    control = socket.socket(fileno=int(args[0]))
    config = json.loads(args[1])
    spec, harden = config["spec"], bool(config.get("harden", True))
    source = str(Path(spec).resolve()) if is_file_spec(spec) else spec
    try:
        build = _builder(spec, config.get("params") or {})
        hook = _hook(confinement, source) if harden else None
    except BaseException as exc:  # noqa: BLE001  (report anything, then end)
        kind = "notfound" if isinstance(exc, PolicyNotFoundError) else (
            "memory" if isinstance(exc, MemoryError) else "load")
        _tell(control, {"ok": False, "kind": kind, "error": f"{type(exc).__name__}: {exc}{where(exc, source)}"})
        return
    try:
        notes = confinement.confine(untrusted=False)
    except Exception as exc:  # noqa: BLE001 - the kernel refused a layer: nothing untrusted runs
        _tell(control, {"ok": False, "kind": "sandbox", "error": str(exc)})
        return
    if is_file_spec(spec):  # confined first: what these imports do, the sandbox allows
        _name_the_temp_folder()
        _FAILED_AHEAD.update(import_ahead(named_in(Path(source).read_bytes())))
    if confinement.load_mapped_pages():  # all imported: every library an episode can touch is mapped
        notes = [*notes, "mapped-pages-cached"]
    # Every object so far is the template's for good: the collector of an episode never scans
    # them (a scan writes to every object's header, which copies each page the fork shared).
    gc.freeze()
    # Nor does the template collect from here on: its collector's statistics, which a fork
    # inherits, would count the episodes forked (each episode collects once when it starts).
    gc.disable()
    episodes = _Episodes(build, confinement, hook, source)
    probe = episodes.fork()
    try:
        reply, died = probe.call(frame_request({"op": "probe"}), control.fileno())
    except _ParentGone:
        return
    finally:
        probe.end()
    if died:
        _tell(control, {"ok": False, "kind": "load", "error": f"the policy's process died while loading ({_how(reply)})"})
        return
    hello = _hello(reply)
    if not hello["ok"]:
        _tell(control, hello)
        return
    _tell(control, {**hello, "pid": os.getpid(), "hardening": [*notes, *(["audit-hook"] if harden else [])]})
    _serve_parent(control, episodes)


def _hello(reply: Mapping[str, Any]) -> dict[str, Any]:
    """What the parent is told of the probe's reply, which untrusted code wrote: the policy's
    name (a string of at most :data:`NAME_CHARS` printable characters: a longer one is the
    policy's error) or the error it reported, as a load error (or a memory error); never a kind
    the template alone reports (a refused sandbox, a missing file)."""
    if reply.get("ok") is not True:
        kind = "memory" if reply.get("kind") == "memory" else "load"
        return {"ok": False, "kind": kind, "error": printable(reply.get("error", "no error given"), TEXT_CHARS, lines=True)}
    name = reply.get("name")
    if not isinstance(name, str) or not name:
        return {"ok": False, "kind": "load", "error": f"the policy's name is {type(name).__name__}, not a non-empty string"}
    if len(name) > NAME_CHARS:
        return {"ok": False, "kind": "load",
                "error": f"the policy's name is {len(name)} characters long (the limit is {NAME_CHARS})"}
    return {"ok": True, "name": printable(name, NAME_CHARS)}


def _tell(control: socket.socket, message: Mapping[str, Any]) -> None:
    """One packet to the parent; an error too long for a packet is cut (a file's broken line
    may be megabytes long)."""
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_CONTROL_BYTES and "error" in message:
        data = json.dumps({**message, "error": printable(message["error"], TEXT_CHARS, lines=True)}).encode("utf-8")
    control.sendall(data)


def _hook(confinement: Any, source: str) -> AuditHook:
    """The episodes' audit hook, built once here: its read roots are the sandbox's own."""
    folders, files = read_roots_of_python(getattr(confinement, "read", None) or None)
    return audit_hook(folders, [*files, *([source] if is_file_spec(source) else [])])


def _how(died: Mapping[str, Any]) -> str:
    return f"killed by {died['signal']}" if died.get("signal") else f"exit code {died.get('exit')}"


class _Episodes:
    """Forks the parent's episode processes, one ahead: a ``next`` finds a confined episode
    waiting, so forking it is not on the parent's path."""

    def __init__(self, build: Builder, confinement: Any, hook: AuditHook | None, source: str):
        self.build, self.confinement, self.hook, self.source = build, confinement, hook, source
        self.ready: _Episode | None = None
        self.current: _Episode | None = None  # the episode the parent talks to
        self.fork_error = ""
        self.dying: list[_Episode] = []  # killed, not yet reaped (their memory is freed meanwhile)

    def fork(self, channel: Channel | None = None) -> _Episode:
        return _Episode(self.build, self.confinement, self.hook, self.source, channel)

    def fork_ahead(self, channel: Channel) -> None:
        """The next episode, on the pipe ends the parent sent (closed here once it holds them)."""
        if self.ready is not None:
            self.retire(self.ready)
        try:
            self.ready, self.fork_error = self.fork(channel), ""
        except OSError as exc:  # no process left to fork (a limit, memory): said at the next "next"
            self.ready, self.fork_error = None, f"the template could not fork an episode ({exc})"
            for fd in channel:
                os.close(fd)

    def retire(self, episode: _Episode) -> None:
        """Kill an episode now (it runs no more of its code); it is reaped later."""
        episode.kill()
        self.dying.append(episode)

    def reap(self, block: bool = False) -> None:
        self.dying = [episode for episode in self.dying if not episode.reap(block)]

    def end(self) -> None:
        if self.ready is not None:
            self.retire(self.ready)
        self.reap(block=True)


def _serve_parent(control: socket.socket, episodes: _Episodes) -> None:
    """Answer the parent's control messages until ``close`` or until it goes away:

    * ``ahead`` (with four pipe ends): fork the episode that the next ``next`` starts;
    * ``next`` (with four pipe ends): kill the current episode, make the one forked ahead
      current, reply, then fork the next one ahead on the ends sent. The parent talks to the
      current episode directly and only after this reply, so an episode is killed before the
      next one sees a message;
    * ``status``: end the current episode (its pipe closed) and reply how it ended.

    An episode forked here has this frame on its stack: its locals at the fork are the same for
    every episode (the message is gone; the current episode is held by ``episodes``, whose record
    the episode drops: :func:`_forget_earlier_episodes`)."""
    try:
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(control, MAX_CONTROL_BYTES, 4)
            except OSError:
                return
            if not data:
                return
            op = json.loads(data).get("op")
            del data
            channel = (fds[0], fds[1], fds[2], fds[3]) if len(fds) == 4 else None
            if op == "close":
                return
            if op == "next":
                if episodes.current is not None:
                    episodes.retire(episodes.current)  # it runs no more before the next one sees a message
                episodes.current, episodes.ready = episodes.ready, None
                _tell(control, {"ok": True} if episodes.current is not None else {
                    "ok": False, "kind": "protocol", "error": episodes.fork_error or "no episode process ready"})
            elif op == "status":
                current = episodes.current
                _tell(control, current.died() if current is not None else {"ok": False, "kind": "died", "exit": None})
                del current
            del op
            if channel is not None:
                episodes.fork_ahead(channel)
            else:
                for fd in fds:
                    os.close(fd)
            episodes.reap()
    finally:
        if episodes.current is not None:
            episodes.retire(episodes.current)
        episodes.end()


__all__ = ["main"]
