"""Probe: does a reply that is slow to parse lengthen the turns the other episodes see?

The evaluating process parses every reply while it holds the interpreter's lock. The episode at
beta 0 replaces its template's reply writer and, in the even 0.5 s windows of the wall clock,
pads each reply with a string of ``{`` as long as a reply may be (which sends the reply's shape
check down its slow path), revealing one node a decision; in the odd windows it waits. The
episode at beta 0.1 (whose turn comes next) times the start of each of its turns for 14 s and
reports, in the error that ends it, the usual round (ms) and, for the rounds in even and in odd
windows, how many, their mean (ms) and the share more than 10 ms longer than the usual round.
(With replies of 1 MB and the schedule kept in the evaluating process, the share was 58 %
against 4 %.)"""

import sys
import time

GAP = 0.0005  # a pause longer than this is a time the process did not run
SPACING = 0.5
PAD = "{" * ((16 << 10) - 200)  # the largest reply the evaluating process reads, less its fields


def _pad_replies():
    """Replace the template's reply writer: while ``state["pad"]``, replies carry the padding."""
    child = sys.modules["dream_gym.policy_files.child"]
    send, state = child._send, {"pad": False}

    def padded(fd, message):
        if state["pad"] and message.get("ok") and "batch" in message:
            message = dict(message, p=PAD)
        send(fd, message)

    child._send = padded
    return state


def _turn_start(after):
    """Spin until a turn begins after ``after``: the time the process ran again."""
    last = time.time()
    while True:
        now = time.time()
        if now - last > GAP and now > after:
            return now
        last = now


def _summary(rounds, usual):
    if not rounds:
        return (0, 0.0, 0.0)
    return (len(rounds), round(1e3 * sum(rounds) / len(rounds), 1),
            round(sum(length > usual + 0.01 for length in rounds) / len(rounds), 3))


class Policy:
    def reset(self, context):
        self.beta = context.beta
        if self.beta == 0:
            self.state = _pad_replies()
            self.end = time.time() + 12
        if self.beta == 0.1:
            self.report = self._watch()

    def _watch(self):
        starts, end = [], time.time() + 14
        while time.time() < end:
            starts.append(_turn_start(starts[-1] if starts else 0.0))
        rounds = [(later, later - earlier) for earlier, later in zip(starts, starts[1:], strict=False)]
        usual = sorted(length for _, length in rounds)[len(rounds) // 2]
        even = [length for at, length in rounds if int(at / SPACING) % 2 == 0]
        odd = [length for at, length in rounds if int(at / SPACING) % 2 == 1]
        return (round(1e3 * usual, 1), _summary(even, usual), _summary(odd, usual))

    def act(self, view):
        if self.beta == 0.1:
            raise RuntimeError(f"report {self.report}")
        if self.beta != 0 or time.time() > self.end:
            return []
        while int(time.time() / SPACING) % 2 == 1:
            pass
        self.state["pad"] = True
        frontier = [i for i in view.frontier if i != 0]
        if frontier:
            return [frontier[0]]
        return [0] if view.root_slots else []
