"""MkDocs hook: the command-line reference is the parser's own ``--help`` text, generated at build
time, so it always lists the options the installed ``dream-gym`` takes.

A page line ``<!-- cli-help -->`` becomes one section per sub-command (nested ones included),
each holding that sub-command's help text.
"""

from __future__ import annotations

import argparse
import os

MARKER = "<!-- cli-help -->"


def subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """Every (sub-command path, help text) of the parser, depth first, in the parser's order."""
    found = [(path, parser.format_help())]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += subcommands(sub, (*path, name))
    return found


def reference() -> str:
    from dream_gym.cli import build_parser

    os.environ.setdefault("COLUMNS", "100")  # argparse wraps help text to the terminal's width
    sections = []
    for path, text in subcommands(build_parser()):
        title = " ".join(("dream-gym", *path))
        sections.append(f"## `{title}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(sections)


def on_page_markdown(markdown: str, **kwargs: object) -> str:
    return markdown.replace(MARKER, reference()) if MARKER in markdown else markdown
