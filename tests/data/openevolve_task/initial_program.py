"""A small OpenEvolve-style task written for dream_gym's tests: fit a curve with a few settings.

The evaluator (evaluator.py beside this file) calls run() and scores how close its points come to
a hidden curve on [0, 1], and how many distinct points it gives.
"""
# EVOLVE-BLOCK-START
SCALE = 1.0
OFFSET = 0.0
POWER = 2
STEPS = 5


def samples():
    """STEPS points of SCALE * x**POWER + OFFSET, evenly spaced on [0, 1)."""
    points = []
    for i in range(STEPS):
        x = i / STEPS
        points.append((x, SCALE * x**POWER + OFFSET))
    return points


# EVOLVE-BLOCK-END


def run():
    return samples()
