"""`dream-gym deploy --system skydiscover` (dream_gym.integrations.skydiscover).

SkyDiscover runs for real (the installed 0.1 package: its MainController, databases, managers,
prompts, diff parser, checkpoints) against the built-in agent server; nothing is mocked. The
greedy run, its same-seed rerun, the killed run, the refusals and a run on a task given as files go
through the CLI as users run them; the other runs call the public API (`deploy`) in the test's
process (importing SkyDiscover costs a second a process). Small budgets: W = 2, at most 40
iterations (a few seconds each).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("skydiscover")

from once import built_once  # noqa: E402

from dream_gym import load_world  # noqa: E402
from dream_gym.online.loop import tree_view  # noqa: E402
from dream_gym.policies import make_policy  # noqa: E402
from dream_gym.policy import RunContext, batch_from  # noqa: E402

TASK = "circle-packing-26"
# A policy file (run isolated, as every policy file): each round the best node and the newest
# one (distinct), three rounds, then stop. It stops at once instead when it can read the file
# SECRET: as a policy file it runs isolated, so it cannot.
BEST_AND_NEWEST = '''
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
        if view.rounds >= 3:
            return []
        picks = [view.best().id]
        newest = len(view.nodes) - 1
        if newest not in picks:
            picks.append(newest)
        return picks[: self.w]
'''


def deploy(out: Path, *args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dream_gym", "deploy", "--system", "skydiscover", "--task", TASK,
               *args, "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def run_api(out: Path, *, policy: str, budget: int, seed: int = 0, task: str = TASK, **settings: Any) -> None:
    """`deploy` with W = 2 in the test's process."""
    from dream_gym.integrations.deploy import DeployRequest
    from dream_gym.integrations.deploy import deploy as deploy_request

    deploy_request(DeployRequest(system="skydiscover", task=task, out=out, policy=policy, workers=2, budget=budget,
                                 seed=seed, **settings))


def nodes(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "nodes.jsonl").read_text().splitlines() if line.strip()]


def tree(records: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    return {r["id"]: (r["parent"], r["score"], r.get("code"), r.get("error")) for r in records}


def shape(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The tree with ids replaced by positions (SkyDiscover names programs with uuid4s)."""
    position = {r["id"]: i for i, r in enumerate(records)}
    return [(position.get(r["parent"]), r["score"], r.get("code"), r.get("error"), r.get("round"), r.get("worker"),
             r["skydiscover"]["iteration_found"], r["skydiscover"]["kept"]) for r in records]


def import_cli(src: Path, out: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "dream_gym", "worlds", "import", str(src), "--from", "auto",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(f"imported SkyDiscover run {src}")


GREEDY = ("--policy", "greedy", "-W", "2", "--budget", "12", "--seed", "0")


@pytest.fixture(scope="module")
def greedy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One greedy run per test session (its tests only read it), whichever worker asks first."""
    return built_once(tmp_path_factory, "skydiscover-greedy-run", lambda folder: deploy(folder / "world", *GREEDY)) / "world"


def test_every_program_is_a_node_and_greedy_chose_every_parent(greedy_run: Path) -> None:
    """Driving a fresh greedy policy through the recorded prefix views round by round gives
    exactly the parents of each round's programs, so SkyDiscover's own sampling chose none."""
    records = nodes(greedy_run)
    world = load_world(greedy_run)
    meta = json.loads((greedy_run / "world.json").read_text())
    assert world.workers == 2 and meta["policy"] == "greedy" and meta["sha256"]
    assert meta["skydiscover"]["search"] == "topk" and meta["skydiscover"]["iterations_done"] == 12
    assert records[0]["parent"] is None and records[0]["round"] == 0
    # a policy's iteration is one attempt: SkyDiscover retries no failed program within it (the
    # run has failures, which native would have retried), so the budget counts programs
    iterations = [r["skydiscover"]["iteration_found"] for r in records[1:]]
    assert sorted(iterations) == list(range(1, 13))
    assert any(r["score"] is None for r in records)
    policy = make_policy("greedy")
    rounds = sorted({r["round"] for r in records[1:]})
    assert rounds == list(range(1, len(rounds) + 1))
    for number in rounds:
        prefix = [r for r in records if r["round"] < number]
        view = tree_view(prefix, meta, workers=2, beta=0.5, frontier="any", rounds=number - 1, max_rounds=None)
        if number == 1:
            policy.reset(RunContext.from_view(view, seed=0))
        chosen = [prefix[i]["id"] for i in batch_from(policy.act(view))]
        made = [r for r in records if r["round"] == number]
        slots = sorted({r["worker"] for r in made})
        assert slots == list(range(len(slots))) and len(slots) <= 2
        assert [r["parent"] for r in made] == [chosen[slot] for slot in slots], f"round {number}"
    summary = json.loads((greedy_run / "run_summary.json").read_text())
    assert summary["nodes"] == len(records) and summary["stopped_by"] == "iterations"


def test_importing_skydiscovers_own_output_gives_the_recorded_tree(greedy_run: Path, tmp_path: Path) -> None:
    import_cli(greedy_run / "skydiscover", tmp_path / "imported")
    assert tree(nodes(tmp_path / "imported")) == tree(nodes(greedy_run))
    meta = json.loads((tmp_path / "imported" / "world.json").read_text())
    assert meta["source"]["system"] == "skydiscover"


def test_resume_removes_a_saved_program_the_world_lacks(greedy_run: Path, tmp_path: Path) -> None:
    """Killed after SkyDiscover's database saved a program and before its node was written: the
    resumed run, which rebuilds the database from the world, removes that program's file, so the
    import of SkyDiscover's output is the world again (the control: before the resume it holds
    one program the world lacks)."""
    out = tmp_path / "world"
    shutil.copytree(greedy_run, out)
    whole = nodes(greedy_run)
    # the last iteration's program is the world's last line: it goes
    last = [r["id"] for r in whole if r["skydiscover"]["iteration_found"] == 12]
    kept = whole[: len(whole) - len(last)]
    assert last and [r["id"] for r in whole[len(kept):]] == last
    (out / "nodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    meta = json.loads((out / "world.json").read_text())
    del meta["sha256"]  # not finished
    for key in ("iterations_done", "stopped_by"):
        del meta["skydiscover"][key]
    (out / "world.json").write_text(json.dumps(meta))
    final = max((out / "skydiscover" / "checkpoints").iterdir(), key=lambda p: int(p.name.split("_")[1]))
    shutil.rmtree(final)  # the checkpoint written after the last node: the killed run never got there
    saved = [p for p in (out / "skydiscover").rglob("programs/*.json") if p.stem in last and "checkpoints" not in p.parts]
    assert len(saved) == len(last)
    import_cli(out / "skydiscover", tmp_path / "before")
    assert set(tree(nodes(tmp_path / "before"))) == {r["id"] for r in whole}  # the control: too many
    run_api(out, policy="greedy", budget=12, seed=0, resume=True)  # GREEDY's run
    resumed = nodes(out)
    assert resumed[: len(kept)] == kept and len(resumed) > len(kept)  # iteration 12 again
    assert {r["id"] for r in resumed}.isdisjoint(last) and not any(p.exists() for p in saved)
    import_cli(out / "skydiscover", tmp_path / "after")
    assert tree(nodes(tmp_path / "after")) == tree(resumed)


@pytest.mark.slow
def test_the_same_seed_gives_the_same_tree(greedy_run: Path, tmp_path: Path) -> None:
    """Everything but SkyDiscover's uuid4 program ids and the timestamps is the same."""
    again = tmp_path / "again"
    deploy(again, *GREEDY)
    first, second = nodes(greedy_run), nodes(again)
    assert shape(first) == shape(second)
    assert {r["id"] for r in first}.isdisjoint({r["id"] for r in second})  # the ids are SkyDiscover's own


@pytest.mark.slow
def test_native_records_skydiscovers_own_topk_choice_with_its_failures(tmp_path: Path) -> None:
    """SkyDiscover's topk continues its best program: each round's parents are the best program
    its database held; a failed evaluation (which SkyDiscover keeps nowhere, and retries as a new
    program) is a node too, and is saved in SkyDiscover's output so that the import is whole."""
    out = tmp_path / "native"
    run_api(out, policy="native", budget=30, seed=1)
    records = nodes(out)
    assert json.loads((out / "world.json").read_text())["policy"] == "native"
    for number in sorted({r["round"] for r in records[1:]}):
        held = [r for r in records if r["round"] < number and r["skydiscover"]["kept"]]
        best = max(held, key=lambda r: r["metrics"].get("combined_score", 0.0))
        assert {r["parent"] for r in records if r["round"] == number} == {best["id"]}, f"round {number}"
    # the two slots of a round start from the same parent and database: each LLM call has a seed
    # of its own (iteration, call), so the agent answers them differently
    first = {(r["round"], r["worker"]): r["code"] for r in reversed(records[1:])}
    pairs = [(first[(n, 0)], first[(n, 1)]) for n in {r["round"] for r in records[1:]} if (n, 1) in first]
    assert pairs and all(a != b for a, b in pairs)
    dropped = [r for r in records if not r["skydiscover"]["kept"]]
    assert dropped and all(r["score"] is None and r["error"] for r in dropped)
    assert len(records) - 1 > 30  # a failed program's retries are programs of their own
    saved = {p.stem for p in (out / "skydiscover" / "dropped" / "programs").glob("*.json")}
    assert saved == {r["id"] for r in dropped}
    import_cli(out / "skydiscover", tmp_path / "imported")
    assert tree(nodes(tmp_path / "imported")) == tree(records)
    # the control: without the programs the bridge saved, SkyDiscover's output lacks them
    (out / "skydiscover" / "dropped").rename(tmp_path / "set-aside")
    import_cli(out / "skydiscover", tmp_path / "without")
    assert set(tree(nodes(tmp_path / "without"))) == set(tree(records)) - saved


@pytest.mark.slow
def test_adaevolve_islands_copies_and_migrants_in_the_record_and_the_import(tmp_path: Path) -> None:
    """AdaEvolve's own sampling (native), two islands, a migration at iteration 15: the copies of
    the initial program and the migrants are no nodes, their children are their originals'."""
    out = tmp_path / "ada"
    run_api(out, policy="native", budget=16, seed=3, options={"search": "adaevolve"})
    records = nodes(out)
    ids = {r["id"] for r in records}
    assert all(r["parent"] in ids for r in records[1:])
    islands = {r["skydiscover"]["island"] for r in records if r["skydiscover"]["kept"]}
    assert islands == {0, 1}
    programs = [json.loads(p.read_text()) for p in (out / "skydiscover").rglob("programs/*.json")]
    copies = {p["id"] for p in programs if {"seeded_to_island", "migrated_from"} & set(p["metadata"] or {})}
    assert copies and copies.isdisjoint(ids)
    assert any(r["skydiscover"]["parent_id"] in copies for r in records)  # a copy was continued
    import_cli(out / "skydiscover", tmp_path / "imported")
    assert tree(nodes(tmp_path / "imported")) == tree(records)


@pytest.mark.slow
def test_a_policy_file_chooses_the_parents_and_an_empty_batch_stops(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("sk-not-for-policies")
    policy = tmp_path / "best_and_newest.py"
    policy.write_text(BEST_AND_NEWEST.format(secret=str(secret)))
    out = tmp_path / "world"
    run_api(out, policy=str(policy), budget=20, seed=0, options={"search": "adaevolve"})
    records = nodes(out)
    assert json.loads((out / "run_summary.json").read_text())["stopped_by"] == "policy"
    assert {r["round"] for r in records[1:]} == {1, 2, 3}
    for number in (1, 2, 3):
        prefix = [r for r in records if r["round"] < number]
        scores = [r["score"] if r["score"] is not None else float("-inf") for r in prefix]
        best = max(range(len(prefix)), key=lambda i: (scores[i], -i))
        chosen = [best] if best == len(prefix) - 1 else [best, len(prefix) - 1]
        made = {r["worker"]: r["parent"] for r in records if r["round"] == number}
        assert made == {slot: prefix[i]["id"] for slot, i in enumerate(chosen)}, f"round {number}"
    # the control: the same code as trusted module:Class, in-process, reads the file and stops at once
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "best_and_newest", raising=False)
    trusted = tmp_path / "trusted"
    run_api(trusted, policy="best_and_newest:Policy", budget=20, seed=0)
    assert len(nodes(trusted)) == 1


@pytest.mark.slow
def test_kill_9_then_resume_continues_and_a_second_writer_is_refused(tmp_path: Path, short_tmp_path: Path) -> None:
    out = tmp_path / "world"
    args = ("--policy", "fixed", "-W", "2", "--budget", "40", "--seed", "2", "--option", "search=adaevolve")
    command = [sys.executable, "-m", "dream_gym", "deploy", "--system", "skydiscover", "--task", TASK, *args,
               "--out", str(out)]
    # SkyDiscover's evaluator keeps each program in a temporary file that only it removes; the
    # killed run's go here
    env = {**os.environ, "TMPDIR": str(short_tmp_path)}
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 300
    while time.time() < deadline and len(lines(out)) < 8:
        time.sleep(0.05)
    from dream_gym.infrastructure.locks import LockedError
    from dream_gym.integrations.deploy import DeployRequest
    from dream_gym.integrations.deploy import deploy as deploy_api

    with pytest.raises(LockedError, match=f"pid {proc.pid}"):  # one writer per world
        deploy_api(DeployRequest(system="skydiscover", task=TASK, out=out, policy="fixed", budget=40, resume=True,
                                 options={"search": "adaevolve"}))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    before = lines(out)
    assert 8 <= len(before) < 41
    # the same run as args' (in this process), not refused: the killed run held the lock, nothing else
    run_api(out, policy="fixed", budget=40, seed=2, options={"search": "adaevolve"}, resume=True)
    after = nodes(out)
    assert [r["id"] for r in after[: len(before)]] == [json.loads(line)["id"] for line in before]
    assert len({r["id"] for r in after}) == len(after)
    assert sorted({r["skydiscover"]["iteration_found"] for r in after[1:]}) == list(range(1, 41))
    rounds = [r["round"] for r in after[1:]]
    assert rounds == sorted(rounds)  # the resumed run continued with the next rounds
    assert load_world(out).meta["sha256"]
    import_cli(out / "skydiscover", tmp_path / "imported")
    assert tree(nodes(tmp_path / "imported")) == tree(after)
    refused = deploy(out, *args, check=False)  # a finished world is not started again
    assert refused.returncode != 0 and "--resume" in refused.stderr


@pytest.mark.slow
def test_a_model_and_its_api_base_are_passed_through_on_a_task_given_as_files(tmp_path: Path) -> None:
    """`--task initial_program.py,evaluator.py --model M --api-base URL` (the API's ``model`` and
    ``api_base``): SkyDiscover's LLM client talks to URL with model M (here the agent server
    standing in for an OpenAI-compatible LLM); without a model, through the CLI."""
    from dream_gym.integrations.skydiscover import write_task_files
    from dream_gym.online.agent_server import AgentServer

    initial, evaluator = write_task_files(TASK, tmp_path / "problem")
    files = f"{initial},{evaluator}"
    with AgentServer(TASK, seed=0) as server:
        out = tmp_path / "world"
        run_api(out, policy="greedy", budget=4, task=files, model="openai/dream-gym-builtin",
                   api_base=server.base_url)
        assert server.requests >= 4
        # without --api-base, SkyDiscover's own resolution: the environment's OPENAI_API_BASE
        before = server.requests
        with pytest.MonkeyPatch.context() as env:
            env.setenv("OPENAI_API_BASE", server.base_url)
            run_api(tmp_path / "hosted", policy="greedy", budget=2, task=files, model="openai/dream-gym-builtin")
        assert server.requests >= before + 2 and len(nodes(tmp_path / "hosted")) >= 3
    meta = json.loads((out / "world.json").read_text())
    assert meta["agent"] == "openai/dream-gym-builtin" and meta["task"]["name"] == "problem"
    assert len(nodes(out)) >= 5
    # without --model the generic agent answers (no key); dream-gym's own evaluator file is given to
    # SkyDiscover as it is (it runs each candidate in the built-in task's sandbox)
    command = [sys.executable, "-m", "dream_gym", "deploy", "--system", "skydiscover", "--task", files,
               "--policy", "greedy", "-W", "2", "--budget", "4"]
    keyless = subprocess.run([*command, "--out", str(tmp_path / "other")], capture_output=True, text=True, timeout=600)
    assert keyless.returncode == 0, keyless.stderr[-3000:]
    assert json.loads((tmp_path / "other" / "world.json").read_text())["agent"].endswith("(generic agent)")
    assert len(nodes(tmp_path / "other")) >= 3 and nodes(tmp_path / "other")[0]["score"] > 0.9


def test_an_answer_that_does_not_parse_is_asked_again_and_a_failed_program_is_not(tmp_path: Path) -> None:
    """With a policy choosing, an iteration evaluates one program: an LLM answer with no program in
    it (nothing evaluated) is asked again within the slot, as SkyDiscover does; a program whose
    evaluation failed ends the slot, so the world has one node a slot and replays back. Each node
    records the tokens of the calls that made it (SkyDiscover keeps none), the unparsed answer's
    in its slot's node, priced at litellm's price for the model."""
    from openai_server import OpenAICompatServer, calls, no_program_first

    from dream_gym.fidelity import recorded_setting, reproduce
    from dream_gym.infrastructure.llm import import_litellm
    from dream_gym.online.agent_server import AgentResponder

    agent = AgentResponder(TASK, seed=0)
    with OpenAICompatServer() as server:
        server.responder = no_program_first(agent.reply)
        out = tmp_path / "world"
        run_api(out, policy="greedy", budget=8, model="openai/gpt-4o-mini", api_base=server.base_url)
    records = nodes(out)
    assert sorted(r["skydiscover"]["iteration_found"] for r in records[1:]) == list(range(1, 9))
    assert calls(server) == 9  # 8 programs and the answer asked again
    # the server's usage, a call's once: a transport-level retry (the same seed; under load a call
    # can time out) is billed again by the server, but only the answer the client got is counted
    billed = sum({request.body.get("seed"): max(1, len(request.text().split())) for request in server.requests}.values())
    assert sum(r["cost"]["tokens_in"] for r in records[1:]) == billed and "cost" not in records[0]
    for record in records[1:]:
        cost = record["cost"]
        price = sum(import_litellm().cost_per_token(model="gpt-4o-mini", prompt_tokens=cost["tokens_in"],
                                                    completion_tokens=cost["tokens_out"]))
        assert cost["usd"] == pytest.approx(price) and price > 0
    assert json.loads((out / "run_summary.json").read_text())["extra"]["without_program"] == 0
    assert any(r["score"] is None for r in records)  # failures, none retried within its slot
    world = load_world(out)
    setting = recorded_setting(world)
    replayed = reproduce(world, make_policy(setting.policy, **setting.params), seed=setting.seed,
                         settings=setting.settings)
    assert replayed.exact, replayed.reason


def test_a_model_without_api_base_is_resolved_as_skydiscover_resolves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider's model goes to the provider's server with its key, not to OpenAI's (the bridge
    once sent ``anthropic/...`` to api.openai.com); the environment's base wins, as in SkyDiscover;
    a provider without a server of its own needs --api-base."""
    from dream_gym.integrations.skydiscover.run import hosted_endpoint

    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert hosted_endpoint("anthropic/claude-x") == ("claude-x", "https://api.anthropic.com/v1/", "sk-ant-test")
    assert hosted_endpoint("openai/gpt-x") == ("gpt-x", "https://api.openai.com/v1", "sk-no-key-required")
    with pytest.raises(ValueError, match="no server of its own for ollama models; give --api-base"):
        hosted_endpoint("ollama/llama3")
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:9/v1")
    assert hosted_endpoint("gpt-x")[1] == hosted_endpoint("ollama/llama3")[1] == "http://127.0.0.1:9/v1"


def test_a_run_in_which_no_iteration_made_a_program_fails_naming_why(tmp_path: Path) -> None:
    """SkyDiscover logs a failed proposal (here a model whose answers hold no diff; an unreachable
    model the same after minutes of retries) and goes on: the run ended "by budget", exit 0, with
    the root alone. Now it is an error naming the last failure, and the world keeps the root."""
    from openai_server import OpenAICompatServer

    out = tmp_path / "world"
    with OpenAICompatServer() as server:
        server.responder = lambda body: "I cannot help with that."
        with pytest.raises(RuntimeError, match=r"none of SkyDiscover's 2 iteration\(s\) made a program .*"
                                               r"No valid diffs found"):
            run_api(out, policy="greedy", budget=2, model="m", api_base=server.base_url)
    assert len(nodes(out)) == 1


def lines(out: Path) -> list[str]:
    path = out / "nodes.jsonl"
    if not path.exists():
        return []
    return [line for line in path.read_text().split("\n")[:-1] if line.strip()]


@pytest.mark.parametrize("search, hook", [
    ("evox", "CoEvolutionManager._switch_to_new_search_algorithm"),
    ("openevolve", "skydiscover.extras.external.openevolve_backend.run"),
    ("shinkaevolve", "skydiscover.extras.external.shinkaevolve_backend.run"),
    ("gepa", "skydiscover.extras.external.gepa_backend.run"),
])
def test_searches_without_a_database_sample_are_refused_naming_why(tmp_path: Path, search: str, hook: str) -> None:
    out = tmp_path / "world"
    for policy in ("greedy", "native"):
        done = deploy(out, "--policy", policy, "--budget", "2", "--option", f"search={search}", check=False)
        assert done.returncode != 0 and hook in done.stderr and "sample()" in done.stderr
        assert done.stderr.count("error:") == 1 and "Traceback" not in done.stderr
    assert not out.exists()


def test_an_unknown_option_is_refused_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "world"
    bad = deploy(out, "--budget", "2", "--option", "serach=topk", check=False)
    assert bad.returncode != 0 and "unknown SkyDiscover option(s) serach" in bad.stderr and not out.exists()


def test_an_initial_program_that_fails_its_evaluation_is_named_once(tmp_path: Path) -> None:
    task = tmp_path / "task"
    task.mkdir()
    (task / "initial_program.py").write_text("def f(x):\n    return x\n", encoding="utf-8")
    (task / "evaluator.py").write_text(
        "def evaluate(program_path):\n    raise RuntimeError('the evaluator broke on purpose')\n", encoding="utf-8")
    files = f"{task / 'initial_program.py'},{task / 'evaluator.py'}"
    command = [sys.executable, "-m", "dream_gym", "deploy", "--system", "skydiscover", "--task", files,
               "--policy", "greedy", "-W", "2", "--budget", "2", "--out", str(tmp_path / "world")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2
    assert done.stderr.count("error:") == 1 and "Traceback" not in done.stderr and "traceback" not in done.stderr
    assert ("the initial program failed its evaluation, so the run has no scored program to start from: "
            "evaluator reported error='RuntimeError: the evaluator broke on purpose'") in done.stderr
    # what it left, and how to go on, said at once (the same command then said "pass --resume",
    # and --resume "start it again in a new --out")
    assert f"{tmp_path / 'world'} keeps that evaluation (a world without a baseline" in done.stderr
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 2 and "pass --resume" not in again.stderr
    assert "fix the task and start it again in a new --out" in again.stderr
    # SkyDiscover's own selection stops there too: it ran its whole budget (an LLM call each; 12
    # programs at --budget 4) on a world nothing can replay, then said so with exit 1
    native = [*command[:-8], "--policy", "native", "-W", "2", "--budget", "4", "--out", str(tmp_path / "native")]
    done = subprocess.run(native, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and done.stderr.count("error:") == 1 and "Traceback" not in done.stderr
    assert ("the initial program failed its evaluation, so the run has no scored program to start from: "
            "evaluator reported error='RuntimeError: the evaluator broke on purpose'") in done.stderr
    assert (tmp_path / "native" / "nodes.jsonl").read_text().count("\n") == 1  # the root's evaluation alone
    (task / "evaluator.py").write_text("def evaluate(program_path):\n    return {'combined_score': 1.0}\n",
                                       encoding="utf-8")
    command[-1] = str(tmp_path / "control")  # the same task with an evaluator that scores: it runs
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_ctrl_c_stops_the_run_gracefully_and_exits_as_interrupted(tmp_path: Path) -> None:
    out = tmp_path / "world"
    command = [sys.executable, "-m", "dream_gym", "deploy", "--system", "skydiscover", "--task", TASK,
               "--policy", "greedy", "--policy-arg", "patience=100", "-W", "2", "--budget", "16", "--out", str(out)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and not ((out / "nodes.jsonl").exists() and len(nodes(out)) >= 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
    said, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr[-3000:]  # an interrupted run is not a finished one
    assert "stopped by shutdown" in said and "--resume continues the run" in said and "Traceback" not in stderr
    recorded = len(nodes(out))
    assert 3 <= recorded < 17
    done = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=600)  # control
    assert done.returncode == 0, done.stderr[-3000:]
    assert "stopped by budget" in done.stdout and len(nodes(out)) > recorded


def test_skydiscovers_evaluator_file_runs_candidates_in_the_sandbox(tmp_path: Path) -> None:
    """The evaluator.py SkyDiscover imports scores a candidate through the task's own isolated
    evaluator: a candidate that writes outside its workspace cannot, and still gets its score."""
    from skydiscover.evaluation.evaluation_result import EvaluationResult

    from dream_gym.integrations.skydiscover import write_task_files
    from dream_gym.online.tasks import get_task

    _, evaluator = write_task_files(TASK, tmp_path / "task")
    namespace: dict[str, Any] = {}
    exec(compile(evaluator.read_text(), str(evaluator), "exec"), namespace)  # as SkyDiscover loads it
    escaped = tmp_path / "escaped.txt"
    candidate = tmp_path / "candidate.py"
    candidate.write_text(get_task(TASK).initial_program() + (
        "\n\ntry:\n    open(" + repr(str(escaped)) + ", 'w').write('out')\nexcept OSError:\n    pass\n"))
    result = namespace["evaluate"](str(candidate))
    assert isinstance(result, EvaluationResult) and result.metrics["combined_score"] > 0.9
    assert not escaped.exists()
    exec(compile(candidate.read_text(), str(candidate), "exec"), {})  # the control: unsandboxed, it writes
    assert escaped.read_text() == "out"
    candidate.write_text("def construct_packing(:\n")
    broken = namespace["evaluate"](str(candidate))
    assert broken.metrics["combined_score"] == 0.0 and "SyntaxError" in broken.metrics["error"]
    assert broken.artifacts["fail_class"] == "repairable"


def test_the_agent_servers_answers_parse_with_skydiscovers_own_parser() -> None:
    """SkyDiscover's prompts (its own builder, diff and full-rewrite templates) read by the agent
    server, whose answer SkyDiscover's own parser turns into the agent's program exactly."""
    from skydiscover.config import PromptConfig
    from skydiscover.prompt.default import DefaultContextBuilder
    from skydiscover.search.base_database import Program
    from skydiscover.utils.code_utils import apply_diff, parse_full_rewrite

    from dream_gym.integrations.skydiscover.evaluator import evaluate_program
    from dream_gym.online.agent_server import AgentResponder, ParsedPrompt, parse_prompt
    from dream_gym.online.agents import builtin_agent
    from dream_gym.online.tasks import get_task

    task = get_task(TASK)
    responder = AgentResponder(TASK, seed=0)
    builder = DefaultContextBuilder(PromptConfig())
    broken = task.initial_program().replace("def construct_packing():", "def construct_packing(:")
    for code in (task.initial_program(), broken):
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"dg-sky-{os.getpid()}.py"
        path.write_text(code)
        try:
            result = evaluate_program(TASK, str(path))
        finally:
            path.unlink()
        parent = Program(id="p", solution=code, metrics=result.metrics, artifacts=result.artifacts)
        for diff in (True, False):
            prompt = builder.build_prompt({"": parent}, {"program_metrics": parent.metrics, "diff_based_generation": diff,
                                                         "inspiration_programs": {}, "language": "python"})
            body = {"messages": [{"role": "system", "content": prompt["system"]},
                                 {"role": "user", "content": prompt["user"]}], "seed": 7}
            # the trap: the task text below the program quotes "# Current Program" (and the
            # full-rewrite template shows a placeholder code block after it)
            assert prompt["user"].rfind("# Current Program") > prompt["user"].find(code)
            parsed = parse_prompt(body["messages"])
            assert isinstance(parsed, ParsedPrompt) and parsed.code == code and parsed.diff_mode == diff
            if code is broken:
                assert parsed.fitness == 0.0 and parsed.error and "SyntaxError" in parsed.error
            else:
                assert parsed.error is None and parsed.fitness == pytest.approx(result.metrics["combined_score"], abs=1e-4)
                assert parsed.diagnostics == result.artifacts["diagnostics"]
            answer = responder.reply(body)
            child = apply_diff(code, answer) if diff else parse_full_rewrite(answer, "python")
            expected = builtin_agent(TASK).propose(task, _parent_context(parsed, task), responder.rng_for(body)).code
            assert child.strip() == expected.strip() and child.strip() != code.strip()


def _parent_context(parsed: Any, task: Any) -> Any:
    """The parent the server gives the agent (as AgentResponder.reply builds it)."""
    from dream_gym.online.agent_base import ParentContext
    from dream_gym.online.fitness import task_score

    score = None if parsed.error or parsed.fitness is None or parsed.fitness <= 0 else task_score(
        parsed.fitness, task.direction)
    return ParentContext(code=parsed.code, score=score, diagnostics=parsed.diagnostics, error=parsed.error,
                         history=[{"score": score, "error": parsed.error, "fail_class": None,
                                   "diagnostics": parsed.diagnostics[:300], "code": parsed.code}])


def test_a_config_whose_one_line_prompt_skydiscover_takes_for_a_file_name_is_explained(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """OpenEvolve's example configs write prompt.system_message on one line; SkyDiscover takes one
    under 500 characters for a file name, and one too long for a file name ended the deploy in
    "<the config's folder>/<the whole message>: File name too long"."""
    from dream_gym.cli import main

    message = "You are an expert programmer. " * 10  # one line, 300 characters
    config = tmp_path / "config.yaml"
    config.write_text(f"prompt:\n  system_message: \"{message}\"\n", encoding="utf-8")
    out = tmp_path / "world"
    assert main(["deploy", "--system", "skydiscover", "--task", TASK, "--policy", "greedy", "-W", "2", "--budget", "2",
                 "--option", f"config_path={config}", "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{config}: SkyDiscover reads a prompt.system_message of one line under 500 characters as the name of " \
           "a file beside the config, and this one is too long for a file name" in err
    assert "File name too long" not in err and not out.exists()
    config.write_text(f"prompt:\n  system_message: |\n    {message}\n    Be brief.\n", encoding="utf-8")  # the remedy
    from dream_gym.integrations.skydiscover.run import load_skydiscover_config

    assert load_skydiscover_config(config).prompt.system_message == f"{message}\nBe brief.\n"
