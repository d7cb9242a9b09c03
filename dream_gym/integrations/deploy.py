"""One verb for every discovery system: run it with a dream_gym policy choosing the parents.

``deploy(DeployRequest(system=..., task=..., policy=..., workers=W, budget=N, seed=S, out=DIR))``
(``dream-gym deploy``) runs the named system's own loop with the parents chosen by any policy
``dream-gym eval`` takes (or ``native``: the system's own selection), records the run as a world
folder as it goes (crash-safe, locked, resumable) and returns what happened. Each system's
bridge lives in its own package and is imported only when asked for (:data:`SYSTEMS`); without
``model`` the children come from dream_gym's no-LLM agent behind a local agent server.

A bridge is a function ``run(request: DeployRequest) -> DeployResult``; it raises
:class:`SystemUnavailable` when the system is not installed, is of an unsupported version, or
lacks the hook a policy needs (naming the hook).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.replay.settings import DEFAULT_BETA
from dream_gym.world.tree import MAX_WORKERS

NATIVE_POLICY = "native"  # the system's own parent selection, recorded

#: Each system's bridge, ``module:function``, imported when that system is asked for.
SYSTEMS: dict[str, str] = {
    "openevolve": "dream_gym.integrations.openevolve.deploy:run",
    "shinkaevolve": "dream_gym.integrations.shinkaevolve.deploy:run",
    "skydiscover": "dream_gym.integrations.skydiscover.deploy:run",
}


#: Each system's check of the installed version (``module:function``, returning the version).
VERSION_CHECKS: dict[str, str] = {
    "openevolve": "dream_gym.integrations.openevolve.run:check_openevolve",
    "shinkaevolve": "dream_gym.integrations.shinkaevolve.deploy:check_shinka",
    "skydiscover": "dream_gym.integrations.skydiscover.run:check_skydiscover",
}

#: The systems' words for a run that spent its budget (OpenEvolve and SkyDiscover count iterations).
SPENT_BUDGET = {"iterations": "budget"}


#: The log levels a system's ``--option log_level`` takes (Python's logging names).
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def system_options(system: str, options: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``defaults`` with ``options`` (``--option KEY=VALUE``) over them, checked before a run
    starts: a key ``defaults`` lacks is a ValueError listing the system's options and their
    defaults; where ``defaults`` has them, the options the systems share are checked too
    (``config_path`` an existing file, returned as a Path or None, ``checkpoint_interval`` a
    whole number >= 1, ``frontier`` a reveal rule, ``log_level`` one of :data:`LOG_LEVELS`)."""
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        said = {k: "the system's own" if v is None else repr(v) for k, v in defaults.items()}  # None: not set here
        raise ValueError(f"unknown {system} option(s) {', '.join(unknown)}; the options are "
                         f"{', '.join(f'{k} (default {v})' for k, v in said.items())}")
    values = {**defaults, **options}
    if "config_path" in values:
        given = values["config_path"]
        values["config_path"] = None if given in (None, "") else Path(str(given))
        if values["config_path"] is not None and not values["config_path"].is_file():
            raise FileNotFoundError(f"--option config_path={given}: no such file")
    interval = values.get("checkpoint_interval", 1)
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
        raise ValueError(f"--option checkpoint_interval={interval!r}: a whole number >= 1")
    from dream_gym.world.tree import FRONTIER_RULES

    if "frontier" in values and values["frontier"] not in FRONTIER_RULES:
        raise ValueError(f"--option frontier={values['frontier']!r}: one of {', '.join(FRONTIER_RULES)}")
    if "log_level" in values and values["log_level"] not in LOG_LEVELS:
        raise ValueError(f"--option log_level={values['log_level']!r}: one of {', '.join(LOG_LEVELS)}")
    return values


class SystemUnavailable(RuntimeError):
    """The system cannot run here: not installed, an unsupported version, or a missing hook."""


@dataclass
class DeployRequest:
    """One run. ``task`` is a built-in task name or ``initial_program.py,evaluator.py``."""

    system: str
    task: str
    out: Path
    policy: str = NATIVE_POLICY
    workers: int = 2  # W: the system's parallel evaluations, and the most selections per round
    budget: int = 20  # programs to propose (SkyDiscover native: iterations, whose retries add programs)
    seed: int = 0
    model: str | None = None  # an OpenAI-compatible model; None: the built-in agent server
    api_base: str | None = None
    beta: float = DEFAULT_BETA
    resume: bool = False
    world_id: str | None = None
    command: str | None = None
    policy_params: dict[str, Any] = field(default_factory=dict)
    trust_model: bool = False
    options: dict[str, Any] = field(default_factory=dict)  # system-specific settings
    read: tuple[Path, ...] = ()  # folders a task given as files may read besides its evaluator's


@dataclass
class DeployResult:
    """What one run did: the world folder and its counts."""

    system: str
    version: str  # the system's installed version
    folder: Path
    nodes: int
    invalid: int
    best_score: float | None
    stopped_by: str  # budget, policy, error, or the system's own stop (OpenEvolve's early_stopping)
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        data = asdict(self)
        data["folder"] = str(self.folder)
        return data


def bridge(system: str) -> Callable[[DeployRequest], DeployResult]:
    """The run function of ``system``; ValueError naming the systems for an unknown one."""
    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; one of {', '.join(sorted(SYSTEMS))}")
    module, _, name = SYSTEMS[system].partition(":")
    function: Callable[[DeployRequest], DeployResult] = getattr(importlib.import_module(module), name)
    return function


def check_system(system: str) -> str:
    """The installed version of ``system``; :class:`SystemUnavailable` when it is missing or of an
    unsupported version (before a run starts: a study checks it before it runs anything)."""
    module, _, name = VERSION_CHECKS[system].partition(":")
    version: str = getattr(importlib.import_module(module), name)()
    return version


def deploy(request: DeployRequest) -> DeployResult:
    """Run ``request.system`` with ``request.policy`` choosing the parents (see the module docstring)."""
    if not 1 <= request.workers <= MAX_WORKERS:  # before the run's folder: a world holds no more
        raise ValueError(f"workers (W) must be from 1 to {MAX_WORKERS}, got {request.workers}")
    if request.budget < 1:
        raise ValueError(f"budget must be >= 1, got {request.budget}")
    from dream_gym.integrations.files_task import checked_read

    request.read = checked_read(request.task, request.read)
    result = bridge(request.system)(request)
    # one word for "the run spent --budget", whatever the system counts it in (its own word stays
    # in the world's run_summary.json)
    result.stopped_by = SPENT_BUDGET.get(result.stopped_by, result.stopped_by)
    return result


__all__ = ["LOG_LEVELS", "NATIVE_POLICY", "SYSTEMS", "VERSION_CHECKS", "DeployRequest", "DeployResult",
           "SystemUnavailable", "bridge", "check_system", "deploy", "system_options"]
