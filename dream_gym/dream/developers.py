"""The policy developers by name: what ``--developer NAME`` builds.

:data:`DEVELOPERS` maps a name to the factory of its developer; a name it does not list is a
litellm model string, built by :data:`MODEL_DEVELOPER` (the LLM developer). Every factory is
called as ``factory(spec, folder, api_base=..., seed=..., **options)``, ``folder`` being the run
folder (where the LLM developer keeps its call journal).

Adding a developer: a module that implements :class:`~dream_gym.dream.developer.Developer` and
defines such a factory, and one line in :data:`DEVELOPERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dream_gym.dream import builtin_developer, llm_developer
from dream_gym.dream.developer import Developer

DeveloperFactory = Callable[..., Developer]

DEVELOPERS: dict[str, DeveloperFactory] = {
    "builtin": builtin_developer.build,
}
MODEL_DEVELOPER: DeveloperFactory = llm_developer.build


def make_developer(spec: str, folder: Any = None, *, api_base: str | None = None, seed: int = 0,
                   **options: Any) -> Developer:
    """The developer ``spec`` names: a name of :data:`DEVELOPERS`, else a litellm model string."""
    factory = DEVELOPERS.get(spec, MODEL_DEVELOPER)
    return factory(spec, folder, api_base=api_base, seed=seed, **options)


def check_developer(spec: str, api_base: str | None = None) -> None:
    """RuntimeError naming the extra when the developer ``spec`` names needs a package that is not
    installed, ValueError for a model string no provider serves or no call can reach (its key
    unset, ``api_base`` unreachable): checked before a run folder is made."""
    if spec == "builtin":
        builtin_developer.require_optuna()
    elif spec not in DEVELOPERS:
        from dream_gym.infrastructure.llm import check_access, check_model_name, require_litellm

        require_litellm()
        check_model_name(spec)
        check_access(spec, api_base)


def say_retries(developer: Developer, say: Callable[[str], None]) -> None:
    """Have an LLM developer say each retry of its calls as it happens (``say`` takes one line): a
    call that times out three times is 15 minutes in which nothing else is said."""
    client = getattr(developer, "client", None)
    if client is not None and hasattr(client, "on_retry"):
        client.on_retry = say


def check_api_base_used(api_base: str | None, *models: str | None) -> None:
    """ValueError when ``--api-base`` is given and nothing of the run calls an LLM (``models``: the
    developer's and the agent's specs, ``builtin`` or None for none): the URL would be ignored."""
    if api_base and all(model in (None, *DEVELOPERS) for model in models):
        raise ValueError(f"--api-base {api_base}: nothing in this run calls an LLM (the built-in developer and "
                         "agent call none); give --developer MODEL, or leave --api-base out")


__all__ = ["DEVELOPERS", "MODEL_DEVELOPER", "DeveloperFactory", "check_api_base_used", "check_developer",
           "make_developer", "say_retries"]
