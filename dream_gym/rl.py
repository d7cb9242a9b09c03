"""RL baselines: macro actions over the prefix view, a Gymnasium env over a pool of worlds, and
an adapter that runs a trained stable-baselines3 model through the policy interface.

The per-slot action space of :class:`dream_gym.env.ReplayEnv` (one node id per worker) is too
large to learn from a few dozen worlds in minutes. This module gives RL a small, fixed decision
instead: each step picks one of :data:`MACRO_ACTIONS` (stop, open k branches, continue the k
best open nodes, or a mix), and :func:`batch_for` turns it into a legal batch by fixed rules.
The observation is :func:`view_features`, a fixed-length vector computed from the
:class:`~dream_gym.view.PrefixView` only, so a trained policy runs unchanged in replay and online
and never sees q, the world's best score or unrevealed nodes.

* :func:`view_features` / :data:`FEATURE_NAMES`: the observation (float32, every entry in [-1, 1]).
* :data:`MACRO_ACTIONS`, :func:`batch_for`, :func:`macro_masks`: the action set.
* :class:`MacroReplayEnv`: ``gym.Env`` over a pool of worlds (one sampled per episode),
  reward = the change of the replay score V (an episode's rewards sum to its V).
* :class:`SB3Policy`: ``reset(context)`` / ``act(view)`` around a MaskablePPO or PPO model;
  ``dream_gym.policy_files.load_policy("model.zip")`` builds one.

Needs the ``rl`` extra (stable-baselines3, sb3-contrib, torch) only for :class:`SB3Policy` and
for training; the features, macros and env need gymnasium and numpy alone.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from dream_gym.policies.base import open_nodes, score_key
from dream_gym.policy import RunContext
from dream_gym.registry import resolve_world
from dream_gym.replay import ROOT
from dream_gym.score import DEFAULT_BETA1, DEFAULT_BETA2
from dream_gym.session import ReplaySession
from dream_gym.view import NodeView, PrefixView
from dream_gym.world import World

# --------------------------------------------------------------------------- features

FEATURE_NAMES: tuple[str, ...] = (
    "rounds",  # k / (k + 10)
    "attempts",  # N / (N + 50)
    "root_slots",  # root_slots / W: how many branches the next batch may open
    "open",  # n / (n + W), n = open (frontier) non-root nodes
    "branches",  # b / (b + W), b = branches opened so far
    "gain",  # best improvement over the baseline relative to |baseline|, sign-aware, log-compressed
    "improved",  # 1 when some revealed score beats the baseline
    "stale",  # s / (s + 3), s = attempts since the best node was revealed, in units of W
    "recent_gain",  # share of the total gain reached by the last W attempts
    "invalid",  # share of invalid attempts so far
    "invalid_recent",  # share of invalid attempts among the last W
    "best_open",  # (best open score - baseline) / (best - baseline), clipped; -1 when none valid
    "best_is_open",  # 1 when the best node can be continued
    "open_valid",  # share of open nodes with a valid score
    "open_improving",  # share of open nodes that beat their parent
    "best_depth",  # d / (d + 5), d = depth of the best node
    "beta",  # the budget preference in [0, 1]
    "cost",  # beta1 * N: V's attempt cost so far (clipped to 1)
    "parallel",  # beta2 * N / max(1, k): V's parallelism bonus so far (clipped to 1)
    "round_limit",  # k / max_rounds (0 without a round limit)
    "workers",  # W / (W + 4)
)
N_FEATURES = len(FEATURE_NAMES)

_GAIN_SCALE = 100.0  # relative gains of 1% map to ~0.1, 100% to ~0.67, >= 10x to 1


def _compress(x: float) -> float:
    """Signed log compression of a relative change onto [-1, 1]."""
    y = math.log1p(abs(x) * _GAIN_SCALE) / math.log1p(10.0 * _GAIN_SCALE)
    return math.copysign(min(1.0, y), x)


def _share(count: int, total: int) -> float:
    return count / total if total else 0.0


def view_features(view: PrefixView) -> np.ndarray:
    """The observation of the macro env: a float32 vector of :data:`FEATURE_NAMES`, each in [-1, 1].

    Computed from the prefix view alone (revealed nodes, frontier, root_slots, baseline, W, beta,
    beta1, beta2, rounds, attempts, max_rounds), never from q or the world's best score, so the
    same features exist online. Every entry is scale-free: scores enter only as differences
    relative to the baseline (or to the best gain so far), so tasks whose raw scores differ by
    orders of magnitude look alike. Decision rounds are not recorded per node, so "recent" means
    the last W revealed attempts (observed ids are in reveal order).
    """
    nodes = view.nodes
    w = max(1, view.workers)
    baseline = view.baseline_score
    attempts = len(nodes) - 1
    opened = open_nodes(view)
    best = view.best()
    best_score = best.score if best.score is not None else baseline
    gain = best_score - baseline
    improved = gain > 0
    relative = gain / abs(baseline) if baseline != 0 else (math.copysign(10.0, gain) if gain else 0.0)

    recent = nodes[max(1, len(nodes) - w) :]
    before = [n.score for n in nodes[: max(1, len(nodes) - w)] if n.score is not None]
    best_before = max(before) if before else baseline
    recent_gain = (best_score - max(best_before, baseline)) / gain if improved else 0.0

    valid_open = [n for n in opened if n.score is not None]
    if valid_open:
        top = max(n.score for n in valid_open)  # type: ignore[type-var]
        if improved:
            best_open = (top - baseline) / gain  # type: ignore[operator]
        else:
            best_open = 0.0 if top >= baseline else -1.0  # type: ignore[operator]
    else:
        best_open = -1.0
    improving = sum(1 for n in opened if n.delta_parent is not None and n.delta_parent > 0)
    stale = (attempts - best.id) / w  # observed ids are in reveal order; the root has id 0

    features = (
        view.rounds / (view.rounds + 10.0),
        view.attempts / (view.attempts + 50.0),
        view.root_slots / w,
        len(opened) / (len(opened) + w),
        view.n_branches / (view.n_branches + w),
        _compress(relative),
        1.0 if improved else 0.0,
        stale / (stale + 3.0),
        recent_gain,
        _share(sum(1 for n in nodes[1:] if n.score is None), attempts),
        _share(sum(1 for n in recent if n.score is None), len(recent)),
        best_open,
        1.0 if best.id in view.frontier and best.id != ROOT else 0.0,
        _share(len(valid_open), len(opened)),
        _share(improving, len(opened)),
        best.depth / (best.depth + 5.0),
        view.beta,
        view.beta1 * view.attempts,
        view.beta2 * view.attempts / max(1, view.rounds),
        view.rounds / view.max_rounds if view.max_rounds else 0.0,
        w / (w + 4.0),
    )
    return np.clip(np.asarray(features, dtype=np.float32), -1.0, 1.0)


# --------------------------------------------------------------------------- macro actions


@dataclass(frozen=True)
class Macro:
    """One macro action. ``share`` sets its width: k = ceil(share * W) selections (at least 1).

    kind: "stop" ([]); "new" (open k branches: the root k times, capped by root_slots);
    "top" (continue the k best open nodes: valid before invalid, higher score first, newer first
    on ties); "mix" (one new branch, if the root may open one, plus the best open nodes up to W).
    """

    kind: str
    share: float = 1.0

    @property
    def name(self) -> str:
        return self.kind if self.kind in ("stop", "mix") else f"{self.kind}{self.share:g}W"

    def width(self, workers: int) -> int:
        return max(1, math.ceil(self.share * workers - 1e-9))


_SHARES = (0.25, 0.5, 0.75, 1.0)  # with W = 4: k = 1, 2, 3, 4
MACRO_ACTIONS: tuple[Macro, ...] = (
    Macro("stop"),
    *(Macro("new", s) for s in _SHARES),
    *(Macro("top", s) for s in _SHARES),
    Macro("mix"),
)
STOP = 0


def ranked_open(view: PrefixView) -> list[int]:
    """Open non-root ids, best first (valid before invalid, then score, then newest)."""
    ranked: list[NodeView] = sorted(open_nodes(view), key=lambda n: (*score_key(n), n.id), reverse=True)
    return [n.id for n in ranked]


def batch_for(view: PrefixView, action: int) -> list[int]:
    """The legal batch a macro action gives on this view ([] for stop or when nothing fits).

    Never more than W selections, the root at most ``root_slots`` times, only frontier ids.
    """
    macro = MACRO_ACTIONS[int(action)]
    w = view.workers
    if macro.kind == "stop":
        return []
    if macro.kind == "new":
        return [ROOT] * min(macro.width(w), view.root_slots, w)
    if macro.kind == "top":
        return ranked_open(view)[: min(macro.width(w), w)]
    roots = [ROOT] * min(1, view.root_slots, w)
    return roots + ranked_open(view)[: w - len(roots)]


def macro_masks(view: PrefixView) -> np.ndarray:
    """Boolean mask over :data:`MACRO_ACTIONS` for MaskablePPO: an action is allowed unless its
    batch would be empty (stop is always allowed)."""
    can_open = view.root_slots > 0 and view.workers > 0
    has_open = any(i != ROOT for i in view.frontier)
    allowed = {"stop": True, "new": can_open, "top": has_open, "mix": can_open or has_open}
    return np.array([allowed[m.kind] for m in MACRO_ACTIONS], dtype=bool)


# --------------------------------------------------------------------------- environment


class MacroReplayEnv(gym.Env):  # type: ignore[type-arg]
    """Replay over a pool of worlds with :data:`MACRO_ACTIONS` and :func:`view_features`.

    Each ``reset`` draws a world from the pool with the env's seeded ``np_random`` (or takes
    ``options={"world": i}``) and a beta (fixed, or drawn from ``betas``; ``options={"beta": b}``
    overrides), then plays a :class:`~dream_gym.session.ReplaySession` (strict: a macro batch is
    always legal). Reward = the change of V, so an episode's rewards sum to its replay score.
    Terminated on stop or when nothing is left to reveal; truncated at ``max_rounds``.
    ``info`` holds ``world`` (id), ``beta``, ``replay_score`` (V so far) and ``batch`` (the
    ids the macro selected); the current view is ``env.view`` (not in ``info``: SB3's vector
    envs deep-copy infos every step, and views hold read-only mappings).

    Args:
        worlds: World objects or references (folder, shipped name, ``ns/name-vN/<world>``).
        workers: W for every world (default 4).
        beta: a fixed budget preference, or a sequence of betas to draw from per episode.
        beta1, beta2: V's coefficients; max_rounds: K2 (None: no limit).
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        worlds: Sequence[World | str | os.PathLike[str]],
        *,
        workers: int = 4,
        beta: float | Sequence[float] = 0.5,
        beta1: float = DEFAULT_BETA1,
        beta2: float = DEFAULT_BETA2,
        max_rounds: int | None = None,
    ):
        if not worlds:
            raise ValueError("MacroReplayEnv needs at least one world")
        self.worlds = [resolve_world(w) for w in worlds]  # type: ignore[arg-type]
        self.workers = int(workers)
        self.betas = (float(beta),) if isinstance(beta, (int, float)) else tuple(float(b) for b in beta)
        if not self.betas or any(not 0.0 <= b <= 1.0 for b in self.betas):
            raise ValueError(f"betas must be in [0, 1], got {self.betas}")
        self.beta1, self.beta2, self.max_rounds = float(beta1), float(beta2), max_rounds
        self.action_space = spaces.Discrete(len(MACRO_ACTIONS))
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(N_FEATURES,), dtype=np.float32)
        self._sessions: dict[tuple[int, float], ReplaySession] = {}
        self.session: ReplaySession | None = None
        self.view: PrefixView | None = None

    def _session(self, world: int, beta: float) -> ReplaySession:
        key = (world, beta)
        if key not in self._sessions:  # kept: a session caches its world's node views
            self._sessions[key] = ReplaySession(
                self.worlds[world], workers=self.workers, beta=beta, beta1=self.beta1,
                beta2=self.beta2, max_rounds=self.max_rounds, strict=True,
            )
        return self._sessions[key]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        world = int(options["world"]) if "world" in options else int(self.np_random.integers(len(self.worlds)))
        if not 0 <= world < len(self.worlds):
            raise ValueError(f"world index {world} out of range (pool of {len(self.worlds)})")
        if "beta" in options:
            beta = float(options["beta"])
        else:
            beta = self.betas[int(self.np_random.integers(len(self.betas)))] if len(self.betas) > 1 else self.betas[0]
        self.session = self._session(world, beta)
        self.session.reset()
        self.view = self.session.view()
        return view_features(self.view), self._info([])

    def _info(self, batch: list[int]) -> dict[str, Any]:
        assert self.session is not None
        return {
            "world": self.session.world.id,
            "beta": self.session.beta,
            "replay_score": self.session.value,
            "batch": batch,
        }

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.session is None or self.view is None:
            raise RuntimeError("call reset() before step()")
        batch = batch_for(self.view, int(action))  # a masked action gives [] and stops
        outcome = self.session.step(batch)
        self.view = self.session.view()
        return view_features(self.view), float(outcome.reward), outcome.terminated, outcome.truncated, self._info(batch)

    def action_masks(self) -> np.ndarray:
        if self.view is None:
            raise RuntimeError("call reset() before action_masks()")
        return macro_masks(self.view)


# --------------------------------------------------------------------------- trained policies


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

    ``act(view)``: :func:`view_features` -> ``model.predict`` (with :func:`macro_masks` for a
    MaskablePPO model) -> :func:`batch_for`. Deterministic by default (the mode of the action
    distribution). A plain PPO model has no masks: an action whose batch would be empty stops.

    Args:
        model: a path to an SB3 ``.zip`` (MaskablePPO or PPO), or a loaded model.
            **An SB3 zip holds pickled Python objects: load only files from a trusted source.**
        deterministic: take the most likely action (True) or sample one.
    """

    def __init__(self, model: Any, *, deterministic: bool = True):
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
        if obs_shape != (N_FEATURES,) or n_actions != len(MACRO_ACTIONS):
            raise ValueError(
                f"model spaces {obs_shape} -> {n_actions} do not match the macro env "
                f"({N_FEATURES} features -> {len(MACRO_ACTIONS)} actions)"
            )
        from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

        self.model = model
        self.maskable = isinstance(model.policy, MaskableActorCriticPolicy)
        self.deterministic = deterministic
        self.context: RunContext | None = None

    def reset(self, context: RunContext) -> None:
        self.context = context
        if not self.deterministic:  # sampled actions: reproducible per episode seed
            import torch

            torch.manual_seed(context.seed)

    def act(self, view: PrefixView) -> list[int]:
        obs = view_features(view)
        if self.maskable:
            action, _ = self.model.predict(obs, deterministic=self.deterministic, action_masks=macro_masks(view))
        else:
            action, _ = self.model.predict(obs, deterministic=self.deterministic)
        return batch_for(view, int(action))


__all__ = [
    "FEATURE_NAMES",
    "MACRO_ACTIONS",
    "N_FEATURES",
    "STOP",
    "Macro",
    "MacroReplayEnv",
    "SB3Policy",
    "batch_for",
    "macro_masks",
    "ranked_open",
    "view_features",
]
