"""Terminal tables that keep every column at any console width: the columns that do not fit
go to a further part of the table (each part repeats the key columns), never cut or dropped.
Every cell is shown literally and escaped (:func:`dream_gym.cli.shown.cell`): a cell may quote
what others wrote."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dream_gym.cli.shown import cell, shown

GAP = 3  # one space of padding each side and the space between columns (box.SIMPLE_HEAD)


def column_parts(widths: Sequence[int], width: int | None, keep: int = 1, gap: int = GAP) -> list[list[int]]:
    """The columns (indices) of each part: the first ``keep`` in every part, the others packed in
    order into as few parts as fit in ``width`` (a column wider than the width gets a part alone)."""
    rest = list(range(keep, len(widths)))
    if width is None:
        return [list(range(len(widths)))]
    base = sum(widths[:keep]) + gap * max(keep - 1, 0)
    parts: list[list[int]] = [[]]
    used = base
    for i in rest:
        if parts[-1] and used + gap + widths[i] > width:
            parts.append([])
            used = base
        parts[-1].append(i)
        used += gap + widths[i]
    return [[*range(keep), *part] for part in parts]


def fitted_tables(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], width: int | None,
                  keep: int = 1) -> list[Any]:
    """rich Tables of ``rows`` under ``columns`` (right-aligned, never wrapped nor cut), split
    in parts of whole columns to fit ``width``; the parts after the first are titled "(continued)"
    (print them with a blank line between)."""
    from rich import box
    from rich.table import Table

    rows = [[shown(value) for value in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    tables = []
    for k, part in enumerate(column_parts(widths, width, keep)):
        table = Table(title=title if k == 0 else "(continued)", box=box.SIMPLE_HEAD, show_edge=False,
                      pad_edge=False)
        for i in part:
            table.add_column(columns[i], justify="right", no_wrap=True)
        for row in rows:
            table.add_row(*(cell(row[i]) for i in part))
        tables.append(table)
    return tables


__all__ = ["column_parts", "fitted_tables"]
