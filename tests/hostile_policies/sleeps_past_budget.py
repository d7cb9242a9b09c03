"""Hostile: each decision is short (0.4 s) but the episode goes on past its time budget.
Expect PolicyTimeout about the episode budget, not the decision timeout."""

import time


def act(view):
    time.sleep(0.4)
    return [view.frontier[0]]
