"""Recorded experiments of dream_gym: each sub-package is run once, with its exact commands and
outputs committed beside it (``experiments/recommended``: the ``--policy recommended`` choice)."""
