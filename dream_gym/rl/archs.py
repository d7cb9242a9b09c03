"""RL architectures by name: how each builds its training env and its network, and which policy
runs a trained model of it. One entry of :data:`ARCHITECTURES` per architecture feeds
``dream-gym train --arch``, :func:`~dream_gym.training.trainer.make_env`,
:func:`~dream_gym.training.trainer.make_model` and :func:`model_policy`.

A model records its architecture: :func:`~dream_gym.training.trainer.make_model` sets the attribute
:data:`ARCH_ATTRIBUTE` (defined with what a model zip may hold, :mod:`dream_gym.rl.model_zips`), which SB3's ``model.save`` writes with the model's other data and
``load`` restores. Zips saved before the architecture was recorded fall back to the shape rule:
the first architecture whose :attr:`Arch.fits` accepts the model's spaces, else ``macro``.

A new architecture is one module (its env, its network, its policy class) and one line here; a
policy class of its own is also one line of :data:`dream_gym.rl.model_zips.POLICY_CLASSES` (the
classes a model zip may name, loaded as data).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dream_gym.replay.objectives import ValueFn
from dream_gym.rl.features import MACRO_FEATURES
from dream_gym.rl.macro import MACRO_ACTIONS
from dream_gym.rl.model_zips import ARCH_ATTRIBUTE
from dream_gym.rl.node_env import NodeReplayEnv
from dream_gym.rl.options_env import OptionsReplayEnv
from dream_gym.rl.replay_policy import ReplaySB3Policy, is_replay_model
from dream_gym.rl.sb3 import (
    NodeSB3Policy,
    OptionsSB3Policy,
    SB3Policy,
    is_node_model,
    is_options_model,
    named_model,
    sb3_vec_env,
)
from dream_gym.world.tree import World


class ArchConfig(Protocol):
    """What an architecture reads of a training config (:class:`dream_gym.training.trainer.TrainConfig`,
    which imports this module: the registry names the fields it needs instead of importing it)."""

    algo: str
    hidden: int
    max_candidates: int
    n_envs: int
    workers: int

    @property
    def beta_grid(self) -> list[float]: ...

    @property
    def episode_settings(self) -> list[tuple[int, float, float]]: ...

#: What a model saved without :data:`ARCH_ATTRIBUTE` is when no architecture's shape fits.
FALLBACK_ARCH = "macro"


@dataclass(frozen=True)
class Arch:
    """One RL architecture.

    Attributes:
        summary: one line for ``--help``.
        make_env: ``(config, worlds, value_fn) -> VecEnv``: the training env (seeded by the caller).
        network: ``config -> (policy, policy_kwargs)``: the SB3 policy (a class or "MlpPolicy").
        policy: ``(loaded model, name=..., deterministic=...) -> Policy``: a trained model as a
            dream_gym policy.
        fits: whether a model's spaces are this architecture's (the rule for zips that do not
            record their architecture).
        defaults: TrainConfig fields this architecture sets when they are left 0.
    """

    summary: str
    make_env: Callable[[ArchConfig, Sequence[World], ValueFn], Any]
    network: Callable[[ArchConfig], tuple[Any, dict[str, Any]]]
    policy: Callable[..., Any]
    fits: Callable[[Any], bool]
    defaults: dict[str, int]


def _dummy_vec_env(make_one: Callable[[], Any], n_envs: int) -> Any:
    from stable_baselines3.common.vec_env import DummyVecEnv

    return DummyVecEnv([make_one for _ in range(n_envs)])


def _mlp(config: ArchConfig) -> tuple[Any, dict[str, Any]]:
    """Two hidden layers of ``hidden`` units, for the actor and the critic."""
    return "MlpPolicy", {"net_arch": {"pi": [config.hidden] * 2, "vf": [config.hidden] * 2}}


# -- macro: one of the macro actions a round, on the numba vector env ---------------------------
def _macro_env(config: ArchConfig, worlds: Sequence[World], value_fn: ValueFn) -> Any:
    return sb3_vec_env(list(worlds), config.n_envs, draws=config.episode_settings, beta=config.beta_grid,
                       value_fn=value_fn)


def _is_macro(model: Any) -> bool:
    shape = tuple(getattr(model.observation_space, "shape", ()) or ())
    return shape == (MACRO_FEATURES.size,) and getattr(model.action_space, "n", None) == len(MACRO_ACTIONS)


# -- node: a candidate node or "commit" a step, scored by the permutation-equivariant network ---
def _node_env(config: ArchConfig, worlds: Sequence[World], value_fn: ValueFn) -> Any:
    def one() -> NodeReplayEnv:
        return NodeReplayEnv(list(worlds), beta=config.beta_grid, value_fn=value_fn,
                             max_candidates=config.max_candidates, draws=config.episode_settings)

    return _dummy_vec_env(one, config.n_envs)


def _node_network(config: ArchConfig) -> tuple[Any, dict[str, Any]]:
    from dream_gym.rl.node_policy import MaskableNodePolicy, NodePolicy

    return (MaskableNodePolicy if config.algo == "maskable-ppo" else NodePolicy), {"hidden": config.hidden}


# -- options: a meta-controller that runs one built-in's proposal a round -------------------------
def _options_env(config: ArchConfig, worlds: Sequence[World], value_fn: ValueFn) -> Any:
    def one() -> OptionsReplayEnv:
        return OptionsReplayEnv(list(worlds), beta=config.beta_grid, value_fn=value_fn,
                                draws=config.episode_settings)

    return _dummy_vec_env(one, config.n_envs)


ARCHITECTURES: dict[str, Arch] = {
    "macro": Arch("one of 10 macro actions a round", _macro_env, _mlp, SB3Policy, _is_macro,
                  {"n_envs": 64, "n_steps": 64, "hidden": 64}),
    "node": Arch("a candidate node or commit a step", _node_env, _node_network, NodeSB3Policy, is_node_model,
                 {"n_envs": 8, "n_steps": 256, "hidden": 32}),
    "options": Arch("a built-in's batch a round", _options_env, _mlp, OptionsSB3Policy, is_options_model,
                    {"n_envs": 8, "n_steps": 256, "hidden": 64}),
}


def model_arch(model: Any) -> str:
    """The architecture of a loaded model: the one it records, else the first whose spaces fit
    (zips saved before models recorded it), else :data:`FALLBACK_ARCH`."""
    recorded = getattr(model, ARCH_ATTRIBUTE, None)
    if recorded is not None:
        if recorded not in ARCHITECTURES:
            raise ValueError(f"the model records architecture {recorded!r}, which this version does not know "
                             f"(known: {', '.join(ARCHITECTURES)})")
        return str(recorded)
    return next((name for name, arch in ARCHITECTURES.items() if arch.fits(model)), FALLBACK_ARCH)


def record_arch(model: Any, arch: str) -> Any:
    """Mark ``model`` as one of ``arch`` (written into its zip by ``model.save``); returns it."""
    setattr(model, ARCH_ATTRIBUTE, arch)
    return model


def model_policy(model: Any, *, trust_model: bool = False, **params: Any) -> Any:
    """The policy of a trained model (path or loaded), by its architecture (:func:`model_arch`).
    A path is loaded as data unless ``trust_model`` (:func:`dream_gym.rl.sb3.load_model`).
    ``params``: ``deterministic``."""
    name, loaded = named_model(model, trust_model=trust_model)
    if is_replay_model(loaded):  # trained with the user's own SB3 code on DreamGym/Replay-v1
        return ReplaySB3Policy(loaded, name=name, **params)
    if not runs_here(loaded):
        raise ValueError(unknown_model(name, loaded))
    return ARCHITECTURES[model_arch(loaded)].policy(loaded, name=name, **params)


def runs_here(model: Any) -> bool:
    """Whether a model (loaded, or anything with its spaces and recorded attributes) is one a
    dream_gym policy runs: trained on the replay env, or by an architecture (recorded, or whose
    spaces fit)."""
    return (is_replay_model(model) or getattr(model, ARCH_ATTRIBUTE, None) is not None
            or any(arch.fits(model) for arch in ARCHITECTURES.values()))


def unknown_model(name: str, model: Any) -> str:
    """Why a model fits no observation a dream_gym policy can give it, and what runs it instead."""
    def short(space: Any) -> str:
        shape = getattr(space, "shape", None)
        return f"{type(space).__name__}{tuple(shape)}" if shape else str(space)

    return (f"model {name} takes {short(model.observation_space)} -> {short(model.action_space)}, which is neither the "
            "observation of DreamGym/Replay-v1 (its Dict, SB3's MultiInputPolicy) nor that of a model this version's "
            f"dream-gym train makes ({', '.join(ARCHITECTURES)}): a model an earlier version trained must be "
            "retrained; one trained on a wrapped env (FlattenObservation, a feature set of your own) runs in your own "
            "loop over that wrapped env, not in eval")


__all__ = ["ARCHITECTURES", "ARCH_ATTRIBUTE", "FALLBACK_ARCH", "Arch", "model_arch", "model_policy", "record_arch",
           "runs_here", "unknown_model"]
