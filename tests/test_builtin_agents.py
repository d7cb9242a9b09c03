"""Built-in discovery agents: real, seeded, stochastic operators that improve and sometimes fail."""

from __future__ import annotations

import time

import numpy as np
import pytest

from dream_gym.online.agent_base import Agent, ParentContext
from dream_gym.online.agents import builtin_agent, read_literal
from dream_gym.online.tasks import Limits, get_task

TASKS = ["circle-packing-26", "sum-difference", "lasso-path"]


def initial_context(task):
    return ParentContext(code=task.initial_program(), score=None, diagnostics="", error=None, history=[])


@pytest.mark.parametrize("name", TASKS + ["circle-packing-32", "sleep-task"])
def test_agent_is_seeded_and_stochastic(name):
    task, agent = get_task(name), builtin_agent(name)
    assert isinstance(agent, Agent) and agent.name
    parent = initial_context(task)
    codes = [agent.propose(task, parent, np.random.default_rng(seed)).code for seed in (1, 1, 2, 3)]
    assert codes[0] == codes[1]                        # same seed, same program
    assert len(set(codes[1:])) == 3                     # different seeds, different programs
    proposal = agent.propose(task, parent, np.random.default_rng(4))
    assert proposal.cost["tokens_in"] == 0 and proposal.cost["seconds"] < 2.0 and proposal.notes
    compile(proposal.code, "<proposal>", "exec")


def test_unknown_task_has_no_builtin_agent():
    with pytest.raises(ValueError, match="no built-in agent"):
        builtin_agent("protein-folding")


def test_agent_reads_the_parent_as_text_never_running_it():
    task, agent = get_task("sum-difference"), builtin_agent("sum-difference")
    trap = "raise SystemExit('the agent executed the parent')\nA = [0, 2, 3, 4, 7, 11, 12, 14]\n"
    proposal = agent.propose(task, ParentContext(trap, 1.03, "", None, []), np.random.default_rng(0))
    assert isinstance(read_literal(proposal.code, "A"), list)


def chain(name, steps, seed, tmp_path, wall_s=None):
    """Greedy chain: continue from the best valid node; after a failure, let the agent repair it."""
    task, agent = get_task(name), builtin_agent(name)
    if wall_s is not None:
        task.limits = Limits(wall_s=wall_s, memory_mb=task.limits.memory_mb)
    sign = 1.0 if task.direction == "maximize" else -1.0
    rng = np.random.default_rng(seed)
    first = task.evaluate(task.initial_program(), tmp_path)
    assert first.valid, first.error
    best = (first.score, task.initial_program(), first.diagnostics)
    parent = ParentContext(best[1], best[0], best[2], None, [])
    scores, propose_s = [], []
    for _ in range(steps):
        started = time.perf_counter()
        proposal = agent.propose(task, parent, rng)
        propose_s.append(time.perf_counter() - started)
        ev = task.evaluate(proposal.code, tmp_path)
        scores.append(ev.score)
        if ev.valid and sign * ev.score > sign * best[0]:
            best = (ev.score, proposal.code, ev.diagnostics)
        if ev.valid:
            parent = ParentContext(best[1], best[0], best[2], None, [])
        else:
            assert ev.fail_class in ("repairable", "hard") and ev.error
            parent = ParentContext(proposal.code, None, ev.diagnostics, ev.error, [])
    invalid = sum(s is None for s in scores) / steps
    improved = [s for s in scores if s is not None and sign * s > sign * first.score]
    return first.score, best[0], invalid, improved, max(propose_s)


def test_sum_difference_chain_improves_and_sometimes_fails(tmp_path):
    start, best, invalid, improved, _ = chain("sum-difference", 30, 0, tmp_path)
    assert best > start and improved
    assert 0.0 < invalid <= 0.5


def test_circle_packing_short_chain_improves(tmp_path):
    start, best, invalid, improved, _ = chain("circle-packing-26", 10, 0, tmp_path, wall_s=4.0)
    assert best > start + 0.5 and improved
    assert invalid <= 0.5


@pytest.mark.slow
def test_circle_packing_long_chain(tmp_path):
    start, best, invalid, improved, _ = chain("circle-packing-26", 30, 1, tmp_path, wall_s=6.0)
    assert best > 2.3 and 0.0 < invalid <= 0.5


@pytest.mark.slow
def test_lasso_chain_gets_faster_and_sometimes_fails(tmp_path):
    start, best, invalid, improved, _ = chain("lasso-path", 30, 0, tmp_path, wall_s=10.0)
    assert best < start and improved          # minimise: seconds go down
    assert invalid <= 0.5
