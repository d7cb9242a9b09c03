"""``dream-gym rsi``: the outer loop: online rollout, append to the history, dream, deploy, repeat."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from dream_gym.cli.dream import (
    add_scoring_arguments,
    held_out_lines,
    phase_table,
    scoring_settings,
    version_line,
    wide_console,
)
from dream_gym.cli.options import add_workers
from dream_gym.dream.carry import DEFAULT_CARRY
from dream_gym.settings import DEFAULT_BETA, STANDARD_WORKERS


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "rsi", help="recursive self-improvement: grow a world with the policy, dream, deploy the winner, repeat",
        description=(
            "For each iteration: an online rollout with the current policy (W attempts per round, at most K1 "
            "rounds) grows a world; the world joins the history; an improvement step builds M versions and "
            "keeps the argmax on the history; the winner is deployed for the next rollout. Resumable after "
            "kill -9 with --resume."
        ),
    )
    p.add_argument("--task", required=True, help="built-in task name (sum-difference, circle-packing-26, ...)")
    p.add_argument("--agent", default="builtin", help="discovery agent: 'builtin' or a litellm model string")
    p.add_argument("--policy", required=True, help="START policy: built-in name, module:Class or policy .py file")
    p.add_argument("--iterations", "-T", type=int, required=True, help="t: outer iterations")
    add_workers(p, default=STANDARD_WORKERS,
                help=f"W: attempts per round online, each run by its own job process (default {STANDARD_WORKERS})")
    p.add_argument("--rounds", type=int, default=10, help="K1: the most rounds of an online rollout")
    p.add_argument("--history", default=None, help="extra worlds in the history from the start")
    p.add_argument("--beta", type=float, default=DEFAULT_BETA,
                   help=f"budget preference the policy sees online (default {DEFAULT_BETA})")
    p.add_argument("--backend", choices=("process", "ray", "serial"), default="process",
                   help="the online worker pool")
    p.add_argument("--out", required=True, type=Path, help="the run folder")
    p.add_argument("--carry", type=int, default=DEFAULT_CARRY,
                   help=f"earlier phases' best versions each phase scores exactly on the grown history and shows "
                        f"the developer (default {DEFAULT_CARRY}; 0: every phase starts from its incumbent alone)")
    add_scoring_arguments(p)
    p.set_defaults(func=run)


def summary_tables(records: list[Any], width: int | None = None) -> list[Any]:
    """The per-iteration summary: every column, in parts that fit ``width`` (each repeats t)."""
    from dream_gym.cli.tables import fitted_tables
    from dream_gym.dream.rsi import SUMMARY_COLUMNS, summary_cells

    return fitted_tables("dream-gym rsi: per iteration (discovery and development cost separately and summed)",
                         SUMMARY_COLUMNS, [summary_cells(r) for r in records], width)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from dream_gym.cli.names import check_policy, check_task, resolve_world_specs
    from dream_gym.dream.improve import DreamSettings
    from dream_gym.dream.rsi import RsiConfig, run_rsi

    check_task(args.task)
    check_policy(args.policy)
    if args.history:
        resolve_world_specs(args.history, "--history")
    console = Console(stderr=True, soft_wrap=True)  # long lines wrap where the terminal wraps, whole in a log
    config = RsiConfig(
        task=args.task, policy=args.policy, out=args.out, iterations=args.iterations,
        settings=DreamSettings(revisions=args.revisions, scoring=scoring_settings(args), carry=args.carry),
        agent=args.agent, developer=args.developer, workers=args.workers, rounds=args.rounds,
        history=args.history, beta=args.beta, api_base=args.api_base, backend=args.backend, resume=args.resume,
        command=shlex.join(["dream-gym", *args.argv]),
    )

    def events(kind: str, data: dict[str, Any]) -> None:
        if args.quiet:
            return
        if kind == "iteration":
            console.rule(f"iteration {data['t']}/{data['iterations']}: policy {data['policy']}")
        elif kind == "round":
            s = data["stats"]
            best = "-" if s.best_score is None else f"{s.best_score:.6g}"
            console.print(f"  rollout {data['t']} round {s.round}: {s.attempts} attempts, {s.failures} failed, "
                          f"best {best}, {s.seconds:.1f}s")
        elif kind == "rollout":
            world = data["world"]
            console.print(f"  rollout {data['t']} done: {world.size - 1} attempts in {world.id}; dreaming on the history")
        elif kind == "version":
            console.print("  " + version_line(data["record"], data["revisions"], data["best"]))
        elif kind == "carry":
            row = data["row"]
            phase, m = row["source"]
            score = f"score {row['score']:.4f} on the history" if row["status"] == "ok" else row["status"]
            console.print(f"  phase {row['phase']} carries phase {phase} version {m}: {score} "
                          f"({len(row['evaluated'])} new world(s) evaluated, {row['seconds']:.1f}s)")
        elif kind == "iteration_done":
            console.print(phase_table(data["phase"]))
            for line in held_out_lines(data["phase"]):
                console.print(line)

    records = run_rsi(config, events)
    out = wide_console()
    for k, table in enumerate(summary_tables(records, out.width)):
        if k:
            out.print()
        out.print(table)
    out.print(f"summary: {args.out / 'summary.md'}; ratchet: {args.out / 'dream' / 'ratchet.png'}; "
                    f"next policy: {args.out / records[-1].deployed}")
    return 0
