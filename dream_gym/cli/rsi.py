"""``dream-gym rsi``: the outer loop: online rollout, append to the history, dream, deploy, repeat."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from dream_gym.cli.dream import (
    add_held_out_arguments,
    add_scoring_arguments,
    dream_settings,
    held_out_lines,
    phase_table,
    version_line,
)
from dream_gym.cli.options import (
    BUILTIN_TASKS,
    WorldList,
    add_read,
    add_workers,
    non_negative_int,
    positive_int,
    unit_number,
)
from dream_gym.cli.shown import Hanging
from dream_gym.dream.carry import DEFAULT_CARRY
from dream_gym.replay.settings import DEFAULT_BETA, STANDARD_WORKERS


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "rsi", help="recursive self-improvement: grow a world with the policy, dream, deploy the winner, repeat",
        description=(
            "For each iteration: an online rollout with the current policy (W attempts per round, at most K1 "
            "rounds) grows a world; the world joins the history; an improvement step builds M versions and "
            "keeps the argmax on the history; the winner is deployed for the next rollout. Resumable after "
            "kill -9 with --resume. With --system the rollout is a run of that discovery system (OpenEvolve, "
            "ShinkaEvolve or SkyDiscover) with the policy choosing the parents, and the history is every run of "
            "the loop pooled into one world."
        ),
    )
    p.add_argument("--task", required=True,
                   help=f"a built-in task ({BUILTIN_TASKS}); with --system also "
                        "initial_program.py,evaluator.py")
    p.add_argument("--agent", default=None, help="discovery agent: 'builtin' (default) or a litellm model string")
    p.add_argument("--policy", "-p", required=True, help="START policy: built-in name, module:Class or policy .py file; "
                                                            "'greedy(patience=10)' gives parameters")
    p.add_argument("--iterations", "-T", type=positive_int, required=True, help="t: outer iterations")
    add_workers(p, default=STANDARD_WORKERS,
                help=f"W: attempts per round online, each run by its own job process (default {STANDARD_WORKERS})")
    p.add_argument("--rounds", type=positive_int, default=None, help="K1: the most rounds of an online rollout (default 10)")
    p.add_argument("--history", default=None, action=WorldList,
                   help="extra worlds in the history from the start (a comma list, or repeat)")
    add_held_out_arguments(p)
    p.add_argument("--beta", type=unit_number, default=DEFAULT_BETA,
                   help=f"budget preference the policy sees online (default {DEFAULT_BETA})")
    p.add_argument("--backend", choices=("process", "ray", "serial"), default=None,
                   help="the online worker pool (default process)")
    _add_system_arguments(p)
    p.add_argument("--out", required=True, type=Path, help="the run folder")
    p.add_argument("--carry", type=non_negative_int, default=DEFAULT_CARRY,
                   help=f"earlier phases' best versions each phase scores exactly on the grown history and shows "
                        f"the developer (default {DEFAULT_CARRY}; 0: every phase starts from its incumbent alone)")
    add_scoring_arguments(p)
    p.set_defaults(func=run)


#: Options of the online loop that a --system run does not take (its system runs the rollout).
GROW_ONLY = ("agent", "rounds", "backend")
#: Options only a --system run takes.
SYSTEM_ONLY = ("budget", "model", "system_option", "pool_scores", "read")


def _add_system_arguments(p: argparse.ArgumentParser) -> None:
    from dream_gym.datasets.pool import POOL_SCORES, SCORE_RULES
    from dream_gym.integrations.deploy import SYSTEMS

    p.add_argument("--system", choices=sorted(SYSTEMS), default=None,
                   help="run each rollout in this discovery system (as dream-gym deploy --system) and dream on "
                        "every run so far pooled into one world (default: dream_gym's own online loop)")
    p.add_argument("--budget", type=positive_int, default=None, help="with --system: programs each run proposes")
    p.add_argument("--model", default=None,
                   help="with --system: the system's OpenAI-compatible model (default: dream_gym's no-LLM agent "
                        "behind a local agent server)")
    p.add_argument("--option", action="append", default=None, metavar="KEY=VALUE", dest="system_option",
                   help="with --system: a setting of the system (repeatable)")
    p.add_argument("--pool-scores", choices=SCORE_RULES, default=None,
                   help="with --system: where two runs scored the same program differently (a noisy task), keep "
                        f"the first-recorded score (first), keep both (split) or stop (exact); default {POOL_SCORES}")
    add_read(p)


def _check_mode(args: argparse.Namespace) -> None:
    """One clear error for an option of the other mode."""
    wrong = SYSTEM_ONLY if args.system is None else GROW_ONLY
    given = [name for name in wrong if getattr(args, name) not in (None, [])]
    if given:
        flags = ", ".join("--" + ("option" if n == "system_option" else n.replace("_", "-")) for n in given)
        if args.system is None:
            raise ValueError(f"{flags}: only with --system (a run of a discovery system)")
        raise ValueError(f"{flags}: not with --system {args.system} (the system runs the rollout; "
                         "its model is --model, its size --budget)")
    if args.system is not None and args.budget is None:
        raise ValueError(f"--system {args.system} needs --budget (programs each run proposes)")


def summary_tables(records: list[Any], width: int | None = None) -> list[Any]:
    """The per-iteration summary: every column, in parts that fit ``width`` (each repeats t)."""
    from dream_gym.cli.tables import fitted_tables
    from dream_gym.dream.rsi import Iteration

    columns = type(records[0]).columns if records else Iteration.columns
    return fitted_tables("dream-gym rsi: per iteration (discovery and development cost separately and summed)",
                         columns, [r.cells() for r in records], width)


def run(args: argparse.Namespace) -> int:
    from dream_gym.cli.names import check_incumbent, check_task, resolve_world_specs
    from dream_gym.cli.shown import console as shown_console
    from dream_gym.dream.rsi import RsiConfig, run_rsi

    _check_mode(args)
    if args.system is None or "," not in args.task:  # a system also takes initial_program.py,evaluator.py
        check_task(args.task)
    check_incumbent(args.policy)
    from dream_gym.dream.versions import incumbent_source

    incumbent_source(args.policy)  # a model, which no loop can revise as code, refused before the first rollout
    if args.history:
        resolve_world_specs(args.history, "--history")
    if args.system is not None:
        return run_system(args)
    console = shown_console(stderr=True)
    config = RsiConfig(
        task=args.task, policy=args.policy, out=args.out, iterations=args.iterations,
        settings=dream_settings(args, carry=args.carry), validate=args.validate,
        agent=args.agent or "builtin", developer=args.developer, workers=args.workers, rounds=10 if args.rounds is None else args.rounds,
        history=args.history, beta=args.beta, api_base=args.api_base, backend=args.backend or "process",
        resume=args.resume, command=shlex.join(["dream-gym", *args.argv]),
    )

    def events(kind: str, data: dict[str, Any]) -> None:
        if args.quiet:  # progress is quiet; a revision the held-out check kept out is not progress
            if kind == "iteration_done" and data["phase"].warning:
                console.print(Hanging(held_out_lines(data["phase"], args.gate)[-1]))
            return
        if kind == "iteration":
            console.rule(f"iteration {data['t']}/{data['iterations']}: policy {data['policy']}")
        elif kind == "round":
            s = data["stats"]
            best = "-" if s.best_score is None else f"{s.best_score:.6g}"
            console.print(Hanging(f"  rollout {data['t']} round {s.round}: {s.attempts} attempt{'s' * (s.attempts != 1)}, "
                                  f"{s.failures} failed, best {best}, {s.seconds:.1f}s"))
        elif kind == "rollout":
            world = data["world"]
            console.print(Hanging(f"  rollout {data['t']} done: {world.size - 1} attempt{'s' * (world.size != 2)} in "
                                  f"{world.id}; dreaming on the history"))
        elif kind in ("version", "carry", "llm_retry"):
            _phase_progress(console, kind, data)
        elif kind == "iteration_done":
            console.print(phase_table(data["phase"]))
            for line in held_out_lines(data["phase"], args.gate):
                console.print(Hanging(line))

    records = run_rsi(config, events)
    out = shown_console()
    for k, table in enumerate(summary_tables(records, out.width)):
        if k:
            out.print()
        out.print(table)
    out.print(f"summary: {args.out / 'summary.md'}; ratchet: {args.out / 'dream' / 'ratchet.png'}; "
                    f"next policy: {args.out / records[-1].deployed}")
    return 0


def _phase_progress(console: Any, kind: str, data: dict[str, Any]) -> None:
    """A dream phase's progress line: a version scored, an earlier phase's version carried, or the
    developer's call retried."""
    if kind == "llm_retry":
        console.print(Hanging(f"  developer: {data['text']}"))
        return
    if kind == "version":
        console.print(Hanging(version_line(data["record"], data["revisions"], data["best"], indent=2)))
        return
    row = data["row"]
    phase, m = row["source"]
    score = f"score {row['score']:.4f} on the history" if row["status"] == "ok" else row["status"]
    console.print(Hanging(f"  phase {row['phase']} carries phase {phase} version {m}: {score} "
                          f"({len(row['evaluated'])} new world(s) evaluated, {row['seconds']:.1f}s)"))


def run_system(args: argparse.Namespace) -> int:
    """``rsi --system``: one line per iteration (80 columns) and where the run's files are on
    stdout; each stage's progress on stderr, the run's nodes on a bar while its system runs."""
    from dream_gym.cli.options import parse_key_values
    from dream_gym.cli.shown import console as shown_console
    from dream_gym.cli.watch import NodesWatch
    from dream_gym.datasets.pool import POOL_SCORES
    from dream_gym.dream.rsi_system import SystemRsiConfig, iteration_line, run_system_rsi

    config = SystemRsiConfig(
        system=args.system, task=args.task, policy=args.policy, out=args.out, iterations=args.iterations,
        settings=dream_settings(args, carry=args.carry), validate=args.validate,
        budget=args.budget, workers=args.workers, developer=args.developer, model=args.model,
        api_base=args.api_base, history=args.history, beta=args.beta, scores=args.pool_scores or POOL_SCORES,
        options=parse_key_values(args.system_option or [], "--option"), read=tuple(args.read), resume=args.resume,
        command=shlex.join(["dream-gym", *args.argv]),
    )
    console = shown_console()  # its results, as plain rsi's table: what `> log` keeps
    progress = shown_console(stderr=True)  # what each stage is doing, as plain rsi's
    watches: list[NodesWatch] = []  # the run's bar while its system runs (on a terminal)

    def events(kind: str, data: dict[str, Any]) -> None:
        if args.quiet:
            return
        if kind == "iteration_done":
            console.print(iteration_line(data["record"], args.iterations), markup=False)
        elif kind == "iteration":
            progress.rule(f"iteration {data['t']}/{data['iterations']}: policy {data['policy']}")
        elif kind == "deploy":
            progress.print(Hanging(f"  run {data['t']}: {args.system}, {args.budget} programs, in {data['folder']}"))
            watches.append(NodesWatch(data["folder"], data["budget"] + 1, f"  run {data['t']}").__enter__())
        elif kind == "deploy_end" and watches:
            watches.pop().__exit__(None, None, None)
        elif kind == "run":
            row = data["row"]
            progress.print(Hanging(f"  run {row['t']} done: {row['nodes'] - 1} programs ({row['invalid']} invalid), "
                                   f"stopped by {row['stopped_by']}, {row['seconds']:.1f}s"))
        elif kind == "pool":
            row = data["row"]
            progress.print(Hanging(f"  pool of runs 1-{row['t']}: {row['nodes']} nodes ({row['merged']} merged, "
                                   f"{row['disagreements']} disagreements); dreaming on it"))
        elif kind in ("version", "carry", "llm_retry"):
            _phase_progress(progress, kind, data)

    records = run_system_rsi(config, events)
    console.print(f"summary: {args.out / 'summary.md'}; next policy: {args.out / records[-1].deployed}",
                  markup=False)
    return 0
