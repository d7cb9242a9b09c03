"""A task given as files, evaluated in dream_gym's sandbox: the one evaluation every bridge uses.

A discovery system's own task is two files: an initial program and an evaluator (OpenEvolve's and
SkyDiscover's ``evaluator.py`` with ``evaluate(program_path)``, returning a dict of metrics or an
``EvaluationResult`` of metrics and artifacts; ShinkaEvolve's ``evaluate.py``, a script that takes
``--program_path`` and ``--results_dir`` and writes ``correct.json`` and ``metrics.json`` there).
The system itself runs the evaluator in its own processes, and the evaluator imports the candidate
there: the candidate, written by an LLM, runs with every right of the user. :class:`FilesTask`
runs the evaluator in the sandbox of :mod:`dream_gym.infrastructure.sandbox` instead, for every bridge
(``dream-gym deploy --system openevolve|shinkaevolve|skydiscover --task initial,evaluator``):

* a small harness, in a fresh workspace (a bounded tmpfs where the kernel allows it), imports the
  evaluator by path (its folder first on ``sys.path``, as the systems do), seeds ``random`` and
  ``numpy.random`` from the run's seed and the program's text (so an evaluator or a program that
  draws from them without a seed of its own scores a program the same way in every run with that
  seed), calls the evaluation function on the candidate copied into the workspace
  (``program.py``), or runs the evaluation script on it, and writes what it returned as JSON to
  the result file;
* the sandbox reads the runtime, the workspace, the evaluator's folder (evaluators read the files
  beside them: a config, data) and the folders the user names (``--read DIR``: a data set, a
  library checkout the evaluator imports), and nothing else; it writes only its workspace; no
  network, no new processes (threads are allowed: OpenEvolve's examples time a call out with a
  ``ThreadPoolExecutor``); its wall time is the system's evaluator timeout, its memory that of a
  built-in task. An evaluation that starts a process is refused by the kernel, and the harness
  names what it started (``subprocess.Popen ['python', ...]``) in the error;
* a ``--read`` folder below the user's home folder is also found at the same place below the
  sandbox's home folder (the workspace), so an evaluator that looks for a library at
  ``Path.home() / "github" / ...`` finds it there too;
* the parent reads the result file as data (:func:`dream_gym.infrastructure.limits.read_leftover`: a regular
  file of at most 256 KB, no link followed, at most 4,096 arrays and objects), checks its shape,
  and makes every text printable and bounded; the workspace's path in a text is replaced by
  ``<workdir>``, so texts do not change from run to run. A timeout, a crash, a result file that
  is not a regular file: the program's failure, with its cause, as a failed evaluation
  (``combined_score`` 0 and ``error``).

The evaluator runs in the same process as the candidate, as in the system itself: a candidate can
change what the evaluator reports (its score) but, confined, reaches nothing outside its
workspace. (A built-in task's evaluator scores the candidate's answer outside the sandbox.)
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.isolation import DEFAULT_WORKSPACE_MB, RunOutcome, start_python
from dream_gym.infrastructure.limits import (
    LeftoverError,
    LimitError,
    json_containers,
    loads_bounded,
    read_leftover,
)
from dream_gym.infrastructure.printable import NAME_CHARS, TEXT_CHARS, printable
from dream_gym.infrastructure.walk import map_strings
from dream_gym.infrastructure.work_folders import work_folder
from dream_gym.integrations.evaluator_files import ProgramFileError, read_program
from dream_gym.integrations.files_harness import HARNESS

#: The functions of an OpenEvolve or SkyDiscover evaluator the systems call (the stages: cascade evaluation).
EVALUATION_FUNCTIONS = ("evaluate", "evaluate_stage1", "evaluate_stage2", "evaluate_stage3")
FUNCTION, SCRIPT = "function", "script"  # evaluate(program_path) | ShinkaEvolve's evaluation script
PROGRAM_FILE = "program.py"
HARNESS_FILE = "_dream_gym_evaluation.py"
REQUEST_FILE = "_request.json"
RESULT_FILE = "_result.json"
#: Bytes and arrays/objects a result file may hold; nesting of its JSON.
RESULT_MAX_BYTES = 256 << 10
RESULT_MAX_CONTAINERS = 4096
RESULT_MAX_DEPTH = 32
#: Characters kept of one artifact (the systems show artifacts in their prompts).
ARTIFACT_CHARS = 8000
#: Wall seconds of an evaluation when the system sets no timeout (ShinkaEvolve's default), and
#: the memory (address space) of one, as a built-in task's.
DEFAULT_WALL_S = 300.0
DEFAULT_MEMORY_MB = 1024
WORKDIR = "<workdir>"  # stands for the evaluation's workspace in texts

@dataclass
class FilesEvaluation:
    """What one evaluation returned, read as data.

    ``metrics`` and ``artifacts``: the evaluator's (texts printable and bounded); for a failed
    evaluation (``failure`` set: a timeout, a crash, a refused process, a result file that is
    not data) ``{"combined_score": 0.0, "error": failure}`` and the artifacts ``error`` and, when
    the evaluation printed any, ``stderr``. ``correct``: ShinkaEvolve's ``correct.json`` when
    the evaluator is its evaluation script (``metrics`` is then its ``metrics.json``)."""

    metrics: dict[str, Any]
    artifacts: dict[str, str] = field(default_factory=dict)
    failure: str | None = None
    correct: dict[str, Any] | None = None

    @classmethod
    def failed(cls, failure: str, output: str = "") -> FilesEvaluation:
        failure = printable(failure, TEXT_CHARS, lines=True)
        artifacts = {"error": failure}
        if output.strip():
            artifacts["stderr"] = printable(output.strip()[-ARTIFACT_CHARS:], ARTIFACT_CHARS, lines=True)
        return cls({"combined_score": 0.0, "error": failure}, artifacts, failure)


@dataclass(frozen=True)
class FilesTask:
    """A task's evaluator file, run in the sandbox (see the module docstring).

    ``seed`` is the run's seed (each evaluation is seeded from it and the program's text);
    ``wall_s`` the wall time of one evaluation, ``memory_mb`` its address space; ``read`` the
    folders besides the evaluator's own that it may read."""

    evaluator: Path
    seed: int = 0
    wall_s: float = DEFAULT_WALL_S
    memory_mb: int = DEFAULT_MEMORY_MB
    read: tuple[Path, ...] = ()

    @classmethod
    def of(cls, evaluator: str | Path, *, seed: int = 0, wall_s: float | None = None,
           memory_mb: int = DEFAULT_MEMORY_MB, read: Sequence[str | Path] = ()) -> FilesTask:
        """The task, every path checked: ValueError naming an evaluator that is not a file or a
        ``read`` folder that is not a folder."""
        path = Path(evaluator)
        if not path.is_file():
            raise ValueError(f"the evaluator {path} is not a file")
        return cls(path.resolve(), int(seed), float(wall_s or DEFAULT_WALL_S), int(memory_mb), read_folders(read))

    def settings(self) -> dict[str, Any]:
        """The task as JSON data (a wrapper file holds it)."""
        return {"evaluator": str(self.evaluator), "seed": self.seed, "wall_s": self.wall_s,
                "memory_mb": self.memory_mb, "read": [str(p) for p in self.read]}

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> FilesTask:
        return cls(Path(settings["evaluator"]), int(settings["seed"]), float(settings["wall_s"]),
                   int(settings["memory_mb"]), tuple(Path(p) for p in settings.get("read", ())))

    def functions(self) -> tuple[str, ...]:
        """The evaluation functions the evaluator defines at its top level (read, not run)."""
        return defined_functions(self.evaluator)

    def write_wrapper(self, path: Path, template: str, function: str) -> Path:
        """Write a system's evaluator file for this task at ``path``: ``template`` (formatted with
        the evaluator and :meth:`settings`), then ``function`` formatted with each name the system
        calls (``evaluate`` first, then the stages the task's evaluator defines). The task's own
        file is not changed."""
        path.parent.mkdir(parents=True, exist_ok=True)
        names = ["evaluate", *(name for name in self.functions() if name != "evaluate")]
        text = template.format(evaluator=self.evaluator, settings=self.settings())
        text += "".join(function.format(name=name) for name in names)
        path.write_text(text, encoding="utf-8")
        return path

    def read_dirs(self) -> list[Path]:
        """The folders the sandbox may read besides the runtime and the workspace."""
        return list(dict.fromkeys([self.evaluator.parent, *self.read]))

    def evaluate(self, program_path: str | Path, function: str = "evaluate",
                 kwargs: Mapping[str, Any] | None = None, contract: str = FUNCTION) -> FilesEvaluation:
        """Evaluate the program at ``program_path`` (read as data: a regular file of at most
        1 MB): ``function(program_path, **kwargs)`` of the evaluator, or with ``contract="script"``
        the evaluator run as ShinkaEvolve's evaluation script."""
        try:
            code = read_program(program_path)
        except ProgramFileError as exc:
            return FilesEvaluation.failed(str(exc))
        except FileNotFoundError:
            return FilesEvaluation.failed("program file does not exist")
        return self.evaluate_code(code, function, kwargs, contract)

    def evaluate_code(self, code: bytes, function: str = "evaluate", kwargs: Mapping[str, Any] | None = None,
                      contract: str = FUNCTION) -> FilesEvaluation:
        """Evaluate the program text ``code`` (see :meth:`evaluate`) in a fresh workspace."""
        if contract not in (FUNCTION, SCRIPT):
            raise ValueError(f"contract {contract!r}: one of {FUNCTION}, {SCRIPT}")
        workdir = work_folder("files_task")
        try:
            request = {"evaluator": str(self.evaluator), "function": function, "contract": contract,
                       "kwargs": json_kwargs(kwargs), "seed": evaluation_seed(self.seed, code),
                       "home_links": home_links(self.read)}
            (workdir / PROGRAM_FILE).write_bytes(code)
            (workdir / REQUEST_FILE).write_text(json.dumps(request), encoding="utf-8")
            (workdir / HARNESS_FILE).write_text(HARNESS, encoding="utf-8")
            child = start_python(workdir / HARNESS_FILE, cwd=workdir, wall_s=self.wall_s, memory_mb=self.memory_mb,
                                 max_output_bytes=64 << 10, workspace_mb=DEFAULT_WORKSPACE_MB,
                                 outputs={RESULT_FILE: RESULT_MAX_BYTES}, read_dirs=self.read_dirs())
            outcome = child.finish()
            return without_workdir(self._judge(outcome, workdir), workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _judge(self, outcome: RunOutcome, workdir: Path) -> FilesEvaluation:
        """The evaluation read off the result file, or the failure that says why there is none."""
        if outcome.timed_out:
            return FilesEvaluation.failed(f"timeout: the evaluation did not finish within {self.wall_s:g}s",
                                          outcome.stderr)
        try:
            data = read_leftover(workdir / RESULT_FILE, RESULT_MAX_BYTES)
        except LeftoverError as exc:
            return FilesEvaluation.failed(f"result file {exc.problem}")
        except FileNotFoundError:  # the warden may have refused to hand it back
            refused = outcome.refused_outputs.get(RESULT_FILE)
            return FilesEvaluation.failed(f"result file {refused}" if refused else self._no_result(outcome),
                                          outcome.stderr)
        try:
            payload = parse_result(data)
        except ValueError as exc:
            return FilesEvaluation.failed(str(exc), outcome.stderr)
        return evaluation_of(payload, outcome)

    def _no_result(self, outcome: RunOutcome) -> str:
        if outcome.workspace_problem:
            return outcome.workspace_problem
        if outcome.memory_exceeded:
            return f"memory limit of {self.memory_mb} MB exceeded"
        return f"the evaluation ended without a result ({outcome.describe() or 'no result file'})"


def written_task(evaluator: Path, template: str) -> str | None:
    """The built-in task whose evaluator file dream-gym wrote at ``evaluator`` from ``template``
    (``dream-gym openevolve task``, each bridge's ``write_task_files``), or None for any other file.
    Such a file is dream_gym's own code, which runs each candidate in the built-in task's sandbox
    (a sandbox starts no second one inside it): a bridge gives it to the system as it is."""
    try:
        if evaluator.stat().st_size > 64 << 10:
            return None
        text = evaluator.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    match = re.search(r"^TASK = '([a-z0-9-]+)'$", text, flags=re.MULTILINE)
    if match is None or text != template.format(task=match.group(1)):
        return None
    from dream_gym.online.tasks import get_task

    try:
        get_task(match.group(1))
    except KeyError:
        return None
    return match.group(1)


def sandbox_wall_s(timeout: float | None) -> float:
    """The wall time of one evaluation in the sandbox for a system whose evaluator timeout is
    ``timeout`` seconds (None: :data:`DEFAULT_WALL_S`): a tenth less (at most 10 s less), so the
    sandbox ends a slow evaluation, and the record says why, before the system gives up waiting."""
    seconds = float(timeout) if timeout else DEFAULT_WALL_S
    return max(1.0, seconds - min(10.0, seconds / 10))


def checked_read(task: str, folders: Sequence[str | Path]) -> tuple[Path, ...]:
    """The ``--read`` folders of a run on ``task`` (a ``--task`` value), checked: ValueError naming
    one that is not a folder, or any for a built-in task (whose evaluator reads nothing of the user's)."""
    if folders and "," not in task:
        raise ValueError(f"--read names folders a task given as files may read; {task} is a built-in task")
    return read_folders(folders)


def read_folders(folders: Sequence[str | Path]) -> tuple[Path, ...]:
    """``--read`` folders, resolved; ValueError naming one that is not a folder."""
    found = []
    for folder in folders:
        path = Path(folder).expanduser()
        if not path.is_dir():
            raise ValueError(f"--read {folder}: not a folder")
        found.append(path.resolve())
    return tuple(dict.fromkeys(found))


def defined_functions(evaluator: Path) -> tuple[str, ...]:
    """The names of :data:`EVALUATION_FUNCTIONS` defined at the top level of ``evaluator``."""
    try:
        tree = ast.parse(evaluator.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return ()
    names = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return tuple(name for name in EVALUATION_FUNCTIONS if name in names)


def check_evaluate_defined(task: str, system: str) -> None:
    """Refuse a task given as files whose evaluator binds no ``evaluate`` (read, not run: a ``def``,
    an assignment or an import of that name; a star import is taken at its word), before anything
    is written: ``system`` calls ``evaluate(program_path)``, and the run failed after its world was
    made, on the initial program's evaluation."""
    if "," not in task:
        return  # a built-in task
    evaluator = Path(task.split(",", 1)[1].strip())
    try:
        text = evaluator.read_text(encoding="utf-8", errors="replace")
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return  # a missing file, or one that does not parse: named where it is opened or evaluated
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "evaluate":
            return
        if isinstance(node, ast.Name) and node.id == "evaluate" and isinstance(node.ctx, ast.Store):
            return
        if isinstance(node, ast.alias) and (node.name == "*" or (node.asname or node.name) == "evaluate"):
            return
    script = " (a ShinkaEvolve evaluation script runs with --system shinkaevolve)" if "__main__" in text else ""
    raise ValueError(f"--task {task}: {evaluator} defines no function evaluate(program_path), which {system} calls "
                     f"for each program{script}")


def evaluation_seed(seed: int, code: bytes) -> int:
    """The seed of one evaluation: from the run's seed and the program's text."""
    digest = hashlib.sha256(f"{int(seed)}:".encode() + code).digest()
    return int.from_bytes(digest[:4], "little")


def json_kwargs(kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The keyword arguments a system passes the evaluation function (OpenEvolve's
    ``evaluator_args``), as JSON data; ValueError naming one that is not."""
    found = {}
    for name, value in (kwargs or {}).items():
        try:
            found[str(name)] = json.loads(json.dumps(value))
        except (TypeError, ValueError):
            raise ValueError(f"evaluator argument {name!r} is not JSON data; the evaluation runs in a sandbox "
                             "that takes JSON only") from None
    return found


def home_links(folders: Sequence[Path]) -> list[tuple[str, str]]:
    """(place below the home folder, folder) of each folder below the user's home folder: the
    sandbox's home (its workspace) gets a link there, so ``Path.home() / ...`` finds it."""
    try:
        home = Path.home().resolve()
    except (RuntimeError, KeyError):
        return []
    links = []
    for folder in folders:
        try:
            relative = folder.relative_to(home)
        except ValueError:
            continue
        if relative.parts:
            links.append((str(relative), str(folder)))
    return links


def parse_result(data: bytes) -> dict[str, Any]:
    """The result file's JSON object, refused (ValueError naming why) when it holds more arrays and
    objects than :data:`RESULT_MAX_CONTAINERS`, nests deeper than :data:`RESULT_MAX_DEPTH`, is no
    JSON or not the harness's shape."""
    containers = json_containers(data)
    if containers > RESULT_MAX_CONTAINERS:
        raise ValueError(f"result file holds {containers} arrays and objects, more than the "
                         f"{RESULT_MAX_CONTAINERS} an evaluation's result may hold")
    try:
        payload = loads_bounded(data, max_depth=RESULT_MAX_DEPTH)
    except LimitError:
        raise ValueError(f"result file nests arrays and objects deeper than {RESULT_MAX_DEPTH} levels") from None
    except ValueError:
        raise ValueError("malformed result file (was it overwritten by the program?)") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("ok"), bool):
        raise ValueError("malformed result file (was it overwritten by the program?)")
    return payload


def evaluation_of(payload: dict[str, Any], outcome: RunOutcome) -> FilesEvaluation:
    """The evaluation a well-formed result file reports."""
    refused = [printable(item, 300) for item in payload.get("refused") or [] if isinstance(item, str)][:20]
    if not payload["ok"]:
        kind, message = printable(payload.get("type"), NAME_CHARS), str(payload.get("message", ""))
        where = {"import": " (while importing the evaluator)", "setup": " (while setting up the evaluation)"}
        failure = f"{kind}: {message}"[:TEXT_CHARS] + where.get(str(payload.get("stage")), "")
        if kind == "PermissionError" and "[Errno 13]" in message:  # a file outside what the sandbox lets it read
            failure += (" (the sandbox lets an evaluation read the task's folder and the --read folders only: "
                        "--read DIR for data kept elsewhere)")
        if outcome.workspace_problem:
            failure = f"{outcome.workspace_problem} ({failure})"
        evaluation = FilesEvaluation.failed(failure)
        evaluation.artifacts["traceback"] = printable(payload.get("traceback", ""), ARTIFACT_CHARS, lines=True)
    else:
        metrics = payload.get("metrics")
        if not isinstance(metrics, dict):
            return FilesEvaluation.failed("malformed result file (was it overwritten by the program?)")
        artifacts = payload.get("artifacts")
        artifacts = artifacts if isinstance(artifacts, dict) else {}
        correct = payload.get("correct")
        evaluation = FilesEvaluation(
            metrics=clean(metrics), failure=None, correct=clean(correct) if isinstance(correct, dict) else None,
            artifacts={printable(k, NAME_CHARS): printable(v, ARTIFACT_CHARS, lines=True) for k, v in artifacts.items()})
    if refused:
        evaluation.artifacts["sandbox"] = "refused: " + "; ".join(refused) + (
            " (the evaluation runs in dream_gym's sandbox, which allows threads but no new process)")
    return evaluation


def clean(value: Any) -> Any:
    """JSON data from the sandbox with every text printable and bounded (keys and values)."""
    if isinstance(value, str):
        return printable(value, TEXT_CHARS, lines=True)
    if isinstance(value, dict):
        return {printable(k, NAME_CHARS): clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def without_workdir(evaluation: FilesEvaluation, workdir: Path) -> FilesEvaluation:
    """The evaluation with the workspace's path replaced by ``<workdir>`` in every text."""
    paths = sorted({str(workdir), str(workdir.resolve())}, key=len, reverse=True)

    def replaced(value: Any) -> Any:
        def without(text: str) -> str:
            for path in paths:
                text = text.replace(path, WORKDIR)
            return text

        return map_strings(value, without)

    return FilesEvaluation(replaced(evaluation.metrics), replaced(evaluation.artifacts),
                           replaced(evaluation.failure), replaced(evaluation.correct))


__all__ = ["DEFAULT_MEMORY_MB", "DEFAULT_WALL_S", "EVALUATION_FUNCTIONS", "FUNCTION", "SCRIPT", "FilesEvaluation",
           "FilesTask", "checked_read", "defined_functions", "evaluation_seed", "home_links", "read_folders", "sandbox_wall_s",
           "written_task"]
