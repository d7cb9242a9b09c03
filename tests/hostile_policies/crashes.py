"""Hostile: writes last words to stderr, then exits the process hard. Expect PolicyCrashed with
exit code 3 and the stderr tail."""

import os
import sys


def act(view):
    sys.stderr.write("LAST-WORDS-5512: giving up\n")
    sys.stderr.flush()
    os._exit(3)
