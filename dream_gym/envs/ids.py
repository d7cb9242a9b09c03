"""The Gymnasium ids of dream_gym, registered by ``import dream_gym``.

* ``DreamGym/Replay-v1``: :class:`dream_gym.envs.env.ReplayEnv` on any world (``world=``), with its
  vector env (:class:`dream_gym.envs.vector_env.ReplayVectorEnv`); ``DreamGym/Replay-v0`` is an alias
  that Gymnasium reports as out of date;
* ``DreamGym/<world>-v1``: one per shipped world, its dataset reference in the kwargs (and the
  old ids ``DreamGym/<world>-v<dataset version>``);
* the RL training envs of :data:`TRAINING_ENVS` on the pool the shipped models were trained on.

Entry points are strings: registering imports no env, and ``gym.make`` imports only the one it
makes (Gymnasium's plugin convention, the one place a lower module names an upper one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from dream_gym.world.registry import shipped_datasets, shipped_env_ids, shipped_world_names

# The behaviour version of ReplayEnv: the N of "DreamGym/Replay-vN" and "DreamGym/<world>-vN".
# The dataset a world comes from has its own version, in the world reference of the id's kwargs.
ENV_VERSION = 1


def shipped_world_ids() -> dict[str, str]:
    """``DreamGym/<world>-v1`` -> the full dataset reference ``<dataset id>/<world>``, for every
    world of every shipped dataset (world names are unique across them; the default dataset wins)."""
    ids: dict[str, str] = {}
    for dataset_id in shipped_datasets():
        for name in shipped_world_names(dataset_id):
            ids.setdefault(f"DreamGym/{name}-v{ENV_VERSION}", f"{dataset_id}/{name}")
    return ids


# The RL training envs (dream_gym.training.gym_envs): id -> factory. Their default kwargs are the pool
# the shipped models were trained on, written out in full so that ``env.spec`` names it.
TRAINING_ENVS = {
    "DreamGym/Macro-v0": "dream_gym.training.gym_envs:macro_env",
    "DreamGym/Node-v0": "dream_gym.training.gym_envs:node_env",
    "DreamGym/Options-v0": "dream_gym.training.gym_envs:options_env",
}
TRAINING_VECTOR_ENVS = {"DreamGym/Macro-v0": "dream_gym.training.gym_envs:macro_vector_env"}
SHIPPED_MODELS_POOL: dict[str, Any] = {
    "worlds": "dream-gym/recorded-v1:train,dream-gym/recorded-v0:train",
    "prefixes": [50, 100, 200],
    "objective": "v2",
}


#: The ids register_envs gives one shipped world each (the v1 ids and their older aliases).
_WORLD_BOUND_IDS: set[str] = set()


def check_world_of_id(spec: Any, world_ids: Sequence[str]) -> None:
    """Refuse an env made under a shipped world's id (``DreamGym/<world>-v1``) that replays
    another world (``gym.make(id, world=other)``): its spec, the training logs and every monitor
    would name a world it does not replay. ``DreamGym/Replay-v1`` takes any world."""
    if spec.id not in _WORLD_BOUND_IDS:  # ids of the user's own are theirs to use as they like
        return
    registered = gym.registry.get(spec.id)
    reference = registered.kwargs.get("world") if registered is not None else None
    if not isinstance(reference, str) or spec.kwargs.get("world") is reference:
        return
    name = reference.rsplit("/", 1)[-1]
    others = sorted(set(world_ids) - {name})
    if others:
        raise ValueError(f"{spec.id} replays the world {name} ({reference}), not {', '.join(others)}: make "
                         f"DreamGym/Replay-v{ENV_VERSION} with world=... to replay another world")


class SpecOfOneWorld:
    """The ``spec`` Gymnasium sets on an env it made, checked when set: an env made under a
    shipped world's id replays that world only (:func:`check_world_of_id`)."""

    _spec: EnvSpec | None = None

    def _replayed_world_ids(self) -> list[str]:
        raise NotImplementedError

    @property
    def spec(self) -> EnvSpec | None:
        """The spec ``gym.make`` (or ``gym.make_vec``) made the env from; None when built directly."""
        return self._spec

    @spec.setter
    def spec(self, spec: EnvSpec | None) -> None:
        if spec is not None:  # set once the env is built, before anyone steps it
            check_world_of_id(spec, self._replayed_world_ids())
        self._spec = spec


def register_envs() -> None:
    """Register ``DreamGym/Replay-v1``, one ``DreamGym/<world>-v1`` per shipped world (kwargs: the
    world's dataset reference), the v0 ids as aliases, and the RL training envs of
    :data:`TRAINING_ENVS`. Entry points are strings: nothing is imported until an env is made."""
    entry_point, vector_entry_point = "dream_gym.envs.env:ReplayEnv", "dream_gym.envs.vector_env:ReplayVectorEnv"

    def register(env_id: str, **kwargs: Any) -> None:
        if "world" in kwargs:
            _WORLD_BOUND_IDS.add(env_id)
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, vector_entry_point=vector_entry_point, kwargs=kwargs)

    register(f"DreamGym/Replay-v{ENV_VERSION}")
    register("DreamGym/Replay-v0")  # the old id: an alias of v1 (Gymnasium warns it is out of date)
    world_ids = shipped_world_ids()
    for env_id, reference in world_ids.items():
        register(env_id, world=reference)
    references = {reference.rsplit("/", 1)[-1]: reference for reference in world_ids.values()}
    for env_id, name in shipped_env_ids().items():  # the old ids DreamGym/<world>-v<dataset version>
        register(f"DreamGym/{name}-v{ENV_VERSION}", world=references.get(name, name))
        register(env_id, world=references.get(name, name))
    for env_id, factory in TRAINING_ENVS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=factory, kwargs=dict(SHIPPED_MODELS_POOL),
                         vector_entry_point=TRAINING_VECTOR_ENVS.get(env_id))
