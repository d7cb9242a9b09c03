"""A revealed node's view (:class:`NodeView`) and the fields it is built from: copies of one recorded
node only, immutable (:class:`FrozenDict`, :func:`freeze`, tuples).

The fields that do not depend on the reveal order are computed once per world node
(:func:`static_fields`, :func:`fixed_fields`, :func:`fields_under`); :func:`node_view` adds the three
that do (observed id, parent, branch: :func:`branch_of_child`). A node's view holds nothing of the
world but that node's copies. The prefix view that gathers them is :mod:`dream_gym.replay.view`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any


class FrozenDict(Mapping[str, Any]):
    """A read-only mapping that pickles and copies (``types.MappingProxyType`` does neither,
    and Gymnasium's async vector envs and SB3's vector envs pickle or deep-copy every info).

    Immutable, so ``copy`` and ``deepcopy`` return the object itself.
    """

    __slots__ = ("_data",)
    _data: dict[str, Any]

    def __init__(self, data: Mapping[str, Any] = ()) -> None:  # type: ignore[assignment]
        object.__setattr__(self, "_data", dict(data))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._data,))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self


def freeze(value: Any) -> Any:
    """A deep, immutable copy of JSON-like data (dicts become :class:`FrozenDict`, lists tuples)."""
    if value is None or isinstance(value, (str, int, float)):
        return value  # the common case first: ABC isinstance checks are slow on the hot path
    if isinstance(value, Mapping):
        return FrozenDict({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Plain JSON-serialisable copy of frozen data."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class NodeView:
    """One revealed node, as a policy sees it.

    Attributes:
        id: its id (0: the root; then reveal order). parent: its parent's id (None for the root).
        depth: 0 for the root, 1 for a branch head; also its position in its branch.
        branch: 0, 1, 2, ... in the order branches were opened; None for the root.
        score: oriented (higher is better); None when the attempt gave no valid score. valid: it did.
        delta_parent, delta_baseline: the score minus the parent's, and minus the world's baseline
            (the root's score unless world.json gives another).
        fail_class: ``"repairable"`` (syntax, shape, resource, naming or compile errors a retry can
            fix), ``"hard"`` (an infeasible answer, or a valid attempt on a branch that stopped
            improving) or None.
        error: the evaluator's error text. diagnostics: what the evaluator measured or reported.
        code: the candidate program. cost: tokens, seconds, USD of the attempt (a mapping).
        duration_s: how long it took. metrics: other numbers the evaluator recorded (a mapping).
    """

    id: int
    parent: int | None
    depth: int
    branch: int | None  # 0, 1, 2, ... in the order branches were opened; None for the root
    score: float | None  # oriented raw score; None when the attempt has no valid score
    valid: bool
    delta_parent: float | None
    delta_baseline: float | None
    fail_class: str | None = None
    error: str | None = None
    diagnostics: str | None = None
    code: str | None = None
    cost: Any = None
    duration_s: float | None = None
    metrics: Any = None

    # Immutable (its containers are FrozenDicts and tuples): a copy is the node itself, so SB3's
    # per-step deepcopy of infos costs nothing here. Pickling is the dataclass default.
    def __copy__(self) -> NodeView:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> NodeView:
        return self


NODE_FIELDS = tuple(f.name for f in fields(NodeView))


def branch_of_child(parent: NodeView | None, opened: int) -> tuple[int | None, int]:
    """The branch of a node revealed under ``parent``, and the number of branches opened after
    it: a root child opens branch ``opened`` (branches are numbered in the order they open)."""
    if parent is None:
        return None, opened
    if parent.id == 0:
        return opened, opened + 1
    return parent.branch, opened


def static_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a node's view copied from the recorded node alone (all values immutable)."""
    return {
        "fail_class": _opt_str(record.get("fail_class")),
        "error": _opt_str(record.get("error")),
        "diagnostics": _opt_str(record.get("diagnostics")),
        "code": _opt_str(record.get("code")),
        "cost": freeze(record.get("cost")),
        "duration_s": _opt_float(record.get("duration_s")),
        "metrics": freeze(record.get("metrics")),
    }


def fixed_fields(
    record: Mapping[str, Any],
    *,
    parent: NodeView | None,
    score: float | None,
    baseline: float,
    static: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Every field of a node's view that does not depend on the reveal order: all but ``id``,
    ``parent`` and ``branch``. (Depth and the change against the parent are the recorded tree's:
    a node is revealed only after its parent.) Replay computes them once per world node and
    reuses them in every episode; ``static`` is :func:`static_fields` of the record when cached."""
    parent_score = parent.score if parent is not None else None
    return {
        **(static if static is not None else static_fields(record)),
        "depth": 0 if parent is None else parent.depth + 1,
        "score": score,
        "valid": score is not None,
        "delta_parent": None if score is None or parent_score is None else score - parent_score,
        "delta_baseline": None if score is None else score - baseline,
    }


def node_view(fixed: Mapping[str, Any], obs_id: int, parent: int | None, branch: int | None) -> NodeView:
    """A node's view from its :func:`fixed_fields` and the three reveal-order fields.

    One node view is built per reveal, on replay's hot path: the instance dict is filled directly
    instead of paying the frozen dataclass's per-field ``__setattr__`` checks.
    """
    view = NodeView.__new__(NodeView)
    fields_ = view.__dict__
    fields_.update(fixed)
    fields_["id"] = obs_id
    fields_["parent"] = parent
    fields_["branch"] = branch
    return view


def node_view_from_record(
    record: Mapping[str, Any],
    *,
    obs_id: int,
    parent: NodeView | None,
    branch: int | None,
    score: float | None,
    baseline: float,
    static: Mapping[str, Any] | None = None,
) -> NodeView:
    """Copy a recorded node into its view (strings are immutable; containers are frozen copies).

    ``static`` is :func:`static_fields` of the record when the caller caches it.
    """
    fixed = fixed_fields(record, parent=parent, score=score, baseline=baseline, static=static)
    return node_view(fixed, obs_id=obs_id, parent=None if parent is None else parent.id, branch=branch)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _opt_float(value: Any) -> float | None:
    """An optional number of a record as a float; None where it is none, or an int no float holds
    (``10**400``, valid JSON: the world's oddity, not the policy's error)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return None
    return None


def fields_under(
    record: Mapping[str, Any], parent: Mapping[str, Any] | None, score: float | None, baseline: float
) -> dict[str, Any]:
    """:func:`fixed_fields` of a node from its parent's fixed fields (``parent``: the mapping this
    function returned for the parent, None for the root), as replay caches them per world node."""
    parent_score = parent["score"] if parent is not None else None
    return {
        **static_fields(record),
        "depth": 0 if parent is None else parent["depth"] + 1,
        "score": score,
        "valid": score is not None,
        "delta_parent": None if score is None or parent_score is None else score - parent_score,
        "delta_baseline": None if score is None else score - baseline,
    }

