"""Hostile: returns a string instead of a list of ids. Expect PolicyProtocolError."""


def act(view):
    return "0, 1"
