"""W as a run's own configuration file records it, for an import that is not given ``-W``.

OpenEvolve runs its iterations in ``evaluator.parallel_evaluations`` worker processes; its output
folder holds no copy of its configuration, so the ``config.yaml`` (or ``config_used.yaml``) in the
output folder, the folder above it (where OpenEvolve's examples keep it) or, for a folder that
holds the output folder, in ``openevolve_output`` is read. ShinkaEvolve
writes ``experiment_config.yaml`` into its results folder, W being ``max_parallel_jobs`` of its
``evolution_config``. The files are parsed into YAML's node graph only (no object is built: a
ShinkaEvolve file holds Python-object tags and recursive anchors), and a file that is missing,
too large or does not hold a whole number from 1 to the largest W a world may record counts as
none.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from dream_gym.world.tree import MAX_WORKERS

#: The largest configuration file read (bytes).
MAX_CONFIG_BYTES = 1 << 20

#: system -> (file names, the folders looked in, relative to the run's, in order; the keys down to W).
#: OpenEvolve's: its output folder given, or the folder that holds it (the same run, the same W).
PLACES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "openevolve": (("config_used.yaml", "config.yaml"), (".", "..", "openevolve_output"),
                   ("evaluator", "parallel_evaluations")),
    "shinkaevolve": (("experiment_config.yaml",), (".",), ("evolution_config", "max_parallel_jobs")),
}


def configured_workers(system: str, source: Path) -> tuple[int, str] | None:
    """W and where it was read (``evaluator.parallel_evaluations in .../config.yaml``) for the run
    at ``source`` (its folder, or a file in it), or None where its configuration does not say."""
    if system not in PLACES:
        return None
    names, places, keys = PLACES[system]
    folder = source if source.is_dir() else source.parent
    for place in (folder.parent if where == ".." else folder / where for where in places):  # folder / "." is folder
        for name in names:
            value = _value(place / name, keys)
            if value is not None:
                return value, f"{'.'.join(keys)} in {place / name}"
    return None


def _value(path: Path, keys: tuple[str, ...]) -> int | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
            return None
        with open(path, encoding="utf-8") as handle:
            node = yaml.compose(handle, Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):  # (nested past Python's stack)
        return None
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return None
        node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
    if not isinstance(node, yaml.ScalarNode) or not node.value.isdigit():
        return None
    value = int(node.value)
    return value if 1 <= value <= MAX_WORKERS else None
