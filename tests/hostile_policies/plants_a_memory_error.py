"""Hostile: makes a later episode's crash read as another failure, in another episode's words.

At seed 0 the episode prints ``planted by an earlier episode: MemoryError`` on stderr and ends
its episode normally; at any other seed it exits at once with status 3. The evaluating process
named a death by the stderr tail of the policy (not of the episode), so the second episode's exit
was recorded as ``PolicyMemoryError`` quoting the first episode's line."""

import os
import sys


class Policy:
    def reset(self, context):
        self.seed = context.seed

    def act(self, view):
        if self.seed == 0:
            print("planted by an earlier episode: MemoryError", file=sys.stderr, flush=True)
            return []
        os._exit(3)
