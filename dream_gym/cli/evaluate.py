"""``dream-gym eval`` (every policy x world x beta episode, then the leaderboard) and ``dream-gym plot``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dream_gym.cli.options import (
    WorldList,
    add_allow_errors,
    add_file_limits,
    add_jobs,
    add_max_attempts,
    add_trust_model,
    add_workers,
    any_case,
    check_file_to_write,
    file_options,
    non_negative_number,
    parse_betas_option,
    parse_seed,
    positive_int,
    report_failures,
    unit_number,
)
from dream_gym.cli.shown import say
from dream_gym.evaluation.leaderboard import MARKDOWN_START
from dream_gym.infrastructure.durable import check_replaceable, write_atomic
from dream_gym.infrastructure.jobs import DEFAULT_TASK_TIMEOUT_S
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2, DEFAULT_BETA_GRID, DEFAULT_LAMBDA
from dream_gym.replay.settings import DEFAULT_BETA, ReplaySettings


def register(subparsers: Any) -> None:
    grid = ",".join(f"{b:g}" for b in DEFAULT_BETA_GRID)
    ev = subparsers.add_parser(
        "eval",
        help="run policies on recorded worlds over a beta grid and print the leaderboard",
        description=(
            "Run every (policy, world, beta) episode on the replay fast path and rank the policies "
            "by the v2 objective (auc - lambda * parallel penalty) and mean replay score V. "
            "Exits 1 when an episode ended with an error (each failing policy is named on stderr with "
            "its first error), unless --allow-errors."
        ),
    )
    ev.add_argument("--policy", "-p", action="append", required=True, dest="policies", metavar="SPEC",
                    help="a built-in name (recommended, greedy, ucb, puct, random, ...), a shipped model, module:Class, "
                         "a policy .py file (run isolated) or a model .zip (loaded as data); repeat for several. "
                         "A built-in or module:Class takes parameters: 'greedy(patience=10)'")
    ev.add_argument("--worlds", "-w", required=True, action=WorldList,
                    help="a world folder, a folder of worlds, a dataset id ns/name-vN, a shipped world, "
                         "or a split of the shipped dataset (train, heldout); a comma list, or repeat")
    ev.add_argument("--betas", default=grid, help=f"comma-separated budget preferences (default {grid})")
    add_workers(ev, help="W: attempts per round every world is replayed at (default: each world's recorded W)")
    add_jobs(ev)
    ev.add_argument("--backend", choices=("process", "ray", "serial"), default="process",
                    help="where the episodes run: job processes (default), Ray, or one at a time here")
    add_file_limits(ev)
    ev.add_argument("--task-timeout", type=float, default=DEFAULT_TASK_TIMEOUT_S, metavar="SECONDS",
                    help="end a (policy, world) task that makes no decision for this long and record the "
                         f"timeout on its episodes (default {DEFAULT_TASK_TIMEOUT_S:g}; 0: no watchdog, "
                         "and -j 1 then runs in this process)")
    ev.add_argument("--out", "-o", type=Path, default=None,
                    help="write one JSON line per episode here (locked while the run writes it: OUT.lock; "
                         "finished tasks are journaled in OUT.partial until the file is whole)")
    ev.add_argument("--resume", action="store_true",
                    help="continue a killed run into --out: keep the tasks its journal OUT.partial holds and "
                         "run only the others (the same policies, worlds, betas and options are required)")
    ev.add_argument("--force", action="store_true",
                    help="replace the results an earlier evaluation left in --out (without it they are kept "
                         "and the run is refused)")
    ev.add_argument("--markdown", type=Path, default=None, help="also write the leaderboard as markdown here")
    ev.add_argument("--max-rounds", type=positive_int, default=None, help="round limit K2 (default: none)")
    add_max_attempts(ev)
    ev.add_argument("--beta1", type=non_negative_number, default=DEFAULT_BETA1, help=f"V's cost per attempt (default {DEFAULT_BETA1})")
    ev.add_argument("--beta2", type=non_negative_number, default=DEFAULT_BETA2,
                    help=f"V's bonus per attempt-per-round (default {DEFAULT_BETA2})")
    ev.add_argument("--lam", type=non_negative_number, default=DEFAULT_LAMBDA,
                    help=f"weight of the parallel penalty in v2 (default {DEFAULT_LAMBDA})")
    ev.add_argument("--rank-by", choices=("v2", "V"), type=any_case("v2", "V"), default="v2", help="the leaderboard's order (default v2)")
    ev.add_argument("--requests", action="store_true",
                    help="request mode: each policy chooses among what an online run could continue; what the "
                         "record cannot answer is refused (not charged) and counted, and a batch of refusals ends "
                         "the episode cut short (coverage: docs/concepts/coverage.md)")
    ev.add_argument("--seed", type=parse_seed, default=0, help="seed given to every policy (default 0)")
    ev.add_argument("--no-progress", action="store_true",
                    help="no progress bar (there is none when stderr is not a terminal: a log gets no bar)")
    ev.add_argument("--quiet", action="store_true", dest="no_progress", help=argparse.SUPPRESS)  # grow's and dream's word
    ev.add_argument("--summary", action="store_true", help="print only the table over all worlds")
    add_allow_errors(ev)
    add_trust_model(ev)
    ev.set_defaults(func=run_eval)

    plot = subparsers.add_parser(
        "plot",
        help="anytime curves, Pareto fronts and a tree drawing from a results file",
        description="Draw anytime.png, pareto.png and tree_<world>.png from `dream-gym eval --out` results.",
    )
    plot.add_argument("results", type=Path, help="results.jsonl written by dream-gym eval --out")
    plot.add_argument("--out", "-o", type=Path, default=Path("plots"), help="output folder (default ./plots)")
    plot.add_argument("--world", default=None, help="world id for the tree drawing (default: the first)")
    plot.add_argument("--beta", type=unit_number, default=DEFAULT_BETA,
                      help=f"beta of the episodes drawn on the tree (default {DEFAULT_BETA})")
    plot.set_defaults(func=run_plot)


def run_eval(args: argparse.Namespace) -> int:
    from rich.console import Console

    from dream_gym.cli.names import betas_note, check_policies, resolve_world_specs, w_note
    from dream_gym.evaluation.evaluate import evaluate, leaderboard
    from dream_gym.evaluation.journal import finished_tasks
    from dream_gym.policy_files.inprocess import is_file_spec

    check_policies(args.policies)  # evaluate() checks --out and --lam before any episode
    if args.resume and args.out is None:
        raise ValueError("--resume needs --out: a run resumes from the journal beside its results file")
    if args.out is not None and not Path(args.out).is_dir():  # a folder: evaluate() names it
        check_file_to_write(Path(args.out), "--out")  # /proc/x was named as its lock file, x.lock
    if args.markdown is not None:
        check_file_to_write(args.markdown, "--markdown")
        check_replaceable(args.markdown, f"--markdown {args.markdown}", MARKDOWN_START, "a leaderboard eval wrote")
    isolated = file_options(args)
    if args.task_timeout < 0:
        raise ValueError(f"--task-timeout must be >= 0 seconds (0: no watchdog), got {args.task_timeout:g}")
    if args.task_timeout and args.decision_timeout >= args.task_timeout and any(map(is_file_spec, args.policies)):
        raise ValueError(f"--decision-timeout {args.decision_timeout:g} s is not below --task-timeout "
                         f"{args.task_timeout:g} s, the watchdog that ends a task making no decision: raise --task-timeout")
    worlds = resolve_world_specs(args.worlds)
    from dream_gym.policy_files import probe_policy_files

    probe_policy_files(args.policies, **isolated)  # a file that does not load fails here, once, before its episodes
    betas = parse_betas_option(args.betas)
    kept = finished_tasks(args.out) if args.resume else 0  # counted now: the journal goes once the results are whole
    settings = ReplaySettings(args.workers, beta1=args.beta1, beta2=args.beta2, max_rounds=args.max_rounds,
                              max_attempts=args.max_attempts, requests=args.requests)
    results = evaluate(
        args.policies,
        worlds,
        betas,
        settings=settings,
        jobs=args.jobs,
        backend=args.backend,
        out=args.out,
        progress=not args.no_progress and sys.stderr.isatty(),
        lam=args.lam,
        seed=args.seed,
        task_timeout=args.task_timeout or None,
        resume=args.resume,
        trust_model=args.trust_model,
        overwrite=args.force,
        file_options=isolated or None,
    )
    if kept:
        say(f"resumed: {kept} of {len(args.policies) * len(worlds)} (policy, world) tasks were finished before and "
            "kept; the others ran now", file=sys.stderr)
    board = leaderboard(results, lam=args.lam, rank_by=args.rank_by)
    board.conditions = (f"replayed {w_note(worlds, args.workers)}{' in request mode' if args.requests else ''}; "
                        f"betas {betas_note(board.betas)}")
    board.world_w = {w.id: settings.workers_on(w) for w in worlds}
    if args.markdown is not None:  # before the table: a reader that stops early (| head) ends the command
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(args.markdown, board.to_markdown())
    console = Console()
    board.print(console, per_world=not args.summary, errors=False)  # the errors go to stderr, once
    if args.out is not None:
        console.print(f"{len(results)} episodes written to {args.out}")
    return report_failures("eval", [f.line() for f in board.failures()], args.allow_errors)


def run_plot(args: argparse.Namespace) -> int:
    from dream_gym.evaluation.plots import plot_results

    notes: list[str] = []
    for path in plot_results(args.results, args.out, world=args.world, beta=args.beta, notes=notes):
        print(path)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return 0
