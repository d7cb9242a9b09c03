"""Hostile: never returns from act (a busy loop). Expect PolicyTimeout."""


def act(view):
    n = 0
    while True:
        n += 1
