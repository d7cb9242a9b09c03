"""The PPO figures of docs/guides/train.md: ``agents/train_ppo.py`` over several seeds, as mean +- spread.

    .venv/bin/python -m experiments.rl.seeds                          # seeds 0,1,2, train_ppo defaults
    .venv/bin/python -m experiments.rl.seeds --seeds 0,1,2,3,4 --repeat -- --total-timesteps 300000

Each seed runs ``agents/train_ppo.py --seed S --out OUT/seed-S [extra args]`` in its own process
(so torch's settings start fresh each time) and writes ``summary.json`` there; a seed whose
summary exists with the same arguments and commit is not trained again, so an interrupted run
resumes.
``--repeat`` trains the first seed a second time (``OUT/seed-S-repeat``) and checks that the two
runs give identical weights and held-out results: on one machine with the same torch settings
they must (``train_ppo.seed_everything`` states the settings). Prints one row per seed, then mean
+- standard deviation (and min..max) of each figure, beside the built-in policies on the same
held-out worlds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "agents" / "train_ppo.py"
FIGURES = (  # (label, how to read it from a summary)
    ("train s", lambda s: s["train"]["seconds"]),
    ("train V before", lambda s: s["train"]["train_mean_v_untrained"]),
    ("train V after", lambda s: s["train"]["train_mean_v_trained"]),
    ("held-out V", lambda s: s["heldout"]["ppo"]["mean_v"]),
    ("held-out v2", lambda s: s["heldout"]["ppo"]["v2"]),
    ("held-out rank", lambda s: s["heldout"]["ppo"]["rank"]),
)


def _commit() -> str:
    """The checked-out commit (with "+dirty" when files differ from it): a summary made by other
    code is not reused."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO).stdout.strip()

    return git("rev-parse", "HEAD") + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def run_seed(seed: int, out: Path, extra: list[str]) -> dict[str, Any]:
    """Train and evaluate one seed (or reuse its summary when the arguments and code match)."""
    command = [sys.executable, str(TRAIN), "--seed", str(seed), "--out", str(out), *extra]
    key = {"command": command[2:], "commit": _commit()}
    summary_path = out / "summary.json"
    recorded = out / "command.json"
    if (summary_path.is_file() and recorded.is_file() and json.loads(recorded.read_text()) == key
            and not key["commit"].endswith("+dirty")):
        print(f"seed {seed}: reusing {summary_path}", flush=True)
        return dict(json.loads(summary_path.read_text()))
    out.mkdir(parents=True, exist_ok=True)
    summary_path.unlink(missing_ok=True)
    recorded.write_text(json.dumps(key))
    print(f"seed {seed}: {' '.join(command)}", flush=True)
    with open(out / "train.log", "w", encoding="utf-8") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    return dict(json.loads(summary_path.read_text()))


def weights_digest(out: Path) -> str:
    with zipfile.ZipFile(out / "ppo_macro.zip") as archive:
        return hashlib.sha256(archive.read("policy.pth")).hexdigest()[:16]


def heldout_rows(out: Path) -> list[dict[str, Any]]:
    """The held-out episodes of a run, the model's path replaced by "ppo" (folders differ)."""
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    for row in rows:
        if row["policy"].endswith(".zip"):
            row["policy"] = "ppo"
    return rows


def spread(values: list[float]) -> str:
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.4f} +- {sd:.4f} ({min(values):.4f}..{max(values):.4f})"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--out", type=Path, default=REPO / "out" / "ppo_seeds", help="one folder per seed here")
    parser.add_argument("--repeat", action="store_true", help="train the first seed twice and compare")
    args = parser.parse_args(own)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    summaries = {seed: run_seed(seed, args.out / f"seed-{seed}", extra) for seed in seeds}

    first = next(iter(summaries.values()))
    print(f"\ndeterminism settings: {first['train']['determinism']}")
    print(f"train_ppo arguments: {' '.join(extra) or '(defaults)'}; seeds {seeds}\n")
    print(f"{'seed':>5} " + " ".join(f"{label:>14}" for label, _ in FIGURES) + "  weights")
    for seed, summary in summaries.items():
        cells = " ".join(f"{read(summary):14.4f}" for _, read in FIGURES)
        print(f"{seed:>5} {cells}  {weights_digest(args.out / f'seed-{seed}')}")
    print()
    for label, read in FIGURES:
        print(f"{label:>14}: {spread([float(read(s)) for s in summaries.values()])}")
    baselines = {name: row for name, row in first["heldout"].items() if name not in ("ppo", "random")}
    print("\nbuilt-in policies on the same held-out worlds (deterministic; random depends on the seed):")
    for name, row in sorted(baselines.items(), key=lambda item: item[1]["rank"]):
        print(f"  {name:<12} V {row['mean_v']:.4f}  v2 {row['v2']:.4f}")
    if "random" in first["heldout"]:
        print(f"  {'random':<12} V {spread([s['heldout']['random']['mean_v'] for s in summaries.values()])}")

    if args.repeat:
        seed = seeds[0]
        again = run_seed(seed, args.out / f"seed-{seed}-repeat", extra)
        same_weights = weights_digest(args.out / f"seed-{seed}") == weights_digest(args.out / f"seed-{seed}-repeat")
        same_results = heldout_rows(args.out / f"seed-{seed}") == heldout_rows(args.out / f"seed-{seed}-repeat")
        same_figures = all(read(summaries[seed]) == read(again) for label, read in FIGURES if label != "train s")
        print(f"\nrepeat of seed {seed}: weights identical {same_weights}, held-out results identical "
              f"{same_results}, figures identical {same_figures}")
        if not (same_weights and same_results and same_figures):
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
