"""A fidelity study's settings: :class:`FidelityConfig`, its recorders (runs or pools of runs), its identity.

Running a study (:mod:`dream_gym.fidelity.study`: it checks the settings, records their identity
in the folder's ``study.json`` and makes the online runs) and analysing it
(:mod:`dream_gym.fidelity.analysis`) both read the settings from here. A recorder is a policy
spec, ``native`` (the system's own selection), or a pool of the study's runs: ``pool:A+B``, or
``pool:all`` (every policy's run). The identity is what every run of a study shares: a study
folder holds runs of one identity only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dream_gym.integrations.deploy import SYSTEMS as DEPLOYED
from dream_gym.replay.settings import DEFAULT_BETA

STUDY_FORMAT = "dream-gym-fidelity/1"
POOL_PREFIX = "pool:"  # a recorder pooling runs: pool:A+B, or pool:all (every policy's run)
POOL_ALL = "all"
# grow's rule is the study's; a system may continue any program it holds, and its bridge records
# the run under the rule "any"
DEFAULT_FRONTIER = {"grow": "leaves", **dict.fromkeys(DEPLOYED, "any")}


@dataclass
class FidelityConfig:
    """One study (see :mod:`dream_gym.fidelity.study`). ``task``: a built-in task, or for a system
    ``initial_program.py,evaluator.py``; ``recorders`` default to the policies themselves."""

    task: str
    policies: Sequence[str]
    seeds: Sequence[int]
    iterations: int
    workers: int
    out: Path
    recorders: Sequence[str] = ()
    system: str = "grow"
    beta: float = DEFAULT_BETA
    frontier: str | None = None  # grow's rule ("leaves" by default); a system's is "any"
    backend: str = "process"
    jobs: int | None = None  # online runs at a time (default: the CPUs over W)
    requests: bool = False  # replay in request mode (docs/concepts/coverage.md)
    bootstrap: int = 2000

    @property
    def recorder_list(self) -> list[str]:
        return list(dict.fromkeys(self.recorders or self.policies))

    @property
    def run_recorders(self) -> list[str]:
        """The recorders that are runs of their own (not pools of runs)."""
        return [r for r in self.recorder_list if not is_pool(r)]

    def pool_members(self, recorder: str) -> list[str]:
        """The runs a pool recorder merges, in order (``pool:all``: every policy's, as given)."""
        named = recorder[len(POOL_PREFIX):]
        return list(self.policies) if named == POOL_ALL else [m.strip() for m in named.split("+")]

    @property
    def rule(self) -> str:
        return self.frontier or DEFAULT_FRONTIER[self.system]

    def runs(self) -> list[tuple[str, int]]:
        """Every (policy spec, seed) run the study needs: the policies', then the other recorders'."""
        specs = list(dict.fromkeys([*self.policies, *self.run_recorders]))
        return [(spec, seed) for spec in specs for seed in self.seeds]


def is_pool(recorder: str) -> bool:
    """Whether a recorder spec names a pool of runs (``pool:A+B``, ``pool:all``)."""
    return recorder.startswith(POOL_PREFIX)


def _task_identity(task: str) -> dict[str, Any]:
    """The task as the runs depend on it: a built-in's name, or each file's sha256."""
    if "," not in task:
        return {"name": task}
    paths = [Path(p.strip()).resolve() for p in task.split(",", 1)]
    return {"files": {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}}


def study_identity(config: FidelityConfig) -> dict[str, Any]:
    """What every run of a study shares; a study folder holds runs of one identity only."""
    return {"format": STUDY_FORMAT, "task": _task_identity(config.task), "system": config.system,
            "iterations": config.iterations, "workers": config.workers, "beta": config.beta,
            "frontier": config.rule}


__all__ = ["DEFAULT_FRONTIER", "POOL_ALL", "POOL_PREFIX", "STUDY_FORMAT", "FidelityConfig", "is_pool", "study_identity"]
