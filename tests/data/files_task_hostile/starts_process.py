"""Hostile candidate: starts a process (a shell command) from inside the evaluation."""
import subprocess


def run():
    return float(subprocess.run(["echo", "7"], capture_output=True, text=True, check=True).stdout)
