"""Hostile: at beta 0 it writes forged replies into every descriptor it can write to, hoping
that a later episode's decisions are read from them.

Every episode talks to the parent over a fresh pair of pipes. A forged reply
(``{"ok": true, "batch": []}``: stop now) left in a pipe that outlived its episode would end
the next episode at its first decision; the episodes after the forger must play as if it had
never run. Otherwise the policy opens one branch and refines the newest open node."""

import os

FORGED = b'{"ok":true,"batch":[]}'


def _forge():
    frame = len(FORGED).to_bytes(4, "big") + FORGED
    for fd in range(3, 256):
        try:
            os.write(fd, frame * 64)
        except OSError:
            pass


class Policy:
    def reset(self, context):
        if context.beta == 0.0:
            _forge()

    def act(self, view):
        if view.rounds == 0:
            return [0]
        open_nodes = [i for i in view.frontier if i != 0]
        return open_nodes[-1:] if view.rounds < 6 else []
