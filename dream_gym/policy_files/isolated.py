"""IsolatedPolicy: a policy that runs in the sandbox, a fresh process for every episode.

An :class:`IsolatedPolicy` starts one sandbox (:mod:`dream_gym.infrastructure.sandbox`: namespaces, Landlock,
seccomp, no capabilities, rlimits, its own session) whose payload is the policy's *template*
(:mod:`dream_gym.policy_files.child`): trusted code that compiled the policy file and forks one
episode process per ``reset``, so no state of an earlier episode survives into the next. The
template is reused across episodes and restarted only when it breaks (a timeout, a broken
protocol). This process talks to the template over a control socket (to have the next episode
forked ahead on a new pair of pipes it sends, to start it, to learn how one died) and to each
episode over that episode's own two pipes (:mod:`dream_gym.policy_files.channels`, in the
protocol of :mod:`dream_gym.policy_files.wire`): a decision is one round trip between two
processes. Neither ever receives a world object or a world path: only the
:class:`~dream_gym.policy.RunContext` and prefix views. The child's stdout and stderr are drained
by a thread with a bounded tail (:mod:`dream_gym.policy_files.output`), so printing cannot block
or flood the parent. The parent enforces a per-decision timeout and a per-episode budget of
policy time by killing the process group.

One template plays its episodes one after another. An evaluation plays the episodes of a
(policy, world) task with one policy each (:meth:`~dream_gym.policy_files.specs.PolicySource.side_by_side`),
taking turns (:mod:`dream_gym.policy_files.turns`): ``side_by_side`` says how many, and its
time limits stretch by as much.

Where the kernel cannot enforce the sandbox, construction raises
:class:`~dream_gym.infrastructure.sandbox.SandboxUnavailable`; ``unsafe_no_sandbox=True`` (or
``DREAM_GYM_UNSAFE_NO_SANDBOX=1``) runs the file with no confinement at all.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.isolation import says_out_of_memory, scrubbed_env
from dream_gym.infrastructure.printable import TEXT_CHARS, printable
from dream_gym.infrastructure.sandbox import SandboxUnavailable, launch
from dream_gym.infrastructure.work_folders import work_folder
from dream_gym.policy import RunContext
from dream_gym.policy_files.channels import Channel, Closed, Deadline, cleanup
from dream_gym.policy_files.errors import (
    PolicyCrashed,
    PolicyError,
    PolicyException,
    PolicyLoadError,
    PolicyMemoryError,
    PolicyNotFoundError,
    PolicyOutputError,
    PolicyProtocolError,
    PolicyTimeout,
)
from dream_gym.policy_files.inprocess import is_file_spec
from dream_gym.policy_files.output import Output, drain, kill_group
from dream_gym.policy_files.wire import (
    HEADER,
    MAX_BATCH,
    MAX_CONTROL_BYTES,
    MAX_REPLY_BYTES,
    ReplyError,
    encode_view,
    frame_request,
    parse_reply,
)
from dream_gym.replay.view import PrefixView, SentNodes

#: Packages whose ``__init__`` the template does not run (``dream_gym``'s imports Gymnasium and
#: every environment): it imports only the modules it uses, so it starts sooner and every
#: episode forks a smaller process. A policy that asks for a name they define still gets it.
_DEFERRED_PACKAGES = ["dream_gym", "dream_gym.policy_files"]
#: The parts of dream_gym's folder whose code a policy file's process may read: the layers a policy
#: stands on, and what ``import dream_gym`` runs. Not the layers above, and above all not the
#: online loop's agents and tasks: a world the built-in agent grew is reproducible by anyone who
#: runs that agent from the world's small seed, so a policy that imported it could re-grow the
#: nodes replay has not revealed (a policy may still carry its own copy: docs/design/security.md).
READABLE_PARTS = ("__init__.py", "_moved.py", "datasets", "envs", "infrastructure", "policies", "policy.py",
                  "policy_files", "replay", "world")
#: The kinds of failure an episode reports itself (see :mod:`dream_gym.policy_files.wire`).
_EPISODE_KINDS = ("exception", "load", "memory", "protocol")
#: Megabytes of address space each process of a policy may map unless told (``import torch`` needs about 1,024).
DEFAULT_MEMORY_MB = 512
_MORE_MEMORY = ", raised by --memory-mb or memory_mb="


class IsolatedPolicy:
    """A policy that runs in its own isolated child process (see :mod:`dream_gym.policy_files.isolated`).

    Args:
        spec: a ``.py`` file path (or a built-in name / ``module:Class``, run isolated anyway).
        decision_timeout_s: wall time allowed for one ``reset`` or ``act`` (both stretch by
            :attr:`stretch` when its episodes are played side by side with others).
        episode_timeout_s: policy time allowed for a whole episode (the sum over its decisions).
        memory_mb: address-space limit of each process (Python itself and numpy take ~150 MB).
        max_output_bytes: how much the policy may print per episode (stdout + stderr).
        cpu_s: CPU-seconds limit of each episode's process (default: the episode budget + 5 s).
        startup_timeout_s: time allowed to start the interpreter and import the file.
        harden: the audit hook in each episode (:mod:`dream_gym.policy_files.hardening`), a
            second layer over the kernel's sandbox.
        unsafe_no_sandbox: run the file with NO sandbox (it can read every file you can, use the
            network, signal your processes). Default: ``DREAM_GYM_UNSAFE_NO_SANDBOX``, else off.
        hash_seed: the child's ``PYTHONHASHSEED`` (default 0, so set iteration order and
            ``hash(str)`` are the same in every run; another value gives another order, which is
            how a determinism check tells a policy that depends on it).
        params: constructor parameters (built-in or ``module:Class`` specs only).

    Raises at construction: PolicyNotFoundError, PolicyLoadError, SandboxUnavailable, or a
    PolicyError when the child cannot start. Use as a context manager, or call :meth:`close`; the child is also
    killed when the object is garbage collected and at interpreter exit.
    """

    #: Untrusted code: it can time the replay's answers (run_episode prepares the world for that).
    untrusted = True

    def __init__(
        self,
        spec: str | os.PathLike[str],
        *,
        decision_timeout_s: float = 5.0,
        episode_timeout_s: float = 120.0,
        memory_mb: int = DEFAULT_MEMORY_MB,
        max_output_bytes: int = 1 << 20,
        cpu_s: float | None = None,
        startup_timeout_s: float = 30.0,
        harden: bool = True,
        hash_seed: int = 0,
        params: Mapping[str, Any] | None = None,
        unsafe_no_sandbox: bool | None = None,
    ):
        spec = os.fspath(spec)
        if is_file_spec(spec):
            if not Path(spec).is_file():
                raise PolicyNotFoundError(f"policy file {spec} does not exist")
            spec = str(Path(spec).resolve())
        self.spec = spec
        self.name = printable(Path(spec).stem if is_file_spec(spec) else spec)
        self._called = self.name  # its file's name (or its spec)
        self.who = self.name  # what errors call it: its file, never only the name the file gives itself
        self.decision_timeout_s = float(decision_timeout_s)
        self.episode_timeout_s = float(episode_timeout_s)
        self.side_by_side = 1  # episodes of its kind played at the same time as its own (see stretch)
        self.memory_mb = int(memory_mb)
        self.max_output_bytes = int(max_output_bytes)
        self.cpu_s = float(cpu_s) if cpu_s is not None else self.episode_timeout_s + 5.0
        self.startup_timeout_s = float(startup_timeout_s)
        self.harden = bool(harden)
        self.hash_seed = int(hash_seed)
        if not 0 <= self.hash_seed <= 4294967295:
            raise ValueError(f"hash_seed must be in [0, 4294967295], got {hash_seed}")
        self.params = dict(params or {})
        self.unsafe_no_sandbox = unsafe_no_sandbox
        self.hardening: list[str] = []
        self.starts = 0
        self.episode_time_s = 0.0
        self._proc: subprocess.Popen[bytes] | None = None
        self._output: Output | None = None
        self._finalizer: Callable[[], None] | None = None
        self._control: socket.socket | None = None
        self._channels: list[Channel] = []  # every channel open now (closed with the child)
        self._episodes_made = 0  # channels made so far: each episode's output is tagged with its number
        self._current: Channel | None = None  # the episode being played
        self._ahead: Channel | None = None  # the episode forked ahead for the next reset
        self._restart_needed = False
        self._episode_over = True
        self._sent: SentNodes | None = None
        self._start()

    # -- lifecycle ----------------------------------------------------------------------------
    def _start(self) -> None:
        self._stop()
        tmp = str(work_folder("policy"))
        control, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = {"spec": self.spec, "params": self.params, "harden": self.harden}
        payload = {"call": "dream_gym.policy_files.child:main", "defer": _DEFERRED_PACKAGES,
                   "args": [str(child_end.fileno()), json.dumps(config)]}
        try:
            launched = launch(
                payload, env=scrubbed_env({"PYTHONHASHSEED": str(self.hash_seed)}, home=tmp), cwd=tmp,
                read_files=[self.spec] if is_file_spec(self.spec) else [],
                limits={"memory_mb": self.memory_mb, "cpu_s": self.cpu_s, "fsize_mb": 16},
                keep_fds=(child_end.fileno(),), unsafe=self.unsafe_no_sandbox, package_parts=READABLE_PARTS,
            )
        except BaseException:
            control.close()
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            child_end.close()
        proc = launched.proc
        self._proc, self._control, self._channels = proc, control, []
        self._current = self._ahead = None
        self._output = Output(self.max_output_bytes, proc.pid)
        assert proc.stdout is not None and proc.stderr is not None
        threading.Thread(target=drain, args=({"stdout": proc.stdout, "stderr": proc.stderr}, self._output),
                         name=f"dream_gym-policy-{proc.pid}-output", daemon=True).start()
        self._finalizer = weakref.finalize(self, cleanup, launched, control, self._channels, tmp)
        self.starts += 1
        self._restart_needed = False
        self._sent = None
        deadline = time.monotonic() + self.startup_timeout_s
        hello = self._control_call(None, deadline, "starting")
        if not hello.get("ok"):
            self._stop()
            error = printable(hello.get("error", "unknown error"), TEXT_CHARS, lines=True)
            if hello.get("kind") == "notfound":
                raise PolicyNotFoundError(error)
            if hello.get("kind") == "sandbox":
                raise SandboxUnavailable(f"policy {self.who}: untrusted code did not run: {error}")
            if hello.get("kind") == "memory":
                raise PolicyMemoryError(f"policy {self.who}: ran out of memory ({self.memory_mb} MB{_MORE_MEMORY}) while "
                                        f"loading: {error}")
            raise PolicyLoadError(f"policy {self.who}: loading failed in the isolated process: {error}")
        self.name = printable(hello.get("name", self.name))
        # a file whose policy calls itself "greedy" would have a built-in blamed for its errors
        self.who = self._called if self.name == self._called else f"{self._called} (named '{self.name}')"
        self.hardening = [str(h) for h in hello.get("hardening", [])]
        self._ahead, episode_ends = self._new_channel()
        try:
            self._control_send({"op": "ahead"}, deadline, episode_ends)
        except (Deadline, Closed):
            self._restart_needed = True  # the next reset starts a fresh child

    def _new_channel(self) -> tuple[Channel, tuple[int, int, int, int]]:
        """New pipes for an episode: this process's ends (kept until the episode is retired) and
        the episode's, to hand to the template, which forks the episode on them."""
        assert self._output is not None
        self._episodes_made += 1
        channel, episode_ends = Channel.pair(self._output, self._episodes_made)
        self._channels.append(channel)
        return channel, episode_ends

    def _retire(self, channel: Channel | None) -> None:
        if channel is not None:
            channel.close()
            self._channels.remove(channel)

    def _stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # kills the group, reaps, closes fds, removes the temp folder
        self._finalizer = None
        self._proc = None
        self._current = self._ahead = None

    def close(self) -> None:
        """End the child process (and anything it forked)."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                self._control_send({"op": "close"}, time.monotonic() + 0.5)
                self._proc.wait(timeout=0.5)
            except (Deadline, Closed, subprocess.TimeoutExpired, OSError):
                pass
        self._stop()

    def __enter__(self) -> IsolatedPolicy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The child's process id (also its process group id), None when not running."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def output_tail(self, stream: str = "stderr") -> str:
        """The last bytes the child printed on ``stream``."""
        return self._output.tail(stream) if self._output is not None else ""

    def forget_output(self) -> None:
        """Drop the tails of what the child printed so far: the policy moves on to other work
        (another world), whose errors must quote only what was printed there."""
        if self._output is not None:
            with self._output.lock:
                for tail in self._output.tails.values():
                    tail.clear()

    @property
    def stretch(self) -> int:
        """How many times its wall-time limits stretch: played side by side with others, its
        episodes take turns with theirs (:mod:`dream_gym.policy_files.turns`), running one turn
        in ``side_by_side``."""
        return max(1, self.side_by_side)

    @property
    def decision_limit_s(self) -> float:
        """The wall time one ``reset`` or ``act`` may take: the decision timeout, stretched."""
        return self.decision_timeout_s * self.stretch

    def _stretched(self, seconds: float) -> str:
        if self.stretch == 1:
            return f"{seconds:g}s"
        return f"{seconds:g}s, stretched to {seconds * self.stretch:g}s for {self.side_by_side} episodes taking turns"

    def _needs_start(self) -> bool:
        """Whether the template has not started, has ended, or broke (the next reset restarts it)."""
        return self._proc is None or self._proc.poll() is not None or self._restart_needed

    def prepare(self) -> None:
        """Start the template now if the next reset would."""
        if self._needs_start():
            self._start()

    # -- the Policy interface -----------------------------------------------------------------
    def reset(self, context: RunContext) -> None:
        """Start a new episode: a fresh process forked from the template, a fresh policy object.
        Played side by side, the template was started before the turns began: one that ended
        since is not started again here, where it would run outside the turns."""
        if self.side_by_side > 1 and self._needs_start():
            raise PolicyCrashed(f"policy {self.who}: its process ended before its episode began")
        self.prepare()
        assert self._output is not None
        self.episode_time_s = 0.0
        self._sent = None
        self._next_episode()
        self._episode_over = False
        self._call({"op": "reset", "context": context}, "reset")

    def _next_episode(self) -> None:
        """The episode forked ahead becomes the current one, once the template has killed the
        one before it (the template forks the next one ahead after its reply)."""
        started = time.monotonic()
        deadline = started + self.decision_limit_s
        self._retire(self._current)
        self._current = self._ahead
        if self._current is not None and self._output is not None:
            self._output.start(self._current.number)  # its output, and no earlier episode's, is quoted
        self._ahead, episode_ends = self._new_channel()
        try:
            reply = self._control_call({"op": "next"}, deadline, "reset", episode_ends)
        finally:
            self.episode_time_s += time.monotonic() - started
        if not reply.get("ok") or self._current is None:
            self._fail()
            raise PolicyProtocolError(f"policy {self.who}: {reply.get('error', 'no episode process')}")

    def act(self, view: PrefixView) -> list[Any]:
        if self._proc is None or self._restart_needed or self._episode_over:
            raise PolicyError(f"policy {self.who}: act() after a failure; call reset() first")
        # the episode keeps the nodes it was sent: a view of the same episode extends them, so
        # only the new ones are sent (a decision costs them, not every node of the episode)
        encoded, sent = encode_view(view, self._sent)
        reply = self._call({"op": "act", "view": encoded}, "act")
        self._sent = sent
        batch = reply.get("batch")
        if not isinstance(batch, list) or len(batch) > MAX_BATCH or not all(
                item is None or isinstance(item, (int, float, str)) for item in batch):
            self._episode_over = True
            raise PolicyProtocolError(f"policy {self.who}: malformed batch message {str(batch)[:200]!r}")
        return batch

    # -- protocol -----------------------------------------------------------------------------
    def _call(self, message: dict[str, Any], what: str) -> dict[str, Any]:
        started = time.monotonic()
        budget_left = self.episode_timeout_s * self.stretch - self.episode_time_s
        per_decision = self.decision_limit_s <= budget_left
        deadline = started + min(self.decision_limit_s, max(0.0, budget_left))
        try:
            reply = self._exchange(message, deadline, what, per_decision)
        finally:
            self.episode_time_s += time.monotonic() - started
        if reply.get("ok") is True:
            return reply
        self._episode_over = True  # the template ends that episode's process at the next reset
        # what the episode says went wrong: its own words, and one of the kinds an episode
        # reports (how a process of the policy died, only the template may say)
        error = printable(reply.get("error", "unknown error"), TEXT_CHARS, lines=True)
        kind = reply.get("kind")
        if kind not in _EPISODE_KINDS:
            raise PolicyProtocolError(f"policy {self.who}: a reply of unknown kind {printable(kind, 40)}")
        if kind == "load":
            raise PolicyException(f"policy {self.who}: building the policy failed in {what}(): {error}")
        if kind == "memory":
            raise PolicyMemoryError(f"policy {self.who} exceeded its memory limit ({self.memory_mb} MB{_MORE_MEMORY}) in "
                                    f"{what}(): {error}")
        if kind == "protocol":
            raise PolicyProtocolError(f"policy {self.who}: {error}")
        raise PolicyException(f"policy {self.who} raised in {what}(): {error}")

    def _exchange(self, message: dict[str, Any], deadline: float, what: str,
                  per_decision: bool = True) -> dict[str, Any]:
        """Send ``message`` to the current episode and read its reply, turning every failure
        into the right PolicyError (after killing the process group where the child is stuck)."""
        channel = self._current
        assert channel is not None
        try:
            self._send(channel, message, deadline)
            body = self._read_frame(channel, deadline)
        except Deadline:
            raise self._timed_out(what, per_decision) from None
        except Closed:  # the episode closed its pipe: it died (or is about to); the template says how
            status = self._control_call({"op": "status"}, max(deadline, time.monotonic() + 2.0), what)
            self._episode_over = True
            raise self._died_error(what, status.get("signal"), status.get("exit")) from None
        return self._parsed(body)

    def _control_send(self, message: dict[str, Any], deadline: float, handed: tuple[int, ...] = ()) -> None:
        """One message to the template, with the descriptors ``handed`` over to it (closed here
        once sent, or once the send failed)."""
        assert self._control is not None
        data = json.dumps(message).encode("utf-8")
        poller = select.poll()
        poller.register(self._control.fileno(), select.POLLOUT)
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise Deadline
                events = poller.poll(min(remaining, 0.2) * 1000)
                if not events:
                    continue
                if events[0][1] & (select.POLLERR | select.POLLHUP):
                    raise Closed
                try:
                    socket.send_fds(self._control, [data], list(handed), socket.MSG_DONTWAIT)
                    return
                except BlockingIOError:
                    continue
                except OSError:
                    raise Closed from None
        finally:
            for fd in handed:
                os.close(fd)

    def _control_call(self, message: dict[str, Any] | None, deadline: float, what: str,
                      handed: tuple[int, ...] = ()) -> dict[str, Any]:
        """Send ``message`` to the template (None: only read), ``handed`` as in
        :meth:`_control_send`, and read its reply."""
        assert self._control is not None
        try:
            if message is not None:
                self._control_send(message, deadline, handed)
            poller = select.poll()
            poller.register(self._control.fileno(), select.POLLIN)
            while not poller.poll(min(max(0.0, deadline - time.monotonic()), 0.2) * 1000):
                if time.monotonic() >= deadline or (self._output is not None and self._output.overflow):
                    raise Deadline  # an overflow: the drain thread killed the group
            try:
                body = self._control.recv(MAX_CONTROL_BYTES, socket.MSG_DONTWAIT)
            except OSError:
                raise Closed from None
            if not body:
                raise Closed
        except Deadline:
            raise self._timed_out(what, True) from None
        except Closed:
            raise self._death(what) from None
        return self._parsed(body)

    def _timed_out(self, what: str, per_decision: bool) -> PolicyError:
        """The error for a deadline passed: the group is killed; the next reset starts afresh."""
        self._fail()
        if self._output is not None and self._output.overflow:
            return self._overflow_error()
        if what == "starting":
            return PolicyTimeout(f"policy {self.who}: did not start within {self.startup_timeout_s:g}s")
        if per_decision:
            return PolicyTimeout(f"policy {self.who}: {what}() took longer than the decision timeout "
                                 f"of {self._stretched(self.decision_timeout_s)}; process killed")
        return PolicyTimeout(f"policy {self.who}: episode time budget of {self._stretched(self.episode_timeout_s)} "
                             f"exhausted during {what}(); process killed")

    def _parsed(self, body: bytes) -> dict[str, Any]:
        try:
            return parse_reply(body)
        except ReplyError as exc:
            self._fail()
            raise PolicyProtocolError(f"policy {self.who}: {printable(exc, TEXT_CHARS)}") from None

    def _send(self, channel: Channel, message: dict[str, Any], deadline: float) -> None:
        view = memoryview(frame_request(message))
        poller: select.poll | None = None
        while view:
            try:  # the pipe is almost always empty: write first, wait only when it is full
                view = view[os.write(channel.to_episode, view):]
                continue
            except BlockingIOError:
                pass
            except OSError:
                raise Closed from None
            if poller is None:
                poller = select.poll()
                poller.register(channel.to_episode, select.POLLOUT)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Deadline
            events = poller.poll(min(remaining, 0.2) * 1000)
            if events and events[0][1] & (select.POLLERR | select.POLLHUP):
                raise Closed

    def _read_frame(self, channel: Channel, deadline: float) -> bytes:
        """The body of the episode's next framed message, read in as few reads as it was written in."""
        data = bytearray(channel.pending)
        poller = select.poll()
        poller.register(channel.from_episode, select.POLLIN)
        while True:
            size = HEADER.unpack_from(data)[0] if len(data) >= HEADER.size else 0
            if size > MAX_REPLY_BYTES:
                self._fail()
                raise PolicyProtocolError(f"policy {self.who}: reply of {size} bytes (limit {MAX_REPLY_BYTES})")
            if len(data) >= HEADER.size + size and len(data) >= HEADER.size:
                # copied out through a memoryview: slicing the bytearray would copy the body once
                # more (a forged reply of 1 MB then held 3 MB at once)
                with memoryview(data) as read:
                    channel.pending = bytes(read[HEADER.size + size:])
                    return bytes(read[HEADER.size:HEADER.size + size])
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Deadline
            if not poller.poll(min(remaining, 0.2) * 1000):
                if self._output is not None and self._output.overflow:
                    raise Deadline  # the drain thread killed the group; reported as overflow
                continue
            chunk = os.read(channel.from_episode, max(1 << 16, min(HEADER.size + size - len(data), 1 << 24)))
            if not chunk:
                raise Closed
            data += chunk

    def _fail(self) -> None:
        """After any failure: kill the group now; the next reset() starts a fresh child."""
        self._restart_needed = True
        if self._proc is not None:
            kill_group(self._proc.pid)

    def _overflow_error(self) -> PolicyOutputError:
        return PolicyOutputError(f"policy {self.who} printed more than {self.max_output_bytes} bytes "
                                 "in one episode (max_output_bytes); process killed")

    def _death(self, what: str) -> PolicyError:
        """The error for a template that closed its pipe (it died, or is about to)."""
        assert self._proc is not None
        self._restart_needed = True
        try:
            code = self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            kill_group(self._proc.pid)
            code = self._proc.wait()
        time.sleep(0.05)  # let the drain thread collect the last words
        if self._output is not None and self._output.overflow:
            return self._overflow_error()
        sig = signal.Signals(-code).name if code < 0 else None
        return self._died_error(what, sig, code if code >= 0 else None)

    def _died_error(self, what: str, sig: str | None, code: int | None) -> PolicyError:
        """The error for a process of the policy that died: by ``sig`` or with exit ``code``."""
        time.sleep(0.02)  # let the drain thread collect the last words
        if self._output is not None and self._output.overflow:
            return self._overflow_error()
        tail = printable(self.output_tail("stderr"), TEXT_CHARS, lines=True)
        how = f"killed by {sig}" if sig else f"exit code {code}"
        tail_note = f"; stderr tail: {tail[-800:].strip()}" if tail.strip() else ""
        if sig == "SIGXCPU":
            return PolicyTimeout(f"policy {self.who}: CPU limit of {self.cpu_s:g}s exceeded during {what}() ({how})")
        if says_out_of_memory(tail) or sig in ("SIGSEGV", "SIGABRT", "SIGBUS"):
            return PolicyMemoryError(f"policy {self.who}: process died during {what}(), probably out of "
                                     f"memory (limit {self.memory_mb} MB{_MORE_MEMORY}; {how}){tail_note}")
        return PolicyCrashed(f"policy {self.who}: process died during {what}() ({how}){tail_note}",
                             exit_code=code, signal_name=sig, stderr_tail=tail)

    def __repr__(self) -> str:
        return f"IsolatedPolicy({self.spec!r}, pid={self.pid})"


__all__ = ["IsolatedPolicy"]
