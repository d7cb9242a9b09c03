"""A parametric exploration policy: one policy file whose behaviour is set by ``PARAMS``.

This file is both a module of dream_gym and an ordinary, self-contained policy file (it imports
nothing from dream_gym), so a copy with another ``PARAMS`` block runs isolated, is evaluated,
deployed online and shared exactly like a policy an LLM wrote. The dreaming loop's built-in
developer (``dream_gym.dream.builtin_developer``) searches over ``PARAMS`` with Optuna and writes
each revision as a copy of this file with a new block between the two marker lines.

Every threshold that depends on the budget preference beta is a pair ``<name>_lo`` (at beta 0)
and ``<name>_hi`` (at beta 1), read once per episode: ``value = lo + (hi - lo) * beta``.

* **stop**: after ``patience`` rounds without a new best score (a gain counts when it exceeds
  ``min_gain`` times the largest gain over the baseline seen so far), or after ``rounds``
  rounds;
* **width**: each round uses ``width`` x W slots while progress is steady and ``stall_width`` x W
  after a round without a new best (effort goes up on a plateau and down while it works);
* **branching**: open up to ``branches`` x W branches from the root; the first round opens as
  many as the width allows;
* **failure classes before closing**: a branch whose newest node failed ``hard`` is closed; one
  that failed repairably (syntax, shape, resource, naming) is retried while its run of failures
  is at most ``retries``; a branch is *poor* after ``branch_patience`` valid attempts without
  improving its own best while it trails the overall best;
* **portfolio**: each batch holds exploitation (the best open nodes; a node's rank mixes its own
  score with its branch's best by ``trend_weight``, so a branch is judged by its trajectory, not
  its latest score alone), exploration (``explore`` x slots: new branches while allowed, else
  the least-explored branches that are not poor) and at most ``recovery`` (0 or 1) retry of a
  repairable failure.
"""

from __future__ import annotations

ROOT = 0  # the root's id; selecting it opens a new branch

# --- PARAMS (the built-in developer rewrites the lines between these markers) ---
PARAMS = {
    "branches_lo": 0.75,
    "branches_hi": 2.0,
    "patience_lo": 1,
    "patience_hi": 4,
    "rounds_lo": 4,
    "rounds_hi": 16,
    "width_lo": 0.75,
    "width_hi": 1.0,
    "stall_width": 1.0,
    "explore_lo": 0.25,
    "explore_hi": 0.5,
    "recovery": 1,
    "retries": 1,
    "branch_patience": 3,
    "min_gain": 0.0,
    "trend_weight": 0.5,
}
# --- end PARAMS ---


def _lerp(low, high, beta):
    return low + (high - low) * beta


class _Branch:
    """What the view says about one branch (the subtree under one child of the root)."""

    def __init__(self, head):
        self.head = head
        self.tip = head  # the newest revealed node of the branch
        self.best = None  # best valid score
        self.valid = 0  # valid attempts
        self.since_best = 0  # valid attempts after the branch's own best
        self.open = []  # legal ids of the branch

    def add(self, node):
        if node.id > self.tip.id:
            self.tip = node
        if node.score is None:
            return
        self.valid += 1
        if self.best is None or node.score > self.best:
            self.best, self.since_best = node.score, 0
        else:
            self.since_best += 1


class Policy:
    """The parametric policy (see the module docstring for what each parameter does)."""

    name = "family"

    def __init__(self, params=None):
        self.params = dict(PARAMS if params is None else params)

    def reset(self, context):
        p, beta = self.params, context.beta
        workers = context.workers
        self.workers = workers
        self.max_branches = max(1, round(_lerp(p["branches_lo"], p["branches_hi"], beta) * workers))
        self.patience = max(1, round(_lerp(p["patience_lo"], p["patience_hi"], beta)))
        self.round_budget = max(1, round(_lerp(p["rounds_lo"], p["rounds_hi"], beta)))
        self.width = max(1, min(workers, round(_lerp(p["width_lo"], p["width_hi"], beta) * workers)))
        self.stall_width = max(1, min(workers, round(p["stall_width"] * workers)))
        self.explore = min(1.0, max(0.0, _lerp(p["explore_lo"], p["explore_hi"], beta)))
        self.recovery = 1 if p["recovery"] >= 0.5 else 0
        self.retries = int(p["retries"])
        self.branch_patience = max(1, int(p["branch_patience"]))
        self.min_gain = float(p["min_gain"])
        self.trend_weight = float(p["trend_weight"])
        self.best = None
        self.stale = 0

    # -- progress ---------------------------------------------------------------------------
    def _update_progress(self, view):
        best = view.best_score()
        if best is None:
            return
        scale = max(abs(best - view.baseline_score), 1e-12)
        if self.best is None or best - self.best > self.min_gain * scale:
            if self.best is None or best > self.best:
                self.best = best
            self.stale = 0
        elif view.rounds:
            self.stale += 1

    def _failure_run(self, view, node):
        count = 0
        while node.parent is not None and node.score is None:
            count += 1
            node = view.nodes[node.parent]
        return count

    def _branches(self, view):
        table = {}
        for node in view.nodes[1:]:
            if node.branch is None:
                continue
            if node.branch not in table:
                table[node.branch] = _Branch(node)
            table[node.branch].add(node)
        for node_id in view.frontier:
            node = view.nodes[node_id]
            if node_id != ROOT and node.branch in table:
                table[node.branch].open.append(node_id)
        return table

    # -- the decision -----------------------------------------------------------------------
    def act(self, view):
        self._update_progress(view)
        if view.rounds and (self.stale >= self.patience or view.rounds >= self.round_budget):
            return []
        slots = self.stall_width if self.stale else self.width
        slots = min(slots, view.workers)
        can_open = min(view.root_slots, max(0, self.max_branches - view.n_branches))
        if not view.rounds:  # nothing to continue yet: open branches
            return [ROOT] * min(max(1, min(slots, can_open)), view.root_slots)

        table = self._branches(view)
        overall = self.best
        scale = max(abs((overall if overall is not None else view.baseline_score) - view.baseline_score), 1e-12)
        exploit, recover, poor = [], [], set()
        for number, branch in table.items():
            tip = branch.tip
            if tip.score is None:
                if tip.fail_class == "hard" or self._failure_run(view, tip) > self.retries:
                    continue  # closed: hard failure, or repairs ran out
                if tip.id in branch.open:
                    recover.append(tip.id)
                    continue
            if (branch.valid >= self.branch_patience and branch.since_best >= self.branch_patience
                    and overall is not None and branch.best is not None and branch.best < overall):
                poor.add(number)
            for node_id in branch.open:
                node = view.nodes[node_id]
                if node.score is None:
                    continue
                own = (node.score - view.baseline_score) / scale
                trend = ((branch.best if branch.best is not None else node.score) - view.baseline_score) / scale
                rank = (1 - self.trend_weight) * own + self.trend_weight * trend
                exploit.append((rank - (1.0 if number in poor else 0.0), node_id, number))
        exploit.sort(reverse=True)

        n_explore = round(self.explore * slots)
        n_recover = min(self.recovery, len(recover), slots)
        batch = []
        for _, node_id, _ in exploit[: max(0, slots - n_explore - n_recover)]:
            batch.append(node_id)
        batch += recover[:n_recover]
        explore_left = slots - len(batch)
        opened = min(can_open, explore_left)
        batch += [ROOT] * opened
        explore_left -= opened
        if explore_left > 0:  # the least-explored branches that are not poor
            chosen = set(batch)
            fresh = sorted(
                (table[number].valid, node_id) for _, node_id, number in exploit
                if node_id not in chosen and number not in poor
            )
            for _, node_id in fresh[:explore_left]:
                batch.append(node_id)
        if len(batch) < slots:  # nothing else worth exploring: more of the best
            chosen = set(batch)
            for _, node_id, _ in exploit:
                if len(batch) >= slots:
                    break
                if node_id not in chosen:
                    batch.append(node_id)
                    chosen.add(node_id)
        if not batch and view.root_slots:
            batch = [ROOT]
        return batch[: view.workers]


def make_policy():
    """The policy this file defines (the policy-file convention)."""
    return Policy()
