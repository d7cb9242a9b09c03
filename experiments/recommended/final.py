"""The final experiment of PROTOCOL.md §8 (run once, after choice.json was committed).

    nice -n 15 .venv/bin/python -m experiments.recommended.final

On the real test split and on recorded-v1's held-out split: ``recommended``, every shipped model (as
shipped, and its kind over seeds 0-4), the nine built-ins, AdaptiveSpend, the dreamed policy and the
older shipped models (their files, kept in ``out/rec/old-models``): V½, mean V, v2, % of the oracle
limit, % of the per-world hindsight pick over the built-ins, worst world. Writes ``logs/final.md``
and ``logs/final.json``; prints the targets met or missed.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from dream_gym.policies import POLICIES
from dream_gym.policies.recommended import NAME
from dream_gym.policies.trained import SHIPPED_MODELS
from experiments.recommended.common import HERE, LOGS, OLD_KIND, Row, fmt, hindsight, model_zip
from experiments.recommended.eval_specs import ADAPTIVE, OLD_SHIPPED
from experiments.recommended.scoring import label, rows
from experiments.recommended.select import DREAMED

OLD = Path("out/rec/old-models")  # relative, as the evaluation commands give it (the cache keys on the spec)


def kind_rows(kind: str, which: str, seeds: list[int]) -> list[Row]:
    got = rows([model_zip(kind, s) for s in seeds], which)
    return [got[model_zip(kind, s)] for s in seeds]


def summary(name: str, got: list[Row], h: dict[str, float]) -> dict[str, Any]:
    """The §2 figures of one entry (one row, or a kind's rows over seeds)."""
    worlds = list(got[0].per_world_half)
    per_world = {w: statistics.fmean(r.per_world_half[w] for r in got) for w in worlds}
    worst_world = min(per_world, key=lambda w: per_world[w])
    return {
        "name": name, "seeds": len(got),
        "v_half": [r.v_half for r in got], "mean_v": [r.mean_v for r in got], "v2": [r.v2 for r in got],
        "share_half": [r.share_half for r in got], "share_grid": [r.share_grid for r in got],
        "hind_half": [r.v_half / h["v_half"] for r in got], "hind_v2": [r.v2 / h["v2"] for r in got],
        "hind_mean_v": [r.mean_v / h["mean_v"] for r in got],
        "worst": per_world[worst_world], "worst_world": worst_world,
        "worst_single": min(r.worst for r in got), "attempts_half": statistics.fmean(r.attempts_half for r in got),
        "per_world_half": per_world,
    }


def table(entries: list[dict[str, Any]], h: dict[str, float], limit: float) -> list[str]:
    lines = ["| policy | V½ | mean V | v2 | % of limit (V½) | % of hindsight (V½) | % of hindsight (v2) | worst world (V½) "
             "| attempts (β ½) |", "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for e in sorted(entries, key=lambda e: -statistics.fmean(e["v_half"])):
        worst = f"{e['worst']:.3f} ({e['worst_world']})" + (f", lowest seed {e['worst_single']:.3f}" if e["seeds"] > 1 else "")
        name = f"{e['name']} ({e['seeds']} seeds)" if e["seeds"] > 1 else e["name"]
        lines.append(f"| {name} | {fmt(e['v_half'])} | {fmt(e['mean_v'])} | {fmt(e['v2'])} | {fmt(e['share_half'], True)} | "
                     f"{fmt(e['hind_half'], True)} | {fmt(e['hind_v2'], True)} | {worst} | {e['attempts_half']:.1f} |")
    lines.append(f"| *per-world hindsight pick over the built-ins* | {h['v_half']:.4f} | {h['mean_v']:.4f} | {h['v2']:.4f} | "
                 f"| 100% | 100% | | |")
    lines.append(f"| *oracle limit (mean over worlds)* | {limit:.4f} | {limit:.4f} | | 100% | | | | |")
    return lines


def main() -> int:
    choice = json.loads((HERE / "choice.json").read_text())
    # shipped name -> kind (new kinds shipped, and older shipped models kept: their recipe retrained, §4)
    shipped_kinds = {**choice.get("shipped_kinds", {}), **{n: OLD_KIND[n] for n in choice.get("kept_old", [])}}
    seeds = [0, 1, 2, 3, 4]
    report: dict[str, Any] = {}
    out_lines = ["# Final experiment (PROTOCOL.md §8): test data", ""]
    for which, title in (("real-test", "Real test split (7 runs, W = 4)"),
                         ("v1-heldout", "recorded-v1 held-out split (16 worlds, recorded W)")):
        singles = [NAME, *SHIPPED_MODELS, *POLICIES, ADAPTIVE]
        if Path(DREAMED).is_file():
            singles.append(DREAMED)
        olds = [str(OLD / f"{n}.zip") if n != "ppo-node" else "+".join(str(OLD / f"ppo-node-{i}.zip") for i in range(1, 6))
                for n in OLD_SHIPPED if n not in SHIPPED_MODELS] if which == "real-test" else []
        olds = [o for o in olds if all(Path(p).is_file() for p in o.split("+"))]
        got = rows(singles + olds, which)
        h = hindsight(got)
        entries = [summary(label(s) if s not in olds else "old " + Path(s.split("+")[0]).stem.removesuffix("-1"),
                           [got[s]], h) for s in singles + olds]
        for name, kind in shipped_kinds.items():
            entries.append(summary(f"`{kind}` kind of {name}", kind_rows(kind, which, seeds), h))
        rec_kind = recommended_kind(choice)
        if rec_kind and rec_kind not in shipped_kinds.values():
            entries.append(summary(f"`{rec_kind}` kind of recommended", kind_rows(rec_kind, which, seeds), h))
        limits = _limits(which)
        out_lines += [f"## {title}", "", *table(entries, h, statistics.fmean(limits.values())), ""]
        report[which] = {"entries": entries, "hindsight": h, "limits": limits}
    (LOGS / "final.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    out_lines += targets(report, choice)
    (LOGS / "final.md").write_text("\n".join(out_lines) + "\n", encoding="utf-8")
    print("\n".join(out_lines))
    return 0


def recommended_kind(choice: dict[str, Any]) -> str | None:
    """The kind whose seeds the targets average: a new kind, or the recipe of an older shipped model."""
    chosen = choice["recommended"]
    return chosen[5:] if chosen.startswith("kind:") else OLD_KIND.get(chosen)


def _limits(which: str) -> dict[str, float]:
    from dream_gym.evaluation.results import load_results
    from experiments.recommended.scoring import OUT as _OUT
    from experiments.recommended.scoring import tag

    results = load_results(_OUT / "eval" / which / f"{tag('greedy')}.jsonl")
    return {r.world: float(r.limit) for r in results if r.limit is not None}


def targets(report: dict[str, Any], choice: dict[str, Any]) -> list[str]:
    real = report["real-test"]["entries"]
    syn = report["v1-heldout"]["entries"]
    rec_kind = recommended_kind(choice)
    key = f"`{rec_kind}` kind of" if rec_kind else None

    def rec(entries: list[dict[str, Any]]) -> dict[str, Any]:
        if key:
            return next(e for e in entries if e["name"].startswith(key))
        return next(e for e in entries if e["name"] == NAME)

    def mean(e: dict[str, Any], k: str) -> float:
        return statistics.fmean(e[k])

    r = rec(real)
    shipped_row = next(e for e in real if e["name"] == NAME)
    same = {NAME, choice["recommended"]}  # recommended's own rows (its file under both names)
    others = [e for e in real if e is not r and e["name"] not in same]
    top_half = max(others, key=lambda e: mean(e, "v_half"))
    top_v2 = max(others, key=lambda e: mean(e, "v2"))
    best_builtin_syn = max((e for e in syn if e["name"] in POLICIES), key=lambda e: mean(e, "mean_v"))
    rs = rec(syn)
    checks = [
        ("real test: first by mean V½", mean(r, "v_half") > mean(top_half, "v_half"),
         f"{mean(r, 'v_half'):.4f} against the best other row, {top_half['name']} {mean(top_half, 'v_half'):.4f}"),
        ("real test: first by v2", mean(r, "v2") > mean(top_v2, "v2"),
         f"{mean(r, 'v2'):.4f} against the best other row, {top_v2['name']} {mean(top_v2, 'v2'):.4f}"),
        ("real test: ≥ 85 % of the oracle limit (V½)", mean(r, "share_half") >= 0.85, f"{100 * mean(r, 'share_half'):.1f}%"),
        ("real test: ≥ 95 % of the per-world hindsight pick over the built-ins (V½)", mean(r, "hind_half") >= 0.95,
         f"{100 * mean(r, 'hind_half'):.1f}% (v2: {100 * mean(r, 'hind_v2'):.1f}%, mean V: {100 * mean(r, 'hind_mean_v'):.1f}%)"),
        ("real test: no run below V½ = 0.3 (per world, the mean over seeds)", r["worst"] >= 0.3,
         f"worst {r['worst']:.3f} ({r['worst_world']}); but the lowest single seed has {r['worst_single']:.3f}, and the "
         f"shipped file (`{NAME}` row) {shipped_row['worst']:.3f} ({shipped_row['worst_world']})"),
        ("recorded-v1 held-out: mean V ≥ the best built-in's", mean(rs, "mean_v") >= mean(best_builtin_syn, "mean_v"),
         f"{mean(rs, 'mean_v'):.4f} against {best_builtin_syn['name']} {mean(best_builtin_syn, 'mean_v'):.4f}"),
    ]
    lines = ["## Targets (recommended" + (f" = the `{rec_kind}` kind, mean over seeds 0-4" if rec_kind else "") + ")", ""]
    lines += [f"- **{'met' if ok else 'missed'}**: {what}: {detail}" for what, ok, detail in checks]
    lines.append(f"- the shipped `{NAME}` file alone (one seed): V½ {mean(shipped_row, 'v_half'):.4f}, v2 "
                 f"{mean(shipped_row, 'v2'):.4f}, {100 * mean(shipped_row, 'share_half'):.1f}% of the limit, "
                 f"{100 * mean(shipped_row, 'hind_half'):.1f}% of the hindsight pick; recorded-v1 mean V "
                 f"{mean(next(e for e in syn if e['name'] == NAME), 'mean_v'):.4f}")
    # adaptation: the gap between fixed built-ins and the hindsight pick (V½), and who closes part of it
    h = report["real-test"]["hindsight"]["v_half"]
    builtins = {e["name"]: mean(e, "v_half") for e in real if e["name"] in POLICIES}
    val_builtin = max((n for n in POLICIES), key=lambda n: choice["field"][n]["S"])
    lines += ["", "## Adaptation (real test, V½)", "",
              f"- per-world hindsight pick over the built-ins: {h:.4f}; the best fixed built-in on the test split "
              f"({max(builtins, key=builtins.get)}) {max(builtins.values()):.4f}; the built-in the validation data "
              f"chose by S ({val_builtin}) {builtins[val_builtin]:.4f}"]
    for ref_name, ref in (("best test built-in", max(builtins.values())), (f"validation's {val_builtin}", builtins[val_builtin])):
        gap = h - ref
        for e in real:
            if e["name"] in POLICIES or e["name"].startswith("old ") or e["name"] == choice["recommended"]:
                continue
            closed = (mean(e, "v_half") - ref) / gap if gap > 0 else float("nan")
            lines.append(f"  - gap to {ref_name}: {gap:.4f}; {e['name']}: closes {100 * closed:.0f}% of it")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
