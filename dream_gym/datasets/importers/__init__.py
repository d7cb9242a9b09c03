"""Importers: discovery trees of other systems turned into ``dream-gym-world/1`` worlds.

Each importer reads its system's records into :class:`Program` objects
(:mod:`.openevolve`, :mod:`.shinkaevolve`); :func:`~.tree.build_world_records` turns them into
one world (copies collapsed, resumed phases stitched, orphans attached, creation order), and
:func:`import_run` picks the importer (``system="auto"`` recognises the folder).
"""

from __future__ import annotations

import os
from typing import Any

from .base import (
    MIN_KEPT_SHARE,
    ORPHAN_RULES,
    SYSTEM_NAMES,
    ImportReport,
    OrphanWarning,
    Program,
    RunImportError,
)
from .detect import detect_system

__all__ = [
    "MIN_KEPT_SHARE", "ORPHAN_RULES", "SYSTEM_NAMES", "RunImportError", "ImportReport", "OrphanWarning",
    "Program", "detect_system", "import_run",
]


def import_run(system: str, src: str | os.PathLike[str], out: str | os.PathLike[str], **options: Any) -> ImportReport:
    """Import the run at ``src`` written by ``system`` (``openevolve``, ``shinkaevolve`` or ``auto``)."""
    if system == "auto":
        found = detect_system(src)
        if found is None:
            raise RunImportError(
                f"{src}: neither an OpenEvolve output folder (programs/*.json) nor a ShinkaEvolve results "
                "folder (a SQLite database with a 'programs' table) was found; name the system with --from"
            )
        system = found
    if system == "openevolve":
        from .openevolve import import_openevolve

        return import_openevolve(src, out, **options)
    if system == "shinkaevolve":
        from .shinkaevolve import import_shinkaevolve

        return import_shinkaevolve(src, out, **options)
    raise RunImportError(f"unknown system {system!r}; expected one of {', '.join(SYSTEM_NAMES)} or auto")
