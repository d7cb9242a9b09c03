"""The online loop: real discovery rounds, durable records, resume after kill -9, the schedule
invariant, budgets, evidence, failure classes, the survival check and the LLM agent over HTTP."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from recorded_schedule import online_replay_score, replay_recorded_schedule, rounds_of

from dream_gym.cli import main as cli_main
from dream_gym.online.evidence import read_evidence, stagnation_class, survival_check
from dream_gym.online.loop import AttemptFailed, GrowConfig, check_online_batch, grow, tree_view
from dream_gym.online.tasks import get_task
from dream_gym.policies import make_policy
from dream_gym.policy import FunctionPolicy
from dream_gym.replay.mechanics import IllegalBatchError
from dream_gym.world.tree import load_world
from tests.openai_server import OpenAICompatServer


def _grow(tmp_path: Path, policy, **overrides):
    config = GrowConfig(**{"task": "sum-difference", "out": tmp_path / "world", "workers": 2, "rounds": 4,
                           "seed": 3, "backend": "serial", **overrides})
    return grow(config, policy)


def test_grown_world_loads_with_rounds_workers_and_checksum(tmp_path):
    result = _grow(tmp_path, make_policy("random", p_stop=0.0))
    world = load_world(result.folder)
    assert world.size == result.nodes >= 2
    assert world.meta["sha256"]  # finished worlds carry their checksum
    assert world.meta["task"]["name"] == "sum-difference"
    assert all(isinstance(r["round"], int) for r in world.records)
    assert all(0 <= r["worker"] < 2 for r in world.records[1:])
    assert all("code" in r and "diagnostics" in r and "duration_s" in r for r in world.records[1:])


def test_replaying_own_schedule_reveals_the_same_nodes_round_by_round(tmp_path):
    result = _grow(tmp_path, make_policy("random", p_stop=0.0), rounds=6, backend="process")
    world = load_world(result.folder)
    session, revealed = replay_recorded_schedule(world)
    recorded = [set(v) for v in rounds_of(world).values()]
    assert revealed == recorded
    assert session.value == pytest.approx(online_replay_score(world), abs=1e-12)


def test_policy_stop_ends_the_run(tmp_path):
    calls = []

    def two_rounds(view):
        calls.append(view.rounds)
        return [0] if view.rounds < 2 else []

    result = _grow(tmp_path, FunctionPolicy(two_rounds))
    assert result.stopped_by == "policy"
    assert result.nodes == 3
    assert calls == [0, 1, 2]


def test_max_attempts_budget_trims_the_last_batch(tmp_path):
    result = _grow(tmp_path, make_policy("random", p_stop=0.0), max_attempts=3, rounds=10)
    assert result.attempts == 3
    assert result.stopped_by == "max_attempts"


def test_illegal_online_batch_is_refused_with_the_reason(tmp_path):
    result = _grow(tmp_path, FunctionPolicy(lambda v: [0] if v.rounds == 0 else []))
    world = load_world(result.folder)
    view = tree_view(list(world.records), dict(world.meta), workers=2, beta=0.5, frontier="leaves",
                     rounds=1, max_rounds=4)
    assert view.frontier == (0, 1)
    with pytest.raises(IllegalBatchError, match="the policy selected id 1 twice"):
        check_online_batch(view, [1, 1])
    with pytest.raises(IllegalBatchError, match="the policy's batch of 3 selections exceeds W=2"):
        check_online_batch(view, [0, 0, 1])
    with pytest.raises(IllegalBatchError, match=r"^the policy selected id 7, which is not on the frontier of the real "
                                                r"tree \(ids 0..1 exist; 2 are open\)$"):
        check_online_batch(view, [7])


def test_online_view_holds_no_future_and_no_world(tmp_path):
    result = _grow(tmp_path, make_policy("random", p_stop=0.0), rounds=2)
    world = load_world(result.folder)
    view = tree_view(list(world.records), dict(world.meta), workers=2, beta=0.5, frontier="leaves",
                     rounds=2, max_rounds=4)
    assert len(view.nodes) == world.size
    assert view.root_slots == 2  # online, the root can always open W more branches
    assert "best_score" not in view.to_dict()


def test_a_view_built_on_an_earlier_views_nodes_is_the_view_built_afresh():
    """``tree_view(..., known=earlier.nodes)`` reuses the node views of a prefix: on a shipped world
    of several branches, stepped through round by round, each view equals the one built from the
    records alone (the branches the known nodes opened are counted, not restarted)."""
    from dream_gym.world.registry import resolve_world

    world = resolve_world("cp26-puct-w4-s1")
    records, meta = [dict(r) for r in world.records], dict(world.meta)
    view = tree_view(records[:1], meta, rounds=0)
    for cut in (2, 5, 9, 30, 31, world.size):
        view = tree_view(records[:cut], meta, rounds=cut, known=view.nodes)
        assert view == tree_view(records[:cut], meta, rounds=cut)
    assert len({node.branch for node in view.nodes[1:]}) > 1
    # the control: the known nodes are taken as they are (a changed one stays changed), so the
    # equality above comes from reusing them, not from building every node again
    changed = [*view.nodes[:5], dataclasses.replace(view.nodes[5], diagnostics="changed")]
    assert tree_view(records[:9], meta, rounds=1, known=changed).nodes[5].diagnostics == "changed"


def test_evidence_record_per_attempt_is_admissible_and_hashed(tmp_path):
    result = _grow(tmp_path, make_policy("random", p_stop=0.0))
    evidence = read_evidence(result.folder)
    assert len(evidence) == result.nodes  # the root's evaluation included
    for record in evidence:
        for key in ("t", "cmd", "exit", "duration_ms", "artifacts", "env_digest", "parsed", "admissible"):
            assert key in record, key
        assert record["env_digest"].startswith("sha256:")
        assert all(len(a["sha256"]) == 64 for a in record["artifacts"])
    assert {r["node"] for r in evidence} == set(load_world(result.folder).ids)


def test_stagnation_marks_sustained_poor_valid_attempts_hard():
    assert stagnation_class([1.0, 2.0, 1.5, 1.9], 1.8) == "hard"
    assert stagnation_class([1.0, 2.0, 1.5, 1.9], 2.5) is None  # a new best
    assert stagnation_class([1.0, None, 2.0], 1.0) is None  # too little valid evidence yet
    assert stagnation_class([1.0, 2.0, 1.5, 1.9], None) is None  # invalid: the evaluator classifies


def test_failed_attempts_carry_error_and_failure_class(tmp_path):
    result = _grow(tmp_path, make_policy("random", p_stop=0.0), rounds=12, workers=4)
    world = load_world(result.folder)
    failed = [r for r in world.records if r["score"] is None]
    assert failed, "the built-in agent should fail sometimes, like an LLM"
    assert all(r["error"] and r["fail_class"] in ("repairable", "hard") for r in failed)


def test_survival_check_reported_in_world_meta(tmp_path):
    result = _grow(tmp_path, make_policy("greedy", patience=2))
    meta = load_world(result.folder).meta
    survival = meta["survival"]
    assert survival["survived"] is True and survival["valid_runs"] == survival["repeats"] == 1
    assert survival["mean"] == pytest.approx(result.best_score)


def test_a_noisy_tasks_survival_says_how_far_the_re_runs_fall_from_the_record():
    """Valid re-runs of a noisy task survive; their mean, far below the recorded best (chosen partly
    for its luck), was reported as "all re-runs valid" alone."""
    task = get_task("lasso-path")
    first = survival_check(task, task.initial_program(), recorded_score=None, repeats=2)
    assert first.survived and first.mean is not None
    luckier = first.mean / 1.5 if task.direction == "minimize" else first.mean * 1.5
    survival = survival_check(task, task.initial_program(), recorded_score=luckier, repeats=2)
    assert survival.survived and survival.note.startswith("all re-runs valid; their mean is ")
    assert re.search(r"is \d+% worse than the recorded [0-9.]+ \(the best of a noisy metric's runs is chosen "
                     r"partly for its luck\)$", survival.note), survival.note


def test_existing_world_needs_resume(tmp_path):
    _grow(tmp_path, FunctionPolicy(lambda v: []))
    with pytest.raises(FileExistsError, match="--resume"):
        _grow(tmp_path, FunctionPolicy(lambda v: []))


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` but the lock file, by its relative path."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file() and path.name != ".lock"}


def test_a_new_run_is_refused_a_folder_that_holds_something_else(tmp_path):
    (tmp_path / "world").mkdir()
    (tmp_path / "world" / "keep.txt").write_text("keep")
    with pytest.raises(FileExistsError, match=r"output folder exists and is not empty \(it holds keep.txt\)"):
        _grow(tmp_path, FunctionPolicy(lambda v: []))
    # --resume of it started a new run among its files (a dataset's folder in the store, say)
    with pytest.raises(FileExistsError, match=r"--resume: .* holds no world to continue \(no nodes.jsonl\), but other "
                                              r"files"):
        _grow(tmp_path, FunctionPolicy(lambda v: []), resume=True)
    assert files_of(tmp_path / "world") == {"keep.txt": b"keep"}


def test_resume_of_a_different_task_is_refused(tmp_path):
    result = _grow(tmp_path, FunctionPolicy(lambda v: []))
    before = files_of(result.folder)
    with pytest.raises(ValueError, match="task 'sum-difference'"):
        _grow(tmp_path, FunctionPolicy(lambda v: []), task="circle-packing-26", resume=True)
    assert files_of(result.folder) == before  # the finished world keeps its sha256


@pytest.mark.parametrize(("changed", "message"), [({"workers": 3}, "workers 2, not 3"), ({"seed": 4}, "seed 3, not 4"),
                                                 ({"policy_params": {"patience": 9}}, "policy_params {}, not")])
def test_resume_with_other_run_settings_is_refused(tmp_path, changed, message):
    """More rounds continue the run; another W, seed or policy would not be the run world.json records."""
    _grow(tmp_path, make_policy("greedy"), rounds=1)
    result = _grow(tmp_path, make_policy("greedy"), rounds=2, resume=True)  # control: the same run, longer
    before = files_of(result.folder)
    with pytest.raises(ValueError, match=f"recorded with {re.escape(message)}"):
        _grow(tmp_path, make_policy("greedy"), rounds=3, resume=True, **changed)
    assert files_of(result.folder) == before and "sha256" in json.loads(before["world.json"])


def test_resume_with_other_settings_quotes_the_command_to_give_again(tmp_path):
    """--resume takes the recorded settings only as given again: the refusal quotes the command
    world.json records (with --resume once), which a user can paste."""
    _grow(tmp_path, make_policy("greedy"), rounds=1, command="dream-gym grow --task sum-difference -W 2 --resume")
    with pytest.raises(ValueError, match=re.escape(
            "(give its command again with --resume: dream-gym grow --task sum-difference -W 2 --resume; "
            "or start a new --out)")):
        _grow(tmp_path, make_policy("greedy"), rounds=2, resume=True, workers=3)


def test_a_run_grown_further_says_its_rounds_and_command_in_world_json(tmp_path):
    """world.json kept the first command's rounds and command line when --resume --rounds grew
    the world further; a shorter resume changes neither."""
    _grow(tmp_path, make_policy("random", p_stop=0.0), rounds=1, command="dream-gym grow --rounds 1")
    result = _grow(tmp_path, make_policy("random", p_stop=0.0), rounds=3, resume=True,
                   command="dream-gym grow --rounds 3 --resume")
    world = load_world(result.folder)
    assert max(r["round"] for r in world.records) == 3
    assert (world.meta["rounds"], world.meta["command"]) == (3, "dream-gym grow --rounds 3 --resume")
    _grow(tmp_path, make_policy("random", p_stop=0.0), rounds=2, resume=True, command="dream-gym grow --rounds 2")
    assert (load_world(result.folder).meta["rounds"], load_world(result.folder).meta["command"]) == (
        3, "dream-gym grow --rounds 3 --resume")


def test_a_run_resumed_to_fewer_rounds_than_it_was_started_with_says_so(tmp_path):
    # a run of --rounds 300 cut early and resumed with --rounds 40 still said 300
    _grow(tmp_path, make_policy("random", p_stop=0.0), rounds=9, max_attempts=2, command="dream-gym grow --rounds 9")
    assert max(r["round"] for r in load_world(tmp_path / "world").records) == 1
    result = _grow(tmp_path, make_policy("random", p_stop=0.0), rounds=2, resume=True,
                   command="dream-gym grow --rounds 2 --resume")
    world = load_world(result.folder)
    assert max(r["round"] for r in world.records) == 2
    assert (world.meta["rounds"], world.meta["command"]) == (2, "dream-gym grow --rounds 2 --resume")
    # the summary says which figures are the world's and which this run's (attempts were the
    # world's, failures this run's, under one scope-less pair of keys)
    summary = result.summary()
    assert summary["attempts"] == world.size - 1
    assert summary["failures"] == sum(1 for r in world.records[1:] if r["score"] is None)
    assert (summary["attempts_this_run"], summary["failures_this_run"]) == (
        sum(s.attempts for s in result.round_stats), sum(s.failures for s in result.round_stats))
    assert summary["attempts_this_run"] == summary["attempts"] - 2  # the first run's two attempts aside


@pytest.mark.slow
def test_kill_9_then_resume_loses_nothing_written_and_duplicates_nothing(tmp_path):
    out = tmp_path / "world"
    command = [sys.executable, "-m", "dream_gym", "grow", "--task", "sum-difference", "--policy", "random",
               "--policy-arg", "p_stop=0", "--workers", "2", "--rounds", "40", "--seed", "5", "--out", str(out),
               "--quiet"]
    process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    nodes = out / "nodes.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not nodes.exists() or nodes.read_bytes().count(b"\n") < 12):
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    before = nodes.read_bytes()
    complete_lines = before[: before.rfind(b"\n") + 1].splitlines()
    assert len(complete_lines) >= 12

    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    world = load_world(out)  # validates: unique ids, parents before children, one root
    after = nodes.read_bytes().splitlines()
    assert after[: len(complete_lines)] == complete_lines  # nothing written was lost or rewritten
    assert sum(1 for r in world.records if r["parent"] is None) == 1
    assert world.size > len(complete_lines)
    assert max(rounds_of(world)) == 40 or json.loads((out / "run_summary.json").read_text())["stopped_by"] != "rounds"
    session, revealed = replay_recorded_schedule(world)
    assert revealed == [set(v) for v in rounds_of(world).values()]


def test_cli_grow_writes_world_and_summary(tmp_path, capsys):
    out = tmp_path / "cli-world"
    code = cli_main(["grow", "--task", "sum-difference", "--policy", "fixed", "--policy-arg", "branches=2",
                     "--policy-arg", "depth=2", "--workers", "2", "--rounds", "5", "--out", str(out),
                     "--backend", "serial", "--quiet"])
    assert code == 0
    world = load_world(out)
    assert world.size == 5  # 2 branches x depth 2
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["nodes"] == 5 and summary["stopped_by"] == "policy"
    printed = capsys.readouterr()
    # a run its policy ended early says how to run longer, once
    assert (printed.out + printed.err).count("before its budget, by its own stop rule: a higher --beta") == 1


def test_the_stop_hint_names_a_patience_the_run_was_given():
    from dream_gym.cli.options import stop_hint

    assert stop_hint("policy", "greedy").endswith("a higher --beta makes the built-in policies more patient "
                                                  "(greedy: --policy-arg patience=N)")
    for spec, args in (("greedy(patience=2)", ()), ("greedy", ["patience=2"])):
        assert stop_hint("policy", spec, args) == ("the policy ended the run before its budget, by its own stop "
                                                   "rule: 2 rounds without a new best (a larger patience runs "
                                                   "longer)")


def test_cli_grow_rejects_malformed_policy_arg(tmp_path, capsys):
    code = cli_main(["grow", "--task", "sum-difference", "--policy-arg", "branches", "--out", str(tmp_path / "w")])
    assert code == 2
    assert "KEY=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize(("option", "value", "message"), [
    ("-W", "5000", "argument -W/--workers: must be at most 4096, got 5000"),  # a world's bound: it left an empty folder
    # named by the option, not the Python argument (evaluation_timeout_s)
    ("--max-seconds", "-1", "argument --max-seconds: must be a number > 0, got -1"),
    ("--max-usd", "0", "argument --max-usd: must be a number > 0, got 0"),
    ("--evaluation-timeout", "nan", "argument --evaluation-timeout: must be a number > 0, got nan"),
    ("--beta", "3", "argument --beta: must be a number in [0, 1], got 3"),
    # a dollar limit with the built-in agent, which spends nothing (it was accepted without a word)
    ("--max-usd", "1", "max_usd: the built-in agent makes no LLM call, so it spends nothing; a dollar limit "
                       "applies to an LLM agent (--agent MODEL)"),
])
def test_cli_grow_refuses_a_setting_no_run_can_have_before_it_writes(tmp_path, capsys, option, value, message):
    """Refused when the config is made: no world folder is left to refuse the corrected command
    ("already holds a world"), and no run that stops at once is reported as grown."""
    out = tmp_path / "w"
    width = ["-W", "2"] if option != "-W" else []
    try:
        code = cli_main(["grow", "--task", "sum-difference", *width, option, value, "--out", str(out)])
    except SystemExit as exit_:  # argparse's, for an option's type
        code = exit_.code
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"dream-gym grow: error: {message}"
    assert not out.exists()


def test_a_spending_limit_on_a_model_without_a_price_is_refused_before_the_run(tmp_path, capsys):
    """Each call of a model litellm has no price for counted $0: ``--max-usd 0.000001`` made all
    the run's calls and said "stopped by rounds"."""
    with OpenAICompatServer() as server:
        command = ["grow", "--task", "sum-difference", "-W", "2", "--rounds", "3", "--api-base", server.base_url,
                   "--max-usd", "0.000001"]
        out = tmp_path / "w"
        assert cli_main([*command, "--agent", "openai/local-coder", "--out", str(out)]) == 2
        said = capsys.readouterr().err
        assert "max_usd (--max-usd) cannot be kept for model 'openai/local-coder': litellm knows no price" in said
        assert not out.exists() and not server.requests
        server.responder = lambda request: "```python\ndef construct_set():\n    return [0, 1]\n```"
        assert cli_main([*command, "--agent", "openai/gpt-4o-mini", "--out", str(out)]) == 0  # priced: it runs
        assert "stopped by --max-usd" in capsys.readouterr().out


def test_llm_agent_grows_a_world_over_real_http(tmp_path, monkeypatch):
    program = "def construct_set():\n    return [0, 1, 3, 7, 12, 20, 30, 44]\n"
    with OpenAICompatServer() as server:
        server.responder = lambda request: f"Try a Sidon-like set.\n```python\n{program}```"
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value")
        result = _grow(tmp_path, make_policy("fixed", branches=2, depth=1), agent="openai/local-coder",
                       api_base=server.base_url)
        assert len(server.requests) == 2
    world = load_world(result.folder)
    children = world.records[1:]
    assert [r["code"].strip() for r in children] == [program.strip()] * 2
    assert all(r["cost"]["tokens_in"] > 0 for r in children)
    assert "sk-test-secret-value" not in (result.folder / "nodes.jsonl").read_text()


def test_an_llm_no_call_can_reach_is_refused_before_the_run_folder_is_made(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="--api-base http://127.0.0.1:9/v1: nothing accepts a connection"):
        _grow(tmp_path, make_policy("fixed"), agent="openai/nobody", api_base="http://127.0.0.1:9/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="model openai/gpt-4o-mini: OPENAI_API_KEY is not set in the environment"):
        _grow(tmp_path, make_policy("fixed"), agent="openai/gpt-4o-mini")
    assert not (tmp_path / "world").exists()


def test_an_llm_that_goes_away_stops_the_run_with_a_clear_error_and_keeps_the_root(tmp_path):
    with OpenAICompatServer() as server:  # reachable when the run is set up
        config = GrowConfig(task="sum-difference", out=tmp_path / "world", workers=2, rounds=4, seed=3,
                            backend="serial", agent="openai/nobody", api_base=server.base_url)
    with pytest.raises(AttemptFailed, match="could not run"):
        grow(config, make_policy("fixed", branches=1, depth=1))
    assert load_world(tmp_path / "world").size == 1


@pytest.mark.slow
def test_ray_backend_grows_the_same_kind_of_world(tmp_path):
    import ray  # the ray extra is part of make test's install

    try:
        result = _grow(tmp_path, make_policy("fixed", branches=2, depth=2), backend="ray", rounds=3)
    finally:
        ray.shutdown()
    world = load_world(result.folder)
    assert world.size == 5
    session, revealed = replay_recorded_schedule(world)
    assert revealed == [set(v) for v in rounds_of(world).values()]


def _growing(out: Path, task: str = "circle-packing-26", workers: int = 2) -> subprocess.Popen[str]:
    """A ``grow`` that runs long, once it has written three nodes."""
    proc = subprocess.Popen([sys.executable, "-m", "dream_gym", "grow", "--task", task, "--agent",
                             "builtin", "--policy", "greedy", "--policy-arg", "patience=1000", "-W", str(workers),
                             "--rounds", "1000", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 120
    nodes = out / "nodes.jsonl"
    while time.time() < deadline and not (nodes.exists() and len(nodes.read_text().splitlines()) >= 3):
        time.sleep(0.05)
    return proc


# Ctrl-C reaches the terminal's whole process group: each job process printed its own
# KeyboardInterrupt traceback under the command's "interrupted". SIGTERM (`timeout`, a job
# scheduler) reaches the command alone, and ended it on the spot without a word.
@pytest.mark.parametrize(("number", "status", "group"), [(signal.SIGINT, 130, True), (signal.SIGTERM, 143, False)])
def test_ctrl_c_or_sigterm_says_interrupted_once_without_a_jobs_traceback(tmp_path, number, status, group):
    out = tmp_path / "world"
    proc = _growing(out)
    if group:
        os.killpg(proc.pid, number)  # what a terminal's Ctrl-C does: the whole foreground group
    else:
        proc.send_signal(number)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == status
    assert stderr.rstrip().splitlines()[-1] == (f"interrupted: what was finished is kept in {out}; the same command "
                                                 "with --resume continues it"), stderr[-3000:]
    assert "Traceback" not in stderr and sum(line.startswith("interrupted") for line in stderr.splitlines()) == 1


def test_kill_9_leaves_no_job_traceback_on_the_terminal(tmp_path):
    # the jobs outlive a killed command by a moment; each one that finished its task then failed
    # to send it, twice, and printed both BrokenPipeErrors on the command's terminal
    proc = _growing(tmp_path / "world", "sum-difference", 4)  # short tasks: most jobs finish one after the kill
    proc.kill()
    _, stderr = proc.communicate(timeout=120)  # the pipe ends once the last job is gone
    assert proc.returncode == -signal.SIGKILL
    assert "Traceback" not in stderr, stderr[-3000:]


def _cut(whole: Path, folder: Path, lines: int, evidence_ahead: int = 0) -> None:
    """``whole``'s world as a kill -9 after its first ``lines`` nodes leaves it: the nodes and
    their evidence so far (``evidence_ahead``: the evidence of that many more attempts, whose nodes
    the kill kept from being written), the metadata without the checksum and survival a finished
    run adds."""
    folder.mkdir(parents=True)
    for name, count in (("nodes.jsonl", lines), ("evidence.jsonl", lines + evidence_ahead)):
        kept = (whole / name).read_text().splitlines(keepends=True)[:count]
        (folder / name).write_text("".join(kept))
    meta = json.loads((whole / "world.json").read_text())
    for key in ("sha256", "survival"):
        meta.pop(key, None)
    (folder / "world.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(("lines", "evidence_ahead"), [(4, 0), (6, 0), (6, 1)])
# cut after round 1 (root + 3), and inside round 2 (2 of its 3; and between an attempt's evidence and its node)
def test_a_resumed_run_grows_the_world_the_uninterrupted_run_grows(tmp_path, lines, evidence_ahead):
    """The random policy's generator (any policy's memory) started again at a resume, and the
    slots a kill cut from a round were never run: the resumed world differed from the one the
    seed gives. The policy now chooses its recorded rounds again, and the lost slots run."""
    settings = {"task": "sum-difference", "workers": 3, "rounds": 5, "seed": 4, "backend": "serial"}
    whole = grow(GrowConfig(**settings, out=tmp_path / "whole"), make_policy("random", p_stop=0.0))
    _cut(whole.folder, tmp_path / "cut", lines, evidence_ahead)
    resumed = grow(GrowConfig(**settings, out=tmp_path / "cut", resume=True), make_policy("random", p_stop=0.0))
    evidence = read_evidence(resumed.folder)  # one record an attempt: none lost, none twice
    assert [r["node"] for r in evidence] == list(load_world(resumed.folder).ids)

    def tree(folder):
        return [(r["id"], r["parent"], r["score"], r.get("code")) for r in load_world(folder).records]

    assert tree(resumed.folder) == tree(whole.folder) and len(tree(whole.folder)) == 16
    assert "chose its 2 recorded round(s) again" in resumed.resumed if lines == 6 else "1 recorded" in resumed.resumed
    assert "3 slot(s)" not in resumed.resumed
    assert ("round 2's 1 slot(s) with no node (cut short by a kill or by --max-attempts) are run now"
            in resumed.resumed) == (lines == 6)


def test_a_policy_that_chooses_otherwise_on_the_record_goes_on_and_says_so(tmp_path):
    settings = {"task": "sum-difference", "workers": 2, "rounds": 3, "seed": 4, "backend": "serial"}
    whole = grow(GrowConfig(**settings, out=tmp_path / "whole"), make_policy("random", p_stop=0.0))
    _cut(whole.folder, tmp_path / "cut", 3)
    calls = []

    def forgetful(view):  # remembers the calls of this process, which the record does not hold
        calls.append(view.rounds)
        return [0] if len(calls) % 2 else [0, 0]

    resumed = grow(GrowConfig(**settings, out=tmp_path / "cut", resume=True), FunctionPolicy(forgetful))
    assert "did not choose round 1's recorded batch again" in resumed.resumed
    assert load_world(resumed.folder).size > 3
