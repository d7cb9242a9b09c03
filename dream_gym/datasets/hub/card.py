"""The dataset card a Hub repository shows (its README.md): the Hub's YAML front matter (license,
tags, sizes), then the newest version's own card and how to use it with dream_gym."""

from __future__ import annotations

import re
from typing import Any

from dream_gym.datasets.store import Dataset
from dream_gym.infrastructure.limits import max_line_bytes

TAG = "dream-gym"  # every dataset repository of dream_gym's carries it: listing a namespace filters on it
CARD_FILE = "README.md"
# License identifiers the Hub accepts in a card (a dataset.json licence in another spelling maps to one).
HUB_LICENSES = {
    "apache-2.0", "mit", "openrail", "bsd-2-clause", "bsd-3-clause", "cc0-1.0", "cc-by-4.0",
    "cc-by-sa-4.0", "cc-by-nc-4.0", "cc-by-nc-sa-4.0", "cc-by-nd-4.0", "cc-by-nc-nd-4.0", "cc-by-3.0",
    "cc-by-sa-3.0", "gpl-3.0", "lgpl-3.0", "agpl-3.0", "mpl-2.0", "odc-by", "odbl", "pddl", "unlicense",
}


def local_card(dataset: Dataset) -> str | None:
    """The dataset's own card (its README.md, listed in dataset.json or not)."""
    path = dataset.path / CARD_FILE
    if not path.is_file() or path.stat().st_size > max_line_bytes():
        return None
    return path.read_text(encoding="utf-8", errors="replace")


def strip_front_matter(text: str) -> str:
    match = re.match(r"^---\r?\n.*?\r?\n---\r?\n", text, re.S)
    return text[match.end():] if match else text


def hub_license(licence: Any) -> tuple[str, str | None]:
    """The Hub's license id for a dataset.json ``licence`` (and a license_name for ``other``)."""
    text = str(licence or "").strip()
    if not text:
        return "unknown", None
    lowered = text.lower().replace(" ", "-")
    if lowered in HUB_LICENSES:
        return lowered, None
    slug = re.sub(r"[^a-z0-9]+", "-", lowered).strip("-")
    return "other", slug or None


def size_category(nodes: int) -> str:
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                         (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")):
        if nodes < bound:
            return label
    return "10M<n<100M"


def dataset_card(meta: Any, readme: str | None, versions: list[int], remote: str) -> str:
    """The repository's README.md: the Hub's YAML front matter, then the newest version's card
    (its commands download from ``remote``, an ``hf://`` location)."""
    from huggingface_hub import DatasetCardData

    meta = meta if isinstance(meta, dict) else {}
    did = str(meta.get("id", ""))
    name = did.rsplit("-v", 1)[0] if "-v" in did else did
    worlds = [w for w in meta.get("worlds", []) if isinstance(w, dict)]
    nodes = sum(int(w.get("nodes") or 0) for w in worlds)
    tasks = sorted({re.sub(r"[^a-z0-9]+", "-", str(w.get("task", "")).lower()).strip("-") for w in worlds} - {""})
    license_id, license_name = hub_license(meta.get("licence"))
    extra: dict[str, Any] = {"license_name": license_name} if license_name else {}
    data = DatasetCardData(
        license=license_id,
        pretty_name=name,
        tags=[TAG, "gymnasium", "reinforcement-learning", "exploration", "search-trees", *tasks[:10]],
        task_categories=["reinforcement-learning"],
        size_categories=[size_category(nodes)],
        viewer=False,
        dream_gym={"id": name, "latest": did, "versions": [f"v{v}" for v in versions],
                   "format": meta.get("format"), "world_format": meta.get("world_format")},
        **extra,
    )
    body = strip_front_matter(readme).strip() if readme else (
        f"# {name}\n\n{meta.get('description') or 'A dataset of dream_gym worlds (recorded discovery trees).'}"
    )
    rows = "\n".join(f"| `v{v}/` | `{name}-v{v}` |" for v in reversed(versions))
    licence = meta.get("licence") or "not stated"
    usage = f"""

---

## Using this dataset with dream_gym

This repository holds the dream_gym dataset `{name}`: worlds (recorded AI-discovery search trees,
format `{meta.get('world_format', 'dream-gym-world/1')}`) that `dream_gym` replays as Gymnasium
environments. Each version is a folder holding its `dataset.json` (format `{meta.get('format')}`:
worlds, split, the sha256 of every file) and one folder per world; the newest is `{did}`
({len(worlds)} worlds, {nodes} nodes; licence: {licence}).

| folder | dataset id |
|---|---|
{rows}

```
pip install 'dream-gym[share]'
dream-gym worlds download {name} --remote {remote}        # the newest version
dream-gym worlds download {did} --remote {remote}
```

```python
import dream_gym.datasets as ds
dataset = ds.load("{name}", download=True, remote="{remote}")  # or set DREAM_GYM_REMOTE
```

Downloads check the dataset format version, then every file's sha256, before anything enters the
local store.
"""
    return f"---\n{data.to_yaml()}\n---\n\n{body}\n{usage}"
