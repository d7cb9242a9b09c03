"""``dream-gym replay``: replay one policy on one world and show its result (and the revealed tree)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from dream_gym.cli.options import (
    add_allow_errors,
    add_file_limits,
    add_max_attempts,
    add_policy_args,
    add_trust_model,
    add_workers,
    file_options,
    parse_key_values,
    parse_seed,
    positive_int,
    report_failures,
    unit_number,
)
from dream_gym.cli.shown import say, shown
from dream_gym.replay.settings import DEFAULT_BETA

if TYPE_CHECKING:
    from dream_gym.policy import EpisodeResult


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("replay", help="replay a policy on one recorded world",
                              description="Replay one policy on one world and print its result (--tree: also the revealed tree). "
                                          "Exits 1 when the episode ended with an error (on stderr), unless "
                                          "--allow-errors.")
    p.add_argument("world", help="world folder, shipped world name, or namespace/name-vN/<world>")
    p.add_argument("--policy", "-p", default="recommended",
                   help="built-in name, shipped model, module:Class, or a policy .py file (default: recommended); "
                        "'greedy(patience=10)' gives parameters")
    add_policy_args(p)
    p.add_argument("--beta", type=unit_number, default=DEFAULT_BETA, help=f"budget preference in [0, 1] (default {DEFAULT_BETA})")
    add_workers(p, help="W: attempts per round (default: the world's recorded W)")
    p.add_argument("--max-rounds", type=positive_int, default=None, help="round limit K2 (default: none)")
    add_max_attempts(p)
    p.add_argument("--frontier", choices=("leaves", "any"), default=None,
                   help="which revealed nodes the policy may select: leaves, or any (default: the world's own rule)")
    p.add_argument("--requests", action="store_true",
                   help="request mode: the policy chooses among what an online run could continue; what the record "
                        "cannot answer is refused and counted (docs/concepts/coverage.md)")
    p.add_argument("--seed", type=parse_seed, default=0, help="seed given to the policy (default 0)")
    shown = p.add_mutually_exclusive_group()  # --json is the whole output: JSON a program can read
    shown.add_argument("--tree", action="store_true", help="draw the revealed tree")
    shown.add_argument("--json", action="store_true", help="print the episode record as JSON")
    p.add_argument("--show-output", action="store_true",
                   help="after the episode, show on stderr what a policy file printed in it (the last 8 KB of its "
                        "stdout and of its stderr; run isolated, it prints nowhere else)")
    add_file_limits(p)
    add_allow_errors(p)
    add_trust_model(p)
    p.set_defaults(func=run)


def show_output(policy: Any) -> None:
    """What an isolated policy printed in its episode, on stderr, once its processes have ended
    (so nothing it printed is still in a pipe); escaped, as every text from untrusted code."""
    from dream_gym.policy_files.output import TAIL_BYTES

    if not callable(getattr(policy, "output_tail", None)):
        return  # a policy run in this process printed to the terminal itself
    policy.close()
    for stream in ("stdout", "stderr"):
        printed = policy.output_tail(stream)
        if printed:  # each line marked as the policy's: none can pass for a line of replay's own
            lines = "\n".join(f"  | {line}" for line in printed.rstrip().split("\n"))
            say(f"policy {stream} (its last {TAIL_BYTES // 1024} KB):\n{lines}", file=sys.stderr)
        else:
            say(f"policy {stream}: nothing", file=sys.stderr)


def coverage_line(result: EpisodeResult, requests: bool) -> str:
    """What the record answered of the episode, in one line (docs/concepts/coverage.md)."""
    asked = result.attempts + (result.refused or 0)
    if result.error and result.error.startswith("EpisodeLimitError"):  # the bound's, not the policy's
        ended = "ended at --max-attempts (on stderr)"
    elif result.error:
        ended = "ended by the policy's error (on stderr)"
    else:
        ended = "cut short by the record" if result.cut_short else "ended by the policy or a limit"
    share = "n/a" if result.answerable is None else f"{100 * result.answerable:.0f}%"
    mode = "request mode" if requests else "the rule's frontier"
    if not asked:
        return f"coverage ({mode}): no request was made; {ended}"
    return (f"coverage ({mode}): {result.attempts} of {asked} requests answered by the record "
            f"({100 * (result.coverage or 0.0):.1f}%), {result.refused or 0} refused; {ended}; "
            f"the record held {share} of the online choices per decision")


def run(args: argparse.Namespace) -> int:
    from dream_gym.cli.names import check_policy, resolve_one_world
    from dream_gym.evaluation.evaluate import model_trust
    from dream_gym.policy import run_episode
    from dream_gym.policy_files import load_policy
    from dream_gym.policy_files.specs import PolicySpec
    from dream_gym.replay.oracle import oracle_limit_at
    from dream_gym.replay.session import ReplaySession
    from dream_gym.replay.settings import ReplaySettings
    from dream_gym.replay.view import render_tree

    isolated = file_options(args)
    world = resolve_one_world(args.world)
    spec = PolicySpec.of(check_policy(args.policy))
    limits: dict[str, Any] = isolated if spec.kind == "file" else {}
    with model_trust(args.trust_model):  # a model zip: as data unless --trust-model
        policy = load_policy(spec, params=parse_key_values(args.policy_arg), **limits)
    settings = ReplaySettings(workers=args.workers, beta=args.beta, max_rounds=args.max_rounds,
                              frontier=args.frontier, max_attempts=args.max_attempts, requests=args.requests)
    session = ReplaySession(world, settings)
    result = run_episode(policy, session, seed=args.seed, on_error="record")
    result.policy = args.policy  # as eval names it: the spec given, not the name a file's policy gives itself
    result.limit = oracle_limit_at(world, settings).value  # as eval's rows give it (computed after the episode)
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        w = session.replay.workers
        given = f" ({', '.join(args.policy_arg)})" if args.policy_arg else ""  # --policy-arg's, as given
        say(f"world {shown(result.world)}  policy {result.policy}{given}  beta {result.beta:g}  "
            f"W {w}{' (recorded)' if args.workers is None else ''}")
        best = "none" if result.best_score is None else f"{result.best_score:.6g}"  # whole in --json
        say(f"V = {result.replay_score:.4f}  best q = {result.best_q:.4f}  best score = {best}  "
            f"attempts N = {result.attempts}  rounds k = {result.rounds}")
        say(coverage_line(result, session.replay.requests))
    if args.tree:
        say(render_tree(session.view()))
    if args.show_output:
        sys.stdout.flush()  # the result first, then what the policy printed
        show_output(policy)
    failed = [f"policy {args.policy}: 1 of 1 episodes failed; first: {result.error} "
              f"(on {shown(result.world)}, beta {result.beta:g})"] if result.error else []
    return report_failures("replay", failed, args.allow_errors)
