"""No page, comment, docstring or card points to something a reader of this repository cannot open:
a section of a specification document ("SPEC §4") or a tracker's issue number ("issue 8", "#12").
The concepts they stood for are pages of the docs (docs/concepts/)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("dream_gym", "agents", "tests", "docs", "recorded_worlds", "experiments", "benchmarks", "notebooks")
TEXT_SUFFIXES = {".py", ".md", ".json", ".ipynb", ".toml", ".yaml", ".yml", ".txt", ".cfg"}
DANGLING = re.compile(r"SPEC(?:\.md)? ?§|\bissues? [0-9]+\b|issue_[0-9]+|(?<![\w&/])#[0-9]{1,2}\b")


def text_files() -> list[Path]:
    files = [REPO / "README.md", REPO / "Makefile", REPO / "pyproject.toml", REPO / "mkdocs.yml"]
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*")):
            # world node files hold recorded candidate programs, and an experiment's .json files its
            # measured outputs (evaluators' messages among them): data rather than our prose
            data = path.name.startswith(("nodes.", "evidence.")) or (folder == "experiments" and path.suffix == ".json")
            if path.is_file() and path.suffix in TEXT_SUFFIXES and not data:
                files.append(path)
    return [f for f in files if f.is_file() and f != Path(__file__).resolve()]


def test_nothing_names_a_specification_section_or_an_issue_number() -> None:
    hits = []
    for path in text_files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if DANGLING.search(line):
                hits.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}")
    assert not hits, "references a reader cannot follow (link the docs page instead):\n" + "\n".join(hits)


def test_the_pattern_catches_what_it_is_for() -> None:
    for text in ("(SPEC §5)", "SPEC.md §3", "issue 12", "the targets of issue 8", "test_targets_of_issue_8", "see #12"):
        assert DANGLING.search(text), text
    for text in ("rank (`#`)", "issues", "color: #fff", "&#39;", "docs/concepts/honesty.md#the-known-frontier-bias"):
        assert not DANGLING.search(text), text
