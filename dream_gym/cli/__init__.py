"""The ``dream-gym`` command line: argument parsing only.

Each sub-command lives in its own module of this package, which defines
``register(subparsers)``; the handler it installs calls one library function. Everything a
command prints goes through :func:`dream_gym.infrastructure.redact.redacted_output` (an error from untrusted
code may quote a secret).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
import textwrap
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dream_gym import __version__
from dream_gym.cli.shown import LINE_CHARS, say, shown
from dream_gym.infrastructure.printable import printable
from dream_gym.infrastructure.redact import redacted_output, register_url_secrets
from dream_gym.infrastructure.sandbox.launch import UNSAFE_ENV

# Modules of this package that each add one or more sub-commands.
COMMAND_MODULES = ("replay", "worlds", "grow", "evaluate", "demo", "dream", "rsi", "train", "openevolve", "deploy",
                   "serve_agent", "fidelity")
# Sub-commands that run untrusted code (policy files, candidates): they take the opt-out.
UNTRUSTED_COMMANDS = ("replay", "grow", "eval", "demo", "dream", "rsi", "openevolve", "deploy", "fidelity")


#: Sub-commands whose options cost an import (``train``'s come from the RL stack): when another
#: command runs, their parsers are built without options.
COSTLY_OPTIONS = ("train",)


class _HelpFormatter(argparse.HelpFormatter):
    """Help text wrapped at spaces only: argparse also breaks at hyphens, which split option and
    command names (``--trust-`` / ``model``) so that they no longer copy and paste."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False, break_long_words=False)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser with :class:`_HelpFormatter`; its sub-command parsers are of this class too."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        # an option is typed whole: `fidelity --seed 1` ran as --seeds 1, and a script using a
        # prefix would break when an option sharing it is added
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``command`` (the sub-command about to run, "" for none), the
    commands of :data:`COSTLY_OPTIONS` other than it get no options."""
    parser = _Parser(
        prog="dream-gym",
        description="Recorded discovery trees as deterministic Gymnasium environments.",
    )
    parser.add_argument("--version", action="version", version=f"dream-gym {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        if command is not None and name in COSTLY_OPTIONS and name != command:
            module.register(subparsers, with_options=False)
        else:
            module.register(subparsers)
    for name in UNTRUSTED_COMMANDS:
        subparsers.choices[name].add_argument(
            "--unsafe-no-sandbox", action="store_true",
            help="run policy files and candidates WITHOUT the sandbox (only where the kernel cannot "
                 "provide it; they can then read your files and keys, use the network, signal processes)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(next((arg for arg in argv if not arg.startswith("-")), ""))
    if not argv:  # the commands, not "the following arguments are required: COMMAND"
        parser.print_help(sys.stderr)
        return 2
    if unknown := unknown_options(parser, argv):  # before argparse names a missing option instead
        typed = command_parser(parser, argv)
        typed.error(f"unrecognized arguments: {' '.join(unknown)}{option_hint(typed, unknown)}")
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the command that was typed, with its usage (argparse says it at the top)
        typed = command_parser(parser, argv)
        typed.error(f"unrecognized arguments: {' '.join(unknown)}{option_hint(typed, unknown)}")
    args.argv = argv  # provenance: `grow` records the exact command in world.json
    register_url_secrets(getattr(args, "api_base", None))  # its password is no part of any record
    if getattr(args, "unsafe_no_sandbox", False):
        os.environ[UNSAFE_ENV] = "1"  # read by every sandbox launch, in workers too
    from rich.console import Console

    Console.on_broken_pipe = _raise_broken_pipe  # type: ignore[method-assign,assignment]
    try:
        with redacted_output():
            status = _run(args)
        sys.stdout.flush()  # a reader that went away shows here, while it can still be told apart
        return status
    except BrokenPipeError:
        return _reader_gone()


def command_parser(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``argv`` names: ``dream-gym worlds upload ...`` gives
    ``worlds upload``'s."""
    return _parsers_to_command(parser, argv)[-1]


def _parsers_to_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[argparse.ArgumentParser]:
    """The parsers on the way to the (sub)command ``argv`` names: the top level's, the command's,
    its action's."""
    found = [parser]
    for token in argv:
        choices = next((action.choices for action in found[-1]._actions
                        if isinstance(action, argparse._SubParsersAction)), None)
        if choices is None:
            break
        if token in choices:
            found.append(choices[token])
    return found


def unknown_options(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """The options of ``argv`` that no parser on the way to its (sub)command knows (``--taks``;
    ``-W2`` is ``-W``): argparse reports a missing required option first, and ``grow --taks X``
    said only "required: --task". Arguments after ``--`` are values."""
    known = {option for on_the_way in _parsers_to_command(parser, argv) for action in on_the_way._actions
             for option in action.option_strings}
    unknown = []
    for token in argv:
        if token == "--":
            break
        name = token.split("=", 1)[0] if token.startswith("--") else token[:2]
        if token.startswith("-") and len(token) > 1 and not _is_number(token) and name not in known:
            unknown.append(token)
    return unknown


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def option_hint(parser: argparse.ArgumentParser, unknown: Sequence[str]) -> str:
    """``"; did you mean --policy?"`` for the first misspelt option among ``unknown``."""
    from dream_gym.cli.names import did_you_mean

    options = [option for action in parser._actions for option in action.option_strings
               if option.startswith("--") and action.help != argparse.SUPPRESS]  # not a retired spelling
    for token in unknown:
        if token.startswith("--"):
            return did_you_mean(token.split("=", 1)[0], options, n=1).replace("'", "")
    return ""


#: The exit status of a command whose reader went away (``dream-gym ... | head``): what a shell
#: reports for a command ended by SIGPIPE, 128 + 13.
BROKEN_PIPE_STATUS = 141


def _raise_broken_pipe(console: Any) -> None:
    """rich ends a process whose reader went away with ``SystemExit(1)``, the status of failed
    episodes: the reader's going is said as every command says it (:data:`BROKEN_PIPE_STATUS`)."""
    raise BrokenPipeError


def _reader_gone() -> int:
    """End quietly: the rest of the output goes nowhere (so that the interpreter's own flush at
    exit does not fail again and print a traceback)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return BROKEN_PIPE_STATUS


def _check_resumable(args: argparse.Namespace) -> None:
    """``--resume`` of an ``--out`` that holds nothing (a mistyped folder) would start a new run
    from zero and call it resumed: refused. An evaluation's journal is ``OUT.partial``."""
    out = getattr(args, "out", None)
    if getattr(args, "resume", False) is not True or not isinstance(out, Path) or out.exists():
        return
    from dream_gym.evaluation.journal import journal_path

    if not journal_path(out).exists():
        raise FileNotFoundError(f"nothing to resume: {out} does not exist (leave out --resume to start a run there)")


def _kept_in(out: str | Path) -> Path:
    """Where an interrupted command's progress is: ``--out``, or an evaluation's journal beside it
    (``OUT.partial``) when the results file is not written yet."""
    from dream_gym.evaluation.journal import journal_path

    out = Path(out)
    journal = journal_path(out)
    return journal if not out.exists() and journal.exists() else out


def _kept_hint(args: argparse.Namespace, exc: BaseException) -> str:
    """What to do with what a run that keeps its progress in --out (grow, deploy, dream, rsi) kept
    when it failed: --resume would otherwise be the user's only guess. Its policy failed (fix it,
    then --resume; another policy starts anew), or its LLM could not be reached (--resume asks again
    only the call in flight)."""
    from dream_gym.infrastructure.llm import LLMError
    from dream_gym.policy_files.errors import PolicyError
    from dream_gym.world.files import NODES_FILE

    out = getattr(args, "out", None)
    if not hasattr(args, "resume") or not isinstance(out, Path):
        return ""
    if isinstance(exc, PolicyError) and (out / NODES_FILE).is_file():
        return (f"\nwhat was recorded is kept in {shown(out)}: once the policy is fixed, the same command with "
                "--resume continues it; another policy starts in a new --out")
    if isinstance(exc, LLMError) and out.is_dir() and "--resume" not in str(exc):
        return f"\nwhat was finished is kept in {shown(out)}: the same command with --resume continues it"
    kept = _kept_in(out)
    if isinstance(exc, OSError) and exc.errno in _NO_ROOM_OR_RIGHT and _writing_in(exc, (out, kept)) \
            and _holds_progress(kept):
        what = "once there is room" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "once it can be written"
        return f"\nwhat was finished is kept in {shown(kept)}: {what}, the same command with --resume continues it"
    return ""


def _writing_in(exc: OSError, places: tuple[Path, ...]) -> bool:
    """Whether ``exc`` came of writing the run's own files, in or at ``places`` (a full disk names
    no file): not of reading an input, a world or a policy file, which --resume would not mend."""
    if exc.filename is None:
        return True
    failed = Path(os.fsdecode(exc.filename)).absolute()
    return any(failed == place or place in failed.parents for place in map(Path.absolute, places))


def _holds_progress(path: Path) -> bool:
    """Whether ``path`` holds what a run finished: a file, or a folder with more than its lock
    (False where it cannot be read: the error being reported may be that)."""
    from dream_gym.infrastructure.locks import FOLDER_LOCK_NAME

    try:
        if path.is_dir():
            return any(entry.name != FOLDER_LOCK_NAME for entry in path.iterdir())
        return path.exists()
    except OSError:
        return False


#: A disk full, a quota reached, a folder that cannot be written: a run stopped by one keeps what it finished.
_NO_ROOM_OR_RIGHT = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS})


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, a job scheduler, ``kill``): the command stops as at Ctrl-C (its jobs
    ended, what it finished kept, the same message) with the status a shell gives SIGTERM."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated


def _run(args: argparse.Namespace) -> int:
    # Python's default SIGTERM ends the process on the spot: no "interrupted", jobs left to die alone
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    try:
        _check_resumable(args)
        return int(args.func(args) or 0)
    except BrokenPipeError:
        raise  # not the command's error: the reader of its output went away
    except KeyboardInterrupt as stop:
        status = 128 + signal.SIGTERM if isinstance(stop, Terminated) else 130
        out = getattr(args, "out", None)
        progress = getattr(args, "progress_file", None)  # the file whose absence says nothing is kept yet
        if out is not None and progress is not None and not (Path(out) / progress).exists():
            say(f"interrupted before anything was kept in {shown(out)}: the same command starts again",
                file=sys.stderr)
        elif out is not None and hasattr(args, "resume"):  # a command that keeps its progress in --out
            say(f"interrupted: what was finished is kept in {shown(_kept_in(out))}; the same command with "
                "--resume continues it", file=sys.stderr)
        elif out is not None and getattr(args, "continues", False):  # one that continues by itself
            say(f"interrupted: what was finished is kept in {shown(out)}; the same command continues it",
                file=sys.stderr)
        else:
            print("interrupted", file=sys.stderr)
        return status
    except (ValueError, OSError, LookupError, RuntimeError) as exc:
        # Library errors name the problem already; show them once, without a traceback. They
        # may quote what others wrote (a world's id, a remote's reply): escaped and cut.
        message = printable(error_text(exc), LINE_CHARS, lines=True)
        say(f"{typed_name(args)}: error: {message}{_kept_hint(args, exc)}", file=sys.stderr)
        return 2
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def typed_name(args: argparse.Namespace) -> str:
    """The command as typed, as argparse names it in its own errors: ``dream-gym worlds show``
    (an error raised after parsing said ``dream-gym worlds``, one before it ``dream-gym worlds show``)."""
    actions = [getattr(args, dest, None) for dest in ("worlds_command", "openevolve_command")]
    return " ".join(["dream-gym", args.command, *(action for action in actions if action)])


def error_text(exc: BaseException) -> str:
    """The message of an error: a KeyError's own text, not its quoted repr; an error of the
    operating system as the path and what is wrong with it, not its errno."""
    if isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str) and " " in exc.args[0]:
        return exc.args[0]
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        path = os.fsdecode(exc.filename)
        if isinstance(exc, (NotADirectoryError, FileExistsError)) and (blocker := _file_in_the_way(path)):
            # mkdir of an --out that names a file, or of a path through one
            where = "" if blocker == path else f"{path}: "
            return f"{where}{blocker} is a file, where a folder is wanted (name another path, or move the file)"
        return f"{path}: {exc.strerror}"
    return str(exc) or type(exc).__name__


def _file_in_the_way(path: str) -> str | None:
    """The first existing path on the way to ``path`` (itself included) that is not a folder."""
    for place in (path, *map(str, Path(path).parents)):
        if os.path.lexists(place):
            return None if os.path.isdir(place) else place
    return None
