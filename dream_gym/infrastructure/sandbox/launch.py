"""The parent's side of the sandbox: what untrusted code may read, and starting the warden.

:func:`launch` starts :mod:`dream_gym.infrastructure.sandbox.warden` (fork + exec of a fresh interpreter, no
``preexec_fn``, a new session, a scrubbed environment) with a lifeline pipe whose write end
only this process holds. :func:`read_roots` is everything untrusted Python code may read: the
interpreter's standard library, the installed packages, the *code* of dream_gym (its ``.py``
files and Python packages, never a data folder: shipped worlds, models and prompts live in
folders without ``__init__.py``), the system's shared libraries, and the files it is given.
Nothing else: not the current folder, not a world, not ``/proc``, not ``/tmp``.

Where the kernel cannot enforce the sandbox (no Landlock, no seccomp), :func:`launch` raises
:class:`SandboxUnavailable` and nothing runs, unless the caller passed ``unsafe=True`` or the
environment holds ``DREAM_GYM_UNSAFE_NO_SANDBOX=1`` (the CLI's ``--unsafe-no-sandbox``): then the
code runs with no confinement at all, and a warning says so once per process.
"""

from __future__ import annotations

import functools
import json
import os
import site
import subprocess
import sys
import sysconfig
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from dream_gym.infrastructure.sandbox import warden

UNSAFE_ENV = "DREAM_GYM_UNSAFE_NO_SANDBOX"
WARDEN = str(Path(warden.__file__).resolve())
#: Shared libraries a late ``import`` may load, and the files the C library reads.
SYSTEM_TREES = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/dev/urandom", "/dev/random", "/dev/zero")
#: Files untrusted code may also write: ``os.devnull``, which holds nothing and keeps nothing
#: (``dill`` opens it at import, and with it ``torch`` where dill is installed).
SYSTEM_SINKS = ("/dev/null",)
_PACKAGE = Path(__file__).resolve().parents[2]  # dream_gym/
_SITE_NAMES = ("site-packages", "dist-packages")


class SandboxUnavailable(RuntimeError):
    """The kernel cannot enforce the sandbox here, so untrusted code does not run."""


@dataclass(frozen=True)
class KernelSupport:
    """What this kernel offers: Landlock's ABI (0: none), seccomp, and why not."""

    landlock_abi: int
    seccomp: bool
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


@functools.lru_cache(maxsize=1)
def kernel_support() -> KernelSupport:
    """Probe the kernel once per process (no process is started)."""
    problems = []
    abi = warden.landlock_abi()
    if abi < 1:
        problems.append("Landlock is not available (Linux 5.13+ with Landlock enabled in the LSM list)")
    seccomp = True
    try:
        import pyseccomp  # noqa: F401  (loads libseccomp)
    except (ImportError, OSError, RuntimeError) as exc:
        seccomp = False
        problems.append(f"seccomp filters cannot be built ({type(exc).__name__}: {exc}; install libseccomp2)")
    if not sys.platform.startswith("linux"):
        problems.append(f"the sandbox needs Linux, this is {sys.platform}")
    return KernelSupport(abi, seccomp, tuple(problems))


def unsafe_requested(unsafe: bool | None = None) -> bool:
    """The explicit opt-out: ``unsafe`` when given, else the environment variable."""
    return bool(unsafe) if unsafe is not None else os.environ.get(UNSAFE_ENV, "") not in ("", "0")


def require_sandbox(unsafe: bool | None = None) -> None:
    """Raise :class:`SandboxUnavailable` unless the sandbox works here or the caller opted out."""
    if unsafe_requested(unsafe):
        _warn_unsafe()
        return
    support = kernel_support()
    if not support.ok:
        raise SandboxUnavailable(
            "untrusted code does not run here: the kernel cannot sandbox it ("
            + "; ".join(support.problems)
            + f"). To run it anyway, unconfined and at your own risk, pass --unsafe-no-sandbox "
            f"(or set {UNSAFE_ENV}=1)"
        )


@functools.lru_cache(maxsize=1)
def _warn_unsafe() -> None:
    warnings.warn(
        f"{UNSAFE_ENV}: untrusted code runs WITHOUT the sandbox: it can read every file you can "
        "(worlds, keys), use the network and signal your processes", RuntimeWarning, stacklevel=3,
    )


# -- what may be read -------------------------------------------------------------------------
def _is_code(path: Path) -> bool:
    return path.suffix == ".py" or (path.is_dir() and (path / "__init__.py").is_file())


def _children(folder: Path, keep: Any) -> list[str]:
    try:
        return sorted(str(child) for child in folder.iterdir() if keep(child))
    except OSError:
        return []


def _not_the_package(folder: Path) -> Callable[[Path], bool]:
    """The test that keeps an entry of ``folder`` unless it is dream_gym's own folder (installed
    there, or linked to it). A plain entry's real path is its folder's and its name: only links
    are resolved (resolving each of a site folder's hundreds of entries took ~10-20 ms in every
    process that starts a sandbox, such as each evaluation ShinkaEvolve runs)."""
    real = folder.resolve()
    return lambda entry: (entry.resolve() if entry.is_symlink() else real / entry.name) != _PACKAGE


def around(tree: Path, hole: Path) -> list[str]:
    """``tree`` as read roots that leave out ``hole``: itself when ``hole`` is not below it, else
    its entries, and theirs on the way down to ``hole``. A Python installed system-wide keeps
    dream_gym below ``/usr/lib`` or ``/usr/local/lib``, and everything below a read root is
    readable: the whole package (its online agents, its shipped worlds) would be."""
    real = tree.resolve()
    if real == hole:
        return []
    if real not in hole.parents:
        return [str(tree)]
    return [root for entry in _children(real, lambda _entry: True) for root in around(Path(entry), hole)]


@functools.lru_cache(maxsize=1)
def _runtime() -> dict[str, tuple[str, ...]]:
    trees: list[str] = [root for tree in SYSTEM_TREES for root in around(Path(tree), _PACKAGE)]
    listed: list[str] = []
    stdlib_dirs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}
    site_dirs = set(site.getsitepackages()) | {p for p in sys.path if Path(p).name in _SITE_NAMES}
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        site_dirs.add(site.getusersitepackages())
    for folder in map(Path, sorted(stdlib_dirs)):
        listed.append(str(folder))
        trees += _children(folder, lambda p: p.name not in _SITE_NAMES)
    for folder in map(Path, sorted(site_dirs)):
        listed.append(str(folder))
        trees += _children(folder, _not_the_package(folder))
    listed.append(str(_PACKAGE))  # names only; data folders stay unreadable
    trees += _children(_PACKAGE, _is_code)
    return {"tree": tuple(dict.fromkeys(trees)), "list": tuple(dict.fromkeys(listed)),
            "file": SYSTEM_FILES}


def read_roots(files: Iterable[str | os.PathLike[str]] = (),
               trees: Iterable[str | os.PathLike[str]] = (),
               package_parts: Iterable[str] | None = None) -> dict[str, list[str]]:
    """The read roots of untrusted code (see the module docstring), plus ``files`` and the
    folders ``trees`` (everything below them). ``package_parts``: the entries of dream_gym's folder
    whose code may be read (``"replay"``, ``"policy.py"``); None: all of its code."""
    runtime = _runtime()
    code = _code_trees(None if package_parts is None else tuple(sorted(package_parts)))
    extra = [str(Path(f).resolve()) for f in files]
    folders = [str(Path(t).resolve()) for t in trees]
    return {"tree": [*code, *folders], "list": list(runtime["list"]), "file": [*runtime["file"], *extra]}


@functools.lru_cache(maxsize=4)
def _code_trees(package_parts: tuple[str, ...] | None) -> tuple[str, ...]:
    """The runtime's trees with, of dream_gym's own entries, only ``package_parts`` (None: all);
    made once a process (a template restarted after every forged reply made it again)."""
    trees = _runtime()["tree"]
    if package_parts is None:
        return trees
    kept = {str(_PACKAGE / part) for part in package_parts}
    return tuple(tree for tree in trees if os.path.dirname(tree) != str(_PACKAGE) or tree in kept)


@functools.lru_cache(maxsize=1)
def _compiled_filters() -> dict[str, str]:
    """The seccomp programs a payload loads (a template, its episodes, a script), built here
    once (:func:`warden.compiled_filters`); none where this process cannot build them (the
    payload then builds its own, or says why it cannot)."""
    try:
        return warden.compiled_filters()
    except (ImportError, OSError, RuntimeError, ValueError):
        return {}


# -- starting the warden ----------------------------------------------------------------------
@dataclass
class Launched:
    """A started sandbox: the warden's process and the parent's end of its lifeline."""

    proc: subprocess.Popen[bytes]
    lifeline: int
    report: int = -1  # scripts: the pipe on which the warden says the sandbox is in force
    done: int = -1  # a workspace's: the pipe on which the warden reports it after the payload

    def confined(self, timeout_s: float) -> list[str]:
        """Wait for a script's sandbox report: the layers in force; :class:`SandboxUnavailable`
        when the kernel refused one (nothing of the script ran), TimeoutError past ``timeout_s``."""
        import select
        import time

        data, stop = b"", time.monotonic() + timeout_s
        try:
            while True:
                left = stop - time.monotonic()
                if left <= 0 or not select.select([self.report], [], [], left)[0]:
                    raise TimeoutError(f"the sandbox did not start within {timeout_s:g}s")
                chunk = os.read(self.report, 1 << 16)
                if not chunk:
                    break
                data += chunk
        finally:
            os.close(self.report)
            self.report = -1
        reply: dict[str, Any] = json.loads(data) if data else {"ok": False, "error": "the warden died before confining"}
        if not reply.get("ok"):
            raise SandboxUnavailable(f"untrusted code did not run: {reply.get('error')}")
        return [str(n) for n in reply.get("notes", [])]

    def workspace_report(self) -> dict[str, Any]:
        """What the warden said of the workspace once the payload had ended (read after the
        warden exited; empty when it said nothing, e.g. killed at the deadline): ``over``
        ("size" or "files" when the cap was reached, else None), ``size_mb``, ``inodes`` and
        ``refused``, the outputs not handed back, ``{name: [st_mode, st_size, limit]}``."""
        if self.done < 0:
            return {}
        try:
            os.set_blocking(self.done, False)
            data = os.read(self.done, warden.WORKSPACE_REPORT_BYTES + 1)
        except OSError:  # BlockingIOError: nothing was written
            data = b""
        finally:
            os.close(self.done)
            self.done = -1
        try:
            report = json.loads(data) if 0 < len(data) <= warden.WORKSPACE_REPORT_BYTES else {}
        except ValueError:
            report = {}
        return report if isinstance(report, dict) else {}

    def release(self) -> None:
        """Close the lifeline (the warden then kills whatever is left of the sandbox)."""
        if self.lifeline >= 0:
            try:
                os.close(self.lifeline)
            except OSError:
                pass
            self.lifeline = -1
        if self.done >= 0:
            os.close(self.done)
            self.done = -1


def launch(
    payload: Mapping[str, Any],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str],
    read_files: Sequence[str | os.PathLike[str]] = (),
    read_trees: Sequence[str | os.PathLike[str]] = (),
    write: Sequence[str | os.PathLike[str]] = (),
    limits: Mapping[str, Any] | None = None,
    keep_fds: Sequence[int] = (),
    unsafe: bool | None = None,
    stdin: int | IO[bytes] | None = subprocess.DEVNULL,
    workspace: Mapping[str, Any] | None = None,
    package_parts: Iterable[str] | None = None,
) -> Launched:
    """Start ``payload`` (``{"script": path, "args": [...]}`` or ``{"call": "module:function",
    "args": [...]}``) in the sandbox; raises :class:`SandboxUnavailable` first where it cannot be.

    ``read_files`` and the folders ``read_trees`` may be read besides the runtime, and of
    dream_gym's code only ``package_parts`` where given (:func:`read_roots`). ``keep_fds`` are descriptors of this process handed to the payload (at the same numbers).
    stdout and stderr are pipes (``proc.stdout``, ``proc.stderr``). ``workspace`` caps the total
    size of a script's working folder (:class:`~dream_gym.infrastructure.sandbox.warden.Workspace`: ``path``,
    ``size_mb``, ``inodes``, ``outputs``); the warden's report on it is
    :meth:`Launched.workspace_report`.
    """
    unsafe = unsafe_requested(unsafe)
    require_sandbox(unsafe)
    life_r, life_w = os.pipe()
    report_r, report_w = os.pipe() if "script" in payload else (-1, -1)
    done_r, done_w = os.pipe() if workspace else (-1, -1)
    handed = (life_r, *keep_fds, *([report_w] if report_w >= 0 else []))
    config = {
        "lifeline": life_r,
        "namespaces": True,
        "limits": dict(limits or {}),
        "confine": {"read": read_roots(read_files, read_trees, package_parts),
                    "write": [*(str(Path(w).resolve()) for w in write), *SYSTEM_SINKS],
                    "unsafe": unsafe, **({} if unsafe else {"filters": _compiled_filters()})},
        "payload": dict(payload),
        "keep_fds": list(handed[1:]),
        "report_fd": report_w if report_w >= 0 else None,
        "workspace": dict(workspace) if workspace else None,
        "done_fd": done_w if done_w >= 0 else None,  # the warden's alone: the payload closes it
    }
    argv = [sys.executable, "-s", "-B", WARDEN, json.dumps(config)]
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=dict(env), stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=(*handed, *([done_w] if done_w >= 0 else [])), close_fds=True, start_new_session=True,
        )
    except BaseException:
        for fd in (life_w, report_r, done_r):
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        for fd in (life_r, report_w, done_w):
            if fd >= 0:
                os.close(fd)
    return Launched(proc, life_w, report_r, done_r)


__all__ = ["KernelSupport", "Launched", "SandboxUnavailable", "UNSAFE_ENV", "kernel_support", "launch",
           "read_roots", "require_sandbox", "unsafe_requested"]
