"""dream_gym: recorded AI-discovery search trees as deterministic Gymnasium environments.

``import dream_gym`` registers ``DreamGym/Replay-v1``, one ``DreamGym/<world>-v1`` per shipped
world and the RL training envs ``DreamGym/Macro-v0``, ``Node-v0``, ``Options-v0`` (Gymnasium 1.x
has no plugin entry point; see :mod:`dream_gym.envs.ids`).

Where to start:

* a world: :func:`resolve_world` (a shipped name, a folder, ``namespace/name-vN/<world>``),
  :func:`list_worlds`, :func:`load_world`;
* one episode of a policy: :func:`run_episode` (a :class:`Policy`: ``reset(context)`` and
  ``act(view)``, the view a :class:`PrefixView`), or ``gym.make("DreamGym/<world>-v1")``;
* policies by name or file: ``dream_gym.policy_files.load_policy``, ``dream_gym.policies.make_policy``;
* a grid of policies, worlds and betas, and its leaderboard:
  ``dream_gym.evaluation.evaluate.evaluate``, ``dream_gym.evaluation.leaderboard.leaderboard``;
* datasets (pack, load, download, upload): ``dream_gym.datasets``;
* the score and the oracle limit: ``dream_gym.replay.score``, ``dream_gym.replay.oracle``.
"""

# Modules moved into the layer packages stay importable by their old names.
from dream_gym import _moved  # noqa: F401

# The dataset store plugs its lookup of ``namespace/name-vN/<world>`` into the registry, which sits
# below it and never imports it.
from dream_gym.datasets import store as _dataset_store  # noqa: F401
from dream_gym.envs.env import ReplayEnv
from dream_gym.envs.ids import register_envs
from dream_gym.policy import EpisodeResult, FunctionPolicy, Policy, RunContext, as_policy, run_episode
from dream_gym.replay.mechanics import IllegalBatchError
from dream_gym.replay.session import EpisodeLimitError, ReplaySession
from dream_gym.replay.view import NodeView, PrefixView
from dream_gym.world.files import WorldFormatError
from dream_gym.world.registry import list_worlds, resolve_world
from dream_gym.world.tree import World, load_world
from dream_gym.world.writer import WorldWriter

__version__ = "0.1.0"

register_envs()

__all__ = [
    "EpisodeLimitError",
    "EpisodeResult",
    "FunctionPolicy",
    "IllegalBatchError",
    "NodeView",
    "Policy",
    "PrefixView",
    "ReplayEnv",
    "ReplaySession",
    "RunContext",
    "World",
    "WorldFormatError",
    "WorldWriter",
    "as_policy",
    "list_worlds",
    "register_envs",
    "load_world",
    "resolve_world",
    "run_episode",
]
