"""How a system's run stops on Ctrl-C or SIGTERM, and what it leaves of the process.

A first signal asks the run to stop after the work in flight (each system's own handler, or
ShinkaEvolve's bridge's), and the run says so (:func:`say_stopping`): a stop that waits on an
LLM call looked like a command that ignored Ctrl-C. A second signal stops at once: OpenEvolve
and SkyDiscover answer it with ``sys.exit(0)``, read here as KeyboardInterrupt
(:func:`second_signal_interrupts`), and the coroutine's loop does not wait for the calls still
in its executor threads (:func:`run_coroutine`): SkyDiscover makes its LLM calls there, and a
call that hangs held the process (two Ctrl-C did nothing; only ``kill -9`` ended it). The
handlers, the root logger and ``sys.path`` a system changes are put back after its run
(:func:`kept_process_state`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def kept_process_state() -> Iterator[None]:
    """The process-wide state a system's run changes and leaves changed, put back after it: SIGINT's
    and SIGTERM's handlers (OpenEvolve and SkyDiscover install their own for a graceful stop: in the
    process that called ``deploy``, a notebook or ``rsi``'s loop, a later Ctrl-C called the finished
    run's handler, OpenEvolve's an AttributeError, and SIGTERM no longer ended it) and the root
    logger's level and handlers (each run adds a file handler on its own log and a console
    handler: every later message of the process went to that run's log file and to the console),
    and ``sys.path`` (each adds its task's folder: a later import could find a module there)."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    path = list(sys.path)
    main = threading.current_thread() is threading.main_thread()  # signals are the main thread's
    kept = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        yield
    finally:
        for number, handler in kept.items():
            signal.signal(number, handler)
        for added in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(added)
            added.close()
        root.setLevel(level)
        sys.path[:] = path


@contextlib.contextmanager
def second_signal_interrupts() -> Iterator[None]:
    """OpenEvolve and SkyDiscover answer a second Ctrl-C with ``sys.exit(0)``: a stop at once, not
    a finished run. It ended the command silently with exit status 0; here it is KeyboardInterrupt
    (the CLI says "interrupted", status 130, and ``--resume`` continues the run)."""
    try:
        yield
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
        raise KeyboardInterrupt from None


def say_stopping(what: str) -> None:
    """Say, on stderr, that the run stops after ``what`` finishes and how to stop it at once.
    Called from a signal handler, so written straight to the descriptor where there is one (a
    buffered write the signal interrupted must not be re-entered)."""
    text = (f"stopping after {what} (each is recorded); Ctrl-C again stops at once, "
            "and --resume continues the run\n")
    try:
        fileno = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a notebook's stream
        with contextlib.suppress(Exception):
            sys.stderr.write(text)
        return
    with contextlib.suppress(OSError):
        os.write(fileno, text.encode("utf-8", "replace"))


class _DaemonCalls(concurrent.futures.ThreadPoolExecutor):
    """An executor that runs each call in a daemon thread of its own, and whose shutdown does not
    wait for a call in flight: an abandoned call (an LLM request that hangs) neither holds the
    loop's shutdown nor the interpreter's exit, and its result goes to a future no one awaits.
    (A ThreadPoolExecutor by type only, which asyncio requires of a default executor: its pool of
    threads, joined at exit, is what this replaces.)"""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def call() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine, as an executor does
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=call, name="dream-gym-call", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to join: a finished run's calls have all returned, a stopped run's are abandoned."""


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coroutine)``, with the loop's default executor one that does not hold a stop
    (see :class:`_DaemonCalls`)."""
    with asyncio.Runner() as runner:
        runner.get_loop().set_default_executor(_DaemonCalls())
        return runner.run(coroutine)


__all__ = ["kept_process_state", "run_coroutine", "say_stopping", "second_signal_interrupts"]
