"""An example exploration policy file: copy it, edit it, evaluate it.

    dream-gym eval --policy agents/example_policy.py ...          # runs isolated
    python -c "from dream_gym.policy_files import load_policy; p = load_policy('agents/example_policy.py')"

The convention (see ``dream_gym.policy_files``): a policy file defines ``make_policy()``, or a class
named ``Policy`` with ``reset(context)`` and ``act(view)``, or a top-level function
``act(view)``. The file is treated as untrusted code: it runs in a separate process with a
scrubbed environment, time and memory limits, and may not read files, spawn processes or use
the network. Keep it self-contained (standard library and installed packages only).

What a policy sees is the *prefix view* (``dream_gym.replay.view.PrefixView``): the revealed nodes
(score, parent, depth, branch, error, code, ...), the legal ``frontier``, ``root_slots`` (how
many new branches the next batch may open), W (``workers``), the budget preference ``beta`` and
the counts of rounds and attempts so far. It never sees unrecorded futures.

Known bias of the frontier: a leaf without recorded children is a node where the original run
stopped. A policy may learn that "leaves that look bad are where the run gave up", which would
not transfer online; this example does not rely on it.

The heuristic, in words: open a few branches first (more when ``beta``, the willingness to
spend budget, is high), then spend each round on the best-scoring open nodes, keep one slot for
a fresh branch when the best branch stalls, and stop after ``patience`` rounds without a new
best score.
"""

from __future__ import annotations

import random

ROOT = 0  # the root's id; selecting it opens a new branch


class Policy:
    """Best-first search with a stall-triggered new branch and a patience-based stop."""

    name = "example"

    def reset(self, context):
        """Called once per episode with the run context (W, beta, task info, seed)."""
        self.beta = context.beta
        self.rng = random.Random(context.seed)  # seeded: episodes are reproducible
        self.initial_branches = 1 + round(context.beta * (context.workers - 1))
        self.patience = 1 + round(4 * context.beta)
        self.best = None
        self.stale_rounds = 0

    def act(self, view):
        """Return the next batch: up to W legal ids (ROOT may repeat up to root_slots); [] stops."""
        best = view.best_score()
        if best is not None and (self.best is None or best > self.best):
            self.best, self.stale_rounds = best, 0
        elif view.rounds:
            self.stale_rounds += 1
        if self.stale_rounds >= self.patience:
            return []

        open_nodes = [view.nodes[i] for i in view.frontier if i != ROOT]
        scored = [n for n in open_nodes if n.score is not None]
        # Highest score first; ties broken by a seeded coin so the order is not arbitrary.
        scored.sort(key=lambda n: (n.score, self.rng.random()), reverse=True)

        batch = []
        want_branches = self.initial_branches - view.n_branches
        if self.stale_rounds > 0 or not scored:
            want_branches = max(want_branches, 1)  # stalled or nothing to extend: try a new idea
        batch += [ROOT] * max(0, min(want_branches, view.root_slots, view.workers))
        batch += [n.id for n in scored[: view.workers - len(batch)]]
        return batch
