"""A model trained on ``DreamGym/Replay-v1`` with your own SB3 code, as a dream_gym policy."""

from __future__ import annotations

from typing import Any

from gymnasium import spaces

from dream_gym.envs.spaces import GLOBAL_COLUMNS, NODE_COLUMNS, view_observation
from dream_gym.policy import RunContext
from dream_gym.replay.mechanics import ROOT, judge_batch
from dream_gym.replay.view import PrefixView
from dream_gym.rl.sb3 import ModelPolicy, takes_masks

#: The keys of the replay env's observation.
REPLAY_OBSERVATION_KEYS = frozenset({"nodes", "score", "globals"})


def is_replay_model(model: Any) -> bool:
    """Whether a loaded model was trained on the replay env (its observation is the env's Dict)."""
    space = getattr(model, "observation_space", None)
    return isinstance(space, spaces.Dict) and set(space.spaces) == REPLAY_OBSERVATION_KEYS


class ReplaySB3Policy(ModelPolicy):
    """A model of the node-level replay env (``gym.make("DreamGym/Replay-v1", ...)``, SB3's
    ``"MultiInputPolicy"``, MaskablePPO or PPO) as a dream_gym policy.

    ``act(view)`` gives the model the observation the env would give at that decision (the env's
    capacity is the model's: its observation's rows; see
    :func:`~dream_gym.envs.spaces.view_observation`) and, for a MaskablePPO model, the env's
    action masks; of the W selections it predicts, the legal ones form the batch, as the env
    keeps them (padding, an id off the frontier, the root past its slots and a repeated id are
    what the env drops; a batch with none left stops). It plays at the W it was trained at:
    another is refused when the episode starts.

    Args:
        model: a path to an SB3 ``.zip`` or a loaded model.
        deterministic: take the most likely action (True) or sample one.
        trust_model: load a zip with the objects pickled in it (:func:`dream_gym.rl.sb3.load_model`).
    """

    def check(self, model: Any) -> None:
        space = model.observation_space
        if not is_replay_model(model):
            raise ValueError(f"model {self.name} was not trained on the replay env (observation {space})")
        rows, columns = space["nodes"].shape
        actions = model.action_space
        if columns != len(NODE_COLUMNS) or space["globals"].shape != (len(GLOBAL_COLUMNS),) or not (
                isinstance(actions, spaces.MultiDiscrete) and (actions.nvec == rows + 1).all()):
            raise ValueError(f"model {self.name} was trained on another replay observation ({space} -> {actions}); "
                             "retrain it on this version's DreamGym/Replay-v1")

    def setup(self) -> None:
        self.max_nodes = int(self.model.observation_space["nodes"].shape[0])
        self.workers = int(len(self.model.action_space.nvec))
        self.maskable = takes_masks(self.model)

    def check_workers(self, workers: int) -> None:
        """Refuse a run at another W than the model was trained at (its action has one slot a worker)."""
        if workers != self.workers:
            raise ValueError(f"model {self.name} was trained on the replay env at W = {self.workers}; it cannot "
                             f"play at W = {workers} (run it with -W {self.workers})")

    def reset(self, context: RunContext) -> None:
        self.check_workers(context.workers)
        super().reset(context)

    def act(self, view: PrefixView) -> list[int]:
        if len(view.nodes) > self.max_nodes:
            raise ValueError(f"model {self.name} sees at most {self.max_nodes} nodes (its env's max_nodes); "
                             f"this episode has revealed {len(view.nodes)}")
        obs, mask = view_observation(view, self.max_nodes)
        if self.maskable:
            action, _ = self.model.predict(obs, deterministic=self.deterministic, action_masks=mask.reshape(-1))
        else:
            action, _ = self.model.predict(obs, deterministic=self.deterministic)
        # the part of the action the env keeps, by its own rules (padding means no selection)
        selections = [int(a) for a in action if int(a) != self.max_nodes]
        kept, _ = judge_batch(selections, view.workers, len(view.nodes), set(view.frontier) - {ROOT},
                              view.root_slots, lambda obs_id: "off the frontier")
        return kept


__all__ = ["REPLAY_OBSERVATION_KEYS", "ReplaySB3Policy", "is_replay_model"]
