"""Where the shipped data lives: one function per kind, and nothing else locates it.

* :func:`shipped_root`: the datasets, ``recorded_worlds/`` (``$DREAM_GYM_SHIPPED`` overrides);
* :func:`models_dir`: the trained models, ``agents/models/`` (``$DREAM_GYM_MODELS`` overrides);
* :func:`prompts_dir`: the LLM developer's prompt templates, ``agents/prompts/``.

In a source checkout (and its editable install, ``pip install -e .``) they are the repository's
folders of those names. A wheel carries them as package data, in the same layout below
``dream_gym/_shipped/`` (``pyproject.toml`` maps the packages ``dream_gym._shipped.*`` onto the
repository's folders), found with :mod:`importlib.resources`.

``dream_gym/_shipped/`` holds no ``__init__.py`` on purpose: untrusted code (policy files,
candidates) may read the Python packages of dream_gym and nothing else of it
(:func:`dream_gym.infrastructure.sandbox.launch.read_roots`), so no shipped world, model or prompt is readable
from inside the sandbox.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

#: The wheel's folder of shipped data inside the package (no ``__init__.py``: never readable by
#: untrusted code).
PACKAGE_DATA = "_shipped"
WORLDS = ("recorded_worlds",)
MODELS = ("agents", "models")
PROMPTS = ("agents", "prompts")


def _package_folder() -> Path:
    root = files("dream_gym")
    if not isinstance(root, Path):  # e.g. imported from a zip: the data must be files on disk
        raise RuntimeError(f"dream_gym is imported from {root}, not from a folder: its shipped data "
                           "needs an installed package (pip install dream-gym) or a source checkout")
    return root


def _shipped_folder(*parts: str) -> Path:
    """The shipped folder ``parts`` (a path of the repository, e.g. ``("agents", "models")``): the
    installed package's data when it holds it, else the source checkout's folder."""
    package = _package_folder()
    installed = package.joinpath(PACKAGE_DATA, *parts)
    if installed.is_dir():
        return installed
    checkout = package.parent.joinpath(*parts)
    if (package.parent / "pyproject.toml").is_file() and checkout.is_dir():
        return checkout
    return installed  # missing: named by whoever needs a file of it


def shipped_root() -> Path:
    """The folder holding the shipped datasets (``$DREAM_GYM_SHIPPED``, else ``recorded_worlds/``)."""
    override = os.environ.get("DREAM_GYM_SHIPPED")
    return Path(override).expanduser() if override else _shipped_folder(*WORLDS)


def models_dir() -> Path:
    """Where the shipped models live (``$DREAM_GYM_MODELS``, else ``agents/models/``)."""
    override = os.environ.get("DREAM_GYM_MODELS")
    return Path(override).expanduser() if override else _shipped_folder(*MODELS)


def prompts_dir() -> Path:
    """Where the LLM developer's prompt templates live (``agents/prompts/``)."""
    return _shipped_folder(*PROMPTS)


__all__ = ["PACKAGE_DATA", "models_dir", "prompts_dir", "shipped_root"]
