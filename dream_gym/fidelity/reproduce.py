"""Does replay give back the run it recorded?

The recording policy, replayed on its own world with the settings it ran at (W, beta, the
frontier rule, the round limit it was shown, its seed), must reveal the recorded tree exactly:
the same nodes, under the same parents, in the order they were recorded. Replay runs in request
mode (docs/concepts/coverage.md), whose frontier is the online run's, so the policy chooses from
what it chose from online.

:func:`reproduce` checks that; :func:`decisions_match` checks the weaker property a world
recorded before grow stored a round's nodes in slot order still has: shown the record as the run
stored it, round by round (the view the policy saw online), the policy makes the recorded
choices. A world that passes the second check and not the first was recorded faithfully but
stored its rounds in the order the workers finished, so replay, which reveals a round's nodes in
the batch's order, numbers them differently and the policy's later choices drift.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dream_gym.policy import Policy, RunContext, batch_from
from dream_gym.replay.mechanics import IllegalBatchError
from dream_gym.replay.settings import ReplaySettings
from dream_gym.world.tree import World

GROW_ROUNDS = 10  # dream-gym grow's --rounds default (K1), for worlds that did not record theirs


@dataclass(frozen=True)
class RecordedSetting:
    """What a world says its recording policy ran with."""

    policy: str
    params: dict[str, Any]
    seed: int
    settings: ReplaySettings  # W, beta, frontier rule, the round limit shown to the policy


@dataclass(frozen=True)
class Reproduction:
    """The outcome of :func:`reproduce`: ``difference`` is None when the replay revealed the
    recorded tree exactly, else the first node (line of the node file) where it did not, and
    ``reason`` says how."""

    world: str
    nodes: int  # recorded, root included
    revealed: int  # revealed by the replay, root included
    difference: int | None
    reason: str | None

    @property
    def exact(self) -> bool:
        return self.difference is None


def recorded_setting(world: World) -> RecordedSetting:
    """The recording policy of ``world`` and the settings it ran at, from world.json (its
    ``policy``, ``policy_params``, ``seed``, ``beta``, ``workers``, ``frontier`` and ``rounds``;
    for grow worlds written before ``rounds`` and ``policy_params`` were recorded, from the
    command line they record). ValueError when the world names no policy."""
    meta = world.meta
    policy = meta.get("policy")
    if not isinstance(policy, str) or not policy:
        raise ValueError(f"world {world.id} does not say which policy recorded it")
    grown = str(meta.get("source") or "").startswith("dream-gym grow")
    options = _grow_options(str(meta.get("command") or "")) if grown else {}
    params = meta.get("policy_params")
    if not isinstance(params, dict):
        params = options.get("params", {})
    rounds = meta.get("rounds", options.get("rounds", GROW_ROUNDS)) if grown else None
    settings = ReplaySettings(world.workers, float(meta.get("beta", 0.5)), frontier=world.frontier_rule,
                              max_rounds=None if rounds is None else int(rounds), requests=True)
    return RecordedSetting(policy, dict(params), int(meta.get("seed") or 0), settings)


def _grow_options(command: str) -> dict[str, Any]:
    """``--rounds`` and the ``--policy-arg`` pairs of a recorded ``dream-gym grow`` command."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return {}
    found: dict[str, Any] = {}
    pairs = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--policy-arg"]
    if pairs:
        found["params"] = {key: _number(value) for key, _, value in (pair.partition("=") for pair in pairs)}
    rounds = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--rounds"]
    if rounds and rounds[-1].isdigit():
        found["rounds"] = int(rounds[-1])
    return found


def _number(text: str) -> Any:
    """A ``--policy-arg`` value as grow parsed it: an int, else a float, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def reproduce(world: World, policy: Policy, *, seed: int, settings: ReplaySettings) -> Reproduction:
    """Replay ``policy`` on ``world`` in request mode and compare what it reveals with the record.

    ``settings`` are the run's (``requests`` is switched on here); ``seed`` is the run's seed."""
    from dream_gym.replay.session import ReplaySession

    session = ReplaySession(world, _requests(settings))
    view = session.view()
    policy.reset(RunContext.from_view(view, seed=seed))
    try:
        while not session.done:
            session.step(batch_from(policy.act(view)))
            view = session.view()
    except IllegalBatchError as exc:
        return _differs(world, session.replay.order, f"the policy chose a batch replay refuses ({exc})")
    return _differs(world, session.replay.order, None)


def _requests(settings: ReplaySettings) -> ReplaySettings:
    import dataclasses

    return dataclasses.replace(settings, requests=True)


def _differs(world: World, order: list[int], error: str | None) -> Reproduction:
    for position, index in enumerate(order):
        if index != position:
            record = world.records[index]
            reason = (f"replay revealed {record['id']} (line {index + 1} of the node file) as node {position}; "
                      f"the record has {world.records[position]['id']} there")
            return Reproduction(world.id, world.size, len(order), position, reason)
    if error is not None:
        return Reproduction(world.id, world.size, len(order), len(order), error)
    if len(order) < world.size:
        reason = (f"replay stopped after {len(order)} of {world.size} nodes; the record goes on with "
                  f"{world.records[len(order)]['id']}")
        return Reproduction(world.id, world.size, len(order), len(order), reason)
    return Reproduction(world.id, world.size, len(order), None, None)


def stored_in_slot_order(world: World) -> bool:
    """Whether every round's nodes are stored in the order of their worker slots (``worker``)."""
    last: dict[int, int] = {}
    for record in world.records[1:]:
        round_no, slot = record.get("round"), record.get("worker")
        if not isinstance(round_no, int) or not isinstance(slot, int):
            return False
        if slot < last.get(round_no, -1):
            return False
        last[round_no] = slot
    return True


def decisions_match(world: World, policy: Policy, *, seed: int, settings: ReplaySettings) -> str | None:
    """Show ``policy`` the record round by round as the run stored it (the online view of the
    nodes of the earlier rounds) and compare each batch with the parents the record gives that
    round's slots. None when every decision matches, else the first mismatch."""
    from dream_gym.online.real_tree import tree_view

    records = [dict(r) for r in world.records]
    meta: Mapping[str, Any] = world.meta
    index_of = {r["id"]: i for i, r in enumerate(records)}
    rounds: dict[int, list[int]] = {}
    for index, record in enumerate(records[1:], 1):
        rounds.setdefault(int(record.get("round") or 0), []).append(index)
    online = _requests(settings)
    view = tree_view(records[:1], dict(meta), online, rounds=0)
    policy.reset(RunContext.from_view(view, seed=seed))
    for round_no in sorted(rounds):
        members = rounds[round_no]
        recorded = [index_of[records[i]["parent"]] for i in sorted(members, key=lambda i: records[i].get("worker", 0))]
        chosen = batch_from(policy.act(view))
        if chosen[: len(recorded)] != recorded:
            return f"round {round_no}: the policy chose parents {chosen}, the record {recorded}"
        view = tree_view(records[: max(members) + 1], dict(meta), online, rounds=round_no, known=view.nodes)
    return None


__all__ = ["RecordedSetting", "Reproduction", "decisions_match", "recorded_setting", "reproduce",
           "stored_in_slot_order"]
