"""Ship what PROTOCOL.md §7 says earns its place (after ``select --stage b`` wrote choice.json).

    .venv/bin/python -m experiments.recommended.ship

Per shipped learned kind: its seed (of 0-4) with the best train-pool score of its own objective (v2 for
a v2 kind, mean V for a V kind; never a validation or test figure), copied to
``agents/models/<name>.zip``. choice.json gains ``shipped_kinds`` (name -> kind), ``ships_as`` (the
shipped name of ``recommended`` when a learned kind won) and ``kept_old`` (older shipped models that
won a slot); the model card lines are printed.
"""

from __future__ import annotations

import json
import shutil

from experiments.recommended.common import HERE, KINDS, REPO, run_dir, shown, train_command

# the shipped name of each kind: "mix" = trained on the mixed pool D (real train runs and synthetic worlds)
NAMES = {"macro-d": "ppo-macro-mix", "macro-d-p01": "ppo-macro-mix-p01", "macro-d-240k": "ppo-macro-mix-240k",
         "macro-v-d": "ppo-macro-v-mix", "macro-v-d-480k": "ppo-macro-v-mix-480k", "options-d": "ppo-options-mix",
         "options-v-d": "ppo-options-v-mix"}


def own_key(kind: str) -> str:
    return "train_mean_v" if "--objective" in KINDS[kind][1] else "train_v2"


def best_seed(kind: str, seeds: list[int]) -> tuple[int, dict]:
    summaries = {s: json.loads((run_dir(kind, s) / "summary.json").read_text()) for s in seeds}
    seed = max(seeds, key=lambda s: summaries[s]["final"][own_key(kind)])
    return seed, summaries[seed]


def main() -> int:
    path = HERE / "choice.json"
    choice = json.loads(path.read_text())
    winners = [slot["winner"] for slot in choice["slots"].values() if slot["ships"]]
    if choice["recommended"].startswith("kind:"):
        winners.append(choice["recommended"])
    shipped, kept_old, lines = {}, [], []
    for winner in dict.fromkeys(winners):
        if not winner.startswith("kind:"):
            kept_old.append(winner)
            continue
        kind = winner[5:]
        seed, summary = best_seed(kind, [0, 1, 2, 3, 4])
        name = NAMES[kind]
        shutil.copyfile(run_dir(kind, seed) / "model.zip", REPO / "agents" / "models" / f"{name}.zip")
        shipped[name] = kind
        lines.append(f"- `{name}.zip`: seed {seed} of [0, 1, 2, 3, 4] (best train-pool {own_key(kind)[6:]}: "
                     f"{summary['final'][own_key(kind)]:.4f}), `{shown(train_command(kind, seed))}`")
    choice["shipped_kinds"] = shipped
    choice["kept_old"] = kept_old
    if choice["recommended"].startswith("kind:"):
        choice["ships_as"] = NAMES[choice["recommended"][5:]]
    path.write_text(json.dumps(choice, indent=1) + "\n", encoding="utf-8")
    print("\n".join(lines))
    print(f"kept older models: {kept_old}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
