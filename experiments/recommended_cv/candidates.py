"""The candidates of PROTOCOL.md §3 and, per candidate, which spec scores which runs.

A candidate that learns nothing from the real runs (a built-in, ``AdaptiveSpend``, a model trained
before this experiment) is one spec scored on all 43 runs. A candidate learned inside the folds is
one spec per fold, scored on that fold's held-out family.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from experiments.recommended_cv.common import (
    ADAPTIVE,
    BUILTINS,
    KINDS,
    OUT,
    REPO,
    families,
    model_zip,
)

OLD = OUT / "old"
OLD_MODELS = {  # §3 item 1: the earlier models, as files (two retrained from their recorded commands)
    "ppo-options": "ppo-options",
    "ppo-options-v": "ppo-options-v",
    "ppo-macro": str(REPO / "tests/data/models/ppo-macro.zip"),
    "ppo-macro-v": str(REPO / "tests/data/models/ppo-macro-v.zip"),
    "ppo-node-v": str(REPO / "tests/data/models/ppo-node-v.zip"),
    "ppo-node": "+".join(str(OLD / f"node-s{s}" / "model.zip") for s in range(5)),
    "ppo-options-long": str(OLD / "options-long-s13" / "model.zip"),
}


@dataclass(frozen=True)
class Candidate:
    """A candidate: its name, whether the guard applies (learned), and its spec per fold (None:
    one spec for every run)."""

    name: str
    learned: bool
    spec: Callable[[str | None], str]  # fold (held-out family) or None -> spec
    per_fold: bool
    kind: str  # builtin, file-policy, model, selected

    def assignments(self) -> list[tuple[str, list[str]]]:
        """(spec, runs) pairs that together score every run once."""
        groups = families()
        if not self.per_fold:
            return [(self.spec(None), [r for runs in groups.values() for r in runs])]
        return [(self.spec(fold), runs) for fold, runs in groups.items()]


def _fixed(spec: str) -> Callable[[str | None], str]:
    return lambda fold: spec


def _tuned(fold: str | None) -> str:
    from experiments.recommended_cv.fit import tuned_choice
    from experiments.recommended_cv.portfolio import spec

    assert fold is not None
    return spec(tuned_choice(fold))


def _switch(fold: str | None) -> str:
    from experiments.recommended_cv.switch import fold_spec

    assert fold is not None
    return fold_spec(fold)


def _kind(kind: str) -> Callable[[str | None], str]:
    def spec(fold: str | None) -> str:
        assert fold is not None
        return str(model_zip(kind, fold))
    return spec


def dream_dir(fold: str) -> Path:
    return OUT / "dream" / fold


def _dreamed(fold: str | None) -> str:
    assert fold is not None
    return str(dream_dir(fold) / "chosen.py")


def candidates() -> list[Candidate]:
    out = [Candidate(b, False, _fixed(b), False, "builtin") for b in BUILTINS]
    out += [Candidate(name, True, _fixed(spec), False, "model") for name, spec in OLD_MODELS.items()]
    out.append(Candidate("AdaptiveSpend", True, _fixed(ADAPTIVE), False, "policy"))
    out.append(Candidate("tuned", True, _tuned, True, "policy"))
    out.append(Candidate("switch", True, _switch, True, "policy"))
    out += [Candidate(kind, True, _kind(kind), True, "model") for kind in KINDS]
    out.append(Candidate("dreamed", True, _dreamed, True, "policy"))
    return out


def by_name() -> dict[str, Candidate]:
    return {c.name: c for c in candidates()}
