"""A module of the flat layout is still importable by its earlier name: the same module object,
with a DeprecationWarning naming where it lives now."""

from __future__ import annotations

import ast
import importlib
import sys

import pytest

import dream_gym
from dream_gym._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_earlier_name_gives_the_module_at_its_new_place(old: str) -> None:
    new = importlib.import_module(f"dream_gym.{MOVED[old]}")
    sys.modules.pop(f"dream_gym.{old}", None)
    with pytest.warns(DeprecationWarning, match=f"dream_gym.{old} moved to dream_gym.{MOVED[old]}"):
        alias = importlib.import_module(f"dream_gym.{old}")
    if hasattr(new, "__path__"):  # a package: a stand-in handing out the package's names
        assert all(getattr(alias, name) is getattr(new, name) for name in new.__all__)
    else:
        assert alias is new


def test_a_submodule_below_an_earlier_name_is_the_same_object_not_a_second_copy() -> None:
    new = importlib.import_module("dream_gym.infrastructure.sandbox.launch")
    with pytest.warns(DeprecationWarning):
        old = importlib.import_module("dream_gym.sandbox.launch")
    assert old is new and old.launch is new.launch
    package = importlib.import_module("dream_gym.infrastructure.sandbox")
    assert callable(package.launch), "the package's function launch was overwritten by its submodule"


def test_the_packages_that_took_a_module_name_still_hand_out_its_names() -> None:
    from dream_gym.replay import IllegalBatchError  # the module dream_gym.replay held it
    from dream_gym.world import World, load_world

    assert World is dream_gym.World and load_world is dream_gym.load_world
    assert IllegalBatchError is dream_gym.IllegalBatchError
    with pytest.raises(ImportError, match="cannot import name 'no_such_name'"):
        from dream_gym.world import no_such_name  # noqa: F401


def test_the_layer_packages_import_nothing_when_a_submodule_is_imported() -> None:
    """A policy episode imports a few submodules (dream_gym.replay.view, the printable text) with
    the package root deferred: the layer packages' __init__s run no import of dream_gym, so the
    episode's process stays light (the two that took a module's name forward to it on demand)."""
    from pathlib import Path

    package = Path(dream_gym.__file__).parent
    for name in ("world", "replay", "envs", "evaluation", "infrastructure", "training"):
        tree = ast.parse((package / name / "__init__.py").read_text(encoding="utf-8"))
        imported = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        assert all(not getattr(node, "module", "") or not node.module.startswith("dream_gym") for node in imported), name
        assert all(alias.name in ("importlib", "typing", "Any") for node in imported for alias in node.names), name
