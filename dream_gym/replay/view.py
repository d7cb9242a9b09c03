"""The prefix view: what a policy may see (docs/concepts/honesty.md), as copies of revealed data only.

A :class:`PrefixView` holds immutable copies: revealed nodes (observed id, parent, depth,
branch, score, validity, changes against parent and baseline, failure class, error,
diagnostics, code, cost, duration, metrics), the legal frontier, the baseline score, W, the
budget preference beta and the score coefficients, rounds and attempts so far, and the task's
name and description. No reference to the world or the simulator is reachable from it.

Scores are raw (not normalised), on the higher-is-better scale: a ``minimize`` world's scores
are negated. The world's best recorded score, its size and unrevealed nodes are never here.

The same view type is built by replay and by the online loop, so a policy runs unchanged in both.

Besides the view, this module holds what of a view the receiver of earlier ones lacks
(:func:`unsent_nodes`: an isolated policy's process is sent the new nodes only) and the text
drawing of a view's tree (:func:`render_tree`). A node's view and its fields are
:mod:`dream_gym.replay.node_view`; the stores an episode's views share (revealed by replay,
received by an isolated policy) are :mod:`dream_gym.replay.node_stores`. This module still names
theirs, where users import them from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from dream_gym.infrastructure.printable import printable
from dream_gym.replay.node_stores import ReceivedNodes, RevealedNodes
from dream_gym.replay.node_view import (
    NODE_FIELDS,
    FrozenDict,
    NodeView,
    branch_of_child,
    fields_under,
    fixed_fields,
    freeze,
    node_view,
    node_view_from_record,
    static_fields,
    thaw,
)


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
    """Everything a policy may know at one decision: copies of what has been revealed, and
    nothing else.

    Attributes:
        nodes: the revealed nodes (:class:`NodeView`), indexed by id: 0 is the root, then ids in
            reveal order.
        frontier: the ids a batch may hold, ascending (the root once when it may open a branch).
        root_slots: how many times the root may appear in the next batch.
        baseline_score: the world's baseline, the root's score unless world.json gives another
            (oriented: higher is better).
        workers, beta, beta1, beta2, max_rounds, task_name, task_description, direction,
            frontier_rule: as in the episode's :class:`~dream_gym.policy.RunContext`.
        rounds: decision rounds taken so far (k).
        attempts: nodes revealed so far (N).

    Helpers: :meth:`best`, :meth:`best_score`, :meth:`children`, :meth:`leaves`,
    :meth:`branch_nodes`, :attr:`n_branches`, :meth:`legal`; ``len(view)`` is the number of
    revealed nodes. A view is immutable, and :meth:`to_json` / :meth:`from_dict` carry it whole.
    """

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
        """Ids of the revealed nodes without a revealed child, the root included while it has none."""
        return tuple(n.id for n in self.nodes if not self.children(n.id))

    def best(self) -> NodeView:
        """The best-scoring revealed node (the root when nothing scored beats it)."""
        scored = [n for n in self.nodes if n.score is not None]
        return max(scored, key=lambda n: n.score) if scored else self.nodes[0]  # type: ignore[arg-type,return-value]

    def best_score(self) -> float | None:
        """The score of :meth:`best` (None when no node, the root included, has a valid score)."""
        return self.best().score

    def branch_nodes(self, branch: int) -> tuple[NodeView, ...]:
        """The revealed nodes of branch ``branch`` (0, 1, ... in the order branches opened), in reveal order."""
        return tuple(n for n in self.nodes if n.branch == branch)

    @property
    def n_branches(self) -> int:
        """How many branches have been opened (children of the root revealed)."""
        return 1 + max((n.branch for n in self.nodes if n.branch is not None), default=-1)

    def legal(self, node_id: int) -> bool:
        """Whether a batch may hold ``node_id`` now (it is on the frontier)."""
        return node_id in self.frontier

    # -- serialisation (isolated policies receive views as JSON) --------------------------
    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON values (the nodes as dicts): what an isolated policy receives."""
        # not dataclasses.asdict: it deep-copies the nodes' frozen mappings, which cannot be copied
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("nodes", "_children")}
        data["frontier"] = list(self.frontier)
        data["nodes"] = [
            {**{f: getattr(n, f) for f in NODE_FIELDS}, "cost": thaw(n.cost), "metrics": thaw(n.metrics)}
            for n in self.nodes
        ]
        return data

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrefixView:
        """The view :meth:`to_dict` gave ``data`` from."""
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


# A node's view and the node stores have modules of their own; the view's users import them from here.
__all__ = ["NODE_FIELDS", "FrozenDict", "NodeView", "PrefixView", "ReceivedNodes", "RevealedNodes",
           "SentNodes", "branch_of_child", "fields_under", "fixed_fields", "freeze", "node_view",
           "node_view_from_record", "render_tree", "static_fields", "thaw", "unsent_nodes"]
