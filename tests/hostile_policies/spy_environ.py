"""Hostile: looks for secrets in its environment and its parent's. Reports by raising
``FOUND=<json list>``; isolated, the list must be empty."""

import json
import os

SUSPICIOUS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL", "OPENAI", "ANTHROPIC", "AWS_", "HF_")


def _suspicious(name):
    return any(word in name.upper() for word in SUSPICIOUS)


def act(view):
    found = [f"env:{name}" for name in os.environ if _suspicious(name)]
    for path in ("/proc/self/environ", f"/proc/{os.getppid()}/environ"):
        try:
            with open(path, "rb") as f:
                entries = f.read().split(b"\0")
        except OSError:
            continue
        for entry in entries:
            name = entry.split(b"=", 1)[0].decode("utf-8", "replace")
            if _suspicious(name):
                found.append(f"{path}:{name}")
    raise RuntimeError("FOUND=" + json.dumps(sorted(set(found))))
