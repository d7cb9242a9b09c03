"""The guard that decides ``recommended`` (experiments/recommended_cv/PROTOCOL.md), recomputed here
from the recorded CV table (experiments/recommended_cv/cv_table.json), independently of the
experiment's code, and checked against what dream_gym/policies/recommended.py names."""

from __future__ import annotations

import copy
import json
import statistics
from pathlib import Path

import numpy as np

from dream_gym.policies.recommended import RECOMMENDED, RECOMMENDED_FILE

REPO = Path(__file__).resolve().parents[1]
CV = REPO / "experiments" / "recommended_cv"
SETTINGS = ["W2", "W4", "W10", "W10i"]


def _table() -> dict:
    return json.loads((CV / "cv_table.json").read_text(encoding="utf-8"))


def _aggregate(candidate: dict) -> dict[str, float]:
    figures = candidate["figures"]
    return {run: sum(figures[s][run]["v_half"] for s in SETTINGS) / len(SETTINGS) for run in figures[SETTINGS[0]]}


def _rule(table: dict) -> str:
    """The protocol's rule, written again: the name recommended must take."""
    cands = table["candidates"]
    agg = {name: _aggregate(c) for name, c in cands.items()}
    cv = {name: statistics.fmean(a.values()) for name, a in agg.items()}
    best = max((n for n, c in cands.items() if c["kind"] == "builtin"), key=cv.__getitem__)
    runs = sorted(agg[best])
    passing = []
    for name, c in cands.items():
        if not c["learned"]:
            continue
        diff = np.array([agg[name][r] - agg[best][r] for r in runs])
        draws = np.random.default_rng(0).integers(len(runs), size=(10_000, len(runs)))
        low = np.percentile(diff[draws].mean(axis=1), 2.5)
        families_ok = all(statistics.fmean(agg[name][r] - agg[best][r] for r in rs) >= -0.05
                          for rs in table["families"].values())
        settings_ok = all(statistics.fmean(c["figures"][s][r]["v_half"] - cands[best]["figures"][s][r]["v_half"]
                                           for r in runs) >= 0 for s in SETTINGS)
        if low > 0 and families_ok and settings_ok:
            passing.append(name)
    if not passing:
        return best
    top = max(cv[n] for n in passing)
    near = sorted((n for n in passing if cv[n] >= top - 0.002), key=lambda n: (cands[n]["kind"] == "model", -cv[n]))
    return near[0]


def test_the_table_holds_every_run_of_every_family_for_every_candidate() -> None:
    table = _table()
    families = json.loads((CV / "families.json").read_text(encoding="utf-8"))["families"]
    assert table["families"] == {f: e["runs"] for f, e in families.items()}
    runs = {r for rs in table["families"].values() for r in rs}
    assert len(runs) == 43 and table["settings"] == SETTINGS
    builtins = {n for n, c in table["candidates"].items() if c["kind"] == "builtin"}
    assert builtins == {"random", "greedy", "fixed", "ucb", "puct", "hyperband", "openevolve", "shinka", "stagnation"}
    for name, c in table["candidates"].items():
        assert c["learned"] == (name not in builtins)
        for s in SETTINGS:
            assert set(c["figures"][s]) == runs, (name, s)
            assert all(np.isfinite([v["v_half"], v["v2"]]).all() for v in c["figures"][s].values())


def test_recommended_names_what_the_guard_chooses_from_the_recorded_table() -> None:
    table = _table()
    chosen = _rule(table)
    assert table["choice"]["recommended"] == chosen  # the experiment recorded the same choice
    assert RECOMMENDED == table["candidates"][chosen]["ships_as"]


def test_the_incumbent_of_dream_is_recommended_when_it_can_be_one() -> None:
    table = _table()
    chosen = table["choice"]["recommended"]
    if table["candidates"][chosen]["kind"] in ("builtin", "policy"):
        assert RECOMMENDED_FILE == RECOMMENDED
    else:  # a model cannot be rewritten as a policy file: the best built-in stands in
        assert RECOMMENDED_FILE == table["choice"]["best_builtin"]


def _as_builtin_plus(table: dict, name: str, shift: dict[str, float]) -> dict:
    """A copy of the table where candidate ``name`` scores the best built-in's figures plus
    ``shift[run]`` on every run and setting."""
    best = table["choice"]["best_builtin"]
    changed = copy.deepcopy(table)
    for s in SETTINGS:
        for run, value in changed["candidates"][name]["figures"][s].items():
            value["v_half"] = table["candidates"][best]["figures"][s][run]["v_half"] + shift[run]
    return changed


def test_the_rule_follows_the_table_so_a_wrong_name_would_be_seen() -> None:
    """Controls: a learned candidate made 0.3 better than the best built-in everywhere wins; the same
    candidate 0.06 below it on one family, or only equal to it (a CI that does not exclude zero),
    does not."""
    table = _table()
    runs = [r for rs in table["families"].values() for r in rs]
    learned = next(n for n, c in table["candidates"].items() if c["learned"])
    assert _rule(_as_builtin_plus(table, learned, dict.fromkeys(runs, 0.3))) == learned
    first_family = set(next(iter(table["families"].values())))
    one_family_worse = {r: -0.06 if r in first_family else 0.3 for r in runs}
    assert _rule(_as_builtin_plus(table, learned, one_family_worse)) != learned
    assert _rule(_as_builtin_plus(table, learned, dict.fromkeys(runs, 0.0))) != learned
