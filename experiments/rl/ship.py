"""Ship trained models: the release step that writes ``agents/models`` and its model card.

    .venv/bin/python -m experiments.rl.ship --kinds options,options-v --seeds 0,1,2 --out out/rl
    .venv/bin/python -m experiments.rl.ship --kinds node --ensemble node --ensemble-groups 0-4 --out out/rl

Per model kind (see :mod:`experiments.rl.results`; its runs in ``OUT/<kind>-s<seed>``, trained here
first by their ``dream-gym train`` command when not finished), copies the seed with the best
**train-pool** score of its own objective (v2, or mean V for a ``-v`` kind; never a held-out figure),
or, for a kind adopted as a seed ensemble (``--ensemble``), the first group's members, to the files
:data:`dream_gym.policies.trained.SHIPPED_MODELS` names, and writes ``agents/models/README.md``:
one line per shipped model with its command and train-pool figures (the other kinds' lines stay).
Extra arguments after ``--`` go to every ``dream-gym train``, as for the results.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from dream_gym.policies.trained import SHIPPED_MODELS
from experiments.rl.results import OPTIONS, REPO, STEPS, own_score, run, run_choice, split_extra
from experiments.rl.seeds import spread

MODELS = REPO / "agents" / "models"


def ship(kind: str, runs: dict[int, dict[str, Any]], out: Path, target: Path,
         groups: list[list[int]] | None) -> str:
    """Copy a kind's shipped model (the best train-pool seed, or the first ensemble group's members)
    to the files SHIPPED_MODELS names; returns its line of agents/models/README.md."""
    files = SHIPPED_MODELS[f"ppo-{kind}"].split("+")
    if groups is None:
        if len(files) != 1:
            raise ValueError(f"ppo-{kind} ships {len(files)} members (an ensemble): pass --ensemble {kind}")
        key = f"train_{own_score(kind)}"
        best = max(runs, key=lambda s: runs[s]["final"][key])
        shutil.copyfile(out / f"{kind}-s{best}" / "model.zip", target / files[0])
        return (f"- `{files[0]}`: seed {best} of {sorted(runs)}, `{runs[best]['command']}` (train-pool v2 "
                f"{runs[best]['final']['train_v2']:.4f}, mean V {runs[best]['final']['train_mean_v']:.4f}, "
                f"{runs[best]['seconds']:.0f} s)")
    members = groups[0]
    if len(files) != len(members):
        raise ValueError(f"SHIPPED_MODELS names {len(files)} files for ppo-{kind}, the first group has {len(members)}")
    for filename, seed in zip(files, members, strict=True):
        shutil.copyfile(out / f"{kind}-s{seed}" / "model.zip", target / filename)
    command = runs[members[0]]["command"].replace(f"--seed {members[0]} ", "--seed S ").replace(
        f"{kind}-s{members[0]} ", f"{kind}-sS ")
    return (f"- `{'`, `'.join(files)}`: the seed ensemble of seeds {members} (in this order; spec "
            f"`ppo-{kind}`), each `{command}` (S = the seed; train-pool v2 of the members "
            f"{spread([runs[s]['final']['train_v2'] for s in members])}, "
            f"{spread([runs[s]['seconds'] for s in members])} s each)")


def kept_lines(readme: Path) -> dict[str, str]:
    """The shipped models' lines of an agents/models/README.md, by shipped name (a line names its
    first file, whose name is the shipped name's first member)."""
    lines: dict[str, str] = {}
    if readme.is_file():
        for line in readme.read_text(encoding="utf-8").splitlines():
            for name, files in SHIPPED_MODELS.items():
                if line.startswith(f"- `{files.split('+')[0]}`"):
                    lines[name] = line
    return lines


def model_card(lines: dict[str, str]) -> str:
    """agents/models/README.md: how the models were chosen, then one line per shipped model."""
    notes = ["# Shipped models", "", "Shipped by `python -m experiments.rl.ship`: per model kind, of the seeds "
             "trained, the one with the best score of its own objective on the **train** pool (v2 for the "
             "beta-priced kinds, mean V for the `-v` models, trained on plain V; held-out figures are never "
             "used to choose), or, for a kind adopted as a seed ensemble on the validation set, the first "
             "ensemble's members. Load them by name: "
             + ", ".join(f"`--policy {name}`" for name in SHIPPED_MODELS if name in lines) + ".", "",
             *(lines[name] for name in SHIPPED_MODELS if name in lines)]
    return "\n".join(notes) + "\n"


def main(argv: list[str] | None = None) -> int:
    own, extra = split_extra(list(sys.argv[1:] if argv is None else argv))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--kinds", required=True, help="model kinds to ship (see experiments.rl.results)")
    parser.add_argument("--out", type=Path, default=REPO / "out" / "rl", help="the runs' folder")
    parser.add_argument("--ensemble", default="", help="kinds shipped as seed ensembles (their first group)")
    parser.add_argument("--ensemble-groups", default="0-4,5-9,10-14", help="the seeds of each ensemble")
    parser.add_argument("--models", type=Path, default=MODELS, help="where the shipped models go")
    args = parser.parse_args(own)
    seeds, kinds, ensembles, groups = run_choice(args)

    def trained(kind: str, seed: int) -> dict[str, Any]:
        return run(kind, seed, args.out / f"{kind}-s{seed}", STEPS[kind], [*OPTIONS.get(kind, []), *extra])

    args.models.mkdir(parents=True, exist_ok=True)
    card = args.models / "README.md"
    lines = kept_lines(card)  # the other kinds' models stay, with their lines
    for kind in kinds:
        runs = {seed: trained(kind, seed) for seed in seeds}
        if kind in ensembles:
            runs.update({seed: trained(kind, seed) for g in groups for seed in g})
        lines[f"ppo-{kind}"] = ship(kind, runs, args.out, args.models, groups if kind in ensembles else None)
    card.write_text(model_card(lines), encoding="utf-8")
    print(f"shipped: {', '.join(f'ppo-{k}' for k in kinds)} -> {args.models} (card: {card})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
