"""RL baselines on the policy interface: features, macro actions, pool and vector envs, SB3 glue.

Each step picks one of :data:`MACRO_ACTIONS` (stop, open k branches, continue the k best open
nodes, or a mix), turned into a legal batch by fixed rules; the observation is
:func:`view_features`, computed from the prefix view only, so a trained policy runs unchanged
in replay and online and never sees q, the world's best score or unrevealed nodes.

* :mod:`~dream_gym.rl.features`: :data:`FEATURE_NAMES`, :func:`view_features` (one view),
  :func:`batch_features` (N episodes), :class:`FeatureSet`.
* :mod:`~dream_gym.rl.macro`: :data:`MACRO_ACTIONS`, :func:`batch_for`, :func:`macro_masks`
  and their batched forms.
* :mod:`~dream_gym.rl.macro_env`: :class:`MacroReplayEnv`, one episode at a time over a pool.
* :mod:`~dream_gym.rl.vector`: :class:`MacroVectorEnv`, N episodes in numpy arrays.
* :mod:`~dream_gym.rl.pool_settings`: the replay settings every pool env takes, as keywords
  (``workers``, ``beta``, ``beta1``, ``beta2``, ``max_rounds``) or as ``settings=ReplaySettings(...)``.
* :mod:`~dream_gym.rl.node_features`, :mod:`~dream_gym.rl.node_env`: the node-level policy's
  observation (:class:`RoundPlan`: one feature row per candidate) and :class:`NodeReplayEnv`
  (a batch built by sequential masked selection, one candidate or "commit" a step);
  :mod:`~dream_gym.rl.node_policy` (torch): the permutation-equivariant scorer as SB3 policies.
* :mod:`~dream_gym.rl.option_set`, :mod:`~dream_gym.rl.options_env`: the options arch, a
  meta-controller over the built-ins (:data:`OPTION_POLICIES`): each round it runs one built-in's
  proposal or stops (:class:`OptionsReplayEnv`).
* :mod:`~dream_gym.rl.sb3`: :class:`SB3Policy` / :class:`NodeSB3Policy` / :class:`OptionsSB3Policy`
  (trained models as policies; :func:`~dream_gym.rl.archs.model_policy` picks one by the
  model's architecture, :data:`~dream_gym.rl.archs.ARCHITECTURES`) and :func:`sb3_vec_env` (the vector env as an SB3
  ``VecEnv``); :mod:`~dream_gym.rl.ensemble`: :class:`EnsemblePolicy` (seeds of one kind as
  one policy, their action probabilities averaged; spec ``a.zip+b.zip``).
* :mod:`~dream_gym.rl.model_zips`: model zips loaded as data (nothing pickled in them runs;
  :class:`UntrustedModelError` names what is refused; ``trust_model=True`` or
  :func:`trusted_models` for a model whose author you trust).
* :mod:`~dream_gym.training.trainer`: ``dream-gym train`` (checkpoints, resume, TensorBoard logs,
  periodic held-out evaluation).

The envs take their observation (``features=``, a :class:`FeatureSet`) and their reward
(``value_fn=``, see :mod:`dream_gym.replay.objectives`: V, or the beta-conditioned
:class:`~dream_gym.replay.objectives.PricedAttainment`) as arguments. Needs the ``rl`` extra
(stable-baselines3, sb3-contrib, torch) only for the SB3 glue and for training.
"""

from dream_gym.replay.objectives import PricedAttainment, Progress, ValueFn, make_objective, replay_value
from dream_gym.rl.archs import ARCHITECTURES, Arch, model_arch, model_policy
from dream_gym.rl.ensemble import EnsemblePolicy
from dream_gym.rl.features import (
    FEATURE_NAMES,
    MACRO_FEATURES,
    N_FEATURES,
    EpisodeParams,
    FeatureSet,
    batch_features,
    view_features,
)
from dream_gym.rl.macro import (
    MACRO_ACTIONS,
    STOP,
    Macro,
    MacroTable,
    batch_for,
    batch_masks,
    macro_batches,
    macro_masks,
    ranked_open,
)
from dream_gym.rl.macro_env import MacroReplayEnv
from dream_gym.rl.model_zips import UntrustedModelError, trusted_models
from dream_gym.rl.node_env import N_GLOBAL_FEATURES, NodeReplayEnv, node_observation
from dream_gym.rl.node_features import N_NODE_FEATURES, NODE_FEATURE_NAMES, RoundPlan
from dream_gym.rl.option_set import OPTION_POLICIES, OptionSet, option_features
from dream_gym.rl.options_env import OptionsReplayEnv
from dream_gym.rl.sb3 import (
    NodeSB3Policy,
    OptionsSB3Policy,
    SB3Policy,
    is_node_model,
    is_options_model,
    load_model,
    sb3_vec_env,
)
from dream_gym.rl.vector import MacroVectorEnv

__all__ = [
    "ARCHITECTURES",
    "Arch",
    "EnsemblePolicy",
    "FEATURE_NAMES",
    "MACRO_ACTIONS",
    "MACRO_FEATURES",
    "NODE_FEATURE_NAMES",
    "OPTION_POLICIES",
    "N_FEATURES",
    "N_GLOBAL_FEATURES",
    "N_NODE_FEATURES",
    "STOP",
    "EpisodeParams",
    "FeatureSet",
    "Macro",
    "MacroReplayEnv",
    "MacroTable",
    "MacroVectorEnv",
    "NodeReplayEnv",
    "NodeSB3Policy",
    "OptionSet",
    "OptionsReplayEnv",
    "OptionsSB3Policy",
    "PricedAttainment",
    "Progress",
    "RoundPlan",
    "SB3Policy",
    "UntrustedModelError",
    "ValueFn",
    "batch_features",
    "batch_for",
    "batch_masks",
    "is_node_model",
    "is_options_model",
    "load_model",
    "make_objective",
    "model_arch",
    "model_policy",
    "node_observation",
    "option_features",
    "macro_batches",
    "macro_masks",
    "ranked_open",
    "replay_value",
    "sb3_vec_env",
    "trusted_models",
    "view_features",
]
