"""The real-run split (``real_runs_split.json`` beside this file) and the folders it is imported into.

    .venv/bin/python -m experiments.recommended.split --out out/rec/real      # import every split

Each run is imported with ``dream-gym worlds import --from <system> <run> --workers 4 --id <name>``
(a ShinkaEvolve run from its ``evolution_db.sqlite``) into ``<out>/<split>/<name>``; the train split's
runs are also written stopped after their first 10 and 20 attempts (``<out>/train-prefixes/<name>@<n>``,
:func:`dream_gym.world.tree.prefix_world`), the real half of the training pool. Nothing is copied into the
repository: the folders live under ``out/`` (git-ignored) or a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from dream_gym.world.tree import World, load_world, prefix_world

HERE = Path(__file__).resolve().parent
SPLIT_FILE = HERE / "real_runs_split.json"
REPO = HERE.parents[1]
SPLITS = ("train", "validation", "test")
PREFIXES = (10, 20)  # the real train runs have 19-30 attempts; the synthetic pool's prefixes are 50, 100, 200


def load_split(path: Path = SPLIT_FILE) -> dict[str, Any]:
    """The split file, checked: every run in one split only, no task in two splits."""
    split = json.loads(path.read_text(encoding="utf-8"))
    seen: dict[str, str] = {}
    tasks: dict[tuple[str, str], str] = {}
    for name in SPLITS:
        for entry in split[name]:
            if entry["run"] in seen:
                raise ValueError(f"{entry['run']} is in {seen[entry['run']]} and {name}")
            seen[entry["run"]] = name
            key = (entry["system"].split(" ")[0], entry["task"])
            if tasks.setdefault(key, name) != name:
                raise ValueError(f"task {key} straddles {tasks[key]} and {name}")
    return split


def runs_root(split: dict[str, Any]) -> Path:
    return (REPO / split["runs_root"]).resolve()


def import_command(run: Path, system: str, out: Path, workers: int) -> list[str]:
    src = run / "evolution_db.sqlite" if system == "shinkaevolve" else run
    return [sys.executable, "-m", "dream_gym", "worlds", "import", "--from", system, str(src), "--out", str(out),
            "--workers", str(workers), "--id", run.name]


def import_split(out: Path, which: str, split: dict[str, Any] | None = None, say: Any = print) -> list[World]:
    """The worlds of one split, imported into ``out/<which>`` (a run already imported is reused)."""
    split = split or load_split()
    root = runs_root(split)
    worlds = []
    for entry in split[which]:
        system, _, name = entry["run"].partition("/")
        target = out / which / name
        if not (target / "world.json").is_file():
            command = import_command(root / system / name, system, target, int(split["workers"]))
            say("$ " + " ".join(["dream-gym", *command[3:]]).replace(str(root), "$RUNS").replace(str(out), "$OUT"))
            subprocess.run(command, check=True, capture_output=True, text=True)
        worlds.append(load_world(target))
    return worlds


def write_world(world: World, folder: Path) -> None:
    """A world (a prefix, built in memory) as a ``dream-gym-world/1`` folder."""
    folder.mkdir(parents=True, exist_ok=True)
    meta = {k: v for k, v in world.meta.items() if k != "sha256"}
    (folder / "nodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in world.records), encoding="utf-8")
    (folder / "world.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


def write_prefixes(worlds: list[World], out: Path, prefixes: tuple[int, ...] = PREFIXES) -> list[Path]:
    folders = []
    for world in worlds:
        for n in prefixes:
            if n < world.size - 1:
                folder = out / f"{world.id}@{n}"
                if not (folder / "world.json").is_file():
                    write_world(prefix_world(world, n), folder)
                folders.append(folder)
    return folders


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "out" / "rec" / "real")
    args = parser.parse_args(argv)
    split = load_split()
    for which in SPLITS:
        worlds = import_split(args.out, which, split)
        print(f"{which}: {len(worlds)} runs, {sum(w.size - 1 for w in worlds)} attempts "
              f"({', '.join(f'{w.id} {w.size - 1}' for w in worlds)})")
        if which == "train":
            folders = write_prefixes(worlds, args.out / "train-prefixes")
            print(f"train prefixes at {PREFIXES}: {len(folders)} worlds in {args.out / 'train-prefixes'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
