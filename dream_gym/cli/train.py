"""``dream-gym train``: train an RL exploration policy (dream_gym.training.trainer)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dream_gym.cli.options import add_trust_model, any_case, number, parse_seed, whole_number
from dream_gym.cli.shown import say


def register(subparsers: argparse._SubParsersAction, with_options: bool = True) -> None:
    """Add ``train``; ``with_options=False`` leaves out its options (another command runs: they
    come from the training config, whose import loads the RL stack)."""
    p = subparsers.add_parser(
        "train", help="train an RL policy (MaskablePPO / PPO, macro or node-level) on a pool of worlds",
        description="Train MaskablePPO or PPO on a pool of worlds with the beta-priced objective (or plain V); "
                    "checkpoints durably and resumes a killed run from its --out folder (the checkpoint of that "
                    "folder only, loaded as data unless --trust-model); TensorBoard logs in "
                    "OUT/tb; evaluates on the held-out worlds every --eval-every steps (logged only). "
                    "The trained model (OUT/model.zip) works with --policy in eval, replay, grow.")
    # killed or interrupted, the same command resumes from its checkpoint, which progress.json names
    p.set_defaults(func=run, continues=True, progress_file="progress.json")
    if not with_options:
        return
    add_trust_model(p)
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out, refused where it holds none (the same command without "
                        "--resume continues it too, or starts a new run)")
    from dream_gym.training.config import ALGOS, ARCHS, BOUNDS, config_fields

    choices = {"algo": ALGOS, "arch": ARCHS, "objective": ("v2", "v")}
    for name, default, doc in config_fields():
        flags = ["--" + SPELLINGS.get(name, name).replace("_", "-")] + (["-W"] if name == "workers" else [])
        kind = (parse_seed if name == "seed" else bounded(type(default), BOUNDS[name]) if name in BOUNDS
                else any_case(*choices["objective"]) if name == "objective" else type(default))
        p.add_argument(*flags, dest=name, type=kind, default=default, choices=choices.get(name),
                       help=f"{doc} (default: {default})" if default != "" else doc,  # an empty default: the doc says it
                       metavar=None if name in choices else "WORLDS" if name == "heldout" else name.upper())
        if name in SPELLINGS:  # the field's own spelling still works, unlisted
            p.add_argument("--" + name, dest=name, type=kind, default=default, help=argparse.SUPPRESS)


#: Options spelt as the other commands spell them, not as their configuration field (``heldout``).
SPELLINGS = {"heldout": "held_out"}


def bounded(kind: type, bound: Any) -> Callable[[str], Any]:
    """An argparse type: ``kind`` (int or float) within ``bound`` (a :class:`~dream_gym.training.config.Bound`),
    so that argparse names the option (the config would name its field)."""
    def parse(text: str) -> Any:
        value = whole_number(text) if kind is int else number(text)
        if problem := bound.problem(value):
            raise argparse.ArgumentTypeError(problem)
        return value

    return parse


def run(args: argparse.Namespace) -> int:
    from dream_gym.cli.names import betas_note, recorded_w, resolve_world_specs, worlds_count
    from dream_gym.training.trainer import TrainConfig, config_fields, train

    if args.price_low > args.price_high:
        raise ValueError(f"--price-low {args.price_low:g} is above --price-high {args.price_high:g}")
    config = TrainConfig(**{name: getattr(args, name) for name, _, _ in config_fields()})
    if args.resume and not (Path(config.out) / "config.json").is_file():
        raise FileNotFoundError(f"--resume: {config.out} holds no training run to continue (no config.json); "
                                "without --resume the command starts one")
    pool = resolve_world_specs(config.worlds, "--worlds")
    heldout = resolve_world_specs(config.heldout, "--held-out") if config.heldout else []
    summary = train(config, trust_model=args.trust_model)
    final = summary["final"]
    w, betas = config.workers, betas_note(config.beta_grid)
    say(f"train pool ({worlds_count(pool)} at W = {w}, betas {betas}): "
        f"v2 {final.get('train_v2', float('nan')):.4f}  mean V {final.get('train_mean_v', float('nan')):.4f}")
    if "heldout_v2" in final:
        say(f"held out ({worlds_count(heldout)} at W = {w}, betas {betas}): v2 {final['heldout_v2']:.4f}  "
            f"mean V {final['heldout_mean_v']:.4f}  {100 * final['heldout_limit_share']:.1f}% of the limit")
        if any(world.workers != w for world in heldout):
            say(f"note: these held-out figures are at W = {w} for every world; `dream-gym eval` replays each "
                f"world at its recorded W ({recorded_w(heldout)}) unless given -W, so `dream-gym eval --policy "
                f"{config.out}/model.zip --worlds {config.heldout} -W {w}` gives these figures and without -W "
                "it gives others")
    return 0
