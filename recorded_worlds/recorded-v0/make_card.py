"""Write this dataset's dataset.json (ids, split, sha256 of every file) and README.md card.

    .venv/bin/python recorded_worlds/make_card.py

The split is fixed by task and seed: every circle-packing-32 world (a task no training world
covers) and every seed-1 world of the other tasks are held out; the rest is the train split.
"""

from __future__ import annotations

import json
from pathlib import Path

from dream_gym.datasets.packing import file_digests
from dream_gym.datasets.store import DATASET_FORMAT, validate_dataset_meta
from dream_gym.world.tree import FORMAT as WORLD_FORMAT
from dream_gym.world.tree import load_world

HERE = Path(__file__).resolve().parent
DATASET_ID = "dream-gym/recorded-v0"
DESCRIPTION = (
    "Discovery trees grown by dream_gym's online loop with the built-in (no-LLM) agents on the "
    "built-in tasks, under different exploration policies and seeds; W=4, 150 attempts each."
)


def held_out(name: str) -> bool:
    return name.startswith("cp32-") or name.endswith("-s1")


def world_folders() -> list[Path]:
    return sorted(p for p in HERE.iterdir() if (p / "world.json").is_file())


def main() -> None:
    worlds = [load_world(folder) for folder in world_folders()]
    unfinished = [w.id for w in worlds if not w.meta.get("sha256")]
    if unfinished:
        raise SystemExit(f"unfinished worlds (no sha256 yet): {', '.join(unfinished)}")
    names = [w.id for w in worlds]
    digests = {rel: digest for rel, digest in file_digests(HERE).items() if rel.split("/")[0] in names}
    meta = {
        "format": DATASET_FORMAT,
        "id": DATASET_ID,
        "description": DESCRIPTION,
        "author": "dream_gym developers",
        "licence": "CC-BY-4.0",
        "world_format": WORLD_FORMAT,
        "worlds": [{"name": w.id, "task": w.task_name, "nodes": w.size, "direction": w.direction} for w in worlds],
        "split": {"train": [n for n in names if not held_out(n)], "held_out": [n for n in names if held_out(n)]},
        "files": digests,
    }
    validate_dataset_meta(HERE / "dataset.json", meta)
    (HERE / "dataset.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    (HERE / "README.md").write_text(card(worlds), encoding="utf-8")
    print(f"wrote dataset.json and README.md for {len(worlds)} worlds")


def card(worlds: list) -> str:
    lines = [
        f"# `{DATASET_ID}`: the shipped recorded worlds",
        "",
        DESCRIPTION,
        "",
        "Each folder is one world in the `dream-gym-world/1` format (`world.json` + `nodes.jsonl`), plus",
        "`evidence.jsonl` (one admissible evidence record per executed attempt) and `run_summary.json`.",
        "Every node has its program (`code`), the evaluator's `diagnostics`, `error`/`fail_class` when",
        "invalid, `round`, `worker`, `duration_s`, `eval_s`, `metrics` and `cost`. Scores are the tasks' own",
        "(`lasso-path` is a runtime in seconds, `direction: minimize`; replay negates it).",
        "",
        "Use: `gym.make(\"DreamGym/<name>-v0\")`, `gym.make(\"DreamGym/Replay-v0\", world=\"<name>\")`, or",
        f"`world=\"{DATASET_ID}/<name>\"`; `dream_gym.list_worlds()` lists them.",
        "",
        "**Split** (fixed; by task and seed): held out = every `circle-packing-32` world (a task absent",
        "from training) and every seed-1 world of the other tasks; train = the rest. `dream-gym eval",
        "--worlds heldout` and `--worlds train` select them.",
        "",
        "**Known biases.** The built-in agents are stochastic improvement operators, not LLMs: their",
        "failure modes (overlaps, duplicates, KKT violations, timeouts) are real evaluator verdicts, but",
        "their distribution differs from an LLM's. The `lasso-path` score is a measured runtime on a",
        "shared 2-core machine, so it is noisy (the survival check re-ran each best candidate 5 times).",
        "A leaf without a recorded child is where the growing policy stopped (the known frontier bias).",
        "Most of a world's quality gain comes early: the agents' first proposals from the baseline are",
        "big jumps (in the demo, the mean best q over policies is about 0.8 after 4 attempts), so a",
        "policy's rank depends much on when it stops and how wide its rounds are.",
        "",
        "| world | split | task | policy | seed | nodes | rounds | invalid | baseline | best | best known | survival |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for w in worlds:
        records = w.records
        invalid = sum(1 for r in records if r["score"] is None)
        rounds = max(int(r.get("round") or 0) for r in records)
        raw = [r["score"] for r in records if r["score"] is not None]
        best = min(raw) if w.direction == "minimize" else max(raw)
        survival = w.meta.get("survival") or {}
        verdict = "survived" if survival.get("survived") else "failed"
        if survival.get("repeats", 1) > 1 and survival.get("mean") is not None:
            verdict += f" ({survival['mean']:.4g} ± {survival.get('stdev') or 0:.2g})"
        lines.append(
            f"| `{w.id}` | {'held out' if held_out(w.id) else 'train'} | {w.task_name} | {w.meta.get('policy')} | "
            f"{w.meta.get('seed')} | {w.size} | {rounds} | {invalid} | {records[0]['score']:.6g} | {best:.6g} | "
            f"{w.meta.get('best_known') or '-'} | {verdict} |"
        )
    lines += ["", "## The exact commands", "",
              "`bash recorded_worlds/grow_all.sh NAME` re-grows one world; each world recorded its command:", ""]
    for w in worlds:
        lines.append(f"- `{w.id}`: `{w.meta.get('command', '(see grow_all.sh)')}`")
    lines += ["", "Seconds each world took to grow (2 cores shared with other work): `grow_times.txt`.", ""]
    stats = HERE / "STATS.md"  # written by experiments/world_stats.py --section recorded_worlds/STATS.md
    if stats.is_file():
        lines += ["## Discovery statistics and the oracle limit", "", stats.read_text(encoding="utf-8")]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
