"""Job processes that are safe in a threaded parent, and a pool with a watchdog.

**Start method.** Every job pool of dream_gym (evaluation, the online loop) starts its jobs
with :func:`job_context`: the ``forkserver`` start method (``spawn`` where there is none),
never a plain ``fork`` of the caller. A forked child inherits the parent's memory but only the
thread that forked it; a library that already runs a thread pool in the parent (torch's OpenMP
pool after loading a model, BLAS, an HTTP client) can leave locks held by threads that do not
exist in the child, which then waits forever (``MaskablePPO.load`` in a forked child
hung in libgomp). The fork server is a fresh interpreter started once per parent process (fork +
exec, safe from any parent), which imports the modules its first caller names (the module of a
pool's task function; :func:`job_context`'s ``preload``) and then forks each job from its own
single-threaded state: jobs start in milliseconds, already warm, whatever the parent has
initialised since. This module names no module of the layers above it: callers name their own.

What a job gets from the parent: its ``sys.path``, working folder and (through
:func:`init_job`) its environment at the time the pool starts; nothing else of the parent's
state, so policies and tasks must be importable (a built-in name, ``module:Class``, a file), not
objects patched into the parent at runtime. Each job caps BLAS/OpenMP/torch at one thread:
the pools already run one process per core.

**Nothing outlives the parent.** A job's parent is the fork server, not the process that
asked for it, so a ``kill -9`` of that process would leave the server, its jobs and
multiprocessing's resource tracker running for good: each job holds a copy of the server's
"alive" pipe (the server waits for every copy to close before it exits), and an idle job
waits on a queue that its siblings keep open. :func:`init_job` therefore (on Linux) closes the
job's copy of that pipe, so the server exits as soon as the parent is gone, and asks the
kernel for SIGKILL when its own parent, the server, exits (``PR_SET_PDEATHSIG``); if the server
was already gone by then, the job exits at once. The resource tracker exits by itself once
the parent, the server and the jobs have closed their ends of its pipe. At a normal exit the
parent ends both helpers itself and waits for them, so a command that returns has nothing left
running.

**Nothing left in the temp folder.** multiprocessing keeps the fork server's socket in a folder
of the temp folder that only a normal exit removes (``pymp-*``). The fork server's owner makes
that folder a work folder named after itself (:mod:`dream_gym.infrastructure.work_folders`) instead: after a
``kill -9``, the next dream_gym process that makes a work folder sweeps it away.

**Watchdog.** :class:`JobPool` runs a function on tasks in job processes. The function
reports progress by calling ``beat()`` (a timestamp in shared memory: no message, no lock). A
task that makes no progress for ``task_timeout`` seconds is ended: its job is killed and
replaced by a fresh one, the task is reported as a :class:`TaskFailure`, and the other tasks go
on. A task whose phases differ in length gives each its own allowance as it starts it
(``beat(step, allowance_s)``: an online attempt allows its agent one time and its evaluation
another). A job that dies (a segfault, the OOM killer) is reported and replaced the same way.
"""

from __future__ import annotations

import ctypes
import itertools
import multiprocessing
import multiprocessing.util
import os
import shutil
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.context import BaseContext
from typing import Any

from dream_gym.infrastructure.extras import needs_extra
from dream_gym.infrastructure.isolation import THREAD_VARS
from dream_gym.infrastructure.work_folders import work_folder

START_METHOD = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
#: Seconds an evaluation task (one policy on one world) may go without progress (a decision or
#: a finished episode) before the watchdog ends it (``--task-timeout``). Above the isolated
#: policies' own limits (5 s a decision, 30 s to start), so their finer errors come first.
DEFAULT_TASK_TIMEOUT_S = 60.0
_KILL_GRACE_S = 1.0  # SIGTERM first (finalisers kill isolated policy children), then SIGKILL
_UNIX_PATH_MAX = 108  # bytes of an AF_UNIX socket's path (sun_path), its final NUL included
_HELPERS_EXIT_S = 2.0  # how long a normal exit waits for the fork server and the resource tracker
_START_TIMEOUT_S = 120.0  # a new job may take this long to pick up its first task (a loaded machine)


def job_context(preload: Sequence[str] = ()) -> BaseContext:
    """The multiprocessing context of every dream_gym job pool (see the module docstring);
    starts the fork server if it is not running, importing the modules ``preload`` names (the
    caller's own, e.g. ``__name__``) once so that every job starts warm."""
    context = multiprocessing.get_context(START_METHOD)
    if START_METHOD == "forkserver":
        _ensure_fork_server(context, preload)
    return context


def _ensure_fork_server(context: Any, preload: Sequence[str]) -> None:
    """Start the fork server with ``preload`` and one-thread BLAS/OpenMP settings in its
    environment, so that it runs a single thread when it forks a job."""
    from multiprocessing import forkserver

    if getattr(forkserver._forkserver, "_forkserver_pid", None) is not None:
        forkserver.ensure_running()  # restarts a server that died
        return
    context.set_forkserver_preload(list(preload))
    _own_temp_folder()
    saved = {name: os.environ.get(name) for name in THREAD_VARS}
    os.environ.update({name: "1" for name in THREAD_VARS})  # inherited by the server only
    try:
        forkserver.ensure_running()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    # after the pools' own finalisers (priority 0 and up), before the work folder goes (-100)
    multiprocessing.util.Finalize(None, _end_helpers, exitpriority=-50)


def _end_helpers() -> None:
    """At a normal exit, end the fork server and multiprocessing's resource tracker and reap
    them, so that neither outlives this process (each would see its pipe close and exit a
    moment later). One that has not ended within ``_HELPERS_EXIT_S`` is left to end by itself."""
    from multiprocessing import forkserver, resource_tracker

    for helper, pid_name, fd_name in ((forkserver._forkserver, "_forkserver_pid", "_forkserver_alive_fd"),
                                      (resource_tracker._resource_tracker, "_pid", "_fd")):
        pid, fd = getattr(helper, pid_name, None), getattr(helper, fd_name, None)
        if pid is None or fd is None:
            continue
        setattr(helper, pid_name, None)
        setattr(helper, fd_name, None)
        try:
            os.close(fd)  # the helper's last open end of its pipe: it exits
        except OSError:
            continue
        deadline = time.monotonic() + _HELPERS_EXIT_S
        try:
            while os.waitpid(pid, os.WNOHANG)[0] == 0 and time.monotonic() < deadline:
                time.sleep(0.002)
        except ChildProcessError:
            pass


def _own_temp_folder() -> None:
    """Give multiprocessing a work folder of this process for its sockets, unless it has one
    (see the module docstring); removed at a normal exit, as multiprocessing removes its own."""
    # multiprocessing.util.get_temp_dir() makes its pymp-* folder only where this holds none
    config = multiprocessing.current_process()._config  # type: ignore[attr-defined]
    if config.get("tempdir") is None:
        folder = str(work_folder("jobs"))
        if len(folder) + len("/listener-12345678") >= _UNIX_PATH_MAX:  # a deep TMPDIR: pymp-* is shorter
            os.rmdir(folder)
            return
        config["tempdir"] = folder
        multiprocessing.util.Finalize(None, shutil.rmtree, args=(folder, True), exitpriority=-100)


def init_job(environ: Mapping[str, str] | None = None, owner: int | None = None) -> None:
    """Run first in every job: die with ``owner`` (the pid of the process that started the
    pool; see the module docstring), take its environment, one thread per library."""
    if owner is not None:
        _die_with_owner(owner)
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    for name in THREAD_VARS:
        os.environ.setdefault(name, "1")
    if "torch" in sys.modules:  # imported with the caller's main module, before this ran
        threads = os.environ["OMP_NUM_THREADS"]
        sys.modules["torch"].set_num_threads(int(threads) if threads.isdigit() else 1)


def job_initargs() -> tuple[dict[str, str], int]:
    """``initargs`` for :func:`init_job` in a pool started now by this process."""
    return dict(os.environ), os.getpid()


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_owner(owner: int) -> None:
    """Tie a fork-server job's life to ``owner``, the process that asked the server for it."""
    from multiprocessing import forkserver

    parent = os.getppid()
    if parent == owner or not sys.platform.startswith("linux"):
        return  # a child of the owner itself (spawn), whose thread may end before the owner does
    alive_fd = forkserver._forkserver._forkserver_alive_fd  # type: ignore[attr-defined]
    if alive_fd is not None:  # this copy would keep the server alive after the owner dies
        os.close(alive_fd)
        forkserver._forkserver._forkserver_alive_fd = None  # type: ignore[attr-defined]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return  # refused (a seccomp filter, say): the closed pipe still ends the server
    # The server may have exited (its owner gone) before the signal was asked for: then this
    # process was handed to init or a subreaper, whose parent is not the owner.
    if _parent_pid(os.getppid()) != owner:
        os._exit(1)


def _parent_pid(pid: int) -> int | None:
    """The parent of process ``pid`` (from /proc), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2 :].split()[1])  # fields after the command name: state, ppid


# -- the watched pool ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskFailure:
    """A task that did not finish: ``kind`` is "timeout" (no progress for the task timeout; its
    job was killed), "died" (its job process died) or "error" (the task function raised).
    ``step`` is the last step the task reported with ``beat(step)`` (None: none reported)."""

    kind: str
    message: str
    step: int | None = None


class JobStartError(RuntimeError):
    """A new job process died before it could run a task: every job would (e.g. the
    calling script does not import cleanly), so the pool stops instead of failing each task."""


Beat = Callable[..., None]  # beat(step: int | None = None, allowance_s: float | None = None)
TaskFunction = Callable[[Any, Beat], Any]


def _job_main(conn: Connection, progress: Any, fn: TaskFunction, environ: Mapping[str, str],
                 owner: int) -> None:
    """A job: run ``fn(task, beat)`` for each task received and send back what it returns."""
    init_job(environ, owner)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    # Ctrl-C reaches the terminal's whole process group: the parent says "interrupted" once and
    # ends its jobs (SIGTERM, above); a job's own KeyboardInterrupt printed its traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    clock = time.monotonic

    def beat(step: int | None = None, allowance_s: float | None = None) -> None:
        progress[0] = clock()
        if step is not None:
            progress[1] = step
        if allowance_s is not None:  # the next beat is due within this, not the pool's timeout
            progress[3] = allowance_s

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        ticket, index, task = message
        beat()  # before the ticket: once the parent sees the ticket, the time is this task's
        progress[3] = 0.0  # the pool's timeout until the task says otherwise
        progress[1], progress[2] = -1, ticket
        try:
            reply = ("done", index, fn(task, beat))
        except Exception as exc:  # noqa: BLE001 - reported as this task's failure
            reply = ("error", index, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-3)}")
        try:
            conn.send(reply)
        except OSError:  # the parent is gone (kill -9): no one to tell, and a traceback lands on its terminal
            return
        except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be pickled
            reply = ("error", index, f"{type(exc).__name__} while sending the result: {exc}")
            try:
                conn.send(reply)
            except OSError:
                return


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds the task, so finalisers end isolated children


class _Slot:
    """One job process, its pipe, its heartbeat and the tasks sent to it (the first one runs;
    the next waits in the pipe, so the job never waits for the parent between tasks)."""

    def __init__(self, context: BaseContext, fn: TaskFunction):
        self.conn, child_conn = context.Pipe()
        # written by the job: [time of its last beat, step, ticket of the task it runs, the
        # allowance of the task's current phase (0: the pool's task timeout)]
        self.progress = context.RawArray("d", [0.0, -1.0, -1.0, 0.0])  # type: ignore[attr-defined]
        self.process = context.Process(  # type: ignore[attr-defined]
            target=_job_main, args=(child_conn, self.progress, fn, *job_initargs()),
            name="dream_gym-job", daemon=True,
        )
        self.process.start()
        child_conn.close()
        self.queue: deque[tuple[int, int, Any]] = deque()  # (ticket, index, task) sent, not returned
        self.finished = 0  # tasks it returned
        self.head_since = 0.0  # when the first queued task became the one to run

    @property
    def task(self) -> int | None:
        """Index of the task it runs (or is about to), None when idle."""
        return self.queue[0][1] if self.queue else None

    def send(self, ticket: int, index: int, task: Any) -> None:
        if not self.queue:
            self.head_since = time.monotonic()
        self.queue.append((ticket, index, task))
        try:
            self.conn.send((ticket, index, task))
        except OSError:
            pass  # the job is gone: its sentinel reports the task as failed

    def returned(self) -> None:
        """The first task came back: the next one (if any) is now the one to run."""
        self.queue.popleft()
        self.finished += 1
        self.head_since = time.monotonic()

    def started_task(self) -> bool:
        """Whether the job has picked up its first task (a new job may still be starting)."""
        return bool(self.queue) and self.progress[2] == self.queue[0][0]

    def idle_s(self) -> float:
        """Seconds since the running task's last progress (since it became first, if not picked up)."""
        return time.monotonic() - (self.progress[0] if self.started_task() else self.head_since)

    def step(self) -> int | None:
        return int(self.progress[1]) if self.started_task() and self.progress[1] >= 0 else None

    def allowance_s(self) -> float | None:
        """The seconds the running task gave its current phase (None: the pool's timeout)."""
        return self.progress[3] if self.started_task() and self.progress[3] > 0 else None

    def ask_to_stop(self) -> None:
        """An idle job is asked to exit (None); a busy one gets SIGTERM."""
        if not self.queue:
            try:
                self.conn.send(None)
            except OSError:
                pass
        elif self.process.is_alive():
            self.process.terminate()

    def stop(self) -> None:
        """End the job (after :meth:`ask_to_stop`): SIGKILL after a grace period."""
        self.process.join(_KILL_GRACE_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()

    def exit_description(self) -> str:
        self.process.join(_KILL_GRACE_S)
        code = self.process.exitcode
        if code is None:
            return "did not exit"
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit code {code}"


_QUEUED = 2  # tasks sent to a job at a time: the one it runs and the next


class JobPool:
    """Run ``fn(task, beat)`` (a module-level function) on tasks in job processes.

    ``fn`` calls ``beat()`` whenever it makes progress, or ``beat(step)`` to also say where it
    is (e.g. the episode number). :meth:`run` yields ``(task index, what fn returned)`` as tasks
    finish, or ``(task index, TaskFailure)`` for a task that made no progress for
    ``task_timeout`` seconds, whose job died, or that raised. Jobs are started lazily (at
    most one per task) and kept across :meth:`run` calls until :meth:`close`.

    Args:
        fn: the task function; it and the tasks must be picklable (module-level names).
        jobs: job processes.
        task_timeout: seconds without progress after which a task is ended (None: never).
        context: a multiprocessing context (default :func:`job_context`, preloading ``fn``'s module).
    """

    def __init__(self, fn: TaskFunction, jobs: int, *, task_timeout: float | None,
                 context: BaseContext | None = None):
        if jobs < 1:
            raise ValueError(f"jobs must be >= 1, got {jobs}")
        if task_timeout is not None and not task_timeout > 0:
            raise ValueError(f"task_timeout must be > 0 seconds or None, got {task_timeout}")
        self.fn, self.jobs, self.task_timeout = fn, jobs, task_timeout
        self.context = context or job_context(preload=(fn.__module__,))
        self.slots: list[_Slot] = []
        self.replaced = 0  # jobs killed or lost and replaced, over the pool's life
        self._tickets = itertools.count()
        self._pending: deque[tuple[int, Any]] = deque()

    def __enter__(self) -> JobPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for slot in self.slots:
            slot.ask_to_stop()
        for slot in self.slots:
            slot.stop()
        self.slots = []

    def run(self, tasks: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        self._pending = deque(enumerate(tasks))
        while len(self.slots) < min(self.jobs, len(tasks)):
            self.slots.append(_Slot(self.context, self.fn))
        poll_s = 0.5 if self.task_timeout is None else min(0.5, max(0.02, self.task_timeout / 10))
        try:
            while True:
                for _ in range(_QUEUED):  # round-robin: each job gets one before any gets two
                    for i, slot in enumerate(self.slots):
                        if len(slot.queue) < _QUEUED and self._pending:
                            if not slot.queue and not slot.process.is_alive():  # died while idle
                                slot.stop()
                                slot = self.slots[i] = _Slot(self.context, self.fn)
                                self.replaced += 1
                            slot.send(next(self._tickets), *self._pending.popleft())
                busy = [slot for slot in self.slots if slot.queue]
                if not busy:
                    return
                ready = set(wait([s.conn for s in busy] + [s.process.sentinel for s in busy], timeout=poll_s))
                for i, slot in enumerate(self.slots):
                    if not slot.queue:
                        continue
                    if slot.conn in ready or slot.process.sentinel in ready:
                        yield from self._receive(i, slot)
                    elif self._stuck(slot):
                        yield self._fail(i, slot, self._timeout_failure(slot))
        except BaseException:
            self.close()  # a consumer that stops early or fails leaves no job behind
            raise

    def _receive(self, i: int, slot: _Slot) -> Iterator[tuple[int, Any]]:
        """The slot's finished tasks, or the failure of its first one if its job died."""
        try:
            while slot.queue and slot.conn.poll():
                kind, index, payload = slot.conn.recv()
                step = slot.step()
                slot.returned()
                yield index, payload if kind == "done" else TaskFailure("error", payload, step)
        except (EOFError, OSError):
            pass
        if slot.queue and not slot.process.is_alive():
            step, started = slot.step(), slot.started_task()
            how = slot.exit_description()
            if not started and slot.finished == 0:
                raise JobStartError(
                    f"a job process exited ({how}) before it could run a task; its error is printed above. "
                    "A job starts by importing the calling script again (as __mp_main__): the script must "
                    "import cleanly and keep its main code under `if __name__ == \"__main__\":`")
            yield self._fail(i, slot, TaskFailure("died", f"its job process died ({how})", step))

    def _stuck(self, slot: _Slot) -> bool:
        if self.task_timeout is None:
            return False
        limit = (slot.allowance_s() or self.task_timeout) if slot.started_task() else max(self.task_timeout, _START_TIMEOUT_S)
        return slot.idle_s() > limit

    def _timeout_failure(self, slot: _Slot) -> TaskFailure:
        # no measured durations in the message: the record of a grid must not depend on timing
        what = (f"no progress within the task timeout of {slot.allowance_s() or self.task_timeout:g}s"
                if slot.started_task()
                else f"its job did not start within {max(self.task_timeout or 0, _START_TIMEOUT_S):g}s")
        return TaskFailure("timeout", f"{what}; its job process was killed and replaced", slot.step())

    def _fail(self, i: int, slot: _Slot, failure: TaskFailure) -> tuple[int, TaskFailure]:
        """Replace the slot's job; its first task fails, the ones queued behind it run again."""
        index = slot.queue[0][1]
        self._pending.extendleft((queued_index, task) for _, queued_index, task in reversed(list(slot.queue)[1:]))
        slot.ask_to_stop()
        slot.stop()
        self.replaced += 1
        self.slots[i] = _Slot(self.context, self.fn)
        return index, failure


def require_ray() -> None:
    """ValueError naming the extra when Ray, the other backend of evaluation and growing, is not
    installed (found without importing it: importing Ray takes seconds)."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise ValueError(needs_extra("backend 'ray'", "ray"))


__all__ = ["DEFAULT_TASK_TIMEOUT_S", "START_METHOD", "TaskFailure", "JobPool", "JobStartError", "init_job",
           "job_context", "job_initargs", "require_ray"]
