"""Hostile: first switches off the Python audit hook (``os.devnull`` reassigned, the hook's
closure cells and globals edited through ``gc``), then tries every way out it knows, and reports
what worked by raising ``FOUND=<json list>``. Sandboxed, the list must be empty.

The world's task description is JSON written by the test: ``parent_pid`` (the evaluating
process), ``port`` (a TCP port listening on 127.0.0.1), ``world`` (a world file on disk),
``secret`` (a value in the parent's environment), ``out`` (a folder the policy must not write
to), ``tmp_file`` (a file in /tmp it must not create) and ``dangerous`` (whether to send real SIGKILLs; off in the unsandboxed control)."""

import ctypes
import gc
import json
import os
import signal
import socket
import types


class _Everyone:
    """Equal to every value: a hook that asks 'is this pid mine?' hears yes."""

    def __eq__(self, other):
        return True

    def __neg__(self):
        return self

    __hash__ = object.__hash__


def _disable_audit_hook():
    os.devnull = "/"  # the old hook compared paths with os.devnull looked up at call time
    replacements = {"roots": ("/",), "readable": lambda path: True, "startswith": lambda text, prefix: True,
                    "devnull": "/", "write_flags": 0, "getpid": _Everyone}
    gc.unfreeze()  # the objects the template froze out of the collector's view come back
    for obj in gc.get_objects():
        if not isinstance(obj, types.FunctionType) or obj.__code__.co_name != "hook" or not obj.__closure__:
            continue
        for name, cell in zip(obj.__code__.co_freevars, obj.__closure__, strict=True):
            if name in replacements:
                try:
                    cell.cell_contents = replacements[name]
                except (TypeError, ValueError, AttributeError):
                    pass
        obj.__globals__["DENIED_EVENTS"] = frozenset()
        obj.__globals__["DENIED_PREFIXES"] = ("\0",)


def _ancestors():
    """This process's ancestors, from /proc/<pid>/stat."""
    pids, pid = [], os.getpid()
    while pid > 1 and len(pids) < 64:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        pids.append(pid)
    return pids


def _environ_secrets(secret):
    found = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        pids = [os.getppid(), 1]
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if secret.encode() in handle.read():
                    found.append("secret in /proc/pid/environ")
        except OSError:
            pass
    libc = ctypes.CDLL(None, use_errno=True)
    for pid in _ancestors() or [os.getppid()]:
        fd = libc.open(f"/proc/{pid}/environ".encode(), os.O_RDONLY)
        if fd < 0:
            continue
        buf = ctypes.create_string_buffer(1 << 20)
        size = libc.read(fd, buf, 1 << 20)  # before buf.raw is taken
        if secret.encode() in buf.raw[: max(0, size)]:
            found.append("secret in an ancestor's environ through libc")
        libc.close(fd)
    return sorted(set(found))


def _write(path):
    """os.open, not open(): the hook reads a mode string it cannot be talked out of."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"escaped")
    os.close(fd)


def _try(found, label, action):
    try:
        if action() is not False:
            found.append(label)
    except Exception:  # noqa: BLE001 - refused: the sandbox held
        pass


def _child_exits(pid):
    """True in the parent of a new process (the new process itself ends at once)."""
    if pid == 0:
        os._exit(0)
    return pid > 0


def _seize(libc, pid):
    """PTRACE_SEIZE (it does not stop the tracee), then detach."""
    if libc.ptrace(0x4206, pid, 0, 0) != 0:
        return False
    libc.ptrace(17, pid, 0, 0)
    return True


def act(view):
    facts = json.loads(view.task_description)
    _disable_audit_hook()
    found = _environ_secrets(facts["secret"])
    _try(found, "read a world file", lambda: open(facts["world"]).read(10))
    _try(found, "read /etc/passwd", lambda: open("/etc/passwd").read(10))
    _try(found, "listed /proc", lambda: os.listdir("/proc/1/fd"))
    _try(found, "wrote into the out folder", lambda: _write(os.path.join(facts["out"], "escaped.txt")))
    _try(found, "wrote /tmp", lambda: _write(facts["tmp_file"]))
    _try(found, "connected to 127.0.0.1", lambda: socket.create_connection(("127.0.0.1", facts["port"]), 2))
    _try(found, "opened a UDP socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    _try(found, "forked", lambda: _child_exits(os.fork()))
    libc = ctypes.CDLL(None, use_errno=True)
    _try(found, "cloned by raw syscall", lambda: _child_exits(libc.syscall(56, signal.SIGCHLD, 0, 0, 0, 0)))
    _try(found, "new session", os.setsid)
    _try(found, "ptrace of the parent", lambda: _seize(libc, os.getppid()))
    _try(found, "may signal the evaluating process", lambda: os.kill(facts["parent_pid"], 0))
    _try(found, "may signal every process", lambda: os.kill(-1, 0))
    _try(found, "may signal its parent", lambda: os.kill(os.getppid(), 0))
    if facts.get("dangerous"):
        _try(found, "execve", lambda: os.execv("/bin/true", ["true"]))
        for pid in (facts["parent_pid"], os.getppid(), 1):
            _try(found, f"sent SIGKILL to {pid}", lambda pid=pid: os.kill(pid, signal.SIGKILL))
        _try(found, "sent SIGKILL to its group", lambda: os.killpg(0, signal.SIGKILL))
    raise RuntimeError("FOUND=" + json.dumps(found))
