"""Hostile candidate: writes a file outside its workspace."""
TARGET = "__TARGET__"


def run():
    with open(TARGET, "w", encoding="utf-8") as handle:
        handle.write("written by a candidate")
    return 1.0
