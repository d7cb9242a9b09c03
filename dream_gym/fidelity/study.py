"""A fidelity study: how well does replay rank policies against the runs it stands for?

``dream-gym fidelity`` (:func:`run_study`) runs every policy online on every seed (``dream-gym
grow``, or a discovery system through ``dream-gym deploy``), each run recorded as a world; takes the worlds of
each *recorder* (a policy whose runs are replayed on: any policy spec, or ``native``, the
system's own selection; a recorder among the policies reuses their runs; a pool, ``pool:A+B`` or
``pool:all``, merges the study's runs of a seed); and analyses the study
(:mod:`dream_gym.fidelity.analysis`): every policy replayed on every recorder's world of the
same seed, and per recorder the policies' ranking by mean replay V compared with their ranking
online, beside how far the online runs agree with themselves.

This module checks the study's settings (:class:`FidelityConfig`, from
:mod:`dream_gym.fidelity.config`), claims its folder and makes the online runs; the names of the
settings and of the analysis are importable from here too.

The study folder ``out`` holds ``study.json`` (the settings every run shares: the same command
must give the same ones), ``runs/<policy>/s<seed>/`` (one world each), ``logs/``,
``runs.jsonl`` (the journal of finished runs), and once analysed ``fidelity.json`` and
``fidelity.txt`` (the table). The study holds the folder's lock; killed, the same command
continues (finished runs kept, a cut run resumed).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dream_gym.fidelity.analysis import (
    BOOTSTRAP_SEED,
    OUTCOMES,
    POOLED,
    analyse,
    config_from_report,
    pool_folder,
    pool_world,
)
from dream_gym.fidelity.config import (
    DEFAULT_FRONTIER,
    POOL_ALL,
    POOL_PREFIX,
    STUDY_FORMAT,
    FidelityConfig,
    is_pool,
    study_identity,
)
from dream_gym.fidelity.runs import (
    BACKENDS,
    NATIVE,
    SYSTEMS,
    RunSpec,
    execute,
    journal_run,
    read_journal,
    run_specs,
)
from dream_gym.infrastructure.seeds import check_seed

STUDY_FILE = "study.json"
REPORT_FILE = "fidelity.json"
TABLE_FILE = "fidelity.txt"


@dataclass
class Progress:
    """What :func:`run_study` reports as it goes (for a command's log lines)."""

    on_run: Callable[[RunSpec, dict[str, Any] | str, int, int], None] | None = None
    on_phase: Callable[[str], None] | None = None

    def phase(self, text: str) -> None:
        if self.on_phase is not None:
            self.on_phase(text)


def check_config(config: FidelityConfig) -> None:
    """Every setting checked before anything runs; ValueError (or LookupError) naming the problem."""
    if config.system not in SYSTEMS:
        raise ValueError(f"--system must be one of {', '.join(SYSTEMS)}, got {config.system!r}")
    if config.backend not in BACKENDS:
        raise ValueError(f"--backend must be one of {', '.join(BACKENDS)}, got {config.backend!r}")
    if not config.policies:
        raise ValueError("give at least one --policy to compare")
    if len(set(config.policies)) != len(config.policies):
        raise ValueError(f"a --policy repeats: {list(config.policies)}")
    if not config.seeds or len(set(config.seeds)) != len(config.seeds):
        raise ValueError(f"--seeds must name distinct seeds, got {list(config.seeds)}")
    for seed in config.seeds:  # each is a run's --seed
        check_seed(seed, "--seeds: each seed")
    if config.iterations < 1 or config.workers < 1:
        raise ValueError("--iterations and -W must be at least 1")
    if not 0.0 <= config.beta <= 1.0:
        raise ValueError(f"--beta must be in [0, 1], got {config.beta}")
    if config.jobs is not None and config.jobs < 1:
        raise ValueError(f"-j must be at least 1, got {config.jobs}")
    if config.bootstrap < 1:
        raise ValueError(f"--bootstrap must be at least 1, got {config.bootstrap}")
    if config.frontier not in (None, "leaves", "any"):
        raise ValueError(f"--frontier must be 'leaves' or 'any', got {config.frontier!r}")
    if config.system != "grow" and config.rule != "any":
        raise ValueError(f"{config.system} may continue any program it holds: its runs are recorded under the "
                         "frontier rule 'any' (leave --frontier out)")
    if NATIVE in config.policies:
        raise ValueError(f"'{NATIVE}' is the system's own parent selection: it has no policy to replay; give it "
                         "as --recorder to replay the policies on its runs")
    if config.system == "grow" and NATIVE in config.recorder_list:
        raise ValueError(f"dream-gym grow has no selection of its own: '{NATIVE}' is a recorder of a --system "
                         f"({', '.join(SYSTEMS[1:])})")
    _check_pools(config)
    _check_task(config)
    if len(config.policies) < 2:  # its online runs would be spent on a table of n/a
        raise ValueError(f"one --policy ({config.policies[0]}) has no ranking to compare: a study ranks two or "
                         "more policies, by replay and online (give --policy again)")
    from dream_gym.policy_files import check_policy_spec

    for spec in config.runs():
        if spec[0] != NATIVE:
            check_policy_spec(spec[0])


def _check_pools(config: FidelityConfig) -> None:
    """A pool merges two or more distinct runs the study makes (its policies' or its recorders')."""
    runs = [*config.policies, *config.run_recorders]
    for recorder in config.recorder_list:
        if not is_pool(recorder):
            continue
        members = config.pool_members(recorder)
        unknown = [m for m in members if m not in runs]
        if unknown:
            raise ValueError(f"--recorder {recorder}: {', '.join(unknown)} is not a --policy or --recorder of the "
                             f"study (a pool merges the study's own runs: pool:A+B, or pool:{POOL_ALL})")
        if len(members) < 2 or len(set(members)) != len(members):
            raise ValueError(f"--recorder {recorder}: a pool merges two or more distinct runs")


def _check_task(config: FidelityConfig) -> None:
    if config.system != "grow":
        from dream_gym.integrations.deploy import check_system

        check_system(config.system)  # SystemUnavailable: not installed, or an unsupported version
    if "," in config.task:
        if config.system == "grow":
            raise ValueError("dream-gym grow runs built-in tasks only; a task given as initial_program.py,"
                             f"evaluator.py runs with a --system ({', '.join(SYSTEMS[1:])})")
        for path in (p.strip() for p in config.task.split(",", 1)):
            if not Path(path).is_file():
                raise FileNotFoundError(f"--task {config.task}: {path} does not exist")
        return
    from dream_gym.online.tasks import get_task

    get_task(config.task)  # KeyError listing the tasks


def _claim_folder(config: FidelityConfig) -> None:
    """Write study.json, or check that the folder's is this study's (the same command continues)."""
    import json

    from dream_gym.infrastructure.durable import write_json_atomic

    out = Path(config.out)
    mine = study_identity(config)
    path = out / STUDY_FILE
    if path.is_file():
        theirs = json.loads(path.read_text(encoding="utf-8"))
        different = [f"{key} {theirs.get(key)!r} there, {mine[key]!r} here" for key in mine if theirs.get(key) != mine[key]]
        if different:
            raise ValueError(f"{out} holds a study of other settings ({'; '.join(different)}): give another --out, "
                             "or the settings it was started with")
        return
    others = [p.name for p in out.iterdir() if p.name not in (".lock",)] if out.is_dir() else []
    if others:
        raise FileExistsError(f"{out} is not empty and holds no {STUDY_FILE}: not a fidelity study's folder; "
                              "give a new or empty --out")
    write_json_atomic(path, mine)


def run_study(config: FidelityConfig, progress: Progress | None = None) -> dict[str, Any]:
    """Run what the study still lacks, analyse it, write ``fidelity.json`` and ``fidelity.txt``;
    the report. RuntimeError naming every run that failed (the others are kept)."""
    from dream_gym.fidelity.table import render
    from dream_gym.infrastructure.durable import write_atomic, write_json_atomic
    from dream_gym.infrastructure.locks import folder_lock

    check_config(config)
    progress = progress or Progress()
    out = Path(config.out)
    with folder_lock(out):  # a second study of the same folder is refused naming this one
        _claim_folder(config)
        _online(config, progress)
        progress.phase("replaying every policy on every recorded world")
        report = analyse(config)
        write_json_atomic(out / REPORT_FILE, report)
        write_atomic(out / TABLE_FILE, render(report, width=80) + "\n")
    return report


def _online(config: FidelityConfig, progress: Progress) -> None:
    out = Path(config.out)
    specs = run_specs(config.task, config.system, config.runs(), out=out, iterations=config.iterations,
                      workers=config.workers, beta=config.beta, frontier=config.rule)
    finished = read_journal(out)
    pending = [spec for spec in specs if (spec.policy, spec.seed) not in finished]
    jobs = config.jobs or max(1, (os.cpu_count() or 1) // config.workers)
    progress.phase(f"{len(specs) - len(pending)} of {len(specs)} online runs done; running {len(pending)} "
                   f"({config.backend}, {min(jobs, max(1, len(pending)))} at a time)")
    failures: list[str] = []
    handled = len(specs) - len(pending)  # runs done before and runs that ended here, failed ones too
    for spec, outcome in execute(pending, backend=config.backend, jobs=jobs, workers=config.workers):
        handled += 1
        if isinstance(outcome, dict):
            journal_run(out, outcome)
        else:
            failures.append(outcome)
        if progress.on_run is not None:
            progress.on_run(spec, outcome, handled, len(specs))
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(pending)} online runs failed; the finished ones are kept, so "
                           f"the same command continues once the cause is fixed. First: {failures[0]}")


# The settings and the analysis have modules of their own; the study's docs (this module's
# docstring) name them here, where users import them from.
__all__ = ["BOOTSTRAP_SEED", "DEFAULT_FRONTIER", "OUTCOMES", "POOLED", "POOL_ALL", "POOL_PREFIX", "REPORT_FILE",
           "STUDY_FILE", "STUDY_FORMAT", "TABLE_FILE", "FidelityConfig", "Progress", "analyse", "check_config",
           "config_from_report", "is_pool", "pool_folder", "pool_world", "run_study", "study_identity"]
