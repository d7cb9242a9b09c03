"""``dream-gym deploy --system skydiscover``: :func:`.run.run_skydiscover` behind the common verb."""

from __future__ import annotations

from dream_gym.integrations.deploy import DeployRequest, DeployResult
from dream_gym.integrations.skydiscover.run import run_skydiscover


def run(request: DeployRequest) -> DeployResult:
    """One SkyDiscover run: ``budget`` iterations, ``workers`` parallel evaluations, the search
    (backend) and other settings in ``request.options`` (:data:`.run.OPTIONS`)."""
    return run_skydiscover(request)
