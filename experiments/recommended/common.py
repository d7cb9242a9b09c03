"""What every step of the recommended experiment shares: the kinds (PROTOCOL.md §3), their training
commands, the world sets, and the measures (§2) computed from evaluation results."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dream_gym.evaluation.leaderboard import leaderboard
from dream_gym.policies import POLICIES

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
OUT = REPO / "out" / "rec"
REAL = OUT / "real"
LOGS = HERE / "logs"
POOL_D = "train,dream-gym/recorded-v0:train,out/rec/real/train,out/rec/real/train-prefixes"
POOL_ARGS = ["--worlds", POOL_D, "--prefixes", "50,100,200", "--eval-every", "0", "--heldout", ""]

# PROTOCOL.md §3: kind -> (arch, options, steps)
KINDS: dict[str, tuple[str, list[str], int]] = {
    "macro-d": ("macro", ["--ent-coef", "0.003"], 120_000),
    "macro-d-p01": ("macro", ["--ent-coef", "0.003", "--price-high", "2", "--price-low", "0.1"], 120_000),
    "macro-d-240k": ("macro", ["--ent-coef", "0.003"], 240_000),
    "macro-v-d": ("macro", ["--ent-coef", "0.003", "--objective", "v"], 240_000),
    "macro-v-d-480k": ("macro", ["--ent-coef", "0.003", "--objective", "v"], 480_000),
    "options-d": ("options", ["--ent-coef", "0.003"], 120_000),
    "options-v-d": ("options", ["--ent-coef", "0.003", "--objective", "v"], 120_000),
    # the recipes of models shipped before this experiment (pool C, synthetic worlds only; their recorded
    # commands in agents/models/README.md): retrained for seeds 0-4 only for one that wins a place (§4, §7)
    "options-c": ("options", ["--ent-coef", "0.003"], 120_000),
    "options-v-c": ("options", ["--ent-coef", "0.003", "--objective", "v"], 240_000),
    "macro-v-c": ("macro", ["--ent-coef", "0.003", "--objective", "v"], 480_000),
    "options-long-c": ("options", ["--ent-coef", "0.003", "--price-high", "2", "--price-low", "0.1"], 120_000),
}
POOL_C_ARGS = ["--worlds", "train,dream-gym/recorded-v0:train", "--prefixes", "50,100,200", "--eval-every", "0",
               "--heldout", ""]
OLD_KIND = {"ppo-options": "options-c", "ppo-options-v": "options-v-c", "ppo-macro-v": "macro-v-c",
            "ppo-options-long": "options-long-c"}

# the world sets (selection data first; test data last)
SETS = {
    "real-train": str(REAL / "train"),
    "real-val": str(REAL / "validation"),
    "v0-heldout": "dream-gym/recorded-v0:heldout",
    "real-test": str(REAL / "test"),
    "v1-heldout": "heldout",
}
REAL_W = 4  # real runs are imported and replayed at W = 4; synthetic worlds at their recorded W


def run_dir(kind: str, seed: int) -> Path:
    return OUT / "runs" / f"{kind}-s{seed}"


def model_zip(kind: str, seed: int) -> str:
    return str(run_dir(kind, seed) / "model.zip")


def train_command(kind: str, seed: int) -> list[str]:
    arch, options, steps = KINDS[kind]
    return ["nice", "-n", "15", sys.executable, "-m", "dream_gym", "train", "--arch", arch, "--seed", str(seed),
            "--timesteps", str(steps), "--out", str(run_dir(kind, seed).relative_to(REPO)), *options,
            *(POOL_C_ARGS if kind.endswith("-c") else POOL_ARGS)]


def shown(command: Sequence[str]) -> str:
    text = " ".join(f'"{c}"' if c == "" else c for c in command)
    return text.replace(sys.executable + " -m dream_gym", "dream-gym").replace(str(REPO) + "/", "")


def train(kind: str, seed: int, log: Path) -> dict[str, Any]:
    """Train one (kind, seed) unless its summary exists; the command goes to ``log``."""
    folder = run_dir(kind, seed)
    if not (folder / "summary.json").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        try:  # one runner per run: another runner that claimed it is waited for
            os.close(os.open(folder / "claimed", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            while not (folder / "summary.json").is_file():
                time.sleep(10)
            return dict(json.loads((folder / "summary.json").read_text()))
        command = train_command(kind, seed)
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"- `{shown(command)}`\n")
        with open(folder / "train.log", "a", encoding="utf-8") as out:
            subprocess.run(command, check=True, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    return dict(json.loads((folder / "summary.json").read_text()))


# --------------------------------------------------------------------------- measures


@dataclass
class Row:
    """One policy's figures on one world set (means over worlds)."""

    policy: str
    v_half: float
    mean_v: float
    v2: float
    share_half: float  # mean over worlds of V(0.5) / limit
    share_grid: float  # mean over worlds of mean V / limit
    attempts_half: float
    worst: float  # lowest per-world V(0.5)
    worst_world: str
    per_world_half: dict[str, float]
    per_world_v2: dict[str, float]
    per_world_mean_v: dict[str, float]


def rows_of(results: Iterable[Any]) -> dict[str, Row]:
    """Per policy, the §2 measures from a list of EpisodeResult (one evaluation over the grid)."""
    results = list(results)
    board = leaderboard(results)
    errors = board.errors
    if errors:
        policy, world, beta, message = errors[0]
        raise RuntimeError(f"{len(errors)} episodes ended with an error, e.g. {policy} on {world} (beta {beta:g}): "
                           f"{message}")
    out: dict[str, Row] = {}
    for overall in board.overall:
        p = overall.policy
        half = {r.world: r for r in results if r.policy == p and abs(r.beta - 0.5) < 1e-9}
        per_world = {w: rows[0] for w, rows in ((w, [r for r in rs if r.policy == p]) for w, rs in
                                                board.per_world.items()) if rows}
        vh = {w: r.replay_score for w, r in half.items()}
        worst_world = min(vh, key=lambda w: vh[w])
        out[p] = Row(
            policy=p, v_half=statistics.fmean(vh.values()), mean_v=overall.mean_v, v2=overall.v2,
            share_half=statistics.fmean(r.replay_score / r.limit for r in half.values()),
            share_grid=overall.limit_share, attempts_half=statistics.fmean(r.attempts for r in half.values()),
            worst=vh[worst_world], worst_world=worst_world, per_world_half=vh,
            per_world_v2={w: r.v2 for w, r in per_world.items()},
            per_world_mean_v={w: r.mean_v for w, r in per_world.items()},
        )
    return out


def hindsight(rows: dict[str, Row], members: Sequence[str] = tuple(POLICIES)) -> dict[str, float]:
    """The per-world hindsight pick over ``members`` (the built-ins): per measure, the mean over worlds
    of the best member's figure on each world."""
    got = [rows[m] for m in members]
    worlds = list(got[0].per_world_half)
    return {
        "v_half": statistics.fmean(max(r.per_world_half[w] for r in got) for w in worlds),
        "v2": statistics.fmean(max(r.per_world_v2[w] for r in got) for w in worlds),
        "mean_v": statistics.fmean(max(r.per_world_mean_v[w] for r in got) for w in worlds),
    }


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def fmt(values: Sequence[float], percent: bool = False, digits: int = 4) -> str:
    mean, sd = mean_sd(values)
    if percent:
        return f"{100 * mean:.1f}%" + (f" ± {100 * sd:.1f}" if len(values) > 1 else "")
    return f"{mean:.{digits}f}" + (f" ± {sd:.{digits}f}" if len(values) > 1 else "")


def finite(x: float) -> bool:
    return isinstance(x, float) and math.isfinite(x)
