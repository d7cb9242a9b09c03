"""Hostile: counts the episodes before it in the template's Python state.

An episode is forked from the template, so the template's frames are on its stack: walked up
(``sys._getframe``, or a caught exception's traceback), their locals hold the template's record
of the episodes it forked (the one running, those retired and not yet reaped, their pids). The
episode prints ``READ frames <their functions>`` and ``READ template <a digest of what they
hold>`` on stderr at its first decision: the same digest in every episode means they say
nothing of the ones before."""

import hashlib
import sys


def _shape(value, depth=0):
    """What an object holds, as text: numbers and short texts whole, containers by length,
    objects by their attributes (two levels down)."""
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, str):
        return repr(value[:40])
    if isinstance(value, (list, tuple, set, dict)):
        return f"{type(value).__name__}[{len(value)}]"
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict) and depth < 2:
        return type(value).__name__ + "{" + ",".join(f"{k}={_shape(v, depth + 1)}" for k, v in
                                                     sorted(attributes.items())) + "}"
    return type(value).__name__


def _template_state():
    try:
        raise RuntimeError
    except RuntimeError as exc:
        frame = exc.__traceback__.tb_frame
    names, seen = [], []
    while frame is not None:
        if frame.f_code.co_filename.endswith("child.py"):  # the template's and the episode's own frames
            names.append(frame.f_code.co_name)
            seen.append(frame.f_code.co_name + "(" + ";".join(
                f"{name}={_shape(value)}" for name, value in sorted(frame.f_locals.items())
                if name not in ("message", "request", "view", "result")) + ")")
        frame = frame.f_back
    return ",".join(names), hashlib.sha256(" ".join(seen).encode()).hexdigest()[:16]


class Policy:
    name = "reads-the-template"

    def reset(self, context):
        self.told = False

    def act(self, view):
        if not self.told:
            names, digest = _template_state()
            print("READ frames", names, file=sys.stderr, flush=True)
            print("READ template", digest, file=sys.stderr, flush=True)
            self.told = True
        return []
