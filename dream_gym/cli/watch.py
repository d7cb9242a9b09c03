"""A run's progress on a terminal, read from its world as it is written.

A discovery system runs for minutes with a real LLM and prints nothing of its own on the
terminal (its logs go to its folder), and a run's nodes are written with flush + fsync as they
come (:class:`dream_gym.world.writer.WorldWriter`): :class:`NodesWatch` counts the lines of the
world's nodes file twice a second and shows them on a bar of the run's budget. The same for
every system and for the system's own selection, since it asks nothing of the run.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from dream_gym.world.files import NODES_FILE

POLL_S = 0.5


class NodesWatch:
    """``with NodesWatch(folder, total, label):`` a progress bar of the nodes ``folder``'s world
    holds, on stderr while it is a terminal (nothing otherwise: a log keeps the run's summary)."""

    def __init__(self, folder: Path, total: int, label: str, enabled: bool | None = None):
        self.path = Path(folder) / NODES_FILE
        self.total, self.label = total, label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.lines = self._offset = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._progress: Any = None
        self._task: Any = None

    def count(self) -> int:
        """The lines of the nodes file so far (read from where the last count ended)."""
        try:
            with open(self.path, "rb") as nodes:
                nodes.seek(self._offset)
                chunk = nodes.read()
        except OSError:  # not made yet
            return self.lines
        whole = chunk.rfind(b"\n") + 1  # a line being written counts once it ends
        self.lines += chunk.count(b"\n", 0, whole)
        self._offset += whole
        return self.lines

    def __enter__(self) -> NodesWatch:
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("nodes"), TimeElapsedColumn(), console=Console(stderr=True))
        self._progress.__enter__()
        self._task = self._progress.add_task(self.label, total=self.total, completed=self.count())
        self._thread = threading.Thread(target=self._watch, name="dream_gym-nodes-watch", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(POLL_S):
            self._progress.update(self._task, completed=self.count())

    def __exit__(self, *exc_info: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._progress.update(self._task, completed=self.count())  # where the run ended
            self._progress.__exit__(*exc_info)


__all__ = ["NodesWatch", "POLL_S"]
