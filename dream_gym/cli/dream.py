"""``dream-gym dream``: one improvement step of the exploration policy on replay."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dream_gym.cli.options import (
    WorldList,
    add_allow_errors,
    add_file_limits,
    add_jobs,
    any_case,
    file_options,
    margin,
    non_negative_number,
    parse_seed,
    positive_int,
    report_failures,
)
from dream_gym.cli.shown import Hanging, cell, console, shown
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2, DEFAULT_BETA_GRID, DEFAULT_LAMBDA


def add_scoring_arguments(p: argparse.ArgumentParser) -> None:
    """The replay-scoring options shared by ``dream`` and ``rsi``."""
    grid = ",".join(f"{b:g}" for b in DEFAULT_BETA_GRID)
    p.add_argument("--developer", default="builtin",
                   help="'builtin' (Optuna over the parametric policy family, no LLM; the default) or a litellm "
                        "model string")
    p.add_argument("--revisions", "-M", type=positive_int, required=True,
                   help="M: versions per phase, the incumbent included (M-1 new revisions)")
    p.add_argument("--betas", default=grid, help=f"comma-separated beta grid (default {grid})")
    p.add_argument("--select", choices=("V", "v2"), type=any_case("V", "v2"), default="V",
                   help="maximise the mean replay score V (the paper's V^m, default) or the Pareto objective v2")
    p.add_argument("--api-base", default=None, help="base URL of an OpenAI-compatible server (the LLM developer)")
    add_jobs(p, help="processes for the replay evaluations (default: the CPU count)")
    p.add_argument("--seed", type=parse_seed, default=0, help="seed of the developer and of every policy's RunContext")
    p.add_argument("--max-rounds", type=positive_int, default=None, help="replay round limit K2 (default: none)")
    p.add_argument("--beta1", type=non_negative_number, default=DEFAULT_BETA1, help=f"V's cost per attempt (default {DEFAULT_BETA1})")
    p.add_argument("--beta2", type=non_negative_number, default=DEFAULT_BETA2,
                   help=f"V's bonus per attempt-per-round (default {DEFAULT_BETA2})")
    p.add_argument("--lam", type=non_negative_number, default=DEFAULT_LAMBDA, help=f"v2's parallel-penalty weight (default {DEFAULT_LAMBDA})")
    add_file_limits(p)
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def add_held_out_arguments(p: argparse.ArgumentParser) -> None:
    """The held-out check's options, shared by ``dream`` and ``rsi`` (read by :func:`dream_settings`)."""
    p.add_argument("--validate", default=None, metavar="WORLDS", action=WorldList,
                   help="held-out worlds, not used for selection, a revision is checked on before it is deployed "
                        "(default: one shipped held-out world of each task the history does not hold; "
                        "'none': no check)")
    p.add_argument("--held-out-margin", type=margin, default=None, metavar="X",
                   help="do not deploy a revision that scores more than X below the incumbent on the held-out "
                        "worlds (default 0.1, in units of the selection score; 'inf': report only)")
    p.add_argument("--gate", action="store_true",
                   help="do not deploy a revision that scores below the incumbent on the held-out worlds at all")


def dream_settings(args: argparse.Namespace, **more: Any) -> Any:
    """The improvement step's settings from ``dream``'s or ``rsi``'s options (``--validate`` named
    in a CLI error, before anything is written, when it names no worlds)."""
    from dream_gym.cli.names import resolve_world_specs
    from dream_gym.dream.held_out import HELD_OUT_MARGIN
    from dream_gym.dream.improve import NO_HELD_OUT, DreamSettings

    if args.validate and args.validate != NO_HELD_OUT:
        resolve_world_specs(args.validate, "--validate")
    margin = HELD_OUT_MARGIN if args.held_out_margin is None else args.held_out_margin
    return DreamSettings(revisions=args.revisions, scoring=scoring_settings(args), gate=args.gate,
                         held_out_margin=margin, **more)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "dream", help="improve an exploration policy on replay (one improvement step)",
        description=(
            "Build M versions of the policy (the incumbent and M-1 revisions by the developer), validate each, "
            "evaluate each isolated on every history world at every beta (twice, in separate processes: "
            "a nondeterministic revision is refused), and keep the argmax, the incumbent included. Before a "
            "revision is deployed, it and the incumbent are scored on held-out worlds it was not selected on "
            "(--validate; by default one shipped held-out world of each task the history does not hold): it is "
            "not deployed when it fails there or scores more than --held-out-margin below the incumbent. "
            "Exits 1 when episodes of the incumbent (your --policy) ended with an error, unless --allow-errors "
            "(revisions that fail are refused and shown in the table)."
        ),
    )
    p.add_argument("--history", required=True, action=WorldList,
                   help="worlds to select on (a folder, dataset id, split, ...; a comma list, or repeat)")
    p.add_argument("--policy", "-p", required=True, help="the incumbent: built-in name, module:Class or policy .py file; "
                                                            "'greedy(patience=10)' gives parameters")
    add_held_out_arguments(p)
    p.add_argument("--out", required=True, type=Path, help="the run folder")
    add_scoring_arguments(p)
    add_allow_errors(p)
    p.set_defaults(func=run)


def scoring_settings(args: argparse.Namespace) -> Any:
    from dream_gym.dream.scoring import ScoringSettings
    from dream_gym.evaluation.evaluate import parse_betas
    from dream_gym.replay.settings import ReplaySettings

    return ScoringSettings(
        betas=parse_betas(args.betas), select=args.select, lam=args.lam,
        replay=ReplaySettings(beta1=args.beta1, beta2=args.beta2, max_rounds=args.max_rounds), seed=args.seed, jobs=args.jobs, decision_timeout_s=args.decision_timeout,
        memory_mb=args.memory_mb,
    )


def usd_text(cost: dict[str, float]) -> str:
    """The dollars of a cost, saying how many calls had no price (litellm knows none for the model:
    a local or unlisted one), which count $0."""
    unpriced = int(cost.get("unpriced", 0.0))
    if not unpriced:
        return f"${cost.get('usd', 0.0):.4f}"
    calls = "every call" if unpriced == int(cost.get("calls", 0.0)) else f"{unpriced} call{'s' * (unpriced != 1)}"
    return f"${cost.get('usd', 0.0):.4f} ({calls} unpriced: litellm knows no price for the model)"


def version_line(record: Any, revisions: int, best: Any, indent: int = 0) -> Any:
    """One progress line for a finished version, ``indent`` columns in (rich Text; print it as
    :class:`Hanging`)."""
    from rich.text import Text

    from dream_gym.dream.versions import version_name

    score = "-" if record.score is None else f"{record.score:.4f}"
    colour = {"incumbent": "bold", "ok": "green"}.get(record.status, "red")
    text = (" " * indent + f"[{colour}]phase {record.phase} {version_name(record, revisions)}[/{colour}] "
            f"score {score}  best so far version {best.m} ({best.score:.4f})  {record.seconds:.1f}s")
    problem = record.error or record.warning
    if problem:  # a revision's words: escaped, and never read as markup
        from rich.markup import escape as rich_escape

        text += "\n" + " " * (indent + 4) + f"[dim]{rich_escape(shown(problem, 300))}[/dim]"
    return Text.from_markup(text)


def phase_table(result: Any) -> Any:
    from rich.table import Table

    table = Table(title=f"Phase {result.phase}: versions on the history")
    for column in ("m", "status", "score", "vs incumbent", "notes / error"):
        table.add_column(column, justify="right" if column in ("m", "score", "vs incumbent") else "left")
    base = result.incumbent_score
    for v in result.versions:
        mark = " *" if v.m == result.deployed_m else ""
        score = "-" if v.score is None else f"{v.score:.4f}"
        delta = "-" if v.score is None or base is None else f"{v.score - base:+.4f}"
        note = v.error or v.warning or notable(v.notes or "")  # whole in the version's .json
        table.add_row(f"{v.m}{mark}", v.status, score, delta, cell(note, 90))
    return table


#: Notes every LLM revision has when its call went as it should: the table leaves them out (they stay
#: in the version's .json), so that what went otherwise has the column.
USUAL_NOTES = ("model=", "extraction=python-block", "attempts=1", "finish_reason=stop")


def notable(notes: str) -> str:
    """A version's notes without the ones every call that went as it should has."""
    return "; ".join(part for part in notes.split("; ") if not part.startswith(USUAL_NOTES))


def scores_note(worlds: Any, betas: Any, select: str) -> str:
    """What a version's score is and where it was measured."""
    from dream_gym.cli.names import betas_note, w_note, worlds_count

    what = "mean V" if select == "V" else "v2"
    return f"score: {what} over {worlds_count(worlds)} x betas {betas_note(betas)}, replayed {w_note(worlds, None)}"


def incumbent_failures(out: Path, phase: int, spec: str) -> list[str]:
    """The failure line of the incumbent's episodes (empty when none failed)."""
    from dream_gym.dream.versions import version_path
    from dream_gym.evaluation.results import read_results

    path = version_path(out, phase, 0, ".results.jsonl")
    rows = read_results(path) if path.is_file() else []
    failed = [r for r in rows if r.get("error")]
    if not failed:
        return []
    first = failed[0]
    return [f"policy {spec}: {len(failed)} of {len(rows)} episodes failed; first: {first['error']} "
            f"(on {shown(first['world'])}, beta {float(first['beta']):g})"]


def incumbent_doubts(result: Any, spec: str) -> list[str]:
    """The line of an incumbent whose two evaluations differed (empty otherwise): it stays the
    fallback, but its score, and a selection against it, are not reproducible."""
    incumbent = next((v for v in result.versions if v.m == 0), None)
    if incumbent is None or not incumbent.warning or "nondeterministic" not in incumbent.warning:
        return []
    return [f"policy {spec}: nondeterministic (two evaluations in separate processes differ), so its score and the "
            f"selection against it are not reproducible: {incumbent.warning.split('differ: ', 1)[-1]}"]


def held_out_lines(result: Any, gate: bool = False) -> list[Any]:
    """What the held-out check of a phase found, as rich Text (never markup: the worlds' ids and
    the revision's errors are others' text): the scores there, the verdict, the warning."""
    from rich.text import Text

    from dream_gym.infrastructure.printable import TEXT_CHARS

    check = result.validation
    if not check:
        none = "the incumbent is kept" if result.selected_m == 0 else "no held-out worlds (--validate none)"
        return [Text(f"held-out check: none ({none})")]
    where = "one shipped held-out world per task the history does not hold" if check.get("auto") else "--validate"
    lines = [Text(f"held-out worlds ({where}): {', '.join(shown(w) for w in check.get('worlds', []))}"),
             Text(f"  on them: incumbent {check['incumbent']:.4f}, version {result.selected_m} "
                  f"{check['selected']:.4f} (gain {check['gain']:+.4f}; "
                  f"{'--gate: no drop' if gate else 'margin ' + format(check.get('margin', 0.0), 'g')}): "
                  f"{check.get('verdict', 'deployed')}")]
    if result.warning:
        lines.append(Text(f"WARNING: {shown(result.warning, TEXT_CHARS)}", style="bold red"))
    return lines


def run(args: argparse.Namespace) -> int:

    from dream_gym.cli.names import check_incumbent, resolve_world_specs
    from dream_gym.cli.options import parse_betas_option
    from dream_gym.dream.improve import DreamRun, run_dream

    check_incumbent(args.policy, **file_options(args))  # named, not the run's copy of it
    history = resolve_world_specs(args.history, "--history")
    parse_betas_option(args.betas)
    progress = console(stderr=True)
    settings = dream_settings(args)
    dream_run = DreamRun(history=args.history, policy=args.policy, developer=args.developer, out=args.out,
                         settings=settings, validate=args.validate, api_base=args.api_base, resume=args.resume)

    def events(kind: str, data: dict[str, Any]) -> None:
        if kind == "version" and not args.quiet:
            progress.print(Hanging(version_line(data["record"], data["revisions"], data["best"])))
        elif kind == "llm_retry" and not args.quiet:
            progress.print(Hanging(f"developer: {data['text']}"))
        elif kind == "held_out" and not args.quiet:
            progress.print(Hanging(f"held-out check of version {data['m']} and the incumbent on "
                                   f"{', '.join(shown(w.id) for w in data['worlds'])}"))

    result = run_dream(dream_run, events)
    out = console()
    out.print(phase_table(result))
    out.print(scores_note(history, settings.scoring.betas, settings.scoring.select), highlight=False)
    out.print(f"selected version {result.selected_m} (gain on the history {result.gain_history:+.4f}); "
              f"deployed version {result.deployed_m}"
              + (" (the held-out check kept the incumbent)" if result.gated else ""))
    for line in held_out_lines(result, args.gate):
        out.print(Hanging(line))
    cost = result.cost
    out.print(f"development cost: {cost['calls']:.0f} LLM call{'s' * (cost['calls'] != 1)}, "
              f"{cost['tokens_in'] + cost['tokens_out']:.0f} tokens, {usd_text(cost)}", markup=False)
    out.print(f"chosen policy: {args.out / 'chosen.py'}; ratchet plot: {args.out / 'ratchet.png'}")
    failed, doubts = incumbent_failures(args.out, result.phase, args.policy), incumbent_doubts(result, args.policy)
    return report_failures("dream", failed + doubts, args.allow_errors,
                           "episodes failed" if failed else "the incumbent is nondeterministic")

