"""The module map of docs/design/modules.md, written from the package itself.

Every package and module under ``dream_gym/`` is listed with the first sentence of its docstring,
packages before modules, in the tree's order; nothing else is listed. The map sits in
docs/design/modules.md between two marker lines; ``python docs/hooks/module_map.py`` rewrites it,
and tests/test_module_map.py fails when the page and the tree differ (a module added, moved or
removed without the map, or a docstring's first sentence changed).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "dream_gym"
PAGE = REPO / "docs" / "design" / "modules.md"
BEGIN, END = "<!-- module map: begin -->", "<!-- module map: end -->"
WIDTH = 100  # the map's line width: a summary longer than its room is cut at a word, with an ellipsis
SKIPPED = {"__pycache__", "_shipped"}  # bytecode, and the wheel's data folder (not code)


def summary(path: Path) -> str:
    """The first sentence of the module's docstring (one line, markup kept)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    match = re.match(r"(.+?[.:;])(\s|$)", text)
    return (match.group(1) if match else text).rstrip(".:;")


def fit(text: str, room: int) -> str:
    if len(text) <= room:
        return text
    cut = text[: room - 1].rsplit(" ", 1)[0]
    return cut + "…"


def entries(folder: Path, depth: int = 0) -> list[tuple[int, str, Path]]:
    """(depth, shown name, file holding its docstring) for every package and module below ``folder``."""
    found: list[tuple[int, str, Path]] = []
    children = sorted(p for p in folder.iterdir() if p.name not in SKIPPED)
    for child in (c for c in children if c.is_dir() and (c / "__init__.py").is_file()):
        found.append((depth, child.name + "/", child / "__init__.py"))
        found += entries(child, depth + 1)
    for child in (c for c in children if c.suffix == ".py" and c.name != "__init__.py"):
        found.append((depth, child.name, child))
    return found


def module_map() -> str:
    """The map as a fenced text block: one line per package and module, indented by depth."""
    lines = ["```text", "dream_gym/"]
    for depth, name, source in entries(PACKAGE):
        indent = "  " * (depth + 1)
        label = f"{indent}{name}"
        column = max(len(label) + 2, 26)
        lines.append(f"{label:<{column}}{fit(summary(source), WIDTH - column)}".rstrip())
    lines.append("```")
    return "\n".join(lines)


def page_map(page: str) -> str:
    """The map the page holds now (between the markers)."""
    start, end = page.index(BEGIN) + len(BEGIN), page.index(END)
    return page[start:end].strip("\n")


def write() -> None:
    page = PAGE.read_text(encoding="utf-8")
    start, end = page.index(BEGIN) + len(BEGIN), page.index(END)
    PAGE.write_text(page[:start] + "\n" + module_map() + "\n" + page[end:], encoding="utf-8")


if __name__ == "__main__":
    write()
    sys.stdout.write(f"wrote the module map of {PAGE.relative_to(REPO)}\n")
