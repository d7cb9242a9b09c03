"""Hostile: carries what it learned into the next episode's turn by a system call that outlasts
its own turn.

The episodes of a task take turns, and a turn begins once the group before it has stopped; a
process stops only when it leaves the kernel. At beta 0 it reveals everything until the best
node has not changed for 8 batches, then spells the best node's branch and depth in 9 bits, one
every 1.5 s: for a 1 it frees 120 MB it filled just before one of its turns ends, so the freeing
runs into the next turn. The episode at beta 0.1, whose turn comes next, watches when each of its
turns begins, reads a late one as a 1, and walks straight to the node it decoded."""

import time

BITS = 9
DEPTHS = 24
SPACING = 1.5  # seconds between two bits
GAP = 0.0005  # a pause longer than this is a time the process did not run
MEGABYTES = 120


def _turn_start(after):
    """Spin until a turn begins after ``after``: the time the process ran again."""
    last = time.time()
    while True:
        now = time.time()
        if now - last > GAP and now > after:
            return now
        last = now


class Policy:
    def reset(self, context):
        self.beta = context.beta
        self.best, self.stalled = None, 0
        self.target = self._listen() if self.beta == 0.1 else None

    def _listen(self):
        """The starts of its turns for (BITS + 4) bit spacings; a start later than the usual
        round after the one before is a 1."""
        starts, end = [], time.time() + (BITS + 4) * SPACING
        while time.time() < end:
            starts.append(_turn_start(starts[-1] if starts else 0.0))
        rounds = sorted(b - a for a, b in zip(starts, starts[1:], strict=False))
        usual = rounds[len(rounds) // 2]
        late = [b for a, b in zip(starts, starts[1:], strict=False) if b - a > usual + 0.004]
        if not late:
            return None
        first = late[0]
        code = 0
        for bit in range(BITS):
            at = first + bit * SPACING
            code |= int(any(abs(t - at) < 0.3 for t in late)) << bit
        return divmod(code >> 1, DEPTHS)

    def act(self, view):
        if self.beta == 0:
            return self._write(view)
        if self.target is None:
            return []
        return self._walk(view, *self.target)

    def _write(self, view):
        scored = [n for n in view.nodes[1:] if n.score is not None]
        if scored:
            best = max(scored, key=lambda n: n.score)
            self.stalled = self.stalled + 1 if self.best is not None and best.id == self.best.id else 0
            self.best = best
        batch = ([0] * view.root_slots + [i for i in view.frontier if i != 0])[: view.workers]
        if self.stalled < 8 and batch:
            return batch
        code = (min(self.best.branch, 9) * DEPTHS + min(self.best.depth, DEPTHS - 1)) << 1 | 1 if self.best else 1
        begin = time.time()
        buffers = [b"\1" * (MEGABYTES << 20)]
        for bit in range(BITS):
            if not (code >> bit) & 1:
                continue
            start = _turn_start(begin + bit * SPACING)
            while time.time() < start + 0.0015:  # a turn is 2 ms: free just before it ends
                pass
            buffers.pop()
            buffers.append(b"\1" * (MEGABYTES << 20))
        return []

    def _walk(self, view, branch, depth):
        heads = [n for n in view.nodes[1:] if n.parent == 0]
        if len(heads) <= branch:
            return [0] * min(view.workers, branch + 1 - len(heads), view.root_slots)
        leaf = max((n for n in view.nodes if n.branch == branch), key=lambda n: n.depth)
        if leaf.depth >= depth or leaf.id not in view.frontier:
            return []
        return [leaf.id]
