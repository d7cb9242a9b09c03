"""Options every command spells the same way: ``-W/--workers`` is W (attempts per round) and
``-j/--jobs`` is processes. Spellings used before (or elsewhere) for either stop with an error
that names the option to use instead."""

from __future__ import annotations

import argparse
import inspect
import math
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# Spellings that could mean processes; each is refused with a pointer to -j/--jobs.
OLD_JOBS_SPELLINGS = ("--processes", "--procs", "--n-jobs", "--num-workers", "--n-workers", "--eval-workers")


#: The built-in tasks, as the help of every --task lists them (a test holds it to the registry,
#: whose import takes a second the help should not wait for).
BUILTIN_TASKS = "circle-packing-26, circle-packing-32, sum-difference, lasso-path, autocorrelation"


#: The least --memory-mb: a policy file's process maps about 24 MB to start (Python and the modules
#: its sandbox loads); below, it failed at start with a traceback of the child's import.
MIN_MEMORY_MB = 32


def memory_mb(text: str) -> int:
    """The type of --memory-mb: a whole number of MB, at least :data:`MIN_MEMORY_MB`."""
    value = whole_number(text)
    if value < MIN_MEMORY_MB:  # (0 was "must be at least 1")
        raise argparse.ArgumentTypeError(f"must be at least {MIN_MEMORY_MB} (a policy process needs about 24 MB to "
                                         f"start), got {value}")
    return value


class WorldList(argparse.Action):
    """Worlds given as one comma list or by repeating the option (``-w a -w b`` is ``-w a,b``), as
    ``--policy`` repeats: a second ``-w`` replaced the first, whose worlds were dropped without a word."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        before = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, values if before is None else f"{before},{values}")


# The types of the values the command line takes: each refused by argparse naming the option as
# typed (the library's own checks name its Python argument: "beta1 must be ...").
def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _checked(value: Any, ok: bool, wanted: str, text: str) -> Any:
    if not ok:
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text}")
    return value


def positive_int(text: str) -> int:
    """A count (W, K2, rounds): a whole number >= 1."""
    value = whole_number(text)
    return _checked(value, value >= 1, "at least 1", str(value))


def non_negative_int(text: str) -> int:
    """A count that may be 0 (--carry)."""
    value = whole_number(text)
    return _checked(value, value >= 0, "at least 0", str(value))


def positive_number(text: str) -> float:
    """An amount (seconds, dollars): a finite number > 0."""
    value = number(text)
    return _checked(value, math.isfinite(value) and value > 0, "a number > 0", text)


def non_negative_number(text: str) -> float:
    """A price or a weight (--beta1, --beta2, --lam): a finite number >= 0."""
    value = number(text)
    _checked(value, math.isfinite(value), "a finite number", text)
    return _checked(value, value >= 0, "a number >= 0", text)


def margin(text: str) -> float:
    """--held-out-margin: a number >= 0, or ``inf`` (the check reports and never refuses)."""
    value = number(text)
    return _checked(value, value >= 0, "a number >= 0 (or inf: report only)", text)


def unit_number(text: str) -> float:
    """A budget preference (--beta): a number in [0, 1] (the library said ``beta must be in [0, 1]``
    in some commands, ``--beta must be ...`` in others)."""
    value = number(text)
    return _checked(value, 0.0 <= value <= 1.0, "a number in [0, 1]", text)


def port_number(text: str) -> int:
    """--port: 0 (a free port) to 65535."""
    value = non_negative_int(text)
    return _checked(value, value <= 65535, "a port from 0 to 65535", str(value))


def worker_count(text: str) -> int:
    """W: a whole number from 1 to the most a world holds."""
    from dream_gym.world.tree import MAX_WORKERS

    value = positive_int(text)
    return _checked(value, value <= MAX_WORKERS, f"at most {MAX_WORKERS}", str(value))


def add_workers(parser: argparse.ArgumentParser, default: int | None = None, help: str | None = None) -> None:
    """``-W/--workers``: W, the attempts run in parallel in one round."""
    parser.add_argument("-W", "--workers", type=worker_count, default=default, metavar="W",
                        help=help or "W: attempts per round (default: each world's recorded W)")


def parse_seed(text: str) -> int:
    """``--seed``'s type: a whole number every generator a run seeds accepts (refused by argparse,
    before anything runs or is written)."""
    from dream_gym.infrastructure.seeds import MAX_SEED, check_seed

    try:
        return check_seed(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number from 0 to {MAX_SEED}, got {text!r}") from None


def add_max_attempts(parser: argparse.ArgumentParser) -> None:
    """``--max-attempts``: the most attempts one episode may make (ReplaySettings.max_attempts)."""
    from dream_gym.replay.settings import DEFAULT_MAX_ATTEMPTS

    parser.add_argument("--max-attempts", type=positive_int, default=DEFAULT_MAX_ATTEMPTS, metavar="N",
                        help="the most attempts one episode may make: a policy that asks for more gets the "
                             f"error 'episode exceeded N attempts' on that world (default {DEFAULT_MAX_ATTEMPTS:,})")


def add_jobs(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """``-j/--jobs``: processes."""
    parser.add_argument("-j", "--jobs", type=positive_int, default=None, metavar="N",
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


def add_allow_errors(parser: argparse.ArgumentParser) -> None:
    """``--allow-errors``: exit 0 even when episodes failed (they are still counted and named)."""
    parser.add_argument("--allow-errors", action="store_true",
                        help="exit 0 even when episodes ended with an error (each failing policy is still "
                             "named on stderr with its first error, and the table counts them)")


def add_read(parser: argparse.ArgumentParser) -> None:
    """``--read DIR`` (repeatable): a folder the evaluator of a task given as files may read."""
    parser.add_argument("--read", action="append", default=[], metavar="DIR", type=Path,
                        help="a folder the evaluator of a task given as files may read in dream_gym's sandbox, "
                             "besides its own folder (repeatable): a data set, a library checkout it imports")


def add_policy_args(parser: argparse.ArgumentParser) -> None:
    """``--policy-arg KEY=VALUE`` (repeatable): a constructor parameter of the policy."""
    parser.add_argument("--policy-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="parameter of a built-in or module:Class policy (repeatable), e.g. "
                             "--policy-arg patience=10")


def any_case(*names: str) -> Callable[[str], str]:
    """An argparse type: the one of ``names`` that the text spells in any case (``v`` is ``V``
    where a command names V so, and ``V`` is ``v`` in ``train``), else the text as given, which
    argparse's ``choices`` then refuses naming the valid ones."""
    def pick(text: str) -> str:
        return next((name for name in names if name.lower() == text.lower()), text)

    return pick


def parse_key_values(pairs: list[str], option: str = "--policy-arg") -> dict[str, object]:
    """``["branches=8", "p_stop=0"]`` → ``{"branches": 8, "p_stop": 0}`` (numbers parsed)."""
    from dream_gym.policy_files.specs import parameter_value  # here: the CLI's start imports no policy code

    params: dict[str, object] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{option} {pair!r} must look like KEY=VALUE")
        params[key] = parameter_value(text)
    return params


#: The seconds an isolated policy may take for one decision unless told (IsolatedPolicy's default).
DEFAULT_DECISION_TIMEOUT_S = 5.0


def add_file_limits(parser: argparse.ArgumentParser) -> None:
    """``--decision-timeout SECONDS`` and ``--memory-mb MB``: the limits of a policy file's processes."""
    from dream_gym.policy_files.isolated import DEFAULT_MEMORY_MB

    parser.add_argument("--decision-timeout", type=positive_number, default=DEFAULT_DECISION_TIMEOUT_S, metavar="SECONDS",
                        help="seconds a policy file (run isolated) may take for one decision before its "
                             f"process is killed and the episode records the timeout (default {DEFAULT_DECISION_TIMEOUT_S:g})")
    parser.add_argument("--memory-mb", type=memory_mb, default=DEFAULT_MEMORY_MB, metavar="MB",
                        help="memory (address space) each process of a policy file may map (default "
                             f"{DEFAULT_MEMORY_MB}; a file that imports torch needs about 1024)")


def file_options(args: argparse.Namespace) -> dict[str, float]:
    """The isolated policies' options that ``--decision-timeout`` and ``--memory-mb`` change from
    their defaults (empty: none; argparse refuses a value no run can have)."""
    from dream_gym.policy_files.isolated import DEFAULT_MEMORY_MB

    options: dict[str, float] = {}
    if args.decision_timeout != DEFAULT_DECISION_TIMEOUT_S:
        options["decision_timeout_s"] = args.decision_timeout
    if args.memory_mb != DEFAULT_MEMORY_MB:
        options["memory_mb"] = args.memory_mb
    return options


def check_file_to_write(path: Path, option: str) -> None:
    """Refuse, before anything runs, a file the command will write at its end: a folder, a path
    through a file, or a place that takes no new file (tried with a file made and removed in the
    first folder of the path that exists). Creates no folder."""
    if path.is_dir():
        raise IsADirectoryError(f"{option} {path} is a folder; it names the file to write")
    place = path.parent
    while not place.exists() and place != place.parent:
        place = place.parent
    if not place.is_dir():
        raise NotADirectoryError(f"{option} {path}: {place} is a file, where a folder is wanted (name another "
                                 "path, or move the file)")
    try:
        tempfile.TemporaryFile(dir=place).close()
    except OSError as exc:
        raise OSError(f"{option} {path}: no file can be written in {place} ({exc.strerror or exc})") from None


def add_trust_model(parser: argparse.ArgumentParser) -> None:
    """``--trust-model``: load model zips with the objects pickled in them (code in them runs)."""
    parser.add_argument("--trust-model", action="store_true",
                        help="load model zips with the Python objects pickled in them, which run as code: only for "
                             "a model whose author you trust (default: a zip is loaded as data, and one holding "
                             "anything else is refused)")


def parse_betas_option(text: str, option: str = "--betas") -> tuple[float, ...]:
    """The beta grid of a comma-separated option, with an error naming the option and the bad value."""
    from dream_gym.evaluation.evaluate import parse_betas

    for part in text.split(","):
        try:
            float(part)
        except ValueError:
            if part.strip():
                raise ValueError(f"{option}: {part.strip()!r} is not a number (give betas in [0, 1], "
                                 "comma-separated: 0,0.5,1)") from None
    try:
        return parse_betas(text)
    except ValueError as exc:
        raise ValueError(f"{option}: {exc}") from None


#: The exit status of a run that Ctrl-C (or SIGTERM) stopped: what a shell reports for SIGINT, 128 + 2.
INTERRUPTED_STATUS = 130


def stop_hint(stopped_by: str, policy: str = "", policy_args: Sequence[str] = ()) -> str:
    """The line a run's summary adds when the run ended before its budget: by the policy's own
    stop rule, how to run longer (greedy stops after a few rounds without a new best, as on a task
    whose first children all fail: its ``patience`` is named when ``policy`` is a built-in that
    takes one, and its value where the spec or ``policy_args`` set it); by a signal, how to continue."""
    if stopped_by == "shutdown":
        # OpenEvolve cancels the iterations in flight, ShinkaEvolve and SkyDiscover finish them
        return ("interrupted (Ctrl-C or SIGTERM): the world holds every program finished before the stop; "
                "--resume continues the run")
    if stopped_by != "policy":
        return ""
    from dream_gym.policies import POLICIES
    from dream_gym.policy_files.specs import split_parameters

    policy, params = split_parameters(policy)
    params.update(parse_key_values(list(policy_args)))
    if policy not in POLICIES:
        return "the policy ended the run before its budget, by its own stop rule (an empty batch)"
    if "patience" in params:  # set already: the rule ran as told
        return (f"the policy ended the run before its budget, by its own stop rule: {params['patience']} rounds "
                "without a new best (a larger patience runs longer)")
    hint = "a higher --beta makes the built-in policies more patient"
    if "patience" in inspect.signature(POLICIES[policy]).parameters:
        hint += f" ({policy}: --policy-arg patience=N)"
    return f"the policy ended the run before its budget, by its own stop rule: {hint}"


def run_status(folder: Path, stopped_by: str, console: Any) -> int:
    """A run's exit status, said last: an interrupted run (the system's graceful ``shutdown`` on
    Ctrl-C or SIGTERM) is not a finished one, whatever it recorded; a run whose initial program
    failed its evaluation wrote a world with no baseline score to replay from, which ``console``
    is told, and is a failure (every bridge now stops such a run after the root's evaluation, with
    an error; a world recorded before that, resumed to its end, still gets here)."""
    from dream_gym.integrations.world_run import root_failure

    status = INTERRUPTED_STATUS if stopped_by == "shutdown" else 0
    error = root_failure(Path(folder))
    if error is None:
        return status
    console.print(f"error: the initial program failed its evaluation ({error}), so the world has no baseline "
                  "score and eval, dream and worlds stats cannot replay it; fix the task and run it again",
                  markup=False)
    return status or 1


def one_line(message: str) -> str:
    """A message on one line (an error from a policy may span several)."""
    return " ".join(message.split())


def report_failures(command: str, lines: list[str], allow_errors: bool, because: str = "episodes failed") -> int:
    """Name each failing policy once on stderr; the exit status: 1, or 0 with ``--allow-errors``."""
    import sys

    from dream_gym.cli.shown import say

    if not lines:
        return 0
    for line in lines:  # on a terminal, broken between words at its width
        say(f"dream-gym {command}: {one_line(line)}", file=sys.stderr)
    if allow_errors:
        return 0
    say(f"dream-gym {command}: exit status 1 because {because} (--allow-errors exits 0)", file=sys.stderr)
    return 1
