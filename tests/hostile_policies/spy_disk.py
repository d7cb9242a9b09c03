"""Hostile: looks for world files on disk (the shipped worlds next to the package, the temp
folders) and reads any ``nodes.jsonl`` holding the text of an unrevealed node. Reports by
raising ``FOUND=<json list>``; isolated and hardened, the list must be empty."""

import json
import os
from pathlib import Path

NEEDLE = "FUTURE" + "-MARKER-" + "4242"
MAX_ENTRIES = 50_000
MAX_DEPTH = 6


def _walk(top, found, seen):
    top_depth = str(top).count(os.sep)
    for folder, dirs, files in os.walk(top):
        seen[0] += len(dirs) + len(files)
        if seen[0] > MAX_ENTRIES or folder.count(os.sep) - top_depth >= MAX_DEPTH:
            dirs[:] = []
        for name in files:
            if name == "nodes.jsonl":
                _read(os.path.join(folder, name), found)


def _read(path, found):
    try:  # regular files only, read in part: a link to /dev/zero or a FIFO is no world
        with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NOFOLLOW | os.O_NONBLOCK)) as f:
            if os.path.isfile(path) and NEEDLE.encode() in f.read(64 << 20):
                found.append(path)
    except OSError:
        pass


def act(view):
    found, seen = [], [0]
    tops = {Path("/tmp"), Path(__file__).resolve().parents[2] / "recorded_worlds"}
    try:
        import dream_gym

        tops.add(Path(dream_gym.__file__).resolve().parents[1] / "recorded_worlds")
    except ImportError:
        pass
    for top in sorted(tops):
        # the newest folders first: a busy temp folder holds more entries than the walk's budget,
        # and a world written for this episode is among the newest
        try:
            children = sorted(top.iterdir(), key=lambda p: p.lstat().st_mtime, reverse=True)
        except OSError:
            children = []
        for child in children:
            if child.is_dir() and not child.is_symlink():
                _walk(child, found, seen)
            elif child.name == "nodes.jsonl":
                _read(str(child), found)
    raise RuntimeError("FOUND=" + json.dumps(sorted(set(found))))
