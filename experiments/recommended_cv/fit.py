"""What ``tuned`` and ``switch`` learn inside a fold (PROTOCOL.md §4), from the tables of tables.py.

* :func:`tuned_choice`: the configuration of P with the best selection score on the fold's
  training families (family-balanced mean of the runs' V½ averaged over the four settings).
* :func:`fit_switch`: the switch of a fold: (lambda, delta) by an inner leave-one-family-out over the
  fold's training families (scored from the rollout table at beta 0.5, family-balanced), then the
  ridge models refitted on every training family and the synthetic worlds.

    nice -n 15 .venv/bin/python -m experiments.recommended_cv.fit tuned
    nice -n 15 .venv/bin/python -m experiments.recommended_cv.fit switch --fold prompt-opt
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from experiments.recommended_cv.common import ALL_FAMILIES, OUT, SETTINGS, families
from experiments.recommended_cv.portfolio import CONFIGS, STOP
from experiments.recommended_cv.switch import POINTS
from experiments.recommended_cv.tables import load, portfolio_path, rollout_path

LAMBDAS = (0.1, 1.0, 10.0, 100.0)
DELTAS = (0.0, 0.01, 0.02, 0.05)
TARGETS = (*CONFIGS, STOP)
SWITCH_MODELS = OUT / "switch"


def training_families(fold: str) -> list[str]:
    return [f for f in families() if f != fold]


def balanced(score_of_run: Mapping[str, float], fams: Iterable[str]) -> float:
    """Family-balanced mean: each family's mean over its runs, averaged over the families."""
    groups = families()
    return statistics.fmean(statistics.fmean(score_of_run[r] for r in groups[f]) for f in fams)


# --------------------------------------------------------------------------- tuned


def aggregate(per_setting: Mapping[str, Mapping[str, float]], run: str) -> float:
    """A run's V½ averaged over the four settings."""
    return statistics.fmean(per_setting[s.name][run] for s in SETTINGS)


def tuned_choice(fold: str, table: Mapping[str, Any] | None = None) -> str:
    """The configuration ``tuned`` picks in ``fold`` (ties within 0.001: the earlier in P)."""
    table = table or load(portfolio_path())
    fams = training_families(fold)
    runs = [r for f in fams for r in families()[f]]
    scores = {c: balanced({r: aggregate(table[c], r) for r in runs}, fams) for c in CONFIGS}
    best = max(scores.values())
    return next(c for c in CONFIGS if scores[c] >= best - 0.001)


# --------------------------------------------------------------------------- switch


class Examples:
    """Decision-point examples of a rollout table: features, advantages of every target, weights."""

    def __init__(self, table: Mapping[str, Any], real_runs: Sequence[str], synthetic: bool,
                 betas: Sequence[str] = ("0.2", "0.5", "0.8")):
        rows, targets, worlds = [], [], []
        groups = [("real", real_runs)] + ([("synthetic", list(table["synthetic"]))] if synthetic else [])
        for group, names in groups:
            for name in names:
                for s in SETTINGS:
                    for beta in betas:
                        entry = table[group][name][s.name][beta]
                        for point in entry["points"]:
                            rows.append(point["features"])
                            targets.append([point["values"][t] - entry["keep"] for t in TARGETS])
                            worlds.append((group, name))
        self.x = np.asarray(rows, dtype=np.float64)
        self.y = np.asarray(targets, dtype=np.float64)
        count: dict[tuple[str, str], int] = {}
        for w in worlds:
            count[w] = count.get(w, 0) + 1
        real = {w for w in worlds if w[0] == "real"}
        synth = {w for w in worlds if w[0] == "synthetic"}
        real_scale = len(synth) / len(real) if real and synth else 1.0
        self.weights = np.asarray([(real_scale if w[0] == "real" else 1.0) / count[w] for w in worlds])


def ridge(examples: Examples, lam: float) -> dict[str, Any]:
    """One weighted ridge regression per target on standardised features (intercept free)."""
    x, w = examples.x, examples.weights
    mean = np.average(x, axis=0, weights=w)
    scale = np.sqrt(np.average((x - mean) ** 2, axis=0, weights=w))
    scale[scale < 1e-9] = 1.0  # a constant feature: left as is
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    penalty = lam * np.eye(z.shape[1])
    penalty[0, 0] = 0.0
    gram = z.T @ (z * w[:, None]) + penalty
    coef = np.linalg.solve(gram, z.T @ (examples.y * w[:, None]))  # (features + 1, targets)
    return {"mean": mean.tolist(), "scale": scale.tolist(), "configs": list(TARGETS),
            "weights": {t: coef[:, k].tolist() for k, t in enumerate(TARGETS)}}


def switched_value(model: Mapping[str, Any], delta: float, entry: Mapping[str, Any]) -> float:
    """V of the switch on one (world, setting, beta) from its rollouts: its first confident
    switch, or keeping c0."""
    mean, scale = np.asarray(model["mean"]), np.asarray(model["scale"])
    weights = np.asarray([model["weights"][t] for t in model["configs"]])
    for point in entry["points"]:
        advantage = weights[:, 0] + weights[:, 1:] @ ((np.asarray(point["features"]) - mean) / scale)
        best = int(np.argmax(advantage))
        if advantage[best] > delta:
            return float(point["values"][model["configs"][best]])
    return float(entry["keep"])


def inner_score(table: Mapping[str, Any], fams: Sequence[str], lam: float, delta: float,
                models: dict[tuple[str, float], dict[str, Any]]) -> float:
    """Inner leave-one-family-out over ``fams``: the family-balanced V½ (setting average, beta 0.5)
    of the switch fitted without each family, on that family."""
    groups = families()
    per_run: dict[str, float] = {}
    for held in fams:
        key = (held, lam)
        if key not in models:
            runs = [r for f in fams if f != held for r in groups[f]]
            models[key] = ridge(Examples(table, runs, synthetic=True), lam)
        for run in groups[held]:
            per_run[run] = statistics.fmean(switched_value(models[key], delta, table["real"][run][s.name]["0.5"])
                                            for s in SETTINGS)
    return balanced(per_run, fams)


def fit_switch(fold: str, log: Any = print) -> dict[str, Any]:
    """The fold's switch (``fold`` = the held-out family, or "all"), written to out/rcv/switch/."""
    opening = tuned_choice(fold)
    table = load(rollout_path(opening))
    fams = training_families(fold)
    models: dict[tuple[str, float], dict[str, Any]] = {}
    scores = {(lam, delta): inner_score(table, fams, lam, delta, models)
              for lam, delta in itertools.product(LAMBDAS, DELTAS)}
    best = max(scores.values())
    # ties (within 1e-9): the more conservative pair, larger lambda then larger delta
    lam, delta = max((pair for pair, score in scores.items() if score >= best - 1e-9), key=lambda p: (p[0], p[1]))
    runs = [r for f in fams for r in families()[f]]
    model = {"opening": opening, "points": list(POINTS), "delta": delta, "lambda": lam, "fold": fold,
             "inner_scores": {f"{k[0]:g},{k[1]:g}": v for k, v in scores.items()},
             **ridge(Examples(table, runs, synthetic=True), lam)}
    SWITCH_MODELS.mkdir(parents=True, exist_ok=True)
    (SWITCH_MODELS / f"{fold}.json").write_text(json.dumps(model, indent=1), encoding="utf-8")
    log(f"switch {fold}: opening {opening}, lambda {lam:g}, delta {delta:g}, inner score {best:.4f}")
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("tuned", "switch"))
    parser.add_argument("--fold", action="append", help="held-out family or 'all' (default: every fold and all)")
    args = parser.parse_args(argv)
    folds = args.fold or [*families(), ALL_FAMILIES]
    if args.what == "tuned":
        table = load(portfolio_path())
        for fold in folds:
            print(f"tuned {fold}: {tuned_choice(fold, table)}")
    else:
        for fold in folds:
            fit_switch(fold)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
