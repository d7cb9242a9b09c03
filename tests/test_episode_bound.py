"""The bound on the work of one episode (``max_attempts``): a 200,001-node chain walked by a
policy file that always extends the deepest leaf ends `dream-gym eval` with the named error on
that world instead of hanging it; the session and the Gymnasium env end the episode at the same
bound (truncated, info saying why); shipped worlds replay exactly as without the bound; and the
views of one episode can be sent in pieces (only the nodes revealed since the last decision)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import gymnasium as gym
import pytest

import dream_gym  # noqa: F401 - registers the envs
from dream_gym.cli import main
from dream_gym.envs.env import ReplayEnv
from dream_gym.envs.vector_env import ReplayVectorEnv
from dream_gym.evaluation.evaluate import evaluate, resolve_worlds
from dream_gym.evaluation.results import read_results
from dream_gym.policy import run_episode
from dream_gym.replay.session import EpisodeLimitError, ReplaySession
from dream_gym.replay.settings import DEFAULT_MAX_ATTEMPTS, ReplaySettings
from dream_gym.replay.view import PrefixView, ReceivedNodes, unsent_nodes
from dream_gym.world.tree import load_world

WALKER = str(Path(__file__).parent / "hostile_policies" / "walks_the_chain.py")
CHAIN_NODES = 200_001
LIMIT_ERROR = "EpisodeLimitError: episode exceeded {} attempts (max_attempts)"


def chain_world(folder: Path, nodes: int = CHAIN_NODES) -> Path:
    """A finished world folder: one chain of ``nodes`` nodes, each the only child of the one
    before, scores rising along it (W = 1), written as an attacker would ship it."""
    lines = ['{"id":"n0","parent":null,"score":0.0}\n']
    lines += [f'{{"id":"n{i}","parent":"n{i - 1}","score":{i / nodes}}}\n' for i in range(1, nodes)]
    data = "".join(lines).encode()
    folder.mkdir(parents=True)
    (folder / "nodes.jsonl").write_bytes(data)
    meta = {"format": "dream-gym-world/1", "id": folder.name, "task": {"name": "chain"}, "workers": 1,
            "sha256": hashlib.sha256(data).hexdigest()}
    (folder / "world.json").write_text(json.dumps(meta))
    return folder


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> Path:
    return chain_world(tmp_path_factory.mktemp("deep") / "chain")


def _eval_chain(chain: Path, out: Path, *options: str) -> int:
    return main(["eval", "-p", WALKER, "-w", str(chain), "--betas", "0.5", "--out", str(out), "--no-progress",
                 "--summary", *options])


def test_eval_of_a_200001_node_chain_ends_at_the_bound_with_the_named_error(chain, tmp_path, capsys):
    assert _eval_chain(chain, tmp_path / "results.jsonl", "--max-attempts", "1000") == 1
    err = capsys.readouterr().err
    assert LIMIT_ERROR.format(1000) in err and "chain" in err
    (row,) = read_results(tmp_path / "results.jsonl")
    assert row["error"].startswith(LIMIT_ERROR.format(1000)) and row["policy"] == WALKER
    assert row["attempts"] == row["rounds"] == 1000 and row["truncated"] and not row["terminated"]
    assert row["max_attempts"] == 1000  # the row records the bound it was replayed under


def test_eval_of_the_chain_at_the_default_bound(chain, tmp_path, capsys):
    assert _eval_chain(chain, tmp_path / "results.jsonl") == 1
    assert LIMIT_ERROR.format(DEFAULT_MAX_ATTEMPTS) in capsys.readouterr().err
    (row,) = read_results(tmp_path / "results.jsonl")
    assert row["attempts"] == DEFAULT_MAX_ATTEMPTS and row["error"].startswith("EpisodeLimitError")


def test_the_session_refuses_the_batch_past_the_bound_and_stops_there(chain):
    world = load_world(chain)
    session = ReplaySession(world, max_attempts=300)
    for _ in range(300):
        session.step(list(session.view().frontier[-1:]))
    value = session.value
    outcome = session.step(list(session.view().frontier[-1:]))
    assert outcome.truncated and not outcome.terminated and outcome.reward == 0.0 and outcome.new_ids == []
    assert session.done and session.attempts == 300 and session.value == value
    assert session.limit_error.startswith("episode exceeded 300 attempts (max_attempts)")
    with pytest.raises(EpisodeLimitError, match="exceeded 300 attempts"):
        run_episode(lambda view: list(view.frontier[-1:]), world, max_attempts=300)
    stopped = run_episode(lambda view: list(view.frontier[-1:]) if view.attempts < 300 else [], world,
                          max_attempts=300)
    assert stopped.error is None and stopped.attempts == 300  # reaching the bound and stopping is no error


def test_the_env_truncates_at_the_bound_and_says_why(chain):
    env = ReplayEnv(chain, max_nodes=CHAIN_NODES, max_attempts=500)
    _, info = env.reset()
    steps = 0
    while steps <= 500:
        _, reward, terminated, truncated, info = env.step(list(info["view"].frontier[-1:]))
        steps += 1
        if terminated or truncated:
            break
    assert steps == 501 and truncated and not terminated and reward == 0.0  # the 501st batch is refused
    assert info["truncated_by"] == "max_attempts" and info["attempts"] == 500
    assert env.session.limit_error.startswith("episode exceeded 500 attempts")
    with pytest.raises(RuntimeError, match="the episode is over"):
        env.step([1])
    made = gym.make("DreamGym/Replay-v1", world=str(chain), max_nodes=CHAIN_NODES, max_attempts=500)
    result = run_episode(lambda view: list(view.frontier[-1:]), made, on_error="record")
    assert result.attempts == 500 and result.error.startswith(LIMIT_ERROR.format(500))


def test_the_vector_env_truncates_at_the_same_bound(chain):
    env = ReplayVectorEnv(2, world=str(chain), max_nodes=CHAIN_NODES, max_attempts=50)
    _, info = env.reset()
    for _ in range(50):
        _, _, terminated, truncated, info = env.step(info["attempts"].reshape(2, 1))  # the newest node's id
        assert not (terminated.any() or truncated.any()) and "attempts_limit" not in info
    _, reward, terminated, truncated, info = env.step(info["attempts"].reshape(2, 1))
    assert truncated.all() and not terminated.any() and info["attempts_limit"].all() and not reward.any()
    assert info["attempts"].tolist() == [50, 50]


def test_without_the_bound_the_env_goes_on(chain):
    env = ReplayEnv(chain, max_nodes=CHAIN_NODES, max_attempts=10**9)
    _, info = env.reset()
    for _ in range(600):
        _, _, terminated, truncated, info = env.step(list(info["view"].frontier[-1:]))
        assert not (terminated or truncated)
    assert info["attempts"] == 600


def _reveal_everything(view: PrefixView) -> list[int]:
    return [0] * view.root_slots + [i for i in view.frontier if i][: view.workers - view.root_slots]


#: The largest shipped worlds (1,001 nodes each; every other real world is smaller).
LARGEST = ("ac-greedy-w4-s2", "cp26-openevolve-w4-s2", "sd-stagnation-w4-s2")


@pytest.mark.parametrize("name", LARGEST)
def test_the_largest_shipped_worlds_replay_whole_and_unchanged_under_the_bound(name):
    world = resolve_worlds(name)[0]
    assert world.size == 1001
    everything = run_episode(_reveal_everything, world)
    assert everything.error is None and everything.terminated and everything.attempts == world.size - 1
    unbounded = run_episode(_reveal_everything, world, max_attempts=10**9)
    assert (everything.replay_score, everything.batches) == (unbounded.replay_score, unbounded.batches)
    policies, betas = ["greedy", "fixed", "random"], [0.0, 0.5, 1.0]
    bounded = evaluate(policies, [world], betas, jobs=1, progress=False)
    free = evaluate(policies, [world], betas, jobs=1, progress=False, max_attempts=10**9)
    assert [(r.replay_score, r.batches, r.error) for r in bounded] == [(r.replay_score, r.batches, r.error)
                                                                       for r in free]


def test_the_bound_is_a_replay_setting_checked_once():
    assert ReplaySettings().max_attempts == DEFAULT_MAX_ATTEMPTS
    assert ReplaySettings.from_row({"beta1": 0.003}).max_attempts == DEFAULT_MAX_ATTEMPTS  # rows from before it
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="max_attempts must be an integer >= 1"):
            ReplaySettings(max_attempts=bad)


# ------------------------------------------------------------------------- views sent in pieces


def test_the_views_of_one_episode_are_sent_as_the_nodes_revealed_since_the_last(chain):
    session = ReplaySession(load_world(chain))
    received, sent, total = ReceivedNodes(), None, 0
    for _ in range(200):
        view = session.view()
        known, new, sent = unsent_nodes(view, sent)
        assert known == view.attempts + 1 - len(new) and len(new) <= 1 + (known == 0)
        total += len(new)
        rebuilt = PrefixView.over(received := received.extended(known, new), known + len(new),
                                  {f: getattr(view, f) for f in ("frontier", "root_slots", "baseline_score", "workers",
                                                                 "beta", "beta1", "beta2", "rounds", "attempts",
                                                                 "task_name", "task_description", "direction",
                                                                 "frontier_rule", "max_rounds")})
        assert rebuilt == view
        session.step(list(view.frontier[-1:]))
    assert total == session.attempts  # every node sent once: the episode costs its nodes, not their square
    session.reset()
    assert unsent_nodes(session.view(), sent)[0] == 0  # a new episode starts from nothing


def test_a_receiver_given_an_earlier_prefix_keeps_the_views_it_built():
    session = ReplaySession(resolve_worlds("sd-fixed-s0")[0])
    for _ in range(3):
        session.step(list(session.view().frontier[:1]))
    nodes = session.view().nodes
    store = ReceivedNodes().extended(0, nodes)
    first = PrefixView.over(store, len(nodes), {"frontier": ()})
    other = store.extended(2, nodes[2:3])  # a view of another episode that shares only two nodes
    assert other is not store and first.nodes == nodes and len(other) == 3
    with pytest.raises(ValueError, match="refers to 9 known nodes, only 4 received"):
        store.extended(9, ())
