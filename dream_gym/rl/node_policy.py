"""The node-level actor-critic: one shared scorer over candidate rows (permutation-equivariant).

Each candidate row (node features, with the global features appended) goes through the same MLP
and gets a logit; "commit" gets a logit from the global features and a masked mean and max pool
of the rows' embeddings; the critic reads the same pooled summary. Nothing depends on a row's
position or on the number of rows, so one network serves views of any size (training pads to a
fixed capacity; inference scores exactly the rows there are).
"""

from __future__ import annotations

from typing import Any

import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

NEG = -1e8  # the logit of a masked row (finite: -inf breaks softmax on all-masked padding)


class DictPassThrough(BaseFeaturesExtractor):
    """Hands the observation dict to the scorer unchanged (its tensors keep their shapes)."""

    def __init__(self, observation_space: spaces.Dict):
        super().__init__(observation_space, features_dim=1)

    def forward(self, observations: dict[str, th.Tensor]) -> dict[str, th.Tensor]:  # type: ignore[override]
        return observations


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes, sizes[1:], strict=False):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers)


class NodeScorer(nn.Module):
    """The actor (``forward_actor``: logits over rows + commit) and critic (``forward_critic``)."""

    def __init__(self, n_node: int, n_global: int, hidden: int = 64):
        super().__init__()
        self.latent_dim_pi = 1  # not used: the logits come out whole (action_net is the identity)
        self.latent_dim_vf = hidden
        self.rows = _mlp([n_node + n_global, hidden, hidden])  # shared by actor and critic
        self.pi_row_out = nn.Linear(hidden, 1)
        self.pi_commit = nn.Sequential(_mlp([n_global + 2 * hidden, hidden]), nn.Linear(hidden, 1))
        self.vf_head = _mlp([n_global + 2 * hidden, hidden])

    @staticmethod
    def _rows(obs: dict[str, th.Tensor]) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        nodes, glob, mask = obs["nodes"], obs["globals"], obs["mask"]
        rows = th.cat([nodes, glob.unsqueeze(1).expand(-1, nodes.shape[1], -1)], dim=-1)
        return rows, glob, mask[:, : nodes.shape[1]] > 0.5

    @staticmethod
    def _pool(emb: th.Tensor, valid: th.Tensor) -> th.Tensor:
        weights = valid.unsqueeze(-1).float()
        mean = (emb * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        maxed = emb.masked_fill(~valid.unsqueeze(-1), -1.0).max(1).values if emb.shape[1] else th.zeros_like(mean)
        return th.cat([mean, maxed], dim=-1)

    def _encode(self, obs: dict[str, th.Tensor]) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        rows, glob, valid = self._rows(obs)
        emb = self.rows(rows)
        return emb, th.cat([glob, self._pool(emb, valid)], dim=-1), valid

    def _actor(self, emb: th.Tensor, summary: th.Tensor, valid: th.Tensor) -> th.Tensor:
        logits = self.pi_row_out(emb).squeeze(-1).masked_fill(~valid, NEG)
        return th.cat([logits, self.pi_commit(summary)], dim=-1)

    def forward_actor(self, obs: dict[str, th.Tensor]) -> th.Tensor:
        return self._actor(*self._encode(obs))

    def forward_critic(self, obs: dict[str, th.Tensor]) -> th.Tensor:
        return self.vf_head(self._encode(obs)[1])

    def forward(self, obs: dict[str, th.Tensor]) -> tuple[th.Tensor, th.Tensor]:
        emb, summary, valid = self._encode(obs)
        return self._actor(emb, summary, valid), self.vf_head(summary)


class _NodeMixin:
    """Replaces the MLP extractor by :class:`NodeScorer` and the action head by the identity."""

    def __init__(self, *args: Any, hidden: int = 64, **kwargs: Any):
        self.hidden = hidden
        kwargs.setdefault("features_extractor_class", DictPassThrough)
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]

    def _build_mlp_extractor(self) -> None:
        space = self.observation_space  # type: ignore[attr-defined]
        self.mlp_extractor = NodeScorer(space["nodes"].shape[-1], space["globals"].shape[0], self.hidden)

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)  # type: ignore[misc]
        self.action_net = nn.Identity()
        scorer: NodeScorer = self.mlp_extractor  # type: ignore[has-type]
        for head in (scorer.pi_row_out, scorer.pi_commit[-1]):  # small initial logits, as SB3's action_net
            nn.init.orthogonal_(head.weight, gain=0.01)  # type: ignore[arg-type]
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # type: ignore[attr-defined]

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()  # type: ignore[misc]
        data["hidden"] = self.hidden
        return data


class MaskableNodePolicy(_NodeMixin, MaskableActorCriticPolicy):  # type: ignore[misc]
    """For sb3-contrib's MaskablePPO (masks also come from ``env.action_masks()``)."""


class NodePolicy(_NodeMixin, ActorCriticPolicy):  # type: ignore[misc]
    """For plain PPO: the observation's mask keeps every sampled action legal."""
