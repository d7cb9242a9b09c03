"""``dream-gym train``: train an RL exploration policy (dream_gym.rl.training)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    from dream_gym.rl.training import ALGOS, ARCHS, config_fields

    p = subparsers.add_parser(
        "train", help="train an RL policy (MaskablePPO / PPO, macro or node-level) on a pool of worlds",
        description="Train MaskablePPO or PPO on a pool of worlds with the beta-priced objective (or plain V); "
                    "checkpoints durably and resumes a killed run from its --out folder; TensorBoard logs in "
                    "OUT/tb; evaluates on the held-out worlds every --eval-every steps (logged only). "
                    "The trained model (OUT/model.zip) works with --policy in eval, replay, grow.")
    choices = {"algo": ALGOS, "arch": ARCHS, "objective": ("v2", "v")}
    for name, default, doc in config_fields():
        flags = ["--" + name.replace("_", "-")] + (["-W"] if name == "workers" else [])  # -W/--workers = W
        kind = type(default)
        p.add_argument(*flags, type=kind, default=default, choices=choices.get(name),
                       help=f"{doc} (default: {default})", metavar=None if name in choices else name.upper())
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dream_gym.rl.training import TrainConfig, config_fields, train

    config = TrainConfig(**{name: getattr(args, name) for name, _, _ in config_fields()})
    summary = train(config)
    final = summary["final"]
    print(f"train pool: v2 {final.get('train_v2', float('nan')):.4f}  mean V {final.get('train_mean_v', float('nan')):.4f}")
    if "heldout_v2" in final:
        print(f"held out:   v2 {final['heldout_v2']:.4f}  mean V {final['heldout_mean_v']:.4f}  "
              f"% of limit {100 * final['heldout_limit_share']:.1f}%")
    return 0
