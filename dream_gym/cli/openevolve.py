"""``dream-gym openevolve``: run OpenEvolve 0.4 with a dream_gym policy choosing the parents."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from dream_gym.cli.deploy import add_run_arguments
from dream_gym.cli.options import (
    BUILTIN_TASKS,
    add_read,
    add_trust_model,
    add_workers,
    parse_key_values,
    positive_int,
    run_status,
    stop_hint,
    unit_number,
)
from dream_gym.replay.settings import DEFAULT_BETA


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("openevolve", help="run OpenEvolve with a dream_gym exploration policy (extra openevolve)",
                              description="OpenEvolve 0.4 with the parents chosen by a dream_gym policy.")
    sub = p.add_subparsers(dest="openevolve_command", required=True, metavar="ACTION")
    run = sub.add_parser("run", help="run OpenEvolve, recorded as a world folder",
                         description="Run OpenEvolve with --policy choosing the parents (or 'native': OpenEvolve's "
                                     "own sampling), recorded as a dream_gym world in --out as it goes.")
    add_run_arguments(run, own_selection="OpenEvolve's own parent sampling",
                      workers_help="W: OpenEvolve's parallel evaluations, and the most selections per round",
                      budget=("--iterations", "OpenEvolve iterations (attempts)"),
                      model_help="an OpenAI-compatible model (openai/<name> or <name>); default: the task's built-in "
                                 "agent, or the generic agent for a task given as files, behind a local agent server "
                                 "(no LLM, no key)")
    run.add_argument("--config", dest="config_path", type=Path, default=None,
                     help="an OpenEvolve config.yaml to start from (W, budget, seed and model are set from the options)")
    run.add_argument("--beta", type=unit_number, default=DEFAULT_BETA,
                     help=f"budget preference shown to the policy, in [0, 1] (default {DEFAULT_BETA})")
    run.add_argument("--frontier", choices=("any", "leaves"), default="any",
                     help="which programs the policy may continue (default any: OpenEvolve continues any program)")
    run.add_argument("--checkpoint-interval", type=positive_int, default=10, help="OpenEvolve checkpoints every N iterations (default 10)")
    run.add_argument("--id", dest="world_id", default=None, help="world id (default: the folder name)")
    run.add_argument("--unsafe-no-sandbox", action="store_true", default=argparse.SUPPRESS,
                     help="run policy files and candidates WITHOUT the sandbox (as dream-gym openevolve --unsafe-no-sandbox)")
    add_read(run)
    add_trust_model(run)
    run.set_defaults(func=run_command)
    files = sub.add_parser("task", help="write a built-in task as OpenEvolve files (initial_program.py, evaluator.py)",
                           description="Write initial_program.py and evaluator.py of a built-in task for openevolve-run; "
                                       "with --api-base also a config.yaml pointing at that server (dream-gym serve-agent).")
    files.add_argument("task", help=f"a built-in task: {BUILTIN_TASKS}")
    files.add_argument("--out", required=True, type=Path, help="the folder to write the files into")
    files.add_argument("--api-base", default=None, help="write config.yaml for this OpenAI-compatible server")
    add_workers(files, default=2, help="parallel evaluations in the config.yaml (default 2)")
    files.add_argument("--force", action="store_true", help="replace the files if --out holds them already")
    files.set_defaults(func=task_command)


def run_command(args: argparse.Namespace) -> int:
    from dream_gym.cli.names import check_policy
    from dream_gym.cli.shown import console as shown_console
    from dream_gym.integrations.deploy import NATIVE_POLICY
    from dream_gym.integrations.openevolve import BridgeConfig, run_openevolve

    if args.policy != NATIVE_POLICY:
        check_policy(args.policy)  # a misspelt name gets the nearest names, before anything runs
    config = BridgeConfig(
        task=args.task, out=args.out, policy=args.policy, workers=args.workers, iterations=args.iterations,
        seed=args.seed, model=args.model, api_base=args.api_base, config_path=args.config_path, beta=args.beta,
        frontier=args.frontier, resume=args.resume, checkpoint_interval=args.checkpoint_interval,
        world_id=args.world_id, command=shlex.join(["dream-gym", *args.argv]),
        policy_params=parse_key_values(args.policy_arg), trust_model=args.trust_model, read=tuple(args.read),
    )
    result = run_openevolve(config)
    console = shown_console()  # the run's summary, like grow's and import's: what `> log` keeps
    console.print(
        f"{result.nodes} nodes ({result.invalid} invalid), {result.iterations} iterations in {result.rounds} rounds, "
        f"best combined_score {result.best_score}, stopped by {result.stopped_by}, {result.seconds:.1f}s "
        f"(OpenEvolve {result.openevolve})"
    )
    if hint := stop_hint(result.stopped_by, args.policy, args.policy_arg):
        console.print(hint, markup=False)
    if result.resumed:
        console.print(f"resume: {result.resumed}", markup=False)
    console.print(f"world: {result.folder}  OpenEvolve output: {result.folder / 'openevolve'}")
    return run_status(result.folder, result.stopped_by, shown_console(stderr=True))


def task_command(args: argparse.Namespace) -> int:
    from dream_gym.integrations.openevolve.evaluator import write_config, write_task_files

    names = ["initial_program.py", "evaluator.py", *(["config.yaml"] if args.api_base else [])]
    there = [name for name in names if (args.out / name).exists()]
    if there and not args.force:  # perhaps edited since: a user's work is not replaced without a word
        raise FileExistsError(f"{args.out} holds {', '.join(there)} already; pass --force to replace "
                              f"{'them' if len(there) > 1 else 'it'}, or write into another --out")
    initial, evaluator = write_task_files(args.task, args.out)
    print(initial)
    print(evaluator)
    if args.api_base:
        print(write_config(args.out / "config.yaml", api_base=args.api_base, workers=args.workers))
    return 0
