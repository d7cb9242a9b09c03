"""Hostile: answers its first decision with a reply of its own making, written straight into
its reply pipe, built to make the evaluating process spend memory or misname the failure.

Which reply is ``FORGERIES[seed % len(FORGERIES)]`` (the seed is in the run context); each is
a framed message (4-byte big-endian length, then the body) as the wire protocol has it:

* ``huge``: a header announcing 60 MB of ``[{},{},...]``, and as much of it as the pipe takes;
* ``objects``: just under 16 KB (the largest reply) of empty objects in the batch,
  ``{"ok":true,"batch":[{},{},...]}``;
* ``lists``: the same with empty lists;
* ``strings``: 16 KB of one-character strings, more values than any batch may hold;
* ``died``: a failure in the words only the template may use (``"kind": "died"``, SIGXCPU:
  the evaluating process would call it a timeout);
* ``terminal``: an exception whose text drives a terminal (a window title, the clipboard, a
  cleared screen, a carriage return).

Then it blocks until it is killed. Its control is the same file with a seed that picks
``none``: it answers honestly."""

import os
import sys
import time

MB = 1 << 20
REPLY = 16 << 10  # the largest reply the evaluating process reads
FORGERIES = ("none", "huge", "objects", "lists", "strings", "died", "terminal")
TERMINAL = "\x1b]0;owned\x07\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b[2J\rall good"


def body(kind):
    if kind == "huge":
        return b"[" + b"{}," * (60 * MB // 3) + b"{}]"
    if kind == "objects":
        return b'{"ok":true,"batch":[' + b"{}," * ((REPLY - 64) // 3) + b"{}]}"
    if kind == "lists":
        return b'{"ok":true,"batch":[' + b"[]," * ((REPLY - 64) // 3) + b"[]]}"
    if kind == "strings":
        return b'{"ok":true,"batch":[' + b'"a",' * ((REPLY - 64) // 4) + b'"a"]}'
    if kind == "died":
        return b'{"ok":false,"kind":"died","signal":"SIGXCPU"}'
    raise ValueError(kind)


def _reply_pipes():
    """The descriptors above stdio this process may write to (its reply pipe)."""
    writable = []
    for fd in range(3, 64):
        try:
            os.write(fd, b"")
            writable.append(fd)
        except OSError:
            pass
    return writable


class Policy:
    def reset(self, context):
        self.kind = FORGERIES[context.seed % len(FORGERIES)]

    def act(self, view):
        if self.kind == "none":
            return [0] if view.rounds == 0 else []
        if self.kind == "terminal":
            raise RuntimeError(TERMINAL)
        data = body(self.kind)
        frame = len(data).to_bytes(4, "big") + data
        for fd in _reply_pipes():
            try:
                os.write(fd, frame)
            except OSError as exc:
                sys.stderr.write(f"write to {fd}: {exc}\n")
        time.sleep(3600)
