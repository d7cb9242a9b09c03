"""RL baselines on the policy interface: features, macro actions, pool and vector envs, SB3 glue.

Each step picks one of :data:`MACRO_ACTIONS` (stop, open k branches, continue the k best open
nodes, or a mix), turned into a legal batch by fixed rules; the observation is
:func:`view_features`, computed from the prefix view only, so a trained policy runs unchanged
in replay and online and never sees q, the world's best score or unrevealed nodes.

* :mod:`~dream_gym.rl.features`: :data:`FEATURE_NAMES`, :func:`view_features` (one view),
  :func:`batch_features` (N episodes), :class:`FeatureSet`.
* :mod:`~dream_gym.rl.macro`: :data:`MACRO_ACTIONS`, :func:`batch_for`, :func:`macro_masks`
  and their batched forms.
* :mod:`~dream_gym.rl.pool_env`: :class:`MacroReplayEnv`, one episode at a time over a pool.
* :mod:`~dream_gym.rl.vector`: :class:`MacroVectorEnv`, N episodes in numpy arrays.
* :mod:`~dream_gym.rl.sb3`: :class:`SB3Policy` (a trained model as a policy) and
  :func:`sb3_vec_env` (the vector env as an SB3 ``VecEnv``).

The envs take their observation (``features=``, a :class:`FeatureSet`) and their reward
(``value_fn=``, see :mod:`dream_gym.values`) as arguments. Needs the ``rl`` extra
(stable-baselines3, sb3-contrib, torch) only for the SB3 glue and for training.
"""

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
from dream_gym.rl.pool_env import MacroReplayEnv
from dream_gym.rl.sb3 import SB3Policy, sb3_vec_env
from dream_gym.rl.vector import MacroVectorEnv
from dream_gym.values import Progress, ValueFn, replay_value

__all__ = [
    "FEATURE_NAMES",
    "MACRO_ACTIONS",
    "MACRO_FEATURES",
    "N_FEATURES",
    "STOP",
    "EpisodeParams",
    "FeatureSet",
    "Macro",
    "MacroReplayEnv",
    "MacroTable",
    "MacroVectorEnv",
    "Progress",
    "SB3Policy",
    "ValueFn",
    "batch_features",
    "batch_for",
    "batch_masks",
    "macro_batches",
    "macro_masks",
    "ranked_open",
    "replay_value",
    "sb3_vec_env",
    "view_features",
]
