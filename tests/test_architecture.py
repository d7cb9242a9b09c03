"""The house's rules that import-linter cannot see: infrastructure names no module above it in a
string, and a developer is one factory plus one registry line."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from dream_gym.dream.builtin_developer import BuiltinDeveloper
from dream_gym.dream.developer import Feedback, Revision
from dream_gym.dream.developers import DEVELOPERS, make_developer
from dream_gym.dream.llm_developer import LLMDeveloper

REPO = Path(__file__).resolve().parents[1]
MODULE_NAME = re.compile(r"dream_gym\.(\w+)")


def layers() -> list[list[str]]:
    """The layers contract of pyproject.toml: per layer, high to low, its modules."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["type"] == "layers")
    return [[name.strip() for name in re.split(r"[:|]", layer)] for layer in contract["layers"]]


def strings_naming_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every ``dream_gym.<module>`` in a string of ``path`` that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            docstrings.add(id(body[0].value))
    return [(node.lineno, match[1]) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            for match in MODULE_NAME.finditer(node.value)]


def test_infrastructure_names_no_module_above_it_in_a_string() -> None:
    assert layers()[-1][0] == "infrastructure"
    named = []
    for path in sorted((REPO / "dream_gym" / "infrastructure").rglob("*.py")):
        named += [(path.name, line, name) for line, name in strings_naming_modules(path) if name != "infrastructure"]
    assert named == []


def test_the_architecture_page_quotes_the_contract_as_it_is() -> None:
    page = (REPO / "docs" / "design" / "architecture.md").read_text(encoding="utf-8")
    quoted = page.split("```toml\n", 1)[1].split("\n```", 1)[0]
    assert "[[tool.importlinter.contracts]]" in quoted
    assert quoted in (REPO / "pyproject.toml").read_text(encoding="utf-8")


def test_the_string_check_sees_a_module_named_in_code_but_not_in_a_docstring(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text('"""Uses :mod:`dream_gym.evaluation.evaluate`."""\nPRELOAD = ("dream_gym.online.loop",)\n')
    assert strings_naming_modules(source) == [(2, "online")]


class EchoDeveloper:
    """A developer that proposes the incumbent again (a stand-in for a new developer's module)."""

    name = "echo"

    def propose(self, feedback: Feedback) -> Revision:
        return Revision(code=feedback.incumbent.code, notes="echo")


def build_echo(spec: str, folder: object = None, **options: object) -> EchoDeveloper:
    return EchoDeveloper()


def test_a_developer_is_one_factory_and_one_registry_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a run folder"):
        make_developer("echo")  # not registered: a litellm model string for the LLM developer
    monkeypatch.setitem(DEVELOPERS, "echo", build_echo)
    assert isinstance(make_developer("echo", seed=3), EchoDeveloper)
    assert isinstance(make_developer("builtin", seed=3), BuiltinDeveloper)
    assert make_developer("builtin", seed=3).seed == 3
    assert isinstance(make_developer("openai/some-model", tmp_path, api_base="http://127.0.0.1:9/v1"), LLMDeveloper)


def test_importing_the_registry_alone_resolves_dataset_references() -> None:
    """The dataset store plugs itself into the registry when dream_gym is imported, whichever
    module is imported first."""
    import subprocess

    code = ("from dream_gym.world.registry import resolve_world; "
            "print(resolve_world('dream-gym/recorded-v0/' + __import__('dream_gym').list_worlds("
            "'dream-gym/recorded-v0')[0]['name']).size > 1)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.stdout.strip() == "True", done.stderr
