"""``dream-gym grow``: grow a world with the online discovery loop."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from rich.live import Live
from rich.table import Table

from dream_gym.cli.options import (
    BUILTIN_TASKS,
    add_policy_args,
    add_trust_model,
    add_workers,
    parse_key_values,
    parse_seed,
    positive_int,
    positive_number,
    stop_hint,
    unit_number,
)
from dream_gym.cli.shown import console as shown_console
from dream_gym.cli.shown import say, shown
from dream_gym.infrastructure.printable import TEXT_CHARS
from dream_gym.replay.settings import DEFAULT_BETA, STANDARD_WORKERS, recorder_or


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("grow", help="grow a new world with a real discovery loop",
                              description="Grow (or --resume) a recorded world with the online discovery loop.")
    p.add_argument("--task", required=True, help=f"a built-in task: {BUILTIN_TASKS}")
    p.add_argument("--agent", default="builtin", help="'builtin' (default) or a litellm model string (e.g. openai/gpt-4o-mini)")
    p.add_argument("--api-base", default=None, help="base URL of an OpenAI-compatible server for the LLM agent")
    p.add_argument("--policy", "-p", default=recorder_or("recommended"),
                   help="the recorder: built-in policy name (coverage: docs/concepts/recorders.md), shipped model, "
                        f"module:Class, or a policy .py file (default: {recorder_or('recommended')}); "
                        "'greedy(patience=10)' gives parameters")
    add_policy_args(p)
    add_workers(p, default=STANDARD_WORKERS,
                help=f"W: attempts per round, each run by its own job process (default {STANDARD_WORKERS})")
    p.add_argument("--rounds", type=positive_int, default=10, help="K1: the most rounds (default 10)")
    p.add_argument("--out", required=True, type=Path, help="the world folder to write")
    p.add_argument("--resume", action="store_true", help="continue the world in --out")
    p.add_argument("--seed", type=parse_seed, default=0, help="seed of the agent and the policy (default 0)")
    p.add_argument("--beta", type=unit_number, default=DEFAULT_BETA,
                   help=f"budget preference shown to the policy, in [0, 1] (default {DEFAULT_BETA})")
    p.add_argument("--frontier", choices=("leaves", "any"), default="leaves",
                   help="which nodes the policy may continue: leaves (default) or any")
    p.add_argument("--max-attempts", type=positive_int, default=None, help="stop after this many attempts (default: none)")
    p.add_argument("--max-seconds", type=positive_number, default=None, help="stop after this many seconds (default: none)")
    p.add_argument("--max-usd", type=positive_number, default=None, help="stop after the LLM calls cost this many dollars (default: none)")
    p.add_argument("--backend", choices=("process", "ray", "serial"), default="process",
                   help="where a round's attempts run: worker processes (default), Ray, or one at a time here")
    p.add_argument("--evaluation-timeout", type=positive_number, default=None, metavar="SECONDS",
                   help="kill an attempt's worker when its evaluation takes longer than this, and record the "
                        "attempt as failed (default: the task's wall time + 60 s; an agent has 60 s to propose a "
                        "program, an LLM agent 393 s)")
    p.add_argument("--id", dest="world_id", default=None, help="world id (default: the folder name)")
    p.add_argument("--quiet", action="store_true", help="no live progress display")
    add_trust_model(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dream_gym.cli.names import check_loads, check_task
    from dream_gym.online.loop import GrowConfig, GrowResult, RoundStats, grow, write_summary

    check_task(args.task)
    check_loads(args.policy)

    config = GrowConfig(
        task=args.task, out=args.out, agent=args.agent, policy=args.policy, workers=args.workers,
        rounds=args.rounds, seed=args.seed, beta=args.beta, frontier=args.frontier,
        max_attempts=args.max_attempts, max_seconds=args.max_seconds, max_usd=args.max_usd,
        backend=args.backend, api_base=args.api_base, world_id=args.world_id, resume=args.resume,
        command=shlex.join(["dream-gym", *args.argv]), evaluation_timeout_s=args.evaluation_timeout,
    )
    config.policy_params = params = parse_key_values(args.policy_arg)
    from dream_gym.evaluation.evaluate import model_trust
    from dream_gym.policy_files import load_policy

    with model_trust(args.trust_model):  # a model zip: as data unless --trust-model
        policy = load_policy(args.policy, params=params)  # a policy file refuses parameters
    console = shown_console(stderr=True)
    table_rows: list[RoundStats] = []

    def render(result: GrowResult) -> Table:
        table = Table(title=f"dream-gym grow {args.task} → {args.out}")
        for column in ("round", "attempts", "failures", "best score", "attempts/s"):
            table.add_column(column, justify="right")
        for stats in table_rows[-12:]:
            rate = stats.attempts / stats.seconds if stats.seconds else float("nan")
            best = "-" if stats.best_score is None else f"{stats.best_score:.6g}"
            table.add_row(str(stats.round), str(stats.attempts), str(stats.failures), best, f"{rate:.2f}")
        return table

    if args.quiet:
        result = grow(config, policy, on_round=lambda stats, _: table_rows.append(stats))
    elif not console.is_terminal:  # piped or logged: one plain line a round, no table redrawn
        def log_round(stats: RoundStats, result: GrowResult) -> None:
            best = "-" if stats.best_score is None else f"{stats.best_score:.6g}"
            console.print(f"round {stats.round}: {stats.attempts} attempt{'s' * (stats.attempts != 1)}, "
                          f"{stats.failures} failed, "
                          f"best score {best}, {stats.seconds:.2f}s", markup=False)

        result = grow(config, policy, on_round=log_round)
    else:
        with Live(console=console, auto_refresh=False) as live:
            def on_round(stats: RoundStats, result: GrowResult) -> None:
                table_rows.append(stats)
                live.update(render(result), refresh=True)

            result = grow(config, policy, on_round=on_round)
    summary = write_summary(result)
    survival = result.survival
    console = shown_console()  # the run's summary, like deploy's and import's: what `> log` keeps
    console.print(
        f"{result.nodes} nodes, {result.rounds} round{'s' * (result.rounds != 1)}, {result.failures_this_run} failed "
        f"attempt{'s' * (result.failures_this_run != 1)} this run, "
        f"best score {'none (no valid program)' if result.best_score is None else result.best_score}, stopped by {_stop_named(result.stopped_by)}, {result.seconds:.1f}s"
    )
    if hint := stop_hint(result.stopped_by, args.policy, args.policy_arg):
        console.print(hint, markup=False)
    if result.repaired:
        console.print(f"resume: {result.repaired}")
    if result.resumed:
        console.print(f"resume: {result.resumed}", markup=False)
    if survival:
        spread = f" ± {survival.stdev:.3g}" if survival.stdev else ""
        note = shown(survival.note, TEXT_CHARS)  # it quotes a candidate's error: escaped, no markup
        console.print(f"survival check: {'survived' if survival.survived else 'FAILED'} "
                      f"({survival.valid_runs}/{survival.repeats} valid, mean {survival.mean}{spread}; {note})",
                      markup=False)
    say(f"summary: {summary}")  # a path: broken between words, never inside one, and no markup
    return 0


def _stop_named(stopped_by: str) -> str:
    """The stop as the user set it: a budget by its option (run_summary.json keeps the key)."""
    return f"--{stopped_by.replace('_', '-')}" if stopped_by.startswith("max_") else stopped_by
