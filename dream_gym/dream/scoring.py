"""A version's score on the history, and the determinism gate.

:func:`score_policy` runs a policy (a file runs isolated) on every world of the history at
every beta of the grid (``dream_gym.evaluation.evaluate``) and reduces the episodes to one number: the
mean over worlds of the per-world mean V over the betas (``select="V"``, the paper's V^m), or of
the per-world Pareto objective v2 (``select="v2"``).

:func:`first_difference` compares two evaluations of the same version made in separate
processes (the determinism gate): any episode whose batches or V differ makes the version
nondeterministic, and the message names the first such episode.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dream_gym.evaluation.evaluate import evaluate, leaderboard
from dream_gym.policy import EpisodeResult
from dream_gym.policy_files.isolated import DEFAULT_MEMORY_MB
from dream_gym.replay.score import DEFAULT_BETA_GRID, DEFAULT_LAMBDA, check_lambda
from dream_gym.replay.settings import ReplaySettings
from dream_gym.world.tree import World

SELECT_MODES = ("V", "v2")


@dataclass(frozen=True)
class ScoringSettings:
    """How versions are scored on replay (the same for every version of a run)."""

    betas: tuple[float, ...] = DEFAULT_BETA_GRID
    select: str = "V"  # "V" (mean replay score) or "v2" (Pareto objective)
    lam: float = DEFAULT_LAMBDA
    replay: ReplaySettings = ReplaySettings()  # W (None: each world's recorded W), beta1, beta2, K2, ...
    seed: int = 0  # the seed each policy gets in its RunContext
    jobs: int | None = None  # processes for the evaluation
    decision_timeout_s: float = 5.0
    episode_timeout_s: float = 120.0
    memory_mb: int = DEFAULT_MEMORY_MB

    def __post_init__(self) -> None:
        check_lambda(self.lam)
        if self.select not in SELECT_MODES:
            raise ValueError(f"select must be one of {', '.join(SELECT_MODES)}, got {self.select!r}")
        if self.jobs is not None and self.jobs < 1:
            raise ValueError(f"jobs must be >= 1 (or None: the CPU count), got {self.jobs}")
        if not (self.decision_timeout_s > 0 and self.episode_timeout_s > 0 and self.memory_mb > 0):
            raise ValueError("the decision timeout, the episode timeout and the memory of policy files must be > 0, "
                             f"got {self.decision_timeout_s} s, {self.episode_timeout_s} s and {self.memory_mb} MB")

    def file_options(self) -> dict[str, Any]:
        return {"decision_timeout_s": self.decision_timeout_s, "episode_timeout_s": self.episode_timeout_s,
                "memory_mb": self.memory_mb, "startup_timeout_s": max(15.0, 2 * self.decision_timeout_s)}


@dataclass
class Scored:
    """One evaluation of one version on a set of worlds."""

    score: float
    per_world: dict[str, float]
    results: list[EpisodeResult] = field(repr=False)
    errors: list[str] = field(default_factory=list)  # "world (beta b): message", one per failed episode


def score_policy(spec: str | os.PathLike[str], worlds: Sequence[World], settings: ScoringSettings, *,
                 out: str | os.PathLike[str] | None = None,
                 extra_file_options: Mapping[str, Any] | None = None) -> Scored:
    """Evaluate ``spec`` on every world at every beta and reduce to the selection score."""
    options = {**settings.file_options(), **(extra_file_options or {})}
    results = evaluate(
        [os.fspath(spec)], list(worlds), settings.betas, settings=settings.replay, jobs=settings.jobs,
        progress=False, out=out, lam=settings.lam, seed=settings.seed, file_options=options,
    )
    board = leaderboard(results, lam=settings.lam, rank_by=settings.select)
    per_world = {
        name: (rows[0].mean_v if settings.select == "V" else rows[0].v2) for name, rows in board.per_world.items()
    }
    score = sum(per_world.values()) / len(per_world)
    errors = [f"{r.world} (beta {r.beta:g}): {r.error}" for r in results if r.error]
    return Scored(score, per_world, results, errors)


def first_difference(a: Scored, b: Scored) -> str | None:
    """None when two evaluations agree episode by episode; else the first episode that differs."""
    if len(a.results) != len(b.results):
        return f"the two evaluations ran {len(a.results)} and {len(b.results)} episodes"
    for x, y in zip(a.results, b.results, strict=True):
        if (x.world, x.beta) != (y.world, y.beta):
            return f"episode order differs: {x.world} beta {x.beta:g} vs {y.world} beta {y.beta:g}"
        if x.batches != y.batches or x.replay_score != y.replay_score or x.error != y.error:
            rounds = next((i + 1 for i, (p, q) in enumerate(zip(x.batches, y.batches, strict=False)) if p != q),
                          min(len(x.batches), len(y.batches)) + 1)
            return (f"on world {x.world} at beta {x.beta:g} the two runs differ from round {rounds} "
                    f"(V {x.replay_score:.6f} vs {y.replay_score:.6f}; batches "
                    f"{x.batches[rounds - 1] if rounds <= len(x.batches) else 'none'} vs "
                    f"{y.batches[rounds - 1] if rounds <= len(y.batches) else 'none'})")
    return None
