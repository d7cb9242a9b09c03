"""``dream-gym deploy``: run a discovery system with a dream_gym policy choosing the parents."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from dream_gym.cli.options import (
    BUILTIN_TASKS,
    add_policy_args,
    add_read,
    add_trust_model,
    add_workers,
    parse_key_values,
    parse_seed,
    positive_int,
    run_status,
    stop_hint,
    unit_number,
)
from dream_gym.replay.settings import DEFAULT_BETA, recorder_or


def register(subparsers: argparse._SubParsersAction) -> None:
    from dream_gym.integrations.deploy import SYSTEMS

    p = subparsers.add_parser(
        "deploy", help="run a discovery system (OpenEvolve, ShinkaEvolve, SkyDiscover) with a dream_gym policy",
        description="Run --system with --policy choosing the parents (or 'native': the system's own selection), "
                    "recorded as a dream_gym world in --out as it goes. Without --model the children come from "
                    "dream_gym's no-LLM agent behind a local agent server (no key).")
    p.add_argument("--system", required=True, choices=sorted(SYSTEMS), help="the discovery system to run")
    add_run_arguments(p, own_selection="the system's own parent selection",
                      workers_help="W: the system's parallel evaluations, and the most selections per round",
                      budget=("--budget", "programs to propose, the run's attempts (with SkyDiscover's native "
                                        "selection its iterations, whose retries add programs)"),
                      model_help="an OpenAI-compatible model; default: dream_gym's no-LLM agent behind a local agent server")
    p.add_argument("--beta", type=unit_number, default=DEFAULT_BETA,
                   help=f"budget preference shown to the policy, in [0, 1] (default {DEFAULT_BETA})")
    p.add_argument("--id", dest="world_id", default=None, help="world id (default: the folder name)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", dest="system_option",
                   help="a setting of the system (repeatable), e.g. SkyDiscover's --option search=adaevolve")
    add_read(p)
    add_trust_model(p)
    p.set_defaults(func=run_command)


def add_run_arguments(p: argparse.ArgumentParser, *, own_selection: str, workers_help: str,
                      budget: tuple[str, str], model_help: str) -> None:
    """The arguments every verb that runs a system with a policy takes (``deploy``, ``openevolve
    run``): the task, the policy (``own_selection``: what ``native`` stands for), W, the budget
    (its flag and help), the seed, the world folder and the model."""
    from dream_gym.integrations.deploy import NATIVE_POLICY

    p.add_argument("--task", required=True,
                   help=f"a built-in task ({BUILTIN_TASKS}) or initial_program.py,evaluator.py")
    policy = recorder_or(NATIVE_POLICY)
    p.add_argument("--policy", "-p", default=policy,
                   help="any policy dream-gym eval takes (built-in, policy .py file, model, chosen.py), "
                        f"or '{NATIVE_POLICY}' for {own_selection} (default {policy})")
    add_policy_args(p)
    add_workers(p, default=2, help=f"{workers_help} (default 2)")
    flag, budget_help = budget
    p.add_argument(flag, type=positive_int, required=True, help=budget_help)
    p.add_argument("--seed", type=parse_seed, default=0, help="seed of the system, the agent and the policy (default 0)")
    p.add_argument("--out", required=True, type=Path, help="the world folder to write")
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--model", default=None, help=model_help)
    p.add_argument("--api-base", default=None, help="base URL of the OpenAI-compatible server of --model")


def run_command(args: argparse.Namespace) -> int:
    from dream_gym.cli.names import check_loads
    from dream_gym.cli.shown import console as shown_console
    from dream_gym.cli.watch import NodesWatch
    from dream_gym.integrations.deploy import NATIVE_POLICY, DeployRequest, deploy

    if args.policy != NATIVE_POLICY:
        check_loads(args.policy)  # a misspelt name gets the nearest names; a file that does not load is named
    request = DeployRequest(
        system=args.system, task=args.task, out=args.out, policy=args.policy, workers=args.workers,
        budget=args.budget, seed=args.seed, model=args.model, api_base=args.api_base, beta=args.beta,
        resume=args.resume, world_id=args.world_id, command=shlex.join(["dream-gym", *args.argv]),
        policy_params=parse_key_values(args.policy_arg), trust_model=args.trust_model,
        options=parse_key_values(args.system_option, "--option"), read=tuple(args.read),
    )
    with NodesWatch(args.out, args.budget + 1, f"{args.system} run"):  # on a terminal
        result = deploy(request)
    console = shown_console()  # the run's summary, like grow's and import's: what `> log` keeps
    console.print(f"{result.nodes} nodes ({result.invalid} invalid), best score {'none (no valid program)' if result.best_score is None else result.best_score}, "
                  f"stopped by {result.stopped_by}, {result.seconds:.1f}s ({result.system} {result.version}, "
                  f"policy {args.policy})", markup=False)
    if hint := stop_hint(result.stopped_by, args.policy, args.policy_arg):
        console.print(hint, markup=False)
    if empty := result.extra.get("without_program"):  # an LLM answer that held no program
        console.print(f"{empty} proposal{'s' if empty > 1 else ''} made no program (the system's log says why): "
                      "the world holds no node for them, and replay charges neither their attempts nor their "
                      "rounds", markup=False)
    if resumed := result.extra.get("resumed"):
        console.print(f"resume: {resumed}", markup=False)
    console.print(f"world: {result.folder}", markup=False)
    return run_status(result.folder, result.stopped_by, shown_console(stderr=True))
