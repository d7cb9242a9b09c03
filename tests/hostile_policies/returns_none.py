"""Hostile: forgets to return. Expect PolicyProtocolError."""


def act(view):
    view.best()
