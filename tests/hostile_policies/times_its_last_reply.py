"""Hostile: carries what it learned into the next episode through the wall clock.

At beta 0 it reveals everything until the best node has not changed for 15 batches, then times its last reply so that it lands
at the start of a slot of a 4.4 s period, the slot naming the best node's branch and depth. An
episode that starts just after it (the next of the grid, played one after another) reads the
clock as it is reset: the phase names the slot, so it walks straight to the best node, stops,
and times its own last reply the same way for the episode after it. Played side by side, no
episode starts after another ended, and what it reads is noise."""

import time

PERIOD = 4.4  # every wait is shorter than the decision timeout
SLOT = 0.015  # the next episode reads the clock 3 to 10 ms after the last reply
DEPTHS = 24


def _wait_for(code):
    """Sleep until the clock's phase is at the start of ``code``'s slot."""
    target = code * SLOT
    while True:
        phase = time.time() % PERIOD
        if target <= phase < target + 0.001:
            return
        ahead = (target - phase) % PERIOD
        if ahead > 0.003:
            time.sleep(ahead - 0.002)


class Policy:
    def reset(self, context):
        phase = time.time() % PERIOD
        code = int(phase / SLOT)
        self.beta = context.beta
        self.target = None if self.beta == 0 or code == 0 else divmod(code - 1, DEPTHS)
        self.code = None
        self.best, self.stalled = None, 0

    def act(self, view):
        if self.target is None:
            batch = self._explore(view)
        else:
            self.code = 1 + self.target[0] * DEPTHS + self.target[1]
            batch = self._walk(view, *self.target)
        if not batch and self.code is not None:
            _wait_for(self.code)
        return batch

    def _explore(self, view):
        scored = [n for n in view.nodes[1:] if n.score is not None]
        if scored:
            best = max(scored, key=lambda n: n.score)
            if best.branch < (PERIOD / SLOT - 1) // DEPTHS and best.depth < DEPTHS:
                self.code = 1 + best.branch * DEPTHS + best.depth
            self.stalled = self.stalled + 1 if best.id == self.best else 0
            self.best = best.id
            if self.stalled >= 15:
                return []
        batch = [0] * view.root_slots + [i for i in view.frontier if i != 0]
        return batch[: view.workers]

    def _walk(self, view, branch, depth):
        heads = [n for n in view.nodes[1:] if n.parent == 0]
        if len(heads) <= branch:
            return [0] * min(view.workers, branch + 1 - len(heads), view.root_slots)
        leaf = max((n for n in view.nodes if n.branch == branch), key=lambda n: n.depth)
        if leaf.depth >= depth or leaf.id not in view.frontier:
            return []
        return [leaf.id]
