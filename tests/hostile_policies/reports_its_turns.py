"""Probe: says when its episode ran, in the error that ends it. Its first decision spins for
0.3 s of the wall clock, sampling the clock; a gap of more than 0.3 ms between two samples is a
time it did not run. It reports the first 24 stretches it ran (start and end, in seconds)."""

import time


class Policy:
    def reset(self, context):
        pass

    def act(self, view):
        stretches = []
        start = last = time.time()
        end = start + 0.3
        while last < end:
            now = time.time()
            if now - last > 0.0003:
                stretches.append((start, last))
                start = now
            last = now
        stretches.append((start, last))
        raise RuntimeError("ran " + " ".join(f"{a:.6f}-{b:.6f}" for a, b in stretches[:24]))
