"""dream_gym.evaluation.evaluate: world resolution, the episode grid (determinism, backends, errors), leaderboard."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dream_gym.cli import main
from dream_gym.evaluation import evaluate as ev
from dream_gym.evaluation.evaluate import evaluate, leaderboard, load_results, read_results, resolve_worlds
from dream_gym.policies import POLICIES, GreedyPolicy
from dream_gym.policy import EpisodeResult
from dream_gym.replay.score import DEFAULT_BETA_GRID, v2_objective
from dream_gym.replay.settings import ReplaySettings
from dream_gym.world.writer import new_meta, write_world

HERE = Path(__file__).resolve().parent
BETAS = (0.0, 0.5, 1.0)


def make_world(folder: Path, n: int, seed: int, workers: int = 3, world_id: str | None = None) -> Path:
    rng = random.Random(seed)
    records: list[dict[str, Any]] = [{"id": "r", "parent": None, "score": 0.0}]
    for i in range(1, n):
        parent = records[rng.randrange(i)]["id"] if rng.random() < 0.6 else records[i - 1]["id"]
        score = None if rng.random() < 0.15 else round(rng.uniform(-1.0, 2.0), 3)
        records.append({"id": f"n{i}", "parent": parent, "score": score})
    return write_world(folder, new_meta(world_id or f"w{seed}", "toy", workers=workers), records)


@pytest.fixture(scope="module")
def worlds_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("worlds")
    for seed in range(3):
        make_world(root / f"w{seed}", 40 + 10 * seed, seed)
    return root


class BoomPolicy:
    """Raises on its second decision (mid-episode, after one round)."""

    name = "boom"

    def reset(self, context: Any) -> None:
        self.calls = 0

    def act(self, view: Any) -> list[int]:
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("boom on call 2")
        return list(view.frontier[:1])


class IllegalPolicy:
    name = "illegal"

    def reset(self, context: Any) -> None:
        pass

    def act(self, view: Any) -> list[int]:
        return [len(view.nodes) + 5]


class BrokenInit:
    def __init__(self) -> None:
        raise RuntimeError("cannot build")


# --------------------------------------------------------------------------- resolve_worlds


def test_resolve_worlds_folder_folder_of_worlds_and_lists(worlds_dir: Path) -> None:
    assert [w.id for w in resolve_worlds(str(worlds_dir))] == ["w0", "w1", "w2"]
    assert [w.id for w in resolve_worlds(worlds_dir / "w1")] == ["w1"]
    both = resolve_worlds(f"{worlds_dir / 'w2'},{worlds_dir / 'w0'},{worlds_dir / 'w2'}")
    assert [w.id for w in both] == ["w2", "w0"]  # order kept, duplicates dropped
    assert [w.id for w in resolve_worlds([str(worlds_dir / "w1"), worlds_dir / "w0"])] == ["w1", "w0"]


def test_resolve_worlds_comma_list_longer_than_a_file_name() -> None:
    # A list of world ids past the file system's name limit (255 bytes) is a list, not a path to test.
    ids = resolve_worlds("train,dream-gym/recorded-v0:train")
    spec = ",".join(w.id for w in ids)
    assert len(spec) > 255
    assert [w.id for w in resolve_worlds(spec)] == [w.id for w in ids]
    with pytest.raises(LookupError, match="x" * 300):  # one over-long name: a clear "cannot resolve"
        resolve_worlds("x" * 300)


def test_resolve_worlds_splits_of_the_shipped_dataset(worlds_dir: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = tmp_path / "shipped"
    for seed in range(3):
        make_world(shipped / f"w{seed}", 12, seed)
    card = {"id": "dream-gym/recorded-v0", "worlds": [{"name": f"w{i}"} for i in range(3)],
            "split": {"train": ["w0", "w2"], "heldout": ["w1"]}}
    (shipped / "dataset.json").write_text(json.dumps(card))
    monkeypatch.setenv("DREAM_GYM_SHIPPED", str(shipped))
    assert [w.id for w in resolve_worlds("train")] == ["w0", "w2"]
    assert [w.id for w in resolve_worlds("heldout")] == ["w1"]
    assert [w.id for w in resolve_worlds("w1")] == ["w1"]  # a shipped world by name
    card["split"] = {"train": ["w0"], "held_out": ["w2"]}  # the store's spelling works too
    (shipped / "dataset.json").write_text(json.dumps(card))
    assert [w.id for w in resolve_worlds("heldout")] == ["w2"]


def test_resolve_worlds_dataset_id_from_the_store(worlds_dir: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from dream_gym.datasets import packing

    monkeypatch.setenv("DREAM_GYM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DREAM_GYM_SHIPPED", "")
    packing.pack([worlds_dir / "w0", worlds_dir / "w2"], "me/toys-v1")
    assert [w.id for w in resolve_worlds("me/toys-v1")] == ["w0", "w2"]
    assert [w.id for w in resolve_worlds("me/toys-v1/w2")] == ["w2"]
    with pytest.raises(LookupError, match="me/other-v1"):
        resolve_worlds("me/other-v1")


def test_resolve_worlds_split_of_any_dataset_by_id_colon_split() -> None:
    card = json.loads((Path(__file__).resolve().parents[1] / "recorded_worlds" / "recorded-v0" / "dataset.json")
                      .read_text())
    assert [w.id for w in resolve_worlds("dream-gym/recorded-v0:train")] == card["split"]["train"]
    assert [w.id for w in resolve_worlds("dream-gym/recorded-v0:heldout")] == card["split"]["held_out"]
    with pytest.raises(LookupError, match="recorded-v0 has no split 'nope'; it has: train, held_out"):
        resolve_worlds("dream-gym/recorded-v0:nope")


def test_resolve_worlds_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DREAM_GYM_SHIPPED", str(tmp_path / "nothing-shipped"))
    with pytest.raises(LookupError, match="no-such-world"):
        resolve_worlds("no-such-world")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LookupError, match="neither a world"):
        resolve_worlds(tmp_path / "empty")
    with pytest.raises(LookupError, match="split 'train' needs the shipped dataset"):
        resolve_worlds("train")
    with pytest.raises(LookupError, match="no worlds"):
        resolve_worlds(" , ")



def test_two_worlds_with_one_id_are_refused_before_any_episode(worlds_dir: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # results are kept by world id: two runs imported from OpenEvolve's default folder would be
    # counted as one world ("mean over 1 world"), their episodes mixed
    make_world(tmp_path / "a", 30, 7, world_id="openevolve_output")
    make_world(tmp_path / "b", 35, 8, world_id="openevolve_output")
    with pytest.raises(LookupError, match=r"two worlds have the id 'openevolve_output' \(.*a and .*b\)"):
        resolve_worlds([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(LookupError, match="two worlds have the id"):
        resolve_worlds(tmp_path)  # a folder of worlds
    assert [w.id for w in resolve_worlds(f"{tmp_path / 'a'},{tmp_path / 'a'}")] == ["openevolve_output"]  # one world
    from dream_gym.cli import main

    results = tmp_path / "r.jsonl"
    assert main(["eval", "--policy", "greedy", "--worlds", f"{tmp_path / 'a'},{tmp_path / 'b'}",
                 "--out", str(results), "--no-progress"]) == 2
    assert "two worlds have the id 'openevolve_output'" in capsys.readouterr().err
    assert not results.exists()

# --------------------------------------------------------------------------- evaluate


def test_results_are_complete_canonical_and_written(worlds_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    results = evaluate(["random", "greedy"], str(worlds_dir), BETAS, backend="serial", out=out, progress=False)
    keys = [(r.policy, r.world, r.beta) for r in results]
    assert keys == [(p, w, b) for p in ("random", "greedy") for w in ("w0", "w1", "w2") for b in BETAS]
    rows = read_results(out)
    assert len(rows) == len(results) == 18
    for row in rows:
        for key in ("policy", "world", "beta", "replay_score", "best_q", "attempts", "rounds", "batches",
                    "error", "work", "attainment", "world_path"):
            assert key in row
    assert load_results(out) == results
    first = results[0]
    assert first.attempts == sum(len(b) for b in first.batches) and first.rounds == len(first.batches)


def test_deterministic_across_runs_and_backends(worlds_dir: Path, tmp_path: Path) -> None:
    policies = ["random", "greedy", "fixed"]
    lines = []
    for i, (backend, jobs) in enumerate([("serial", 1), ("serial", 1), ("process", 2)]):
        out = tmp_path / f"{i}.jsonl"
        evaluate(policies, str(worlds_dir), None, backend=backend, jobs=jobs, out=out, progress=False,
                 chunk_size=None if i < 2 else 1)
        lines.append(out.read_text().splitlines())
    assert len(lines[0]) == 3 * 3 * len(DEFAULT_BETA_GRID)
    assert lines[0] == lines[1] == lines[2]
    # the random policy actually varies with beta (so the comparison is not vacuous)
    assert len({json.loads(line)["attempts"] for line in lines[0] if '"random"' in line}) > 1


def test_seed_changes_random_policy(worlds_dir: Path) -> None:
    a = evaluate(["random"], str(worlds_dir), BETAS, backend="serial", progress=False, seed=0)
    b = evaluate(["random"], str(worlds_dir), BETAS, backend="serial", progress=False, seed=1)
    assert [r.batches for r in a] != [r.batches for r in b]


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_errors_are_recorded_and_the_rest_completes(worlds_dir: Path, backend: str) -> None:
    # module:Class specs: workers start from a fresh interpreter, so the policies must be importable
    boom, illegal, broken = "test_evaluate:BoomPolicy", "test_evaluate:IllegalPolicy", "test_evaluate:BrokenInit"
    results = evaluate([boom, "greedy", illegal, broken], str(worlds_dir), BETAS, backend=backend,
                       jobs=2, progress=False)
    assert len(results) == 4 * 3 * 3
    by_policy: dict[str, list[EpisodeResult]] = {}
    for r in results:
        by_policy.setdefault(r.policy, []).append(r)
    for r in by_policy[boom]:
        assert r.error == "RuntimeError: boom on call 2"
        assert r.rounds == 1 and r.attempts == 1  # the round before the crash counts
    assert all(r.error is None and r.attempts > 0 for r in by_policy["greedy"])
    assert all(r.error and r.error.startswith("IllegalBatchError") for r in by_policy[illegal])
    assert all(r.error and "cannot build" in r.error and r.attempts == 0 for r in by_policy[broken])


def test_policies_patched_into_the_parent_reach_only_the_in_process_backend(
        worlds_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers do not inherit the parent's runtime state (they come from the fork server); with
    the watchdog off, the serial backend runs in this process and sees it."""
    monkeypatch.setitem(POLICIES, "boom", BoomPolicy)
    in_process = evaluate(["boom"], str(worlds_dir / "w0"), BETAS, backend="serial", task_timeout=None,
                          progress=False)
    assert all(r.error == "RuntimeError: boom on call 2" for r in in_process)
    watched = evaluate(["boom"], str(worlds_dir / "w0"), BETAS, backend="serial", progress=False)
    assert all(r.error and "unknown built-in policy 'boom'" in r.error for r in watched)


def test_isolated_policy_file_error_recorded(worlds_dir: Path) -> None:
    spec = str(HERE / "hostile_policies" / "raises.py")
    results = evaluate(["fixed", spec], str(worlds_dir / "w0"), (0.5,), backend="serial", progress=False)
    assert results[0].error is None and results[0].attempts > 0
    assert results[1].policy == spec and "boom at round 0" in (results[1].error or "")


def test_argument_errors(worlds_dir: Path) -> None:
    with pytest.raises(LookupError, match="no-such-policy"):
        evaluate(["no-such-policy"], str(worlds_dir), BETAS, progress=False)
    with pytest.raises(ValueError, match="backend"):
        evaluate(["greedy"], str(worlds_dir), BETAS, backend="threads", progress=False)
    with pytest.raises(ValueError, match="beta must be in"):
        evaluate(["greedy"], str(worlds_dir), "0.5,1.5", progress=False)
    with pytest.raises(ValueError, match="repeat"):
        evaluate(["greedy", "greedy"], str(worlds_dir), BETAS, progress=False)
    # a bad seed ran, and every episode of a seeded policy failed as the policy's error
    for seed in (-1, 2**32, 1.5, "1", True):
        with pytest.raises(ValueError, match="seed must be a whole number from 0 to 4294967295"):
            evaluate(["random"], str(worlds_dir), BETAS, seed=seed, progress=False)
    with pytest.raises(TypeError, match=re.escape("got GreedyPolicy; its class is 'greedy', and "
                                                  "greedy(KEY=VALUE, ...) gives its parameters")):
        evaluate([GreedyPolicy()], str(worlds_dir), BETAS, progress=False)
    with pytest.raises(ValueError, match=re.escape("'greedy(patience=3)' and 'greedy( patience = 3 )' are one policy "
                                                   "with the same parameters")):
        evaluate(["greedy(patience=3)", "greedy( patience = 3 )"], str(worlds_dir), BETAS, progress=False)


NOTEBOOK_POLICY = """
import sys
from dream_gym.evaluation.evaluate import evaluate
class Mine:
    name = "mine"
    def reset(self, context): pass
    def act(self, view): return [0] * view.root_slots if view.rounds == 0 else []
try:
    evaluate(["__main__:Mine"], ["cp26-fixed-w4-s0"], [0.5], progress=False, jobs=2)
except ValueError as exc:
    print("refused:", exc)
results = evaluate(["__main__:Mine", "greedy"], ["cp26-fixed-w4-s0", "sd-fixed-s0"], [0.5, 1.0], progress=False)
print("errors:", sorted({str(r.error) for r in results}), len(results))
"""


def test_a_class_defined_where_main_is_no_script_is_played_here_or_refused(tmp_path: Path) -> None:
    """From a notebook or ``python -c`` the job processes could not import ``__main__``: every
    episode of ``__main__:Mine`` failed with the policy not found, and it ranked with V = 0."""
    done = subprocess.run([sys.executable, "-c", NOTEBOOK_POLICY], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: policy '__main__:Mine': job processes cannot import __main__ here" in done.stdout
    assert "errors: ['None'] 8" in done.stdout, done.stdout


def test_one_policy_and_one_beta_need_no_list(worlds_dir: Path) -> None:
    # "greedy" was read as the policies g, r, e, e, d, y; 0.5 was "not iterable"
    one = evaluate("greedy", str(worlds_dir), 0.5, backend="serial", progress=False)
    assert [r.to_dict() for r in one] == [r.to_dict() for r in evaluate(["greedy"], str(worlds_dir), [0.5],
                                                                          backend="serial", progress=False)]
    assert {(r.policy, r.beta) for r in one} == {("greedy", 0.5)}


def test_options_reach_the_session(worlds_dir: Path) -> None:
    results = evaluate(["fixed"], str(worlds_dir), (1.0,), backend="serial", progress=False,
                       max_rounds=1, beta1=0.0, beta2=0.0)
    for r in results:
        assert r.rounds == 1 and r.truncated
        assert r.replay_score == pytest.approx(r.best_q)  # no cost, no bonus


def test_settings_value_and_keywords_replay_the_same(worlds_dir: Path, tmp_path: Path) -> None:
    settings = ReplaySettings(2, beta1=0.01, beta2=0.0, max_rounds=3)
    by_value = evaluate(["greedy", "ucb"], str(worlds_dir), BETAS, settings=settings, progress=False,
                        out=tmp_path / "a.jsonl")
    by_keywords = evaluate(["greedy", "ucb"], str(worlds_dir), BETAS, workers=2, beta1=0.01, beta2=0.0,
                           max_rounds=3, progress=False, out=tmp_path / "b.jsonl")
    assert [r.to_dict() for r in by_value] == [r.to_dict() for r in by_keywords]
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert all(r.rounds <= 3 and max(map(len, r.batches), default=0) <= 2 for r in by_value)
    rows = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert {(row["workers"], row["beta1"], row["max_rounds"]) for row in rows} == {(2, 0.01, 3)}


def test_settings_given_twice_differently_are_refused(worlds_dir: Path) -> None:
    settings = ReplaySettings(2, max_rounds=3)
    with pytest.raises(ValueError, match=r"max_rounds=4 against settings.max_rounds=3"):
        evaluate(["greedy"], str(worlds_dir), BETAS, settings=settings, max_rounds=4, progress=False)
    assert evaluate(["greedy"], str(worlds_dir), BETAS, settings=settings, max_rounds=3, progress=False)
    # a field the settings leave at its default is not given: the keyword sets it
    beside = evaluate(["greedy"], str(worlds_dir), BETAS, settings=ReplaySettings(beta1=0.0), max_rounds=1,
                      progress=False)
    assert all(r.rounds <= 1 for r in beside)
    with pytest.raises(TypeError, match="unknown replay settings: rounds"):
        evaluate(["greedy"], str(worlds_dir), BETAS, rounds=3, progress=False)
    with pytest.raises(TypeError, match="betas="):
        evaluate(["greedy"], str(worlds_dir), BETAS, beta=0.5, progress=False)


@pytest.mark.slow
def test_ray_backend_matches_serial(worlds_dir: Path, tmp_path: Path) -> None:
    import ray

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        evaluate(["random", "greedy"], str(worlds_dir), BETAS, backend="ray", out=tmp_path / "ray.jsonl",
                 progress=False)
    finally:
        ray.shutdown()
    evaluate(["random", "greedy"], str(worlds_dir), BETAS, backend="serial", out=tmp_path / "s.jsonl",
             progress=False)
    assert (tmp_path / "ray.jsonl").read_text() == (tmp_path / "s.jsonl").read_text()


# --------------------------------------------------------------------------- leaderboard


def result(policy: str, world: str, beta: float, *, v: float, work: float, attain: float, attempts: int,
           rounds: int, error: str | None = None) -> EpisodeResult:
    return EpisodeResult(world=world, policy=policy, beta=beta, replay_score=v, best_q=attain, best_score=None,
                         attempts=attempts, rounds=rounds, work=work, attainment=attain, error=error)


def test_v2_numbers_on_hand_made_results() -> None:
    rows = [
        result("a", "w", 0.0, v=0.4, work=0.2, attain=0.5, attempts=4, rounds=2),
        result("a", "w", 1.0, v=0.8, work=0.6, attain=0.9, attempts=6, rounds=3),
    ]
    board = leaderboard(rows, lam=0.1)
    (row,) = board.overall
    # front (0.2, 0.5), (0.6, 0.9): auc = 0.4 * 0.5 + 0.4 * 0.9 = 0.56; penalty = (2/4 + 3/6) / 2 = 0.5
    assert row.auc == pytest.approx(0.56)
    assert row.penalty == pytest.approx(0.5)
    assert row.v2 == pytest.approx(0.51)
    assert row.mean_v == pytest.approx(0.6)
    assert row.attainment == pytest.approx(0.7)
    assert (row.attempts, row.rounds, row.errors, row.episodes) == (5.0, 2.5, 0, 2)
    assert leaderboard(rows, lam=1.0).overall[0].v2 == pytest.approx(0.06)


def test_leaderboard_aggregates_over_worlds_and_ties_share_a_rank() -> None:
    rows = []
    for policy in ("a", "b"):  # a and b are identical: a tie
        rows += [result(policy, "w1", 0.5, v=0.5, work=0.5, attain=0.8, attempts=4, rounds=1),
                 result(policy, "w2", 0.5, v=0.1, work=0.1, attain=0.2, attempts=2, rounds=2)]
    rows += [result("c", "w1", 0.5, v=0.9, work=0.5, attain=0.6, attempts=2, rounds=1),
             result("c", "w2", 0.5, v=-0.2, work=1.0, attain=0.0, attempts=9, rounds=9, error="Boom: x")]
    board = leaderboard(rows, lam=0.1)
    overall = {r.policy: r for r in board.overall}
    # per world: a/b on w1: auc 0.5*0.8=0.4, penalty 0.25 -> 0.375; on w2: 0.9*0.2=0.18, penalty 1 -> 0.08
    assert overall["a"].v2 == pytest.approx((0.375 + 0.08) / 2)
    assert overall["a"].mean_v == pytest.approx(0.3)
    assert overall["a"].attempts == pytest.approx(3.0)
    # c: w1 auc 0.5*0.6=0.3, penalty 0.5 -> 0.25; w2 auc 0 (work 1), penalty 1 -> -0.1
    assert overall["c"].v2 == pytest.approx(0.075)
    assert overall["c"].errors == 1 and overall["c"].worlds == 2
    assert [(r.policy, r.rank) for r in board.overall] == [("a", 1), ("b", 1), ("c", 3)]
    assert [(r.policy, r.rank) for r in board.per_world["w1"]] == [("a", 1), ("b", 1), ("c", 3)]
    md = board.to_markdown()
    assert "| 1= | a |" in md and "| 1= | b |" in md and "| 3 | c |" in md
    assert "1/2" in md  # c's errors: 1 of its 2 episodes
    text = board.to_text()
    assert "World w2" in text and "1=" in text
    assert board.errors == [("c", "w2", 0.5, "Boom: x")]
    by_v = leaderboard(rows, rank_by="V")
    assert [(r.policy, r.rank) for r in by_v.per_world["w1"]] == [("c", 1), ("a", 2), ("b", 2)]  # V 0.9 > 0.5
    # overall c's mean V 0.35 > 0.3, but one of its episodes failed: after every row without one
    assert [(r.policy, r.rank) for r in by_v.overall] == [("a", 1), ("b", 1), ("c", 3)]


def test_a_policy_whose_episodes_fail_ranks_after_those_that_played() -> None:
    """A policy failing every episode did nothing (V 0, nothing off the record), which ranked it
    above a policy whose attempts cost more than they found (V < 0), with "on record" 100 %."""
    rows = [result("greedy", "w", beta, v=-0.07, work=0.3, attain=0.2, attempts=6, rounds=3) for beta in (0.0, 1.0)]
    rows += [result("crashing.py", "w", beta, v=0.0, work=0.0, attain=0.0, attempts=0, rounds=0,
                    error="PolicyException: boom") for beta in (0.0, 1.0)]
    for row in rows:
        row.refused, row.cut_short, row.answerable = 0, False, (None if row.error else 1.0)
    for rank_by in ("v2", "V"):
        board = leaderboard(rows, rank_by=rank_by)
        assert [(r.policy, r.rank) for r in board.overall] == [("greedy", 1), ("crashing.py", 2)]
        assert [(r.policy, r.rank) for r in board.per_world["w"]] == [("greedy", 1), ("crashing.py", 2)]
    crashing = board.overall[1]
    assert crashing.errors == 2 and math.isnan(crashing.on_record) and math.isnan(crashing.coverage)
    assert board.overall[0].on_record == 1.0
    assert "| 2 | crashing.py |" in board.to_markdown() and "n/a" in board.to_markdown()
    # two failing policies are ranked among themselves by the same key, and tie as others do
    twin = [dataclasses.replace(r, policy="crashing2.py") for r in rows if r.error]
    assert [(r.policy, r.rank) for r in leaderboard(rows + twin).overall] == [
        ("greedy", 1), ("crashing.py", 2), ("crashing2.py", 2)]


def test_leaderboard_renders_rich_tables() -> None:
    from rich.console import Console

    rows = [result("a", "w", b, v=0.1, work=0.1, attain=0.3, attempts=2, rounds=1) for b in BETAS]
    board = leaderboard(rows)
    console = Console(record=True, width=140)
    board.print(console)
    out = console.export_text()
    assert "Leaderboard" in out and " a " in out and "0.300" in out  # attainment 0.3
    assert len(board.to_rich()) == 1  # one world: no per-world tables


def test_leaderboard_matches_v2_objective_on_real_results(worlds_dir: Path) -> None:
    results = evaluate(["greedy", "fixed"], str(worlds_dir), None, backend="serial", progress=False)
    board = leaderboard(results, lam=0.2)
    for world, rows in board.per_world.items():
        for row in rows:
            eps = [r for r in results if r.world == world and r.policy == row.policy]
            expected = v2_objective([(r.work, r.attainment, r.rounds, r.attempts) for r in eps], lam=0.2)
            assert row.v2 == pytest.approx(expected.value)
    with pytest.raises(ValueError):
        leaderboard([])


def test_module_exports() -> None:
    assert set(ev.__all__) <= set(dir(ev))


def test_small_grids_of_built_ins_and_files_run_in_this_process_by_default(tmp_path: Path) -> None:
    """A grid of at most SMALL_GRID_NODE_EPISODES node-episodes starts no job process when no
    jobs are given; a module:Class or a model keeps the job process (its watchdog)."""
    small = resolve_worlds([make_world(tmp_path / "w0", 40, 0), make_world(tmp_path / "w1", 40, 1)])
    betas = DEFAULT_BETA_GRID
    assert ev._small_grid(["greedy", "agents/example_policy.py"], small, betas)
    assert not ev._small_grid(["greedy", "test_jobs:BlockingPolicy"], small, betas)
    assert not ev._small_grid(["ppo-options-v"], small, betas)
    many = len(betas) * sum(w.size for w in small)
    assert not ev._small_grid(["greedy"] * (ev.SMALL_GRID_NODE_EPISODES // many + 1), small, betas)


def test_a_folder_of_worlds_holds_the_worlds_of_its_subfolders_too(tmp_path):
    """``worlds/`` with worlds of its own beside ``worlds/all/<world>`` (a folder import's output):
    every world, in path order (the nested ones were left out without a word)."""
    make_world(tmp_path / "mine", 20, 0)
    for seed in (1, 2):
        make_world(tmp_path / "all" / f"run{seed}", 20, seed)
    make_world(tmp_path / "all" / "run1" / "openevolve" / "deep", 20, 3)  # inside a world: not a world of the folder
    make_world(tmp_path / ".hidden" / "w", 20, 4)
    assert [w.id for w in resolve_worlds(tmp_path)] == ["w1", "w2", "w0"]
    assert [w.id for w in resolve_worlds(tmp_path / "all")] == ["w1", "w2"]


def test_one_run_imported_twice_is_refused_where_a_mean_is_taken(tmp_path, capsys):
    make_world(tmp_path / "worlds" / "fnmin", 20, 0, world_id="fnmin")
    shutil.copytree(tmp_path / "worlds" / "fnmin", tmp_path / "worlds" / "fnmin2")
    meta = tmp_path / "worlds" / "fnmin2" / "world.json"
    meta.write_text(meta.read_text().replace('"fnmin"', '"fnmin2"'))
    assert [w.id for w in resolve_worlds(tmp_path / "worlds")] == ["fnmin", "fnmin2"]  # listed, shown, validated
    with pytest.raises(LookupError, match=r"one run is twice in the worlds: 'fnmin' .* and 'fnmin2' .* same programs"):
        evaluate(["greedy"], tmp_path / "worlds", [0.5])
    assert main(["eval", "-p", "greedy", "--worlds", str(tmp_path / "worlds"), "--betas", "0.5"]) == 2
    assert "one run is twice in the worlds" in capsys.readouterr().err
    assert main(["dream", "--history", str(tmp_path / "worlds"), "--policy", "greedy", "--developer", "builtin",
                 "-M", "2", "--validate", "none", "--out", str(tmp_path / "dream")]) == 2
    assert "one run is twice in the history" in capsys.readouterr().err and not (tmp_path / "dream").exists()


def test_a_deployed_run_and_its_systems_output_imported_are_one_run() -> None:
    """The checks compared the nodes files' checksums: a deploy's world and the import of its
    system's own output (the same programs, with the system's iterations as rounds, its own W, an
    error worded otherwise) counted as two runs, so `dream --validate` called the run held out and
    reported its gain on the history again as a held-out gain."""
    import random

    from worldgen import make_world, random_records

    from dream_gym.evaluation.world_specs import check_distinct_runs, check_held_out
    from dream_gym.world.tree import prefix_world

    records = random_records(random.Random(0), 30, extras=True)
    deployed = make_world(records, world_id="deployed", workers=2)
    imported = make_world([{**r, "round": i, "worker": None, **({"error": r["error"] + " (in its own words)"}
                                                                 if r.get("error") else {})}
                           for i, r in enumerate(records)], world_id="imported", workers=1)
    other_run = make_world(random_records(random.Random(1), 30, extras=True), world_id="other", workers=2)
    with pytest.raises(LookupError, match=r"'deployed' .* and 'imported' .* hold the same programs"):
        check_distinct_runs([deployed, other_run, imported])
    with pytest.raises(ValueError, match=r"\['imported' \(the run of the history's 'deployed'\)\]"):
        check_held_out([other_run, deployed], [imported], "history")
    part = prefix_world(deployed, 12)  # an import taken while the run was being written
    with pytest.raises(ValueError, match=r"the run of the history's 'deployed'"):
        check_held_out([deployed], [part], "history")
    check_distinct_runs([deployed, other_run])  # two runs of one task: the same root, other programs
    check_held_out([deployed], [other_run], "history")


def test_leaderboard_takes_a_results_file_and_names_what_it_cannot_rank(worlds_dir: Path, tmp_path: Path) -> None:
    # a path was ranked as its letters ("'str' object has no attribute 'get'")
    out = tmp_path / "results.jsonl"
    results = evaluate(["greedy", "fixed"], str(worlds_dir), BETAS, backend="serial", progress=False, out=out)
    assert leaderboard(out).to_markdown() == leaderboard(results).to_markdown() == leaderboard(str(out)).to_markdown()
    with pytest.raises(TypeError, match="leaderboard ranks EpisodeResults or results rows .dicts., got str"):
        leaderboard(["abc"])


def test_a_failing_policys_first_error_is_cut_on_its_line() -> None:
    """The error is the policy's own text: 2,000 characters of it went on one line."""
    rows = [result("long.py", "w", 0.5, v=0.0, work=0.0, attain=0.0, attempts=0, rounds=0, error="E" * 5000)]
    (failure,) = leaderboard(rows).failures()
    line = failure.line()
    assert len(line) < 600 and "[cut: 5000 characters in all]" in line and line.endswith("(on w, beta 0.5)")
