"""Hostile: raises from its own code. Expect PolicyException naming ValueError and the line."""


def helper(view):
    raise ValueError(f"boom at round {view.rounds}")


def act(view):
    return helper(view)
