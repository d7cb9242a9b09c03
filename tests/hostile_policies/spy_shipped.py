"""Hostile: reads the shipped data of the dream_gym it runs with (an installed wheel's
``dream_gym/_shipped/``: the datasets' worlds, the trained models, the prompt templates), found
through ``dream_gym.world.shipped`` and by walking the package folder. Reports by raising
``FOUND=<json>`` (counts: an error message is clipped): ``tried``, the data files it found by name;
``read``, how many it could read (``sample``: a few of them); ``nodes`` and ``nodes_read``, the same
for the worlds' plain ``nodes.jsonl``. Isolated, ``read`` must be 0."""

import json
import os
from pathlib import Path

MAX_FILES = 5_000


def _data_folders():
    import dream_gym

    package = Path(dream_gym.__file__).resolve().parent
    folders = {package / "_shipped"}
    try:
        from dream_gym.world.shipped import models_dir, prompts_dir, shipped_root

        folders |= {shipped_root(), models_dir(), prompts_dir()}
    except Exception:  # an older dream_gym: the walk below still finds the folder
        pass
    return sorted(folders)


def _files(folder):
    found = []
    for top, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found += [os.path.join(top, name) for name in names if not name.endswith((".py", ".pyc"))]
        if len(found) > MAX_FILES:
            break
    return found


def act(view):
    tried = sorted({path for folder in _data_folders() for path in _files(folder)})
    read = []
    for path in tried:
        try:
            with open(path, "rb") as f:
                f.read(64)
            read.append(path)
        except OSError:
            pass
    nodes = [p for p in tried if os.path.basename(p) == "nodes.jsonl"]
    report = {"tried": len(tried), "read": len(read), "nodes": len(nodes),
              "nodes_read": len(set(nodes) & set(read)), "sample": [os.path.basename(p) for p in read[:3]]}
    raise RuntimeError("FOUND=" + json.dumps(report))
