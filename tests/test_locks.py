"""One writer per output (dream_gym.infrastructure.locks): every long loop and results file is refused to a
second writer while a first one runs, with a message naming the first; a lock dies with its
holder (kill -9, and a child the holder started does not keep it); temporary files of two
writers of one target never collide; a finished train re-run changes nothing; and a killed
`dream-gym eval --out` grid resumed with --resume writes the same bytes as an uninterrupted one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_gym.infrastructure.durable import write_atomic
from dream_gym.infrastructure.locks import LockedError, file_lock, folder_lock, lock_file_of

REPO = Path(__file__).resolve().parent.parent
#: Worker processes of the subprocesses import this module (the slow policy below) by name.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}


def _python(code: str) -> subprocess.Popen[str]:
    """A Python subprocess running ``code`` (its own session, so killpg ends all it started)."""
    return subprocess.Popen([sys.executable, "-c", code], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _dream_gym(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "dream_gym", *args], env=env or ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dream_gym", *args], env=env or ENV, capture_output=True, text=True,
                          timeout=120)


GATE_ENV = "DREAM_GYM_TEST_GATE"


class _Gated:
    """A built-in policy that waits, before each decision, until the file named by
    $DREAM_GYM_TEST_GATE exists: a test's first writer holds its lock until the test opens the
    gate, whatever the machine's speed (waiting changes no decision)."""

    inner_name = "greedy"

    def __init__(self) -> None:
        from dream_gym.policies import make_policy

        self.inner = make_policy(self.inner_name)

    def reset(self, context: object) -> None:
        self.inner.reset(context)

    def act(self, view: object) -> object:
        gate, deadline = Path(os.environ[GATE_ENV]), time.monotonic() + 60
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.inner.act(view)


class GatedGreedy(_Gated):
    inner_name = "greedy"


class GatedFixed(_Gated):
    inner_name = "fixed"


def _gated_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    gate = tmp_path / "gate"
    return {**ENV, GATE_ENV: str(gate)}, gate


def _wait_for(condition: Callable[[], bool], process: subprocess.Popen[str], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"the first process ended before {what}: {process.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _holds(process: subprocess.Popen[str], target: Path, *, folder: bool) -> Callable[[], bool]:
    """True once ``process`` is recorded as the holder of ``target``'s lock."""
    lock = folder_lock(target) if folder else file_lock(target)
    return lambda: (lock.holder() or {}).get("pid") == process.pid


def _kill(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


def _refused_naming(result: subprocess.CompletedProcess[str], holder: subprocess.Popen[str], target: Path) -> None:
    assert result.returncode != 0, result.stdout
    assert f"{target} is being written by pid {holder.pid}" in result.stderr, result.stderr
    assert "wait for it to finish or stop it" in result.stderr


# --------------------------------------------------------------------------- the lock itself


HOLD = """
import sys, time
from dream_gym.infrastructure.locks import folder_lock
lock = folder_lock(sys.argv[1] if len(sys.argv) > 1 else {target!r}).acquire()
{then}
print("locked", flush=True)
time.sleep(600)
"""


def test_a_second_process_is_refused_with_the_holder_and_a_released_lock_is_free(tmp_path: Path) -> None:
    run = tmp_path / "run"
    holder = _python(HOLD.format(target=str(run), then=""))
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(LockedError) as refused:
            folder_lock(run).acquire()
        recorded = refused.value.holder
        assert recorded is not None and recorded["pid"] == holder.pid and recorded["command"].startswith("python -c")
        assert recorded["started"].endswith("Z") and recorded["host"]
        assert str(run) in str(refused.value) and f"pid {holder.pid}" in str(refused.value)
    finally:
        _kill(holder)
    with folder_lock(run) as lock:  # its holder is gone: free, and now recorded as ours
        assert lock.holder() is not None and lock.holder()["pid"] == os.getpid()  # type: ignore[index]
    assert not lock_file_of(run, folder=True).exists()  # a released lock leaves no file


def test_a_lock_file_left_by_kill_9_never_blocks(tmp_path: Path) -> None:
    run = tmp_path / "run"
    holder = _python(HOLD.format(target=str(run), then=""))
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    stale = json.loads((run / ".lock").read_text())
    assert stale["pid"] == holder.pid  # the dead holder's record is still on disk ...
    assert folder_lock(run).holder() is None  # ... but nobody holds the lock
    with folder_lock(run):
        assert json.loads((run / ".lock").read_text())["pid"] == os.getpid()


def test_a_child_of_the_holder_does_not_inherit_the_lock(tmp_path: Path) -> None:
    """The holder starts a long-lived child that keeps every inheritable descriptor
    (close_fds=False), then dies by kill -9: the child must not keep the lock alive."""
    run = tmp_path / "run"
    spawn = ("import subprocess; child = subprocess.Popen(['sleep', '600'], close_fds=False); "
             "print(child.pid, flush=True)")
    holder = _python(HOLD.format(target=str(run), then=spawn))
    assert holder.stdout is not None
    child_pid = int(holder.stdout.readline())
    assert holder.stdout.readline() == "locked\n"
    try:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        os.kill(child_pid, 0)  # the child lives on
        with folder_lock(run):
            pass
    finally:
        os.killpg(holder.pid, signal.SIGKILL)


def test_the_lock_is_re_entrant_in_one_process_and_released_by_the_last_release(tmp_path: Path) -> None:
    outer = folder_lock(tmp_path).acquire()
    with folder_lock(tmp_path):  # e.g. grow's folder lock and its WorldWriter's
        pass
    assert outer.holder() is not None  # still held: the outer acquisition remains
    outer.release()
    assert outer.holder() is None and not (tmp_path / ".lock").exists()


def test_a_file_lock_sits_beside_the_file(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "results.jsonl"
    with file_lock(out) as lock:
        assert lock.path == tmp_path / "sub" / "results.jsonl.lock" and lock.path.is_file()
    assert not lock.path.exists()


WRITE_MANY = """
import sys
from dream_gym.infrastructure.durable import write_atomic
for i in range(300):
    write_atomic(sys.argv[1], sys.argv[2] * 1000)
"""


def test_two_concurrent_write_atomic_to_one_target_never_fail(tmp_path: Path) -> None:
    """With one fixed temporary name, one writer renames the other's temporary file away and
    the other's rename fails with ENOENT (or renames a half-written file)."""
    target = tmp_path / "file.txt"
    writers = [subprocess.Popen([sys.executable, "-c", WRITE_MANY, str(target), letter], env=ENV,
                                stderr=subprocess.PIPE, text=True) for letter in "ab"]
    errors = [w.communicate(timeout=120)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0], errors
    assert target.read_text() in ("a" * 1000, "b" * 1000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]  # no temporary file left


def test_a_failed_write_leaves_no_temporary_file_and_the_old_content(tmp_path: Path) -> None:
    from dream_gym.infrastructure.durable import write_via

    target = write_atomic(tmp_path / "file.txt", "old")

    def broken(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_via(target, broken)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


# --------------------------------------------------------------------------- eval --out, --resume


class SlowGreedy:
    """greedy, 2 ms slower a decision: a grid that runs long enough to be killed midway
    (sleeping changes no decision, so results are those of greedy, labelled by this spec)."""

    name = "slow-greedy"

    def __init__(self) -> None:
        from dream_gym.policies import make_policy

        self.inner = make_policy("greedy")

    def reset(self, context: object) -> None:
        self.inner.reset(context)

    def act(self, view: object) -> object:
        time.sleep(0.002)
        return self.inner.act(view)


GRID = ["-p", "test_locks:SlowGreedy", "-p", "random", "-p", "ucb", "-w", "heldout", "--betas", "0,0.5,1", "-j", "2",
        "--no-progress", "--summary"]


def _task_lines(journal: Path) -> int:
    return journal.read_bytes().count(b"\n") - 1 if journal.is_file() else 0


@pytest.mark.slow
def test_a_killed_eval_grid_resumes_to_the_bytes_of_an_uninterrupted_run(tmp_path: Path) -> None:
    out, clean = tmp_path / "results.jsonl", tmp_path / "clean.jsonl"
    journal = tmp_path / "results.jsonl.partial"
    first = _dream_gym("eval", *GRID, "--out", str(out))
    try:
        _wait_for(lambda: _task_lines(journal) >= 2, first, "two finished tasks in the journal")
    finally:
        _kill(first)  # kill -9 of the whole session: the CLI, its fork server and its workers
    done = _task_lines(journal)
    assert not out.exists() and 2 <= done < 48, done  # killed mid-grid (3 policies x 16 worlds)

    again = _run_cli("eval", *GRID, "--out", str(out))  # without --resume: refused, told to pass it
    assert again.returncode != 0 and "--resume" in again.stderr and str(journal) in again.stderr
    other = _run_cli("eval", *GRID, "--betas", "0,1", "--out", str(out), "--resume")  # the last --betas counts
    assert other.returncode != 0 and "betas: the journal has [0.0, 0.5, 1.0], this command gives [0.0, 1.0]" in other.stderr

    resumed = _run_cli("eval", *GRID, "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert not journal.exists() and not Path(f"{out}.lock").exists()
    assert _run_cli("eval", *GRID, "--out", str(clean)).returncode == 0
    assert out.read_bytes() == clean.read_bytes()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 * 16 * 3 and all(r["limit"] is not None for r in rows)  # limits on resumed rows too


class StopOnce:
    """greedy, except that while ``armed`` its first decision raises KeyboardInterrupt (Ctrl-C in
    the middle of a grid run in this process)."""

    name = "stop-once"
    armed = False

    def __init__(self) -> None:
        from dream_gym.policies import make_policy

        self.inner = make_policy("greedy")

    def reset(self, context: object) -> None:
        self.inner.reset(context)

    def act(self, view: object) -> object:
        if StopOnce.armed:
            StopOnce.armed = False
            raise KeyboardInterrupt
        return self.inner.act(view)


def test_resume_keeps_the_journaled_tasks_and_refuses_a_journal_of_another_run(tmp_path: Path) -> None:
    from dream_gym.evaluation.evaluate import evaluate
    from dream_gym.evaluation.journal import JournalMismatch

    policies, worlds = ["greedy", "test_locks:StopOnce"], "sd-fixed-s0,lasso-greedy-s0"
    options = {"betas": (0.0, 1.0), "backend": "serial", "task_timeout": None, "progress": False}
    clean, out = tmp_path / "clean.jsonl", tmp_path / "results.jsonl"
    evaluate(policies, worlds, out=clean, **options)
    StopOnce.armed = True
    with pytest.raises(KeyboardInterrupt):
        evaluate(policies, worlds, out=out, **options)
    journal = tmp_path / "results.jsonl.partial"
    assert _task_lines(journal) == 2 and not out.exists()  # greedy's two tasks, then the interrupt
    kept = journal.read_bytes()

    with pytest.raises(FileExistsError, match="pass --resume"):
        evaluate(policies, worlds, out=out, **options)
    with pytest.raises(JournalMismatch, match=r"betas: the journal has \[0.0, 1.0\], this command gives \[0.0\]"):
        evaluate(policies, worlds, out=out, resume=True, **{**options, "betas": (0.0,)})
    with pytest.raises(JournalMismatch, match="seed: the journal has 0, this command gives 1"):
        evaluate(policies, worlds, out=out, resume=True, seed=1, **options)
    assert journal.read_bytes() == kept  # refusals leave the journal as it was

    resumed = evaluate(policies, worlds, out=out, resume=True, **options)
    assert out.read_bytes() == clean.read_bytes() and not journal.exists() and len(resumed) == 8

    # The journal's episodes are kept, not re-run: a value changed in it reaches the results.
    identity, task, *rest = kept.decode().splitlines(keepends=True)
    changed = json.loads(task)
    changed["episodes"][0]["replay_score"] = 1234.5
    journal.write_text(identity + json.dumps(changed) + "\n" + "".join(rest))
    evaluate(policies, worlds, out=out, resume=True, **options)
    assert json.loads(out.read_text().splitlines()[0])["replay_score"] == 1234.5

    # A value of the wrong kind, or a first line that is no identity: refused naming the journal's
    # line, the journal kept. (A string V made a traceback in the leaderboard's mean after the
    # results file had been written with it, and the journal deleted.)
    changed["episodes"][0]["replay_score"] = "x"
    bad = identity + json.dumps(changed) + "\n" + "".join(rest)
    for text, message in ((bad, r"results.jsonl.partial, line 2: .*'replay_score' must be a number, got \"x\""),
                          (task + "".join(rest), "results.jsonl.partial is not the journal of an evaluation")):
        journal.write_text(text)
        out.unlink(missing_ok=True)
        with pytest.raises(ValueError, match=message):
            evaluate(policies, worlds, out=out, resume=True, **options)
        assert journal.read_text() == text and not out.exists()


EVAL = ["eval", "-p", "test_locks:GatedGreedy", "-p", "random", "-w", "sd-fixed-s0,lasso-greedy-s0", "--betas", "0,1",
        "-j", "2", "--no-progress", "--summary"]


@pytest.mark.slow
def test_a_second_eval_into_the_same_file_is_refused_naming_the_first(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    env, gate = _gated_env(tmp_path)
    first = _dream_gym(*EVAL, "--out", str(out), env=env)
    try:
        _wait_for(_holds(first, out, folder=False), first, "the first eval to lock its results file")
        for extra in ([], ["--resume"]):
            _refused_naming(_run_cli(*EVAL, "--out", str(out), *extra, env=env), first, out)
        gate.touch()
        assert first.wait(timeout=120) == 0, first.communicate()
    finally:
        _kill(first)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 * 2 * 2 and not Path(f"{out}.partial").exists()  # the first run's file, whole


# --------------------------------------------------------------------------- grow, dream, rsi, train


GROW = ["grow", "--task", "sum-difference", "--policy", "test_locks:GatedFixed", "-W", "2", "--rounds", "2",
        "--backend", "serial", "--quiet"]


@pytest.mark.slow
def test_a_second_grow_of_the_same_world_is_refused_naming_the_first(tmp_path: Path) -> None:
    from dream_gym.world.tree import load_world

    world = tmp_path / "world"
    env, gate = _gated_env(tmp_path)
    first = _dream_gym(*GROW, "--out", str(world), env=env)
    try:
        _wait_for(_holds(first, world, folder=True), first, "the first grow to lock its world folder")
        for extra in (["--resume"], []):  # without --resume too: told who writes it, not to pass --resume
            _refused_naming(_run_cli(*GROW, "--out", str(world), *extra, env=env), first, world)
        gate.touch()
        assert first.wait(timeout=120) == 0, first.communicate()
    finally:
        _kill(first)
    grown = load_world(world)  # validates every line: nothing of the second run is in it
    assert grown.size == 5 and grown.meta["sha256"] and not (world / ".lock").exists()


DREAM = ["dream", "--history", "sd-fixed-s0,lasso-greedy-s0", "--policy", "greedy", "--developer", "builtin",
         "--revisions", "3", "--betas", "0,0.5,1", "-j", "1", "--quiet"]


@pytest.mark.slow
def test_a_second_dream_of_the_same_run_folder_is_refused_naming_the_first(tmp_path: Path) -> None:
    from dream_gym.infrastructure.durable import read_jsonl

    run = tmp_path / "dream"
    first = _dream_gym(*DREAM, "--out", str(run))
    try:
        _wait_for(_holds(first, run, folder=True), first, "the first dream to lock its run folder")
        _refused_naming(_run_cli(*DREAM, "--out", str(run), "--resume"), first, run)
        assert first.wait(timeout=120) == 0, first.communicate()
    finally:
        _kill(first)
    rows = read_jsonl(run / "dream.jsonl")
    assert [(r["type"], r.get("m")) for r in rows] == [("revision", 0), ("revision", 1), ("revision", 2),
                                                        ("phase", None)]  # each version written once


RSI = ["rsi", "--task", "sleep-task", "--policy", "fixed", "--iterations", "1", "--revisions", "2", "--workers", "1",
       "--rounds", "2", "--betas", "0.5", "-j", "1", "--backend", "serial", "--quiet"]


@pytest.mark.slow
def test_a_second_rsi_of_the_same_run_folder_is_refused_naming_the_first(tmp_path: Path) -> None:
    from dream_gym.infrastructure.durable import read_jsonl

    run = tmp_path / "rsi"
    first = _dream_gym(*RSI, "--out", str(run))
    try:
        _wait_for(_holds(first, run, folder=True), first, "the first rsi to lock its run folder")
        _refused_naming(_run_cli(*RSI, "--out", str(run), "--resume"), first, run)
        assert first.wait(timeout=120) == 0, first.communicate()
    finally:
        _kill(first)
    assert [r["type"] for r in read_jsonl(run / "rsi.jsonl")] == ["rollout", "iteration"]


TRAIN = ["train", "--worlds", "sd-fixed-s0,lasso-greedy-s0", "--heldout", "", "--betas", "0,1", "--n-envs", "8",
         "--n-steps", "32", "--batch-size", "128", "--n-epochs", "1", "--eval-every", "256", "--checkpoint-every", "256"]


@pytest.mark.slow
def test_a_second_train_of_the_same_run_folder_is_refused_naming_the_first(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = _dream_gym(*TRAIN, "--timesteps", "100000", "--out", str(run))
    try:
        _wait_for(_holds(first, run, folder=True), first, "the first train to lock its run folder")
        _wait_for(lambda: (run / "progress.json").is_file(), first, "the first checkpoint")
        config = (run / "config.json").read_bytes()
        _refused_naming(_run_cli(*TRAIN, "--timesteps", "100000", "--out", str(run)), first, run)
        assert first.poll() is None  # still training, untouched by the refused one
    finally:
        _kill(first)
    assert (run / "config.json").read_bytes() == config
    steps = [json.loads(line)["timesteps"] for line in (run / "evals.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps))  # one writer: no row twice


@pytest.mark.slow
def test_a_finished_train_run_again_trains_nothing_and_appends_nothing(tmp_path: Path) -> None:
    from dream_gym.training.trainer import TrainConfig, train

    run = tmp_path / "run"
    command = [*TRAIN, "--timesteps", "512", "--out", str(run)]
    config = TrainConfig(worlds="sd-fixed-s0,lasso-greedy-s0", heldout="", betas="0,1", n_envs=8, n_steps=32,
                         batch_size=128, n_epochs=1, eval_every=256, checkpoint_every=256, timesteps=512, out=str(run))
    train(config, log=lambda _: None)  # the command's run, in this process
    files = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    again = _run_cli(*command)
    assert again.returncode == 0, again.stderr
    assert f"{run} is finished (512 steps); nothing to do" in again.stdout
    assert "train pool (2 worlds at W = 4, betas 0,1): v2" in again.stdout  # the recorded result, as after the run
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == files

    # Killed after the final evaluation was appended, before model.zip and summary.json: the
    # re-run finishes the run with the evaluation it finds, not a second final row.
    (run / "model.zip").unlink()
    (run / "summary.json").unlink()
    train(config, log=lambda _: None)
    assert (run / "evals.jsonl").read_bytes() == files["evals.jsonl"]
    assert json.loads((run / "summary.json").read_bytes())["final"] == json.loads(files["summary.json"])["final"]


HOLD_FILE = """
import sys, time
from dream_gym.infrastructure.locks import file_lock
lock = file_lock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(600)
"""


def test_a_pack_into_a_dataset_being_installed_is_refused_naming_the_installer(tmp_path: Path) -> None:
    from dream_gym.world.writer import new_meta, write_world

    world = write_world(tmp_path / "w", new_meta("toy", "toy-task"), [{"id": "root", "parent": None, "score": 1.0}])
    env = {**ENV, "DREAM_GYM_HOME": str(tmp_path / "home")}
    target = tmp_path / "home" / "datasets" / "me" / "toy-v0"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_FILE, str(target)], env=env, stdout=subprocess.PIPE,
                              text=True, start_new_session=True)  # the lock a pack or download installs under
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        packed = subprocess.run([sys.executable, "-m", "dream_gym", "worlds", "pack", str(world), "--id", "me/toy-v0"],
                                env=env, capture_output=True, text=True, timeout=120)
        _refused_naming(packed, holder, target)
        assert sorted(p.name for p in target.parent.iterdir()) == ["toy-v0.lock"]  # no staging left, nothing installed
    finally:
        _kill(holder)


def test_compressing_a_world_being_written_is_refused_naming_its_writer(tmp_path: Path) -> None:
    from dream_gym.world.writer import compress_world, new_meta, write_world

    world = write_world(tmp_path / "w", new_meta("toy", "toy-task"), [{"id": "root", "parent": None, "score": 1.0}])
    holder = _python(HOLD.format(target=str(world), then=""))  # the lock every WorldWriter holds
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(LockedError, match=f"pid {holder.pid}"):
            compress_world(world)
        assert (world / "nodes.jsonl").is_file() and not (world / "nodes.jsonl.gz").exists()
    finally:
        _kill(holder)
    assert compress_world(world).name == "nodes.jsonl.gz"




def test_an_interrupted_eval_names_the_journal_it_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped before its results file is written, eval says its progress is in the journal
    (``OUT.partial``), not in the results file it named, which does not exist yet."""
    from dream_gym.cli import main
    from dream_gym.evaluation import evaluate as ev

    real = ev.run_tasks

    def ctrl_c_after_the_first_task(*args: object, **kwargs: object):
        for done, item in enumerate(real(*args, **kwargs)):
            if done == 1:
                raise KeyboardInterrupt
            yield item

    out = tmp_path / "results.jsonl"
    command = ["eval", "-p", "greedy", "--worlds", "sd-fixed-s0,lasso-greedy-s0", "--betas", "0.5", "--no-progress",
               "--out", str(out)]
    monkeypatch.setattr(ev, "run_tasks", ctrl_c_after_the_first_task)
    assert main(command) == 130
    err = capsys.readouterr().err
    assert f"kept in {out}.partial; the same command with --resume continues it" in " ".join(err.split())
    assert not out.exists() and _task_lines(tmp_path / "results.jsonl.partial") == 1
    monkeypatch.setattr(ev, "run_tasks", real)
    assert main([*command, "--resume"]) == 0 and out.exists()


def test_a_lock_in_a_folder_made_read_only_hides_no_error(tmp_path: Path) -> None:
    """A run whose --out was made read-only ended with only ``ro/.lock: Permission denied``: the
    lock's release failed to remove its file and hid the error that ended the run (``world.json``
    could not be written). Run without the capability that lets root write anywhere."""
    folder = tmp_path / "ro"
    folder.mkdir()
    code = ("import os\nfrom pathlib import Path\nfrom dream_gym.infrastructure.locks import folder_lock\n"
            f"with folder_lock(Path({str(folder)!r})):\n"
            f"    os.chmod({str(folder)!r}, 0o555)\n"
            f"    open({str(folder / 'world.json')!r}, 'w')\n")
    as_root = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"] if os.geteuid() == 0 else []
    done = subprocess.run([*as_root, sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    folder.chmod(0o755)
    assert done.returncode == 1
    assert done.stderr.strip().endswith(f"PermissionError: [Errno 13] Permission denied: '{folder / 'world.json'}'")
