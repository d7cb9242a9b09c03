"""Options every command spells the same way: ``-W/--workers`` is W (attempts per round) and
``-j/--jobs`` is processes. Spellings used before (or elsewhere) for either stop with an error
that names the option to use instead."""

from __future__ import annotations

import argparse
from typing import Any

# Spellings that could mean processes; each is refused with a pointer to -j/--jobs.
OLD_JOBS_SPELLINGS = ("--processes", "--procs", "--n-jobs", "--num-workers", "--n-workers", "--eval-workers")


def add_workers(parser: argparse.ArgumentParser, default: int | None = None, help: str | None = None) -> None:
    """``-W/--workers``: W, the attempts run in parallel in one round."""
    parser.add_argument("-W", "--workers", type=int, default=default, metavar="W",
                        help=help or "W: attempts per round (default: each world's recorded W)")


def add_jobs(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """``-j/--jobs``: processes."""
    parser.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                        help=help or "processes (default: the CPU count)")
    refuse_old_spellings(parser, OLD_JOBS_SPELLINGS, "-j/--jobs for processes")


class _Renamed(argparse.Action):
    """An option that was renamed: using it is an error naming the new spelling."""

    def __init__(self, option_strings: list[str], dest: str, new: str = "", **kwargs: Any):
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        parser.error(f"{option_string} is not an option: use {self.new} "
                     "(every command: -W/--workers is W, attempts per round; -j/--jobs is processes)")


def refuse_old_spellings(parser: argparse.ArgumentParser, spellings: tuple[str, ...], new: str) -> None:
    parser.add_argument(*spellings, action=_Renamed, new=new, dest=argparse.SUPPRESS)
