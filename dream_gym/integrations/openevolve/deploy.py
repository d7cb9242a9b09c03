"""``dream-gym deploy --system openevolve``: :func:`run_openevolve` behind the common verb.

System-specific settings (``DeployRequest.options``, ``--option KEY=VALUE``): :data:`OPTIONS`.
"""

from __future__ import annotations

from typing import Any

from dream_gym.integrations.deploy import DeployRequest, DeployResult, system_options
from dream_gym.integrations.openevolve.run import BridgeConfig, check_openevolve, run_openevolve

#: The settings ``--option`` may change, with their defaults (BridgeConfig's).
OPTIONS: dict[str, Any] = {
    "config_path": None,  # an OpenEvolve config.yaml to start from (prompts, database settings)
    "checkpoint_interval": 10,
    "frontier": "any",
    "log_level": "WARNING",  # of OpenEvolve's logger
}


def run(request: DeployRequest) -> DeployResult:
    """One OpenEvolve run: ``budget`` iterations, ``workers`` parallel evaluations."""
    check_openevolve()  # SystemUnavailable before the options are read
    options = system_options("OpenEvolve", request.options, OPTIONS)
    config = BridgeConfig(
        task=request.task, out=request.out, policy=request.policy, workers=request.workers,
        iterations=request.budget, seed=request.seed, model=request.model, api_base=request.api_base,
        beta=request.beta, resume=request.resume, world_id=request.world_id, command=request.command,
        policy_params=dict(request.policy_params), trust_model=request.trust_model, read=tuple(request.read),
        **options,
    )
    result = run_openevolve(config)
    return DeployResult(
        system="openevolve", version=result.openevolve, folder=result.folder, nodes=result.nodes,
        invalid=result.invalid, best_score=result.best_score, stopped_by=result.stopped_by, seconds=result.seconds,
        extra={"iterations": result.iterations, "rounds": result.rounds, "failed_iterations": result.failed_iterations,
               "without_program": result.unrecorded_iterations, **({"resumed": result.resumed} if result.resumed else {})},
    )
