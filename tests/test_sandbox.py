"""dream_gym.infrastructure.sandbox: what the kernel enforces, where it cannot, and that nothing outlives the parent."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from dream_gym.infrastructure.isolation import run_python
from dream_gym.infrastructure.sandbox import kernel_support, read_roots

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "agents" / "example_policy.py"
# Runs a command under a seccomp filter that makes the kernel answer "no Landlock" (ENOSYS):
# what a user on an older or differently configured kernel sees.
WITHOUT_LANDLOCK = textwrap.dedent("""
    import errno, os, sys
    import pyseccomp as sc
    rules = sc.SyscallFilter(sc.ALLOW)
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "landlock_create_ruleset")
    rules.load()
    os.execv(sys.executable, [sys.executable, "-m", "dream_gym", *sys.argv[1:]])
""")


def _without_landlock(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_LANDLOCK, *args], capture_output=True, text=True,
                          cwd=REPO, timeout=300)


def test_this_kernel_supports_the_sandbox() -> None:
    support = kernel_support()
    assert support.ok and support.landlock_abi >= 1 and support.seccomp, support.problems


@pytest.mark.slow
def test_where_the_kernel_refuses_the_sandbox_no_policy_file_runs(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    refused = _without_landlock("eval", "--policy", str(EXAMPLE), "--worlds", "sd-fixed-s0", "--betas", "0.5",
                                "--out", str(out))
    assert refused.returncode != 0 and not out.exists()
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "Landlock is not available" in lines[0] and "--unsafe-no-sandbox" in lines[0], lines
    allowed = _without_landlock("eval", "--policy", str(EXAMPLE), "--worlds", "sd-fixed-s0", "--betas", "0.5",
                                "--out", str(out), "--unsafe-no-sandbox")
    assert allowed.returncode == 0, allowed.stderr
    assert "WITHOUT the sandbox" in allowed.stderr and json.loads(out.read_text().splitlines()[0])["error"] is None


@pytest.mark.slow
def test_where_the_kernel_refuses_the_sandbox_no_candidate_runs(tmp_path: Path) -> None:
    refused = _without_landlock("grow", "--task", "sum-difference", "-W", "1", "--rounds", "1",
                                "--out", str(tmp_path / "world"), "--quiet")
    assert refused.returncode != 0 and "Landlock is not available" in refused.stderr
    assert not (tmp_path / "world" / "nodes.jsonl").exists()  # not even the root ran


@pytest.mark.slow
def test_built_in_policies_need_no_sandbox(tmp_path: Path) -> None:
    """Trusted code (built-in names) runs in-process, so it works on any kernel."""
    out = tmp_path / "results.jsonl"
    run = _without_landlock("eval", "--policy", "greedy", "--worlds", "sd-fixed-s0", "--betas", "0.5", "--out", str(out))
    assert run.returncode == 0, run.stderr


def test_read_roots_hold_code_not_data(tmp_path: Path) -> None:
    roots = read_roots([tmp_path / "policy.py"])
    package = REPO / "dream_gym"
    trees = {Path(p) for p in roots["tree"]}
    assert package / "infrastructure" in trees and package / "world" in trees
    assert REPO not in trees and REPO / "recorded_worlds" not in trees and REPO / "agents" not in trees
    # nothing else under a temp or home folder (this checkout and Python's own installation may be)
    installed = (Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), package)
    assert not any(str(p).startswith(("/tmp", "/proc", "/home", "/root/."))
                   for p in trees if not any(p.is_relative_to(root) for root in installed))
    assert str((tmp_path / "policy.py").resolve()) in roots["file"]


def test_no_read_root_holds_the_whole_package(tmp_path: Path) -> None:
    """A Python installed system-wide keeps dream_gym below /usr/lib or /usr/local/lib, which were
    read roots whole: a policy could read every part of the package (the agents that grew the
    worlds, the shipped worlds' unrevealed nodes). A root that holds the package is given as its
    entries, on the way down, the package left out."""
    from dream_gym.infrastructure.sandbox.launch import _PACKAGE, around
    from dream_gym.policy_files.isolated import READABLE_PARTS

    for roots in (read_roots(), read_roots(package_parts=READABLE_PARTS)):
        real = {Path(p).resolve() for p in roots["tree"]}
        assert not any(p == _PACKAGE or p in _PACKAGE.parents for p in real)
    system = tmp_path / "usr" / "local" / "lib"  # a system-wide install, laid out in a folder
    package = system / "python3.11" / "site-packages" / "dream_gym"
    for folder in (package / "online", system / "python3.11" / "site-packages" / "numpy", system / "libfoo"):
        folder.mkdir(parents=True)
    (system / "libbar.so").write_text("")
    kept = {str(Path(p).relative_to(system)) for p in around(tmp_path / "usr", package.resolve())}
    assert kept == {"libbar.so", "libfoo", "python3.11/site-packages/numpy"}


def candidate_report(actions: str, cwd: Path, prologue: str = "") -> tuple[dict[str, str], Any]:
    """Run a candidate in ``cwd`` that tries each (label, callable) of ``actions`` (the source of a
    list) after ``prologue``: each label's "allowed", or the strerror of the OSError it raised."""
    code = (f"import json, os\n{prologue}report = {{}}\nfor label, action in {actions}:\n    try:\n"
            "        action()\n        report[label] = 'allowed'\n    except OSError as exc:\n"
            "        report[label] = exc.strerror\nprint(json.dumps(report))\n")
    out = run_python(code=code, cwd=cwd, wall_s=20)
    return json.loads(out.stdout), out


def test_a_candidate_reads_and_writes_only_its_own_folder(tmp_path: Path) -> None:
    work, other = tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other.mkdir()
    (other / "secret.txt").write_text("not yours")
    report, out = candidate_report(f"""[
        ("own write", lambda: open("mine.txt", "w").write("x")),
        ("own read", lambda: open("mine.txt").read()),
        ("sibling read", lambda: open({str(other / 'secret.txt')!r}).read()),
        ("sibling write", lambda: open({str(other / 'new.txt')!r}, "w").write("x")),
        ("parent environ", lambda: open("/proc/%d/environ" % os.getppid(), "rb").read()),
        # many libraries open it at import (dill, which torch imports where installed)
        ("devnull", lambda: open(os.devnull, "r+b").write(b"x") + len(open(os.devnull, "rb").read()))]""", work)
    assert report == {"own write": "allowed", "own read": "allowed", "sibling read": "Permission denied",
                      "sibling write": "Permission denied", "parent environ": "Permission denied",
                      "devnull": "allowed"}, out.stderr
    assert not (other / "new.txt").exists()


def test_a_candidate_changes_no_files_mode_owner_or_times_and_makes_no_uncounted_memory(tmp_path: Path) -> None:
    """Landlock rules what a candidate opens, not a file's metadata: a red-team candidate set the
    setuid bit on a host file, took a program's execute bit, and kept a note for the next
    candidate in a file's times; another held 3.2 GB in a memfd past its 1 GB limit. Each is
    refused, for a file outside the workspace and inside it alike."""
    work, other = tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other.mkdir()
    host = other / "program"
    host.write_text("#!/bin/sh\n")
    host.chmod(0o755)
    os.utime(host, (1_000_000, 1_000_000))
    before = host.stat()
    report, out = candidate_report(f"""[
        ("chmod", lambda: os.chmod({str(host)!r}, 0o4777)), ("chown", lambda: os.chown({str(host)!r}, 1, 1)),
        ("utime", lambda: os.utime({str(host)!r}, (5, 5))), ("own chmod", lambda: os.chmod("mine.txt", 0o777)),
        ("own utime", lambda: os.utime("mine.txt", (5, 5))),
        ("fchmod", lambda: os.fchmod(os.open("mine.txt", os.O_RDONLY), 0o777)),
        ("memfd", lambda: os.memfd_create("note"))]""", work, prologue='open("mine.txt", "w").write("x")\n')
    assert report == dict.fromkeys(("chmod", "chown", "utime", "own chmod", "own utime", "fchmod", "memfd"),
                                   "Operation not permitted"), out.stderr
    after = host.stat()
    assert (after.st_mode, after.st_uid, after.st_mtime_ns) == (before.st_mode, before.st_uid, before.st_mtime_ns)


def test_a_candidate_sees_no_host_process_under_proc(tmp_path: Path) -> None:
    """Landlock rules opening, not looking up: under the host's /proc a candidate saw which of the
    host's pids were alive (91 below 5,000 here), the one that started it among them. The
    sandbox mounts a proc of its own PID namespace, where only its own processes live."""
    import os

    host = sorted({os.getpid(), os.getppid(), *psutil.pids()[-50:]})
    code = textwrap.dedent(f"""
        import json, os
        print(json.dumps([pid for pid in {host!r} + list(range(1, 64)) if os.path.exists(f"/proc/{{pid}}")]))
    """)
    out = run_python(code=code, cwd=tmp_path, wall_s=20)
    seen = json.loads(out.stdout)
    assert set(seen) <= {1, 2, 3}, seen  # the sandbox's init, the candidate (and a thread's id)
    assert os.getpid() not in seen


# -- nothing outlives the parent -------------------------------------------------------------------
HOLDER = textwrap.dedent("""
    import sys, time
    from dream_gym.policy_files import IsolatedPolicy
    from dream_gym.infrastructure.isolation import start_python
    policy = IsolatedPolicy(sys.argv[1], decision_timeout_s=600, episode_timeout_s=600)
    from dream_gym.policy import RunContext
    from dream_gym.replay.session import ReplaySession
    from dream_gym.world.registry import resolve_world
    view = ReplaySession(resolve_world("sd-fixed-s0")).view()
    policy.reset(RunContext.from_view(view))
    import threading
    threading.Thread(target=policy.act, args=(view,), daemon=True).start()  # spins forever
    candidate = start_python(sys.argv[2], wall_s=600)
    print("READY", flush=True)
    time.sleep(600)
""")


def test_every_sandbox_process_dies_with_its_parent(tmp_path: Path) -> None:
    """kill -9 of a process that runs a policy episode and a candidate, both busy: the
    wardens see their lifelines close and end everything they started, at once."""
    spinner = tmp_path / "spin.py"
    spinner.write_text("def act(view):\n    while True:\n        pass\n")
    candidate = tmp_path / "candidate.py"
    candidate.write_text("while True:\n    pass\n")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(spinner), str(candidate)], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "READY"
        # the template forks the next episode after its reply, and the script's sandbox starts
        # in the background: both are awaited, as are the two spinning
        deadline = time.monotonic() + 10
        while True:
            started = psutil.Process(holder.pid).children(recursive=True)
            if time.monotonic() > deadline or (
                    len(started) >= 8 and sum(p.status() == psutil.STATUS_RUNNING for p in started) >= 2):
                break
            time.sleep(0.1)
        assert len(started) == 8  # two wardens, two inits, the template, its episode, the one forked ahead, the script
        assert sum(p.status() == psutil.STATUS_RUNNING for p in started) >= 2
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in started):
        time.sleep(0.05)
    assert [p.pid for p in started if _alive(p)] == []


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("attack", ["os.kill(-1, 9)", "os.killpg(0, 9)", "os.kill(os.getppid(), 9)", "os.kill(1, 9)"])
def test_a_candidate_cannot_signal_anything_but_itself(attack: str) -> None:
    out = run_python(code=f"import os\ntry:\n    {attack}\n    print('SENT')\nexcept OSError as exc:\n    print(exc.strerror)\n",
                     wall_s=20)
    assert out.stdout.strip() == "Operation not permitted", out.stderr


_SECCOMP_PROBE = """
import os, sys
try:
    os.fork()
    print('FORKED')
except OSError as exc:
    print(exc.strerror)
print(sorted(m for m in sys.modules if m in ('pyseccomp', 'subprocess')))
"""


@pytest.mark.parametrize("programs", ["the parent's", "its own"])
def test_a_candidate_is_confined_by_the_parents_program_or_by_its_own(programs: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent compiles the candidate's seccomp program once, so that no candidate imports
    pyseccomp (which runs ldconfig); where the parent cannot, the candidate builds the same
    filter itself, before Landlock."""
    if programs == "its own":
        monkeypatch.setattr(importlib.import_module("dream_gym.infrastructure.sandbox.launch"), "_compiled_filters", dict)
    out = run_python(code=_SECCOMP_PROBE, wall_s=20)
    refused, modules = out.stdout.strip().splitlines()
    assert refused == "Operation not permitted", out.stderr
    assert modules == ("[]" if programs == "the parent's" else "['pyseccomp', 'subprocess']"), modules
