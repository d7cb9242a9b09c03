"""The versions of one improvement phase on disk: policy files, their records, selection.

``revisions/<phase>/<m>.py`` is version m of a phase (0 is the incumbent), with ``<m>.json``
(its :class:`VersionRecord`: status, score on the history and per world, error, notes,
parameters, cost), ``<m>.results.jsonl`` (its episodes), and for an LLM developer
``<m>.prompt.md`` and ``<m>.reply.md``.

:func:`select` is the paper's argmax with the incumbent included: a revision replaces the
incumbent only when it scores strictly higher (by more than :data:`TIE_TOLERANCE`), so a tie
keeps the incumbent and the kept version never scores below the incumbent on the history.
"""

from __future__ import annotations

import hashlib
import inspect
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from dream_gym.world.tree import is_number

TIE_TOLERANCE = 1e-9


@dataclass
class VersionRecord:
    """One version of a phase and what became of it.

    ``status``: ``incumbent`` (m = 0), ``ok`` (valid, deterministic, evaluated without error),
    ``invalid`` (no code, or validation failed), ``failed`` (an episode on the history ended with
    an error), ``nondeterministic`` (the two evaluations differ). Only ``ok`` revisions and the
    incumbent can be selected.
    """

    phase: int
    m: int
    file: str  # relative to the run folder
    status: str
    score: float | None = None  # selection score on the history
    per_world: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    notes: str = ""
    params: dict[str, Any] | None = None
    cost: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    warning: str | None = None  # e.g. an incumbent that is nondeterministic (still the fallback)
    sha256: str | None = None  # of the file as evaluated (a resume checks it; None in older ledgers)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "revision", **asdict(self)}

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> VersionRecord:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})

    @property
    def selectable(self) -> bool:
        return self.score is not None and self.status in ("incumbent", "ok")


def select(versions: Sequence[VersionRecord]) -> VersionRecord:
    """The argmax over the selectable versions, the incumbent (m = 0) included; a tie keeps the
    incumbent, and among equal revisions the earliest."""
    incumbent = next(v for v in versions if v.m == 0)
    best = incumbent
    best_score = incumbent.score if incumbent.score is not None else float("-inf")
    for version in sorted(versions, key=lambda v: v.m):
        if version.m != 0 and version.selectable and version.score > best_score + TIE_TOLERANCE:  # type: ignore[operator]
            best, best_score = version, float(version.score)  # type: ignore[arg-type]
    return best


def phase_dir(out: Path, phase: int) -> Path:
    return out / "revisions" / str(phase)


def version_path(out: Path, phase: int, m: int, suffix: str = ".py") -> Path:
    return phase_dir(out, phase) / f"{m}{suffix}"


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class LedgerDamaged(ValueError):
    """A resumed run's ledger names a file, or holds a value, that the run did not write."""


def check_ledger(out: Path, rows: Sequence[Any], ledger: str) -> None:
    """Refuse a ledger (``ledger``: its name) whose version rows the run did not write as they are:
    a row's file must be the one the run gives that version (``revisions/<phase>/<m>.py``) and,
    where the row records its digest, hold the code that was evaluated; scores are numbers. A file
    named outside the run (``../../x.py``) was deployed as ``chosen.py`` under the journaled score,
    never evaluated; an edited version file too; a score that is a string made a traceback."""
    for number, row in enumerate(rows, 1):
        if not isinstance(row, Mapping) or row.get("type") not in ("revision", "carry"):
            continue
        where = f"{out / ledger}, line {number}"
        try:
            phase, m = (int(v) for v in (row["source"] if row["type"] == "carry" else (row["phase"], row["m"])))
        except (KeyError, TypeError, ValueError):
            raise LedgerDamaged(f"{where}: a version row without its phase and number; start again in a new --out") \
                from None
        expected = str(version_path(out, phase, m).relative_to(out))
        if row.get("file") != expected:
            raise LedgerDamaged(f"{where}: version {m} of phase {phase} is {str(row.get('file'))[:80]!r}, where the run "
                                f"wrote {expected!r}; start again in a new --out")
        score, per_world = row.get("score"), row.get("per_world") or {}
        if not (score is None or is_number(score)) or not isinstance(per_world, Mapping) or not all(
                map(is_number, per_world.values())):
            raise LedgerDamaged(f"{where}: version {m} of phase {phase} holds a score that is not a number; "
                                "start again in a new --out")
        digest = row.get("sha256")
        if digest is not None and (not (out / expected).is_file() or file_sha256(out / expected) != digest):
            raise LedgerDamaged(f"{where}: {expected} is not the file that was evaluated (its sha256 differs, or it "
                                "is gone); start again in a new --out")


def _literal(value: Any) -> str:
    """A parameter's value as Python source: ``inf`` and ``nan`` have no literal of their own."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    return repr(value)


def _quoted(spec: str) -> str:
    """``spec`` as it may stand inside the wrapper's docstring: its values are the user's text,
    so quotes, backslashes and line breaks are escaped (a ``\"\"\"`` would end the docstring)."""
    return "'" + spec.encode("unicode_escape").decode("ascii").replace('"', '\\"').replace("'", "\\'") + "'"


def incumbent_source(spec: str) -> tuple[str, str]:
    """The policy file text of version 0 for an incumbent spec, and the source of the built-in
    it runs (empty for a file). A built-in name or ``module:attr`` becomes a small wrapper file
    so that every version is evaluated, deployed and shared the same way, as an isolated file."""
    from dream_gym.policies.recommended import resolve_incumbent
    from dream_gym.policy_files.specs import split_parameters

    spec = resolve_incumbent(spec)  # recommended: the spec it stands for as an incumbent (a built-in or a file)
    written = spec
    spec, params = split_parameters(spec)  # greedy(patience=10): the wrapper passes them on
    arguments = "".join(f", {key}={_literal(value)}" for key, value in params.items())
    if spec.endswith(".py"):
        path = Path(spec)
        if not path.is_file():
            raise FileNotFoundError(f"policy file {spec} does not exist")
        return path.read_text(encoding="utf-8"), ""
    if spec.endswith(".zip"):
        raise ValueError(f"{spec}: an SB3 model cannot be the incumbent of the dreaming loop (it loads "
                         "in-process only); give a built-in name, module:Class or a policy .py file")
    if ":" in spec:
        module, _, attr = spec.partition(":")
        text = (f'"""Version 0: the installed policy {_quoted(written)} (a wrapper, so it runs isolated like every '
                f'version)."""\n\nimport importlib\n\n\ndef make_policy():\n'
                f"    obj = importlib.import_module({module!r})\n"
                f"    for part in {attr!r}.split('.'):\n        obj = getattr(obj, part)\n"
                f"    return obj({arguments[2:]}) if isinstance(obj, type) else obj\n")
        return text, ""
    from dream_gym.policies import POLICIES

    if spec not in POLICIES:
        raise LookupError(f"unknown built-in policy {spec!r}; known: {', '.join(sorted(POLICIES))}; "
                          "or give module:Class or a path to a .py file")
    cls = POLICIES[spec]
    text = (f'"""Version 0: the built-in policy {_quoted(written)} ({cls.__module__}.{cls.__name__}); a wrapper, so '
            f'it runs isolated like every version."""\n\nfrom dream_gym.policies import make_policy as '
            f"_builtin\n\n\ndef make_policy():\n    return _builtin({spec!r}{arguments})\n")
    owner = inspect.getmodule(cls)
    reference = inspect.getsource(owner) if owner is not None else ""
    return text, reference


def version_name(record: Any, revisions: int) -> str:
    """A version as progress names it: ``incumbent`` (version 0), or ``revision 3 of 9 ok`` (its
    status): ``-M 10`` makes the incumbent and 9 revisions (``version 3/9`` read as 9 versions)."""
    if record.m == 0:
        return "incumbent"
    return f"revision {record.m} of {revisions - 1} {record.status}"
