"""Run an untrusted Python program in the sandbox, with time, memory and output limits.

Used by the online evaluators (candidate programs written by a discovery agent) and by the
survival check. What a child gets:

* the **sandbox** of :mod:`dream_gym.infrastructure.sandbox`, in force before the program's first line:
  reads only of Python's runtime and of its own folder, writes only below its own folder (the
  ``cwd``: an attempt's workspace, outside every world), no other process's ``/proc``, no
  network, no new processes, no signals to anything but itself, no exec; namespaces where the
  kernel allows them; everything it started dies with it, and with the parent;
* a **scrubbed environment** (:func:`scrubbed_env`): PATH, HOME/TMPDIR (the work folder), LANG,
  PYTHONHASHSEED=0, PYTHONDONTWRITEBYTECODE=1 and single-threaded BLAS/OpenMP — nothing else of
  the parent's environment;
* **resource limits**: address space (RLIMIT_AS), CPU seconds (RLIMIT_CPU, then SIGKILL one
  second later), no core files, a cap on file sizes;
* a **workspace of bounded size** (``workspace_mb``, default :data:`DEFAULT_WORKSPACE_MB`; at most
  :data:`WORKSPACE_FILES` files): where the kernel gives the sandbox a mount namespace, its
  working folder is a tmpfs of that size holding a copy of the folder's files, and only the
  named ``outputs`` come back to the real folder afterwards, each a regular file within its size
  (a link, a FIFO, a file too large stays behind and is named in
  :attr:`RunOutcome.refused_outputs`); elsewhere the sandbox's warden measures the folder every
  0.1 s and kills the program once it is over the cap. Either way
  :attr:`RunOutcome.workspace_problem` names a cap that was reached;
* its **own session / process group**, killed as a whole on timeout and after exit;
* a **wall-clock deadline** enforced by the parent;
* **bounded output capture**: stdout and stderr keep their first and last ``max_output_bytes / 2``
  bytes with a marker in between, so a flood cannot exhaust the parent's memory.

The child is started by fork + exec only (``subprocess`` without ``preexec_fn``), which is safe
in a parent with threads; limits and confinement are applied by the sandbox's warden.
"""

from __future__ import annotations

import collections
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from dream_gym.infrastructure.limits import leftover_problem

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
#: Variables copied from the parent when present; everything else is dropped.
ENV_ALLOWLIST = ("LANG", "LC_ALL", "TZ")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS")
TRUNCATION_MARKER = "\n[... {n} bytes cut by dream_gym.infrastructure.isolation ...]\n"
# Messages a child prints when an allocation fails under RLIMIT_AS (glibc's loader says
# "cannot allocate memory for thread-local data"): compared without case.
_MEMORY_SIGNS = ("memoryerror", "cannot allocate memory", "std::bad_alloc", "unable to allocate",
                 "memory allocation failed", "out of memory")


def says_out_of_memory(text: str) -> bool:
    """Whether a process's last words say that an allocation failed."""
    lowered = text.lower()
    return any(sign in lowered for sign in _MEMORY_SIGNS)


#: Megabytes a program's working folder may hold in all (its files, its HOME and TMPDIR). The
#: tmpfs that holds them is memory: W candidates side by side may take W times this on top of
#: their address-space limits.
DEFAULT_WORKSPACE_MB = 64
#: Files and folders a working folder may hold.
WORKSPACE_FILES = 4096


def scrubbed_env(extra: Mapping[str, str] | None = None, home: str | os.PathLike[str] | None = None
                 ) -> dict[str, str]:
    """A minimal environment for a child process, with no secrets of the parent.

    Only :data:`ENV_ALLOWLIST` is copied from ``os.environ``. ``HOME`` and ``TMPDIR`` point at
    ``home`` (default: the system temp folder). ``extra`` is added last and wins.
    """
    home = str(home) if home is not None else tempfile.gettempdir()
    bindir = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{bindir}:{DEFAULT_PATH}",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env.update({name: "1" for name in THREAD_VARS})
    env.update({name: os.environ[name] for name in ENV_ALLOWLIST if name in os.environ})
    if extra:
        env.update(extra)
    return env


class _Capture:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int):
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_len = 0
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail.append(data)
            self.tail_len += len(data)
            while self.tail_len - len(self.tail[0]) >= self.half:
                self.tail_len -= len(self.tail.popleft())

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + min(self.tail_len, self.half)

    def text(self) -> str:
        tail = b"".join(self.tail)[-self.half:] if self.tail else b""
        cut = self.total - len(self.head) - len(tail)
        head_s = self.head.decode("utf-8", "replace")
        tail_s = tail.decode("utf-8", "replace")
        return head_s + TRUNCATION_MARKER.format(n=cut) + tail_s if cut > 0 else head_s + tail_s


@dataclass
class RunOutcome:
    """What happened to one isolated run.

    ``returncode`` is negative (``-signal``) when the child was killed by a signal.
    ``stdout``/``stderr`` are truncated to ``max_output_bytes`` with a marker in the middle.
    ``memory_exceeded`` is best effort: a MemoryError-like message in stderr, or a kill without
    timeout by SIGKILL/SIGSEGV/SIGABRT. ``timed_out`` covers the wall deadline and the CPU limit.
    """

    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool
    memory_exceeded: bool
    killed_signal: int | None
    argv: list[str]
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_bytes: int = 0
    #: "workspace limit of 64 MB reached" (or "of 4096 files") when the program's working folder
    #: reached its cap (a tmpfs full at the end, or the program killed for writing past it).
    workspace_problem: str | None = None
    #: Outputs not handed back from the workspace, and why: ``{"_result.json": "is a FIFO, not a
    #: regular file"}``.
    refused_outputs: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def describe(self) -> str:
        """A one-line human summary of a failed run (empty for a clean exit)."""
        if self.timed_out:
            return f"timeout after {self.duration_s:.1f}s"
        if self.workspace_problem:
            return self.workspace_problem
        if self.memory_exceeded:
            return "memory limit exceeded"
        if self.killed_signal is not None:
            return f"killed by signal {signal.Signals(self.killed_signal).name}"
        if self.returncode:
            return f"exit code {self.returncode}"
        return ""


#: The stdout lines a child's protocol has not read yet (:meth:`IsolatedProcess.read_line`): at
#: most this many, of at most this many bytes in all, each cut to :data:`LINE_BYTES`. Past
#: either, lines are only captured; a task whose protocol reads none (most) queues at most that.
QUEUED_LINES, QUEUED_BYTES, LINE_BYTES = 10_000, 1 << 20, 1 << 16


@dataclass
class IsolatedProcess:
    """A running isolated child that can be talked to line by line (see :func:`start_python`).

    Read protocol lines with :meth:`read_line`, send with :meth:`send`, end with
    :meth:`finish`, which enforces the deadline, kills the process group and returns a
    :class:`RunOutcome`. Everything the child prints is also captured (bounded).
    """

    proc: subprocess.Popen[bytes]
    argv: list[str]
    deadline: float
    max_output_bytes: int
    started: float = field(default_factory=time.monotonic)
    timed_out: bool = False
    lifeline: Any = None  # the sandbox's Launched: released when the run ends
    workdir: Path | None = None
    notes: list[str] = field(default_factory=list)  # the sandbox's layers, as the warden named them

    def __post_init__(self) -> None:
        self._out = _Capture(self.max_output_bytes)
        self._err = _Capture(self.max_output_bytes)
        self._lines: collections.deque[bytes] = collections.deque()
        self._queued = 0  # bytes the lines not read yet hold
        self._partial = b""
        self._sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        for stream, cap in ((self.proc.stdout, self._out), (self.proc.stderr, self._err)):
            os.set_blocking(stream.fileno(), False)
            self._sel.register(stream.fileno(), selectors.EVENT_READ, cap)

    def workspace_path(self, name: str) -> Path:
        """Where this process sees the file ``name`` of the child's working folder while the
        child runs: inside the sandbox's tmpfs (through the warden's ``/proc/<pid>/root``) when
        it has one, else in the folder itself. Only to look at (``is_file``); a file the
        child left is read once it has ended, with :func:`dream_gym.infrastructure.limits.read_leftover`."""
        assert self.workdir is not None
        folder = self.workdir.resolve()
        if any(note.startswith("workspace tmpfs") for note in self.notes):
            return Path(f"/proc/{self.proc.pid}/root{folder}") / name
        return folder / name

    def send(self, data: bytes) -> bool:
        """Write to the child's stdin; False when the child no longer reads it."""
        if self.proc.stdin is None:
            return False
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def _pump(self, timeout: float) -> bool:
        """Read whatever is available within ``timeout``; False once all pipes are closed."""
        if not self._sel.get_map():  # output closed: wait for the exit itself, not a fixed nap past it
            try:
                self.proc.wait(max(0.0, min(timeout, 0.01)))
            except subprocess.TimeoutExpired:
                pass
            return False
        for key, _ in self._sel.select(max(0.0, timeout)):
            try:
                data = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if not data:
                self._sel.unregister(key.fd)
                continue
            key.data.add(data)
            if key.data is self._out and len(self._lines) < QUEUED_LINES and self._queued < QUEUED_BYTES:
                self._split_lines(data)
        return True

    def _split_lines(self, data: bytes) -> None:
        chunk = self._partial + data
        *complete, self._partial = chunk.split(b"\n")
        self._partial = self._partial[-LINE_BYTES:]  # a line without newline cannot grow without bound
        for line in complete:
            line = line[:LINE_BYTES]
            self._lines.append(line)
            self._queued += len(line)

    def read_line(self, prefix: bytes = b"", timeout: float | None = None) -> bytes | None:
        """The next stdout line starting with ``prefix`` (prefix removed), or None on
        deadline, timeout or end of output. Other lines are only captured."""
        stop = self.deadline if timeout is None else min(self.deadline, time.monotonic() + timeout)
        while True:
            while self._lines:
                line = self._lines.popleft()
                self._queued -= len(line)
                if line.startswith(prefix):
                    return line[len(prefix):]
            now = time.monotonic()
            if now >= stop:
                if now >= self.deadline:
                    self.timed_out = True
                return None
            if not self._pump(min(stop - now, 0.05)) and self.proc.poll() is not None:
                return None

    def finish(self) -> RunOutcome:
        """Wait for exit (until the deadline), kill the process group, return the outcome."""
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        while not self.timed_out and self.proc.poll() is None:
            now = time.monotonic()
            if now >= self.deadline:
                self.timed_out = True
                break
            self._pump(min(self.deadline - now, 0.05))
        self.kill()
        self.proc.wait()
        report: dict[str, Any] = {}
        if self.lifeline is not None:
            report = self.lifeline.workspace_report()
            self.lifeline.release()
        ended = time.monotonic()
        # Drain what is left; grandchildren are dead, so the pipes reach EOF quickly.
        drain_until = time.monotonic() + 1.0
        while self._sel.get_map() and time.monotonic() < drain_until:
            self._pump(0.05)
        self._sel.close()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return self._outcome(ended - self.started, report)

    def kill(self) -> None:
        """SIGKILL the child's whole process group (a no-op when it is already gone)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _outcome(self, duration: float, workspace: dict[str, Any]) -> RunOutcome:
        code = self.proc.returncode
        sig = -code if code is not None and code < 0 else None
        stderr = self._err.text()
        timed_out = self.timed_out or sig in (signal.SIGXCPU,)
        memory = says_out_of_memory(stderr[-4000:]) or (
            not timed_out and sig in (signal.SIGSEGV, signal.SIGABRT)
        )
        return RunOutcome(
            returncode=code, stdout=self._out.text(), stderr=stderr, duration_s=duration,
            timed_out=timed_out, memory_exceeded=memory, killed_signal=sig, argv=self.argv,
            stdout_truncated=self._out.truncated, stderr_truncated=self._err.truncated,
            stdout_bytes=self._out.total, workspace_problem=_workspace_problem(workspace),
            refused_outputs=_refused_outputs(workspace),
        )


def _workspace_problem(report: dict[str, Any]) -> str | None:
    over = report.get("over")
    if over == "files":
        return f"workspace limit of {report.get('inodes')} files reached"
    if over == "size":
        return f"workspace limit of {report.get('size_mb')} MB reached"
    return None


def _refused_outputs(report: dict[str, Any]) -> dict[str, str]:
    refused = report.get("refused")
    problems = {}
    for name, facts in (refused.items() if isinstance(refused, dict) else ()):
        if isinstance(facts, list) and len(facts) == 3 and all(isinstance(n, int) for n in facts):
            problems[str(name)] = leftover_problem(*facts) or "was not handed back"
    return problems


def start_python(
    script: str | os.PathLike[str],
    *,
    args: Sequence[str] = (),
    cwd: str | os.PathLike[str] | None = None,
    wall_s: float = 10.0,
    memory_mb: int | None = 1024,
    cpu_s: float | None = None,
    max_output_bytes: int = 1 << 20,
    env_extra: Mapping[str, str] | None = None,
    stdin_bytes: bytes | None = None,
    unsafe_no_sandbox: bool | None = None,
    workspace_mb: int | None = DEFAULT_WORKSPACE_MB,
    outputs: Mapping[str, int] | None = None,
    read_dirs: Sequence[str | os.PathLike[str]] = (),
) -> IsolatedProcess:
    """Start ``script`` in the sandbox (:mod:`dream_gym.infrastructure.sandbox`) and return it for line-by-line
    interaction, once the sandbox is in force (the script has not run a line before).

    The script may read Python's runtime and itself, and read and write only below ``cwd``
    (default: the script's folder), its HOME and TMPDIR, and everything below the folders
    ``read_dirs`` (read only: a task's evaluator and the data it reads). ``cpu_s`` defaults to ``wall_s``
    (rounded up): on one core CPU time cannot exceed wall time. With ``stdin_bytes`` the child
    reads them from a file (no pipe that could fill up and block the parent) and
    :meth:`IsolatedProcess.send` is unavailable. ``workspace_mb`` caps what ``cwd`` may hold
    in all (None: no cap but the file-size limit); ``outputs`` maps file-name patterns of ``cwd``
    (``fnmatch``, top level only) to the most bytes each such file may hold when it is handed
    back (default: every file, within the cap). Raises
    :class:`~dream_gym.infrastructure.sandbox.SandboxUnavailable` where the kernel cannot sandbox it
    (``unsafe_no_sandbox`` runs it unconfined instead).
    """
    from dream_gym.infrastructure.sandbox import launch

    script = Path(script).resolve()
    workdir = Path(cwd) if cwd is not None else script.parent
    argv_child = [str(script), *map(str, args)]
    stdin: int | IO[bytes] = subprocess.PIPE
    if stdin_bytes is not None:
        stdin = tempfile.TemporaryFile()
        stdin.write(stdin_bytes)
        stdin.seek(0)
    workspace = None if workspace_mb is None else {
        "path": str(workdir.resolve()), "size_mb": int(workspace_mb), "inodes": WORKSPACE_FILES,
        "outputs": dict(outputs) if outputs is not None else {"*": int(workspace_mb) << 20},
    }
    started = time.monotonic()
    try:
        launched = launch(
            {"script": str(script), "args": argv_child[1:]}, env=scrubbed_env(env_extra, home=workdir),
            cwd=workdir, read_files=[script], read_trees=read_dirs, write=[workdir], stdin=stdin, unsafe=unsafe_no_sandbox,
            limits={"memory_mb": memory_mb, "cpu_s": wall_s if cpu_s is None else cpu_s, "fsize_mb": 256},
            workspace=workspace,
        )
    finally:
        if not isinstance(stdin, int):
            stdin.close()
    try:
        notes = launched.confined(max(wall_s, 30.0))
    except BaseException:
        IsolatedProcess(launched.proc, [], 0.0, 1).kill()
        launched.proc.wait()
        launched.release()
        raise
    shown = [sys.executable, "-s", "-B", "<dream_gym sandbox>", *argv_child]
    child = IsolatedProcess(launched.proc, shown, started + wall_s, max_output_bytes, started=started,
                            workdir=workdir, notes=notes)
    child.lifeline = launched
    return child


def run_python(
    script: str | os.PathLike[str] | None = None,
    *,
    code: str | None = None,
    args: Sequence[str] = (),
    stdin_bytes: bytes | None = None,
    cwd: str | os.PathLike[str] | None = None,
    wall_s: float = 10.0,
    memory_mb: int | None = 1024,
    cpu_s: float | None = None,
    max_output_bytes: int = 1 << 20,
    env_extra: Mapping[str, str] | None = None,
    unsafe_no_sandbox: bool | None = None,
    workspace_mb: int | None = DEFAULT_WORKSPACE_MB,
    outputs: Mapping[str, int] | None = None,
    read_dirs: Sequence[str | os.PathLike[str]] = (),
) -> RunOutcome:
    """Run a Python file (``script``) or source text (``code``) isolated; return its outcome.

    Exactly one of ``script`` and ``code`` is given; ``code`` is written to a temporary file
    first. ``cwd`` is the child's working folder and HOME (default: the script's folder, or
    a fresh temp folder for ``code``). The whole process group is killed at ``wall_s``.
    ``workspace_mb``, ``outputs`` and ``read_dirs``: see :func:`start_python`.
    """
    if (script is None) == (code is None):
        raise ValueError("run_python needs exactly one of script= and code=")
    with tempfile.TemporaryDirectory(prefix="dream_gym_run_") as tmp:
        if code is not None:
            script = Path(tmp) / "main.py"
            script.write_text(code, encoding="utf-8")
        assert script is not None
        child = start_python(script, args=args, cwd=cwd if cwd is not None else tmp, wall_s=wall_s,
                             memory_mb=memory_mb, cpu_s=cpu_s, max_output_bytes=max_output_bytes,
                             env_extra=env_extra, stdin_bytes=stdin_bytes,
                             unsafe_no_sandbox=unsafe_no_sandbox, workspace_mb=workspace_mb, outputs=outputs,
                             read_dirs=read_dirs)
        return child.finish()


__all__ = ["DEFAULT_WORKSPACE_MB", "WORKSPACE_FILES", "RunOutcome", "IsolatedProcess", "says_out_of_memory",
           "scrubbed_env", "start_python", "run_python"]
