"""The configuration of ``dream-gym train``: :class:`TrainConfig`, one line of doc per field (the
command's options are built from them, :func:`config_fields`), each checked when made; the range
of every number (:data:`BOUNDS`), which the command line checks too, naming the option."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from dream_gym.evaluation.world_specs import resolve_worlds
from dream_gym.infrastructure.seeds import check_seed
from dream_gym.replay.objectives import DEFAULT_PRICE_HIGH, DEFAULT_PRICE_LOW, ValueFn, make_objective
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2, DEFAULT_BETA_GRID
from dream_gym.replay.settings import STANDARD_WORKERS
from dream_gym.rl.archs import ARCHITECTURES
from dream_gym.world.tree import MAX_WORKERS

ALGOS = ("maskable-ppo", "ppo")
ARCHS = tuple(ARCHITECTURES)
GRID = ",".join(f"{b:g}" for b in DEFAULT_BETA_GRID)


#: The values each choice setting may take.
_CHOICES = {"algo": ALGOS, "arch": ARCHITECTURES, "objective": ("v2", "v")}  # arch: the live registry (extensions add)


@dataclass(frozen=True)
class Bound:
    """The values a numeric setting may take: finite, from ``least`` (``above``: strictly above it)
    up to ``most``."""

    least: float
    most: float = math.inf
    above: bool = False

    def problem(self, value: float) -> str | None:
        """What is wrong with ``value`` (``must be > 0, got -1``), or None. NaN and infinities are wrong."""
        low_ok = value > self.least if self.above else value >= self.least
        if low_ok and value <= self.most and math.isfinite(value):
            return None
        if self.most == math.inf:
            wanted = f"{'>' if self.above else '>='} {self.least:g}"
        else:
            wanted = f"in {'(' if self.above else '['}{self.least:g}, {self.most:g}]"
        return f"must be {'a finite number ' if not math.isfinite(value) and value == value else ''}{wanted}, got {value}"


#: The values each numeric setting may take (0 means "the architecture's default" where allowed);
#: the CLI checks each option against its bound before anything is written.
BOUNDS = {
    "workers": Bound(1, MAX_WORKERS), "timesteps": Bound(1), "n_envs": Bound(0), "n_steps": Bound(0), "batch_size": Bound(1),
    "n_epochs": Bound(1), "hidden": Bound(0), "max_candidates": Bound(1), "eval_every": Bound(0),
    "checkpoint_every": Bound(0), "torch_threads": Bound(1),
    "learning_rate": Bound(0, above=True), "gamma": Bound(0, 1, above=True), "gae_lambda": Bound(0, 1),
    "clip_range": Bound(0, above=True), "ent_coef": Bound(0),
    "price_high": Bound(0, above=True), "price_low": Bound(0, above=True),
}


@dataclass
class TrainConfig:
    algo: str = "maskable-ppo"
    """maskable-ppo (sb3-contrib, with action masks) or ppo (stable-baselines3; no masks)"""
    arch: str = "macro"
    """macro (one of 10 macro actions a round), node (a candidate node or commit a step), options (a built-in's batch a round)"""
    worlds: str = "train"
    """worlds to train on: a split (train), a dataset split (ns/name-vN:train), folder, dataset id, comma list"""
    prefixes: str = ""
    """also train on each world stopped after its first n attempts, n from this comma list (runs of every length)"""
    heldout: str = "heldout"
    """worlds of the periodic held-out evaluation (logged only, never used for selection; empty: none)"""
    betas: str = GRID
    """betas drawn per training episode (beta is a feature the policy sees), and the evaluation grid"""
    objective: str = "v2"
    """v2 (beta prices work: attainment - price(beta) * work - lam * rounds/attempts) or v (plain V)"""
    price_high: float = DEFAULT_PRICE_HIGH
    """v2 objective: the price of all of a world's recorded attempts at beta = 0"""
    price_low: float = DEFAULT_PRICE_LOW
    """v2 objective: the same at beta = 1 (geometric in between)"""
    workers: int = STANDARD_WORKERS
    """W: attempts per decision round"""
    draw_workers: str = ""
    """W drawn per training episode from this comma list (W is a feature the policy sees; empty: --workers for every episode)"""
    draw_prices: str = ""
    """V's prices beta1:beta2 drawn per training episode from this comma list, e.g. 0.003:0.02,0.002:0 (the policy sees them; objective v scores each episode by its own; empty: 0.003:0.02)"""
    timesteps: int = 200_000
    """env steps to train for (macro: rounds; node: selections and commits)"""
    seed: int = 0
    """seed of python, numpy, torch and the envs (world and beta draws)"""
    n_envs: int = 0
    """parallel episodes (0: 64 for macro on the vector env, 8 for node and options)"""
    n_steps: int = 0
    """steps per env per rollout (0: 64 for macro, 256 for node and options)"""
    batch_size: int = 512
    """minibatch size"""
    n_epochs: int = 10
    """optimisation epochs per rollout"""
    learning_rate: float = 3e-4
    """Adam learning rate"""
    gamma: float = 1.0
    """discount (1: an episode's return is its objective)"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    clip_range: float = 0.2
    """PPO clip range"""
    ent_coef: float = 0.01
    """entropy bonus"""
    hidden: int = 0
    """width of the hidden layers (0: 64 for macro and options (two layers), 32 for the node scorer)"""
    max_candidates: int = 16
    """node: candidate rows of the observation during training (inference scores all of them)"""
    eval_every: int = 50_000
    """steps between evaluations on the train pool and the held-out worlds (0: only at the end)"""
    checkpoint_every: int = 20_000
    """steps between durable checkpoints (rounded up to whole rollouts; 0: only at the end)"""
    torch_threads: int = 1
    """torch CPU threads (small networks gain nothing from more)"""
    out: str = "out/train"
    """run folder: config.json, checkpoint-<step>.zip, progress.json, evals.jsonl, tb/, model.zip, summary.json"""

    def __post_init__(self) -> None:
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        for name, bound in BOUNDS.items():
            if problem := bound.problem(getattr(self, name)):
                raise ValueError(f"{name} {problem}")
        check_seed(self.seed)
        if self.price_low > self.price_high:
            raise ValueError(f"price_low must be at most price_high, got {self.price_low} and {self.price_high}")
        try:
            valid = all(n >= 1 for n in self.prefix_attempts)
        except ValueError:
            valid = False
        if not valid:
            raise ValueError(f"prefixes must be a comma list of positive attempt counts, got {self.prefixes!r}")
        self.episode_settings  # noqa: B018 - parses and checks --draw-workers and --draw-prices
        if not _comma_list(self.betas, "betas", _beta, "budget preferences in [0, 1]"):
            raise ValueError(f"betas must list at least one budget preference in [0, 1], got {self.betas!r}")
        for name, default in ARCHITECTURES[self.arch].defaults.items():  # 0: the architecture's own
            setattr(self, name, getattr(self, name) or default)

    @property
    def prefix_attempts(self) -> list[int]:
        return [int(n) for n in self.prefixes.split(",") if n.strip()]

    @property
    def beta_grid(self) -> list[float]:
        return [float(b) for b in self.betas.split(",") if b.strip()]

    @property
    def episode_settings(self) -> list[tuple[int, float, float]]:
        """The (W, beta1, beta2) a training episode draws from (uniformly): every W of
        ``draw_workers`` with every price pair of ``draw_prices``; one entry, ``(workers, 0.003,
        0.02)``, when neither is given. ValueError names a malformed list."""
        workers = _comma_list(self.draw_workers, "draw_workers", _worker_count, f"W from 1 to {MAX_WORKERS}") \
            or [self.workers]
        prices = _comma_list(self.draw_prices, "draw_prices", _price_pair,
                             "beta1:beta2 (two numbers >= 0)") or [(DEFAULT_BETA1, DEFAULT_BETA2)]
        return [(w, beta1, beta2) for w in workers for beta1, beta2 in prices]

    def value_fn(self) -> ValueFn:
        if self.objective == "v2":
            return make_objective("v2", price_high=self.price_high, price_low=self.price_low)
        return make_objective(self.objective)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _worker_count(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_WORKERS:
        raise ValueError(text)
    return value


def _beta(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise ValueError(text)
    return value


def _price_pair(text: str) -> tuple[float, float]:
    beta1, sep, beta2 = text.partition(":")
    pair = (float(beta1), float(beta2))
    if not sep or not all(math.isfinite(x) and x >= 0 for x in pair):
        raise ValueError(text)
    return pair


def _comma_list(text: str, name: str, parse: Callable[[str], Any], what: str) -> list[Any]:
    """The entries of a comma list, each parsed; ValueError names the setting and the entry."""
    entries = [part.strip() for part in text.split(",") if part.strip()]
    values = []
    for entry in entries:
        try:
            values.append(parse(entry))
        except ValueError:
            raise ValueError(f"{name} must be a comma list of {what}; {entry!r} is not one") from None
    if len(set(values)) != len(values):
        raise ValueError(f"{name} lists an entry twice: {text!r}")
    return values


def config_fields() -> list[tuple[str, Any, str]]:
    """(name, default, one-line doc) of every TrainConfig field (the CLI is built from them)."""
    import ast
    import inspect

    body = ast.parse(inspect.getsource(TrainConfig)).body[0].body  # type: ignore[attr-defined]
    docs = {s.target.id: str(n.value.value) for s, n in zip(body, body[1:], strict=False)  # type: ignore[attr-defined]
            if isinstance(s, ast.AnnAssign) and isinstance(n, ast.Expr) and isinstance(s.target, ast.Name)}
    return [(f.name, f.default, docs.get(f.name, "")) for f in fields(TrainConfig)]


def same_setting(name: str, recorded: Any, given: Any) -> bool:
    """Whether a setting recorded by a run and the one given mean the same: equal, or the same
    numbers (betas 1 and 1.0, W lists, price pairs, prefixes) or the same worlds (a shipped
    world by its name or its dataset's reference) spelled differently."""
    if recorded == given:
        return True
    if not isinstance(recorded, str) or not isinstance(given, str):
        return False
    parse = _MEANING.get(name)
    if parse is None:
        return False
    try:
        return bool(parse(recorded) == parse(given))
    except (LookupError, ValueError, OSError):  # a recorded spec that no longer parses or resolves
        return False


def _world_keys(spec: str) -> list[tuple[str, str | None]]:
    return [(world.id, world.meta.get("sha256")) for world in resolve_worlds(spec)] if spec else []


#: How each setting given as text is read, to compare what two spellings mean.
_MEANING: dict[str, Callable[[str], Any]] = {
    "betas": lambda text: _comma_list(text, "betas", _beta, "budget preferences in [0, 1]"),
    "prefixes": lambda text: _comma_list(text, "prefixes", _positive_int, "attempt counts"),
    "draw_workers": lambda text: _comma_list(text, "draw_workers", _worker_count, "W"),
    "draw_prices": lambda text: _comma_list(text, "draw_prices", _price_pair, "beta1:beta2"),
    "worlds": _world_keys,
    "heldout": _world_keys,
}


__all__ = ["ALGOS", "ARCHS", "BOUNDS", "GRID", "Bound", "TrainConfig", "config_fields", "same_setting"]
