"""Probe: says when its episode read the clock first (at reset) and last (after a pause in its
first decision), in the error that ends the episode. No episode of a task may start after
another of its episodes ended."""

import time


class Policy:
    def reset(self, context):
        self.start = time.time()

    def act(self, view):
        time.sleep(1.5)
        raise RuntimeError(f"start={self.start!r} end={time.time()!r}")
