"""The online runs of a fidelity study: one world folder per (policy, seed), run as jobs.

Each run is the user's own command in a process of its own: ``dream-gym grow`` (the project's
loop) or ``dream-gym deploy --system S`` (OpenEvolve, ShinkaEvolve or SkyDiscover through its
bridge, with the agent server), its output in ``logs/``. A run is a job of the backends evaluation uses
(:class:`~dream_gym.infrastructure.jobs.JobPool`'s local job processes, Ray, or this process one run at a time),
so a study scales out like ``dream-gym eval``; the command starts in a process that dies with
the job that started it (``PR_SET_PDEATHSIG``, asked for by the child itself: no Python runs
between fork and exec), so ``kill -9`` of the study leaves no run behind.

Finished runs are written to the study's journal (``runs.jsonl``, one fsynced line each); a run
folder that holds a world but is not in the journal was cut short and is continued with
``--resume``; one that holds no world yet is started again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.jobs import JobPool, TaskFailure
from dream_gym.infrastructure.printable import printable
from dream_gym.integrations.deploy import SYSTEMS as DEPLOYED
from dream_gym.world.files import NODES_FILE, WORLD_FILE, is_finished, node_file

SYSTEMS = ("grow", *DEPLOYED)  # dream-gym grow, or a system dream-gym deploy runs
BACKENDS = ("process", "ray", "serial")
NATIVE = "native"  # a system's own parent selection: a recorder, never replayed
JOURNAL = "runs.jsonl"
LOG_TAIL_CHARS = 1500  # of a failed run's output, quoted in its error

# Started as ``python -c BOOT <owner pid> <dream-gym arguments>``: the child asks to be killed
# when its parent dies (and exits if the parent is already gone), then runs the CLI.
BOOT = (
    "import ctypes, os, runpy, signal, sys\n"
    "owner = int(sys.argv[1])\n"
    "if sys.platform.startswith('linux'):\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)\n"
    "    if os.getppid() != owner:\n"
    "        sys.exit(1)\n"
    "sys.argv = ['dream-gym', *sys.argv[2:]]\n"
    "runpy.run_module('dream_gym', run_name='__main__', alter_sys=True)\n"
)


@dataclass(frozen=True)
class RunSpec:
    """One online run: ``policy`` (a spec, or ``native``) on ``seed``, written to ``folder``."""

    policy: str
    seed: int
    folder: str
    log: str
    argv: tuple[str, ...]  # the dream-gym command, without --resume

    def command(self, resume: bool) -> list[str]:
        return [*self.argv, "--resume"] if resume else list(self.argv)


def slug(spec: str) -> str:
    """A folder name for a policy spec: a built-in name as it is, anything else its file or
    module name and a short hash of the whole spec (two files of one name stay apart)."""
    if re.fullmatch(r"[A-Za-z0-9_-]+", spec):
        return spec
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", Path(spec.split(":")[0]).stem or "policy").strip("_")[:40] or "policy"
    return f"{stem}-{hashlib.sha256(spec.encode()).hexdigest()[:8]}"


def run_folder(out: Path, policy: str, seed: int) -> Path:
    """The world folder of the run of ``policy`` on ``seed`` in the study folder ``out``."""
    return Path(out) / "runs" / slug(policy) / f"s{seed}"


def run_specs(task: str, system: str, runs: Sequence[tuple[str, int]], *, out: Path, iterations: int,
              workers: int, beta: float, frontier: str) -> list[RunSpec]:
    """The command of every (policy, seed) run."""
    specs = []
    for policy, seed in runs:
        folder = run_folder(out, policy, seed)
        log = out / "logs" / f"{slug(policy)}-s{seed}.log"
        common = ["--task", task, "--policy", policy, "-W", str(workers), "--seed", str(seed), "--beta", f"{beta:g}",
                  "--out", str(folder)]
        if system == "grow":
            argv = ["grow", *common, "--rounds", str(iterations), "--max-attempts", str(iterations),
                    "--frontier", frontier, "--quiet"]
        else:
            argv = ["deploy", "--system", system, *common, "--budget", str(iterations)]
        specs.append(RunSpec(policy, seed, str(folder), str(log), tuple(argv)))
    return specs


def run_online(spec: RunSpec, beat: Callable[..., None] | None = None) -> dict[str, Any]:
    """Run (or continue) one online run; its summary. RuntimeError with the end of its output
    when the command fails. A job of the pool (``beat`` is not needed: no task timeout)."""
    folder = Path(spec.folder)
    started = time.time()
    resume = (folder / NODES_FILE).exists() or (folder / (NODES_FILE + ".gz")).exists()
    if not resume and folder.exists():  # started, killed before its first node: nothing to continue
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    log = Path(spec.log)
    log.parent.mkdir(parents=True, exist_ok=True)
    if not is_finished(folder):
        with open(log, "ab") as output:
            output.write(f"$ dream-gym {' '.join(spec.command(resume))}\n".encode())
            output.flush()
            done = subprocess.run([sys.executable, "-c", BOOT, str(os.getpid()), *spec.command(resume)],
                                  stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, check=False)
        if done.returncode != 0:
            tail = log.read_text(encoding="utf-8", errors="replace")[-LOG_TAIL_CHARS:]
            raise RuntimeError(f"the run of {spec.policy} on seed {spec.seed} failed (exit {done.returncode}; "
                               f"its output: {spec.log}): {tail.strip()}")
    return {"policy": spec.policy, "seed": spec.seed, "folder": spec.folder, "resumed": resume,
            "seconds": round(time.time() - started, 3), "sha256": _world_digest(folder)}


def _world_digest(folder: Path) -> str | None:
    try:
        meta = json.loads((folder / WORLD_FILE).read_text(encoding="utf-8"))
        node_file(folder)
    except (OSError, ValueError):
        return None
    digest = meta.get("sha256")
    return digest if isinstance(digest, str) else None


def execute(specs: Sequence[RunSpec], *, backend: str, jobs: int, workers: int
            ) -> Iterator[tuple[RunSpec, dict[str, Any] | str]]:
    """Run ``specs`` on ``backend`` (``jobs`` at a time); yield each with its summary, or the
    error that stopped it (a string), as runs finish."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if not specs:
        return
    if backend == "serial":
        for spec in specs:
            yield spec, _outcome(run_online, spec)
    elif backend == "process":
        with JobPool(run_online, max(1, jobs), task_timeout=None) as pool:
            for index, outcome in pool.run(list(specs)):
                yield specs[index], _failure_text(outcome) if isinstance(outcome, TaskFailure) else outcome
    else:
        yield from _ray(specs, jobs, workers)


def _outcome(function: Callable[[RunSpec], dict[str, Any]], spec: RunSpec) -> dict[str, Any] | str:
    try:
        return function(spec)
    except RuntimeError as exc:  # a run that failed, in run_online's words
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - the run's failure, reported with the others
        return f"{type(exc).__name__}: {exc}"


def _failure_text(failure: TaskFailure) -> str:
    message = failure.message.split("\nTraceback")[0]
    message = message.removeprefix("RuntimeError: ")  # a failed run, in run_online's words (as _outcome gives it)
    return printable(message, LOG_TAIL_CHARS + 400, lines=True)


def _ray(specs: Sequence[RunSpec], jobs: int, workers: int) -> Iterator[tuple[RunSpec, dict[str, Any] | str]]:
    """Each run a Ray task of W CPUs (on a cluster, the study folder must be on a shared file
    system); ``ray.init()`` joins the cluster ``RAY_ADDRESS`` names, else starts a local one."""
    import ray

    if not ray.is_initialized():
        ray.init(**({} if os.environ.get("RAY_ADDRESS") else {"num_cpus": max(jobs * workers, workers)}),
                 include_dashboard=False, log_to_driver=False)
    remote = ray.remote(num_cpus=workers)(_outcome)
    pending = {remote.remote(run_online, spec): spec for spec in specs}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        spec = pending.pop(done[0])
        try:
            yield spec, ray.get(done[0])
        except Exception as exc:  # noqa: BLE001 - Ray's own failure of the task (a lost node)
            yield spec, f"{type(exc).__name__}: {exc}"


# -- the journal -------------------------------------------------------------------------------
def read_journal(out: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """The finished runs the journal holds, by (policy, seed); a torn last line is skipped."""
    from dream_gym.infrastructure.durable import read_jsonl

    return {(str(row["policy"]), int(row["seed"])): row for row in read_jsonl(out / JOURNAL)}


def journal_run(out: Path, summary: dict[str, Any]) -> None:
    """Append one finished run to the journal, durably (flush + fsync) before returning."""
    path = out / JOURNAL
    if path.exists():
        raw = path.read_bytes()
        if raw and not raw.endswith(b"\n"):  # a line torn by a kill: cut it before appending
            with open(path, "r+b") as torn:
                torn.truncate(raw.rfind(b"\n") + 1)
    with open(path, "ab") as handle:
        handle.write((json.dumps(summary, sort_keys=True) + "\n").encode())
        handle.flush()
        os.fsync(handle.fileno())


__all__ = ["BACKENDS", "JOURNAL", "NATIVE", "SYSTEMS", "RunSpec", "execute", "journal_run", "read_journal",
           "run_folder", "run_online", "run_specs", "slug"]
