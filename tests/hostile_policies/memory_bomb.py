"""Hostile: allocates (and touches) memory until something gives. Expect PolicyMemoryError."""


def act(view):
    blocks = []
    while True:
        blocks.append(bytearray(32 << 20))  # zero-filled: the pages are really used
