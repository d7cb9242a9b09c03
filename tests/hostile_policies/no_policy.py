"""Defines no policy: loading must fail with a clear PolicyLoadError."""

from dream_gym.policies import make_policy  # noqa: F401  (imported, not defined here: ignored)

WEIGHTS = [0.1, 0.2]


def helper(view):
    return []
