"""Nothing left behind: after `kill -9` of a long-running command (grow, eval, dream, rsi, train, deploy),
every process it started dies within seconds: pool workers, the fork server, multiprocessing's
resource tracker and the isolated children (policy files, candidate evaluators).

Descendants are found two ways while the command runs, polled and unioned (workers and children
start late and come and go): the process tree below the command (psutil), and a scan of /proc
for a marker variable the test puts in the command's environment, which finds processes that
left the tree (a new session is handed to init when its parent dies). Isolated children run
with a scrubbed environment, without the marker: the tree finds those."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from dream_gym.infrastructure.jobs import _die_with_owner, _parent_pid

REPO = Path(__file__).resolve().parent.parent
MARKER = "DREAM_GYM_TEST_MARKER"
DEATH_S = 10.0  # every descendant must be gone this long after the kill
SHIPPED = "sd-fixed-s0,lasso-greedy-s0,cp26-fixed-s0"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_PDEATHSIG are Linux's")


def _marked(marker: str) -> set[int]:
    """Processes whose environment holds MARKER=marker (whoever their parent is now)."""
    needle = f"{MARKER}={marker}".encode()
    found = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as handle:
                if needle in handle.read().split(b"\0"):
                    found.add(int(entry.name))
        except OSError:
            pass  # gone, or not ours to read
    return found


def _kind(process: psutil.Process) -> str:
    """What a process is, from its command line (for readable failures)."""
    try:
        line = " ".join(process.cmdline())
    except psutil.Error:
        return "gone"
    for needle, kind in (("resource_tracker", "resource tracker"), ("forkserver import main", "fork server or worker"),
                         ("sandbox", "isolated child"), ("policy_files", "isolated child"),
                         ("isolation", "isolated child"), ("dream_gym", "dream-gym")):
        if needle in line:
            return kind
    return f"other ({line[:80]})"


#: Kinds that say nothing about what a process is (it ended, or is a zombie).
_TRANSIENT = frozenset({"gone", "other ()"})


class Run:
    """A command started with the marker; records every descendant it is seen with."""

    def __init__(self, command: list[str], tmp_path: Path):
        self.marker = uuid.uuid4().hex
        self.stderr_path = tmp_path / "stderr.txt"
        env = {**os.environ, MARKER: self.marker, "PYTHONPATH": str(REPO)}
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                            stderr=stderr, start_new_session=True)
        self.seen: dict[int, tuple[float, str]] = {}  # pid -> (create time, kind)

    def poll(self) -> None:
        pids = _marked(self.marker) - {self.process.pid}
        try:
            pids |= {c.pid for c in psutil.Process(self.process.pid).children(recursive=True)}
        except psutil.Error:
            pass
        for pid in pids:
            try:
                process = psutil.Process(pid)
                created, kind = process.create_time(), _kind(process)
            except psutil.Error:
                continue
            known = self.seen.get(pid)
            # A process seen between its fork and its exec still has its parent's command line
            # (a resource tracker looks like a worker), and a zombie has none: it is classified
            # again at every poll, keeping the last answer that names something.
            if known is None or known[0] != created or kind not in _TRANSIENT:
                self.seen[pid] = (created, kind)

    def kinds(self) -> list[str]:
        return sorted(kind for _, kind in self.seen.values())

    def run_until(self, ready: Callable[[Run], bool], timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll()
            if self.process.poll() is not None:
                raise AssertionError(f"the command ended before the kill (exit {self.process.returncode}): "
                                     f"{self.stderr_path.read_text()[-3000:]}")
            if ready(self):
                return
            time.sleep(0.1)
        raise AssertionError(f"never ready to be killed; seen {self.kinds()}: {self.stderr_path.read_text()[-2000:]}")

    def survivors(self) -> list[tuple[int, str]]:
        alive = []
        for pid, (created, kind) in self.seen.items():
            try:
                process = psutil.Process(pid)
                if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                    alive.append((pid, kind))
            except psutil.Error:
                pass
        return alive

    def kill_and_wait(self) -> tuple[list[tuple[int, str]], float]:
        """kill -9 of the command alone; the descendants still alive after DEATH_S (and the
        seconds it took the others to go)."""
        self.poll()
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.poll()  # marked processes started since the last poll
        started = time.monotonic()
        while time.monotonic() - started < DEATH_S and self.survivors():
            time.sleep(0.05)
        return self.survivors(), time.monotonic() - started

    def clean_up(self) -> None:
        for pid, _ in self.survivors():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _kill_9_leaves_nothing(tmp_path: Path, command: list[str], ready: Callable[[Run], bool],
                           expected: tuple[str, ...] = ()) -> Run:
    run = Run(command, tmp_path)
    try:
        run.run_until(ready)
        for kind in expected:  # the kinds this command must have started (else the test proves little)
            assert kind in run.kinds(), (kind, run.kinds())
        survivors, took = run.kill_and_wait()
        assert not survivors, f"alive {DEATH_S:g}s after kill -9 of the command: {survivors} (seen: {run.kinds()})"
        print(f"{len(run.seen)} descendants ({', '.join(sorted(set(run.kinds())))}) gone {took:.2f}s after kill -9")
    finally:
        run.clean_up()
    return run


def _dream_gym(*args: str) -> list[str]:
    return [sys.executable, "-m", "dream_gym", *args]


def _workers_and(*kinds: str, count: int = 2) -> Callable[[Run], bool]:
    """Ready once the fork server and ``count`` workers (and each of ``kinds``) have been seen."""
    def ready(run: Run) -> bool:
        seen = run.kinds()
        return seen.count("fork server or worker") >= count + 1 and all(k in seen for k in kinds)
    return ready


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.is_file() else 0


# -- the commands --------------------------------------------------------------------------------
@pytest.mark.slow
def test_kill_9_of_grow_leaves_no_worker_fork_server_tracker_or_evaluator(tmp_path):
    out = tmp_path / "world"
    command = _dream_gym("grow", "--task", "sum-difference", "--policy", "random", "--policy-arg", "p_stop=0",
                         "--workers", "2", "--rounds", "1000", "--seed", "5", "--out", str(out), "--quiet")
    workers_then_attempts = _workers_and("resource tracker", "isolated child")
    _kill_9_leaves_nothing(tmp_path, command, lambda run: workers_then_attempts(run) and _lines(out / "nodes.jsonl") >= 6,
                           expected=("resource tracker", "fork server or worker", "isolated child"))


def test_kill_9_of_eval_with_a_hanging_policy_file_leaves_no_worker_or_policy_child(tmp_path):
    policy = REPO / "tests" / "hostile_policies" / "infinite_loop.py"
    command = _dream_gym("eval", "--policy", str(policy), "--worlds", SHIPPED, "-j", "2", "--backend", "process",
                         "--no-progress", "--out", str(tmp_path / "results.jsonl"))
    _kill_9_leaves_nothing(tmp_path, command, _workers_and("isolated child"),
                           expected=("fork server or worker", "isolated child"))


def test_kill_9_of_eval_of_a_policy_file_mid_grid_leaves_nothing(tmp_path):
    policy = tmp_path / "slow_example.py"  # the example, slowed so the grid is surely mid-way when killed
    policy.write_text((REPO / "agents" / "example_policy.py").read_text()
                      + "\n\n_act = Policy.act\n\n\ndef _slow_act(self, view):\n"
                      "    import time\n    time.sleep(0.05)\n    return _act(self, view)\n\n\nPolicy.act = _slow_act\n")
    command = _dream_gym("eval", "--policy", str(policy), "--worlds", "train", "-j", "2", "--no-progress",
                         "--out", str(tmp_path / "results.jsonl"))
    _kill_9_leaves_nothing(tmp_path, command, _workers_and("isolated child"),
                           expected=("fork server or worker", "isolated child"))


def _stopped(run: Run) -> bool:
    """Whether a descendant is stopped: a policy file's episodes are taking turns."""
    for pid in list(run.seen):
        try:
            if psutil.Process(pid).status() == psutil.STATUS_STOPPED:
                return True
        except psutil.Error:
            pass
    return False


def test_kill_9_of_eval_while_the_episodes_take_turns_leaves_nothing(tmp_path):
    """The episodes of a task take turns: every process of a policy's sandbox but its warden is
    stopped outside its turn. The wardens, never stopped, see the command die and end the rest."""
    policy = tmp_path / "slow.py"
    policy.write_text("import time\n\ndef act(view):\n    time.sleep(0.2)\n    return [0] if view.root_slots else []\n")
    command = _dream_gym("eval", "--policy", str(policy), "--worlds", SHIPPED, "-j", "2", "--no-progress",
                         "--out", str(tmp_path / "results.jsonl"))
    _kill_9_leaves_nothing(tmp_path, command, lambda run: _workers_and("isolated child")(run) and _stopped(run),
                           expected=("fork server or worker", "isolated child"))


def test_kill_9_of_dream_mid_phase_leaves_no_worker_or_candidate_child(tmp_path):
    out = tmp_path / "dream"
    command = _dream_gym("dream", "--history", "train", "--policy", "greedy", "--developer", "builtin",
                         "--revisions", "6", "--betas", "0,0.5,1", "-j", "2", "--out", str(out), "--quiet")
    _kill_9_leaves_nothing(tmp_path, command, _workers_and("isolated child"),
                           expected=("fork server or worker", "isolated child"))


@pytest.mark.slow
def test_kill_9_of_rsi_mid_rollout_leaves_no_worker_or_evaluator(tmp_path):
    out = tmp_path / "rsi"
    command = _dream_gym("rsi", "--task", "sum-difference", "--policy", "fixed", "--iterations", "2",
                         "--revisions", "2", "--workers", "2", "--rounds", "200", "--betas", "0.5", "-j", "2",
                         "--out", str(out), "--quiet")
    nodes = out / "worlds" / "iter-1" / "nodes.jsonl"
    workers = _workers_and("isolated child")
    _kill_9_leaves_nothing(tmp_path, command, lambda run: workers(run) and _lines(nodes) >= 6,
                           expected=("fork server or worker", "isolated child"))


@pytest.mark.slow
def test_kill_9_of_train_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    command = _dream_gym("train", "--arch", "node", "--worlds", SHIPPED, "--heldout", "", "--betas", "0,1",
                         "--timesteps", "100000", "--n-envs", "4", "--n-steps", "64", "--batch-size", "128",
                         "--n-epochs", "1", "--checkpoint-every", "256", "--eval-every", "1024", "--out", str(out))
    _kill_9_leaves_nothing(tmp_path, command, lambda run: (out / "progress.json").is_file())


@pytest.mark.slow
def test_kill_9_of_a_deploy_leaves_no_evaluator_or_system_worker(tmp_path):
    pytest.importorskip("openevolve")
    out = tmp_path / "world"  # OpenEvolve: its own process pool, and each evaluation an isolated child
    command = _dream_gym("deploy", "--system", "openevolve", "--task", "circle-packing-26", "--policy", "greedy",
                         "--policy-arg", "patience=100", "-W", "2", "--budget", "60", "--out", str(out))
    _kill_9_leaves_nothing(tmp_path, command, lambda run: "isolated child" in run.kinds()
                           and _lines(out / "nodes.jsonl") >= 4, expected=("isolated child",))


# -- the mechanism -------------------------------------------------------------------------------
def test_a_worker_whose_fork_server_is_already_gone_exits_instead_of_running_on(tmp_path):
    """The race the death signal cannot cover: the server exited before the worker asked for
    the signal. A process whose parent's parent is not the owner is in that state."""
    code = (f"from dream_gym.infrastructure.jobs import _die_with_owner; "
            f"_die_with_owner({os.getpid() + 10**6}); print('ran on')")  # an owner that is not its grandparent
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 1 and "ran on" not in done.stdout, (done.returncode, done.stdout, done.stderr)


def test_a_child_of_the_owner_itself_is_left_alone():
    # spawn workers are the owner's own children: their death signal would follow a thread
    _die_with_owner(os.getppid())  # this process is its parent's child: returns, nothing changed
    assert _parent_pid(os.getpid()) == os.getppid()
    assert _parent_pid(2**22 + 12345) is None  # no such process


def _left_in_session(command: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess[bytes], list[str]]:
    """Run ``command`` in a new session to its end; the processes of that session alive the
    moment it has returned (its fork server, resource tracker, workers, children)."""
    with open(tmp_path / "stderr.txt", "wb") as stderr:
        process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr,
                                   start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        process.wait(timeout=300)
    left = []
    for candidate in psutil.process_iter():
        try:
            if os.getsid(candidate.pid) == process.pid and candidate.status() != psutil.STATUS_ZOMBIE:
                left.append(_kind(candidate))
        except (OSError, psutil.Error):
            pass  # gone meanwhile, or not ours
    done = subprocess.CompletedProcess(command, process.returncode, b"", (tmp_path / "stderr.txt").read_bytes())
    return done, left


@pytest.mark.parametrize("command", [
    ["grow", "--task", "sum-difference", "--policy", "random", "--policy-arg", "p_stop=0", "-W", "2", "--rounds", "4",
     "--seed", "0", "--quiet", "--out", "world"],
    ["eval", "--policy", "greedy", "--worlds", SHIPPED, "-j", "2", "--backend", "process", "--no-progress",
     "--out", "results.jsonl"]], ids=["grow", "eval"])
def test_a_command_that_returns_has_nothing_left_running(command: list[str], tmp_path: Path) -> None:
    """Not even for a moment: the fork server and the resource tracker end before it does (they
    would see their pipes close and exit a little after it), and their ends leave no warning."""
    done, left = _left_in_session(_dream_gym(*command), tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert left == [], left
    assert b"resource_tracker" not in done.stderr and b"Warning" not in done.stderr, done.stderr[-2000:]
