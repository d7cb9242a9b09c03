"""Hostile: searches its own interpreter (gc.get_objects, sys.modules, the registry cache) for
the world, the replay session or the text of an unrevealed node. Reports by raising
``FOUND=<json list>``; isolated, the list must be empty."""

import gc
import json
import sys

NEEDLE = "FUTURE" + "-MARKER-" + "4242"  # built at run time: this file's own text does not count
SUSPECT_TYPES = {"World", "ReplaySession", "Replay", "ReplayEnv", "WorldWriter", "Normalizer"}


def _holds_needle(values):
    return any(isinstance(v, str) and NEEDLE in v and v != NEEDLE for v in values)


def act(view):
    found = set()
    gc.unfreeze()  # the objects the template froze out of the collector's view come back
    for obj in gc.get_objects():
        kind = type(obj)  # not isinstance: a weak proxy would ask its (maybe dead) referent
        if kind.__name__ in SUSPECT_TYPES:
            found.add(f"gc:{kind.__name__}")
        elif issubclass(kind, dict) and _holds_needle(list(obj.values())):
            found.add("gc:future text in a dict")
        elif issubclass(kind, (list, tuple)) and _holds_needle(list(obj)):
            found.add("gc:future text in a sequence")
    for module_name, module in list(sys.modules.items()):
        for attr, value in list(getattr(module, "__dict__", {}).items()):
            if type(value).__name__ in SUSPECT_TYPES:
                found.add(f"module:{module_name}.{attr}")
    registry = sys.modules.get("dream_gym.world.registry")
    if registry is not None and getattr(registry, "_CACHE", None):
        found.add("dream_gym.world.registry._CACHE holds worlds")
    raise RuntimeError("FOUND=" + json.dumps(sorted(found)))
