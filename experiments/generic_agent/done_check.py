"""The keyless deploy check: every system runs, records, improves and repeats with its seed.

Run once (not in CI), from the repository root; the runs get the environment without any variable
whose name holds KEY, TOKEN or SECRET, so no model key can reach them:

    nice -n 10 .venv/bin/python experiments/generic_agent/done_check.py --out /tmp/dream-gym-done-check

It runs, through the installed CLI and twice with the same seed into two folders (``-1``, ``-2``),

    dream-gym deploy --system SYSTEM --task TASK --policy greedy -W 2 --budget 20 --seed 0 --out DIR

for OpenEvolve on each of the five example tasks of OpenEvolve's repository
(``/work/shared/openevolve-examples``, given as ``initial_program.py,evaluator.py``; the two AlgoTune
tasks with ``--read ~/github/AlgoTune``, the checkout their evaluator imports) and for ShinkaEvolve and
SkyDiscover on the built-in task circle-packing-26. Per case it says how many programs the run
recorded, whether the best score beats the initial program's, and whether the two runs gave the
same tree: every node's id, parent, code and score (``nodes.jsonl``; parents compared through the
nodes' positions too, for a system whose ids are drawn afresh each run), and besides that the
node's round, worker, error and metrics with the timing metrics left out. An AlgoTune score is a measured
speed-up (wall clock), so there the comparison says which scores differ and by how much, and
whether ids, parents and code still agree.

Every command is appended to ``<out>/commands.log``; a finished run (``run_summary.json``) is kept,
an unfinished folder is removed and run again, so a killed check continues where it stopped.
``--only`` picks cases (``openevolve:fft_convolution``, ``skydiscover:circle-packing-26``, ...);
``--once`` runs a case once only (the second run then counts as not made); ``--policy-arg
patience=100`` runs the cases with greedy spending its whole budget (the command above uses
greedy's defaults, which stop after three rounds without a new best), kept as separate cases;
``--table-only`` runs nothing and rewrites the tables from ``done_check.json``. It writes
``done_check.json`` and ``done_check.md`` (the table) beside this file, and the table into
``README.md`` between its marker lines. For a wall-clock score, an "improvement" no larger than
the largest difference between the two runs' scores of one program is marked "(timing noise)".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

EXAMPLES_DIR = Path("/work/shared/openevolve-examples")
ALGOTUNE = Path.home() / "github" / "AlgoTune"
#: in the order they run: the quick ones first, the AlgoTune evaluations (seconds each) last
CASES = (
    ("openevolve", "function_minimization"), ("openevolve", "k_module_problem"),
    ("openevolve", "heilbronn_triangle"), ("shinkaevolve", "circle-packing-26"),
    ("skydiscover", "circle-packing-26"), ("openevolve", "fft_convolution"),
    ("openevolve", "polynomial_real"),
)
NEEDS_ALGOTUNE = ("polynomial_real", "fft_convolution")
#: examples whose score is a wall-clock measure (a speed-up over a reference solver)
TIMED_SCORES = NEEDS_ALGOTUNE
POLICY, W, BUDGET, SEED = "greedy", 2, 20, 0
OTHER = ("round", "worker", "error", "metrics")
HERE = Path(__file__).resolve().parent
DREAM_GYM = str(Path(sys.executable).parent / "dream-gym")


def case_name(system: str, task: str, variant: str = "") -> str:
    """A case's key: ``SYSTEM:TASK``, and the policy arguments when a case adds some."""
    return f"{system}:{task}" + (f" {variant}" if variant else "")


def task_arg(task: str) -> str:
    folder = EXAMPLES_DIR / task
    return f"{folder / 'initial_program.py'},{folder / 'evaluator.py'}" if folder.is_dir() else task


def command(system: str, task: str, out: Path, policy_args: list[str]) -> list[str]:
    read = ["--read", str(ALGOTUNE)] if task in NEEDS_ALGOTUNE else []
    extra = [part for pair in policy_args for part in ("--policy-arg", pair)]
    return [DREAM_GYM, "deploy", "--system", system, "--task", task_arg(task), "--policy", POLICY, *extra,
            "-W", str(W), "--budget", str(BUDGET), "--seed", str(SEED), "--out", str(out), *read]


def keyless_env() -> dict[str, str]:
    """The environment without any variable that could hold a model key (the check runs keyless)."""
    secretish = ("KEY", "TOKEN", "SECRET")
    return {name: value for name, value in os.environ.items()
            if not any(part in name.upper() for part in secretish)}


def run_once(args: list[str], folder: Path, log: Path) -> float | None:
    """Run one deploy unless its folder already holds a finished run; seconds it took (None: kept)."""
    if (folder / "run_summary.json").exists():
        return None
    if folder.exists():
        shutil.rmtree(folder)
    line = shlex.join(["nice", "-n", "10", "dream-gym", *args[1:]])
    with log.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    started = time.time()
    done = subprocess.run(["nice", "-n", "10", *args], capture_output=True, text=True, cwd="/tmp",
                          env=keyless_env())
    if done.returncode != 0:
        raise RuntimeError(f"{line} failed:\n{done.stderr[-3000:]}")
    return round(time.time() - started, 1)


def nodes(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "nodes.jsonl").read_text().splitlines() if line.strip()]


def untimed(metrics: object) -> object:
    """A node's metrics without the ones that measure time (they differ between any two runs)."""
    if not isinstance(metrics, dict):
        return metrics
    timing = ("time", "timestamp", "seconds", "speedup", "duration")
    return {key: untimed(value) for key, value in metrics.items()
            if not any(word in key.lower() for word in timing)}


def summary(folder: Path) -> dict:
    records = nodes(folder)
    scores = [r["score"] for r in records if r.get("score") is not None]
    initial, best = records[0].get("score"), (max(scores) if scores else None)
    run = json.loads((folder / "run_summary.json").read_text())
    return {
        "programs": len(records), "invalid": sum(1 for r in records if r.get("score") is None),
        "initial_score": initial, "best_score": best,
        "improved": initial is not None and best is not None and best > initial,
        "stopped_by": run.get("stopped_by"), "seconds": round(float(run.get("seconds") or 0.0), 1),
        "folder": str(folder),
    }


def compare(first: Path, second: Path) -> dict:
    """Whether two runs' worlds hold the same tree, and where they first part if not."""
    one, two = nodes(first), nodes(second)
    found: dict = {"same_count": len(one) == len(two), "first_difference": None,
                   "same_parents_code": True, "same_scores": True, "max_score_difference": 0.0,
                   "other_fields_differing": []}
    pairs = list(zip(one, two, strict=False))  # node by node, as far as the shorter run goes
    found["same_ids"] = found["same_count"] and all(a["id"] == b["id"] for a, b in pairs)
    renamed = {b["id"]: a["id"] for a, b in pairs}  # the second run's ids by position
    for index, (a, b) in enumerate(pairs):
        same_program = (renamed.get(b.get("parent"), b.get("parent")) == a.get("parent")
                        and a.get("code") == b.get("code"))
        if not same_program:
            found["same_parents_code"] = False
            field = "code" if a.get("code") != b.get("code") else "parent"
            found["first_difference"] = found["first_difference"] or {"node": index, "field": field}
            if found.get("first_structural_difference") is None:
                found["first_structural_difference"] = index
        if a.get("score") != b.get("score"):
            found["same_scores"] = False
            found["first_difference"] = found["first_difference"] or {"node": index, "field": "score"}
        if a.get("score") != b.get("score") and same_program:  # one program measured twice
            if a.get("score") is not None and b.get("score") is not None:
                gap = abs(float(a["score"]) - float(b["score"]))
                found["max_score_difference"] = max(found["max_score_difference"], gap)
            else:
                found["max_score_difference"] = math.inf
        for key in OTHER:
            left, right = a.get(key), b.get(key)
            if key == "metrics":
                left, right = untimed(left), untimed(right)
            if left != right and key not in found["other_fields_differing"]:
                found["other_fields_differing"].append(key)
    if not found["same_count"] and found.get("first_structural_difference") is None:
        found["first_structural_difference"] = min(len(one), len(two))
    found["same_tree_up_to_ids"] = found["same_count"] and found["same_parents_code"] and found["same_scores"]
    found["same_tree"] = found["same_tree_up_to_ids"] and found["same_ids"]
    if found["max_score_difference"] == math.inf:
        found["max_score_difference"] = "a program valid in one run only"
    return found


def check(system: str, task: str, policy_args: list[str], out: Path, log: Path, runs: int) -> dict:
    variant = " ".join(policy_args)
    name = f"{system}-{task}" + "".join(f"-{pair.replace('=', '-')}" for pair in policy_args)
    folders = [out / f"{name}-{index}" for index in range(1, runs + 1)]
    made = [run_once(command(system, task, folder, policy_args), folder, log) for folder in folders]
    entry: dict = {
        "system": system, "task": task, "variant": variant, "score_is_wall_clock": task in TIMED_SCORES,
        "command": shlex.join(["dream-gym", *command(system, task, out / f"{name}-N", policy_args)[1:]]),
        "runs": [summary(folder) for folder in folders], "seconds_this_check": made,
    }
    entry["twice"] = compare(folders[0], folders[1]) if runs == 2 else None
    return entry


def yes_no(flag: bool | None) -> str:
    """A flag as the table shows it."""
    return "—" if flag is None else ("yes" if flag else "no")


def per_run(entry: dict, key: str, form: str = "{}") -> str:
    """One value of each run, as ``first / second``."""
    return " / ".join(form.format(run[key]) for run in entry["runs"])


def same_tree_text(entry: dict) -> str:
    """The table's answer to "the same tree both times?"."""
    twice = entry["twice"]
    if twice is None:
        return "not run twice"
    if twice["same_tree"]:
        return "yes"
    if twice["same_tree_up_to_ids"]:
        return "yes but the ids (drawn afresh each run)"
    if twice["same_parents_code"] and twice["same_count"]:
        return f"parents, code yes; scores differ (wall clock, up to {twice['max_score_difference']:.3g})"
    where, split = twice["first_difference"], twice.get("first_structural_difference")
    if entry["score_is_wall_clock"] and where and where["field"] == "score":
        gap = twice["max_score_difference"]
        gap_text = f"{gap:.2g}" if isinstance(gap, float) else gap
        return (f"no, and it cannot: every score is a wall-clock speed-up, so the same program scores "
                f"differently each run (by up to {gap_text}); ids, parents and code agree on the first {split} "
                f"nodes, then greedy's choices follow the different scores")
    return f"no: from node {where['node']} ({where['field']})" if where else "no: node counts differ"


def improved_text(entry: dict, run: dict) -> str:
    """Whether a run improved; for a wall-clock score, a gain no larger than the spread of one
    program's scores across the two runs is said to be within the timing noise."""
    text = yes_no(run["improved"])
    twice = entry.get("twice")
    noise = twice.get("max_score_difference") if twice else None
    if run["improved"] and entry.get("score_is_wall_clock") and isinstance(noise, float):
        if run["best_score"] - run["initial_score"] <= noise:
            text += " (timing noise)"
    return text


def table(entries: list[dict]) -> str:
    lines = ["| system | task | programs | invalid | initial | best | improved | same tree twice |",
             "|---|---|---:|---:|---:|---:|---|---|"]
    for entry in entries:
        improved = " / ".join(improved_text(entry, run) for run in entry["runs"])
        task = entry["task"] + (f" (`{entry['variant']}`)" if entry.get("variant") else "")
        lines.append(
            f"| {entry['system']} | {task} | {per_run(entry, 'programs')} | {per_run(entry, 'invalid')} | "
            f"{per_run(entry, 'initial_score', '{:.6g}')} | {per_run(entry, 'best_score', '{:.6g}')} | "
            f"{improved} | {same_tree_text(entry)} |")
    return "\n".join(lines) + "\n"


TABLE_START, TABLE_END = "<!-- done_check.py writes the table below -->", "<!-- end of done_check.py's table -->"


def write_into_readme(text: str) -> None:
    """The table in README.md between its two marker lines (the docs page includes the README,
    and an included file's own includes are not expanded)."""
    readme = HERE / "README.md"
    page = readme.read_text(encoding="utf-8")
    if TABLE_START in page and TABLE_END in page:
        head, rest = page.split(TABLE_START, 1)
        readme.write_text(f"{head}{TABLE_START}\n{text}{TABLE_END}{rest.split(TABLE_END, 1)[1]}", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/dream-gym-done-check"))
    parser.add_argument("--only", action="append", default=[], help="SYSTEM:TASK (repeatable)")
    parser.add_argument("--once", action="append", default=[], help="SYSTEM:TASK run once only")
    parser.add_argument("--policy-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="a parameter of greedy besides the check's command (a separate case: "
                             "'SYSTEM:TASK KEY=VALUE' in done_check.json)")
    parser.add_argument("--table-only", action="store_true",
                        help="run nothing: rewrite the tables from done_check.json")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "commands.log"
    wanted = [case for case in CASES if not args.only or case_name(*case) in args.only]
    if args.table_only:
        wanted = []
    entries = []
    for system, task in wanted:
        runs = 1 if case_name(system, task) in args.once else 2
        entries.append(check(system, task, args.policy_arg, args.out, log, runs))
        print(table(entries[-1:]), flush=True)
    result_path = HERE / "done_check.json"
    found = json.loads(result_path.read_text())["cases"] if result_path.exists() else {}
    found.update({case_name(e["system"], e["task"], e["variant"]): e for e in entries})
    variants = sorted({e.get("variant", "") for e in found.values()}, key=lambda v: (v != "", v))
    keys = [case_name(*case, variant) for variant in variants for case in CASES]
    ordered = [found[key] for key in keys if key in found]
    result_path.write_text(json.dumps({"cases": {case_name(e["system"], e["task"], e.get("variant", "")): e
                                                 for e in ordered}}, indent=2) + "\n", encoding="utf-8")
    (HERE / "done_check.md").write_text(table(ordered), encoding="utf-8")
    write_into_readme(table(ordered))
    print(table(ordered))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
