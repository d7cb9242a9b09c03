"""Dataset ids: ``namespace/name-vN`` (Minari's grammar), and world references.

A dataset id names one version of a shared collection of worlds::

    dream-gym/recorded-v0        namespace "dream-gym", name "recorded", version 0

A world reference adds the name of one world of that dataset::

    dream-gym/recorded-v0/cp26-fixed-s0

A dataset name is an id without its version (``dream-gym/recorded``); where one is accepted
(``dream_gym.datasets.load``, ``dream-gym worlds download``) it means the newest version. A text
that ends in ``-vN`` is always read as a versioned id.

Every part starts with a letter or digit and continues with letters, digits, ``_``, ``.``
or ``-``; so no part can be empty, ``.`` or ``..``, and an id maps safely onto folders.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PART = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_ID_RE = re.compile(rf"^(?P<namespace>{_PART})/(?P<name>{_PART}?)-v(?P<version>0|[1-9][0-9]*)$")
_NAME_RE = re.compile(rf"^{_PART}$")
_DATASET_NAME_RE = re.compile(rf"^(?P<namespace>{_PART})/(?P<name>{_PART})$")
_VERSION_SUFFIX_RE = re.compile(r"-v[0-9]+$")  # a name cannot end like a version ("x-v01" is a bad id)


class DatasetIdError(ValueError):
    """A string is not a valid dataset id or world reference."""


@dataclass(frozen=True, order=True)
class DatasetId:
    namespace: str
    name: str
    version: int

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}-v{self.version}"

    @property
    def folder(self) -> str:
        """Relative folder of this dataset in a store or remote: ``namespace/name-vN``."""
        return str(self)

    @property
    def unversioned(self) -> DatasetName:
        return DatasetName(self.namespace, self.name)


@dataclass(frozen=True, order=True)
class DatasetName:
    """A dataset id without its version, ``namespace/name``: every version of one dataset."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    def version(self, number: int) -> DatasetId:
        return DatasetId(self.namespace, self.name, number)


def parse_dataset_id(text: str) -> DatasetId:
    """Parse ``namespace/name-vN``; raise :class:`DatasetIdError` saying what is wrong."""
    if not isinstance(text, str):
        raise DatasetIdError(f"dataset id must be a string, got {type(text).__name__}")
    match = _ID_RE.match(text)
    if match is None:
        raise DatasetIdError(
            f"bad dataset id {text!r}: expected 'namespace/name-vN' (for example "
            "'dream-gym/recorded-v0'); parts use letters, digits, '_', '.', '-' and start with "
            "a letter or digit, and N is a version number without leading zeros"
        )
    return DatasetId(match["namespace"], match["name"], int(match["version"]))


def parse_dataset_ref(text: str) -> DatasetId | DatasetName:
    """Parse ``namespace/name-vN`` (one version) or ``namespace/name`` (the newest version)."""
    if isinstance(text, str) and _ID_RE.match(text) is None and not _VERSION_SUFFIX_RE.search(text):
        match = _DATASET_NAME_RE.match(text)
        if match is not None:
            return DatasetName(match["namespace"], match["name"])
        raise DatasetIdError(
            f"bad dataset id {text!r}: expected 'namespace/name-vN' (one version, for example "
            "'dream-gym/recorded-v1') or 'namespace/name' (the newest version); parts use letters, "
            "digits, '_', '.', '-' and start with a letter or digit"
        )
    return parse_dataset_id(text)


def is_dataset_ref(text: str) -> bool:
    """True for ``namespace/name-vN`` and for ``namespace/name``."""
    if not isinstance(text, str):
        return False
    if _ID_RE.match(text) is not None:
        return True
    return _DATASET_NAME_RE.match(text) is not None and not _VERSION_SUFFIX_RE.search(text)


def check_world_name(name: str) -> str:
    """Return ``name`` when it is a valid world name inside a dataset, else raise."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise DatasetIdError(
            f"bad world name {name!r}: use letters, digits, '_', '.', '-', starting with a "
            "letter or digit"
        )
    return name


def parse_world_ref(text: str) -> tuple[DatasetId, str]:
    """Parse ``namespace/name-vN/world`` into the dataset id and the world name."""
    if not isinstance(text, str) or text.count("/") != 2:
        raise DatasetIdError(
            f"bad world reference {text!r}: expected 'namespace/name-vN/world' "
            "(for example 'dream-gym/recorded-v0/cp26-fixed-s0')"
        )
    dataset, world = text.rsplit("/", 1)
    return parse_dataset_id(dataset), check_world_name(world)


def is_dataset_id(text: str) -> bool:
    return isinstance(text, str) and _ID_RE.match(text) is not None


def is_world_ref(text: str) -> bool:
    try:
        parse_world_ref(text)
    except DatasetIdError:
        return False
    return True
