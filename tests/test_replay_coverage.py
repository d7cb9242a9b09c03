"""Coverage (docs/concepts/coverage.md): how much of an episode the record answered, shown wherever
a replay score is: the session and the env's step info, result rows, the leaderboard (a column
and a warning), ``dream-gym replay``, ``worlds stats`` and the world report.

The honesty of request mode (a refusal tells nothing a twin world would not) is tested with the
other metamorphic tests, in tests/test_env_honesty.py; its agreement with the rule, the env's
engine, the online loop and the oracle in tests/test_reveal_rule_conformance.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from worldgen import make_world, node, write_folder

from dream_gym.cli import main
from dream_gym.datasets.coverage import coverage_report, render_text
from dream_gym.datasets.stats import reference_coverage, world_stats
from dream_gym.envs.env import ReplayEnv
from dream_gym.envs.vector_env import ReplayVectorEnv
from dream_gym.evaluation.leaderboard import MOSTLY, leaderboard, rests_on_uncovered
from dream_gym.evaluation.results import load_results, result_from_row
from dream_gym.policy import EpisodeResult, run_episode
from dream_gym.replay.mechanics import IllegalBatchError
from dream_gym.replay.oracle import oracle_limit
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.settings import ReplaySettings

# Root + three chains under the "leaves" rule, W = 1: a (1) -> a1 (2) -> a2 (9); b (3); c (0.5).
CHAINS = [
    node("root", None, 0.0), node("a", "root", 1.0), node("b", "root", 3.0), node("c", "root", 0.5),
    node("a1", "a", 2.0), node("a2", "a1", 9.0),
]


def deepest(view):
    """Continue the deepest revealed node, the newest on ties (the root first): online, a policy
    that only deepens; it never stops by itself."""
    if len(view.nodes) == 1:
        return [0]
    node_ = max(view.nodes, key=lambda n: (n.depth, n.id))
    return [node_.id] if node_.id in view.frontier else []


def confined(view):
    """The oracle's schedule (``confined.batches``, set by the test): a policy that knows the
    tree and asks only what the record holds."""
    return list(confined.batches[view.rounds]) if view.rounds < len(confined.batches) else []


# -- the episode --------------------------------------------------------------------------------------
def test_a_policy_confined_to_the_record_has_full_coverage() -> None:
    """The oracle's schedule asks only what the record answers: in request mode every selection
    is a hit, nothing is refused or cut short, and V is the oracle limit. Under the rule's
    frontier (strict, as evaluation runs) every policy is confined: coverage 1, nothing refused."""
    world = make_world(CHAINS, workers=1)
    limit = oracle_limit(world, 1)
    confined.batches = [list(b) for b in limit.batches]
    for requests in (True, False):
        result = run_episode(confined, world, requests=requests)
        assert (result.refused, result.cut_short, result.coverage, result.on_record) == (0, False, 1.0, True)
        assert result.replay_score == pytest.approx(limit.lower)
    for policy in ("greedy", "fixed", "ucb", "random"):
        result = run_episode(_builtin(policy), world)
        assert result.refused == 0 and result.coverage == 1.0


def test_a_policy_that_only_deepens_past_the_record_is_flagged() -> None:
    """In request mode, asking to continue where the run stopped (b, a leaf without a recorded
    child) is refused, not charged, and a batch of refusals ends the episode truncated and cut
    short. Under the rule's frontier the same policy cannot even ask: b is off the frontier, and
    the episode ends because it returns nothing legal to do."""
    world = make_world([node("root", None, 0.0), node("b", "root", 3.0), node("a", "root", 1.0)], workers=1)
    session = ReplaySession(world, requests=True)
    result = run_episode(deepest, session)
    assert result.attempts == 1 and result.refused == 1 and result.cut_short and result.truncated
    assert result.coverage == 0.5 and result.on_record is False and not result.terminated
    assert result.batches == [[0]]  # the refused request revealed nothing
    assert result.replay_score == pytest.approx(1.0 - 0.003 + 0.02)  # b is the best; one attempt charged, not two
    plain = run_episode(deepest, world)  # the rule's frontier: b is off it, the policy stops
    assert (plain.refused, plain.cut_short, plain.attempts) == (0, False, 1)


def test_request_mode_shows_the_online_frontier_and_counts_what_it_refuses() -> None:
    session = ReplaySession(make_world(CHAINS, workers=2), requests=True)
    assert session.view().frontier == (0,) and session.view().root_slots == 2  # W, as online
    out = session.step([0, 0])  # opens a and b
    assert out.new_ids == [1, 2] and out.refused == [] and session.view().frontier == (0, 1, 2)
    out = session.step([2, 1])  # b has no recorded child: refused; a continues to a1
    assert out.new_ids == [3] and out.refused == [2] and session.refused == 1 and not session.done
    assert session.view().frontier == (0, 2, 3)  # b stays a leaf online: it may be asked again
    assert session.attempts == 3 and session.coverage == 0.75
    out = session.step([0, 0])  # one branch left (c): the second root selection is refused
    assert out.new_ids == [4] and out.refused == [0] and session.replay.unopened == 0
    out = session.step([0, 4])  # nothing left under the root or c: cut short
    assert out.truncated and not out.terminated and out.refused == [0, 4] and session.cut_short
    leaves = ReplaySession(make_world(CHAINS, workers=1), requests=True)
    leaves.step([0])
    leaves.step([1])  # a -> a1: a is no longer a leaf
    with pytest.raises(IllegalBatchError, match="not a leaf"):  # the rule still holds online
        leaves.step([1])


def test_choices_held_is_the_share_of_the_online_choices_the_record_answers() -> None:
    """Per decision: the root and the revealed leaves an online run could continue (the rule
    "leaves"), and how many of them the record holds a child for; the same in request mode."""
    for requests in (False, True):
        session = ReplaySession(make_world(CHAINS, workers=1), requests=requests)
        for batch in ([0], [1], [0], []):  # a; a -> a1; b; stop
            session.step(batch)
        # root alone 1/1; root, a: 2/2; root, a1: 2/2; root, a1, b (no child): 2/3
        assert session.answerable == pytest.approx((1 + 1 + 1 + 2 / 3) / 4), requests


def test_under_the_rule_s_frontier_dropped_requests_for_unrecorded_children_are_refusals() -> None:
    """Non-strict (the env's default): a leaf off the frontier is a refused request, a non-leaf
    under "leaves" (the rule's own reason, online too) is not; nothing left to reveal cuts short."""
    env = ReplayEnv(make_world(CHAINS, workers=1))
    env.reset()
    env.step([0])
    _, _, _, _, info = env.step([1, 1])  # a -> a1; the repeat is dropped (once per batch) but not refused
    assert info["refused"] == [] and info["coverage"] == 1.0
    env.step([0])  # b
    _, _, terminated, _, info = env.step([3, 1])  # b: no recorded child (refused); a: not a leaf (rule)
    assert info["refused"] == [3] and len(info["dropped"]) == 2 and terminated and info["cut_short"]
    assert info["coverage"] == 3 / 4 and env.unwrapped.session.refused == 1 and env.unwrapped.session.cut_short
    env.reset()
    while True:  # reveal everything: the record, not the policy, ends the episode
        _, _, terminated, truncated, info = env.step(list(info["frontier"]) if "frontier" in info else [0])
        if terminated or truncated:
            break
    assert info["cut_short"] and info["refused"] == [] and env.unwrapped.session.cut_short


def test_step_info_counts_only_what_the_policy_chose() -> None:
    """The share of the online choices the record holds depends on unrevealed facts in request
    mode: it is the result's (after the episode), never the step info's."""
    env = ReplayEnv(make_world(CHAINS, workers=1), requests=True)
    _, info = env.reset()
    assert info["refused"] == [] and info["coverage"] == 1.0 and "answerable" not in info
    _, _, _, _, info = env.step([0])
    assert set(info) >= {"refused", "coverage"} and not {"answerable", "cut_short"} & set(info)


def test_a_refused_batch_ends_the_env_episode_and_copies_keep_the_counts() -> None:
    import copy
    import pickle

    env = ReplayEnv(make_world(CHAINS, workers=1), requests=True)
    env.reset()
    env.step([0])  # a
    _, reward, terminated, truncated, info = env.step([1])  # a -> a1
    _, reward, terminated, truncated, info = env.step([0])  # b
    _, reward, terminated, truncated, info = env.step([3])  # b: nothing recorded
    assert (reward, terminated, truncated, info["truncated_by"], info["cut_short"]) == (0.0, False, True, "record", True)
    for other in (pickle.loads(pickle.dumps(env)), copy.deepcopy(env)):
        session = other.unwrapped.session
        assert session.refused == 1 and session.cut_short and session.truncated and other._done


def test_vector_envs_refuse_request_mode_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"request mode .* not in the vector envs.*ReplayEnv\(requests=True\)"):
        ReplayVectorEnv(1, world=make_world(CHAINS, workers=1), requests=True)
    with pytest.raises(ValueError, match="requests must be True or False"):
        ReplaySettings(requests="yes")  # type: ignore[arg-type]


# -- results and the leaderboard ----------------------------------------------------------------------
def _result(policy: str, world: str, beta: float, v: float, refused: int | None = 0,
            cut_short: bool | None = False, held: float | None = 0.75) -> EpisodeResult:
    return EpisodeResult(world=world, policy=policy, beta=beta, replay_score=v, best_q=v, best_score=v, attempts=4,
                         rounds=2, work=0.5, attainment=min(max(v, 0.0), 1.0), refused=refused, cut_short=cut_short,
                         answerable=held)


def test_the_difference_rests_mostly_on_uncovered_episodes_above_half_of_it() -> None:
    """d = 0.3 on a pair the record answered whole, and x on a pair it cut short: the share is
    x / (0.3 + x), "mostly" above one half (x > 0.3)."""
    def share(x: float, refused: int = 0, cut: bool = True) -> float | None:
        first = [_result("p", "w1", 0.5, 0.8), _result("p", "w2", 0.5, 0.5 + x, refused, cut)]
        second = [_result("q", "w1", 0.5, 0.5), _result("q", "w2", 0.5, 0.5)]
        return rests_on_uncovered(first, second)

    assert share(0.3) == pytest.approx(0.5) and MOSTLY == 0.5
    assert share(0.31) > MOSTLY > share(0.29)
    assert share(0.31, refused=2, cut=False) > MOSTLY  # a refused request marks the pair too
    assert share(-0.1) == pytest.approx(-0.1 / 0.2)  # working against the difference: not "mostly"
    assert share(-0.3) is None  # no difference at all
    old = [_result("p", "w1", 0.5, 0.8, refused=None, cut_short=None)]
    assert rests_on_uncovered(old, [_result("q", "w1", 0.5, 0.5)]) is None  # not recorded: no claim

    def board(x: float):
        first = [_result("p", "w1", 0.5, 0.8), _result("p", "w2", 0.5, 0.5 + x, 0, True)]
        return leaderboard(first + [_result("q", "w1", 0.5, 0.5), _result("q", "w2", 0.5, 0.5)], rank_by="V")

    assert board(0.29).coverage_warning() is None
    warning = board(0.31).coverage_warning()
    assert warning is not None and "p vs q (51%)" in warning and "\n" not in warning


def test_the_leaderboard_shows_the_share_of_episodes_on_the_record() -> None:
    rows = [_result("p", "w", 0.1, 0.5), _result("p", "w", 0.9, 0.5, 1, False, held=0.25), _result("q", "w", 0.1, 0.2),
            _result("q", "w", 0.9, 0.2)]
    board = leaderboard(rows)
    p = next(r for r in board.overall if r.policy == "p")
    assert p.on_record == 0.5 and p.coverage == pytest.approx((1 + 4 / 5) / 2) and p.held == 0.5
    assert "| 50% | 90.0% | 50% |" in board.to_markdown() and "rec = " in board.legend() and "held = " in board.legend()
    old = leaderboard([_result("p", "w", 0.1, 0.5, None, None, None)])  # a results file from before coverage
    assert math.isnan(old.overall[0].on_record) and "| n/a | n/a | n/a |" in old.to_markdown()


def test_old_results_files_stay_readable(tmp_path: Path) -> None:
    row = {"format": "dream-gym-results/1", "world": "w", "policy": "greedy", "beta": 0.5, "replay_score": 0.4,
           "best_q": 0.5, "best_score": 1.0, "attempts": 12, "rounds": 6, "work": 0.1, "attainment": 0.5,
           "batches": [], "terminated": True, "truncated": False, "error": None, "limit": 0.9, "workers": 2,
           "frontier": "leaves", "beta1": 0.003, "beta2": 0.02, "max_rounds": None, "max_attempts": 10000}
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (result,) = load_results(path)
    assert result.refused is None and result.coverage is None and result.on_record is None
    assert ReplaySettings.from_row(row).requests is False
    assert result_from_row({**row, "refused": 2, "cut_short": True, "answerable": 0.5}).coverage == 12 / 14


# -- the CLI ------------------------------------------------------------------------------------------
@pytest.fixture
def chains_folder(tmp_path: Path) -> Path:
    return write_folder(tmp_path / "chains", CHAINS, workers=1)


def test_eval_requests_writes_coverage_and_warns(chains_folder: Path, tmp_path: Path, capsys) -> None:
    """``dream-gym eval --requests``: the rows record request mode and coverage; the board has the
    "rec" column; a policy that goes past the record, ranked above one that stops inside it, is
    warned about: all of its lead comes from episodes the record cut short. Under the rule's
    frontier it cannot ask past the record, and there is nothing to warn about."""
    deep, once = tmp_path / "deepest.py", tmp_path / "once.py"
    deep.write_text(
        "def act(view):\n"
        "    if len(view.nodes) == 1:\n"
        "        return [0]\n"
        "    node = max(view.nodes, key=lambda n: (n.depth, n.id))\n"
        "    return [node.id] if node.id in view.frontier else []\n")
    once.write_text("def act(view):\n    return [0] if len(view.nodes) == 1 else []\n")
    command = ["eval", "-p", str(deep), "-p", str(once), "-w", str(chains_folder), "--betas", "0,0.5,1",
               "--no-progress", "--rank-by", "V"]
    out = tmp_path / "results.jsonl"
    assert main([*command, "--requests", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(r["requests"] is True and {"refused", "cut_short", "answerable"} <= set(r) for r in rows)
    assert all(r["cut_short"] and r["refused"] == 1 for r in rows if r["policy"] == str(deep))
    assert all(not r["cut_short"] and r["refused"] == 0 for r in rows if r["policy"] == str(once))
    assert " rec " in printed and "in request mode" in printed
    results = load_results(out)
    share = rests_on_uncovered([r for r in results if r.policy == str(deep)], [r for r in results if r.policy == str(once)])
    assert share == 1.0 and "coverage: the V difference of" in printed and "(100%)" in printed
    plain = tmp_path / "plain.jsonl"
    assert main([*command, "-o", str(plain)]) == 0
    assert all(r.refused == 0 and not r.cut_short for r in load_results(plain))
    assert "coverage: the V difference" not in capsys.readouterr().out


def test_replay_prints_the_coverage_line(chains_folder: Path, capsys) -> None:
    assert main(["replay", str(chains_folder), "--policy", "greedy", "--requests", "--beta", "1"]) == 0
    line = capsys.readouterr().out.splitlines()[2]
    assert line.startswith("coverage (request mode): ") and "requests answered by the record" in line


# -- worlds stats and the world report ---------------------------------------------------------------
def test_stats_and_report_give_the_reference_policies_coverage(chains_folder: Path, capsys) -> None:
    world = make_world(CHAINS, workers=1)
    settings = ReplaySettings().resolved(world)
    answered, cut = reference_coverage(world, settings, "greedy")
    results = [run_episode(_builtin("greedy"), ReplaySession(world, settings, beta=b / 10, requests=True))
               for b in range(11)]
    hits, asked = sum(r.attempts for r in results), sum(r.attempts + r.refused for r in results)
    assert answered == pytest.approx(hits / asked) and cut == pytest.approx(sum(r.cut_short for r in results) / 11)
    stats = world_stats(world)
    assert stats.answered["greedy"] == answered and stats.cut_short["greedy"] == cut
    assert set(stats.as_dict()["answered"]) == {"greedy", "openevolve"}
    report = coverage_report(world)
    assert report.answered == stats.answered and "coverage         greedy " in render_text(report)
    assert main(["worlds", "stats", str(chains_folder), "--markdown"]) == 0
    assert "| greedy: requests answered |" in capsys.readouterr().out


def test_the_report_warns_when_the_record_cuts_most_episodes_short() -> None:
    shallow = make_world([node("root", None, 0.0), node("a", "root", 1.0), node("b", "root", 2.0)], workers=2,
                         frontier="any")
    report = coverage_report(shallow)
    assert report.cut_short["greedy"] >= 0.5
    assert any(w.startswith("coverage: the record cuts short most episodes of greedy") for w in report.warnings)
    wide = [node("root", None, 0.0)]  # 12 branches of 6: both policies stop inside the record mostly
    for branch in range(12):
        for depth in range(6):
            wide.append(node(f"b{branch}d{depth}", "root" if depth == 0 else f"b{branch}d{depth - 1}",
                             1.0 + branch / 10 + (depth == 0) / 2))
    report = coverage_report(make_world(wide, workers=2))
    assert max(report.cut_short.values()) < 0.5
    assert not any(w.startswith("coverage:") for w in report.warnings)


def _builtin(name: str):
    from dream_gym.policies import make_policy

    return make_policy(name)


def test_a_score_near_the_largest_float_makes_no_numpy_warning_and_a_finite_scale() -> None:
    """numpy's standard deviation of such scores overflowed: a RuntimeWarning on stderr, and a
    scale of inf in the report."""
    import warnings

    from dream_gym.world.tree import build_world
    from dream_gym.world.writer import new_meta

    records = [{"id": "root", "parent": None, "score": 0.1}, {"id": "a", "parent": "root", "score": 1e308},
               {"id": "b", "parent": "root", "score": 0.5}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = coverage_report(build_world(new_meta("huge", "toy"), records))
    assert math.isfinite(report.score_scale) and report.score_scale == 1e308
