"""stable-baselines3 glue: a trained model as a dream_gym policy, and the vector macro env as an
SB3 ``VecEnv`` (extra ``rl``: stable-baselines3, sb3-contrib, torch; imported lazily).

* :class:`SB3Policy`: ``reset(context)`` / ``act(view)`` around a MaskablePPO or PPO model;
  ``dream_gym.policy_files.load_policy("model.zip")`` builds one.
* :func:`sb3_vec_env`: a :class:`~dream_gym.rl.vector.MacroVectorEnv` as an SB3 ``VecEnv``, so
  that ``MaskablePPO("MlpPolicy", sb3_vec_env(worlds, n_envs=1024))`` trains on it directly
  (masks through ``env_method("action_masks")``, as sb3-contrib's ``get_action_masks`` asks).
"""

from __future__ import annotations

import os
from typing import Any

from dream_gym.policy import RunContext
from dream_gym.rl.features import MACRO_FEATURES, FeatureSet
from dream_gym.rl.macro import MACRO_ACTIONS, batch_for, macro_masks
from dream_gym.view import PrefixView


def _load_model(path: str) -> Any:
    """A MaskablePPO or PPO model from an SB3 zip (chosen by the policy class saved in it)."""
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
    from stable_baselines3 import PPO
    from stable_baselines3.common.save_util import load_from_zip_file

    data, _, _ = load_from_zip_file(path, device="cpu")
    policy_class = (data or {}).get("policy_class")
    maskable = isinstance(policy_class, type) and issubclass(policy_class, MaskableActorCriticPolicy)
    return (MaskablePPO if maskable else PPO).load(path, device="cpu")


class SB3Policy:
    """A trained stable-baselines3 model as a dream_gym policy (``reset`` / ``act``).

    ``act(view)``: the feature set's ``from_view`` (default :func:`view_features`) ->
    ``model.predict`` (with :func:`macro_masks` for a MaskablePPO model) -> :func:`batch_for`.
    Deterministic by default (the mode of the action distribution). A plain PPO model has no
    masks: an action whose batch would be empty stops.

    Args:
        model: a path to an SB3 ``.zip`` (MaskablePPO or PPO), or a loaded model.
            **An SB3 zip holds pickled Python objects: load only files from a trusted source.**
        deterministic: take the most likely action (True) or sample one.
        features: the observation the model was trained on.
    """

    def __init__(self, model: Any, *, deterministic: bool = True, features: FeatureSet = MACRO_FEATURES):
        if isinstance(model, (str, os.PathLike)):
            path = os.fspath(model)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"model file {path} does not exist")
            self.name = os.path.splitext(os.path.basename(path))[0]
            model = _load_model(path)
        else:
            self.name = "sb3"
        obs_shape = tuple(getattr(model.observation_space, "shape", ()) or ())
        n_actions = getattr(model.action_space, "n", None)
        if obs_shape != (features.size,) or n_actions != len(MACRO_ACTIONS):
            raise ValueError(
                f"model spaces {obs_shape} -> {n_actions} do not match the macro env "
                f"({features.size} features -> {len(MACRO_ACTIONS)} actions)"
            )
        from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

        self.model = model
        self.maskable = isinstance(model.policy, MaskableActorCriticPolicy)
        self.deterministic = deterministic
        self.features = features
        self.context: RunContext | None = None

    def reset(self, context: RunContext) -> None:
        self.context = context
        if not self.deterministic:  # sampled actions: reproducible per episode seed
            import torch

            torch.manual_seed(context.seed)

    def act(self, view: PrefixView) -> list[int]:
        obs = self.features.from_view(view)
        if self.maskable:
            action, _ = self.model.predict(obs, deterministic=self.deterministic, action_masks=macro_masks(view))
        else:
            action, _ = self.model.predict(obs, deterministic=self.deterministic)
        return batch_for(view, int(action))


def sb3_vec_env(worlds: Any, n_envs: int = 1, **options: Any) -> Any:
    """A :class:`~dream_gym.rl.vector.MacroVectorEnv` of ``n_envs`` episodes as an SB3 ``VecEnv``.

    SB3's conventions: ``reset()`` returns observations only; an episode that ends is reset in
    the same step, its last observation in ``infos[i]["terminal_observation"]``,
    ``infos[i]["TimeLimit.truncated"]`` set for truncations, and ``infos[i]["episode"]``
    (``r`` = return = V, ``l`` = length, ``t`` = seconds) as SB3's ``VecMonitor`` writes it.
    ``seed(s)`` seeds the next reset. ``options``: MacroVectorEnv's (workers, beta, ...).
    """
    from dream_gym.rl.sb3_vec import SB3MacroVecEnv

    return SB3MacroVecEnv(worlds, n_envs, **options)


__all__ = ["SB3Policy", "sb3_vec_env"]
