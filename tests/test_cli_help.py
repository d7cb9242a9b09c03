"""Every command's --help reads on a terminal 80 columns wide: no line longer, and no option or
command name broken at a hyphen (argparse wraps at hyphens by default: ``--trust-`` / ``model``)."""

from __future__ import annotations

import argparse
import re

import pytest

from dream_gym.cli import build_parser


def all_parsers(parser: argparse.ArgumentParser, name: str = "dream-gym") -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                found += all_parsers(sub, f"{name} {sub_name}")
    return found


def test_every_help_fits_80_columns_and_breaks_no_name_at_a_hyphen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    parsers = all_parsers(build_parser())
    assert len(parsers) > 25
    for name, parser in parsers:
        for line in parser.format_help().splitlines():
            assert len(line) <= 80, (name, line)
            assert not re.search(r"\w-$", line), (name, line)


def test_every_option_says_what_it_does_and_no_default_reads_empty() -> None:
    """Options with no help left the reader to guess (--seed of replay, grow and deploy, grow's
    budgets, pack's --author); train printed ``(default: )`` for an empty default."""
    for name, parser in all_parsers(build_parser()):
        for action in parser._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                assert action.help, (name, action.option_strings)
        assert "(default: )" not in parser.format_help(), name


def test_no_command_shows_the_commands(capsys) -> None:
    """`dream-gym` alone said only "the following arguments are required: COMMAND"."""
    from dream_gym.cli import main

    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: dream-gym ") and "eval" in err and "worlds" in err and "required" not in err
