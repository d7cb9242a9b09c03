"""The guard and the rule for ``recommended`` (PROTOCOL.md §5), computed from the CV table.

``cv_table.json`` holds, per candidate, per setting, per run, V½ and v2 (each run's figure from the
fold that held its family out). :func:`choose` applies the rule:

* b* = the built-in with the best CV mean (the runs' V½ averaged over the four settings);
* a learned candidate passes when (1) the 95 % paired bootstrap CI over runs of mean(L - b*)
  excludes zero (2.5th percentile > 0), (2) on every family its mean is at least b*'s - 0.05, and
  (3) at each setting its mean V½ is at least b*'s;
* ``recommended`` = the passing candidate with the best CV mean (within 0.002 of it, a policy before
  a model), else b*.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

import numpy as np

RESAMPLES = 10_000
FAMILY_MARGIN = 0.05
TIE = 0.002


def aggregate(entry: Mapping[str, Mapping[str, Mapping[str, float]]], settings: list[str]) -> dict[str, float]:
    """Per run: V½ averaged over the settings."""
    runs = list(entry[settings[0]])
    return {run: statistics.fmean(entry[s][run]["v_half"] for s in settings) for run in runs}


def paired_ci(differences: list[float], seed: int = 0) -> tuple[float, float]:
    data = np.asarray(differences, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(len(data), size=(RESAMPLES, len(data)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def choose(table: Mapping[str, Any]) -> dict[str, Any]:
    """The guard's verdict on every learned candidate and the name ``recommended`` takes."""
    settings = list(table["settings"])
    fams: dict[str, list[str]] = table["families"]
    cands = table["candidates"]
    agg = {name: aggregate(c["figures"], settings) for name, c in cands.items()}
    cv = {name: statistics.fmean(values.values()) for name, values in agg.items()}
    builtins = [n for n, c in cands.items() if c["kind"] == "builtin"]
    best = max(builtins, key=lambda n: cv[n])
    runs = list(agg[best])
    verdicts: dict[str, Any] = {}
    for name, c in cands.items():
        if not c["learned"]:
            continue
        diff = [agg[name][r] - agg[best][r] for r in runs]
        low, high = paired_ci(diff)
        family_gap = {f: statistics.fmean(agg[name][r] for r in rs) - statistics.fmean(agg[best][r] for r in rs)
                      for f, rs in fams.items()}
        setting_gap = {s: statistics.fmean(c["figures"][s][r]["v_half"] for r in runs)
                       - statistics.fmean(cands[best]["figures"][s][r]["v_half"] for r in runs) for s in settings}
        checks = {"ci_excludes_zero": low > 0, "no_family_below_margin": min(family_gap.values()) >= -FAMILY_MARGIN,
                  "every_setting_at_least": min(setting_gap.values()) >= 0}
        verdicts[name] = {"cv_mean": cv[name], "difference": statistics.fmean(diff), "ci": [low, high],
                          "family_gap": family_gap, "setting_gap": setting_gap, **checks,
                          "passes": all(checks.values())}
    passing = [n for n, v in verdicts.items() if v["passes"]]
    if passing:
        top = max(cv[n] for n in passing)
        near = [n for n in passing if cv[n] >= top - TIE]
        near.sort(key=lambda n: (cands[n]["kind"] == "model", -cv[n]))  # a policy before a model
        chosen = near[0]
    else:
        chosen = best
    return {"best_builtin": best, "cv_mean": cv, "verdicts": verdicts, "recommended": chosen,
            "recommended_spec": cands[chosen]["ships_as"]}
