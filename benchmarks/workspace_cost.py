"""What a candidate's size-capped workspace costs: a sandboxed run with and without it.

    .venv/bin/python -m benchmarks.workspace_cost [--runs 40]

Each run is what an evaluation does, minus the task's own work: a working folder holding two
files (a 3 KB program and a 1 KB harness), a sandboxed script that reads the program and writes
a small result file, and that result file handed back. With the cap (the default,
``workspace_mb=64``) the warden mounts a tmpfs over the folder in the sandbox's mount
namespace, copies the two files in, and copies the result back after the script; without it
(``workspace_mb=None``) the script works in the folder itself. The two kinds of run alternate,
so that a change of the machine's load falls on both; the table gives the median and the
quartiles of the wall time from ``start_python`` to the end of ``finish``, in milliseconds.

Part 2 times the steps themselves, each in a fresh forked process as the warden takes them: the
namespaces without and with the mount namespace (``unshare``), and the tmpfs's mount with the
copy of the two files in.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import tempfile
import time
from pathlib import Path

from dream_gym.infrastructure.isolation import DEFAULT_WORKSPACE_MB, WORKSPACE_FILES, start_python
from dream_gym.infrastructure.sandbox import warden

SCRIPT = """
import json
program = open("candidate.py").read()
with open("_result.json", "w") as handle:
    json.dump({"ok": True, "answer": len(program)}, handle)
"""


def one_run(folder: Path, workspace_mb: int | None) -> float:
    (folder / "candidate.py").write_text("# a candidate\n" + "x = 1\n" * 500)
    (folder / "_harness.py").write_text(SCRIPT + "#" * (1024 - len(SCRIPT)))
    (folder / "_result.json").unlink(missing_ok=True)
    started = time.perf_counter()
    child = start_python(folder / "_harness.py", cwd=folder, wall_s=30, workspace_mb=workspace_mb,
                         outputs={"_result.json": 1 << 18})
    outcome = child.finish()
    elapsed = time.perf_counter() - started
    if not outcome.ok or not (folder / "_result.json").is_file():
        raise RuntimeError(f"the run failed: {outcome.describe()} {outcome.stderr[-500:]}")
    return elapsed * 1000


NAMESPACES = (warden._CLONE_NEWUSER | warden._CLONE_NEWPID | warden._CLONE_NEWNET | warden._CLONE_NEWIPC
              | warden._CLONE_NEWUTS)


def step_in_a_fork(folder: Path, mount: bool, flags: int) -> float:
    """Microseconds a fresh process takes to ``unshare(flags)`` (and, with ``mount``, to mount
    the tmpfs over ``folder`` and copy its files in), measured in that process."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        libc = ctypes.CDLL(None, use_errno=True)
        uid, gid = os.getuid(), os.getgid()  # before the user namespace, which has no map yet
        started = time.perf_counter()
        ok = libc.unshare(flags) == 0
        if ok and mount:
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{name}", "w") as handle:
                    handle.write(text)
            started = time.perf_counter()  # the id map is written either way: time the mount and copies
            workspace = warden.Workspace({"path": str(folder), "size_mb": DEFAULT_WORKSPACE_MB,
                                          "inodes": WORKSPACE_FILES})
            ok = workspace.prepare(True).startswith("workspace tmpfs")
        os.write(write_end, str((time.perf_counter() - started) * 1e6 if ok else -1).encode())
        os._exit(0)
    os.close(write_end)
    value = float(os.read(read_end, 64))
    os.close(read_end)
    os.waitpid(pid, 0)
    if value < 0:
        raise RuntimeError("the kernel refused the namespaces or the mount")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"without the cap": [], f"tmpfs of {DEFAULT_WORKSPACE_MB} MB": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for kind in times:  # one of each first: the interpreter's and the kernel's caches warm up
            one_run(folder, None if kind == "without the cap" else DEFAULT_WORKSPACE_MB)
        for _ in range(args.runs):
            for kind, runs in times.items():
                runs.append(one_run(folder, None if kind == "without the cap" else DEFAULT_WORKSPACE_MB))
    print(f"{'workspace':<22} {'median ms':>10} {'q1':>8} {'q3':>8}  ({args.runs} runs each, alternating)")
    for kind, runs in times.items():
        q1, median, q3 = statistics.quantiles(runs, n=4)
        print(f"{kind:<22} {median:>10.1f} {q1:>8.1f} {q3:>8.1f}")
    base, capped = (statistics.median(runs) for runs in times.values())
    print(f"difference of the medians: {capped - base:+.1f} ms ({capped / base:.3f}x)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "candidate.py").write_text("x = 1\n" * 500)
        (folder / "_harness.py").write_text("#" * 1024)
        steps = {"unshare, no mount namespace": (False, NAMESPACES),
                 "unshare with the mount namespace": (False, NAMESPACES | warden._CLONE_NEWNS),
                 "mount the tmpfs, copy 2 files in": (True, NAMESPACES | warden._CLONE_NEWNS)}
        print(f"\n{'step':<34} {'median us':>10}  ({args.runs} forks each)")
        for name, (mount, flags) in steps.items():
            print(f"{name:<34} {statistics.median(step_in_a_fork(folder, mount, flags) for _ in range(args.runs)):>10.0f}")


if __name__ == "__main__":
    main()
