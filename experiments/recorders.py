"""Which recorder grows worlds that answer the most of other policies' requests, at equal attempts?

    nice -n 10 .venv/bin/python -m experiments.recorders --out out/recorders [--seeds 0 1 2 3] [--attempts 40]

Recorders (docs/concepts/recorders.md), each on circle-packing-26 and sum-difference, per seed:

* through the OpenEvolve bridge (``dream-gym deploy --system openevolve``, OpenEvolve 0.4 with the
  no-LLM agent server, W = 2, the "any" rule, ``--attempts`` programs): ``native`` (OpenEvolve's own
  sampling, the bridge's default recorder), ``greedy`` (never stopping: patience 10^6), ``coverage``;
  ``pooled native`` (two native runs of half the programs each, seeds s and s + 100, pooled with
  ``dream-gym worlds pool``); ``rsi`` (``dream-gym rsi --system openevolve`` from greedy, 2 iterations
  of half the programs each, M = 4, its pool after iteration 2);
* through ``dream-gym grow`` (the built-in agent, W = 4, the "leaves" rule, ``--max-attempts``):
  ``recommended`` (grow's default recorder, which stops by itself), ``greedy`` (patience 10^6),
  ``random`` (never stopping), ``coverage``.

Each world is measured as ``dream-gym worlds stats`` measures coverage
(:func:`dream_gym.datasets.stats.reference_coverage`): for greedy, stagnation, hyperband and
OpenEvolve's sampler, replayed in request mode at the world's W and rule over beta 0, 0.1, ..., 1,
the share of their requests the world answers. Every run is kept under ``OUT`` and skipped when
done, so the script resumes. Writes ``OUT/recorders.md`` and ``OUT/recorders.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from dream_gym.datasets.stats import reference_coverage
from dream_gym.replay.settings import ReplaySettings
from dream_gym.world.tree import World, load_world

TASKS = ("circle-packing-26", "sum-difference")
MEASURED = ("greedy", "stagnation", "hyperband", "openevolve")
DREAM_GYM = [sys.executable, "-m", "dream_gym"]
NEVER_STOP = {"greedy": ["--policy-arg", "patience=1000000"], "random": ["--policy-arg", "p_stop=0"]}


def run(command: list[str]) -> None:
    print("+ dream-gym " + " ".join(command[3:]), flush=True)
    done = subprocess.run(["nice", "-n", "10", *command], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def finished(folder: Path) -> bool:
    meta = folder / "world.json"
    return meta.is_file() and bool(json.loads(meta.read_text()).get("sha256"))


def deployed(out: Path, task: str, policy: str, seed: int, budget: int) -> Path:
    if not finished(out):
        resume = ["--resume"] if (out / "nodes.jsonl").exists() else []
        run([*DREAM_GYM, "deploy", "--system", "openevolve", "--task", task, "--policy", policy,
             *NEVER_STOP.get(policy, []), "-W", "2", "--budget", str(budget), "--seed", str(seed), "--out", str(out),
             *resume])
    return out


def grown(out: Path, task: str, policy: str, seed: int, attempts: int) -> Path:
    if not finished(out):
        resume = ["--resume"] if (out / "nodes.jsonl").exists() else []
        run([*DREAM_GYM, "grow", "--task", task, "--policy", policy, *NEVER_STOP.get(policy, []), "-W", "4",
             "--rounds", "1000", "--max-attempts", str(attempts), "--seed", str(seed), "--out", str(out),
             "--quiet", *resume])
    return out


def pooled(out: Path, runs: list[Path]) -> Path:
    if not finished(out):
        if out.exists():
            import shutil

            shutil.rmtree(out)
        run([*DREAM_GYM, "worlds", "pool", *map(str, runs), "--out", str(out)])
    return out


def rsi_pool(out: Path, task: str, seed: int, budget: int) -> Path:
    pool = out / "pools" / "iter-2"
    if not finished(pool):
        resume = ["--resume"] if (out / "rsi.jsonl").exists() else []
        run([*DREAM_GYM, "rsi", "--system", "openevolve", "--task", task, "--policy", "greedy", "-W", "2",
             "--budget", str(budget), "--iterations", "2", "--revisions", "4", "--seed", str(seed), "-j", "1",
             "--out", str(out), "--quiet", *resume])
    return pool


def worlds_of(out: Path, task: str, seed: int, attempts: int) -> dict[str, Path]:
    base = out / "worlds" / task / f"s{seed}"
    half = attempts // 2
    worlds = {f"bridge {p}": deployed(base / f"oe-{p}", task, p, seed, attempts) for p in ("native", "greedy", "coverage")}
    halves = [deployed(base / f"oe-native-half-{s}", task, "native", s, half) for s in (seed, seed + 100)]
    worlds["bridge pooled native"] = pooled(base / "oe-native-pooled", halves)
    worlds["bridge rsi"] = rsi_pool(base / "oe-rsi", task, seed, half)
    for p in ("recommended", "greedy", "random", "coverage"):
        worlds[f"grow {p}"] = grown(base / f"grow-{p}", task, p, seed, attempts)
    return worlds


def measure(world: World) -> dict[str, float]:
    settings = ReplaySettings().resolved(world)
    shares = {p: reference_coverage(world, settings, p)[0] for p in MEASURED}
    return {"attempts": world.size - 1, **shares, "mean": statistics.mean(shares.values())}


def table(rows: dict[str, dict[str, list[dict[str, float]]]], task: str) -> list[str]:
    lines = [f"### {task}", "", "| recorder | attempts | " + " | ".join(MEASURED) + " | mean | seeds above native |",
             "|---|---:|" + "---:|" * (len(MEASURED) + 2)]
    for recorder, per_seed in rows[task].items():
        native = rows[task]["bridge native" if recorder.startswith("bridge") else "grow recommended"]
        above = sum(m["mean"] > n["mean"] for m, n in zip(per_seed, native, strict=True))
        cells = [f"{statistics.mean(m['attempts'] for m in per_seed):.1f}"]
        cells += [f"{100 * statistics.mean(m[p] for m in per_seed):.0f} %" for p in (*MEASURED, "mean")]
        lines.append(f"| {recorder} | " + " | ".join(cells) + f" | {above}/{len(per_seed)} |")
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("out/recorders"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--attempts", type=int, default=40)
    args = parser.parse_args()
    rows: dict[str, dict[str, list[dict[str, float]]]] = {}
    for task in TASKS:
        for seed in args.seeds:
            for recorder, folder in worlds_of(args.out, task, seed, args.attempts).items():
                rows.setdefault(task, {}).setdefault(recorder, []).append(measure(load_world(folder)))
    text = ["# Requests answered, by recorder", "",
            f"Share of each policy's requests (request mode, beta 0-1) the world answers; mean over seeds "
            f"{', '.join(map(str, args.seeds))}; {args.attempts} attempts per world (the bridge's pooled and rsi "
            "worlds: two runs of half as many). 'seeds above native': seeds on which the mean share is above "
            "the system's default recorder's (bridge: native; grow: recommended).", ""]
    for task in TASKS:
        text += table(rows, task)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "recorders.md").write_text("\n".join(text))
    (args.out / "recorders.json").write_text(json.dumps(rows, indent=1))
    print("\n".join(text))


if __name__ == "__main__":
    main()
