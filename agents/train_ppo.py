"""Train a MaskablePPO exploration policy on a pool of recorded worlds; test it on held-out worlds.

    .venv/bin/python agents/train_ppo.py                       # defaults: train / heldout of dream-gym/recorded-v1
    .venv/bin/python agents/train_ppo.py --total-timesteps 300000 --seed 1 --out out/ppo_s1
    dream-gym eval --policy out/ppo/ppo_macro.zip --policy greedy --worlds heldout

CleanRL-style: one file, read top to bottom. The agent does not pick node ids: each step it
picks one of ``dream_gym.rl.MACRO_ACTIONS`` (stop, open k branches, continue the k best open
nodes, or a mix), turned into a legal batch by fixed rules; it observes ``view_features`` (a
scale-free summary of the prefix view, beta included). Reward = the change of the objective
(``--objective v2``, the default: beta sets the price of work, see ``dream_gym.replay.objectives.PricedAttainment``;
``--objective v``: the replay score V), so the return of an episode is its objective.
``dream-gym train`` is the full-featured trainer (node-level policy, checkpoints and resume,
TensorBoard, periodic held-out evaluation); this file is the one to read. The trained model is saved as an SB3 zip, then evaluated with
the same harness and leaderboard as the built-in policies (``dream_gym.evaluation.evaluate``), on worlds it
never saw.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import DummyVecEnv

from dream_gym.cli.options import refuse_old_spellings
from dream_gym.evaluation.evaluate import evaluate, leaderboard, resolve_worlds
from dream_gym.policy import run_episode
from dream_gym.replay.objectives import DEFAULT_PRICE_HIGH, DEFAULT_PRICE_LOW, make_objective
from dream_gym.replay.score import DEFAULT_BETA_GRID
from dream_gym.rl import MacroReplayEnv, SB3Policy, sb3_vec_env
from dream_gym.training.trainer import seed_everything  # python, numpy, torch; threads; deterministic kernels
from dream_gym.world.registry import load_cached, shipped_worlds_dir
from dream_gym.world.tree import World

ALL_BASELINES = "random,greedy,fixed,ucb,puct,hyperband,openevolve,shinka,stagnation"


@dataclass
class Args:
    seed: int = 0
    """seed of python, numpy, torch and the envs (world and beta draws)"""
    total_timesteps: int = 150_000
    """environment steps (macro decisions) to train for"""
    train_worlds: str = "train"
    """worlds to train on: a split (train), folder, folder of worlds, dataset id, comma list"""
    heldout_worlds: str = "heldout"
    """worlds to test on (never seen in training); same syntax"""
    workers: int = 4
    """W: attempts per decision round"""
    betas: str = "0.0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0"
    """betas drawn per training episode (beta is a feature the policy sees)"""
    eval_betas: str = "0.0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0"
    """beta grid of the held-out evaluation (the v2 objective's grid)"""
    objective: str = "v2"
    """reward: v2 (beta prices work: attainment - price(beta) * work - 0.1 * rounds/attempts) or v (the change of V)"""
    price_high: float = DEFAULT_PRICE_HIGH
    """v2: the price of all of a world's recorded attempts at beta = 0"""
    price_low: float = DEFAULT_PRICE_LOW
    """v2: the same at beta = 1 (geometric in between)"""
    n_envs: int = 64
    """parallel episodes (one process; stepped in one call with vector_env)"""
    vector_env: bool = True
    """step the n_envs episodes in one call (dream_gym.rl.sb3_vec_env) instead of a DummyVecEnv of MacroReplayEnvs"""
    learning_rate: float = 3e-4
    """Adam learning rate"""
    n_steps: int = 32
    """steps per env per rollout (n_envs * n_steps = 2,048 per rollout)"""
    batch_size: int = 256
    """minibatch size"""
    n_epochs: int = 10
    """optimisation epochs per rollout"""
    gamma: float = 1.0
    """discount (1: the return is exactly V)"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    clip_range: float = 0.2
    """PPO clip range"""
    ent_coef: float = 0.01
    """entropy bonus"""
    net_arch: str = "64,64"
    """hidden layer sizes of the policy and value MLPs"""
    torch_threads: int = 1
    """torch intra-op CPU threads (small MLPs gain nothing from more; results are reproducible for a given count)"""
    deterministic_torch: bool = True
    """torch.use_deterministic_algorithms(True): refuse nondeterministic kernels (all used here have CPU deterministic ones)"""
    baselines: str = ALL_BASELINES
    """built-in policies to compare against (comma list; empty: none)"""
    eval_jobs: int = 2
    """processes of the evaluation"""
    out: str = "out/ppo"
    """output folder: ppo_macro.zip, results.jsonl, leaderboard.md, summary.json"""
    skip_eval: bool = False
    """train and save only"""


def parse_args(argv: Sequence[str] | None = None) -> Args:
    """argparse generated from the dataclass: --total-timesteps 1000, --skip-eval, ..."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    refuse_old_spellings(parser, ("--eval-workers",), "--eval-jobs for the evaluation's processes")
    docs = _field_docs()
    for f in fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=docs.get(f.name))
        else:
            kind = {"int": int, "float": float, "str": str}[str(f.type)]
            parser.add_argument(flag, type=kind, default=f.default, help=f"{docs.get(f.name)} (default: {f.default})")
    return Args(**vars(parser.parse_args(argv)))


def _field_docs() -> dict[str, str]:
    """The one-line string under each field of Args (read from this file's source)."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(Args))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for stmt, nxt in zip(body, body[1:], strict=False):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(nxt, ast.Expr):
            docs[stmt.target.id] = str(nxt.value.value)  # type: ignore[attr-defined]
    return docs


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def load_worlds(spec: str) -> list[World]:
    """resolve_worlds(spec); before the shipped dataset.json exists, the split names fall back to
    the dataset card's rule (held out: circle-packing-32 and every seed-1 world)."""
    try:
        return resolve_worlds(spec)
    except LookupError:
        if spec not in ("train", "heldout"):
            raise
    folders = sorted(p for p in shipped_worlds_dir().iterdir() if (p / "world.json").is_file())
    held = [p for p in folders if p.name.startswith("cp32") or p.name.endswith("-s1")]
    chosen = held if spec == "heldout" else [p for p in folders if p not in held]
    print(f"[note] no shipped dataset.json yet: split {spec!r} = {len(chosen)} world folders by the card's rule")
    return [load_cached(p) for p in chosen]


def make_model(args: Args, worlds: list[World]) -> MaskablePPO:
    """MaskablePPO on n_envs episodes over the train pool: one MacroVectorEnv (seeded with the
    seed), or a DummyVecEnv of MacroReplayEnvs (env i seeded seed + i)."""
    betas = floats(args.betas)
    prices = {"price_high": args.price_high, "price_low": args.price_low} if args.objective == "v2" else {}
    value_fn = make_objective(args.objective, **prices)  # what an episode's rewards sum to
    if args.vector_env:
        vec_env = sb3_vec_env(worlds, args.n_envs, workers=args.workers, beta=betas, value_fn=value_fn)
    else:
        def make_env() -> MacroReplayEnv:
            return MacroReplayEnv(worlds, workers=args.workers, beta=betas, value_fn=value_fn)

        vec_env = DummyVecEnv([make_env for _ in range(args.n_envs)])
    vec_env.seed(args.seed)  # the world and beta draws
    hidden = [int(x) for x in args.net_arch.split(",") if x.strip()]
    return MaskablePPO(
        "MlpPolicy",
        vec_env,
        learning_rate=args.learning_rate,
        n_steps=args.n_steps,
        batch_size=args.batch_size,
        n_epochs=args.n_epochs,
        gamma=args.gamma,
        gae_lambda=args.gae_lambda,
        clip_range=args.clip_range,
        ent_coef=args.ent_coef,
        policy_kwargs={"net_arch": {"pi": hidden, "vf": hidden}},
        seed=args.seed,
        device="cpu",
        verbose=0,
    )


def mean_v(policy: Any, worlds: list[World], betas: Sequence[float], workers: int, seed: int = 0) -> float:
    """Mean replay score V of a policy over worlds x betas (the evaluation fast path)."""
    scores = [
        run_episode(policy, world, seed=seed, workers=workers, beta=beta).replay_score
        for world in worlds
        for beta in betas
    ]
    return float(np.mean(scores))


def train(args: Args) -> tuple[MaskablePPO, dict[str, Any]]:
    """Train on the train pool; return the model and what was measured."""
    settings = seed_everything(args.seed, args.torch_threads, args.deterministic_torch)
    print("determinism:", settings)
    worlds = load_worlds(args.train_worlds)
    model = make_model(args, worlds)
    betas = floats(args.betas)
    before = mean_v(SB3Policy(model), worlds, betas, args.workers, args.seed)
    started = time.perf_counter()
    model.learn(total_timesteps=args.total_timesteps)
    seconds = time.perf_counter() - started
    after = mean_v(SB3Policy(model), worlds, betas, args.workers, args.seed)
    stats = {"train_worlds": len(worlds), "seconds": seconds, "timesteps": float(model.num_timesteps),
             "train_mean_v_untrained": before, "train_mean_v_trained": after, "determinism": settings}
    return model, stats


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print("args:", dataclasses.asdict(args))

    model, stats = train(args)
    model_path = out / "ppo_macro.zip"
    model.save(model_path)
    print(f"trained {stats['timesteps']:.0f} steps on {stats['train_worlds']:.0f} worlds in {stats['seconds']:.1f}s; "
          f"train-pool mean V {stats['train_mean_v_untrained']:.4f} (untrained) -> "
          f"{stats['train_mean_v_trained']:.4f} (trained); saved {model_path}")
    summary: dict[str, Any] = {"args": dataclasses.asdict(args), "train": stats}
    if not args.skip_eval:
        heldout = load_worlds(args.heldout_worlds)
        policies = [str(model_path)] + [b for b in args.baselines.split(",") if b.strip()]
        results = evaluate(
            policies, heldout, floats(args.eval_betas) or list(DEFAULT_BETA_GRID),
            jobs=args.eval_jobs, out=out / "results.jsonl", progress=False, seed=args.seed,
        )
        board = leaderboard(results)
        print(board.to_text(per_world=False))
        (out / "leaderboard.md").write_text(board.to_markdown(), encoding="utf-8")
        summary["heldout"] = {row.policy if row.policy != str(model_path) else "ppo": dataclasses.asdict(row)
                              for row in board.overall}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
