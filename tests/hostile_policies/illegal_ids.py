"""Hostile: returns ids that are not on the frontier. Expect IllegalBatchError from the replay rules."""


def act(view):
    return [len(view.nodes) + 1000]
