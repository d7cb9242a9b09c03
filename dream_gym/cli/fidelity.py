"""``dream-gym fidelity``: how well does replay rank policies against the online runs it stands for?"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dream_gym.cli.options import BUILTIN_TASKS, add_jobs, add_workers, positive_int, unit_number
from dream_gym.cli.shown import say
from dream_gym.fidelity.runs import SYSTEMS
from dream_gym.replay.settings import DEFAULT_BETA


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "fidelity", help="run policies online, replay them on the recorded runs, and say how far replay's ranking holds",
        description=(
            "Run every --policy online on every seed (dream-gym grow, or a discovery system through its bridge), each run "
            "recorded as a world; replay every policy on the worlds of each --recorder; and compare, per recorder, "
            "the policies' ranking by replay V with their ranking online (final best score, and the runs' V with q "
            "normalised over the runs of each seed): Spearman and Kendall with 95 percent bootstrap intervals over seeds, "
            "beside the online runs' own split-half reliability. Writes OUT/fidelity.json and OUT/fidelity.txt; "
            "killed, the same command continues."),
    )
    p.add_argument("--task", required=True,
                   help=f"a built-in task ({BUILTIN_TASKS}), or (with a --system other than grow) "
                        "initial_program.py,evaluator.py")
    p.add_argument("--policy", "-p", action="append", required=True, dest="policies", metavar="SPEC",
                   help="a policy to run online and replay (built-in, module:Class, policy .py file, model; "
                        "'greedy(patience=10)' gives parameters); repeat")
    p.add_argument("--recorder", action="append", default=[], dest="recorders", metavar="SPEC",
                   help="whose runs to replay on: a policy spec, 'native' (the system's own selection), or "
                        "pool:A+B (pool:all: every policy), a seed's runs pooled; repeat (default: every --policy)")
    p.add_argument("--seeds", default="0,1,2", help="seeds of the online runs: 0,1,2 or 0-4 (default 0,1,2)")
    p.add_argument("--iterations", "-n", type=positive_int, required=True, metavar="N",
                   help="attempts per online run (grow: --max-attempts and --rounds; a system: deploy's --budget)")
    add_workers(p, default=2, help="W: attempts per round, online and in replay (default 2)")
    p.add_argument("--beta", type=unit_number, default=DEFAULT_BETA,
                   help=f"budget preference, online and in replay (default {DEFAULT_BETA})")
    p.add_argument("--system", choices=SYSTEMS, default="grow",
                   help="run online with dream-gym grow (default) or a discovery system through dream-gym deploy")
    p.add_argument("--frontier", choices=("leaves", "any"), default=None,
                   help="grow's frontier rule (default leaves; a system's is any)")
    p.add_argument("--out", "-o", required=True, type=Path, help="the study folder (locked while the study runs)")
    p.add_argument("--backend", choices=("process", "ray", "serial"), default="process",
                   help="where online runs go: job processes (default), Ray (RAY_ADDRESS, or a local cluster; "
                        "OUT must be shared), or this process one at a time")
    add_jobs(p, help="online runs at a time (default: the CPU count over W)")
    p.add_argument("--requests", action="store_true",
                   help="replay in request mode (the online frontier; what the record lacks is refused)")
    p.add_argument("--bootstrap", type=positive_int, default=2000, metavar="N", help="bootstrap resamples (default 2000)")
    p.set_defaults(func=run, continues=True)  # killed or interrupted, the same command continues it


def parse_seeds(text: str) -> list[int]:
    """``0,1,2``, ``0-4`` or a mix (``0-2,7``) as a list of seeds."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        first, dash, last = part.partition("-")
        try:
            span = range(int(first), int(last) + 1) if dash and first else range(int(part), int(part) + 1)
        except ValueError:
            raise ValueError(f"--seeds: {part!r} is not a seed or a range of seeds (0,1,2 or 0-4)") from None
        if not span:
            raise ValueError(f"--seeds: the range {part!r} runs backwards (write {last}-{first})")
        seeds += span
    return seeds


def check_policy_names(args: argparse.Namespace) -> None:
    """Each --policy and --recorder that names a policy, with the nearest names when it names none
    (a recorder may also be 'native' or a pool:A+B of the study's runs)."""
    from dream_gym.cli.names import check_policy
    from dream_gym.fidelity.config import is_pool
    from dream_gym.fidelity.runs import NATIVE

    for spec in [*args.policies, *(args.recorders or [])]:
        if spec != NATIVE and not is_pool(spec):
            check_policy(spec)


def run(args: argparse.Namespace) -> int:
    import sys

    from dream_gym.fidelity.runs import RunSpec
    from dream_gym.fidelity.study import REPORT_FILE, TABLE_FILE, FidelityConfig, Progress, run_study
    from dream_gym.fidelity.table import render
    from dream_gym.infrastructure.printable import printable

    check_policy_names(args)
    config = FidelityConfig(
        task=args.task, policies=args.policies, seeds=parse_seeds(args.seeds), iterations=args.iterations,
        workers=args.workers, out=args.out, recorders=args.recorders, system=args.system, beta=args.beta,
        frontier=args.frontier, backend=args.backend, jobs=args.jobs, requests=args.requests,
        bootstrap=args.bootstrap,
    )

    def on_run(spec: RunSpec, outcome: dict[str, Any] | str, done: int, total: int) -> None:
        name = printable(spec.policy, 60)
        if isinstance(outcome, dict):
            how = "continued" if outcome["resumed"] else "ran"
            say(f"[{done}/{total}] {name} seed {spec.seed}: {how} in {outcome['seconds']:.0f}s", file=sys.stderr)
        else:  # on a terminal, broken between words at its width
            say(f"[{done}/{total}] {name} seed {spec.seed}: failed (output: {printable(spec.log, 200)})",
                file=sys.stderr)

    report = run_study(config, Progress(on_run=on_run, on_phase=lambda text: print(text, file=sys.stderr)))
    print(render(report, width=80))
    print(f"\nreport: {printable(Path(args.out) / REPORT_FILE, 300)}; table: "
          f"{printable(Path(args.out) / TABLE_FILE, 300)}", file=sys.stderr)
    return 0
