"""The built-in policy developer (no LLM): Optuna's TPE over the parametric policy family.

Each revision is a copy of :mod:`dream_gym.dream.family_policy` with a new ``PARAMS`` block,
written out as an ordinary policy file, so it is validated, evaluated, deployed and shared
exactly like a file an LLM wrote. The parameters of revision ``m`` are proposed by Optuna's
TPE sampler (ask-and-tell) from the replay scores of every family version it is shown:

* this phase's incumbent and earlier revisions (refused ones as failed trials), and the best
  versions of earlier phases (``Feedback.past``), whose scores the improvement step completed
  on this phase's history (:mod:`dream_gym.dream.carry`). Every score the study holds is thus
  an exact score on the same history: knowledge carried across phases without a stale score
  (a score on an older, smaller history is biased by the worlds it lacks, by a different
  amount for each version, so it is never told to the study);
* when an earlier phase's version scores higher on this history than the incumbent and every
  revision so far, it is proposed again first (``study.enqueue_trial``): the step reuses its
  completed scores, so that costs no evaluation, and the best parameters found in any phase
  are never lost because the history grew;
* the study is rebuilt from the feedback on every call (nothing lives only in memory, so a
  resumed run proposes exactly what an uninterrupted one would), its sampler seeded with
  ``(seed, phase, m)``: deterministic, and never the same random start twice;
* revision 1 of the first phase whose incumbent is not a family file is the family's default
  block (a sensible starting point).
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dream_gym.dream import family_policy
from dream_gym.dream.developer import EarlierRevision, Feedback, Revision
from dream_gym.infrastructure.extras import install_command

_BLOCK = re.compile(
    r"(# --- PARAMS \(the built-in developer rewrites the lines between these markers\) ---\n)"
    r"(.*?)(# --- end PARAMS ---\n)",
    re.DOTALL,
)

#: name -> (low, high); int bounds give an integer parameter. Thresholds at beta 0 / beta 1 come
#: in _lo / _hi pairs (see dream_gym.dream.family_policy).
SEARCH_SPACE: dict[str, tuple[float, float]] = {
    "branches_lo": (0.25, 3.0),
    "branches_hi": (0.25, 6.0),
    "patience_lo": (1, 10),
    "patience_hi": (1, 20),
    "rounds_lo": (1, 40),
    "rounds_hi": (1, 80),
    "width_lo": (0.25, 1.0),
    "width_hi": (0.25, 1.0),
    "stall_width": (0.25, 1.0),
    "explore_lo": (0.0, 1.0),
    "explore_hi": (0.0, 1.0),
    "recovery": (0, 1),
    "retries": (1, 4),  # >= 1: one repairable error never closes a branch
    "branch_patience": (1, 10),
    "min_gain": (0.0, 0.1),
    "trend_weight": (0.0, 1.0),
    "momentum": (0.0, 1.0),
}


def family_source() -> str:
    return Path(family_policy.__file__).read_text(encoding="utf-8")


def family_file(params: Mapping[str, Any], *, header: str = "") -> str:
    """The family policy file with ``params`` as its parameter block (keys in SEARCH_SPACE order)."""
    missing = set(SEARCH_SPACE) - set(params)
    if missing:
        raise ValueError(f"family parameters missing: {sorted(missing)}")
    params = _clip_to_space(params)
    lines = ["PARAMS = {\n"]
    for name in SEARCH_SPACE:
        value = params[name]
        value = int(value) if isinstance(SEARCH_SPACE[name][0], int) else float(value)
        lines.append(f"    {name!r}: {value!r},\n".replace("'", '"'))
    lines.append("}\n")
    source = family_source()
    if header:
        source = f"# {header}\n{source}"
    return _BLOCK.sub(lambda m: m.group(1) + "".join(lines) + m.group(3), source, count=1)


def read_params(code: str) -> dict[str, Any] | None:
    """The parameter block of a family file, or None when ``code`` is not one."""
    match = _BLOCK.search(code)
    if match is None:
        return None
    try:
        tree = ast.parse(match.group(2))
        params = ast.literal_eval(tree.body[0].value) if tree.body else None  # type: ignore[attr-defined]
    except (SyntaxError, ValueError, AttributeError):
        return None
    if not isinstance(params, dict) or set(params) != set(SEARCH_SPACE):
        return None
    return params


def require_optuna() -> None:
    """RuntimeError naming the extra when Optuna, which the built-in developer proposes with, is
    not installed (found without importing it)."""
    import importlib.util

    if importlib.util.find_spec("optuna") is None:
        raise RuntimeError(f"the built-in developer needs optuna, an optional dependency: {install_command('dream')}")


def _sampler_seed(seed: int, phase: int, m: int) -> int:
    digest = hashlib.sha256(f"{seed}:{phase}:{m}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _distributions() -> dict[str, Any]:
    from optuna.distributions import FloatDistribution, IntDistribution

    return {
        name: IntDistribution(int(lo), int(hi)) if isinstance(lo, int) else FloatDistribution(lo, hi)
        for name, (lo, hi) in SEARCH_SPACE.items()
    }


def _clip_to_space(params: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for name, (lo, hi) in SEARCH_SPACE.items():
        value = min(max(params[name], lo), hi)
        out[name] = int(round(value)) if isinstance(lo, int) else round(float(value), 6)
    return out


class BuiltinDeveloper:
    """Parametric policies proposed by Optuna (TPE, multivariate) from the scores so far.

    Args:
        seed: seeds the sampler (with the phase and revision number).
        startup_trials: random proposals before TPE models the scores (counted over the
            trials the study holds, the incumbent included).
    """

    name = "builtin"

    def __init__(self, seed: int = 0, startup_trials: int = 4):
        require_optuna()
        self.seed = int(seed)
        self.startup_trials = int(startup_trials)

    def _study(self, feedback: Feedback) -> tuple[Any, int]:
        """A study holding every family version of the feedback (scores on this history), and
        how many of them were carried from earlier phases."""
        import optuna
        from optuna.trial import TrialState, create_trial

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(
            seed=_sampler_seed(self.seed, feedback.phase, feedback.m), multivariate=True,
            n_startup_trials=self.startup_trials,
        )
        study = optuna.create_study(direction="maximize", sampler=sampler)
        distributions = _distributions()
        seen: set[tuple[tuple[str, Any], ...]] = set()
        carried = 0
        for earlier in (*feedback.past, feedback.incumbent, *feedback.earlier):
            params = _family_params(earlier)
            if params is None or tuple(sorted(params.items())) in seen:
                continue  # not a family file, or a parameter set the study already holds
            seen.add(tuple(sorted(params.items())))
            carried += earlier.phase is not None
            if earlier.score is None:
                trial = create_trial(params=params, distributions=distributions, state=TrialState.FAIL)
            else:
                trial = create_trial(params=params, distributions=distributions, value=float(earlier.score))
            study.add_trial(trial)
        return study, carried

    def propose(self, feedback: Feedback) -> Revision:
        study, carried = self._study(feedback)
        family_trials = len(study.trials)
        best_past = _best_past(feedback)
        if best_past is not None:
            study.enqueue_trial(_family_params(best_past))
            params = _clip_to_space(study.ask(_distributions()).params)
            how = (f"phase {best_past.phase} version {best_past.m} proposed again: it scores "
                   f"{best_past.score:.4f} on this history, above the incumbent and every revision so far")
        elif family_trials == 0:
            params = dict(family_policy.PARAMS)
            how = "the family's default parameters (no family revision evaluated yet)"
        else:
            params = _clip_to_space(study.ask(_distributions()).params)
            how = (f"TPE proposal from {family_trials} evaluated family version(s)"
                   f"{f', {carried} carried from earlier phases' if carried else ''}"
                   f"{' (random start)' if family_trials < self.startup_trials else ''}")
        header = f"dream_gym built-in developer: phase {feedback.phase}, revision {feedback.m}: {how}"
        return Revision(
            code=family_file(params, header=header), notes=how, params=params,
            cost={"calls": 0.0, "tokens_in": 0.0, "tokens_out": 0.0, "usd": 0.0, "seconds": 0.0},
        )


def _family_params(earlier: EarlierRevision) -> dict[str, Any] | None:
    params = earlier.params if earlier.params is not None else read_params(earlier.code)
    if params is None or set(params) != set(SEARCH_SPACE):
        return None
    return _clip_to_space(params)


def _best_past(feedback: Feedback) -> EarlierRevision | None:
    """The best carried family version when it beats the incumbent and every revision so far
    on this history (None otherwise, or when this phase already holds its parameters)."""
    from dream_gym.dream.versions import TIE_TOLERANCE

    candidates = [p for p in feedback.past if p.score is not None and _family_params(p) is not None]
    if not candidates:
        return None
    best = max(candidates, key=lambda p: (p.score, -p.phase if p.phase is not None else 0, -p.m))
    here = [e.score for e in (feedback.incumbent, *feedback.earlier) if e.score is not None]
    if here and best.score <= max(here) + TIE_TOLERANCE:  # type: ignore[operator]
        return None
    held = {tuple(sorted(p.items())) for p in map(_family_params, (feedback.incumbent, *feedback.earlier)) if p}
    return None if tuple(sorted(_family_params(best).items())) in held else best  # type: ignore[union-attr]


def build(spec: str, folder: Any = None, *, api_base: str | None = None, seed: int = 0,
          **options: Any) -> BuiltinDeveloper:
    """``--developer builtin`` (:data:`dream_gym.dream.developers.DEVELOPERS`): no run folder, no server."""
    return BuiltinDeveloper(seed=seed, **options)
