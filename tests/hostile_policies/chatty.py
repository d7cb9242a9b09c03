"""Prints 300 kB per decision (more than a pipe holds) but stays under the output limit it is
given in the tests: the episode must complete normally, proving the parent drains the output."""

BLOCK = "chatter " * 37_500  # 300 kB


def act(view):
    print(BLOCK, flush=True)
    if view.rounds >= 4:
        return []
    return [view.frontier[0]]
