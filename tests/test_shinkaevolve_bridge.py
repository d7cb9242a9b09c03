"""The ShinkaEvolve bridge (`dream-gym deploy --system shinkaevolve`, dream_gym.integrations.shinkaevolve).

ShinkaEvolve runs for real (the installed 0.0.7 package: its asynchronous runner, its SQLite
database, its patch parsers, its evaluation subprocesses) against dream_gym's agent server;
nothing is mocked. Small budgets: W = 2, at most 20 generations. The greedy run, its same-seed
rerun, the killed run and the refusals go through the CLI as users run them; the other runs call
the public API (`deploy`) in the test's process, as importing ShinkaEvolve costs seconds a process.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("shinka")

from once import built_once  # noqa: E402
from shinka.core.sampler import PromptSampler  # noqa: E402
from shinka.database import DatabaseConfig, Program, ProgramDatabase  # noqa: E402
from shinka.edit.apply_diff import _mutable_ranges, apply_diff_patch  # noqa: E402
from shinka.edit.apply_full import apply_full_patch  # noqa: E402

from dream_gym import load_world  # noqa: E402
from dream_gym.integrations.deploy import DeployRequest, DeployResult, SystemUnavailable, deploy  # noqa: E402
from dream_gym.integrations.shinkaevolve import bridge  # noqa: E402
from dream_gym.integrations.shinkaevolve import deploy as shinka_deploy  # noqa: E402
from dream_gym.integrations.shinkaevolve.evaluator import feedback_text, marked_program, write_task_files  # noqa: E402
from dream_gym.online.agent_server import AgentResponder, AgentServer, parse_prompt, shinka_prompt  # noqa: E402
from dream_gym.online.agents import read_literal  # noqa: E402
from dream_gym.online.loop import tree_view  # noqa: E402
from dream_gym.online.tasks import get_task  # noqa: E402
from dream_gym.policies import make_policy  # noqa: E402
from dream_gym.policy import RunContext, batch_from  # noqa: E402

TASK = "circle-packing-26"
CLI = [sys.executable, "-m", "dream_gym", "deploy", "--system", "shinkaevolve"]
# A policy file (run isolated, as every policy file): round 1 continues the root twice; later
# rounds the best node and an invalid one when there is one not continued yet (ShinkaEvolve's
# fix mode), else the latest node; it stops after round 4.
FILE_POLICY = '''
class Policy:
    def reset(self, context):
        self.w = context.workers
        self.used = set()
    def act(self, view):
        if view.rounds >= 4:
            return []
        if view.rounds == 0:
            return [0, 0][: self.w]
        best = view.best().id
        invalid = [n.id for n in view.nodes if not n.valid and n.id not in self.used]
        other = invalid[0] if invalid else view.nodes[-1].id
        picks = [best] if other in (best, 0) else [best, other]
        self.used.update(picks)
        return picks[: self.w]
'''


def run_cli(out: Path, *args: str, task: str = TASK, timeout: float = 600, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "--task", task, *args, "--out", str(out)], capture_output=True, text=True,
                          timeout=timeout, **kwargs)


def run_api(out: Path, *, policy: str, budget: int, seed: int = 0, task: str = TASK, **settings: Any) -> DeployResult:
    """`deploy` with W = 2 in the test's process (ShinkaEvolve is imported already)."""
    return deploy(DeployRequest(system="shinkaevolve", task=task, out=out, policy=policy, workers=2, budget=budget,
                                seed=seed, **settings))


def nodes(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "nodes.jsonl").read_text().splitlines() if line.strip()]


def tree(records: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    return {r["id"]: (r["parent"], r["score"], r.get("code"), r.get("error")) for r in records}


def without_clock(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records apart from ShinkaEvolve's timestamps (wall-clock time)."""
    out = json.loads(json.dumps(records))
    for record in out:
        record.get("shinkaevolve", {}).pop("timestamp", None)
    return out


def generation(record: dict[str, Any]) -> int:
    return int(record["shinkaevolve"]["generation"])


# -- the task files and the agent server (fast) -------------------------------------------------------
def test_evaluate_py_writes_shinkas_result_files_from_the_sandboxed_evaluator(tmp_path: Path) -> None:
    initial, evaluate = write_task_files(TASK, tmp_path / "task")
    code = initial.read_text()
    assert _mutable_ranges(code) == [(len("# EVOLVE-BLOCK-START"), code.rindex("# EVOLVE-BLOCK-END"))]

    def evaluated(program: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        results = tmp_path / f"results-{program.name}"
        subprocess.run([sys.executable, str(evaluate), "--program_path", str(program), "--results_dir", str(results)],
                       check=True, capture_output=True, timeout=120)
        return (json.loads((results / "correct.json").read_text()), json.loads((results / "metrics.json").read_text()))

    correct, metrics = evaluated(initial)
    assert correct == {"correct": True, "error": None}
    assert metrics["combined_score"] == metrics["public"]["score"] == pytest.approx(0.9797642, abs=1e-6)
    broken = tmp_path / "broken.py"
    broken.write_text(marked_program("def construct_packing():\n    return RADI\n"))
    correct, metrics = evaluated(broken)
    assert not correct["correct"] and "NameError" in correct["error"] and metrics["combined_score"] == 0.0
    # the evaluation's work folder is named, not its path (a pid and a random suffix)
    assert "<workdir>/candidate.py" in metrics["text_feedback"] and "shinka_eval" not in metrics["text_feedback"]
    fifo = tmp_path / "fifo.py"  # a program file that would block a plain open() for ever
    os.mkfifo(fifo)
    correct, _ = evaluated(fifo)
    assert not correct["correct"] and "FIFO" in correct["error"]


def shinka_messages(kind: str, parent: Program, other: Program) -> list[dict[str, str]]:
    sampler = PromptSampler(patch_types=[kind], patch_type_probs=[1.0], use_text_feedback=True)
    system, user, _ = sampler.sample(parent, [other], [other])
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def test_the_agent_server_answers_every_shinka_prompt_in_the_form_shinka_parses() -> None:
    """ShinkaEvolve's own prompt sampler writes the prompts, its own parsers apply the answers."""
    parent_code = marked_program(get_task(TASK).initial_program())
    parent = Program(id="p", code=parent_code, correct=True, combined_score=0.98, public_metrics={"score": 0.98},
                     text_feedback=feedback_text(None, "valid packing of 26 circles"))
    other = Program(id="o", code=marked_program("CENTERS = [[0.5, 0.5]]\nRADII = [0.5]\n\n\ndef construct_packing():\n"
                                                "    return CENTERS, RADII\n"), correct=True, combined_score=0.5)
    responder = AgentResponder(TASK, seed=0)
    for kind, apply in (("diff", apply_diff_patch), ("full", apply_full_patch), ("cross", apply_full_patch)):
        messages = shinka_messages(kind, parent, other)
        replies = {responder.reply({"messages": messages, "seed": seed}) for seed in (0, 1, 2)}
        assert len(replies) == 3, "the request's seed picks the answer"
        assert responder.reply({"messages": messages, "seed": 1}) in replies
        for reply in replies:
            assert ("<DIFF>" in reply) == (kind == "diff") and ("<CODE>" in reply) == (kind != "diff")
            child, applied, _, error, _, _ = apply(patch_str=reply, original_str=parent_code, language="python",
                                                   verbose=False)
            assert error is None and applied >= 1, reply
            assert child.startswith("# EVOLVE-BLOCK-START\n") and child.rstrip().endswith("# EVOLVE-BLOCK-END")
            assert child != parent_code and len(read_literal(child, "CENTERS")) == 26  # the parent's, edited
        # the control: read as any other client's prompt, the program found is not the parent
        # (the text feedback's block in diff and full prompts, the crossover partner in cross prompts)
        assert parse_prompt(messages).code != shinka_prompt(messages).code
    # fix mode: the parent is incorrect; its error comes from the text feedback
    bad = Program(id="b", code=marked_program("def construct_packing(:\n    pass\n"), correct=False,
                  text_feedback=feedback_text("SyntaxError: invalid syntax", "line 1"),
                  metadata={"stderr_log": "SyntaxError: invalid syntax"})
    system, user, _ = PromptSampler(use_text_feedback=True).sample_fix(bad, [parent])
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    prompt = shinka_prompt(messages)
    assert prompt is not None and prompt.error == "SyntaxError: invalid syntax"
    assert prompt.code == "def construct_packing(:\n    pass\n"
    child, applied, _, error, _, _ = apply_full_patch(patch_str=responder.reply({"messages": messages, "seed": 0}),
                                                      original_str=bad.code, language="python", verbose=False)
    assert error is None and applied == 1 and "construct_packing():" in child


def test_the_hook_hands_out_the_chosen_parent_with_shinkas_own_context(tmp_path: Path) -> None:
    """PolicyAsyncDatabase on a real ShinkaEvolve database: a correct parent gets ShinkaEvolve's
    inspirations, an incorrect one its fix mode (its ancestors); the draws follow the seed."""
    db = ProgramDatabase(DatabaseConfig(db_path=str(tmp_path / "programs.sqlite")), embedding_model="")
    code = marked_program(get_task(TASK).initial_program())
    db.add(Program(id="root", code=code, correct=True, combined_score=0.98, generation=0))
    for i in range(1, 6):
        db.add(Program(id=f"c{i}", code=code + f"# {i}\n", parent_id="root", correct=True,
                       combined_score=1.0 + i / 10, generation=i))
    db.add(Program(id="bad", code="x", parent_id="c1", correct=False, combined_score=0.0, generation=6))
    async_db = bridge.PolicyAsyncDatabase(db, bridge.RunState(None, None, 2, results_dir=tmp_path))
    parent, archive, top_k, fix = async_db._chosen("c2", seed=1)
    assert parent.id == "c2" and not fix and archive and top_k and parent.id not in {p.id for p in archive + top_k}
    assert [p.id for p in async_db._chosen("c2", seed=1)[1]] == [p.id for p in archive]
    # the best program's inspiration is drawn at random (SQLite's RANDOM(), seeded): the same seed
    # gives the same program, and the seeds do pick among the island's programs
    draws = [tuple(p.id for p in async_db._chosen("c5", seed=s)[1]) for s in range(12)]
    assert draws == [tuple(p.id for p in async_db._chosen("c5", seed=s)[1]) for s in range(12)]
    assert len(set(draws)) > 1
    parent, ancestors, top_k, fix = async_db._chosen("bad", seed=1)
    assert parent.id == "bad" and fix and [p.id for p in ancestors] == ["root", "c1"] and top_k == []  # oldest first
    db.close()


def test_bad_requests_are_refused_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "world"
    with pytest.raises(FileNotFoundError, match="a.py does not exist"):
        deploy(DeployRequest(system="shinkaevolve", task="a.py,b.py", out=out, budget=2))
    with pytest.raises(ValueError, match="unknown ShinkaEvolve option"):
        deploy(DeployRequest(system="shinkaevolve", task=TASK, out=out, budget=2, options={"islands": 3}))
    with pytest.raises(KeyError, match="unknown task"):
        deploy(DeployRequest(system="shinkaevolve", task="no-such-task", out=out, budget=2))
    assert not (out / "nodes.jsonl").exists()
    assert shinka_deploy.check_shinka() == "0.0.7"
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.1.0")
    with pytest.raises(SystemUnavailable, match="sample_with_fix_mode_async"):
        deploy(DeployRequest(system="shinkaevolve", task=TASK, out=out, budget=2))


def test_an_initial_program_without_evolve_block_markers_is_refused(tmp_path: Path) -> None:
    # ShinkaEvolve refuses every patch outside the markers: such a run recorded the initial
    # program alone, and greedy then "stopped by policy"
    code = "def f(x):\n    return x * 0.5\n"
    (tmp_path / "evaluator.py").write_text(
        "import importlib.util\n"
        "def evaluate(program_path):\n"
        "    spec = importlib.util.spec_from_file_location('p', program_path)\n"
        "    module = importlib.util.module_from_spec(spec)\n"
        "    spec.loader.exec_module(module)\n"
        "    return {'combined_score': 1.0 / (1.0 + abs(module.f(3.0) - 2.0))}\n", encoding="utf-8")
    (tmp_path / "plain.py").write_text(code, encoding="utf-8")
    (tmp_path / "marked.py").write_text(f"# EVOLVE-BLOCK-START\n{code}# EVOLVE-BLOCK-END\n", encoding="utf-8")
    done = run_cli(tmp_path / "plain", "--policy", "greedy", "-W", "2", "--budget", "2",
                   task=f"{tmp_path / 'plain.py'},{tmp_path / 'evaluator.py'}")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "plain.py has none, so no child could be made; mark the code to evolve" in done.stderr
    assert not (tmp_path / "plain").exists()
    result = run_api(tmp_path / "marked", policy="greedy", budget=2,
                     task=f"{tmp_path / 'marked.py'},{tmp_path / 'evaluator.py'}")  # control: the same code, marked
    assert result.nodes == 3


def test_a_generation_started_and_never_saved_is_said_spent_at_the_resume(tmp_path: Path) -> None:
    """After a hard stop (a second Ctrl-C, kill -9) inside a generation, ShinkaEvolve does not start
    it again: the resumed run recorded one attempt fewer than its budget, and said only that "the
    policy chose its recorded rounds again"."""
    out = tmp_path / "world"
    run_api(out, policy="greedy", budget=2)
    (out / "shinkaevolve" / "gen_3").mkdir()  # what a generation stopped before its program was saved leaves
    result = run_api(out, policy="greedy", budget=6, resume=True)
    assert result.extra["lost_generations"] == [3]
    assert result.extra["resumed"].startswith("generation 3, started before the stop and not saved, is spent "
                                              "(ShinkaEvolve starts a generation once); the policy chose its")
    control = run_api(tmp_path / "control", policy="greedy", budget=2)
    assert control.extra["lost_generations"] == [] and "resumed" not in control.extra


def test_an_import_of_a_run_not_finished_says_it_holds_what_was_saved_so_far(tmp_path: Path) -> None:
    """`worlds import` of a deploy still running wrote a complete-looking world of its root alone,
    with no word (eval and validate say that a world is not finished)."""
    from dream_gym.datasets.importers.base import OrphanWarning
    from dream_gym.datasets.importers.shinkaevolve import import_shinkaevolve
    from dream_gym.infrastructure.locks import folder_lock

    out = tmp_path / "world"
    run_api(out, policy="greedy", budget=2)
    finished = import_shinkaevolve(out / "shinkaevolve", tmp_path / "control")
    assert not any("so far" in w for w in finished.warnings)  # control: a finished run
    meta = json.loads((out / "world.json").read_text())
    meta.pop("sha256")
    (out / "world.json").write_text(json.dumps(meta))  # a run stopped before its end
    with pytest.warns(OrphanWarning, match=r"was stopped before its end \(--resume of that run finishes it\): this "
                                           r"import holds the programs it had saved so far"):
        import_shinkaevolve(out / "shinkaevolve", tmp_path / "stopped")
    with folder_lock(out):  # a run writing it
        with pytest.warns(OrphanWarning, match=rf"is being written by pid {os.getpid()}: this import holds"):
            import_shinkaevolve(out / "shinkaevolve", tmp_path / "live")


# -- real runs through the CLI (slow) -------------------------------------------------------------------
GREEDY = ("--policy", "greedy", "-W", "2", "--budget", "8", "--seed", "0")


@pytest.fixture(scope="module")
def greedy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One greedy run per test session (its tests only read it), whichever worker asks first."""
    def run(folder: Path) -> None:
        done = run_cli(folder / "world", *GREEDY)
        assert done.returncode == 0, done.stderr[-3000:]

    return built_once(tmp_path_factory, "shinkaevolve-greedy-run", run) / "world"


@pytest.mark.slow
def test_every_program_is_recorded_and_the_policy_chose_every_parent(greedy_run: Path) -> None:
    out = greedy_run
    records = nodes(out)
    world = load_world(out)
    assert world.meta["sha256"] and world.workers == 2 and world.meta["policy"] == "greedy"
    # every program of ShinkaEvolve's database is a node (its island copies collapse onto the root)
    rows = bridge.read_program_rows(out / "shinkaevolve" / "programs.sqlite")
    copies = [r for r in rows if json.loads(r["metadata"]).get("_is_island_copy")]
    assert len(records) == len(rows) - len(copies) and {r["id"] for r in records} <= {r["id"] for r in rows}
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["stopped_by"] == "budget" and summary["extra"]["generations"] == 8
    assert sorted(generation(r) for r in records) == sorted(set(range(9)) - set(summary["extra"]["failed_generations"]))
    # ShinkaEvolve's own parent of every program is the one the policy chose for its generation
    by_id = {r["id"]: r for r in rows}
    for record in records[1:]:
        tag = record["shinkaevolve"]["metadata"]["dream_gym"]
        assert by_id[record["id"]]["parent_id"] == tag["chosen_parent"] == record["parent"]
    # a fresh greedy, driven through the recorded prefix views round by round, chooses those parents
    policy = make_policy("greedy")
    meta = json.loads((out / "world.json").read_text())
    rounds = sorted({r["round"] for r in records[1:]})
    assert rounds == list(range(1, max(rounds) + 1))
    for number in rounds:
        prefix = [r for r in records if r["round"] < number]
        view = tree_view(prefix, meta, workers=2, beta=0.5, frontier="any", rounds=number - 1, max_rounds=None)
        if number == 1:
            policy.reset(RunContext.from_view(view, seed=0))
        chosen = [prefix[i]["id"] for i in batch_from(policy.act(view))]
        made = [r for r in records if r["round"] == number]
        assert [r["parent"] for r in sorted(made, key=lambda r: r["worker"])] == chosen[: len(made)], number
        assert [generation(r) for r in made] == sorted(generation(r) for r in made)  # generation order


@pytest.mark.slow
def test_the_same_seed_gives_the_same_tree(greedy_run: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    done = run_cli(again, *GREEDY)
    assert done.returncode == 0, done.stderr[-3000:]
    assert without_clock(nodes(again)) == without_clock(nodes(greedy_run))
    assert nodes(again) != nodes(greedy_run)  # only the clock differs
    # the control: another seed, another tree (the agent's answers follow the seed)
    other = tmp_path / "other"
    run_api(other, policy="greedy", budget=2, seed=1)
    first = {generation(r): r.get("code") for r in nodes(greedy_run)}
    assert [first[generation(r)] for r in nodes(other)][1:] != [r.get("code") for r in nodes(other)][1:]


@pytest.mark.slow
def test_importing_shinkas_own_output_gives_the_same_tree(greedy_run: Path, tmp_path: Path) -> None:
    imported = tmp_path / "imported"
    done = subprocess.run([sys.executable, "-m", "dream_gym", "worlds", "import", "--from", "auto",
                           str(greedy_run / "shinkaevolve"), "--out", str(imported)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert tree(nodes(imported)) == tree(nodes(greedy_run))
    meta = json.loads((imported / "world.json").read_text())
    assert meta["source"]["system"] == "shinkaevolve"
    # the task and W of the deploy's world (they were the system folder's name and 1: the held-out
    # check of a dream on the import then picked the run's own task)
    assert (meta["task"]["name"], meta["workers"]) == (TASK, 2) and f"the task of the world in {greedy_run}" in \
        " ".join(done.stdout.split())


@pytest.mark.slow
def test_resume_records_what_shinka_saved_and_the_world_lacks(greedy_run: Path, tmp_path: Path) -> None:
    """Killed between ShinkaEvolve's commit and the world's write: the resumed run records the
    programs the world lacks from ShinkaEvolve's database, the same nodes as written live."""
    out = tmp_path / "world"
    shutil.copytree(greedy_run, out)
    whole = nodes(greedy_run)
    (out / "nodes.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in whole[:5]))
    meta = json.loads((out / "world.json").read_text())
    del meta["sha256"]  # not finished
    (out / "world.json").write_text(json.dumps(meta))
    run_api(out, policy="greedy", budget=8, seed=0, resume=True)  # GREEDY's settings
    assert without_clock(nodes(out)) == without_clock(whole) and len(whole) > 5


@pytest.mark.slow
def test_a_policy_file_chooses_the_parents_and_an_empty_batch_stops_shinka(tmp_path: Path) -> None:
    policy_file = tmp_path / "picks.py"
    policy_file.write_text(FILE_POLICY)
    out = tmp_path / "world"
    run_api(out, policy=str(policy_file), budget=20, seed=3)
    records = nodes(out)
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["stopped_by"] == "policy" and {r["round"] for r in records[1:]} == {1, 2, 3, 4}
    # the same class, driven in-process through the recorded prefix views, chose every parent
    spec = importlib.util.spec_from_file_location("picks", policy_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    policy = module.Policy()
    meta = json.loads((out / "world.json").read_text())
    for number in (1, 2, 3, 4):
        prefix = [r for r in records if r["round"] < number]
        view = tree_view(prefix, meta, workers=2, beta=0.5, frontier="any", rounds=number - 1, max_rounds=None)
        if number == 1:
            policy.reset(RunContext.from_view(view, seed=3))
        chosen = [prefix[i]["id"] for i in batch_from(policy.act(view))]
        made = sorted((r for r in records if r["round"] == number), key=lambda r: r["worker"])
        assert [r["parent"] for r in made] == chosen, number
    root_children = [r for r in records if r["round"] == 1]
    assert len(root_children) == 2 and root_children[0]["code"] != root_children[1]["code"]
    # a child of an incorrect parent comes from ShinkaEvolve's fix prompt
    invalid = {r["id"] for r in records if r["score"] is None}
    assert any(r["parent"] in invalid for r in records), "seed 3 continues an invalid node (pick another if not)"
    for record in records[1:]:
        fixing = record["parent"] in invalid
        assert (record["shinkaevolve"]["metadata"]["patch_type"] == "fix") == fixing


@pytest.mark.slow
def test_shinkas_own_selection_is_recorded_too(tmp_path: Path) -> None:
    out = tmp_path / "native"
    run_api(out, policy="native", budget=6, seed=1)
    records = nodes(out)
    assert load_world(out).meta["policy"] == "native" and len(records) >= 2
    assert all(r["round"] == (generation(r) - 1) // 2 + 1 for r in records[1:])
    assert all("dream_gym" not in r["shinkaevolve"]["metadata"] for r in records)
    imported = tmp_path / "imported"
    done = subprocess.run([sys.executable, "-m", "dream_gym", "worlds", "import", "--from", "auto",
                           str(out / "shinkaevolve"), "--out", str(imported)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert tree(nodes(imported)) == tree(records)
    again = run_cli(out, "--policy", "native", "-W", "2", "--budget", "6")
    assert again.returncode != 0 and "--resume" in again.stderr


@pytest.mark.slow
def test_kill_9_then_resume_finishes_the_budget_and_a_second_writer_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "world"
    args = ("--policy", "greedy", "-W", "2", "--budget", "16", "--seed", "1")
    proc = subprocess.Popen([*CLI, "--task", TASK, *args, "--out", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and not (out / "nodes.jsonl").exists() or len(lines(out)) < 6:
        assert proc.poll() is None, "the run ended before it could be killed"
        time.sleep(0.05)
    refused = run_cli(out, *args, "--resume")
    assert refused.returncode != 0 and f"pid {proc.pid}" in refused.stderr  # one writer per world
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    before = lines(out)
    assert 6 <= len(before) < 17
    killed = [json.loads(line) for line in before]
    seen: set[str] = set()
    for record in killed:  # the killed world is a valid prefix: every parent on an earlier line
        assert record["parent"] is None or record["parent"] in seen
        seen.add(record["id"])
    run_api(out, policy="greedy", budget=16, seed=1, resume=True)  # args' run: the lock died with the killed one
    after = nodes(out)
    assert [json.dumps(r) for r in after[: len(before)]] == [json.dumps(r) for r in killed]
    assert len({r["id"] for r in after}) == len(after)
    assert max(generation(r) for r in after) == 16
    rounds = [r["round"] for r in after[1:]]
    assert rounds == sorted(rounds)  # the resumed run continued with the next rounds
    assert load_world(out).meta["sha256"]


def lines(out: Path) -> list[str]:
    text = (out / "nodes.jsonl").read_text()
    return [line for line in text.split("\n")[:-1] if line.strip()]


@pytest.mark.slow
def test_a_run_in_which_no_generation_made_a_program_fails_naming_why(tmp_path: Path) -> None:
    """ShinkaEvolve logs a proposal that made no program (here a model whose answers hold no
    patch) and goes on: the run ended "by budget", exit 0, with the root alone. Now it is an error
    that says where ShinkaEvolve wrote why, and the world keeps the root."""
    from openai_server import OpenAICompatServer

    out = tmp_path / "world"
    with OpenAICompatServer() as server:
        server.responder = lambda body: "I cannot help with that."
        with pytest.raises(RuntimeError, match=r"none of ShinkaEvolve's 2 generation\(s\) made a program .*"
                                               r"evolution_run.log"):
            run_api(out, policy="greedy", budget=2, model="gpt-4.1-mini", api_base=server.base_url)
    assert len(nodes(out)) == 1


def test_a_node_counts_the_tokens_of_every_patch_attempt_of_its_generation(tmp_path: Path) -> None:
    """ShinkaEvolve keeps the tokens of the patch attempt that made the program only: a first
    answer with no patch in it (ShinkaEvolve asks again) was spent and not counted. A node now
    counts every patch call of its generation, as the server billed them."""
    from openai_server import OpenAICompatServer, no_program_first

    from dream_gym.online.agent_server import AgentResponder

    agent = AgentResponder(TASK, seed=0)
    out = tmp_path / "world"
    with OpenAICompatServer() as server:
        server.responder = no_program_first(agent.reply)
        run_api(out, policy="greedy", budget=3, model="dream-gym-builtin", api_base=server.base_url)
    records = nodes(out)
    # the server's usage, a call's once (a transport-level retry, with the same seed, is billed again
    # by the server, but only the answer the client got is counted)
    billed = sum({request.body.get("seed"): max(1, len(request.text().split())) for request in server.requests}.values())
    assert len(server.requests) > len(records) - 1  # an attempt asked again
    assert sum(r["cost"]["tokens_in"] for r in records[1:]) == billed, [r.get("cost") for r in records]


def test_a_task_given_as_shinka_files_with_an_openai_compatible_model(tmp_path: Path) -> None:
    """`--task initial.py,evaluate.py` (ShinkaEvolve's own two files) with --model and --api-base
    (the API's ``model`` and ``api_base``; the CLI's flags on the failing run): here a built-in
    task's files and the agent server standing in for the model."""
    initial, evaluate = write_task_files(TASK, tmp_path / "problem")
    with AgentServer(TASK, seed=0) as server:
        out = tmp_path / "world"
        run_api(out, policy="greedy", budget=3, model="dream-gym-builtin", api_base=server.base_url,
                task=f"{initial},{evaluate}")
        assert server.requests >= 3
        meta = json.loads((out / "world.json").read_text())
        assert meta["task"]["name"] == "problem" and meta["agent"] == "dream-gym-builtin" and len(nodes(out)) >= 3
        # an initial program that fails leaves no baseline for a policy: one clear error
        broken = tmp_path / "broken.py"
        broken.write_text(marked_program("def construct_packing():\n    return None\n"))
        done = run_cli(tmp_path / "broken", "--policy", "greedy", "-W", "2", "--budget", "3", "--model",
                       "dream-gym-builtin", "--api-base", server.base_url, task=f"{broken},{evaluate}")
    assert done.returncode == 2 and "the initial program failed its evaluation, so the run has no scored" in done.stderr
    assert f"{tmp_path / 'broken'} keeps that evaluation" in done.stderr  # and what to do about the folder
    assert done.stderr.count("error:") == 1


def test_ctrl_c_ends_the_round_and_a_resumed_run_spends_nothing(tmp_path: Path) -> None:
    # ShinkaEvolve raised KeyboardInterrupt out of its event loop: no summary, and the generations
    # of the round in flight were spent (a resumed run of 40 recorded 39 programs). In this process
    # (ShinkaEvolve is imported already); the CLI's exit status 130 is the other systems' (run_status).
    out = tmp_path / "world"
    nodes_file = out / "nodes.jsonl"
    late: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, _frame: late.append(number))  # a signal after the run

    def ctrl_c() -> None:
        deadline = time.time() + 300
        while time.time() < deadline and not (nodes_file.exists() and len(nodes_file.read_text().splitlines()) >= 3):
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)

    try:
        threading.Thread(target=ctrl_c, daemon=True).start()
        stopped = run_api(out, policy="greedy", budget=8, policy_params={"patience": 100})
        resumed = run_api(out, policy="greedy", budget=8, policy_params={"patience": 100}, resume=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not late  # the signal came while the run was going
    assert stopped.stopped_by == "shutdown" and 3 <= stopped.nodes < 9
    assert json.loads((out / "run_summary.json").read_text())["stopped_by"] == "budget"  # the resumed run's
    assert resumed.stopped_by == "budget" and resumed.nodes == 9  # no generation was spent
