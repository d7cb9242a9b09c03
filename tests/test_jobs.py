"""dream_gym.infrastructure.jobs: job processes safe in a threaded parent, and the watchdog of evaluation grids.

Task functions and policies used by the jobs live at module level here: jobs start from
the fork server, so what they run must be importable (``test_jobs:BlockingPolicy``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from once import built_once
from test_evaluate import make_world

from dream_gym.evaluation.evaluate import evaluate, resolve_worlds
from dream_gym.infrastructure.jobs import JobPool, TaskFailure, job_context

REPO = Path(__file__).resolve().parents[1]


# -- task functions run by the jobs ----------------------------------------------------------------
def _describe(task: Any, beat: Callable[..., None]) -> dict[str, Any]:
    return {"pid": os.getpid(), "ppid": os.getppid(), "threads": len(os.listdir("/proc/self/task")),
           "env": os.environ.get(task), "omp": os.environ.get("OMP_NUM_THREADS")}


def _scripted(task: tuple[str, float], beat: Callable[..., None]) -> str:
    """("ok", _) returns at once; ("hang", s) reports step 7, then sleeps s; ("slow", s) beats
    for s; ("die", _) kills its own process; ("raise", _) raises."""
    what, seconds = task
    if what == "hang":
        beat(7)
        time.sleep(seconds)
    elif what == "slow":
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(0.05)
            beat()
    elif what == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    elif what == "raise":
        raise ValueError("scripted failure")
    return f"{what}:done"


class BlockingPolicy:
    """Blocks forever in its first decision of the episode at beta 0.5 (in-process, no limit of its own)."""

    name = "blocking"

    def reset(self, context: Any) -> None:
        self.beta = context.beta

    def act(self, view: Any) -> list[int]:
        if self.beta == 0.5:
            threading.Event().wait()  # forever
        return list(view.frontier[:1]) if view.rounds < 2 else []


class BlockingInit:
    """Blocks forever while being built."""

    def __init__(self) -> None:
        threading.Event().wait()


# -- the pool -------------------------------------------------------------------------------------
def test_jobs_come_from_a_single_threaded_fork_server_not_from_the_threaded_parent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    stop = threading.Event()
    spinner = threading.Thread(target=stop.wait, daemon=True)  # this parent is threaded
    spinner.start()
    monkeypatch.setenv("DREAM_GYM_TEST_VALUE", "set-after-the-server-started")
    try:
        with JobPool(_describe, 2, task_timeout=30) as pool:
            rows = [row for _, row in pool.run(["DREAM_GYM_TEST_VALUE"] * 2)]
    finally:
        stop.set()
    assert len({row["pid"] for row in rows}) == 2
    from multiprocessing import forkserver

    server = forkserver._forkserver._forkserver_pid
    assert server is not None and len(os.listdir(f"/proc/{server}/task")) == 1  # one thread when it forks
    for row in rows:
        assert row["ppid"] == server != os.getpid()
        assert row["threads"] == 1
        assert row["env"] == "set-after-the-server-started"  # the parent's environment at pool start
        assert row["omp"] == "1"  # one thread per library: the pool already runs a process per core


def test_a_task_without_progress_is_ended_and_its_job_replaced() -> None:
    tasks = [("ok", 0), ("hang", 3600), ("ok", 0), ("slow", 1.5), ("ok", 0)]
    with JobPool(_scripted, 2, task_timeout=0.6) as pool:
        events = list(pool.run(tasks))
        assert pool.replaced == 1
        again = list(pool.run([("ok", 0)]))  # the replacement job works
    assert sorted(index for index, _ in events) == [0, 1, 2, 3, 4]  # each task reported once
    by_task = dict(events)
    failure = by_task[1]
    assert isinstance(failure, TaskFailure) and failure.kind == "timeout" and failure.step == 7
    assert "no progress within the task timeout of 0.6s" in failure.message and "killed and replaced" in failure.message
    assert by_task[3] == "slow:done"  # beats kept a slow task alive past the timeout
    assert all(by_task[i] == "ok:done" for i in (0, 2, 4))
    assert again == [(0, "ok:done")]


def test_a_dead_job_and_a_raising_task_are_reported_and_the_rest_completes() -> None:
    with JobPool(_scripted, 1, task_timeout=None) as pool:
        events = dict(pool.run([("die", 0), ("raise", 0), ("ok", 0)]))
        assert pool.replaced == 1
    assert isinstance(events[0], TaskFailure) and events[0].kind == "died"
    assert "killed by SIGKILL" in events[0].message
    assert isinstance(events[1], TaskFailure) and events[1].kind == "error"
    assert "ValueError: scripted failure" in events[1].message
    assert events[2] == "ok:done"


@pytest.mark.slow
def test_jobs_that_cannot_start_stop_the_pool_with_the_reason(tmp_path: Path) -> None:
    """A job imports the calling script again (as __mp_main__); one that cannot is not a
    policy's failure to record on every episode, but an error naming the cause."""
    world = make_world(tmp_path / "w0", 20, 0)
    script = tmp_path / "unguarded.py"
    script.write_text("if __name__ != '__main__':\n"
                      "    raise ImportError('this script cannot be imported twice')\n"
                      "from dream_gym.evaluation.evaluate import evaluate\n"
                      f"evaluate(['greedy'], {str(world)!r}, '0.5', jobs=2, progress=False)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode != 0
    assert "this script cannot be imported twice" in done.stderr  # the job's own traceback
    assert "JobStartError: a job process exited (exit code 1) before it could run a task" in done.stderr
    assert "__mp_main__" in done.stderr


_POOL_THEN = """
import multiprocessing, os, signal, sys
from dream_gym.infrastructure.jobs import job_context
job_context()
print(os.getpid(), multiprocessing.util.get_temp_dir(), flush=True)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""
_SWEEP = "from dream_gym.infrastructure.work_folders import sweep_left_behind; print(sweep_left_behind())"


@pytest.mark.parametrize("end", ["exit", "kill"])
def test_the_fork_servers_socket_folder_is_gone_after_an_exit_or_a_kill_and_a_sweep(
        end: str, short_tmp_path: Path) -> None:
    """multiprocessing's own folder (pymp-*) stays in the temp folder after kill -9; the pool's
    owner makes it a work folder of its own, which the next dream_gym process sweeps."""
    env = {**os.environ, "TMPDIR": str(short_tmp_path)}
    run = subprocess.run([sys.executable, "-c", _POOL_THEN, end], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.stdout, run.stderr
    pid, folder_name = run.stdout.split()
    folder = Path(folder_name)
    assert folder.parent == short_tmp_path and folder.name.startswith(f"dream_gym_jobs.{pid}."), run.stdout
    if end == "exit":
        assert run.returncode == 0, run.stderr
        assert not folder.exists()
    else:
        assert run.returncode == -signal.SIGKILL
        assert folder.is_dir()
        swept = subprocess.run([sys.executable, "-c", _SWEEP], capture_output=True, text=True, env=env, timeout=60)
        assert swept.stdout.strip() == "1", swept.stderr
        assert not folder.exists()
    assert os.listdir(short_tmp_path) == []


def test_pool_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="jobs"):
        JobPool(_scripted, 0, task_timeout=1)
    with pytest.raises(ValueError, match="task_timeout"):
        JobPool(_scripted, 1, task_timeout=0)
    assert job_context().get_start_method() in ("forkserver", "spawn")


def test_online_job_pool_uses_the_fork_server() -> None:
    from dream_gym.infrastructure.jobs import _parent_pid
    from dream_gym.online.attempts import Backend, Deadlines

    backend = Backend("process", 1, Deadlines(60.0, 60.0))
    try:
        assert backend._pool is not None and len(backend._pool.slots) == 1  # started and warmed up
        worker = backend._pool.slots[0].process.pid
        assert _parent_pid(worker) not in (None, os.getpid())
    finally:
        backend.close()


def test_children_start_without_preexec_fn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """preexec_fn runs Python between fork and exec, unsafe in a threaded parent; the isolated
    policy and evaluator children are fork + exec only (limits are set by their boot code)."""
    from dream_gym.infrastructure.isolation import run_python
    from dream_gym.policy_files import IsolatedPolicy

    calls: list[dict[str, Any]] = []
    real = subprocess.Popen

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", recording)
    assert run_python(code="print('hi')", wall_s=30).ok
    with IsolatedPolicy(REPO / "agents" / "example_policy.py"):
        pass
    started = [call for call in calls if call.get("start_new_session")]  # the two sandboxes
    assert len(started) == 2 and all(call.get("preexec_fn") is None for call in calls)


# -- the watchdog in evaluation grids -------------------------------------------------------------
@pytest.fixture(scope="module")
def two_worlds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("watch")
    for seed in range(2):
        make_world(root / f"w{seed}", 30, seed)
    return root


def _check_blocked(results: list[Any], worlds: tuple[str, ...], timeout: str) -> None:
    by = {(r.policy, r.world, r.beta): r for r in results}
    for world in worlds:
        assert all(by["greedy", world, b].error is None and by["greedy", world, b].attempts > 0 for b in BETAS)
        for beta in BETAS:  # the task is recorded whole: the same whatever the timing
            blocked = by["test_jobs:BlockingPolicy", world, beta]
            assert (blocked.error or "").startswith(
                f"TaskTimeout: policy test_jobs:BlockingPolicy on world {world}, in the episode at beta 0.5: "
                f"no progress within the task timeout of {timeout}; its job process was killed and replaced")
            assert "all 3 episodes of the task are recorded as failed" in blocked.error
            assert blocked.attempts == 0 and blocked.batches == []


BETAS = (0.0, 0.5, 1.0)


def test_an_in_process_policy_that_blocks_forever_is_reported_and_the_grid_completes(two_worlds: Path) -> None:
    started = time.monotonic()
    results = evaluate(["greedy", "test_jobs:BlockingPolicy"], str(two_worlds), BETAS, jobs=2,
                       task_timeout=2.5, progress=False)
    assert time.monotonic() - started < 60
    assert len(results) == 2 * 2 * 3
    _check_blocked(results, ("w0", "w1"), "2.5s")


@pytest.mark.slow
def test_blocking_grid_gives_identical_results_at_j1_and_j2(two_worlds: Path) -> None:
    policies = ["greedy", "test_jobs:BlockingPolicy", "test_jobs:BlockingInit"]
    # one world: three tasks, two of them blocking, are enough for two jobs to interleave
    runs = {jobs: evaluate(policies, str(two_worlds / "w0"), BETAS, jobs=jobs, task_timeout=2.5, progress=False)
            for jobs in (1, 2)}
    assert [r.to_dict() for r in runs[1]] == [r.to_dict() for r in runs[2]]
    _check_blocked(runs[2], ("w0",), "2.5s")
    for result in runs[2]:
        if result.policy == "test_jobs:BlockingInit":
            assert (result.error or "").startswith("TaskTimeout:") and "in the episode at beta 0:" in result.error


def test_serial_in_process_and_in_a_watched_job_agree(two_worlds: Path) -> None:
    results = evaluate(["greedy"], str(two_worlds), (0.5,), backend="serial", task_timeout=None, progress=False)
    watched = evaluate(["greedy"], str(two_worlds), (0.5,), backend="serial", progress=False)
    assert [r.to_dict() for r in results] == [r.to_dict() for r in watched]
    with pytest.raises(ValueError, match="task_timeout"):
        evaluate(["greedy"], str(two_worlds), (0.5,), task_timeout=-1, progress=False)


# -- SB3 models: the README's command, and a parent whose torch thread pool is running ------------
TRAIN = """
import sys
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import DummyVecEnv
from dream_gym.evaluation.evaluate import resolve_worlds
from dream_gym.rl import MacroReplayEnv

torch.set_num_threads(2)  # a threaded parent: torch's pool runs before the jobs start
worlds = resolve_worlds("train")
env = DummyVecEnv([lambda: MacroReplayEnv(worlds, workers=4, beta=[0.2, 0.8])])
model = MaskablePPO("MlpPolicy", env, n_steps=128, batch_size=64, n_epochs=2, seed=0, device="cpu")
model.learn(total_timesteps=256)
model.save(sys.argv[1])
"""

EVALUATE_IN_THREADED_PARENT = """
import json, sys
import torch
from dream_gym.evaluation.evaluate import evaluate, resolve_worlds
from dream_gym.rl import SB3Policy

torch.set_num_threads(2)
SB3Policy(sys.argv[1])  # loads the model here too: torch's OpenMP pool is now running in this parent
rows = {}
for jobs in (1, 2):
    results = evaluate([sys.argv[1], "stagnation"], sys.argv[2], "0.1,0.9", jobs=jobs, progress=False)
    rows[jobs] = [r.to_dict() for r in results]
assert all(r["error"] is None for r in rows[2]), [r["error"] for r in rows[2]]
print(json.dumps({"same": rows[1] == rows[2], "episodes": len(rows[2])}))
"""


@pytest.fixture(scope="module")
def sb3_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small MaskablePPO model, trained once per session."""
    def train(folder: Path) -> None:
        subprocess.run([sys.executable, "-c", TRAIN, str(folder / "ppo_macro.zip")], check=True, timeout=600, cwd=REPO)

    return built_once(tmp_path_factory, "sb3-model", train) / "ppo_macro.zip"


@pytest.mark.slow
def test_readme_eval_command_with_a_trained_sb3_model_at_j2_finishes(sb3_zip: Path, tmp_path: Path) -> None:
    command = [str(Path(sys.executable).parent / "dream-gym"), "eval", "--policy", str(sb3_zip),
               "--policy", "stagnation", "--worlds", "heldout", "-j", "2", "--no-progress",
               "--out", str(tmp_path / "results.jsonl")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)  # hung forever before
    assert done.returncode == 0, done.stderr

    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    held_out = len(resolve_worlds("heldout"))  # of the default dataset (recorded-v1: 16 worlds)
    assert len(rows) == 2 * held_out * 11 and all(row["error"] is None for row in rows)


SERVER_IMPORTS = """
import json, sys
from multiprocessing import forkserver
from dream_gym.evaluation.evaluate import evaluate
results = evaluate([sys.argv[1]], sys.argv[2], "0.5", jobs=2, progress=False)
assert all(r.error is None for r in results), [r.error for r in results]
maps = open(f"/proc/{forkserver._forkserver._forkserver_pid}/maps").read()
print(json.dumps({"server_has_torch": "libtorch" in maps, "here_has_torch": "torch" in sys.modules}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(("policy", "server_has_torch"), [("ppo-options", True), ("recommended", True), ("stagnation", False)])
def test_the_fork_server_imports_the_model_stack_once_for_a_grid_of_models(
        policy: str, server_has_torch: bool, two_worlds: Path) -> None:
    """A job forked from a server that imported torch and SB3 does not import them again (seconds
    a job, in every pool); a grid without a model keeps the server lean."""
    done = subprocess.run([sys.executable, "-c", SERVER_IMPORTS, policy, str(two_worlds)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"server_has_torch": server_has_torch, "here_has_torch": False}


@pytest.mark.slow
def test_sb3_grid_from_a_parent_running_torch_threads_finishes_and_matches_j1(sb3_zip: Path,
                                                                              two_worlds: Path) -> None:
    done = subprocess.run([sys.executable, "-c", EVALUATE_IN_THREADED_PARENT, str(sb3_zip), str(two_worlds)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == '{"same": true, "episodes": 8}'
