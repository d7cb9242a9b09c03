"""Seed ensembles: several trained models of one kind acting as one policy.

PPO runs that differ only in their seed end in different policies (the tables of docs/results/rl.md give
their spread). :class:`EnsemblePolicy` averages the members' action probabilities at every decision
and takes the most likely action: for macro models the masked distribution over
:data:`~dream_gym.rl.macro.MACRO_ACTIONS`, for node models the softmax over candidate rows and
commit at every sub-step of the batch. Members must share their arch and observation (one kind).

Spec: ``a.zip+b.zip+c.zip`` (``+`` joins the zips; ``dream_gym.policy_files.load_policy`` reads
it, so every ``--policy`` option takes it), in-process like every SB3 model (pickled objects: load
only files from a trusted source).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dream_gym.policy import RunContext
from dream_gym.replay.view import PrefixView
from dream_gym.rl.archs import model_policy
from dream_gym.rl.macro import batch_for, macro_masks
from dream_gym.rl.sb3 import NodeSB3Policy, SB3Policy, node_batch


class EnsemblePolicy:
    """The members' averaged action probabilities, most likely action first (deterministic).

    Args:
        models: two or more model paths or loaded models of one kind (all macro, or all node,
            with the same observation; macro members all MaskablePPO or all PPO).
        name: the policy's name (default: ``ensemble-<first member>-x<K>``).
        trust_model: load zips with the objects pickled in them (:func:`dream_gym.rl.sb3.load_model`).
    """

    def __init__(self, models: Sequence[Any], name: str | None = None, *, trust_model: bool = False):
        if len(models) < 2:
            raise ValueError(f"an ensemble needs two or more models, got {len(models)}")
        members = [model_policy(m, trust_model=trust_model) for m in models]
        if any(not isinstance(p, (SB3Policy, NodeSB3Policy)) for p in members):
            raise ValueError("ensemble members must be macro or node models: an options model's members would each "
                             "keep their own built-ins, so options models are not ensembled")
        self.members: list[SB3Policy | NodeSB3Policy] = members  # type: ignore[assignment]
        kinds = {type(p) for p in self.members}
        if len(kinds) > 1:
            raise ValueError("ensemble members must all be macro models or all node models, got both")
        self.node = kinds == {NodeSB3Policy}
        spaces = {repr(p.model.observation_space) for p in self.members}
        if len(spaces) > 1:
            raise ValueError(f"ensemble members were trained on different observations: {sorted(spaces)}")
        maskable = {getattr(p, "maskable", True) for p in self.members}
        if len(maskable) > 1:
            raise ValueError("ensemble members must all be MaskablePPO models or all PPO models, got both")
        self.maskable = maskable == {True}  # a plain PPO macro member has no masks: a masked action stops
        self.name = name or f"ensemble-{self.members[0].name}-x{len(self.members)}"
        import torch

        self._torch = torch
        self.context: RunContext | None = None

    def reset(self, context: RunContext) -> None:
        self.context = context
        for member in self.members:
            member.reset(context)

    def act(self, view: PrefixView) -> list[int]:
        return self._act_node(view) if self.node else self._act_macro(view)

    def _act_macro(self, view: PrefixView) -> list[int]:
        torch = self._torch
        masks = macro_masks(view)
        probs = np.zeros(len(masks))
        first = self.members[0]
        assert isinstance(first, SB3Policy)
        features = first.features.from_view(view)  # one feature set for all: model_policy builds the default
        for member in self.members:
            assert isinstance(member, SB3Policy)
            obs, _ = member.model.policy.obs_to_tensor(features)
            with torch.no_grad():
                if self.maskable:
                    dist = member.model.policy.get_distribution(obs, action_masks=masks)
                else:
                    dist = member.model.policy.get_distribution(obs)
            probs += dist.distribution.probs[0].numpy()
        if self.maskable:
            probs[~masks] = -1.0  # (their probability is 0 already; ties at 0 must not pick one)
        return batch_for(view, int(np.argmax(probs)))

    def _act_node(self, view: PrefixView) -> list[int]:
        return node_batch(view, self._pick_row)

    def _pick_row(self, tensors: dict[str, Any]) -> int:
        torch = self._torch
        probs = 0
        for member in self.members:
            assert isinstance(member, NodeSB3Policy)
            probs = probs + torch.softmax(member.logits(tensors), dim=0)
        return int(torch.argmax(probs))


__all__ = ["EnsemblePolicy"]
