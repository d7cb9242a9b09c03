"""Candidate whose note (an artifact) holds terminal control sequences: a clipboard write, a window
title, a screen clear, a carriage return and a right-to-left override."""
NOTE = "\x1b]52;c;c2VjcmV0\x07\x1b]0;title\x07\x1b[2J\rshown\u202eevil"


def run():
    return 0.5
