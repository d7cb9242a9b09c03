"""docs/design/modules.md lists every package and module of dream_gym, and nothing else."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("module_map", REPO / "docs" / "hooks" / "module_map.py")
assert spec is not None and spec.loader is not None
module_map = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module_map)


def listed_paths(block: str) -> set[str]:
    """The paths a map names, rebuilt from its indentation (``world/`` then ``  tree.py`` is world/tree.py)."""
    paths, stack = set(), []
    for line in block.splitlines()[2:-1]:  # the fence, the root line ... the fence
        match = re.match(r"( +)(\S+)", line)
        assert match, line
        depth = len(match.group(1)) // 2 - 1
        stack[depth:] = [match.group(2)]
        paths.add("".join(stack))
    return paths


def tree_paths() -> set[str]:
    package = REPO / "dream_gym"
    found = set()
    for path in package.rglob("*.py"):
        relative = path.relative_to(package)
        if "__pycache__" in relative.parts or "_shipped" in relative.parts:
            continue
        found.add(relative.parent.as_posix() + "/" if path.name == "__init__.py" else relative.as_posix())
    return found - {"./"}


def test_the_page_holds_the_map_of_the_tree_as_it_is() -> None:
    page = module_map.PAGE.read_text(encoding="utf-8")
    assert module_map.page_map(page) == module_map.module_map(), "run: python docs/hooks/module_map.py"


def test_the_map_lists_every_module_and_nothing_that_does_not_exist() -> None:
    listed = listed_paths(module_map.module_map())
    assert listed == tree_paths()


def test_a_module_missing_from_the_page_is_seen(tmp_path: Path) -> None:
    """Control: the page with one module's line removed no longer matches the tree."""
    block = module_map.module_map()
    line = next(x for x in block.splitlines() if x.strip().startswith("printable.py"))
    shortened = block.replace(line + "\n", "")
    assert listed_paths(shortened) != tree_paths()
    assert shortened != module_map.module_map()
