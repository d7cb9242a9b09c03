"""What every step of the cross-validated choice of ``recommended`` shares (PROTOCOL.md): the
families and folds, the four settings, the kinds and their training commands, the fold pools, and
the measures computed from evaluation results."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
OUT = REPO / "out" / "rcv"
REAL = OUT / "real"
LOGS = HERE / "logs"
IMPORT_COMMAND = "dream-gym worlds import /work/shared/external-runs --out out/rcv/real --from auto -W 4"

#: The nine built-ins (the ``coverage`` recorder of dream_gym.policies is not a search policy).
BUILTINS = ("random", "greedy", "fixed", "ucb", "puct", "hyperband", "openevolve", "shinka", "stagnation")
ADAPTIVE = "experiments.recommended.adaptive:AdaptiveSpend"


@dataclass(frozen=True)
class Setting:
    """One replay setting of the protocol (§2)."""

    name: str
    workers: int
    beta1: float
    beta2: float


SETTINGS = (Setting("W2", 2, 0.003, 0.02), Setting("W4", 4, 0.003, 0.02), Setting("W10", 10, 0.003, 0.02),
            Setting("W10i", 10, 0.002, 0.0))
SETTING = {s.name: s for s in SETTINGS}


def families() -> dict[str, list[str]]:
    """family -> its run (world) names, as written in families.json before any run."""
    data = json.loads((HERE / "families.json").read_text(encoding="utf-8"))
    return {name: list(entry["runs"]) for name, entry in data["families"].items()}


def family_of() -> dict[str, str]:
    return {run: fam for fam, runs in families().items() for run in runs}


def all_runs() -> list[str]:
    return [run for runs in families().values() for run in runs]


def train_runs(held_out: str | None) -> list[str]:
    """The real runs of the fold that holds ``held_out`` out (None: every family)."""
    return [run for fam, runs in families().items() if fam != held_out for run in runs]


# --------------------------------------------------------------------------- RL kinds (§3, item 3)

POOL_DRAWS = ["--draw-workers", "2,4,6,10", "--draw-prices", "0.003:0.02,0.002:0.01,0.002:0"]
KINDS: dict[str, tuple[str, list[str], int]] = {  # kind -> (arch, options, steps): the earlier models' recipes
    "cv-node-v": ("node", ["--objective", "v"], 480_000),
    "cv-node": ("node", [], 240_000),
    "cv-macro": ("macro", ["--ent-coef", "0.003"], 120_000),
    "cv-macro-v": ("macro", ["--ent-coef", "0.003", "--objective", "v"], 480_000),
    "cv-options": ("options", ["--ent-coef", "0.003"], 120_000),
    "cv-options-v": ("options", ["--ent-coef", "0.003", "--objective", "v"], 240_000),
}
ALL_FAMILIES = "all"  # the fold name of a final model, trained on every family


def pool_dir(fold: str) -> Path:
    return OUT / "pools" / fold


def run_dir(kind: str, fold: str) -> Path:
    return OUT / "runs" / f"{kind}-{fold}"


def model_zip(kind: str, fold: str) -> Path:
    return run_dir(kind, fold) / "model.zip"


def write_world(world: Any, folder: Path) -> None:
    """A world (a prefix, built in memory) as a ``dream-gym-world/1`` folder."""
    folder.mkdir(parents=True, exist_ok=True)
    meta = {k: v for k, v in world.meta.items() if k != "sha256"}
    (folder / "nodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in world.records), encoding="utf-8")
    (folder / "world.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


def build_pool(fold: str) -> Path:
    """The fold's real training runs (links) and their prefixes at 10 and 20 attempts (§4)."""
    from dream_gym.world.tree import load_world, prefix_world

    folder = pool_dir(fold)
    held_out = None if fold == ALL_FAMILIES else fold
    for run in train_runs(held_out):
        link = folder / run
        if not link.exists():
            folder.mkdir(parents=True, exist_ok=True)
            link.symlink_to(REAL / run, target_is_directory=True)
        world = load_world(REAL / run)
        for n in (10, 20):
            target = folder / f"{run}@{n}"
            if n < world.size - 1 and not (target / "world.json").is_file():
                write_world(prefix_world(world, n), target)
    return folder


def train_command(kind: str, fold: str) -> list[str]:
    arch, options, steps = KINDS[kind]
    pool = f"dream-gym/recorded-v1,dream-gym/recorded-v0,{pool_dir(fold).relative_to(REPO)}"
    return ["nice", "-n", "15", sys.executable, "-m", "dream_gym", "train", "--arch", arch, "--seed", "0",
            "--timesteps", str(steps), "--out", str(run_dir(kind, fold).relative_to(REPO)), *options,
            "--worlds", pool, "--prefixes", "50,100,200", *POOL_DRAWS, "--eval-every", "0", "--heldout", ""]


def shown(command: Sequence[str]) -> str:
    text = " ".join(f'"{c}"' if c == "" else c for c in command)
    return text.replace(sys.executable + " -m dream_gym", "dream-gym").replace(str(REPO) + "/", "")


def claim(folder: Path) -> bool:
    """True when this process claims ``folder``'s job; False when another runner has (it goes on
    to the next job)."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(folder / "claimed", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def train(kind: str, fold: str, log: Path, resume: bool = False) -> Path:
    """Train one (kind, fold) unless its model exists; the command goes to ``log``.

    ``resume``: also take over a folder another runner claimed and left unfinished (killed): the
    same command continues from the folder's last checkpoint. Only when no other runner is alive.
    """
    folder, model = run_dir(kind, fold), model_zip(kind, fold)
    taken_over = resume and (folder / "claimed").is_file()
    if not model.is_file() and (taken_over or claim(folder)):
        build_pool(fold)
        command = train_command(kind, fold)
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"- `{shown(command)}`{' (resumed from its last checkpoint)' if taken_over else ''}\n")
        with open(folder / "train.log", "a", encoding="utf-8") as out:
            subprocess.run(command, check=True, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    return model


# --------------------------------------------------------------------------- measures


def bootstrap_ci(values: Sequence[float], resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile interval of the mean of ``values`` (resampled with replacement)."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(len(data), size=(resamples, len(data)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def mean(values: Iterable[float]) -> float:
    return statistics.fmean(values)
