"""Hostile candidate: once the harness has written its result file, replaces it with a FIFO (a reader
that opens it would wait for a writer for ever) and claims a high score through it."""
import os

_replace = os.replace


def _replace_then_fifo(source, target, *args, **kwargs):
    _replace(source, target, *args, **kwargs)
    if str(target).endswith("_result.json"):
        os.remove(target)
        os.mkfifo(target)


os.replace = _replace_then_fifo


def run():
    return 1000.0
