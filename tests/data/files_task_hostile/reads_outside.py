"""Hostile candidate: reads a file outside its workspace and the evaluator's folder; scores its size."""
TARGET = "__TARGET__"


def run():
    with open(TARGET, encoding="utf-8") as handle:
        return len(handle.read())
