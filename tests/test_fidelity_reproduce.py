"""Replay gives back the run it recorded: the recording policy, replayed on its own world with
the run's W, beta, seed and frontier, reveals the recorded tree node for node.

Fresh runs (``dream-gym grow`` with W = 4 job processes, OpenEvolve through ``dream-gym deploy``,
ShinkaEvolve and SkyDiscover through its API in the test's process) are made here; the shipped
worlds, recorded before grow stored a round's nodes in slot order, are checked for what they can
still show: that they record their policy's choices faithfully, and that their storage order is
why replay does not give them back.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from once import built_once

from dream_gym import load_world
from dream_gym.fidelity import decisions_match, recorded_setting, reproduce, stored_in_slot_order
from dream_gym.online.loop import in_slot_order
from dream_gym.policies import POLICIES, make_policy
from dream_gym.world.tree import World, build_world

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p.parent for p in (REPO / "recorded_worlds").glob("*/*/world.json"))
TIMING_KEYS = {"duration_s", "eval_s", "cost", "timestamp"}  # what a second run may change


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "dream_gym", *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def reproduction(world: World) -> Any:
    setting = recorded_setting(world)
    return reproduce(world, make_policy(setting.policy, **setting.params), seed=setting.seed,
                     settings=setting.settings)


def decisions(world: World) -> str | None:
    setting = recorded_setting(world)
    return decisions_match(world, make_policy(setting.policy, **setting.params), seed=setting.seed,
                           settings=setting.settings)


def without_timings(record: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in record.items() if k not in TIMING_KEYS}
    for system in ("openevolve", "shinkaevolve", "skydiscover"):
        if isinstance(kept.get(system), dict):
            kept[system] = {k: v for k, v in kept[system].items() if k not in TIMING_KEYS}
    return kept


# -- the slot order --------------------------------------------------------------------------------
def test_a_rounds_results_come_out_in_slot_order_as_soon_as_they_can() -> None:
    finished_order = [(2, "c"), (0, "a"), (3, "d"), (1, "b")]  # the order the workers finished
    taken: list[int] = []

    def finishing() -> Any:
        for slot, result in finished_order:
            taken.append(slot)
            yield slot, result

    released = []
    for result in in_slot_order(finishing()):
        released.append((result, list(taken)))
    assert [r for r, _ in released] == ["a", "b", "c", "d"]
    # "a" goes out as soon as slot 0 finished (before slot 3 did); "b", "c", "d" once slot 1 did
    assert released[0] == ("a", [2, 0])
    assert released[1:] == [("b", [2, 0, 3, 1]), ("c", [2, 0, 3, 1]), ("d", [2, 0, 3, 1])]
    # a slot that never reports (an attempt that raised is still reported): the rest, in order
    assert list(in_slot_order(iter([(2, "c"), (1, "b")]))) == ["b", "c"]


# -- the shipped worlds ----------------------------------------------------------------------------
def _shipped_with_builtin_policy() -> list[Path]:
    return [p for p in SHIPPED if json.loads((p / "world.json").read_text()).get("policy") in POLICIES]


def test_shipped_worlds_that_do_not_reproduce_were_stored_in_completion_order() -> None:
    """The shipped worlds were grown before a round's nodes were stored in slot order: replay,
    which reveals a round's nodes in the batch's order, numbers them differently, and the
    policy's later choices drift. Every one that does not reproduce was stored out of slot order
    in a round whose nodes have different parents (the only disorder replay can see: children of
    one parent are revealed in stored order either way)."""
    folders = _shipped_with_builtin_policy()
    assert len(folders) >= 50  # recorded-v0 and recorded-v1, every policy a built-in
    drifting, visible = set(), set()
    for folder in folders:
        world = load_world(folder)
        if not reproduction(world).exact:
            drifting.add(folder.name)
        if _parents_out_of_slot_order(world):
            visible.add(folder.name)
    assert drifting == visible
    assert len(drifting) >= len(folders) - 1  # what docs/results/fidelity.md says: all but cp26-greedy-s0


def _parents_out_of_slot_order(world: World) -> bool:
    """Whether some round stores its nodes' parents in another order than their slots give."""
    rounds: dict[int, list[tuple[int, str]]] = {}
    for record in world.records[1:]:
        rounds.setdefault(record["round"], []).append((record["worker"], record["parent"]))
    return any([parent for _, parent in members] != [parent for _, parent in sorted(members)]
               for members in rounds.values())


@pytest.mark.slow
def test_shipped_worlds_record_their_policys_choices() -> None:
    """Shown the record round by round as it was stored (the view the policy had online), every
    shipped world's policy chooses exactly the parents the record gives each slot."""
    mismatches = {folder.name: found for folder in _shipped_with_builtin_policy()
                  if (found := decisions(load_world(folder))) is not None}
    assert mismatches == {}


# -- fresh runs ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def grown(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Worlds grown by ``dream-gym grow`` with W = 4 job processes (workers finish in any order),
    once per test session (its tests only read them)."""
    runs = {
        "greedy-a": ["--task", "circle-packing-26", "--policy", "greedy", "--seed", "3"],
        "greedy-b": ["--task", "circle-packing-26", "--policy", "greedy", "--seed", "3"],
        "random": ["--task", "sum-difference", "--policy", "random", "--policy-arg", "p_stop=0", "--seed", "1"],
        "ucb-any": ["--task", "circle-packing-26", "--policy", "ucb", "--frontier", "any", "--seed", "2"],
    }

    def grow(root: Path) -> None:
        for name, args in runs.items():
            cli("grow", *args, "-W", "4", "--rounds", "12", "--max-attempts", "32", "--out", str(root / name), "--quiet")

    root = built_once(tmp_path_factory, "fidelity-grown", grow)
    return {name: root / name for name in runs}


@pytest.mark.slow
def test_replaying_the_recording_policy_gives_a_grown_run_back(grown: dict[str, Path]) -> None:
    for name, folder in grown.items():
        world = load_world(folder)
        assert world.size > 8 and stored_in_slot_order(world), name
        assert reproduction(world).exact, (name, reproduction(world).reason)
        assert decisions(world) is None
    meta = load_world(grown["random"]).meta
    assert meta["rounds"] == 12 and meta["policy_params"] == {"p_stop": 0}  # what replay needs, recorded


@pytest.mark.slow
def test_one_seed_grows_one_world(grown: dict[str, Path]) -> None:
    a, b = (load_world(grown[name]) for name in ("greedy-a", "greedy-b"))
    assert [without_timings(r) for r in a.records] == [without_timings(r) for r in b.records]
    assert a.size == b.size > 8


@pytest.mark.slow
def test_a_reordered_or_falsified_record_is_told_apart(grown: dict[str, Path]) -> None:
    """The attacks: a round stored in the order its workers finished (two nodes of different
    parents swapped) no longer reproduces, though every choice is still the record's; a record
    whose parent was changed fails both checks. Control: the world as grown passes both."""
    world = load_world(grown["ucb-any"])
    assert reproduction(world).exact and decisions(world) is None
    records = [dict(r) for r in world.records]
    by_round: dict[int, list[int]] = {}
    for index, record in enumerate(records[1:], 1):
        by_round.setdefault(record["round"], []).append(index)
    first, second = next((i, j) for members in by_round.values() for i in members for j in members
                         if i < j and records[i]["parent"] != records[j]["parent"]
                         and records[j]["parent"] != records[i]["id"])
    swapped = list(records)
    swapped[first], swapped[second] = swapped[second], swapped[first]
    reordered = build_world(world.meta, swapped)
    found = reproduction(reordered)
    assert not found.exact and found.difference == first and "the record has" in (found.reason or "")
    assert decisions(reordered) is None and not stored_in_slot_order(reordered)

    last = max(by_round)
    falsified = [dict(r) for r in records]
    target = by_round[last][0]
    falsified[target]["parent"] = next(r["id"] for r in records[: by_round[last][0]]
                                       if r["id"] != records[target]["parent"])
    forged = build_world(world.meta, falsified)
    assert not reproduction(forged).exact
    assert (decisions(forged) or "").startswith(f"round {last}:")


@pytest.mark.slow
def test_an_openevolve_run_through_the_bridge_repeats_and_replays_back(tmp_path: Path) -> None:
    pytest.importorskip("openevolve")
    worlds = []
    for name in ("a", "b"):
        cli("deploy", "--system", "openevolve", "--task", "circle-packing-26", "--policy", "greedy", "-W", "2",
            "--budget", "14", "--seed", "0", "--out", str(tmp_path / name))
        worlds.append(load_world(tmp_path / name))
    a, b = worlds
    assert a.size == 15 and stored_in_slot_order(a)
    assert [without_timings(r) for r in a.records] == [without_timings(r) for r in b.records]
    assert reproduction(a).exact, reproduction(a).reason
    assert decisions(a) is None


@pytest.mark.slow
def test_shinkaevolve_and_skydiscover_record_in_the_order_the_policy_chose(tmp_path: Path) -> None:
    """Both bridges store a round's programs in slot order, one program a slot, and the runs
    replay back: with a policy choosing, SkyDiscover retries no failed program within its
    iteration (replay reveals one child a selection; a retry would be an attempt no policy chose)."""
    pytest.importorskip("shinka")
    pytest.importorskip("skydiscover")
    from dream_gym.integrations.deploy import DeployRequest, deploy

    for system in ("shinkaevolve", "skydiscover"):
        folder = tmp_path / system
        deploy(DeployRequest(system=system, task="circle-packing-26", out=folder, policy="ucb", workers=2, budget=10,
                             seed=0))
        world = load_world(folder)
        assert world.size > 5 and stored_in_slot_order(world), system
        slots = [(r["round"], r["worker"]) for r in world.records[1:]]
        assert len(slots) == len(set(slots)), system
        assert reproduction(world).exact, (system, reproduction(world).reason)
    assert any(r["score"] is None for r in world.records)  # SkyDiscover's: failures it did not retry
