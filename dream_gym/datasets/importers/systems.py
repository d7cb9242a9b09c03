"""The importers by system: one line per system feeds :func:`import_run`, ``--from auto`` and the
CLI's ``--from`` choices.

A new system is one module that defines its :class:`~.base.Importer` (a label, what its
detection looks for, ``detect(path)`` and ``run(src, out, options)``) and one line in
:data:`IMPORTERS`. Detection asks the importers in this order and takes the first that
recognises the path.
"""

from __future__ import annotations

import os
from dataclasses import fields as dataclass_fields
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import evotrace, gepa, openevolve, shinkaevolve, skydiscover
from .base import (
    DEFAULT_OPTIONS,
    Importer,
    ImportOptions,
    ImportReport,
    NotARunError,
    OtherSystemError,
    RunImportError,
)

IMPORTERS: dict[str, Importer] = {
    "skydiscover": skydiscover.IMPORTER,  # before openevolve: both keep programs/*.json
    "openevolve": openevolve.IMPORTER,
    "shinkaevolve": shinkaevolve.IMPORTER,
    "gepa": gepa.IMPORTER,
    "evotrace": evotrace.IMPORTER,
}
#: The name each system goes by in messages.
SYSTEM_NAMES = {system: importer.label for system, importer in IMPORTERS.items()}


def detect_system(path: str | os.PathLike[str]) -> str | None:
    """The first system of :data:`IMPORTERS` whose importer recognises ``path``, or None."""
    path = Path(path)
    return next((system for system, importer in IMPORTERS.items() if importer.detect(path)), None)


def import_run(system: str, src: str | os.PathLike[str], out: str | os.PathLike[str],
               options: ImportOptions | None = None, **fields: Any) -> ImportReport:
    """Import the run at ``src`` written by ``system`` (a key of :data:`IMPORTERS`, or ``auto``
    to recognise it) into the world folder ``out``. ``options`` (an :class:`ImportOptions`), or its
    fields given as keywords (``metric="score"``), go to the system's importer."""
    options = with_fields(options, fields)
    if system == "auto":
        found = detect_system(src)
        if found is None:
            raise RunImportError(_unrecognised(Path(src)))
        system = found
    if system not in IMPORTERS:
        raise RunImportError(f"unknown system {system!r}; expected one of {', '.join(IMPORTERS)} or auto")
    try:
        return IMPORTERS[system].run(src, out, options)
    except NotARunError as error:
        found = None if error.world_folder else detect_system(error.path)
        if found is None or found == system:
            raise RunImportError(str(error)) from error
        raise OtherSystemError(f"{error}; it looks like {a_run_of(found)} instead: import it with --from {found}",
                               found) from error


def a_run_of(system: str) -> str:
    """``a GEPA run``, ``an OpenEvolve run``: a run of ``system`` (a key of :data:`IMPORTERS`) in words."""
    name = SYSTEM_NAMES[system]
    return f"{'an' if name[0] in 'AEIOU' else 'a'} {name} run"


def _unrecognised(src: Path) -> str:
    """Why ``--from auto`` found no run at ``src``: nothing there, a world already, or no system's layout."""
    if not src.exists():
        return f"{src} does not exist"
    if (src / "world.json").is_file():
        return f"{src} is already a dream-gym world folder: load it directly (dream-gym eval --worlds {src})"
    if not src.is_dir():
        return f"{src} is a file; a run is the folder its system wrote"
    if not any(src.iterdir()):
        return f"{src} is an empty folder"
    if any((child / "world.json").is_file() for child in src.iterdir() if child.is_dir()):
        return f"{src} holds dream-gym world folders: load them directly (dream-gym eval --worlds {src})"
    if any(src.glob("logs/openevolve_*.log")):  # OpenEvolve ran here and left no program
        return f"{src}: an OpenEvolve output folder without programs; {openevolve.NO_PROGRAMS}"
    looked_for = " nor ".join(importer.looks_for for importer in IMPORTERS.values())
    return f"{src}: neither {looked_for} was found; if a system of these wrote it, name it with --from"


def with_fields(options: ImportOptions | None, fields: dict[str, Any]) -> ImportOptions:
    """``options`` (default: :data:`DEFAULT_OPTIONS`) with ``fields`` changed; an unknown field is refused."""
    try:
        return replace(options or DEFAULT_OPTIONS, **fields)
    except TypeError:
        known = ", ".join(f.name for f in dataclass_fields(ImportOptions))
        raise RunImportError(f"unknown import option(s) {', '.join(sorted(fields))}; known: {known}") from None
