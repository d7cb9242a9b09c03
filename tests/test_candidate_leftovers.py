"""What a candidate leaves behind is read as data, never followed; its workspace has a total cap;
every wait on an attempt has a deadline.

Hostile candidates come from a local OpenAI-compatible server through the real ``dream-gym
grow`` (as an LLM's programs would). Each acts after the harness has written its answer (an
``atexit`` handler replaces the result file) or while it runs (filling its folder). For each:
``grow`` finishes, the attempt is a failed node naming the cause, and the evaluating process's
memory stays within a small multiple of the result file's cap. The controls show the same
leftovers hang or blow up the plain read the evaluator used before, and that a well-behaved
candidate still scores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest

from dream_gym.infrastructure.isolation import DEFAULT_WORKSPACE_MB, run_python
from dream_gym.infrastructure.limits import LeftoverError, json_containers, read_leftover
from dream_gym.online.tasks import get_task
from dream_gym.world.tree import load_world
from tests.openai_server import OpenAICompatServer

REPO = Path(__file__).resolve().parents[1]
RESULT_CAP = get_task("sum-difference").max_result_bytes  # type: ignore[attr-defined]
VALID_SET = "[0, 2, 3, 4, 7, 11, 12, 14]"

# Each candidate's marker (a comment in its code, recorded in its node) → its source. ``{outside}``
# is a file outside every workspace that holds a well-formed answer: a plain read would score it.
AFTER_THE_HARNESS = '''# leftover: {marker}
import atexit, os

def construct_set():
    return {valid}

def _leave():
    os.unlink("_result.json")
{action}

atexit.register(_leave)
'''
ACTIONS = {
    "fifo": 'os.mkfifo("_result.json")',
    "dev-zero": 'os.symlink("/dev/zero", "_result.json")',
    "outside": 'os.symlink({outside!r}, "_result.json")',
    "40MB": 'open("_result.json", "w").write("[" + ",".join(["[]"] * ((40 << 20) // 3)) + "]")',
    "containers": 'open("_result.json", "w").write(\'{{"ok": true, "answer": [\' + ",".join(["[]"] * 60000) + "]}}")',
    "deep": 'open("_result.json", "w").write(\'{{"ok": true, "answer": \' + "[" * 200 + "]" * 200 + "}}")',
}
FILL = '''# leftover: fill
def construct_set():
    with open("filler", "wb") as handle:
        for _ in range(1024):
            handle.write(b"x" * (1 << 20))
    return {valid}
'''
NORMAL = "# leftover: normal\ndef construct_set():\n    return {valid}\n"
EXPECTED = {  # marker → the start of its node's error
    "fifo": "result file is a FIFO, not a regular file",
    "dev-zero": "result file is a symbolic link, not a regular file",
    "outside": "result file is a symbolic link, not a regular file",
    "40MB": "result file is larger than 256 KB, the limit on an answer of sum-difference",
    "containers": "result file holds 60002 arrays and objects, more than the 4096 an answer of sum-difference may hold",
    "deep": "result file nests arrays and objects deeper than 32 levels",
    "fill": f"workspace limit of {DEFAULT_WORKSPACE_MB} MB reached",
}


def hostile_candidates(outside: Path) -> dict[str, str]:
    programs = {marker: AFTER_THE_HARNESS.format(marker=marker, valid=VALID_SET,
                                                 action="    " + action.format(outside=str(outside)))
                for marker, action in ACTIONS.items()}
    programs["fill"] = FILL.format(valid=VALID_SET)
    return programs


def outside_answer(folder: Path) -> Path:
    """A file outside every workspace holding a well-formed answer and a marker."""
    path = folder / "outside.json"
    path.write_text(json.dumps({"ok": True, "answer": [0, 1, 3], "secret": "OUTSIDE-MARKER"}))
    return path


def marker_of(code: str) -> str:
    return code.split("# leftover: ", 1)[1].split("\n", 1)[0]


def grow_with(programs: list[str], world: Path, workspaces: Path, *extra: str, task: str = "sum-difference",
              timeout: float = 400) -> subprocess.CompletedProcess[str]:
    """``dream-gym grow`` with an LLM agent that answers each request with the next program."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-local", "TMPDIR": str(workspaces)}
    with OpenAICompatServer() as server:
        server.push(*["```python\n" + program + "```" for program in programs])
        return subprocess.run(
            [sys.executable, "-m", "dream_gym", "grow", "--task", task, "--agent", "openai/local",
             "--api-base", server.base_url, "--policy", "fixed", "--policy-arg", f"branches={len(programs)}",
             "--policy-arg", "depth=1", "-W", "2", "--rounds", str(-(-len(programs) // 2)), "--out", str(world),
             "--quiet", *extra],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def processes_naming(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in line:
                found.append(line)
    return found


# -- through grow --------------------------------------------------------------------------------
@pytest.mark.slow
def test_grow_finishes_and_names_what_each_candidate_left(tmp_path: Path, short_tmp_path: Path) -> None:
    """Seven hostile candidates and a normal one in one round: the round ends, each hostile
    attempt is a repairable failure naming what it left, the normal one scores, and nothing of
    the file outside reaches the world."""
    outside = outside_answer(tmp_path)
    programs = [*hostile_candidates(outside).values(), NORMAL.format(valid=VALID_SET)]
    world = tmp_path / "world"
    done = grow_with(programs, world, short_tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    nodes = {marker_of(r["code"]): r for r in load_world(world).records[1:]}
    assert set(nodes) == {*EXPECTED, "normal"}
    errors = {marker: str(node["error"])[:len(EXPECTED[marker])] for marker, node in nodes.items() if marker != "normal"}
    assert errors == EXPECTED
    assert all(nodes[marker]["fail_class"] == "repairable" for marker in EXPECTED)
    assert nodes["normal"]["score"] is not None and nodes["normal"]["error"] is None
    for path in world.rglob("*"):
        assert not path.is_file() or b"OUTSIDE-MARKER" not in path.read_bytes(), path
    assert processes_naming(str(short_tmp_path)) == []


EVALUATE_MEASURED = textwrap.dedent("""
    import json, sys, tracemalloc
    from pathlib import Path
    from dream_gym.online.tasks import get_task
    task, folder = get_task("sum-difference"), Path(sys.argv[1])
    task.evaluate(task.initial_program(), folder / "first")  # imports and caches before measuring
    report = {}
    for marker, code in json.loads(sys.stdin.read()).items():
        tracemalloc.start()
        evaluation = task.evaluate(code, folder / marker)
        report[marker] = {"peak": tracemalloc.get_traced_memory()[1], "error": evaluation.error,
                          "score": evaluation.score}
        tracemalloc.stop()
    print(json.dumps(report))
""")


@pytest.mark.parametrize("workspace", ["tmpfs", "polled"])
def test_the_evaluating_process_stays_small_whatever_is_left(workspace: str, tmp_path: Path) -> None:
    """Each hostile candidate evaluated in a fresh process (as a pool worker does): the memory
    the evaluation allocates peaks within four times the result file's cap (256 KB), for a
    40 MB result file as for a normal answer. With the tmpfs the warden keeps most leftovers
    back; polled (the workspace without a mount namespace: here the explicit opt-out, which
    has none) they all reach the real folder and the evaluator's own reader refuses them."""
    programs = {**hostile_candidates(outside_answer(tmp_path)), "normal": NORMAL.format(valid=VALID_SET)}
    env = {**os.environ, **({"DREAM_GYM_UNSAFE_NO_SANDBOX": "1"} if workspace == "polled" else {})}
    done = subprocess.run([sys.executable, "-c", EVALUATE_MEASURED, str(tmp_path / "work")], input=json.dumps(programs),
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert {m: str(r["error"])[:len(EXPECTED[m])] for m, r in report.items() if m != "normal"} == EXPECTED
    assert report["normal"]["score"] is not None
    peaks = {marker: r["peak"] for marker, r in report.items()}
    assert all(peak < 4 * RESULT_CAP for peak in peaks.values()), peaks


# -- the controls: the plain read the evaluator used before ------------------------------------------
def plain_read(path: Path) -> object:
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_fifo_hangs_the_plain_read_and_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "_result.json"
    os.mkfifo(fifo)
    ended: list[str] = []

    def read() -> None:
        try:
            plain_read(fifo)
        except ValueError:  # the writer wrote nothing
            ended.append("read")

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(2.0)
    hung = reader.is_alive()
    with open(fifo, "w"):  # a writer arrives and leaves: the plain read ends
        pass
    reader.join(10.0)
    assert hung and ended == ["read"]
    with pytest.raises(LeftoverError, match="is a FIFO, not a regular file"):
        read_leftover(fifo, RESULT_CAP)


def test_a_link_to_dev_zero_exhausts_the_plain_read(tmp_path: Path) -> None:
    link = tmp_path / "_result.json"
    link.symlink_to("/dev/zero")
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (768 << 20, 768 << 20))\n"
            f"open({str(link)!r}).read()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "MemoryError" in done.stderr
    with pytest.raises(LeftoverError, match="is a symbolic link, not a regular file"):
        read_leftover(link, RESULT_CAP)


def test_a_link_to_a_file_outside_is_followed_by_the_plain_read(tmp_path: Path) -> None:
    link = tmp_path / "_result.json"
    link.symlink_to(outside_answer(tmp_path))
    assert plain_read(link) == {"ok": True, "answer": [0, 1, 3], "secret": "OUTSIDE-MARKER"}
    with pytest.raises(LeftoverError, match="is a symbolic link"):
        read_leftover(link, RESULT_CAP)


MEASURED_PARSE = textwrap.dedent("""
    import json, sys, tracemalloc
    data = open(sys.argv[1], "rb").read()
    tracemalloc.start()
    value = json.loads(data)
    print(tracemalloc.get_traced_memory()[1] / len(data))
""")


def test_many_containers_blow_up_the_plain_parse_and_are_counted_first(tmp_path: Path) -> None:
    """4 MB of empty lists (a tenth of the reported 40 MB) parse into about twenty times their
    size; counting them takes no copy, and the task refuses them before parsing."""
    path = tmp_path / "_result.json"
    path.write_bytes(b"[" + b",".join([b"[]"] * ((4 << 20) // 3)) + b"]")
    done = subprocess.run([sys.executable, "-c", MEASURED_PARSE, str(path)], capture_output=True, text=True,
                          timeout=120)
    assert float(done.stdout) > 15, done.stderr
    assert json_containers(path.read_bytes()) == (4 << 20) // 3 + 1
    assert json_containers(b'["[[{", "\\\\", "\\"[", {}]') == 2  # brackets in strings are not containers


FILL_THREE = textwrap.dedent("""
    for name in ("a", "b", "c"):
        with open(name, "wb") as handle:
            for _ in range(100):
                handle.write(b"x" * (1 << 20))
    print("wrote 300 MB")
""")
FILL_TWO_GIGABYTES = textwrap.dedent("""
    for number in range(16):  # files of 128 MB: below the file-size limit, which does not stop it
        with open(f"filler{number}", "wb") as handle:
            for _ in range(128):
                handle.write(b"x" * (1 << 20))
    print("wrote 2 GB")
""")


def _folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def test_without_the_cap_a_workspace_holds_whatever_is_written(tmp_path: Path) -> None:
    """The control: with no total cap (each file below the 256 MB file-size limit) three files
    put 300 MB in the folder; with the cap the writes stop at it and the run names it."""
    uncapped, capped = tmp_path / "uncapped", tmp_path / "capped"
    uncapped.mkdir()
    capped.mkdir()
    free = run_python(code=FILL_THREE, cwd=uncapped, wall_s=60, workspace_mb=None)
    assert "wrote 300 MB" in free.stdout and _folder_bytes(uncapped) == 300 << 20
    bounded = run_python(code=FILL_THREE, cwd=capped, wall_s=60)
    assert "wrote" not in bounded.stdout and "No space left on device" in bounded.stderr
    assert bounded.workspace_problem == f"workspace limit of {DEFAULT_WORKSPACE_MB} MB reached"
    assert _folder_bytes(capped) <= DEFAULT_WORKSPACE_MB << 20


def test_without_a_mount_namespace_the_warden_stops_the_writer(tmp_path: Path) -> None:
    """The fallback where the sandbox has no mount namespace (here: the explicit opt-out, which
    has no namespaces): the warden measures the folder every 0.05 s and kills the program past
    the cap, long before its 2 GB are written (the cap is then exceeded by what was written
    between two looks)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the opt-out's warning
        out = run_python(code=FILL_TWO_GIGABYTES, cwd=tmp_path, wall_s=60, unsafe_no_sandbox=True)
    assert out.workspace_problem == f"workspace limit of {DEFAULT_WORKSPACE_MB} MB reached"
    assert out.killed_signal == 9 and "wrote" not in out.stdout
    assert _folder_bytes(tmp_path) < 1 << 30


def test_a_workspace_starts_with_its_files_and_hands_back_only_regular_outputs(tmp_path: Path) -> None:
    """The tmpfs holds a copy of the folder's files; afterwards only the named outputs come back,
    each a regular file within its size; what was refused is named."""
    (tmp_path / "input.txt").write_text("given")
    code = textwrap.dedent("""
        import os
        print(open("input.txt").read())
        open("answer.txt", "w").write("kept")
        open("scratch.txt", "w").write("not an output")
        open("big.out", "w").write("x" * 5000)
        os.mkfifo("pipe.out")
        os.symlink("/dev/zero", "zero.out")
    """)
    out = run_python(code=code, cwd=tmp_path, wall_s=30, outputs={"answer.txt": 100, "*.out": 1000})
    assert out.stdout.strip() == "given"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["answer.txt", "input.txt"]
    assert (tmp_path / "answer.txt").read_text() == "kept"
    assert out.refused_outputs == {"big.out": "is larger than 1000 bytes", "pipe.out": "is a FIFO, not a regular file",
                                   "zero.out": "is a symbolic link, not a regular file"}


# -- the largest honest answers fit the cap ----------------------------------------------------------
LARGEST_ANSWERS = {
    "circle-packing-32": ("import numpy as np\ndef construct_packing():\n"
                          "    c = np.random.default_rng(0).uniform(0.1, 0.9, (32, 2)) * (1 - 1e-12) + 1e-17\n"
                          "    return -c, np.full(32, -0.012345678901234567)\n"),
    "sum-difference": "def construct_set():\n    return list(range(10**7 - 512, 10**7))\n",
    "autocorrelation": ("import numpy as np\ndef construct_function():\n"
                        "    return list(-np.random.default_rng(0).uniform(0.1, 0.2, 1000) * 1e-300)\n"),
    "sum-difference failing": "def construct_set():\n    x = '\\U0001F600' * 3000\n    raise ValueError(x)\n",
}


@pytest.mark.parametrize("case", sorted(LARGEST_ANSWERS))
def test_the_largest_honest_answer_fits_the_cap_eight_times(case: str, tmp_path: Path) -> None:
    """The caps are set from these (see dream_gym.online.tasks.base): each answer, at full
    precision or as a failure report of non-ASCII text, is judged on its substance, with room
    for eight of it in the cap and for a hundred of its containers."""
    task = get_task(case.split()[0])
    evaluation = task.evaluate(LARGEST_ANSWERS[case], tmp_path)
    left = (tmp_path / "_result.json").read_bytes()
    assert not str(evaluation.error).startswith("result file"), evaluation.error
    assert 8 * len(left) <= task.max_result_bytes  # type: ignore[attr-defined]
    assert 100 * json_containers(left) <= task.max_result_containers  # type: ignore[attr-defined]


# -- every wait has a deadline ---------------------------------------------------------------------
SLEEPER = "# leftover: sleeper\nimport time\n\ndef construct_packing():\n    time.sleep(300)\n"


@pytest.mark.slow
def test_an_attempt_past_its_deadline_is_killed_and_recorded(tmp_path: Path, short_tmp_path: Path) -> None:
    """An evaluation that overstays ``--evaluation-timeout`` (3 s, below circle packing's 20 s wall
    time): its worker is killed with the candidate it started, the attempt is a failed node
    naming the deadline and keeping its program, and grow goes on to its end."""
    world = tmp_path / "world"
    done = grow_with([SLEEPER], world, short_tmp_path, "--evaluation-timeout", "3", task="circle-packing-26")
    assert done.returncode == 0, done.stderr[-3000:]
    child = load_world(world).records[1]
    assert child["score"] is None and child["fail_class"] == "repairable"
    assert child["error"] == ("the evaluation did not finish within its deadline of 3s; its worker and everything "
                              "it started were killed")
    assert marker_of(child["code"]) == "sleeper"
    assert "survival check: survived" in done.stdout + done.stderr
    assert processes_naming(str(short_tmp_path)) == []


# -- the other files the parent reads --------------------------------------------------------------
# The coefficients are read when the harness says a repeat is done: the candidate plants its file
# then, in place of the one the harness moves there (it patches os.replace, which the harness calls).
LASSO_LEAVING = '''# leftover: {marker}
import os
import numpy as np

def lasso_path(X, y, lambdas):
    return np.zeros((len(lambdas), X.shape[1]))

_replace = os.replace

def _leave(source, target):
    _replace(source, target)
    os.unlink("_coef_0.npy")
{action}

os.replace = _leave
'''
HUGE_HEADER = ('    with open("_coef_0.npy", "wb") as handle:\n'
               '        np.lib.format.write_array_header_1_0(handle, {"descr": "<f8", "fortran_order": False,\n'
               '                                                      "shape": (10**6, 10**6)})')


def test_a_coefficient_file_left_as_a_fifo_is_named(tmp_path: Path) -> None:
    """lasso-path reads one more file per repeat: a FIFO left there is refused with its name."""
    code = LASSO_LEAVING.format(marker="coef-fifo", action='    os.mkfifo("_coef_0.npy")')
    evaluation = get_task("lasso-path").evaluate(code, tmp_path)
    assert evaluation.error == "coefficient file _coef_0.npy is a FIFO, not a regular file"
    assert evaluation.fail_class == "repairable"


def test_a_coefficient_header_claiming_terabytes_is_read_before_any_allocation(tmp_path: Path) -> None:
    """A ``.npy`` header may claim any shape; the plain load allocates what it claims (the
    control), the task reads the header first and names the shape."""
    code = LASSO_LEAVING.format(marker="coef-header", action=HUGE_HEADER)
    evaluation = get_task("lasso-path").evaluate(code, tmp_path / "work")
    assert evaluation.error == "wrong shape: expected coef (30, 500), got (1000000, 1000000)"
    left = tmp_path / "left.npy"
    with open(left, "wb") as handle:
        import numpy as np

        np.lib.format.write_array_header_1_0(handle, {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)})
    with pytest.raises(MemoryError, match="TiB"):
        np.load(left, allow_pickle=False)


def test_openevolve_program_file_is_read_as_data(tmp_path: Path) -> None:
    """The OpenEvolve evaluator reads the program file OpenEvolve hands it: a FIFO there is an
    invalid program with the reason, at once (the plain read would wait for a writer)."""
    from dream_gym.integrations.openevolve.evaluator import evaluate_program

    fifo = tmp_path / "program.py"
    os.mkfifo(fifo)
    result = evaluate_program("sum-difference", str(fifo))
    metrics = result if isinstance(result, dict) else result.metrics
    assert metrics["combined_score"] == 0.0
    assert metrics["error"] == "program file is a FIFO, not a regular file"


def test_inputs_larger_than_the_workspace_stop_the_run_before_it_starts(tmp_path: Path) -> None:
    """The files copied into the tmpfs count against its cap: a folder that cannot fit is
    refused with the reason, and nothing runs."""
    from dream_gym.infrastructure.sandbox import SandboxUnavailable

    (tmp_path / "input.bin").write_bytes(b"x" * (2 << 20))
    with pytest.raises(SandboxUnavailable, match="the files of the working folder do not fit its limit of 1 MB"):
        run_python(code="print('ran')", cwd=tmp_path, wall_s=30, workspace_mb=1)


# -- answers the evaluator reads that a world could not store ---------------------------------------
SURROGATE = ('def construct_set():\n'
             '    raise RuntimeError("bad \\ud800 surrogate")\n')
NAN_STAGE = ('import os\n\n'
             'def construct_set():\n'
             '    open("_result.json", "w").write(\'{"ok": false, "stage": NaN, "type": "X", "message": "m"}\')\n'
             '    os._exit(0)\n')


def test_a_failure_report_no_world_could_store_is_a_failed_node(tmp_path: Path, short_tmp_path: Path) -> None:
    """A red-team candidate's exception message held a lone surrogate (the harness escapes it,
    the parse gave it back), another wrote a failure report whose stage was NaN: each ended grow
    (exit 2, "cannot be written as JSON"), and --resume stopped at the same place. Each is a
    failed node now, and the run goes on to its end."""
    world = tmp_path / "world"
    done = grow_with([SURROGATE, NAN_STAGE], world, short_tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    # the two attempts of a round ask the server at once: which slot gets which answer is the race's
    surrogate, nan_stage = sorted(load_world(world).records[1:], key=lambda record: record["error"] == "X: m")
    assert surrogate["score"] is None and surrogate["error"] == "RuntimeError: bad \ufffd surrogate"
    assert nan_stage["score"] is None and nan_stage["error"] == "X: m" and nan_stage["metrics"]["stage"] == "nan"


def test_an_answer_no_float_holds_is_a_failed_attempt(tmp_path: Path) -> None:
    """``return [2 ** 1100, 1.0, 1.0]``, no tampering: the check's float conversion raised
    OverflowError, which ended grow's round (exit 2)."""
    task = get_task("autocorrelation")
    evaluation = task.evaluate("def construct_function():\n    return [2 ** 1100, 1.0, 1.0]\n", tmp_path / "w")
    assert not evaluation.valid and evaluation.error.startswith("malformed answer (OverflowError: ")
