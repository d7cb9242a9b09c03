"""Importers: discovery trees of other systems turned into ``dream-gym-world/1`` worlds.

Each importer reads its system's records into :class:`Program` objects
(:mod:`.openevolve`, :mod:`.shinkaevolve`, ...) inside one frame, :class:`~.job.ImportJob`: the
world folder checked, :func:`~.tree.build_world_records` turning the programs into one world
(copies collapsed, resumed phases stitched, orphans attached, creation order), the world written
with its provenance. :func:`import_run` picks the importer from the registry
:data:`~.systems.IMPORTERS` (``system="auto"`` recognises the folder).
"""

from __future__ import annotations

from .base import (
    MIN_KEPT_SHARE,
    ORPHAN_RULES,
    Importer,
    ImportOptions,
    ImportReport,
    NotARunError,
    OrphanWarning,
    Program,
    RunImportError,
)
from .systems import IMPORTERS, SYSTEM_NAMES, detect_system, import_run

__all__ = [
    "IMPORTERS", "MIN_KEPT_SHARE", "ORPHAN_RULES", "SYSTEM_NAMES", "ImportOptions", "Importer", "ImportReport", "NotARunError",
    "OrphanWarning", "Program", "RunImportError", "detect_system", "import_run",
]
