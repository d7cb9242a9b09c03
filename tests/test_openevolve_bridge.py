"""The OpenEvolve bridge (dream_gym.integrations.openevolve, `dream-gym openevolve run`).

OpenEvolve runs for real (the installed 0.4 package, its process pool, its database,
checkpoints and trace) against the built-in agent server; nothing is mocked. Small budgets:
W = 2, a handful of iterations.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openevolve")

from dream_gym import load_world  # noqa: E402
from dream_gym.datasets.importers import import_run  # noqa: E402
from dream_gym.integrations.openevolve import (  # noqa: E402
    BridgeConfig,
    check_openevolve,
    combined_score,
    evaluate_program,
    run_openevolve,
    task_score,
)
from dream_gym.online.agent_server import AgentServer  # noqa: E402
from dream_gym.online.loop import tree_view  # noqa: E402
from dream_gym.policies import make_policy  # noqa: E402
from dream_gym.policy import RunContext, batch_from  # noqa: E402

TASK = "circle-packing-26"
# A policy file (run isolated, as every policy file): two rounds of [root, best], then stop.
# It stops at once instead when it can read the file SECRET: as a policy file it runs isolated, so it cannot.
TWO_ROUNDS = '''
SECRET = {secret!r}


class Policy:
    def reset(self, context):
        self.w = context.workers
    def act(self, view):
        try:
            with open(SECRET) as handle:
                handle.read()
            return []
        except OSError:
            pass
        if view.rounds >= 2:
            return []
        best = view.best()
        picks = [0] if best.id == 0 else [0, best.id]
        return picks[: self.w]
'''


def nodes(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "nodes.jsonl").read_text().splitlines() if line.strip()]


def tree(records: list[dict]) -> dict[str, tuple]:
    return {r["id"]: (r["parent"], r["score"], r.get("code"), r.get("error")) for r in records}


def test_supported_version_and_evaluator_file(tmp_path: Path) -> None:
    assert check_openevolve().startswith("0.4.")
    program = tmp_path / "p.py"
    from dream_gym.online.tasks import get_task

    program.write_text(get_task(TASK).initial_program())
    result = evaluate_program(TASK, str(program))
    assert result.metrics["combined_score"] == pytest.approx(result.metrics["score"])
    assert result.metrics["score"] > 0.9
    program.write_text("def construct_packing(:\n")
    bad = evaluate_program(TASK, str(program))
    assert bad.metrics["combined_score"] == 0.0 and "SyntaxError" in bad.metrics["error"]
    assert bad.artifacts["fail_class"] == "repairable"
    assert task_score(combined_score(2.5, "minimize"), "minimize") == pytest.approx(2.5)
    assert combined_score(2.0, "minimize") > combined_score(4.0, "minimize") > 0


def test_deploys_options_are_checked_before_anything_runs(tmp_path: Path) -> None:
    """``--option`` takes the settings OpenEvolve's deploy has; another key (or one the verb sets
    itself, like the seed) is one line naming the options, before the out folder is made."""
    out = tmp_path / "world"
    for option, message in (("search=topk", "unknown OpenEvolve option(s) search; the options are config_path "
                                            "(default the system's own)"),
                            ("seed=3", "unknown OpenEvolve option(s) seed"),
                            ("checkpoint_interval=0", "--option checkpoint_interval=0: a whole number >= 1"),
                            ("frontier=all", "--option frontier='all': one of"),
                            ("config_path=missing.yaml", "--option config_path=missing.yaml: no such file")):
        done = subprocess.run([sys.executable, "-m", "dream_gym", "deploy", "--system", "openevolve", "--task", TASK,
                               "--budget", "2", "--option", option, "--out", str(out)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and message in done.stderr, (option, done.stderr)
        assert done.stderr.count("error:") == 1 and "Traceback" not in done.stderr and not out.exists()


@pytest.fixture(scope="module")
def policy_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("bridge") / "world"
    result = run_openevolve(BridgeConfig(task=TASK, out=out, policy="ucb", workers=2, iterations=10, seed=3,
                                         checkpoint_interval=4))
    return out, result


@pytest.mark.slow
def test_the_policy_picks_every_parent_in_rounds_of_w(policy_run: tuple[Path, object]) -> None:
    """Driving a fresh copy of the policy through the recorded prefix views round by round gives
    exactly the parents of each round's nodes (so OpenEvolve's own sampling chose none)."""
    out, result = policy_run
    world = load_world(out)
    records = nodes(out)
    assert world.workers == 2 and len(records) == result.nodes >= 8
    assert records[0]["parent"] is None and records[0]["round"] == 0
    rounds = sorted({r["round"] for r in records[1:]})
    assert rounds == list(range(1, result.rounds + 1))
    policy = make_policy("ucb")
    meta = json.loads((out / "world.json").read_text())
    for number in rounds:
        prefix = [r for r in records if r["round"] < number]
        view = tree_view(prefix, meta, workers=2, beta=0.5, frontier="any", rounds=number - 1, max_rounds=None)
        if number == 1:
            policy.reset(RunContext.from_view(view, seed=3))
        chosen = [prefix[i]["id"] for i in batch_from(policy.act(view))]
        made = sorted(r["parent"] for r in records if r["round"] == number)
        if number < rounds[-1] or result.stopped_by == "policy":
            assert made == sorted(chosen), f"round {number}"
        else:  # the last batch is cut to the iterations left
            assert made == sorted(chosen[: len(made)]), f"round {number}"
        assert 1 <= len(made) <= 2
    iterations = [r["openevolve"]["iteration_found"] for r in records[1:]]
    assert len(set(iterations)) == len(iterations) and max(iterations) <= 10


@pytest.mark.slow
def test_importing_openevolves_checkpoints_and_trace_gives_the_same_tree(policy_run: tuple[Path, object],
                                                                           tmp_path: Path) -> None:
    out, _ = policy_run
    recorded = tree(nodes(out))
    from_checkpoints = tmp_path / "ck"
    report = import_run("auto", out / "openevolve", from_checkpoints)
    assert report.nodes == len(recorded)
    assert tree(nodes(from_checkpoints)) == recorded
    from_trace = tmp_path / "trace"
    import_run("auto", out / "openevolve" / "evolution_trace.jsonl", from_trace)
    assert tree(nodes(from_trace)) == recorded
    # the bridge saves a checkpoint at the end: of the run's last iteration, with the run's best
    # program; MAP-Elites keeps one program a cell, so it may hold fewer than the run made
    last = max((out / "openevolve" / "checkpoints").iterdir(), key=lambda p: int(p.name.split("_")[1]))
    saved = json.loads((last / "metadata.json").read_text())
    held = {json.loads(p.read_text())["id"] for p in (last / "programs").glob("*.json")}
    found = [r["openevolve"]["iteration_found"] for r in nodes(out)[1:]]
    assert saved["last_iteration"] == int(last.name.split("_")[1]) >= max(found)
    assert held <= recorded.keys() and saved["best_program_id"] in held


@pytest.mark.slow
def test_an_empty_batch_stops_openevolve_and_policy_files_run_isolated(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("sk-not-for-policies")
    policy = tmp_path / "two_rounds.py"
    policy.write_text(TWO_ROUNDS.format(secret=str(secret)))
    out = tmp_path / "world"
    run_openevolve(BridgeConfig(task=TASK, out=out, policy=str(policy), workers=2, iterations=20, seed=0))
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["stopped_by"] == "policy"
    records = nodes(out)
    assert {r["round"] for r in records[1:]} == {1, 2} and len(records) <= 1 + 2 + 2
    assert [r["parent"] for r in records if r["round"] == 1] == [records[0]["id"]]
    meta = json.loads((out / "world.json").read_text())
    assert meta["policy"] == str(policy) and meta["openevolve"]["stopped_by"] == "policy"
    assert "sha256" in meta  # finished
    assert any((out / "openevolve" / "checkpoints").iterdir())
    load_world(out)
    # the control: the same code as trusted module:Class, in-process, reads the file and stops at once
    trusted = tmp_path / "trusted"
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "two_rounds", raising=False)
    run_openevolve(BridgeConfig(task=TASK, out=trusted, policy="two_rounds:Policy", workers=2, iterations=20, seed=0))
    assert len(nodes(trusted)) == 1 and json.loads((trusted / "run_summary.json").read_text())["stopped_by"] == "policy"


@pytest.mark.slow
def test_a_shipped_model_picks_the_parents(tmp_path: Path) -> None:
    pytest.importorskip("stable_baselines3")
    out = tmp_path / "world"
    result = run_openevolve(BridgeConfig(task=TASK, out=out, policy="ppo-options-v", workers=2, iterations=4, seed=0))
    assert result.nodes >= 2 and load_world(out).meta["policy"] == "ppo-options-v"


def snapshot_ids(out: Path) -> set[str]:
    return {json.loads(p.read_text())["id"] for p in (out / "openevolve").glob("checkpoints/*/programs/*.json")}


def test_the_import_rebuilds_an_initial_program_map_elites_dropped(tmp_path: Path) -> None:
    """Once a better program takes its MAP-Elites cell, OpenEvolve drops the initial program from its
    database, so no checkpoint holds it; the import rebuilds it from the evolution trace (the lines of
    its children hold its code and metrics) and gives the world's tree. The bridge writes that trace
    where and as the import reads it, whatever a given config asks."""
    config = tmp_path / "config.yaml"
    config.write_text(f"evolution_trace:\n  format: json\n  output_path: {tmp_path / 'elsewhere.json'}\n"
                      "evaluator:\n  cascade_evaluation: false\n")
    out = tmp_path / "world"
    run_openevolve(BridgeConfig(task=TASK, out=out, policy="greedy", workers=2, iterations=16, seed=0,
                                config_path=config))
    assert not (tmp_path / "elsewhere.json").exists()
    records = nodes(out)
    assert records[0]["id"] not in snapshot_ids(out)  # what this test is about
    report = import_run("auto", out / "openevolve", tmp_path / "imported")
    assert tree(nodes(tmp_path / "imported")) == tree(records)
    assert any("is in no snapshot: rebuilt from the evolution trace" in note for note in report.notes)


def test_a_config_cannot_give_the_run_another_database_or_write_outside_out(policy_run: tuple[Path, object],
                                                                          tmp_path: Path) -> None:
    """A config whose db_path names an existing OpenEvolve database made OpenEvolve load it: the
    run began past its budget and wrote an empty world. Large artifacts went to ./artifacts."""
    database = max((policy_run[0] / "openevolve" / "checkpoints").iterdir())  # an earlier run's database
    config = tmp_path / "config.yaml"
    config.write_text(f"database:\n  db_path: {database}\n  artifact_size_threshold: 100\n"
                      "evaluator:\n  cascade_evaluation: false\n")
    here = tmp_path / "cwd"
    here.mkdir()
    out = tmp_path / "world"
    done = subprocess.run([sys.executable, "-m", "dream_gym", "deploy", "--system", "openevolve", "--task", TASK,
                           "--policy", "greedy", "--policy-arg", "patience=100", "-W", "2", "--budget", "3",
                           "--out", str(out), "--option", f"config_path={config}"],
                          capture_output=True, text=True, cwd=here, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(nodes(out)) == 4 and not list(here.iterdir())
    assert any((out / "openevolve" / "artifacts").iterdir())  # the diagnostics, past the threshold
    import_run("auto", out / "openevolve", tmp_path / "imported")
    assert tree(nodes(tmp_path / "imported")) == tree(nodes(out))


def test_openevolves_own_sampling_records_the_children_of_migrant_copies(tmp_path: Path) -> None:
    """With migration, OpenEvolve's own sampling also continues migrant copies (which are not
    nodes): each such child is recorded under the program the copy copies, where the import of
    OpenEvolve's output places it too."""
    config = tmp_path / "config.yaml"
    config.write_text("database:\n  num_islands: 2\n  migration_interval: 2\n  migration_rate: 0.5\n"
                      "evaluator:\n  cascade_evaluation: false\n")
    out = tmp_path / "world"
    result = run_openevolve(BridgeConfig(task=TASK, out=out, policy="native", workers=2, iterations=16, seed=0,
                                         config_path=config))
    records = nodes(out)
    assert len(records) == 17 and result.failed_iterations == 0  # every iteration's program is a node
    by_id = {r["id"]: r for r in records}
    trace = [json.loads(line) for line in (out / "openevolve" / "evolution_trace.jsonl").read_text().splitlines()]
    of_copies = [line for line in trace if line["parent_id"] not in by_id]
    assert of_copies  # OpenEvolve continued migrant copies
    for line in of_copies:  # (a copy MAP-Elites dropped while its child was evaluated is traced without code)
        original = by_id[by_id[line["child_id"]]["parent"]]
        assert original["code"] == line.get("parent_code", original["code"])
    # the import places them there too, but for a child of a copy that no checkpoint holds and no
    # trace line gives the code of: nothing names what that copy copied (an orphan under the root)
    unknown = ({line["parent_id"] for line in of_copies} - snapshot_ids(out)
               - {line["parent_id"] for line in trace if line.get("parent_code") is not None})
    cut = {line["child_id"] for line in of_copies if line["parent_id"] in unknown}
    import_run("auto", out / "openevolve", tmp_path / "imported")
    imported = {k: v for k, v in tree(nodes(tmp_path / "imported")).items() if k not in cut}
    assert imported == {k: v for k, v in tree(records).items() if k not in cut}


@pytest.mark.slow
def test_openevolves_own_sampling_is_recorded_too(tmp_path: Path) -> None:
    out = tmp_path / "native"
    result = run_openevolve(BridgeConfig(task=TASK, out=out, policy="native", workers=2, iterations=6, seed=1,
                                         checkpoint_interval=3))
    records = nodes(out)
    assert result.stopped_by == "iterations" and len(records) == 7 - result.failed_iterations
    world = load_world(out)
    assert world.meta["policy"] == "native"
    imported = tmp_path / "imported"
    import_run("openevolve", out / "openevolve", imported)
    assert tree(nodes(imported)) == tree(records)
    with pytest.raises(FileExistsError, match="--resume"):
        run_openevolve(BridgeConfig(task=TASK, out=out, policy="native", workers=2, iterations=6))


@pytest.mark.slow
def test_any_openevolve_problem_with_an_openai_compatible_model(tmp_path: Path) -> None:
    """`--task initial_program.py,evaluator.py` (an OpenEvolve example's two files) with --model and
    --api-base: here the files of a built-in task and the agent server standing in for the LLM."""
    files = tmp_path / "problem"
    subprocess.run([sys.executable, "-m", "dream_gym", "openevolve", "task", TASK, "--out", str(files)],
                   check=True, capture_output=True)
    with AgentServer(TASK, seed=0) as server:
        out = tmp_path / "world"
        result = run_openevolve(BridgeConfig(
            task=f"{files / 'initial_program.py'},{files / 'evaluator.py'}", out=out, policy="greedy", workers=2,
            iterations=4, model="openai/dream-gym-builtin", api_base=server.base_url))
        assert server.requests >= 2
    assert result.nodes >= 3 and json.loads((out / "world.json").read_text())["task"]["name"] == "problem"
    # without --model the generic agent answers for a task given as files (no key)
    other = run_openevolve(BridgeConfig(task=f"{files / 'initial_program.py'},{files / 'evaluator.py'}",
                                        out=tmp_path / "other", policy="greedy", iterations=2))
    assert other.nodes >= 2
    assert json.loads((tmp_path / "other" / "world.json").read_text())["agent"].endswith("(generic agent)")


def deploy_answering_no_program_first(out: Path, policy: str, workers: int, budget: int, *extra: str,
                                      model: str = "openai/dream-gym-builtin") -> tuple[subprocess.CompletedProcess[str], int]:
    """`deploy --system openevolve` against a test server whose first answer holds no program;
    the process and the LLM calls the server answered."""
    from openai_server import OpenAICompatServer, calls, no_program_first

    from dream_gym.online.agent_server import AgentResponder

    agent = AgentResponder(TASK, seed=0)
    with OpenAICompatServer() as server:
        server.responder = no_program_first(agent.reply)
        done = subprocess.run(
            [sys.executable, "-m", "dream_gym", "deploy", "--system", "openevolve", "--task", TASK, "--policy",
             policy, "-W", str(workers), "--budget", str(budget), "--seed", "0", "--model",
             model, "--api-base", server.base_url, "--out", str(out), *extra],
            capture_output=True, text=True, timeout=600)
        return done, calls(server)


def test_an_iteration_whose_answer_held_no_program_is_a_failed_node(tmp_path: Path) -> None:
    """An LLM answer with no program in it makes OpenEvolve's iteration fail before anything is
    evaluated. The world records the attempt as a failed node under the parent it continued (the
    parent's code, OpenEvolve's error), so replay charges it; OpenEvolve's own output (its failures
    log) imports to the same tree. Each node's cost is priced from the tokens OpenEvolve recorded
    (OpenEvolve records no price): the model is one litellm has a price for."""
    from dream_gym.infrastructure.llm import import_litellm

    out = tmp_path / "world"
    done, answered = deploy_answering_no_program_first(out, "greedy", 2, 3, model="openai/gpt-4o-mini")
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"stopped by \w+, [\d.]+s \(openevolve [\w.]+, policy greedy\)\n", done.stdout), done.stdout
    assert answered == 3
    records = nodes(out)
    root, failed, *programs = records
    assert len(programs) == 2 and all(p["score"] is not None for p in programs)
    assert (failed["parent"], failed["score"], failed["round"]) == (root["id"], None, 1)
    assert failed["code"] == root["code"] and failed["error"].startswith("no program: No valid diffs found")
    assert failed["cost"]["tokens_in"] > 0  # the LLM call it spent
    for record in (failed, *programs):
        cost = record["cost"]
        price = sum(import_litellm().cost_per_token(model="gpt-4o-mini", prompt_tokens=cost["tokens_in"],
                                                    completion_tokens=cost["tokens_out"]))
        assert cost["usd"] == pytest.approx(price) and price > 0
    summary = json.loads((out / "run_summary.json").read_text())
    assert (summary["iterations"], summary["failed_iterations"], summary["unrecorded_iterations"]) == (3, 1, 0)
    assert "made no program" not in done.stderr  # every proposal stands in the world
    assert "None of the 1 iterations produced a candidate program" not in done.stderr  # (a round's, not the run's)
    report = import_run("auto", out / "openevolve", tmp_path / "imported")
    assert tree(nodes(tmp_path / "imported")) == tree(records)
    assert any(note.startswith("evolution_trace_failures.jsonl: 1 iteration(s) made no program; 1 stand as failed")
               and "No valid diffs found in response" in note for note in report.notes), report.notes
    # the trace alone (a run killed before its first checkpoint) reads the failures log beside it
    import_run("auto", out / "openevolve" / "evolution_trace.jsonl", tmp_path / "from_trace")
    assert tree(nodes(tmp_path / "from_trace")) == tree(records)


def test_an_iteration_whose_llm_call_failed_is_no_node_and_a_resume_runs_it_again(tmp_path: Path) -> None:
    """A server answering 500 (down, or refusing the key) gives OpenEvolve's iteration no answer:
    not an attempt of the search, so not a node (as in ``grow``). The run stops after that round,
    says why once and exits non-zero; ``--resume`` against the server up again runs the budget's
    missing iterations, and OpenEvolve's own output imports to the same tree."""
    from openai_server import OpenAICompatServer, Reply

    from dream_gym.evaluation.world_specs import check_distinct_runs
    from dream_gym.online.agent_server import AgentResponder

    agent = AgentResponder(TASK, seed=0)
    config = tmp_path / "openevolve.yaml"  # no retries of the failed calls: the test takes seconds
    config.write_text("llm:\n  retries: 0\n  retry_delay: 0\n")
    out, answered, up_to = tmp_path / "world", set(), [2]

    def respond(body: dict) -> str | Reply:
        if body.get("seed") not in answered and len(answered) >= up_to[0]:
            return Reply(status=500, raw_body=b'{"error": {"message": "the server is down", "type": "server_error"}}')
        answered.add(body.get("seed"))
        return agent.reply(body)

    def deploy(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "dream_gym", "deploy", "--system", "openevolve", "--task", TASK, "--policy",
             "greedy", "--policy-arg", "patience=100", "-W", "2", "--budget", "4", "--seed", "0", "--model",
             "openai/dream-gym-builtin", "--option", f"config_path={config}", "--api-base", server.base_url,
             "--out", str(out), *extra], capture_output=True, text=True, timeout=600)

    with OpenAICompatServer() as server:
        server.responder = respond
        done = deploy()
        assert done.returncode != 0 and done.stderr.count("the LLM answered no call in 2 iterations") == 1
        assert "the server is down" in done.stderr and "Traceback" not in done.stderr
        first = nodes(out)
        assert len(first) == 3 and all(r["score"] is not None for r in first)  # the root and round 1
        summary = json.loads((out / "run_summary.json").read_text())
        assert (summary["stopped_by"], summary["nodes"]) == ("llm_failed", 3)
        up_to[0] = 100
        again = deploy("--resume")
    assert again.returncode == 0, again.stderr[-3000:]
    records = nodes(out)
    assert len(records) == 5 and records[:3] == first and all(r["score"] is not None for r in records)
    assert len(answered) == 4  # the 2 calls of round 1, then 2 again for the rest of the budget
    import_run("auto", out / "openevolve", tmp_path / "imported")
    assert tree(nodes(tmp_path / "imported")) == tree(records)
    with pytest.raises(LookupError, match="hold the same programs"):  # one run, however recorded
        check_distinct_runs([load_world(out), load_world(tmp_path / "imported")])


def test_a_run_whose_every_answer_held_no_program_says_its_world_is_kept(tmp_path: Path) -> None:
    """OpenEvolve's own "Evolution failed: 0/3 iterations produced a candidate program" ended the
    command with no word of the world it left (the root and a failed node per iteration), which
    ShinkaEvolve's and SkyDiscover's bridges say is kept and resumable."""
    from openai_server import OpenAICompatServer

    out = tmp_path / "world"
    with OpenAICompatServer() as server:
        server.responder = lambda body: "I would rather not write code today."
        done = subprocess.run(
            [sys.executable, "-m", "dream_gym", "deploy", "--system", "openevolve", "--task", TASK, "--policy",
             "greedy", "-W", "2", "--budget", "3", "--seed", "0", "--model", "openai/dream-gym-builtin",
             "--api-base", server.base_url, "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and done.stderr.count("dream-gym deploy: error:") == 1, done.stderr[-3000:]
    assert "Evolution failed: 0/" in done.stderr and "the world keeps what was recorded" in " ".join(done.stderr.split())
    records = nodes(out)
    assert len(records) >= 2 and all(r["score"] is None for r in records[1:])


def test_a_policy_continues_a_node_without_program_after_a_resume(tmp_path: Path) -> None:
    """`fixed` at W = 1 continues its branch's newest node, here the failed stand-in of an answer
    with no program: OpenEvolve continues the parent's code. The run stops after that node and is
    resumed (the test server's first answer is again no program), so the stand-ins come back from
    the world; the run replays back, and OpenEvolve's own output (where a continued stand-in is a
    program of its database) imports to the same tree."""
    from dream_gym.fidelity import recorded_setting, reproduce

    out = tmp_path / "world"
    done, _ = deploy_answering_no_program_first(out, "fixed", 1, 1)
    # OpenEvolve's own rule: a run none of whose iterations made a program failed; the world keeps it
    assert done.returncode != 0 and "0/1 iterations produced a candidate program" in done.stderr
    assert [r["score"] is None for r in nodes(out)] == [False, True]
    done, answered = deploy_answering_no_program_first(out, "fixed", 1, 3, "--resume")
    assert done.returncode == 0, done.stderr[-3000:]
    assert answered == 2  # the resumed run goes on from iteration 2 (the first answer is no program again)
    records = nodes(out)
    assert [(r["round"], r["openevolve"]["iteration_found"]) for r in records] == [(0, 0), (1, 1), (2, 2), (3, 3)]
    root, failed, failed_again, child = records
    assert failed["error"].startswith("no program:") and failed_again["parent"] == failed["id"]
    assert failed_again["error"].startswith("no program:") and failed_again["code"] == root["code"]
    assert child["parent"] == failed_again["id"] and child["metrics"]  # a program OpenEvolve evaluated
    assert json.loads((out / "run_summary.json").read_text())["restored_parents"] == 0
    world = load_world(out)
    setting = recorded_setting(world)
    replayed = reproduce(world, make_policy(setting.policy, **setting.params), seed=setting.seed,
                         settings=setting.settings)
    assert replayed.exact, replayed
    report = import_run("auto", out / "openevolve", tmp_path / "imported")
    assert tree(nodes(tmp_path / "imported")) == tree(nodes(out)), report.notes


@pytest.mark.slow
def test_kill_9_then_resume_continues_the_same_world(tmp_path: Path, short_tmp_path: Path) -> None:
    out = tmp_path / "world"
    cmd = [sys.executable, "-m", "dream_gym", "openevolve", "run", "--task", TASK, "--policy", "fixed",
           "-W", "2", "--iterations", "24", "--seed", "2", "--out", str(out)]
    # OpenEvolve's evaluator keeps each program in a temporary file that only it removes; the
    # killed run's goes here
    env = {**os.environ, "TMPDIR": str(short_tmp_path)}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 300
    while time.time() < deadline:
        if (out / "nodes.jsonl").exists() and len(nodes_lines(out)) >= 6:
            break
        time.sleep(0.05)
    from dream_gym.infrastructure.locks import LockedError

    with pytest.raises(LockedError, match=f"pid {proc.pid}"):  # one writer per world
        run_openevolve(BridgeConfig(task=TASK, out=out, policy="fixed", iterations=24, resume=True))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    before = nodes_lines(out)
    assert 6 <= len(before) < 25
    # cmd's run, resumed in this process: not refused, no worker kept the lock
    run_openevolve(BridgeConfig(task=TASK, out=out, policy="fixed", workers=2, iterations=24, seed=2, resume=True))
    after = nodes(out)
    ids = [r["id"] for r in after]
    assert len(ids) == len(set(ids))
    assert [r["id"] for r in after[: len(before)]] == [json.loads(line)["id"] for line in before]
    assert max(r["openevolve"]["iteration_found"] for r in after) == 24
    world = load_world(out)
    assert world.meta["sha256"]
    rounds = [r["round"] for r in after[1:]]
    assert rounds == sorted(rounds)  # the resumed run continued with the next rounds


def nodes_lines(out: Path) -> list[str]:
    text = (out / "nodes.jsonl").read_text()
    return [line for line in text.split("\n")[:-1] if line.strip()]


@pytest.mark.slow
def test_a_killed_runs_evolution_trace_holds_every_program_it_recorded(tmp_path: Path, short_tmp_path: Path) -> None:
    # before OpenEvolve's first checkpoint the trace is the only copy of a program MAP-Elites
    # prunes: a line still buffered when the run is killed would be in no output of OpenEvolve's
    out = tmp_path / "world"
    cmd = [sys.executable, "-m", "dream_gym", "deploy", "--system", "openevolve", "--task", TASK, "--policy", "fixed",
           "-W", "2", "--budget", "24", "--seed", "3", "--out", str(out)]
    env = {**os.environ, "TMPDIR": str(short_tmp_path)}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 300
    while time.time() < deadline and not ((out / "nodes.jsonl").exists() and len(nodes_lines(out)) >= 6):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    children = {json.loads(line)["id"] for line in nodes_lines(out)[1:]}
    assert 5 <= len(children) < 10  # killed before the first checkpoint (every 10 iterations)
    assert not list((out / "openevolve").glob("checkpoints/checkpoint_*"))
    trace = out / "openevolve" / "evolution_trace.jsonl"
    traced = {json.loads(line)["child_id"] for line in trace.read_text().splitlines() if line.strip()}
    assert len(children - traced) <= 1  # at most the program being traced when the kill came


def test_a_native_run_shorter_than_a_checkpoint_interval_imports_from_its_trace(tmp_path: Path) -> None:
    # OpenEvolve's own loop saves no checkpoint before checkpoint_interval iterations (10), so its
    # output folder holds the evolution trace only (the bridge's policy rounds end with a checkpoint)
    out = tmp_path / "world"
    done = subprocess.run([sys.executable, "-m", "dream_gym", "deploy", "--system", "openevolve", "--task", TASK,
                           "--policy", "native", "-W", "2", "--budget", "3", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not list((out / "openevolve").rglob("programs"))
    imported = tmp_path / "imported"
    done = subprocess.run([sys.executable, "-m", "dream_gym", "worlds", "import", str(out / "openevolve"),
                           "--out", str(imported)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(f"imported OpenEvolve run {out / 'openevolve' / 'evolution_trace.jsonl'}\n"
                                  f"  -> world 'imported' at {imported}")
    assert tree(nodes(imported)) == tree(nodes(out))


SLOW_TASK = {
    "initial_program.py": "# EVOLVE-BLOCK-START\nX = 1.0\n# EVOLVE-BLOCK-END\n",
    "evaluator.py": ("import time\n\n\ndef evaluate(program_path):\n    time.sleep(0.5)  # a round lasts long enough to be"
                     " interrupted in\n    scope = {}\n    exec(open(program_path).read(), scope)\n"
                     "    return {'combined_score': -abs(float(scope['X']) - 3.0)}\n"),
}


@pytest.mark.slow
@pytest.mark.parametrize("policy", [["greedy", "--policy-arg", "patience=100"], ["native"]])
def test_ctrl_c_in_a_round_leaves_no_phantom_iterations(tmp_path: Path, policy: list[str]) -> None:
    # Found by trying: OpenEvolve cancels a round's iterations still in flight without a word, and
    # the bridge counted them as run: the run then said "2 proposals made no program"; OpenEvolve's
    # own loop (native) ended "stopped by budget", exit 0
    for name, text in SLOW_TASK.items():
        (tmp_path / name).write_text(text)
    out = tmp_path / "world"
    command = [sys.executable, "-m", "dream_gym", "deploy", "--system", "openevolve", "--task",
               f"{tmp_path / 'initial_program.py'},{tmp_path / 'evaluator.py'}", "--policy", *policy,
               "-W", "2", "--budget", "4", "--out", str(out)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and not ((out / "nodes.jsonl").exists() and len(nodes_lines(out)) >= 3):
        time.sleep(0.05)
    time.sleep(0.15)  # the next round's evaluations under way (each takes 0.5 s)
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
    said, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr[-3000:]
    assert "stopped by shutdown" in said and "made no program" not in said + stderr and "Traceback" not in stderr
    summary = json.loads((out / "run_summary.json").read_text())
    recorded = len(nodes_lines(out))
    assert summary["unrecorded_iterations"] == 0 and summary["iterations"] == recorded - 1 < 4
    if policy[0] == "native":  # its pipelined iterations may finish out of order: a cancelled one may be passed
        return
    done = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(nodes_lines(out)) == 5  # every iteration of the budget is a node: none was counted as spent


def test_the_callers_signal_handlers_and_logging_are_back_after_a_run(tmp_path: Path) -> None:
    # OpenEvolve installs its own SIGINT and SIGTERM handlers and leaves them: in a notebook or
    # rsi's loop, a later Ctrl-C called the finished run's handler (an AttributeError on its
    # controller) and SIGTERM no longer ended the process; and it adds a file handler on its log and
    # a console handler to the root logger: every later message went to that run's log and the console;
    # and the task's folder to sys.path
    def mine(number: int, _frame: object) -> None:
        raise AssertionError(f"signal {number} while testing")

    root = logging.getLogger()
    handlers, level, path = list(root.handlers), root.level, list(sys.path)
    kept = {number: signal.signal(number, mine) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        run_openevolve(BridgeConfig(task=TASK, out=tmp_path / "world", policy="greedy", workers=2, iterations=2))
        assert {number: signal.getsignal(number) for number in kept} == {number: mine for number in kept}
        assert (root.handlers, root.level, sys.path) == (handlers, level, path)
    finally:
        for number, handler in kept.items():
            signal.signal(number, handler)


def test_the_systems_sys_exit_0_at_a_second_signal_is_an_interrupt() -> None:
    # OpenEvolve's and SkyDiscover's answer to a second Ctrl-C; both bridges run inside this
    from dream_gym.integrations.stopping import second_signal_interrupts

    for code in (0, None):
        with pytest.raises(KeyboardInterrupt), second_signal_interrupts():
            sys.exit(code)
    with pytest.raises(SystemExit) as kept, second_signal_interrupts():
        sys.exit(2)  # an exit that says it failed stays what it is
    assert kept.value.code == 2


@pytest.mark.slow
def test_a_second_ctrl_c_stops_at_once_and_says_so(tmp_path: Path) -> None:
    # OpenEvolve answers a second Ctrl-C with sys.exit(0): the command ended with exit 0, silent
    system = "openevolve"
    for name, text in SLOW_TASK.items():
        (tmp_path / name).write_text(text)
    out = tmp_path / "world"
    command = [sys.executable, "-m", "dream_gym", "deploy", "--system", system, "--task",
               f"{tmp_path / 'initial_program.py'},{tmp_path / 'evaluator.py'}", "--policy", "greedy",
               "--policy-arg", "patience=100", "-W", "2", "--budget", "4", "--out", str(out)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and not ((out / "nodes.jsonl").exists() and len(nodes_lines(out)) >= 3):
        time.sleep(0.05)
    time.sleep(0.1)  # the next round's evaluations under way (each takes 0.5 s)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # impatient
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130 and stderr.rstrip().endswith("with --resume continues it"), stderr[-3000:]
    done = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(nodes_lines(out)) == 5


@pytest.mark.slow
def test_a_resumed_deploy_shows_its_policy_the_recorded_rounds_and_grows_the_same_tree(
        tmp_path: Path, short_tmp_path: Path) -> None:
    """The random policy's generator (any policy's memory) started again at a resume, so a
    killed and resumed run chose other parents than the uninterrupted one; its policy is now
    shown the recorded rounds again first, and the two runs record one tree."""
    command = [sys.executable, "-m", "dream_gym", "deploy", "--system", "openevolve", "--task", "sum-difference",
               "--policy", "random", "--policy-arg", "p_stop=0", "-W", "2", "--budget", "16", "--seed", "0"]
    env = {**os.environ, "TMPDIR": str(short_tmp_path)}
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert subprocess.run([*command, "--out", str(whole)], env=env, capture_output=True, timeout=300).returncode == 0
    proc = subprocess.Popen([*command, "--out", str(cut)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and not ((cut / "nodes.jsonl").exists() and len(nodes_lines(cut)) >= 7):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert 7 <= len(nodes_lines(cut)) < 17  # killed mid-run
    resumed = subprocess.run([*command, "--out", str(cut), "--resume"], env=env, capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr

    def tree(folder: Path) -> list[tuple]:
        records = nodes(folder)
        index = {r["id"]: i for i, r in enumerate(records)}
        return [(index.get(r["parent"]), r["score"], r.get("round"), r.get("worker")) for r in records]

    assert tree(cut) == tree(whole) and len(tree(whole)) == 17


@pytest.mark.slow
def test_a_resume_says_what_a_stop_left_short_in_its_last_round_and_its_last_line(
        tmp_path: Path, short_tmp_path: Path) -> None:
    """A run stopped inside a round (OpenEvolve cancels the iterations in flight) resumed with
    "the policy chose its 4 recorded round(s) again" only, and the tree then differed from an
    uninterrupted run's without a word (grow and ShinkaEvolve say so); a node line cut short (the
    machine stopped mid-write) was cut without a word too. Each resume now says what it found."""
    command = [sys.executable, "-m", "dream_gym", "deploy", "--system", "openevolve", "--task", "sum-difference",
               "--policy", "random", "--policy-arg", "p_stop=0", "-W", "2", "--budget", "6", "--seed", "0",
               "--out", str(tmp_path / "w")]
    env = {**os.environ, "TMPDIR": str(short_tmp_path)}
    assert subprocess.run(command, env=env, capture_output=True, timeout=300).returncode == 0

    def stopped_at(kept: str) -> str:  # the world as a stop left it: not finished, ``kept`` its node lines
        (tmp_path / "w" / "nodes.jsonl").write_text(kept)
        meta = json.loads((tmp_path / "w" / "world.json").read_text())
        meta.pop("sha256", None)
        (tmp_path / "w" / "world.json").write_text(json.dumps(meta))
        resumed = subprocess.run([*command, "--resume"], env=env, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        return " ".join(resumed.stdout.split())

    lines = nodes_lines(tmp_path / "w")
    last_round = json.loads(lines[-1])["round"]
    assert [json.loads(line)["round"] for line in lines[-2:]] == [last_round, last_round]  # two chosen, both run
    said = stopped_at("".join(line + "\n" for line in lines[:-1]))  # the stop lost one
    assert f"round {last_round} holds 1 fewer program(s) than the policy chose (a stop in that round, or no free " \
           "slot): they are not run again" in said, said
    lines = nodes_lines(tmp_path / "w")
    torn = lines[-1][: len(lines[-1]) // 2]
    said = stopped_at("".join(line + "\n" for line in lines[:-1]) + torn)
    assert f"resume: cut a torn last line of {len(torn.encode())} bytes (an interrupted write); that program is not " \
           "in the world" in said, said
