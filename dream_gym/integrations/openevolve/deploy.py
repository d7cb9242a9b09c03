"""``dream-gym deploy --system openevolve``: :func:`run_openevolve` behind the common verb."""

from __future__ import annotations

from dream_gym.integrations.deploy import DeployRequest, DeployResult
from dream_gym.integrations.openevolve.run import BridgeConfig, check_openevolve, run_openevolve


def run(request: DeployRequest) -> DeployResult:
    """One OpenEvolve run: ``budget`` iterations, ``workers`` parallel evaluations."""
    check_openevolve()  # SystemUnavailable before the options are read
    config = BridgeConfig(
        task=request.task, out=request.out, policy=request.policy, workers=request.workers,
        iterations=request.budget, seed=request.seed, model=request.model, api_base=request.api_base,
        beta=request.beta, resume=request.resume, world_id=request.world_id, command=request.command,
        policy_params=dict(request.policy_params), trust_model=request.trust_model, read=tuple(request.read),
        **request.options,
    )
    result = run_openevolve(config)
    return DeployResult(
        system="openevolve", version=result.openevolve, folder=result.folder, nodes=result.nodes,
        invalid=result.invalid, best_score=result.best_score, stopped_by=result.stopped_by, seconds=result.seconds,
        extra={"iterations": result.iterations, "rounds": result.rounds, "failed_iterations": result.failed_iterations,
               "without_program": result.unrecorded_iterations},
    )
