"""Policies from anywhere, untrusted ones run isolated (SPEC §6).

:func:`load_policy` accepts three kinds of spec:

* a built-in name (``"greedy"``): :func:`dream_gym.policies.make_policy`, in-process;
* ``module:attr`` (``"my_pkg.agents:BeamPolicy"``): trusted code the user installed, imported
  in-process; a class is instantiated, a policy object used as is, a function becomes a
  :class:`~dream_gym.policy.FunctionPolicy`;
* a path to a ``.py`` file: **untrusted** (maybe LLM-written), run isolated by default in an
  :class:`IsolatedPolicy`. The file defines, in this order of preference, a ``make_policy()``
  factory, a ``Policy`` class, exactly one class with ``reset`` and ``act``, or a top-level
  function ``act(view)`` / ``policy(view)`` (optionally ``(view, context)``). Only objects the
  file itself defines count (an imported ``make_policy`` is ignored). The file must be self-
  contained: it may import installed packages, not helper files next to it.

An :class:`IsolatedPolicy` runs the policy in ONE child process (reused across episodes,
restarted after any failure): ``python -I -B`` with a scrubbed environment (no API keys or other
secrets), rlimits on address space and CPU, its own session and process group, a fresh temp
folder as working directory, and only two pipes for the protocol (length-prefixed JSON:
``reset(context)``, ``act(view)`` -> batch). It never receives a world object or a world path:
only the :class:`RunContext` and prefix views (sent incrementally: nodes already sent in this
episode are not re-sent; the child rebuilds the same :class:`PrefixView`). The child's stdout
and stderr are separate pipes drained by a thread with a bounded tail, so printing cannot block
or flood the parent. The parent enforces a per-decision timeout and a per-episode budget of
policy time by killing the process group.

With ``harden=True`` (default) the child also, before loading the policy file, installs a
seccomp filter (no execve, ptrace, process_vm_readv/writev, setsid, setpgid) and a Python audit
hook that refuses: opening files outside the Python installation, the ``dream_gym`` package and
the policy file (so no world files, no ``/proc/<parent>``), any file write, listing other folders,
subprocesses and exec, ``os.fork``, signals to other processes, ctypes, sockets and sqlite.
This is defence in depth against curious or sloppy code, not a jail against a determined
attacker with native code: run truly hostile code in a container or as another user.

Failures raise :class:`PolicyError` subclasses; ``run_episode(..., on_error="record")`` records
them in ``EpisodeResult.error`` and the evaluation goes on.
"""

from __future__ import annotations

import dataclasses
import errno
import importlib
import importlib.util
import inspect
import json
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dream_gym.isolation import apply_limits, scrubbed_env
from dream_gym.policies import make_policy
from dream_gym.policy import FunctionPolicy, Policy, RunContext, batch_from, policy_name
from dream_gym.view import NODE_FIELDS, NodeView, PrefixView, freeze, thaw

_HEADER = struct.Struct(">I")
MAX_MESSAGE_BYTES = 64 << 20  # a reply larger than this is a protocol error
MAX_BATCH = 100_000
_TAIL_BYTES = 8192
_MEMORY_SIGNS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "Unable to allocate",
                 "out of memory", "Out of memory")


# -- errors -----------------------------------------------------------------------------------
class PolicyError(RuntimeError):
    """An isolated policy failed; the message names the policy and the problem."""


class PolicyTimeout(PolicyError):
    """A decision took longer than ``decision_timeout_s``, or the episode's policy-time budget
    (``episode_timeout_s``) or the CPU limit ran out. The process group was killed."""


class PolicyCrashed(PolicyError):
    """The policy process died. ``exit_code``/``signal`` say how, ``stderr_tail`` what it printed."""

    def __init__(self, message: str, exit_code: int | None = None, signal_name: str | None = None,
                 stderr_tail: str = ""):
        super().__init__(message)
        self.exit_code = exit_code
        self.signal = signal_name
        self.stderr_tail = stderr_tail


class PolicyMemoryError(PolicyError):
    """The policy ran out of its memory limit (``memory_mb``)."""


class PolicyProtocolError(PolicyError):
    """The policy returned something that is not a batch (None, a string, garbage), or its
    process broke the message protocol."""


class PolicyException(PolicyError):
    """The policy's own code raised; the message has the exception and where it was raised."""


class PolicyOutputError(PolicyError):
    """The policy printed more than ``max_output_bytes`` in one episode."""


class PolicyNotFoundError(LookupError):
    """No built-in policy, module attribute or file of that name."""


class PolicyLoadError(ValueError):
    """The file or module exists but defines no policy, or importing it failed."""


# -- resolving a policy object (shared by the parent and the isolated child) -----------------
def _defined_here(obj: Any, module_name: str) -> bool:
    return getattr(obj, "__module__", None) == module_name


def policy_from_namespace(namespace: Mapping[str, Any], source: str) -> Policy:
    """The policy a module defines (see the module docstring for the convention)."""
    module_name = str(namespace.get("__name__", ""))
    factory = namespace.get("make_policy")
    if callable(factory) and _defined_here(factory, module_name):
        return _checked(factory(), source, "make_policy()")
    cls = namespace.get("Policy")
    if isinstance(cls, type) and _defined_here(cls, module_name):
        return _checked(cls(), source, "Policy()")
    classes = [v for v in namespace.values()
               if isinstance(v, type) and _defined_here(v, module_name)
               and callable(getattr(v, "act", None)) and callable(getattr(v, "reset", None))]
    if len(classes) == 1:
        return _checked(classes[0](), source, f"{classes[0].__name__}()")
    for fname in ("act", "policy"):
        fn = namespace.get(fname)
        if callable(fn) and not isinstance(fn, type) and _defined_here(fn, module_name):
            return FunctionPolicy(fn, name=Path(source).stem)
    found = f" (it defines {len(classes)} policy classes: {', '.join(c.__name__ for c in classes)})" if classes else ""
    raise PolicyLoadError(
        f"{source} defines no policy{found}: define make_policy(), a class named Policy with "
        "reset(context) and act(view), or a top-level function act(view)"
    )


def _checked(obj: Any, source: str, what: str) -> Policy:
    if not (callable(getattr(obj, "act", None)) and callable(getattr(obj, "reset", None))):
        raise PolicyLoadError(f"{source}: {what} returned {type(obj).__name__}, which lacks reset() and act()")
    return obj  # type: ignore[no-any-return]


def _module_name_for(path: Path) -> str:
    return "dream_gym_policy_file_" + re.sub(r"\W", "_", path.stem)


def load_policy_file(path: str | os.PathLike[str]) -> Policy:
    """Import a policy file IN THIS PROCESS (trusted files only) and return its policy."""
    path = Path(path).resolve()
    if not path.is_file():
        raise PolicyNotFoundError(f"policy file {path} does not exist")
    name = _module_name_for(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PolicyLoadError(f"{path} cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise PolicyLoadError(f"importing {path} failed: {type(exc).__name__}: {exc}{_where(exc, str(path))}") from exc
    return policy_from_namespace(vars(module), str(path))


def _load_module_attr(spec: str, params: Mapping[str, Any]) -> Policy:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise PolicyNotFoundError(f"policy {spec!r}: no module {module_name!r} ({exc})") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise PolicyNotFoundError(f"policy {spec!r}: {module_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if isinstance(obj, type):
        return _checked(obj(**params), spec, f"{attr}()")
    if params:
        raise ValueError(f"policy {spec!r} is not a class; parameters {sorted(params)} cannot be passed")
    if callable(getattr(obj, "act", None)) and callable(getattr(obj, "reset", None)):
        return obj  # type: ignore[no-any-return]
    if callable(obj):
        return FunctionPolicy(obj, name=attr)
    raise PolicyLoadError(f"policy {spec!r} is a {type(obj).__name__}, not a policy class, object or function")


def _is_file_spec(spec: str) -> bool:
    """A path (ends with .py or has a folder part) rather than a name or module:attr."""
    return spec.endswith(".py") or (os.sep in spec and ":" not in spec)


def _resolve_in_process(spec: str, params: Mapping[str, Any]) -> Policy:
    if _is_file_spec(spec):
        if params:
            raise ValueError(f"policy file {spec}: parameters cannot be passed to a file's policy")
        return load_policy_file(spec)
    if ":" in spec:
        return _load_module_attr(spec, params)
    try:
        return make_policy(spec, **params)
    except LookupError as exc:
        raise PolicyNotFoundError(f"{exc}; or give module:Class or a path to a .py file") from None


def load_policy(spec: str | os.PathLike[str], *, isolate: bool | None = None,
                params: Mapping[str, Any] | None = None, **limits: Any) -> Policy:
    """A policy from a built-in name, ``module:attr``, a ``.py`` file path, or a trained
    stable-baselines3 model ``.zip`` (:class:`dream_gym.rl.SB3Policy`, in-process; an SB3 zip
    holds pickled objects, so load only models from a trusted source; ``params`` such as
    ``deterministic`` go to SB3Policy).

    Args:
        spec: see the module docstring.
        isolate: run in an :class:`IsolatedPolicy`. Default: True for files (untrusted),
            False for built-in names and modules (trusted, installed code).
        params: constructor parameters for a built-in or ``module:Class`` policy.
        limits: :class:`IsolatedPolicy` options (``decision_timeout_s``, ``episode_timeout_s``,
            ``memory_mb``, ``max_output_bytes``, ``harden``, ...); only with isolation.

    Raises:
        PolicyNotFoundError (a LookupError): unknown name, missing module or file.
        PolicyLoadError (a ValueError): the file defines no policy or fails to import.
    """
    spec = os.fspath(spec)
    params = dict(params or {})
    if spec.endswith(".zip"):  # a trained SB3 model: pickled objects, so a trusted file, in-process
        if isolate or limits:
            raise ValueError(f"{spec}: SB3 models load in-process only (no isolate=True, no limits)")
        if not Path(spec).is_file():
            raise PolicyNotFoundError(f"model file {spec} does not exist")
        from dream_gym.rl import SB3Policy

        return SB3Policy(spec, **params)
    is_file = _is_file_spec(spec)
    if is_file and not Path(spec).is_file():
        raise PolicyNotFoundError(f"policy file {spec} does not exist")
    if isolate is None:
        isolate = is_file
    if not isolate:
        if limits:
            raise ValueError(f"limits {sorted(limits)} only apply to isolated policies (isolate=True)")
        return _resolve_in_process(spec, params)
    if not is_file and ":" not in spec:
        _resolve_in_process(spec, params)  # fail fast on unknown names, in the parent
    return IsolatedPolicy(spec, params=params, **limits)


# -- wire format of views ---------------------------------------------------------------------
_VIEW_FIELDS = tuple(f.name for f in dataclasses.fields(PrefixView) if f.name not in ("nodes", "_children"))
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


def _wire_batch(batch: list[Any]) -> list[Any]:
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


# -- the child side ---------------------------------------------------------------------------
def _where(exc: BaseException, source: str) -> str:
    """' (at file.py line N, in fn)' for the innermost frame in the policy file."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == source]
    if not frames:
        return ""
    f = frames[-1]
    return f" (at {Path(f.filename).name} line {f.lineno}, in {f.name})"


def _install_seccomp() -> str | None:
    """Refuse execve, ptrace and friends with EPERM (Linux x86_64/aarch64); a note on failure."""
    import ctypes

    tables = {
        "x86_64": (0xC000003E, (59, 322, 101, 310, 311, 112, 109)),
        "aarch64": (0xC00000B7, (221, 281, 117, 270, 271, 157, 154)),
    }  # execve, execveat, ptrace, process_vm_readv, process_vm_writev, setsid, setpgid
    machine = os.uname().machine
    if machine not in tables:
        return f"no seccomp filter for {machine}"
    arch, numbers = tables[machine]
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    deny, allow = 0x00050000 | errno.EPERM, 0x7FFF0000
    program = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, deny), (ld, 0, 0, 0)]
    if machine == "x86_64":
        program += [(jge, 0, 1, 0x40000000), (ret, 0, 0, deny)]  # the x32 ABI
    for number in numbers:
        program += [(jeq, 0, 1, number), (ret, 0, 0, deny)]
    program.append((ret, 0, 0, allow))

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                    ("k", ctypes.c_uint)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    filters = (SockFilter * len(program))(*[SockFilter(*ins) for ins in program])
    prog = SockFprog(len(program), filters)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
        prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        if prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            return f"no_new_privs failed: errno {ctypes.get_errno()}"
        if prctl(22, 2, ctypes.addressof(prog), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
            return f"seccomp failed: errno {ctypes.get_errno()}"
    except (OSError, AttributeError) as exc:
        return f"seccomp unavailable: {exc}"
    return None


_DENIED_EVENTS = frozenset({
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.startfile", "subprocess.Popen",
    "os.fork", "os.forkpty", "pty.spawn", "sqlite3.connect", "sqlite3.connect/handle",
    "os.link", "os.symlink", "os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.chmod",
    "os.chown", "os.truncate", "os.utime", "os.setxattr", "os.removexattr", "os.chflags",
    "shutil.rmtree", "shutil.copyfile", "shutil.move", "webbrowser.open", "urllib.Request",
    "http.client.connect", "ftplib.connect", "smtplib.connect", "poplib.connect",
    "imaplib.open", "telnetlib.Telnet.open", "nntplib.connect",
})
_DENIED_PREFIXES = ("ctypes.", "socket.", "_ssl.", "os.exec", "os.spawn", "os.posix_spawn")


def _install_audit_hook(read_roots: Sequence[str], read_files: Sequence[str]) -> None:
    """Refuse what an exploration policy has no business doing (see the module docstring)."""
    realpath, fsdecode, getpid = os.path.realpath, os.fsdecode, os.getpid
    roots = tuple(r.rstrip(os.sep) + os.sep for r in read_roots)
    files = frozenset(read_files) | {"/dev/urandom", "/dev/random", "/dev/zero"}
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def readable(path: str) -> bool:
        own = f"/proc/{getpid()}"
        return (path in files or path.startswith(roots) or path == own
                or path.startswith(own + os.sep))

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            target, mode, flags = (tuple(args) + (None, None))[:3]
            if target is None or isinstance(target, int):
                return  # an already open descriptor
            path = realpath(fsdecode(target))
            if path == os.devnull:
                return
            writing = (isinstance(flags, int) and flags & write_flags) or (
                isinstance(mode, str) and any(c in mode for c in "wax+"))
            if writing:
                raise PermissionError(errno.EACCES, "an isolated policy may not write files", path)
            if not readable(path):
                raise PermissionError(errno.EACCES, "an isolated policy may not read this file", path)
        elif event in ("os.listdir", "os.scandir"):
            target = args[0] if args else "."
            if isinstance(target, int):
                return
            path = realpath(fsdecode(target if target is not None else "."))
            if not readable(path.rstrip(os.sep) + os.sep) and path not in files:
                raise PermissionError(errno.EACCES, "an isolated policy may not list this folder", path)
        elif event in ("os.kill", "os.killpg"):
            pid = args[0] if args else None
            if pid not in (0, getpid(), -getpid()):
                raise PermissionError(errno.EPERM, f"an isolated policy may not signal process {pid}")
        elif event in _DENIED_EVENTS or event.startswith(_DENIED_PREFIXES):
            raise PermissionError(errno.EPERM, f"an isolated policy may not use {event}")

    sys.addaudithook(hook)


def _child_main(args: Sequence[str]) -> None:
    """The isolated child: load the policy, then answer reset/act messages until EOF."""
    fd_in, fd_out = int(args[0]), int(args[1])
    config = json.loads(args[2])
    dumps, loads, write, read = json.dumps, json.loads, os.write, os.read
    header = _HEADER

    def send(message: dict[str, Any]) -> None:
        data = dumps(message).encode("utf-8")
        view = memoryview(header.pack(len(data)) + data)
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
    source = str(Path(spec).resolve()) if _is_file_spec(spec) else spec
    try:
        import numpy  # noqa: F401  (imported before the audit hook: it loads ctypes)

        notes: list[str] = []
        if config.get("harden", True):
            note = _install_seccomp()
            notes.append(note or "seccomp")
            import dream_gym

            roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                     str(Path(dream_gym.__file__).resolve().parent)}
            _install_audit_hook(sorted(os.path.realpath(r) for r in roots),
                                [source] if _is_file_spec(spec) else [])
            notes.append("audit-hook")
        policy = _resolve_in_process(spec, config.get("params") or {})
        name = policy_name(policy)
    except BaseException as exc:  # noqa: BLE001  (report anything, then end)
        kind = "notfound" if isinstance(exc, PolicyNotFoundError) else (
            "memory" if isinstance(exc, MemoryError) else "load")
        send({"ok": False, "kind": kind, "error": f"{type(exc).__name__}: {exc}"})
        return
    send({"ok": True, "name": name, "hardening": notes, "pid": os.getpid()})

    nodes: list[NodeView] = []
    while True:
        head = recv_exact(header.size)
        if head is None:
            return
        body = recv_exact(header.unpack(head)[0])
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
                  "error": f"{type(exc).__name__}: {exc}"[:2000] + _where(exc, source)})
            continue
        try:
            batch = _wire_batch(batch_from(result))
            if len(batch) > MAX_BATCH:
                raise TypeError(f"policy returned a batch of {len(batch)} ids")
            send({"ok": True, "batch": batch})
        except MemoryError:
            send({"ok": False, "kind": "memory", "error": "MemoryError while sending the batch"})
        except Exception as exc:
            send({"ok": False, "kind": "protocol", "error": f"{exc}"[:2000]})


_BOOT = """
import sys
{limits_src}
apply_limits({memory_mb!r}, {cpu_s!r}, 16, None)
del apply_limits
from dream_gym.sandbox import _child_main
_child_main(sys.argv[1:])
"""


# -- the parent side --------------------------------------------------------------------------
class _Output:
    """What a child printed: byte counts and bounded tails; trips ``overflow`` past a limit."""

    def __init__(self, limit: int, pgid: int):
        self.limit, self.pgid = limit, pgid
        self.episode_bytes = 0
        self.total = 0
        self.overflow = False
        self.tails: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self.lock = threading.Lock()

    def add(self, stream: str, data: bytes) -> None:
        with self.lock:
            self.total += len(data)
            self.episode_bytes += len(data)
            tail = self.tails[stream]
            tail += data
            if len(tail) > 2 * _TAIL_BYTES:
                del tail[:-_TAIL_BYTES]
            if self.episode_bytes > self.limit and not self.overflow:
                self.overflow = True
                _kill_group(self.pgid)

    def tail(self, stream: str, limit: int = 2000) -> str:
        with self.lock:
            return bytes(self.tails[stream][-limit:]).decode("utf-8", "replace")


def _drain(streams: dict[str, Any], output: _Output) -> None:
    """Read the child's stdout/stderr until both close (runs in a daemon thread)."""
    poller = select.poll()
    by_fd = {}
    for name, stream in streams.items():
        poller.register(stream.fileno(), select.POLLIN)
        by_fd[stream.fileno()] = (name, stream)
    while by_fd:
        for fd, _ in poller.poll():
            name, stream = by_fd[fd]
            data = os.read(fd, 1 << 16)
            if data:
                output.add(name, data)
            else:
                poller.unregister(fd)
                stream.close()
                del by_fd[fd]


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _cleanup(proc: subprocess.Popen[bytes], fds: list[int], tmp: str) -> None:
    """Kill the process group, reap, close our pipe ends, remove the temp folder."""
    _kill_group(proc.pid)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover (SIGKILL cannot be ignored)
        pass
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    shutil.rmtree(tmp, ignore_errors=True)


class _Deadline(Exception):
    pass


class _Closed(Exception):
    pass


class IsolatedPolicy:
    """A policy that runs in its own isolated child process (see the module docstring).

    Args:
        spec: a ``.py`` file path (or a built-in name / ``module:Class``, run isolated anyway).
        decision_timeout_s: wall time allowed for one ``reset`` or ``act``.
        episode_timeout_s: policy time allowed for a whole episode (the sum over its decisions).
        memory_mb: address-space limit of the child (Python itself and numpy take ~150 MB).
        max_output_bytes: how much the policy may print per episode (stdout + stderr).
        cpu_s: CPU-seconds limit of each process of the group (default 4x the episode budget);
            the child is restarted before an episode that could exceed it.
        startup_timeout_s: time allowed to start the interpreter and import the file.
        harden: seccomp filter and audit hook in the child (see the module docstring).
        params: constructor parameters (built-in or ``module:Class`` specs only).

    Raises at construction: PolicyNotFoundError, PolicyLoadError, or a PolicyError when the
    child cannot start. Use as a context manager, or call :meth:`close`; the child is also
    killed when the object is garbage collected and at interpreter exit.
    """

    def __init__(
        self,
        spec: str | os.PathLike[str],
        *,
        decision_timeout_s: float = 5.0,
        episode_timeout_s: float = 120.0,
        memory_mb: int = 512,
        max_output_bytes: int = 1 << 20,
        cpu_s: float | None = None,
        startup_timeout_s: float = 30.0,
        harden: bool = True,
        params: Mapping[str, Any] | None = None,
    ):
        spec = os.fspath(spec)
        if _is_file_spec(spec):
            if not Path(spec).is_file():
                raise PolicyNotFoundError(f"policy file {spec} does not exist")
            spec = str(Path(spec).resolve())
        self.spec = spec
        self.name = Path(spec).stem if _is_file_spec(spec) else spec
        self.decision_timeout_s = float(decision_timeout_s)
        self.episode_timeout_s = float(episode_timeout_s)
        self.memory_mb = int(memory_mb)
        self.max_output_bytes = int(max_output_bytes)
        self.cpu_s = float(cpu_s) if cpu_s is not None else max(60.0, 4 * self.episode_timeout_s)
        self.startup_timeout_s = float(startup_timeout_s)
        self.harden = bool(harden)
        self.params = dict(params or {})
        self.hardening: list[str] = []
        self.starts = 0
        self.episode_time_s = 0.0
        self._proc: subprocess.Popen[bytes] | None = None
        self._output: _Output | None = None
        self._finalizer: Callable[[], None] | None = None
        self._fd_to = self._fd_from = -1
        self._restart_needed = False
        self._sent: tuple[NodeView, ...] = ()
        self._start()

    # -- lifecycle ----------------------------------------------------------------------------
    def _start(self) -> None:
        self._stop()
        tmp = tempfile.mkdtemp(prefix="dream_gym_policy_")
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        config = {"spec": self.spec, "params": self.params, "harden": self.harden}
        boot = _BOOT.format(limits_src=inspect.getsource(apply_limits), memory_mb=self.memory_mb,
                            cpu_s=self.cpu_s)
        argv = [sys.executable, "-I", "-B", "-c", boot, str(to_child_r), str(from_child_w),
                json.dumps(config)]
        try:
            proc = subprocess.Popen(
                argv, cwd=tmp, env=scrubbed_env(home=tmp), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(to_child_r, from_child_w),
                close_fds=True, start_new_session=True,
            )
        except BaseException:
            for fd in (to_child_r, to_child_w, from_child_r, from_child_w):
                os.close(fd)
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        os.close(to_child_r)
        os.close(from_child_w)
        os.set_blocking(to_child_w, False)
        self._proc, self._fd_to, self._fd_from = proc, to_child_w, from_child_r
        self._output = _Output(self.max_output_bytes, proc.pid)
        assert proc.stdout is not None and proc.stderr is not None
        threading.Thread(target=_drain, args=({"stdout": proc.stdout, "stderr": proc.stderr}, self._output),
                         name=f"dream_gym-policy-{proc.pid}-output", daemon=True).start()
        self._finalizer = weakref.finalize(self, _cleanup, proc, [to_child_w, from_child_r], tmp)
        self.starts += 1
        self._restart_needed = False
        self._sent = ()
        hello = self._exchange(None, time.monotonic() + self.startup_timeout_s, "starting")
        if not hello.get("ok"):
            self._stop()
            error = str(hello.get("error", "unknown error"))
            if hello.get("kind") == "notfound":
                raise PolicyNotFoundError(error)
            if hello.get("kind") == "memory":
                raise PolicyMemoryError(f"policy {self.name}: ran out of memory ({self.memory_mb} MB) while loading: {error}")
            raise PolicyLoadError(f"policy {self.name}: loading failed in the isolated process: {error}")
        self.name = str(hello.get("name", self.name))
        self.hardening = [str(h) for h in hello.get("hardening", [])]

    def _stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # kills the group, reaps, closes fds, removes the temp folder
        self._finalizer = None
        self._proc = None

    def close(self) -> None:
        """End the child process (and anything it forked)."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                self._send({"op": "close"}, time.monotonic() + 0.5)
                self._proc.wait(timeout=0.5)
            except (_Deadline, _Closed, subprocess.TimeoutExpired, OSError):
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

    # -- the Policy interface -----------------------------------------------------------------
    def reset(self, context: RunContext) -> None:
        if (self._proc is None or self._proc.poll() is not None or self._restart_needed
                or self._cpu_used() + self.episode_timeout_s > self.cpu_s):
            self._start()
        assert self._output is not None
        with self._output.lock:
            self._output.episode_bytes = 0
        self.episode_time_s = 0.0
        self._sent = ()
        self._call({"op": "reset", "context": dataclasses.asdict(context)}, "reset")

    def act(self, view: PrefixView) -> list[Any]:
        if self._proc is None or self._restart_needed:
            raise PolicyError(f"policy {self.name}: act() after a failure; call reset() first")
        sent = self._sent
        known = len(sent) if len(view.nodes) >= len(sent) and all(
            a is b for a, b in zip(sent, view.nodes, strict=False)) else 0
        reply = self._call({"op": "act", "view": encode_view(view, known)}, "act")
        self._sent = view.nodes
        batch = reply.get("batch")
        if not isinstance(batch, list) or len(batch) > MAX_BATCH or not all(
                item is None or isinstance(item, (int, float, str)) for item in batch):
            self._fail()
            raise PolicyProtocolError(f"policy {self.name}: malformed batch message {str(batch)[:200]!r}")
        return batch

    # -- protocol -----------------------------------------------------------------------------
    def _call(self, message: dict[str, Any], what: str) -> dict[str, Any]:
        started = time.monotonic()
        budget_left = self.episode_timeout_s - self.episode_time_s
        per_decision = self.decision_timeout_s <= budget_left
        deadline = started + min(self.decision_timeout_s, max(0.0, budget_left))
        try:
            reply = self._exchange(message, deadline, what, per_decision)
        finally:
            self.episode_time_s += time.monotonic() - started
        if reply.get("ok"):
            return reply
        self._fail()
        error = str(reply.get("error", "unknown error"))
        kind = reply.get("kind")
        if kind == "memory":
            raise PolicyMemoryError(f"policy {self.name} exceeded its memory limit ({self.memory_mb} MB) in {what}(): {error}")
        if kind == "protocol":
            raise PolicyProtocolError(f"policy {self.name}: {error}")
        raise PolicyException(f"policy {self.name} raised in {what}(): {error}")

    def _exchange(self, message: dict[str, Any] | None, deadline: float, what: str,
                  per_decision: bool = True) -> dict[str, Any]:
        """Send ``message`` (None: only read) and read one reply, turning every failure of the
        child into the right PolicyError (after killing its process group)."""
        try:
            if message is not None:
                self._send(message, deadline)
            head = self._read(_HEADER.size, deadline)
            size = _HEADER.unpack(head)[0]
            if size > MAX_MESSAGE_BYTES:
                self._fail()
                raise PolicyProtocolError(f"policy {self.name}: reply of {size} bytes (limit {MAX_MESSAGE_BYTES})")
            body = self._read(size, deadline)
        except _Deadline:
            self._fail()
            if self._output is not None and self._output.overflow:
                raise self._overflow_error() from None
            if what == "starting":
                raise PolicyTimeout(f"policy {self.name}: did not start within {self.startup_timeout_s:g}s") from None
            if per_decision:
                raise PolicyTimeout(f"policy {self.name}: {what}() took longer than the decision timeout "
                                    f"of {self.decision_timeout_s:g}s; process killed") from None
            raise PolicyTimeout(f"policy {self.name}: episode time budget of {self.episode_timeout_s:g}s "
                                f"exhausted during {what}(); process killed") from None
        except _Closed:
            raise self._death(what) from None
        try:
            reply = json.loads(body)
        except (ValueError, RecursionError) as exc:
            self._fail()
            raise PolicyProtocolError(f"policy {self.name}: unreadable reply ({exc})") from None
        if not isinstance(reply, dict):
            self._fail()
            raise PolicyProtocolError(f"policy {self.name}: reply is not a JSON object")
        return reply

    def _send(self, message: dict[str, Any], deadline: float) -> None:
        data = json.dumps(message, allow_nan=False, separators=(",", ":")).encode("utf-8")
        view = memoryview(_HEADER.pack(len(data)) + data)
        poller = select.poll()
        poller.register(self._fd_to, select.POLLOUT)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Deadline
            events = poller.poll(min(remaining, 0.2) * 1000)
            if not events:
                continue
            if events[0][1] & (select.POLLERR | select.POLLHUP):
                raise _Closed
            try:
                view = view[os.write(self._fd_to, view):]
            except BlockingIOError:
                continue
            except (BrokenPipeError, OSError):
                raise _Closed from None

    def _read(self, n: int, deadline: float) -> bytes:
        chunks: list[bytes] = []
        got = 0
        poller = select.poll()
        poller.register(self._fd_from, select.POLLIN)
        while got < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Deadline
            if not poller.poll(min(remaining, 0.2) * 1000):
                if self._output is not None and self._output.overflow:
                    raise _Deadline  # the drain thread killed the group; reported as overflow
                continue
            chunk = os.read(self._fd_from, min(n - got, 1 << 20))
            if not chunk:
                raise _Closed
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _fail(self) -> None:
        """After any failure: kill the group now; the next reset() starts a fresh child."""
        self._restart_needed = True
        if self._proc is not None:
            _kill_group(self._proc.pid)

    def _overflow_error(self) -> PolicyOutputError:
        return PolicyOutputError(f"policy {self.name} printed more than {self.max_output_bytes} bytes "
                                 "in one episode (max_output_bytes); process killed")

    def _death(self, what: str) -> PolicyError:
        """The error for a child that closed its pipe (it died, or is about to)."""
        assert self._proc is not None
        self._restart_needed = True
        try:
            code = self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            _kill_group(self._proc.pid)
            code = self._proc.wait()
        time.sleep(0.05)  # let the drain thread collect the last words
        if self._output is not None and self._output.overflow:
            return self._overflow_error()
        tail = self.output_tail("stderr")
        sig = signal.Signals(-code).name if code < 0 else None
        how = f"killed by {sig}" if sig else f"exit code {code}"
        tail_note = f"; stderr tail: {tail[-800:].strip()}" if tail.strip() else ""
        if sig == "SIGXCPU":
            return PolicyTimeout(f"policy {self.name}: CPU limit of {self.cpu_s:g}s exceeded during {what}() ({how})")
        if any(s in tail for s in _MEMORY_SIGNS) or sig in ("SIGSEGV", "SIGABRT", "SIGBUS"):
            return PolicyMemoryError(f"policy {self.name}: process died during {what}(), probably out of "
                                     f"memory (limit {self.memory_mb} MB; {how}){tail_note}")
        return PolicyCrashed(f"policy {self.name}: process died during {what}() ({how}){tail_note}",
                             exit_code=code if code >= 0 else None, signal_name=sig, stderr_tail=tail)

    def _cpu_used(self) -> float:
        """CPU seconds the child used so far (0 when unknown)."""
        if self._proc is None:
            return 0.0
        try:
            stat = Path(f"/proc/{self._proc.pid}/stat").read_text()
        except OSError:
            return 0.0
        fields = stat.rsplit(")", 1)[-1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __repr__(self) -> str:
        return f"IsolatedPolicy({self.spec!r}, pid={self.pid})"


__all__ = [
    "IsolatedPolicy", "PolicyCrashed", "PolicyError", "PolicyException", "PolicyLoadError",
    "PolicyMemoryError", "PolicyNotFoundError", "PolicyOutputError", "PolicyProtocolError",
    "PolicyTimeout", "decode_view", "encode_view", "load_policy", "load_policy_file",
    "policy_from_namespace",
]
