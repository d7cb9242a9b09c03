"""stable-baselines3 glue: a trained model as a dream_gym policy, and the vector macro env as an
SB3 ``VecEnv`` (extra ``rl``: stable-baselines3, sb3-contrib, torch; imported lazily).

* :class:`SB3Policy`: ``reset(context)`` / ``act(view)`` around a MaskablePPO or PPO model of
  the macro env; :class:`NodeSB3Policy` the same for a model of the node env
  (:class:`~dream_gym.rl.NodeReplayEnv`), :class:`OptionsSB3Policy` for the options env; :func:`dream_gym.rl.archs.model_policy` picks the
  one of a zip's architecture, and
  ``dream_gym.policy_files.load_policy("model.zip")`` (or a shipped model's name) calls it.
  A zip is loaded as data (:func:`load_model`, :mod:`dream_gym.rl.model_zips`): nothing pickled
  in it runs, unless ``trust_model=True``.
* :func:`sb3_vec_env`: a :class:`~dream_gym.rl.vector.MacroVectorEnv` as an SB3 ``VecEnv``, so
  that ``MaskablePPO("MlpPolicy", sb3_vec_env(worlds, n_envs=1024))`` trains on it directly
  (masks through ``env_method("action_masks")``, as sb3-contrib's ``get_action_masks`` asks).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

from gymnasium import spaces

from dream_gym.policy import RunContext
from dream_gym.replay.view import PrefixView
from dream_gym.rl.features import MACRO_FEATURES, FeatureSet
from dream_gym.rl.macro import MACRO_ACTIONS, batch_for, macro_masks


def load_model(path: str | os.PathLike[str], *, trust_model: bool = False) -> Any:
    """A MaskablePPO or PPO model from an SB3 zip (chosen by the policy class saved in it), loaded
    as data: nothing pickled in the zip is unpickled, and a zip holding what dream_gym cannot
    rebuild is refused with :class:`~dream_gym.rl.model_zips.UntrustedModelError` naming it
    (:mod:`dream_gym.rl.model_zips`). ``trust_model=True`` (or a load inside
    :func:`~dream_gym.rl.model_zips.trusted_models`) loads it the old way, running the objects
    pickled in it: only for a zip whose author you trust."""
    from dream_gym.rl.model_zips import load_model_zip

    return load_model_zip(path, trust=trust_model)


class ModelPolicy:
    """What the policies of trained models share: the model (a path loaded once per process by
    :func:`named_model`, as data unless ``trust_model``, or a loaded model), its name, whether
    its actions are the most likely ones, and the episode's context. A subclass refuses a model of
    another env in :meth:`check` and builds what it acts with in :meth:`setup`; ``reset`` seeds
    the sampling of a non-deterministic policy per episode."""

    def __init__(self, model: Any, *, deterministic: bool = True, name: str | None = None,
                 trust_model: bool = False):
        self.name, model = named_model(model, name, trust_model=trust_model)
        self.check(model)
        self.model, self.deterministic = model, deterministic
        self.context: RunContext | None = None
        self.setup()

    def check(self, model: Any) -> None:
        """ValueError naming what is wrong when ``model`` was not trained on this policy's env."""

    def setup(self) -> None:
        """What a subclass builds once its model is accepted."""

    def reset(self, context: RunContext) -> None:
        self.context = context
        if not self.deterministic:  # sampled actions: reproducible per episode seed
            import torch

            torch.manual_seed(context.seed)


def takes_masks(model: Any) -> bool:
    """Whether a loaded model takes action masks (a MaskablePPO model's policy)."""
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

    return isinstance(model.policy, MaskableActorCriticPolicy)


class SB3Policy(ModelPolicy):
    """A trained stable-baselines3 model as a dream_gym policy (``reset`` / ``act``).

    ``act(view)``: the feature set's ``from_view`` (default :func:`view_features`) ->
    ``model.predict`` (with :func:`macro_masks` for a MaskablePPO model) -> :func:`batch_for`.
    Deterministic by default (the mode of the action distribution). A plain PPO model has no
    masks: an action whose batch would be empty stops.

    Args:
        model: a path to an SB3 ``.zip`` (MaskablePPO or PPO), or a loaded model.
        deterministic: take the most likely action (True) or sample one.
        features: the observation the model was trained on.
        trust_model: load a zip with the objects pickled in it (:func:`load_model`).
    """

    def __init__(self, model: Any, *, deterministic: bool = True, features: FeatureSet = MACRO_FEATURES,
                 name: str | None = None, trust_model: bool = False):
        self.features = features
        super().__init__(model, deterministic=deterministic, name=name, trust_model=trust_model)

    def setup(self) -> None:
        self.maskable = takes_masks(self.model)

    def check(self, model: Any) -> None:
        features = self.features
        obs_shape = tuple(getattr(model.observation_space, "shape", ()) or ())
        n_actions = getattr(model.action_space, "n", None)
        if obs_shape != (features.size,) or n_actions != len(MACRO_ACTIONS):
            raise ValueError(
                f"model {self.name}: spaces {obs_shape} -> {n_actions} do not match the macro env "
                f"({features.size} features -> {len(MACRO_ACTIONS)} actions): a model trained on another "
                "observation (another feature set or an earlier version of it) must be retrained"
            )

    def act(self, view: PrefixView) -> list[int]:
        obs = self.features.from_view(view)
        if self.maskable:
            action, _ = self.model.predict(obs, deterministic=self.deterministic, action_masks=macro_masks(view))
        else:
            action, _ = self.model.predict(obs, deterministic=self.deterministic)
        return batch_for(view, int(action))


def named_model(model: Any, name: str | None = None, *, trust_model: bool = False) -> tuple[str, Any]:
    """(name, loaded model) of a path (named after the file, unless ``name``) or a loaded model.
    A path is loaded once per process, file version and trust (:func:`_shared_model`), as data
    unless ``trust_model`` (:func:`load_model`)."""
    if isinstance(model, (str, os.PathLike)):
        name = name or os.path.splitext(os.path.basename(os.fspath(model)))[0]
        return name, _shared_model(model, trust_model)
    return name or "sb3", model


def _shared_model(path: str | os.PathLike[str], trust_model: bool) -> Any:
    """The loaded model of a zip, shared by every policy built from it: a policy only predicts
    with it (its per-episode state lives in the policy object, built fresh for each episode).
    A zip loaded trusted is kept apart from the same zip loaded as data."""
    from dream_gym.rl.model_zips import models_trusted

    real = os.path.realpath(path)
    stat = os.stat(real) if os.path.isfile(real) else None
    trusted = trust_model or models_trusted()
    return _load_shared(real, stat.st_mtime_ns if stat else 0, stat.st_size if stat else 0, trusted)


@functools.lru_cache(maxsize=32)
def _load_shared(path: str, mtime_ns: int, size: int, trust_model: bool) -> Any:
    from dream_gym.rl.model_zips import load_model_zip

    return load_model_zip(path, trust=trust_model, to_act=True)  # shared by policies: it only predicts


#: The keys of the node env's observation (``DreamGym/Node-v0``).
NODE_OBSERVATION_KEYS = frozenset({"globals", "mask", "nodes"})


def is_node_model(model: Any) -> bool:
    """Whether a loaded model was trained on the node env (its observation is the node Dict)."""
    space = getattr(model, "observation_space", None)
    return isinstance(space, spaces.Dict) and set(space.spaces) == NODE_OBSERVATION_KEYS


class NodeSB3Policy(ModelPolicy):
    """A model trained on :class:`~dream_gym.rl.NodeReplayEnv` as a dream_gym policy.

    ``act(view)`` builds the batch the way the env does, one selection at a time: the candidates
    of the view (:class:`~dream_gym.rl.node_features.RoundPlan`, **uncapped**: the scorer is
    permutation-equivariant, so it scores every open node of a world of any size), the
    :func:`~dream_gym.rl.node_env.node_observation` of the selections so far, the actor's
    logits, and the most likely row (or a sampled one) until it picks commit, the batch holds W
    selections or no candidate is left.

    A model of SB3's own network for Dict observations (``"MultiInputPolicy"``, trained with
    your own SB3 code on ``DreamGym/Node-v0``) sees exactly what the env showed it: at most as
    many candidates as its observation has rows (the env's ``max_candidates``, the best first),
    padded, its action masks applied.

    Args:
        model: a path to an SB3 ``.zip`` or a loaded MaskablePPO / PPO model with a node policy.
        deterministic: take the most likely row (True) or sample one (seeded per episode).
        trust_model: load a zip with the objects pickled in it (:func:`load_model`).
    """

    def setup(self) -> None:
        import torch

        self._torch = torch
        self._generator = torch.Generator().manual_seed(0)
        from dream_gym.rl.node_policy import NodeScorer

        # dream_gym's scorer takes any number of rows; SB3's own network the env's capacity
        scorer = isinstance(self.model.policy.mlp_extractor, NodeScorer)
        self._capacity = None if scorer else int(self.model.observation_space["nodes"].shape[0])
        self._maskable = takes_masks(self.model)

    def check(self, model: Any) -> None:
        if not is_node_model(model):
            raise ValueError(f"model {self.name} was not trained on the node env (observation "
                             f"{getattr(model, 'observation_space', None)})")
        from dream_gym.rl.node_env import N_GLOBAL_FEATURES
        from dream_gym.rl.node_features import N_NODE_FEATURES

        space = model.observation_space.spaces
        globals_size = space["globals"].shape[0] if "globals" in space else None
        if (globals_size, space["nodes"].shape[-1]) != (N_GLOBAL_FEATURES, N_NODE_FEATURES):
            raise ValueError(f"model {self.name} was trained on another node observation ({globals_size} global, "
                             f"{space['nodes'].shape[-1]} per-node features; this version has {N_GLOBAL_FEATURES} "
                             f"and {N_NODE_FEATURES}): retrain it with this version's dream-gym train")

    def reset(self, context: RunContext) -> None:
        self.context = context
        self._generator.manual_seed(context.seed)

    def act(self, view: PrefixView) -> list[int]:
        return node_batch(view, self._pick, self._capacity)

    def logits(self, tensors: dict[str, Any]) -> Any:
        """The actor's logits over the rows (candidates, padding, commit) of one observation (SB3's
        own network: masked as the env's ``action_masks`` would mask them)."""
        policy = self.model.policy
        with self._torch.no_grad():
            if self._capacity is None:
                return policy.mlp_extractor.forward_actor(policy.extract_features(tensors))[0]
            if self._maskable:
                masks = (tensors["mask"] > 0.5).numpy()
                return policy.get_distribution(tensors, action_masks=masks).distribution.logits[0]
            return policy.get_distribution(tensors).distribution.logits[0]

    def _pick(self, tensors: dict[str, Any]) -> int:
        torch, logits = self._torch, self.logits(tensors)
        if self.deterministic:
            return int(torch.argmax(logits))
        return int(torch.multinomial(torch.softmax(logits, dim=0), 1, generator=self._generator))


def is_options_model(model: Any) -> bool:
    """Whether a loaded model was trained on the options env (38 features -> 9 actions)."""
    from dream_gym.rl.option_set import N_OPTION_ACTIONS, N_OPTION_FEATURES

    shape = tuple(getattr(model.observation_space, "shape", ()) or ())
    return shape == (N_OPTION_FEATURES,) and getattr(model.action_space, "n", None) == N_OPTION_ACTIONS


class OptionsSB3Policy(ModelPolicy):
    """A model trained on :class:`~dream_gym.rl.options_env.OptionsReplayEnv` as a dream_gym policy.

    ``reset`` resets its own :class:`~dream_gym.rl.option_set.OptionSet` with the episode's context;
    ``act(view)`` asks every option for its batch (once per round, as in training), then runs the
    proposal the model picks (with the options' masks for a MaskablePPO model; a plain PPO model's
    empty pick stops). Deterministic by default.

    Args:
        model: a path to an SB3 ``.zip`` or a loaded MaskablePPO / PPO model of the options env.
        deterministic: take the most likely action (True) or sample one (seeded per episode).
        trust_model: load a zip with the objects pickled in it (:func:`load_model`).
    """

    def setup(self) -> None:
        from dream_gym.rl.option_set import OptionSet

        self.maskable = takes_masks(self.model)
        self.options = OptionSet()

    def check(self, model: Any) -> None:
        if not is_options_model(model):
            raise ValueError(f"model {self.name} was not trained on the options env (spaces "
                             f"{getattr(model, 'observation_space', None)} -> {getattr(model, 'action_space', None)})")

    def reset(self, context: RunContext) -> None:
        self.options.reset(context)
        super().reset(context)

    def act(self, view: PrefixView) -> list[int]:
        from dream_gym.rl.option_set import option_features

        proposals = self.options.propose(view)
        obs = option_features(view, proposals)
        masks = {"action_masks": proposals.masks()} if self.maskable else {}
        action, _ = self.model.predict(obs, deterministic=self.deterministic, **masks)
        return proposals.batch(int(action))


def node_batch(view: PrefixView, pick: Callable[[dict[str, Any]], int], capacity: int | None = None) -> list[int]:
    """The batch a node model builds on a view, one selection at a time: the candidates of the view
    (:class:`~dream_gym.rl.node_features.RoundPlan`, uncapped, or at most ``capacity`` padded to
    it, as the env shows them), the :func:`~dream_gym.rl.node_env.node_observation` of the
    selections so far (as a batch of one tensor each) and ``pick``'s row, until it picks commit
    (a row past the candidates), the batch holds W selections or no candidate is left."""
    import torch

    from dream_gym.rl.node_env import node_observation
    from dream_gym.rl.node_features import RoundPlan

    plan = RoundPlan(view, capacity)
    pending: list[int] = []
    while len(pending) < view.workers:
        obs, available = node_observation(plan, pending, capacity)
        if not len(available):
            break
        row = pick({key: torch.as_tensor(value).unsqueeze(0) for key, value in obs.items()})
        if row >= len(available):  # commit
            break
        pending.append(int(available[row]))
    return [plan.candidates[i] for i in pending]


def sb3_vec_env(worlds: Any, n_envs: int = 1, draws: Sequence[tuple[int, float, float]] = (),
                **options: Any) -> Any:
    """A :class:`~dream_gym.rl.vector.MacroVectorEnv` of ``n_envs`` episodes as an SB3 ``VecEnv``.

    SB3's conventions: ``reset()`` returns observations only; an episode that ends is reset in
    the same step, its last observation in ``infos[i]["terminal_observation"]``,
    ``infos[i]["TimeLimit.truncated"]`` set for truncations, and ``infos[i]["episode"]``
    (``r`` = return = V, ``l`` = length, ``t`` = seconds) as SB3's ``VecMonitor`` writes it.
    ``seed(s)`` seeds the next reset. ``options``: MacroVectorEnv's (workers, beta, ...).

    ``draws``: several (W, beta1, beta2) settings to train on at once: the ``n_envs`` episodes are
    split among them as evenly as possible (the first settings get one more when they do not
    divide), each part a vector env of its own setting (a :class:`~dream_gym.rl.sb3_vec.MixedVecEnv`).
    """
    from dream_gym.rl.sb3_vec import MixedVecEnv, SB3MacroVecEnv

    if len(draws) <= 1:
        if draws:
            (workers, beta1, beta2), = draws
            options = {**options, "workers": workers, "beta1": beta1, "beta2": beta2}
        return SB3MacroVecEnv(worlds, n_envs, **options)
    if n_envs < len(draws):
        raise ValueError(f"{len(draws)} settings need at least as many envs, got n_envs {n_envs}")
    share, extra = divmod(n_envs, len(draws))
    return MixedVecEnv([
        SB3MacroVecEnv(worlds, share + (k < extra), **{**options, "workers": w, "beta1": b1, "beta2": b2})
        for k, (w, b1, b2) in enumerate(draws)
    ])


__all__ = ["ModelPolicy", "NodeSB3Policy", "OptionsSB3Policy", "SB3Policy", "is_node_model", "is_options_model", "load_model",
           "named_model", "node_batch", "sb3_vec_env", "takes_masks"]
