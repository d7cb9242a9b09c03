"""A seed: a whole number every generator a run seeds accepts.

numpy's legacy ``np.random.seed`` (which ShinkaEvolve and OpenEvolve's workers are seeded with) and
``RandomState`` take 0 to 2**32 - 1 only, so a negative or larger seed used to fail in the middle of
a run, its folder already made; each command and each run's config refuses it first.
"""

from __future__ import annotations

from typing import Any

MAX_SEED = 2**32 - 1


def check_seed(seed: Any, name: str = "seed") -> int:
    """``seed`` if it is an int from 0 to :data:`MAX_SEED`; ValueError naming ``name`` if not."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"{name} must be a whole number from 0 to {MAX_SEED}, got {seed!r}")
    return seed


__all__ = ["MAX_SEED", "check_seed"]
