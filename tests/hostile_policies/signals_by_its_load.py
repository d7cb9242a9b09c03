"""Hostile: carries what it learned to the episodes played beside it by the CPU time it takes.

The episodes of a task are played side by side and share the machine's CPUs. At beta 0 it
reveals everything until the best node has not changed for 8 batches, then, 6 s after the
episodes started, spells the best node's branch and depth in 9 bits,
each bit a pair of 0.2 s windows on a grid of the wall clock that every episode reads alike: it
keeps a CPU busy in the first window and idle in the second for a 1, the other way round for a 0.
The episodes at every other beta spend that time counting how far a loop of their own gets in
each window, read each bit off which window of its pair went slower, and walk straight to the
node they decoded."""

import time

HALF = 0.2
BITS = 9
DEPTHS = 24


def _start_of_signal(now):
    return (int(now * 2) + 12) / 2  # 5.5 to 6 s ahead, on a half-second grid every episode shares


def _spin_until(end):
    while time.time() < end:
        pass


def _count_until(end):
    count = 0
    while time.time() < end:
        count += 1
    return count


class Policy:
    def reset(self, context):
        self.signal_at = _start_of_signal(time.time())
        self.writer = context.beta == 0
        self.target = None if self.writer else self._listen()
        self.best, self.stalled = None, 0

    def _listen(self):
        counts = []
        for window in range(2 * BITS):
            start = self.signal_at + window * HALF
            _spin_until(start)
            counts.append(_count_until(start + HALF))
        code = sum((counts[2 * i] < counts[2 * i + 1]) << i for i in range(BITS))
        return divmod(code, DEPTHS)

    def act(self, view):
        if not self.writer:
            return self._walk(view, *self.target)
        scored = [n for n in view.nodes[1:] if n.score is not None]
        if scored:
            best = max(scored, key=lambda n: n.score)
            self.stalled = self.stalled + 1 if best is not None and self.best is not None and best.id == self.best.id else 0
            self.best = best
        batch = ([0] * view.root_slots + [i for i in view.frontier if i != 0])[: view.workers]
        if self.stalled < 8 and batch:
            return batch
        self._signal()
        return []

    def _signal(self):
        code = 0 if self.best is None else min(self.best.branch, 20) * DEPTHS + min(self.best.depth, DEPTHS - 1)
        for i in range(BITS):
            bit = (code >> i) & 1
            for half in (0, 1):
                start = self.signal_at + (2 * i + half) * HALF
                time.sleep(max(0.0, start - time.time()))
                if (half == 0) == bool(bit):
                    _spin_until(start + HALF)
                else:
                    time.sleep(max(0.0, start + HALF - time.time()))

    def _walk(self, view, branch, depth):
        heads = [n for n in view.nodes[1:] if n.parent == 0]
        if len(heads) <= branch:
            return [0] * min(view.workers, branch + 1 - len(heads), view.root_slots)
        leaf = max((n for n in view.nodes if n.branch == branch), key=lambda n: n.depth)
        if leaf.depth >= depth or leaf.id not in view.frontier:
            return []
        return [leaf.id]
