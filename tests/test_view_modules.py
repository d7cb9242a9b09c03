"""A node's view and the node stores moved out of dream_gym.replay.view into modules of their own: the
view's module still names them, and pickles made when it held them (infos, views sent to policy
processes) still load."""

from __future__ import annotations

import pickle

import pytest

from dream_gym.replay import node_stores, node_view, view

OLD_PATH = b"dream_gym.replay.view\n"


def _as_if_pickled_before_the_move(data: bytes, module: str) -> bytes:
    """A protocol-2 pickle names a class by ``module\\nname\\n``: the same pickle, made when the
    class lived in dream_gym.replay.view."""
    path = f"{module}\n".encode()
    assert path in data  # the class is pickled by its module's path (else the rewrite proves nothing)
    return data.replace(path, OLD_PATH)


def _node() -> view.NodeView:
    fixed = node_view.fields_under({"error": "boom", "cost": {"usd": [0.5]}, "metrics": {"acc": 0.9}},
                                   None, 1.0, 0.0)
    return node_view.node_view(fixed, 0, None, None)


def test_the_view_module_names_what_moved_out_of_it() -> None:
    for name in view.__all__:
        named = getattr(view, name)
        moved = [getattr(module, name) for module in (node_view, node_stores) if hasattr(module, name)]
        if moved:
            assert all(thing is named for thing in moved), name
        else:
            assert named.__module__ == view.__name__, name
    assert {"NodeView", "FrozenDict", "RevealedNodes", "ReceivedNodes", "unsent_nodes"} <= set(view.__all__)


@pytest.mark.parametrize("make", [
    _node,
    lambda: view.FrozenDict({"a": (1, view.FrozenDict({"b": 2}))}),
    lambda: view.ReceivedNodes([_node()]),
])
def test_a_pickle_naming_the_view_module_still_loads(make) -> None:  # type: ignore[no-untyped-def]
    original = make()
    data = pickle.dumps(original, protocol=2)
    loaded = pickle.loads(_as_if_pickled_before_the_move(data, type(original).__module__))
    assert type(loaded) is type(original) and type(loaded).__module__ != view.__name__
    if isinstance(original, view.ReceivedNodes):
        assert loaded.views(1) == original.views(1)
    else:
        assert loaded == original


def test_control_a_pickle_naming_a_module_without_the_class_fails() -> None:
    data = pickle.dumps(_node(), protocol=2)
    with pytest.raises(AttributeError, match="NodeView"):
        pickle.loads(data.replace(b"dream_gym.replay.node_view\n", b"dream_gym.replay.score\n"))
