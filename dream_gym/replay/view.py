"""The prefix view: what a policy may see (docs/concepts/honesty.md), as copies of revealed data only.

A :class:`PrefixView` holds immutable copies: revealed nodes (observed id, parent, depth,
branch, score, validity, changes against parent and baseline, failure class, error,
diagnostics, code, cost, duration, metrics), the legal frontier, the baseline score, W, the
budget preference beta and the score coefficients, rounds and attempts so far, and the task's
name and description. No reference to the world or the simulator is reachable from it.

Scores are raw (not normalised), on the higher-is-better scale: a ``minimize`` world's scores
are negated. The world's best recorded score, its size and unrevealed nodes are never here.

The same view type is built by replay and by the online loop, so a policy runs unchanged in both.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from dream_gym.infrastructure.printable import printable


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
    """One revealed node. ``position`` in its branch equals ``depth`` (the branch head has 1)."""

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
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
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


class RevealedNodes:
    """The revealed nodes of one replay episode, in observed-id order, append-only: what the
    views of that episode share, so that a step costs the same whether or not a view is read.

    Per revealed node it holds the fields that do not depend on the reveal order (``fixed``:
    mappings of immutable values, from :func:`fields_under`) and the observed id of its parent
    (``parents``, -1 for the root). The :class:`NodeView` of a node is built the first time a
    view of the episode reads ``nodes``, and shared by every later view. Everything here is about
    revealed nodes only; nothing refers to the world, the replay or the session. A new episode
    starts a new object, so the views of an earlier episode keep theirs.
    """

    __slots__ = ("fixed", "parents", "_views", "_branches")

    def __init__(self) -> None:
        self.fixed: list[Mapping[str, Any]] = []
        self.parents: list[int] = []
        self._views: list[NodeView] = []
        self._branches = 0  # branches opened by the node views built so far

    def __len__(self) -> int:
        return len(self.parents)

    def view(self, obs_id: int) -> NodeView:
        """The view of one revealed node."""
        if obs_id >= len(self._views):
            self._build(obs_id + 1)
        return self._views[obs_id]

    def views(self, count: int) -> tuple[NodeView, ...]:
        """The views of the first ``count`` revealed nodes."""
        if count > len(self._views):
            self._build(count)
        built = self._views
        return tuple(built) if count == len(built) else tuple(built[:count])

    def views_from(self, start: int, count: int) -> tuple[NodeView, ...]:
        """The views of revealed nodes ``start`` to ``count - 1``: what a reader holding the first
        ``start`` lacks, at the cost of those nodes alone (:func:`unsent_nodes`)."""
        if count > len(self._views):
            self._build(count)
        return tuple(self._views[start:count])

    def _build(self, count: int) -> None:
        built, fixed, parents = self._views, self.fixed, self.parents
        if count > len(parents):
            raise IndexError(f"{count} node views asked for, {len(parents)} nodes revealed")
        new = _new_object
        for obs_id in range(len(built), count):
            view = new(NodeView)
            fields_ = view.__dict__
            fields_.update(fixed[obs_id])
            fields_["id"] = obs_id
            parent = parents[obs_id]
            if parent < 0:
                fields_["parent"] = fields_["branch"] = None
            else:
                fields_["parent"] = parent
                if parent == 0:
                    fields_["branch"] = self._branches
                    self._branches += 1
                else:
                    fields_["branch"] = built[parent].branch
            built.append(view)


class ReceivedNodes:
    """Node views received from elsewhere, in observed-id order: the store of the views an
    isolated policy's episode process rebuilds from what its parent sends (only the nodes it
    lacks; :func:`unsent_nodes`). Append-only, like :class:`RevealedNodes`: the views built over
    it (:meth:`PrefixView.over`) share it and build their ``nodes`` tuple when first read, so a
    decision costs the nodes received, not every node of the episode."""

    __slots__ = ("_views",)

    def __init__(self, views: Sequence[NodeView] = ()) -> None:
        self._views: list[NodeView] = list(views)

    def __len__(self) -> int:
        return len(self._views)

    def views(self, count: int) -> tuple[NodeView, ...]:
        """The first ``count`` views."""
        built = self._views
        if count > len(built):
            raise IndexError(f"{count} node views asked for, {len(built)} received")
        return tuple(built) if count == len(built) else tuple(built[:count])

    def views_from(self, start: int, count: int) -> tuple[NodeView, ...]:
        """Views ``start`` to ``count - 1``."""
        return tuple(self._views[start:count])

    def extended(self, known: int, new: Sequence[NodeView]) -> ReceivedNodes:
        """The store of this one's first ``known`` views followed by ``new``: this store, grown,
        when it holds exactly ``known`` (the usual next decision); a new store otherwise, so
        that no view built over this one ever changes. ValueError when ``known`` is more than
        were received."""
        held = len(self._views)
        if not 0 <= known <= held:
            raise ValueError(f"view refers to {known} known nodes, only {held} received")
        store = self if known == held else ReceivedNodes(self._views[:known])
        store._views.extend(new)
        return store


class SentNodes(NamedTuple):
    """What the receiver of an episode's views holds after one was sent (:func:`unsent_nodes`):
    the store its nodes came from (a :class:`RevealedNodes`, a :class:`ReceivedNodes`, or the
    ``nodes`` tuple of a view built whole) and how many of them it holds."""

    store: Any
    held: int


def unsent_nodes(view: PrefixView, sent: SentNodes | None) -> tuple[int, tuple[NodeView, ...], SentNodes]:
    """The nodes of ``view`` that a receiver holding ``sent`` (None: nothing) lacks, as
    ``(known, new nodes, what it holds once they are sent)``: ``known`` of its nodes are the
    view's first ones, and ``new`` the rest.

    For the views of one episode of replay or of the env (their nodes live in one append-only
    store) this costs the new nodes alone, whatever the episode's length; a view built whole
    (online, or unpickled) is compared with the tuple sent before by the identity of its first
    and last node."""
    store, count = view._node_source()
    if not isinstance(store, tuple):
        known = sent.held if sent is not None and sent.store is store and sent.held <= count else 0
        return known, store.views_from(known, count), SentNodes(store, count)
    known = 0
    if sent is not None and isinstance(sent.store, tuple) and 0 < sent.held <= count and (
            store[0] is sent.store[0] and store[sent.held - 1] is sent.store[-1]):
        known = sent.held
    return known, store[known:], SentNodes(store, count)


_new_object = object.__new__
# The entries of a lazily built view's "_lazy" tuple (see PrefixView.lazy).
_LAZY_FIELDS = ("frontier", "root_slots", "rounds", "attempts")


@dataclass(frozen=True)
class PrefixView:
    """Everything a policy may know at one decision."""

    nodes: tuple[NodeView, ...]
    frontier: tuple[int, ...]  # legal ids, ascending; the root (0) once when it may open a branch
    root_slots: int  # how many times the root may appear in the next batch
    baseline_score: float
    workers: int
    beta: float
    beta1: float
    beta2: float
    rounds: int
    attempts: int
    task_name: str
    task_description: str
    direction: str
    frontier_rule: str
    max_rounds: int | None = None
    _children: tuple[tuple[int, ...], ...] = field(default=(), repr=False, compare=False)
    # Views that replay builds (PrefixView.lazy) carry their fields in an instance entry "_lazy"
    # (not a field) until one is read; ``nodes`` is built from the episode's RevealedNodes.

    @classmethod
    def build(cls, constants: Mapping[str, Any], **fields: Any) -> PrefixView:
        """Same as the constructor (``constants`` and ``fields`` together name every field),
        without the frozen dataclass's per-field ``__setattr__`` checks: replay builds a view
        every step, and this is 3x faster."""
        view = cls.__new__(cls)
        view.__dict__.update(constants, **fields, _children=())
        return view

    # Immutable (the lazily filled fields, ``nodes`` and ``_children`` are derived from what the
    # view holds, which never changes): a copy is the view itself, so SB3's per-step deepcopy of
    # infos does not copy every revealed node. Pickling (async vector envs send infos between
    # processes) sends the filled-in fields (__getstate__).
    def __copy__(self) -> PrefixView:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> PrefixView:
        return self

    @classmethod
    def lazy(cls, revealed: RevealedNodes, count: int, frontier: Sequence[int], root_slots: int, rounds: int,
             attempts: int, constants: Mapping[str, Any]) -> PrefixView:
        """A view whose fields are filled on first use: replay builds one every step, most are
        never read. ``revealed``: the episode's nodes (the first ``count`` are this view's);
        ``frontier``: the legal ids, in order (an iterable nobody changes while the view holds
        it: a list, or the env's ``info["frontier"]`` dict); ``constants``: the other
        fields (an immutable mapping). Reading any field fills them all, except ``nodes``, built
        (once) when read."""
        view = _new_object(cls)
        view.__dict__["_lazy"] = (revealed, count, frontier, root_slots, rounds, attempts, constants)
        return view

    @classmethod
    def over(cls, nodes: RevealedNodes | ReceivedNodes, count: int, fields: Mapping[str, Any]) -> PrefixView:
        """A view of the first ``count`` nodes of the store ``nodes`` with the other ``fields``
        (every field but ``nodes``, ``frontier`` a tuple): its ``nodes`` tuple is built when
        first read, so a view nobody reads costs nothing per node."""
        view = _new_object(cls)
        fields_ = view.__dict__
        fields_.update(fields)
        fields_.setdefault("_children", ())
        fields_["_nodes_of"] = (nodes, count)
        return view

    def _node_source(self) -> tuple[Any, int]:
        """(the store of this view's nodes, how many are its own): the episode's
        :class:`RevealedNodes` or :class:`ReceivedNodes`, or for a view built whole its
        ``nodes`` tuple."""
        fields_ = self.__dict__
        lazy = fields_.get("_lazy")
        if lazy is not None:
            return lazy[0], lazy[1]
        source = fields_.get("_nodes_of")
        if source is not None:
            return source[0], source[1]
        nodes = self.nodes
        return nodes, len(nodes)

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes missing from the instance: the fields of a lazily built
        # view, filled on first use, and its ``nodes``, built from the episode's revealed nodes.
        fields_ = self.__dict__
        lazy = fields_.pop("_lazy", None)
        if lazy is not None:
            revealed, count, frontier, root_slots, rounds, attempts, constants = lazy
            fields_.update(constants)
            fields_["frontier"] = tuple(frontier)
            fields_["root_slots"] = root_slots
            fields_["rounds"] = rounds
            fields_["attempts"] = attempts
            fields_.setdefault("_children", ())
            fields_["_nodes_of"] = (revealed, count)
        if name == "nodes":
            source = fields_.get("_nodes_of")  # kept: where the nodes came from (_node_source)
            if source is not None:
                nodes = source[0].views(source[1])
                fields_["nodes"] = nodes
                return nodes
        if name in fields_:
            return fields_[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __getstate__(self) -> dict[str, Any]:
        # Pickled with every field filled in: the episode's other nodes stay behind.
        self.nodes  # noqa: B018 - fills the fields
        return {k: v for k, v in self.__dict__.items() if k != "_nodes_of"}

    # -- convenience ------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    def children(self, node_id: int) -> tuple[int, ...]:
        """Revealed children of a node, in reveal order."""
        if not self._children:
            object.__setattr__(self, "_children", self._build_children())
        return self._children[node_id]

    def _build_children(self) -> tuple[tuple[int, ...], ...]:
        lists: list[list[int]] = [[] for _ in self.nodes]
        for node in self.nodes[1:]:
            assert node.parent is not None
            lists[node.parent].append(node.id)
        return tuple(tuple(c) for c in lists)

    def leaves(self) -> tuple[int, ...]:
        return tuple(n.id for n in self.nodes if not self.children(n.id))

    def best(self) -> NodeView:
        """The best-scoring revealed node (the root when nothing scored beats it)."""
        scored = [n for n in self.nodes if n.score is not None]
        return max(scored, key=lambda n: n.score) if scored else self.nodes[0]  # type: ignore[arg-type,return-value]

    def best_score(self) -> float | None:
        return self.best().score

    def branch_nodes(self, branch: int) -> tuple[NodeView, ...]:
        return tuple(n for n in self.nodes if n.branch == branch)

    @property
    def n_branches(self) -> int:
        return 1 + max((n.branch for n in self.nodes if n.branch is not None), default=-1)

    def legal(self, node_id: int) -> bool:
        return node_id in self.frontier

    # -- serialisation (isolated policies receive views as JSON) --------------------------
    def to_dict(self) -> dict[str, Any]:
        # not dataclasses.asdict: it deep-copies the nodes' frozen mappings, which cannot be copied
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("nodes", "_children")}
        data["frontier"] = list(self.frontier)
        data["nodes"] = [
            {**{f: getattr(n, f) for f in NODE_FIELDS}, "cost": thaw(n.cost), "metrics": thaw(n.metrics)}
            for n in self.nodes
        ]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrefixView:
        nodes = tuple(
            NodeView(**{**n, "cost": freeze(n.get("cost")), "metrics": freeze(n.get("metrics"))})
            for n in data["nodes"]
        )
        fields = {k: v for k, v in data.items() if k != "nodes"}
        fields["frontier"] = tuple(fields["frontier"])
        return cls(nodes=nodes, **fields)


# Fields with defaults have class attributes, which a lazily built view's unfilled fields would
# show instead of reaching __getattr__; the defaults stay in the constructor.
del PrefixView.max_rounds
del PrefixView._children


def render_tree(view: PrefixView) -> str:
    """Text drawing of a revealed tree: ``*`` marks the frontier, scores are raw."""
    lines = [
        f"round {view.rounds}  attempts {view.attempts}  W={view.workers}  "
        f"baseline {view.baseline_score:.6g}  frontier {list(view.frontier)}"
    ]
    legal = set(view.frontier)
    stack: list[tuple[int, str, bool]] = [(0, "", True)]
    while stack:  # iterative: recorded chains can be thousands of nodes deep
        node_id, prefix, last = stack.pop()
        node = view.nodes[node_id]
        score = "invalid" if node.score is None else f"{node.score:.6g}"
        mark = "*" if node_id in legal else " "
        elbow = "" if node.parent is None else ("└─ " if last else "├─ ")
        error = f"  [{printable(node.error, 40)}]" if node.error else ""  # the world's text: escaped
        lines.append(f"{prefix}{elbow}{mark}{node_id}: {score}{error}")
        children = view.children(node_id)
        child_prefix = prefix if node.parent is None else prefix + ("   " if last else "│  ")
        for i in range(len(children) - 1, -1, -1):
            stack.append((children[i], child_prefix, i == len(children) - 1))
    return "\n".join(lines)
