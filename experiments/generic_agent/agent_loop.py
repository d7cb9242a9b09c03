"""The generic agent alone on many tasks: a small greedy loop around the agent, no OpenEvolve.

A quick measure of a change to the agent (seconds to minutes, not the half hour of the deploy
runs), on the project's own built-in tasks (whose deploy runs use the task's own built-in agent,
so only this loop shows what the generic agent does on them), the files-task fixture of the
tests and OpenEvolve's example tasks. Run from the repository root:

    nice -n 10 .venv/bin/python experiments/generic_agent/agent_loop.py --agent OLD.py --label before
    nice -n 10 .venv/bin/python experiments/generic_agent/agent_loop.py --label after

``--agent`` loads another version of the agent, so both versions run on the same loop: a folder
holding a version of the package ``dream_gym/online/agents/generic/`` (``git archive REV
dream_gym/online/agents/generic | tar -x -C OLD`` gives ``OLD/dream_gym/online/agents/generic``),
or the one file it was before it became a package (``git show
bd201e4:dream_gym/online/agents/generic.py > OLD.py``).

The loop (fixed before measuring): the task's initial program is the root; each round the best
program so far (the first of the ties) is the parent of two children, the agent's generator
seeded by (seed, child number); the agent sees what OpenEvolve's prompt would show: the three
best other programs and two others drawn by the same seed, each with its score, a failed one
marked as failed (its error shown). Every child is evaluated in the sandbox (built-in tasks by
their own evaluator, files tasks by ``FilesTask``); a minimised task's score is negated. No stop
rule: ``--children`` children per run. Per run: the share of valid children and whether (and
by how much) the best beats the root. Results go to ``agent_loop.json`` beside this file, one
entry per label, and the table of all labels to ``agent_loop.md``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
EXAMPLES = Path("/work/shared/openevolve-examples")
BUILTIN = ("circle-packing-26", "sum-difference", "lasso-path", "autocorrelation")
FILES = {"fixture-openevolve_task": ROOT / "tests" / "data" / "openevolve_task",
         **{name: EXAMPLES / name for name in ("function_minimization", "heilbronn_triangle", "k_module_problem")}}


def load_agent(path: Path | None) -> ModuleType:
    """The agent module: the package's, another version of the package (a folder), or a version
    from before it was a package (one file)."""
    if path is None:
        from dream_gym.online.agents import generic
        return generic
    if path.is_dir():  # its modules import each other relatively, as parts of this package
        spec = importlib.util.spec_from_file_location("generic_under_test", path / "__init__.py",
                                                      submodule_search_locations=[str(path)])
    else:
        # a one-file version imports its history helpers under their name of that time
        sys.modules.setdefault("dream_gym.online.agents.generic_history",
                               importlib.import_module("dream_gym.online.agents.generic.history"))
        spec = importlib.util.spec_from_file_location("generic_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["generic_under_test"] = module
    spec.loader.exec_module(module)
    return module


class Evaluator:
    """One task's initial program and its sandboxed evaluation: (score to maximise or None, error)."""

    def __init__(self, name: str, seed: int):
        self.name = name
        if name in FILES:
            from dream_gym.integrations.files_task import FilesTask, sandbox_wall_s
            folder = FILES[name]
            self.files = FilesTask.of(folder / "evaluator.py", seed=seed, wall_s=sandbox_wall_s(120))
            self.initial = (folder / "initial_program.py").read_text(encoding="utf-8")
        else:
            from dream_gym.online.tasks import get_task
            self.task = get_task(name)
            self.initial = self.task.initial_program()

    def __call__(self, code: str) -> tuple[float | None, str | None]:
        if hasattr(self, "files"):
            metrics = self.files.evaluate_code(code.encode()).metrics
            score, error = metrics.get("combined_score"), metrics.get("error")
            if error is not None or not isinstance(score, (int, float)):
                return None, str(error)[:200]
            return float(score), None
        with tempfile.TemporaryDirectory() as folder:
            evaluation = self.task.evaluate(code, Path(folder))
        if not evaluation.valid or evaluation.score is None:
            return None, (evaluation.error or "invalid")[:200]
        return (evaluation.score if self.task.direction == "maximize" else -evaluation.score), None


def shown(agent: ModuleType, programs: list[dict[str, Any]], parent: int, rng: np.random.Generator) -> list[Any]:
    """The donors a prompt would show: the three best others and two others at random."""
    others = [i for i in range(len(programs)) if i != parent]
    ranked = sorted(others, key=lambda i: -(programs[i]["score"] if programs[i]["score"] is not None else -1e300))
    chosen = ranked[:3]
    rest = ranked[3:]
    if rest:
        chosen += [rest[int(j)] for j in rng.choice(len(rest), size=min(2, len(rest)), replace=False)]
    donors = []
    for i in chosen:
        program = programs[i]
        fields = {"code": program["code"], "score": program["score"] if program["score"] is not None else 0.0}
        if "failed" in getattr(agent.Donor, "__dataclass_fields__", {}):
            fields["failed"] = program["score"] is None
        donors.append(agent.Donor(**fields))
    return donors


def run(agent: ModuleType, name: str, seed: int, children: int) -> dict[str, Any]:
    evaluate = Evaluator(name, seed)
    root_score, root_error = evaluate(evaluate.initial)
    programs = [{"code": evaluate.initial, "score": root_score, "error": root_error}]
    generic = agent.GenericAgent()
    started = time.time()
    for number in range(children):
        scored = [i for i, p in enumerate(programs) if p["score"] is not None]
        parent = max(scored, key=lambda i: programs[i]["score"]) if scored else 0
        donors = shown(agent, programs, parent, np.random.default_rng([seed, number, 7]))
        code, notes = generic.child(programs[parent]["code"], donors, np.random.default_rng([seed, number]),
                                    parent_score=programs[parent]["score"])
        score, error = evaluate(code)
        programs.append({"code": code, "score": score, "error": error, "notes": notes})
    valid = [p for p in programs[1:] if p["score"] is not None]
    best = max((p["score"] for p in programs if p["score"] is not None), default=None)
    return {"task": name, "seed": seed, "children": children, "valid": len(valid),
            "root": root_score, "best": best,
            "improved": best is not None and root_score is not None and best > root_score,
            "seconds": round(time.time() - started, 1),
            "errors": sorted({(p["error"] or "")[:60] for p in programs[1:] if p["score"] is None})[:5]}


def table(stored: dict[str, Any]) -> str:
    """Per task and label: valid children (pooled over seeds), runs improved, mean best - root."""
    lines = ["| task | " + " | ".join(f"{label}: valid, improved, mean gain" for label in stored) + " |",
             "|---|" + "---|" * len(stored)]
    tasks = list(dict.fromkeys(r["task"] for entry in stored.values() for r in entry["runs"]))
    for task in tasks:
        cells = []
        for entry in stored.values():
            runs = [r for r in entry["runs"] if r["task"] == task]
            if not runs:
                cells.append("—")
                continue
            valid = sum(r["valid"] for r in runs) / sum(r["children"] for r in runs)
            gains = [r["best"] - r["root"] for r in runs if r["best"] is not None and r["root"] is not None]
            gain = f"{sum(gains) / len(gains):.3g}" if gains else "—"
            cells.append(f"{valid:.0%}, {sum(r['improved'] for r in runs)}/{len(runs)}, {gain}")
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", type=Path, help="another version of the agent: a package folder or a one-file version (default: the package's)")
    parser.add_argument("--label", required=True, help="the name of this measurement in agent_loop.json")
    parser.add_argument("--task", action="append", default=[], help="only this task (repeatable)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--children", type=int, default=30)
    parser.add_argument("--json", type=Path, default=HERE / "agent_loop.json", help="where the results go")
    args = parser.parse_args()
    agent = load_agent(args.agent)
    names = args.task or [*BUILTIN, *(n for n, f in FILES.items() if f.is_dir())]
    runs = []
    for name in names:
        for seed in args.seeds:
            result = run(agent, name, seed, args.children)
            runs.append(result)
            print(json.dumps(result), flush=True)
    path = args.json
    stored = json.loads(path.read_text()) if path.exists() else {}
    stored[args.label] = {"children": args.children, "seeds": args.seeds, "runs": runs}
    path.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")
    path.with_suffix(".md").write_text(table(stored), encoding="utf-8")
    print(table(stored))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
