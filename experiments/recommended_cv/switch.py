"""``switch``: a policy that adapts to the run it is in (PROTOCOL.md §4).

It opens with a configuration c0 of the portfolio P and, at decision points after rounds
r in {1, 2, 4} of c0 (while c0 has not stopped), predicts for each configuration c of P and for
stopping the advantage A_c = V(switch to c now) - V(keep c0) from the prefix view: the 22 macro
features of :func:`dream_gym.rl.features.view_features` (rounds, attempts, the rate and recency of
new bests, failure rates, branches, open nodes, the depth of the best, W, beta, V's cost and bonus
so far), plus 100 beta1, 10 beta2 and r / 4. When the best predicted advantage exceeds delta it
switches for good (a fresh c acting on the current view, or stopping); otherwise it keeps c0 to
the next decision point. Predictions are linear (one ridge regression per c on standardised
features), so the fitted model is a small JSON document.

A fitted model is ``{"opening": c0, "points": [1, 2, 4], "delta": d, "configs": [...], "mean": [...],
"scale": [...], "weights": {c: [intercept, w_1, ...]}}``. Fold models are attributes of this
module: ``experiments.recommended_cv.switch:fold_<fold>`` for each ``out/rcv/switch/<fold>.json``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dream_gym.policy import Policy, RunContext
from dream_gym.replay.view import PrefixView
from dream_gym.rl.features import view_features
from experiments.recommended_cv.portfolio import STOP, configured

POINTS = (1, 2, 4)


def decision_features(view: PrefixView, point: int) -> np.ndarray:
    """What the switch reads at a decision point (float64)."""
    extra = np.array([100.0 * view.beta1, 10.0 * view.beta2, point / 4.0])
    return np.concatenate([view_features(view).astype(np.float64), extra])


class SwitchPolicy:
    """Open with c0, switch once when a configuration is predicted to do better (see the module).

    Args:
        model: a fitted model (a mapping or a JSON file), or None with ``opening`` and ``force``.
        opening: c0 when no model is given.
        force: ``{point: target}``: at that point switch to ``target`` (a configuration or "stop")
            whatever is predicted (the rollouts that train the model use it).
        record: a list that receives ``(point, features)`` at every decision point reached.
    """

    name = "switch"

    def __init__(self, model: Mapping[str, Any] | str | os.PathLike[str] | None = None, *,
                 opening: str | None = None, force: Mapping[int, str] | None = None,
                 record: list[tuple[int, np.ndarray]] | None = None):
        if model is not None and not isinstance(model, Mapping):
            model = json.loads(Path(model).read_text(encoding="utf-8"))
        self.model = model
        self.opening = str(model["opening"]) if model is not None else str(opening)
        self.points = tuple(model["points"]) if model is not None else POINTS
        self.force = dict(force or {})
        self.record = record
        if model is not None:
            self.configs = list(model["configs"])
            self.mean = np.asarray(model["mean"], dtype=np.float64)
            self.scale = np.asarray(model["scale"], dtype=np.float64)
            self.weights = np.asarray([model["weights"][c] for c in self.configs], dtype=np.float64)
            self.delta = float(model["delta"])
        self.context: RunContext | None = None
        self.current: Policy | None = None
        self.switched = False
        self.choice: str | None = None

    def reset(self, context: RunContext) -> None:
        self.context = context
        self.current = configured(self.opening)
        self.current.reset(context)
        self.switched = False
        self.choice = None

    def predict(self, features: np.ndarray) -> np.ndarray:
        """The predicted advantage of each of ``self.configs``."""
        x = (features - self.mean) / self.scale
        return self.weights[:, 0] + self.weights[:, 1:] @ x

    def decide(self, view: PrefixView, point: int) -> str | None:
        """The configuration (or "stop") to switch to at this point, or None to keep c0."""
        if point in self.force:
            return self.force[point]
        if self.model is None:
            return None
        advantage = self.predict(decision_features(view, point))
        best = int(np.argmax(advantage))
        return self.configs[best] if advantage[best] > self.delta else None

    def act(self, view: PrefixView) -> Any:
        assert self.current is not None and self.context is not None, "reset() first"
        if not self.switched and view.rounds in self.points:
            if self.record is not None:
                self.record.append((view.rounds, decision_features(view, view.rounds)))
            target = self.decide(view, view.rounds)
            if target is not None:
                self.switched, self.choice = True, target
                if target == STOP:
                    return []
                self.current = configured(target)
                self.current.reset(self.context)
        return self.current.act(view)


def _fold_class(path: Path) -> type:
    def __init__(self: SwitchPolicy) -> None:
        SwitchPolicy.__init__(self, path)

    return type(f"fold_{path.stem}", (SwitchPolicy,), {"__init__": __init__, "__doc__": f"switch fitted: {path}"})


def fold_spec(fold: str) -> str:
    return f"experiments.recommended_cv.switch:fold_{fold.replace('-', '_')}"


MODELS = Path(__file__).resolve().parents[2] / "out" / "rcv" / "switch"
if MODELS.is_dir():
    for _path in sorted(MODELS.glob("*.json")):
        globals()[f"fold_{_path.stem.replace('-', '_')}"] = _fold_class(_path)
