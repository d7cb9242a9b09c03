"""The leaderboard: episodes aggregated per (policy, world) and per policy over its worlds.

Columns: mean V over the betas, the v2 objective ``auc - lambda * penalty`` (docs/concepts/score.md), its auc
and penalty, attainment, attempts, rounds, errors, and V as a share of the world's oracle limit
("% of limit", recorded on every episode by :func:`dream_gym.evaluation.evaluate.evaluate`) with the regret,
and coverage (docs/concepts/coverage.md): the share of episodes the record answered whole ("on
record"), of requests it answered, and of the online choices it held per decision. :meth:`Leaderboard.coverage_warning` says when the V
difference between two policies next to each other rests mostly on the other episodes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dream_gym.evaluation.results import read_results, result_from_row
from dream_gym.infrastructure.printable import a_few, printable
from dream_gym.infrastructure.redact import redact
from dream_gym.policy import EpisodeResult
from dream_gym.replay.score import DEFAULT_LAMBDA, v2_objective

TIE_TOLERANCE = 1e-9
AGGREGATE = "(mean over worlds)"


@dataclass(frozen=True)
class LeaderboardRow:
    """One policy on one world (or the mean over worlds)."""

    rank: int
    policy: str
    world: str
    worlds: int  # worlds averaged (1 for a per-world row)
    episodes: int
    mean_v: float  # mean replay score V over the betas
    v2: float  # auc - lam * penalty
    auc: float
    penalty: float
    attainment: float  # mean over the betas of clip(best q, 0, 1)
    attempts: float  # mean attempts per episode
    rounds: float  # mean rounds per episode
    errors: int  # episodes that ended with an error
    limit: float = math.nan  # the world's oracle limit (overall: mean over worlds); NaN: unknown
    limit_share: float = math.nan  # mean_v / limit (overall: mean of the per-world shares)
    regret: float = math.nan  # limit - mean_v (overall: mean over worlds)
    on_record: float = math.nan  # share of episodes neither refused nor cut short; NaN: not recorded
    coverage: float = math.nan  # mean share of the requests the record answered; NaN: not recorded
    held: float = math.nan  # mean share, per decision, of an online run's choices the record held


#: The title every board's overall table has, which its markdown begins with: the one kind of
#: existing file ``eval --markdown`` replaces.
OVERALL_TITLE = "Leaderboard"
MARKDOWN_START = f"### {OVERALL_TITLE}".encode()

#: How much of a failing policy's first error the line about it shows.
FIRST_ERROR_CHARS = 400


@dataclass(frozen=True)
class PolicyFailures:
    """The episodes of one policy that ended with an error: how many, and the first one."""

    policy: str
    failed: int
    episodes: int
    world: str  # of the first failed episode (canonical order)
    beta: float
    first: str  # its error message

    def line(self) -> str:
        """``policy p.py: 22 of 22 episodes failed; first: SyntaxError: ... (on w, beta 0)``."""
        # the error is the policy's own text: a page of it on one line (2,000 characters) hid the rest
        return (f"policy {self.policy}: {self.failed} of {self.episodes} episodes failed; first: "
                f"{printable(self.first, FIRST_ERROR_CHARS, lines=True)} (on {printable(self.world)}, beta {self.beta:g})")


def shorten_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters with an ellipsis in the middle (the start and the
    end of a path or name say the most: ``agents/my_…_policy.py``)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = (width - 1) * 2 // 5
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def shorten_name(name: str, width: int) -> str:
    """A policy's name cut to ``width``: a file's path keeps its end, where the file's name and
    the folders nearest it tell apart the files of several runs (``…m-doc/chosen.py``,
    ``…dream/chosen.py``; cut in the middle both read ``out/dre…sen.py``); any other name keeps
    its start and end (:func:`shorten_middle`)."""
    if len(name) <= width or "/" not in name or width <= 1:
        return shorten_middle(name, width)
    return ELLIPSIS + name[len(name) - width + 1:]


def shortened_names(names: list[str], width: int) -> list[str]:
    """Each name cut to ``width`` by :func:`shorten_name`; where different names would then read
    the same, each such group is cut again where its names read apart: the ellipsis moved
    (``pol/func_p…y`` for ``pol/func_policy.py`` beside ``pol/func_ctx_policy.py``), or, where
    no single cut keeps every difference (two settings of a long spec,
    ``pkg.pols:Deep(branches=3, budget=12)`` and ``…branches=2…``), the name's start and a window
    on the first place where they differ (``pkg.…ches=3, b…``)."""
    cut = [shorten_name(name, width) for name in names]
    if len(set(cut)) == len(set(names)) or width <= 4:
        return cut
    shown = dict(zip(names, cut, strict=True))
    groups: dict[str, set[str]] = {}
    for name, form in shown.items():
        groups.setdefault(form, set()).add(name)
    for members in groups.values():
        if len(members) > 1:
            others = {shown[name] for name in shown if name not in members}
            shown.update(_apart(sorted(members), width, others))
    return [shown[name] for name in names]


def _apart(members: list[str], width: int, others: set[str]) -> dict[str, str]:
    """Forms of ``members`` (names that one cut shows alike) that read apart from each other and
    from ``others``: one ellipsis where that is enough and keeps a few characters of the start,
    else a window on their first difference."""
    for head in range(width - 2, min(4, width - 2) - 1, -1):
        tail = width - 1 - head
        moved = {name: name if len(name) <= width else name[:head] + ELLIPSIS + name[-tail:] for name in members}
        if len(set(moved.values())) == len(members) and not others & set(moved.values()):
            return moved
    first = next((i for i, chars in enumerate(zip(*members, strict=False)) if len(set(chars)) > 1),
                 min(map(len, members)))
    head = (width - 2) // 3
    window = width - 2 - head
    at = max(head, first - window // 2)
    return {name: name if len(name) <= width else
            name[:head] + ELLIPSIS + name[at:at + window] + (ELLIPSIS if at + window < len(name) else "")
            for name in members}


ELLIPSIS = "\u2026"
MIN_POLICY_WIDTH = 12  # below this the policy column wraps instead of shortening further
MAX_POLICY_WIDTH = 40


@dataclass
class Leaderboard:
    """Rows ranked by the v2 objective (then mean V); equal values share a rank."""

    overall: list[LeaderboardRow]
    per_world: dict[str, list[LeaderboardRow]]
    lam: float
    betas: tuple[float, ...]
    rank_by: str = "v2"
    errors: list[tuple[str, str, float, str]] = field(default_factory=list)  # policy, world, beta, message
    # what the figures were measured at, said under every table (the CLI sets it: the W each world
    # was replayed at and the betas), and each world's W for the per-world titles
    conditions: str = ""
    world_w: dict[str, int] = field(default_factory=dict)

    COLUMNS = ("rank", "policy", "v2", "auc", "penalty", "mean V", "% of limit", "regret", "quality", "attempts",
               "rounds", "on record", "requests answered", "choices held", "errors")
    # terminal tables: short labels, and no regret or requests column (the titles give V*; the
    # share of episodes on the record says whether refusals matter at all)
    SHORT_COLUMNS = ("#", "policy", "v2", "auc", "pen", "V", "%lim", None, "q", "N", "k", "rec", None, "held", "err")
    # the coverage warning (coverage_warning), set by leaderboard()
    coverage_pairs: list[tuple[str, str, float]] = field(default_factory=list)

    def _cells(self, row: LeaderboardRow, ties: set[int]) -> list[str]:
        rank = f"{row.rank}=" if row.rank in ties else str(row.rank)
        return [
            rank, row.policy, f"{row.v2:.4f}", f"{row.auc:.4f}", f"{row.penalty:.3f}", f"{row.mean_v:.4f}",
            "n/a" if math.isnan(row.limit_share) else f"{100 * row.limit_share:.1f}%",
            "n/a" if math.isnan(row.regret) else f"{row.regret:.4f}",
            f"{row.attainment:.3f}", f"{row.attempts:.1f}", f"{row.rounds:.1f}",
            "n/a" if math.isnan(row.on_record) else f"{100 * row.on_record:.0f}%",
            "n/a" if math.isnan(row.coverage) else f"{100 * row.coverage:.1f}%",
            "n/a" if math.isnan(row.held) else f"{100 * row.held:.0f}%",
            f"{row.errors}/{row.episodes}" if row.errors else "0",
        ]

    @staticmethod
    def _ties(rows: Sequence[LeaderboardRow]) -> set[int]:
        ranks = [r.rank for r in rows]
        return {r for r in ranks if ranks.count(r) > 1}

    def tables(self, per_world: bool = True) -> list[tuple[str, list[LeaderboardRow]]]:
        n = len(self.per_world)
        out = [(f"{OVERALL_TITLE}: mean over {n} world{'s' if n != 1 else ''}", self.overall)]
        if per_world and n > 1:
            for name, rows in self.per_world.items():
                limit = rows[0].limit if rows else math.nan
                notes = ([f"W {self.world_w[name]}"] if name in self.world_w else []) + (
                    [] if math.isnan(limit) else [f"limit V* {limit:.4f}"])
                # the world's id is its own text: escaped and cut in every rendering of the title
                out.append((f"World {printable(name)}" + (f" ({', '.join(notes)})" if notes else ""), rows))
        return out

    def failures(self) -> list[PolicyFailures]:
        """One entry per policy with failed episodes: the count and its first error."""
        episodes = {row.policy: row.episodes for row in self.overall}
        first: dict[str, tuple[str, float, str]] = {}
        counts: dict[str, int] = {}
        for policy, world, beta, message in self.errors:
            first.setdefault(policy, (world, beta, message))
            counts[policy] = counts.get(policy, 0) + 1
        return [PolicyFailures(policy, counts[policy], episodes.get(policy, counts[policy]), *first[policy])
                for policy in first]

    def legend(self) -> str:
        """What the short column names mean (printed under the terminal tables)."""
        measured = (f"{self.conditions}; " if self.conditions
                    else f"betas {', '.join(f'{b:g}' for b in self.betas)}; ")
        return (
            f"{measured}ranked by {self.rank_by}; v2 = auc - {self.lam:g}*penalty over the betas; "
            "pen = mean rounds/attempts, V = mean replay score, "
            "%lim = V as a share of the world's oracle limit V* (overall: mean over worlds), "
            "q = mean attainment, N/k = mean attempts/rounds, rec = episodes the record answered whole "
            "(no request refused, not cut short), held = mean share of an online run's choices the record "
            "held per decision, err = episodes with an error; "
            f"'=' after a rank marks a tie; '{ELLIPSIS}' shortens a long policy name"
        )

    def to_rich(self, per_world: bool = True, width: int | None = None) -> list[Any]:
        """rich Tables: overall first, then one per world when there are several.

        ``width`` (a console's width): every table fits in it with all its columns. The gaps
        between columns narrow first, then long policy names are shortened in the middle; on a
        console too narrow even for that, a table is split in parts of whole columns (each with
        the rank and the policy), so no column is ever dropped or cut.
        """
        from rich import box
        from rich.table import Table
        from rich.text import Text

        tables = []
        shown = [(j, column) for j, column in enumerate(self.SHORT_COLUMNS) if column is not None]
        for title, rows in self.tables(per_world):
            ties = self._ties(rows)
            cells = [self._cells(row, ties) for row in rows]
            widths = [max([len(column)] + [len(c[j]) for c in cells]) for j, column in shown]
            natural = min(MAX_POLICY_WIDTH, max([len(r.policy) for r in rows] + [6]))
            gap, policy_width, parts = _fit(widths, natural, width)
            padding: tuple[int, int, int, int] = {3: (0, 1, 0, 1), 2: (0, 1, 0, 0), 1: (0, 0, 0, 0)}[gap]
            for k, part in enumerate(parts):
                shown_title = Text(title if k == 0 else f"{title} (continued)", style="table.title")  # not markup
                table = Table(title=shown_title, box=box.SIMPLE_HEAD,
                              padding=padding, pad_edge=False, show_edge=False)
                columns = [0, 1, *part]
                for i in columns:
                    if shown[i][1] == "policy":
                        table.add_column("policy", justify="left", min_width=policy_width, max_width=policy_width,
                                         no_wrap=True)
                    else:
                        table.add_column(shown[i][1], justify="right", no_wrap=True)
                names = shortened_names([c[shown[1][0]] for c in cells], policy_width)
                for row, row_cells, name in zip(rows, cells, names, strict=True):
                    values = [row_cells[shown[i][0]] for i in columns]
                    values[1] = name
                    table.add_row(*(Text(v) for v in values), style="red" if row.errors else None)  # not markup
                tables.append(table)
        return tables

    def print(self, console: Any = None, per_world: bool = True, errors: bool = True) -> None:
        """The tables at the console's width, the legend and (``errors``) one line per policy
        whose episodes failed, with its first error."""
        from rich.console import Console
        from rich.markup import escape

        console = console or Console()
        for i, table in enumerate(self.to_rich(per_world, width=console.width)):
            if i:
                console.print()
            console.print(table)
        # Not a table caption: rich crops a caption wider than its table; plain text wraps.
        console.print(self.legend(), style="dim", highlight=False)
        warning = self.coverage_warning()
        if warning:
            console.print(f"[yellow]warning[/yellow] {escape(warning)}", highlight=False)
        if errors:
            for failure in self.failures():
                console.print(f"[red]error[/red] {escape(failure.line())}", highlight=False)

    def to_markdown(self, per_world: bool = True) -> str:
        """GitHub-flavoured markdown tables (for files and READMEs)."""
        lines: list[str] = []
        for title, rows in self.tables(per_world):
            lines += [f"### {title}", "", "| " + " | ".join(self.COLUMNS) + " |",
                      "|" + "|".join("---" if c == "policy" else "---:" for c in self.COLUMNS) + "|"]
            ties = self._ties(rows)
            lines += ["| " + " | ".join(self._cells(row, ties)) + " |" for row in rows]
            lines.append("")
        lines.append(
            f"Ranked by {self.rank_by}; v2 = auc - {self.lam:g} x penalty over betas "
            f"{', '.join(f'{b:g}' for b in self.betas)}; % of limit = mean V over the betas / the world's "
            "oracle limit V* (the best V any policy can reach; overall: mean over worlds); regret = V* - mean V; "
            "on record = episodes the record answered whole (no request refused, not cut short); requests "
            "answered = mean share of the policy's requests the record answered; choices held = mean share, per "
            "decision, of the choices an online run would have had that the record held; "
            "`=` after a rank marks a tie." + (f" Conditions: {self.conditions}." if self.conditions else "")
        )
        warning = self.coverage_warning()
        if warning:
            lines += ["", f"Warning: {warning}"]
        return "\n".join(lines) + "\n"

    def coverage_warning(self) -> str | None:
        """One line naming the policies next to each other in the overall ranking whose V
        difference rests mostly on episodes the record did not answer whole (see
        :func:`rests_on_uncovered`), or None."""
        if not self.coverage_pairs:
            return None
        named = [f"{printable(a, 40)} vs {printable(b, 40)} ({100 * share:.0f}%)" for a, b, share in self.coverage_pairs]
        return (f"coverage: the V difference of {a_few(named)} rests mostly on episodes where the record refused a "
                "request or cut the episode short (share of the difference in parentheses): replay cannot "
                "tell how those policies compare online")

    def __str__(self) -> str:
        return self.to_text()

    def to_text(self, per_world: bool = True) -> str:
        """Plain aligned text (no markup)."""
        chunks = []
        for title, rows in self.tables(per_world):
            ties = self._ties(rows)
            cells = [list(self.COLUMNS)] + [self._cells(r, ties) for r in rows]
            widths = [max(len(row[i]) for row in cells) for i in range(len(self.COLUMNS))]
            body = [
                "  ".join(c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
                for row in cells
            ]
            chunks.append("\n".join([title, *body]))
        return "\n\n".join(chunks) + "\n"


def _fit(widths: Sequence[int], natural: int, width: int | None) -> tuple[int, int, list[list[int]]]:
    """The layout of a terminal table: (gap between columns, policy column width, parts).

    ``widths`` are the columns' widths (rank, policy, then the figures), ``natural`` the policy
    names' width. Each part lists the figure columns (indices into ``widths``) of one table;
    there is one part unless the width cannot hold every column even with names shortened.
    """
    rank, figures = widths[0], list(range(2, len(widths)))
    body = rank + sum(widths[i] for i in figures)
    gaps = len(widths) - 1
    if width is None:
        return 3, natural, [figures]
    for gap in (3, 2, 1):  # the widest gaps that keep every name whole
        if body + natural + gap * gaps <= width:
            return gap, natural, [figures]
    room = width - body - gaps
    if room >= min(natural, MIN_POLICY_WIDTH):  # names shortened in the middle
        return 1, room, [figures]
    gap, name = 2, min(natural, MIN_POLICY_WIDTH)
    parts: list[list[int]] = [[]]
    used = rank + gap + name
    for i in figures:
        if parts[-1] and used + gap + widths[i] > width:
            parts.append([])
            used = rank + gap + name
        parts[-1].append(i)
        used += gap + widths[i]
    return gap, name, parts


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _mean_known(values: Sequence[float]) -> float:
    """The mean of the values that are not NaN (NaN when none is known)."""
    return _mean([v for v in values if not math.isnan(v)])


def _limit_fields(episodes: Sequence[EpisodeResult], mean_v: float) -> dict[str, float]:
    limits = {r.limit for r in episodes if r.limit is not None}
    if len(limits) != 1:  # unknown (older results files), or episodes of different settings
        return {}
    limit = float(limits.pop())
    return {"limit": limit, "limit_share": mean_v / limit if limit > 0 else math.nan, "regret": limit - mean_v}


def _rank(rows: list[LeaderboardRow], key: Callable[[LeaderboardRow], tuple[float, ...]]) -> list[LeaderboardRow]:
    """Sort best first, every row with a failed episode after the rows without one (a policy that
    fails does nothing more, and V counts doing nothing as 0, above the negative V of a policy that
    pays for attempts which found little: a policy failing every episode ranked first); rows whose
    keys are equal (within TIE_TOLERANCE) share a rank (1, 1, 3)."""
    ordered = sorted(rows, key=lambda r: (r.errors > 0, tuple(-k for k in key(r)), r.policy))
    ranked: list[LeaderboardRow] = []
    for i, row in enumerate(ordered):
        if ranked and (row.errors > 0) == (ordered[i - 1].errors > 0) and all(
            abs(a - b) <= TIE_TOLERANCE for a, b in zip(key(row), key(ordered[i - 1]), strict=True)
        ):
            rank = ranked[-1].rank
        else:
            rank = i + 1
        ranked.append(_replace(row, rank=rank))
    return ranked


def _replace(row: LeaderboardRow, **changes: Any) -> LeaderboardRow:
    from dataclasses import replace

    return replace(row, **changes)


def _as_result(item: EpisodeResult | Mapping[str, Any]) -> EpisodeResult:
    if isinstance(item, EpisodeResult):
        return item
    if not isinstance(item, Mapping):
        raise TypeError(f"leaderboard ranks EpisodeResults or results rows (dicts), got {type(item).__name__}")
    return result_from_row(item)


def leaderboard(
    results: Iterable[EpisodeResult | Mapping[str, Any]] | str | os.PathLike[str], lam: float = DEFAULT_LAMBDA, rank_by: str = "v2"
) -> Leaderboard:
    """Aggregate episodes per (policy, world) and per policy (mean over its worlds). ``results``:
    :func:`evaluate`'s, their rows, or a results file it wrote.

    Per (policy, world), over its betas: mean V, the v2 objective (score.v2_objective on the
    (work, attainment, rounds, attempts) points), mean attainment ("quality reached"), mean
    attempts and rounds, and the number of episodes that ended with an error. The overall row
    of a policy is the mean of its per-world rows (errors and episodes are summed).
    Ranked by ``rank_by`` ("v2" or "V"), the other as tie-break; equal values share a rank; a row
    with an episode that failed (an error) ranks after every row without one.

    With the oracle limit recorded on the episodes (:func:`evaluate` does it), rows also give V
    as a share of the world's limit (``limit_share``; overall: the mean of the per-world shares,
    over the worlds whose limit is positive) and the regret ``limit - mean V``.
    """
    if rank_by not in ("v2", "V"):
        raise ValueError(f"rank_by must be 'v2' or 'V', got {rank_by!r}")
    if isinstance(results, (str, os.PathLike)):  # a results file (evaluate's out=), not its name's letters
        results = read_results(results)
    items = [_as_result(r) for r in results]
    if not items:
        raise ValueError("no results to rank")
    groups: dict[tuple[str, str], list[EpisodeResult]] = {}
    for result in items:
        groups.setdefault((result.policy, result.world), []).append(result)
    betas = tuple(sorted({r.beta for r in items}))

    def key(row: LeaderboardRow) -> tuple[float, float]:
        return (row.v2, row.mean_v) if rank_by == "v2" else (row.mean_v, row.v2)

    per_world: dict[str, list[LeaderboardRow]] = {}
    by_policy: dict[str, list[LeaderboardRow]] = {}
    for (policy, world), episodes in groups.items():
        episodes.sort(key=lambda r: r.beta)
        v2 = v2_objective([(r.work, r.attainment, r.rounds, r.attempts) for r in episodes], lam=lam)
        mean_v = _mean([r.replay_score for r in episodes])
        row = LeaderboardRow(
            rank=0, policy=policy, world=world, worlds=1, episodes=len(episodes),
            mean_v=mean_v, v2=v2.value, auc=v2.auc, penalty=v2.penalty,
            attainment=_mean([r.attainment for r in episodes]),
            attempts=_mean([float(r.attempts) for r in episodes]),
            rounds=_mean([float(r.rounds) for r in episodes]),
            errors=sum(1 for r in episodes if r.error),
            **_limit_fields(episodes, mean_v),
            **_coverage_fields(episodes),
        )
        per_world.setdefault(world, []).append(row)
        by_policy.setdefault(policy, []).append(row)
    overall = []
    for policy, rows in by_policy.items():
        overall.append(
            LeaderboardRow(
                rank=0, policy=policy, world=AGGREGATE, worlds=len(rows), episodes=sum(r.episodes for r in rows),
                mean_v=_mean([r.mean_v for r in rows]), v2=_mean([r.v2 for r in rows]),
                auc=_mean([r.auc for r in rows]), penalty=_mean([r.penalty for r in rows]),
                attainment=_mean([r.attainment for r in rows]), attempts=_mean([r.attempts for r in rows]),
                rounds=_mean([r.rounds for r in rows]), errors=sum(r.errors for r in rows),
                limit=_mean_known([r.limit for r in rows]), limit_share=_mean_known([r.limit_share for r in rows]),
                regret=_mean_known([r.regret for r in rows]), on_record=_mean_known([r.on_record for r in rows]),
                coverage=_mean_known([r.coverage for r in rows]), held=_mean_known([r.held for r in rows]),
            )
        )
    # an error is untrusted text (a policy's exception) and the board is printed and shared
    errors = [(r.policy, r.world, r.beta, redact(str(r.error))) for r in items if r.error]
    ranked = _rank(overall, key)
    return Leaderboard(
        overall=ranked,
        per_world={world: _rank(rows, key) for world, rows in sorted(per_world.items())},
        lam=lam,
        betas=betas,
        rank_by=rank_by,
        errors=errors,
        coverage_pairs=_uncovered_neighbours(ranked, items),
    )


#: The difference between two policies "rests mostly" on uncovered episodes when more than this
#: share of it comes from (world, beta) pairs where either episode was not answered whole.
MOSTLY = 0.5


def rests_on_uncovered(first: Sequence[EpisodeResult], second: Sequence[EpisodeResult]) -> float | None:
    """How much of the V difference between two policies comes from episodes the record did not
    answer whole, as a share of the difference (None: no difference, or coverage not recorded).

    The episodes are paired by (world, beta); with ``d`` the V difference of a pair, the share is
    the sum of ``d`` over the pairs where either episode had a refused request or was cut short,
    divided by the sum over all pairs (the mean V difference up to a factor). Above
    :data:`MOSTLY` (a half), the difference *rests mostly* on what the record did not answer.
    """
    theirs = {(r.world, r.beta): r for r in second}
    pairs = [(mine, theirs[(mine.world, mine.beta)]) for mine in first if (mine.world, mine.beta) in theirs]
    if not pairs or any(a.on_record is None or b.on_record is None for a, b in pairs):
        return None
    total = sum(a.replay_score - b.replay_score for a, b in pairs)
    if abs(total) <= TIE_TOLERANCE * len(pairs):
        return None
    uncovered = sum(a.replay_score - b.replay_score for a, b in pairs if not (a.on_record and b.on_record))
    return uncovered / total


def _uncovered_neighbours(ranked: Sequence[LeaderboardRow], items: Sequence[EpisodeResult]
                          ) -> list[tuple[str, str, float]]:
    """The policies next to each other in ``ranked`` whose difference rests mostly on uncovered
    episodes, with the share (:func:`rests_on_uncovered`)."""
    by_policy: dict[str, list[EpisodeResult]] = {}
    for result in items:
        by_policy.setdefault(result.policy, []).append(result)
    found = []
    for upper, lower in zip(ranked, ranked[1:], strict=False):
        share = rests_on_uncovered(by_policy[upper.policy], by_policy[lower.policy])
        if share is not None and share > MOSTLY:
            found.append((upper.policy, lower.policy, share))
    return found


def _coverage_fields(episodes: Sequence[EpisodeResult]) -> dict[str, float]:
    """``on_record``, ``coverage`` and ``held`` of a (policy, world) row, over the episodes that did not
    fail (NaN when all failed: a failed episode's record says nothing of the record's coverage);
    nothing when an episode does not record them (a results file written before coverage was)."""
    episodes = [r for r in episodes if not r.error]
    on_record = [r.on_record for r in episodes]
    coverage = [r.coverage for r in episodes]
    if any(v is None for v in on_record) or any(v is None for v in coverage):
        return {}
    held = [r.answerable for r in episodes if r.answerable is not None]  # None: no decision (a failed load)
    return {"on_record": _mean([float(bool(v)) for v in on_record]),
            "coverage": _mean([float(v) for v in coverage if v is not None]), "held": _mean(held)}
