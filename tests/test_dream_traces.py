"""Compact replay traces for the developer: scores per beta, rounds with q and failures, rises."""

from __future__ import annotations

from dream_gym.dream.traces import policy_traces, world_trace
from dream_gym.evaluation.evaluate import evaluate
from dream_gym.replay.settings import ReplaySettings
from tests.worldgen import make_world, node

RECORDS = [
    node("root", None, 0.0),
    node("a1", "root", 5.0),
    node("b1", "root", None, error="Traceback ...\nValueError: shape (3,) != (2,)", fail_class="repairable"),
    node("a2", "a1", 10.0),
    node("b2", "b1", 2.0),
    node("a3", "a2", 8.0),
]


def test_world_trace_shows_batches_quality_rises_and_failures():
    world = make_world(RECORDS, world_id="toy")
    results = evaluate(["greedy"], [world], (0.0, 0.5, 1.0), jobs=1, progress=False)
    text = world_trace(world, results, ReplaySettings(beta1=0.003, beta2=0.02))
    assert text.startswith("### toy (task toy-task, W=2, 5 recorded attempts")
    assert text.count("- beta ") == 3 and "mean V" in text and "v2" in text
    assert "% of the limit" in text  # the oracle limit of the world at its W, beta1, beta2
    assert "  r1 [root] -> 1:0.500+\n  r2 [1] -> 2:1.000+\n  r3 [2] -> 3:0.800\n" in text
    assert "  r4 [root] -> 4:fail(repairable: ValueError: shape (3,) != (2,))\n" in text  # the error's last line
    assert "quality rose at attempts 1, 2; 2 attempts after the last improvement; 1 failed attempts" in text


def test_policy_traces_shows_weakest_worlds_first_and_says_what_it_left_out():
    # three runs (one run three times is refused where a mean is taken): the root's code differs
    worlds = [make_world([{**RECORDS[0], "code": f"# run {i}\n"}, *RECORDS[1:]], world_id=f"w{i}") for i in range(3)]
    results = evaluate(["greedy"], worlds, (0.5,), jobs=1, progress=False)
    text = policy_traces(worlds, results, ReplaySettings(beta1=0.003, beta2=0.02), max_worlds=2)
    assert text.count("### w") == 2 and "1 world(s) where the policy scores higher are not shown" in text


def test_the_node_that_rose_is_marked_at_its_own_attempt_in_a_wide_round():
    """In a round of two attempts whose first rose and second failed, the + stood after the
    failure and the rise was counted at the round's last attempt."""
    from dream_gym.policy import FunctionPolicy, run_episode
    from dream_gym.replay.mechanics import ROOT
    from dream_gym.replay.session import ReplaySession

    records = [node("root", None, 0.0), node("a", "root", 5.0),
               node("b", "root", None, error="ValueError: no", fail_class="hard"), node("c", "root", 10.0)]
    world = make_world(records, world_id="wide", workers=2)
    settings = ReplaySettings(beta1=0.003, beta2=0.02)
    rounds = iter([[ROOT, ROOT], [ROOT]])
    result = run_episode(FunctionPolicy(lambda view: next(rounds, [])), ReplaySession(world, settings, beta=0.5),
                         seed=0)
    text = world_trace(world, [result], settings)
    assert "  r1 [root, root] -> 1:0.500+, 2:fail(hard: ValueError: no)\n  r2 [root] -> 3:1.000+\n" in text
    assert "quality rose at attempts 1, 3; 0 attempts after the last improvement; 1 failed attempts" in text
