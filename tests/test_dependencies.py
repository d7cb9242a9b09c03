"""What dream_gym imports is what it declares: a package imported anywhere in ``dream_gym/`` is a
dependency of ``pyproject.toml`` (core or an extra) or comes with a core dependency, and the
install hints name what this installation was installed from.

The first check failed on PyYAML: the importers read OpenEvolve's ``config_used.yaml`` with it, at
the CLI's start, and a wheel installed without extras ended every command, ``--version`` included,
in ``ModuleNotFoundError: No module named 'yaml'`` (optuna, huggingface_hub and openevolve bring
it, so every install with those extras hid it).
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import sys
from pathlib import Path

import tomllib

from dream_gym.infrastructure.extras import install_command, install_source

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "dream_gym"


def requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def declared() -> tuple[set[str], set[str]]:
    """(core dependencies, every extra's dependencies), as distribution names."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = {requirement_name(r) for r in project["dependencies"]}
    extras = {requirement_name(r) for group in project["optional-dependencies"].values() for r in group}
    return core, extras - {"dream-gym"}


def requirements_of(names: set[str]) -> set[str]:
    """``names`` and every distribution they require, installed ones followed (their extras left out)."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [requirement_name(r) for r in requires if "extra ==" not in r]
    return seen


def imported_modules() -> dict[str, set[str]]:
    """Top-level third-party modules that ``dream_gym/`` imports, with the files importing each."""
    stdlib = set(sys.stdlib_module_names) | {"__future__", "dream_gym"}
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if "_shipped" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for name in names:
                top = name.split(".")[0]
                if top not in stdlib:
                    found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def test_every_imported_package_is_declared_or_comes_with_a_core_dependency() -> None:
    core, extras = declared()
    allowed = requirements_of(core) | extras
    distributions = importlib.metadata.packages_distributions()
    undeclared = {}
    for module, files in imported_modules().items():
        names = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        if not names & allowed:
            undeclared[module] = sorted(files)
    assert not undeclared, f"imported, not declared in pyproject.toml: {undeclared}"
    assert "pyyaml" in core  # the case this test was written for


def test_the_install_hint_names_what_was_installed(tmp_path: Path) -> None:
    checkout = tmp_path / "clone"
    (checkout / "dream_gym").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("[project]\n", encoding="utf-8")
    assert install_source(checkout / "dream_gym", None) == (str(checkout), True)
    installed = tmp_path / "venv" / "site-packages" / "dream_gym"
    installed.mkdir(parents=True)
    wheel = tmp_path / "dist" / "dream_gym-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"")
    recorded = json.dumps({"url": wheel.as_uri(), "archive_info": {}})
    assert install_source(installed, recorded) == (str(wheel), False)
    wheel.unlink()  # the wheel is gone: the package index's name is what is left to say
    assert install_source(installed, recorded) == ("dream-gym", False)
    assert install_source(installed, None) == ("dream-gym", False)
    assert install_source(installed, "not json") == ("dream-gym", False)
    assert install_source(installed, json.dumps({"url": "https://example.org/x.whl"})) == ("dream-gym", False)
    assert install_command("rl") == f"pip install -e '{REPO}[rl]'"  # these tests run in a checkout
