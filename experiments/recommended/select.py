"""The choices of PROTOCOL.md, on the validation data only (real validation split, recorded-v0 held-out).

    .venv/bin/python -m experiments.recommended.select --stage a    # stage A: which kinds get seeds 3, 4
    .venv/bin/python -m experiments.recommended.select --stage b    # recommended and the shipping slots

Stage A scores every kind of §3 over seeds 0-2; stage B scores the field of §4 (the built-ins, the
older shipped models, the stage-B kinds over seeds 0-4, AdaptiveSpend, the dreamed policy) and writes
``choice.json`` (the rule's outcome, which ``dream_gym.policies.recommended.RECOMMENDED`` must name:
tests/test_recommended.py checks it) and the markdown table to ``logs/stage_<x>.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from dream_gym.policies import POLICIES
from experiments.recommended.common import HERE, KINDS, LOGS, fmt, model_zip
from experiments.recommended.eval_specs import ADAPTIVE, OLD_SHIPPED
from experiments.recommended.scoring import label, rows

DREAMED = "out/rec/dream/chosen.py"
TIE = 0.002


def figures(specs: list[str]) -> dict[str, dict[str, float]]:
    """Per spec: V½ and v2 on the real validation split, mean V on recorded-v0's held-out split, S."""
    real, syn = rows(specs, "real-val"), rows(specs, "v0-heldout")
    out = {}
    for spec in specs:
        f = {"v_half": real[spec].v_half, "v2": real[spec].v2, "syn_mean_v": syn[spec].mean_v,
             "real_mean_v": real[spec].mean_v, "attempts_half": real[spec].attempts_half}
        f["S"] = (f["v_half"] + f["v2"] + f["syn_mean_v"]) / 3
        out[spec] = f
    return out


def kind_figures(kind: str, seeds: list[int]) -> tuple[dict[str, float], dict[str, list[float]]]:
    per_seed = figures([model_zip(kind, s) for s in seeds])
    keys = next(iter(per_seed.values())).keys()
    values = {k: [per_seed[model_zip(kind, s)][k] for s in seeds] for k in keys}
    return {k: statistics.fmean(v) for k, v in values.items()}, values


def line(name: str, f: dict[str, float], spread: dict[str, list[float]] | None = None) -> str:
    def cell(k: str) -> str:
        return fmt(spread[k]) if spread else f"{f[k]:.4f}"

    return (f"| {name} | {cell('v_half')} | {cell('v2')} | {cell('syn_mean_v')} | **{f['S']:.4f}** | "
            f"{cell('real_mean_v')} | {f['attempts_half']:.1f} |")


HEADER = ["| candidate | real-val V½ | real-val v2 | v0-heldout mean V | S | real-val mean V | attempts (β ½) |",
          "|---|---:|---:|---:|---:|---:|---:|"]


def stage_a() -> dict[str, Any]:
    seeds = [0, 1, 2]
    table = {kind: kind_figures(kind, seeds) for kind in KINDS if not kind.endswith("-c")}  # §3 (pool D)
    builtins = figures(list(POLICIES))
    lines = ["# Stage A: the kinds of PROTOCOL.md §3, seeds 0-2, on the validation data", "", *HEADER]
    for kind, (f, spread) in sorted(table.items(), key=lambda kv: -kv[1][0]["S"]):
        lines.append(line(f"`{kind}` (3 seeds)", f, spread))
    for name, f in sorted(builtins.items(), key=lambda kv: -kv[1]["S"]):
        lines.append(line(name, f))
    chosen = {"S": max(table, key=lambda k: table[k][0]["S"]), "v2": max(table, key=lambda k: table[k][0]["v2"]),
              "v_half": max(table, key=lambda k: table[k][0]["v_half"])}
    lines += ["", f"Stage B kinds (seeds 3, 4 added): best S `{chosen['S']}`, best real-val v2 `{chosen['v2']}`, "
              f"best real-val V½ `{chosen['v_half']}`."]
    (LOGS / "stage_a.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    result = {"stage_b_kinds": sorted(set(chosen.values())), "by": chosen}
    (LOGS / "stage_a.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def stage_b() -> dict[str, Any]:
    kinds = json.loads((LOGS / "stage_a.json").read_text())["stage_b_kinds"]
    seeds = [0, 1, 2, 3, 4]
    learned = {kind: kind_figures(kind, seeds) for kind in kinds}
    singles = [*POLICIES, *[m for m in OLD_SHIPPED], ADAPTIVE]
    if Path(DREAMED).is_file():
        singles.append(DREAMED)
    fixed = figures(singles)
    field: dict[str, dict[str, float]] = {**{f"kind:{k}": f for k, (f, _) in learned.items()}, **fixed}

    def simplicity(name: str) -> int:
        if name in POLICIES:
            return 0
        if name.endswith(".py") or name == ADAPTIVE:
            return 1
        return 2

    best = max(f["S"] for f in field.values())
    tied = [n for n, f in field.items() if f["S"] >= best - TIE]
    recommended = min(tied, key=lambda n: (simplicity(n), -field[n]["S"]))
    # the incumbent form for dream/rsi (PROTOCOL.md, amendment): the best member that can be a policy file
    files = {n: f for n, f in field.items() if simplicity(n) < 2}
    best_file = max(f["S"] for f in files.values())
    recommended_file = min((n for n, f in files.items() if f["S"] >= best_file - TIE),
                           key=lambda n: (simplicity(n), -files[n]["S"]))
    # the shipping slots (§7): learned candidates only, each must beat the best built-in on its figure
    learned_names = [n for n in field if n.startswith("kind:") or n in OLD_SHIPPED]
    slots = {}
    for key in ("S", "v2", "v_half"):
        top = max(learned_names, key=lambda n: field[n][key])
        bar = max(fixed[p][key] for p in POLICIES)
        slots[key] = {"winner": top, "figure": field[top][key], "best_builtin": bar, "ships": field[top][key] > bar}
    lines = ["# Stage B: the field of PROTOCOL.md §4 on the validation data (learned kinds: seeds 0-4)", "",
             *HEADER]
    for name, f in sorted(field.items(), key=lambda kv: -kv[1]["S"]):
        spread = learned[name[5:]][1] if name.startswith("kind:") else None
        shown = f"`{name[5:]}` (5 seeds)" if spread else label(name)
        lines.append(line(("**" + shown + "** (recommended)") if name == recommended else shown, f, spread))
    lines += ["", f"recommended: `{recommended}` (S {field[recommended]['S']:.4f}; tied within {TIE}: "
              f"{', '.join(label(n) for n in tied)})", ""]
    for key, slot in slots.items():
        lines.append(f"- slot {key}: {label(slot['winner'])} {slot['figure']:.4f} against the best built-in "
                     f"{slot['best_builtin']:.4f}: {'ships' if slot['ships'] else 'does not ship'}")
    lines.append(f"- incumbent form for dream/rsi: `{recommended_file}` (S {field[recommended_file]['S']:.4f})")
    choice = {"recommended": recommended, "S": field[recommended]["S"], "tied": tied,
              "recommended_file": recommended_file, "slots": slots, "field": field}
    (LOGS / "stage_b.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    (HERE / "choice.json").write_text(json.dumps(choice, indent=1) + "\n", encoding="utf-8")
    return choice


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=("a", "b"), required=True)
    args = parser.parse_args(argv)
    stage_a() if args.stage == "a" else stage_b()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
