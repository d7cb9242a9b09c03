"""The stores of an episode's node views, append-only, that the views of one episode share:
:class:`RevealedNodes` (replay's and the env's, built from the revealed nodes' fields) and
:class:`ReceivedNodes` (an isolated policy's episode process, built from the views its parent sends).

A view over a store (:meth:`~dream_gym.replay.view.PrefixView.lazy`,
:meth:`~dream_gym.replay.view.PrefixView.over`) builds its ``nodes`` tuple when first read, so a
step or a decision costs the nodes it adds, not every node of the episode; what of a view a
receiver lacks is :func:`~dream_gym.replay.view.unsent_nodes`. A store holds revealed nodes only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dream_gym.replay.node_view import NodeView

_new_object = object.__new__


class RevealedNodes:
    """The revealed nodes of one replay episode, in observed-id order, append-only: what the
    views of that episode share, so that a step costs the same whether or not a view is read.

    Per revealed node it holds the fields that do not depend on the reveal order (``fixed``:
    mappings of immutable values, from :func:`~dream_gym.replay.node_view.fields_under`) and the
    observed id of its parent (``parents``, -1 for the root). The :class:`NodeView` of a node is
    built the first time a view of the episode reads ``nodes``, and shared by every later view.
    Everything here is about revealed nodes only; nothing refers to the world, the replay or the
    session. A new episode starts a new object, so the views of an earlier episode keep theirs.
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
        ``start`` lacks, at the cost of those nodes alone
        (:func:`~dream_gym.replay.view.unsent_nodes`)."""
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
    lacks; :func:`~dream_gym.replay.view.unsent_nodes`). Append-only, like :class:`RevealedNodes`:
    the views built over it (:meth:`~dream_gym.replay.view.PrefixView.over`) share it and build
    their ``nodes`` tuple when first read, so a decision costs the nodes received, not every node
    of the episode."""

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

