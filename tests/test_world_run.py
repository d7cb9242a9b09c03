"""What every bridge's run shares (dream_gym.integrations.world_run, .evaluator_files, .bridge_state).

The three bridges run their systems through one frame: the version check, the world folder
opened under its lock, the program file read as data, the metrics of an evaluation. Each is
attacked here through its public functions (an unsupported version, a second run of a folder, a
FIFO or an oversized file where a program should be, non-finite metrics), with the control that
a well-formed input passes. The bridges' own tests run the frame end to end through the CLI.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
from pathlib import Path

import pytest

from dream_gym.infrastructure.extras import install_command
from dream_gym.integrations.deploy import DeployRequest, SystemUnavailable
from dream_gym.integrations.evaluator_files import (
    PROGRAM_MAX_BYTES,
    ProgramFileError,
    numeric_metrics,
    program_metrics,
    read_program,
)
from dream_gym.integrations.world_run import check_version, open_world, world_meta

TASK = "sum-difference"


def test_an_unsupported_or_missing_system_is_unavailable_naming_what_the_bridge_needs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    installed = importlib.metadata.version("pytest")
    series = tuple(installed.split(".")[:2])
    assert check_version("pytest", "Pytest", "pytest", ">=x", series, "its hooks") == installed  # control
    with pytest.raises(SystemUnavailable, match=r"Pytest .* is installed; the bridge supports pytest>=x \(its hooks\)"):
        check_version("pytest", "Pytest", "pytest", ">=x", ("0", "0", "1"), "its hooks")
    with pytest.raises(SystemUnavailable, match=re.escape(f"NoSuch is not installed: {install_command('nosuch')}")):
        check_version("no-such-distribution-here", "NoSuch", "nosuch", ">=1", ("1",), "its hooks")
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "9.9.9")
    from dream_gym.integrations.openevolve.run import check_openevolve
    from dream_gym.integrations.skydiscover.run import check_skydiscover

    with pytest.raises(RuntimeError, match="OpenEvolve 9.9.9 is installed; the bridge supports openevolve>=0.4,<0.5"):
        check_openevolve()
    with pytest.raises(SystemUnavailable, match="SkyDiscover 9.9.9 is installed; the bridge supports skydiscover"):
        check_skydiscover()


def test_the_program_file_is_read_as_data(tmp_path: Path) -> None:
    program = tmp_path / "program.py"
    program.write_text("x = 1\n", encoding="utf-8")
    assert read_program(program) == b"x = 1\n"  # control
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    with pytest.raises(ProgramFileError, match="program file is a FIFO, not a regular file"):
        read_program(fifo)
    large = tmp_path / "large.py"
    large.write_bytes(b"#" * (PROGRAM_MAX_BYTES + 1))
    with pytest.raises(ProgramFileError, match=r"\(1 MB is the limit\)"):
        read_program(large)
    link = tmp_path / "link.py"
    link.symlink_to(program)
    with pytest.raises(ProgramFileError, match="program file is a symbolic link"):
        read_program(link)
    metrics, artifacts = program_metrics(TASK, str(fifo))  # an evaluator file's answer: invalid, with the reason
    assert metrics == {"combined_score": 0.0, "error": "program file is a FIFO, not a regular file"}
    assert artifacts["fail_class"] == "repairable"


def test_only_finite_numbers_are_metrics() -> None:
    metrics = {"a": 1, "b": 2.5, "flag": True, "nan": float("nan"), "inf": float("inf"), "text": "1", "combined_score": 3}
    assert numeric_metrics(metrics) == {"a": 1.0, "b": 2.5, "combined_score": 3.0}
    assert numeric_metrics(metrics, leave_out=("combined_score",)) == {"a": 1.0, "b": 2.5}


def _files(name: str, folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    initial, evaluator = folder / "initial.py", folder / "evaluator.py"
    initial.write_text("x = 1\n", encoding="utf-8")
    evaluator.write_text(f"TASK = {name!r}\n", encoding="utf-8")
    return initial, evaluator


def test_a_world_folder_is_opened_once_and_resumed_only_when_asked(tmp_path: Path) -> None:
    out = tmp_path / "world"
    request = DeployRequest(system="openevolve", task=TASK, out=out, workers=3, seed=7, command="dream-gym deploy")

    def meta(name: str | None, initial: Path, evaluator: Path) -> dict[str, object]:
        return world_meta(request, name, initial, frontier="any", source="a test", section="system", version="1.0",
                          run={"budget": 5}, files={"initial": str(initial), "evaluator": str(evaluator)})

    writer, name, initial, evaluator = open_world(request, "system", write_task_files=_files, meta=meta)  # control
    writer.append({"id": "root", "parent": None, "score": 1.0, "round": 0})
    writer.close()
    assert (name, initial, evaluator) == (TASK, (out / "task" / "initial.py").resolve(),
                                          (out / "task" / "evaluator.py").resolve())
    written = json.loads((out / "world.json").read_text(encoding="utf-8"))
    assert written["workers"] == 3 and written["seed"] == 7 and written["agent"].endswith("(built-in agent)")
    assert written["system"] == {"version": "1.0", "budget": 5, "task_direction": "maximize",
                                 "initial": str(initial), "evaluator": str(evaluator)}
    with pytest.raises(FileExistsError, match="already holds a world; pass --resume"):
        open_world(request, "system", write_task_files=_files, meta=meta)
    request.resume = True
    writer, *_ = open_world(request, "system", write_task_files=_files, meta=meta)
    assert [r["id"] for r in writer.records] == ["root"]
    writer.close()
    other = DeployRequest(system="openevolve", task=TASK, out=tmp_path / "other", resume=True)
    (tmp_path / "other" / "system").mkdir(parents=True)
    with pytest.raises(FileExistsError, match="other/system exists without a world to resume"):
        open_world(other, "system", write_task_files=_files, meta=meta)
    # --resume into a folder of the user's own files started a new run among them, exit 0
    mine = DeployRequest(system="openevolve", task=TASK, out=tmp_path / "mine", resume=True)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"--resume: .*mine holds no world to continue \(no nodes.jsonl\), but "
                                              r"other files \(notes.txt\)"):
        open_world(mine, "system", write_task_files=_files, meta=meta)
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    killed = DeployRequest(system="openevolve", task=TASK, out=tmp_path / "killed", resume=True)
    _files(TASK, tmp_path / "killed" / "task")  # what a run killed before its world was made leaves
    writer, *_ = open_world(killed, "system", write_task_files=_files, meta=meta)
    writer.close()
    refused: list[bool] = []

    def refuse(exists: bool) -> None:
        refused.append(exists)
        raise FileExistsError("the system refuses")

    with pytest.raises(FileExistsError, match="the system refuses"):
        open_world(DeployRequest(system="openevolve", task=TASK, out=tmp_path / "third"), "system",
                   write_task_files=_files, meta=meta, check=refuse)
    assert refused == [False] and not (tmp_path / "third" / "world.json").exists()


def test_a_new_run_is_refused_a_folder_that_holds_something_else(tmp_path: Path) -> None:
    """Its world's and task's files would land among another's: refused naming what is there,
    before anything is written (a folder holding only its lock file is empty)."""
    out = tmp_path / "notes"
    out.mkdir()
    (out / "keep.txt").write_text("keep")
    request = DeployRequest(system="openevolve", task=TASK, out=out)
    with pytest.raises(FileExistsError, match=r"notes: output folder exists and is not empty \(it holds keep.txt\)"):
        open_world(request, "system", write_task_files=_files, meta=_meta_of(request, "system"))
    assert sorted(p.name for p in out.iterdir() if p.name != ".lock") == ["keep.txt"]
    (out / "keep.txt").unlink()
    writer, *_ = open_world(request, "system", write_task_files=_files, meta=_meta_of(request, "system"))  # control
    writer.close()


def _meta_of(request: DeployRequest, section: str):  # type: ignore[no-untyped-def]
    def meta(name: str | None, initial: Path, evaluator: Path) -> dict[str, object]:
        return world_meta(request, name, initial, frontier="any", source=f"a {section} run", section=section,
                          version="1.0", run={"budget": 5}, files={"initial": str(initial), "evaluator": str(evaluator)})
    return meta


def _new_world(request: DeployRequest, section: str, root: dict[str, object]) -> None:
    writer, *_ = open_world(request, section, write_task_files=_files, meta=_meta_of(request, section))
    writer.append(root)
    writer.close()


def test_resume_continues_only_the_system_and_task_that_made_the_world(tmp_path: Path) -> None:
    out = tmp_path / "world"
    _new_world(DeployRequest(system="openevolve", task=TASK, out=out), "openevolve",
               {"id": "root", "parent": None, "score": 1.0, "round": 0})
    nodes_before = (out / "nodes.jsonl").read_bytes()
    again = DeployRequest(system="openevolve", task=TASK, out=out, resume=True)
    writer, *_ = open_world(again, "openevolve", write_task_files=_files, meta=_meta_of(again, "openevolve"))  # control
    writer.close()
    with pytest.raises(ValueError, match=r"holds a world that another system wrote \(a openevolve run\); --resume "
                                         r"continues a world with the --system that wrote it"):
        open_world(again, "skydiscover", write_task_files=_files, meta=_meta_of(again, "skydiscover"))
    other = DeployRequest(system="openevolve", task="circle-packing-26", out=out, resume=True)
    with pytest.raises(ValueError, match="holds a run of --task sum-difference, not of --task circle-packing-26"):
        open_world(other, "openevolve", write_task_files=_files, meta=_meta_of(other, "openevolve"))
    assert "sum-difference" in (out / "task" / "evaluator.py").read_text(encoding="utf-8")  # not rewritten
    assert (out / "nodes.jsonl").read_bytes() == nodes_before
    moved = tmp_path / "moved"
    out.rename(moved)  # a world folder moved elsewhere still resumes (control)
    again.out = moved
    writer, *_ = open_world(again, "openevolve", write_task_files=_files, meta=_meta_of(again, "openevolve"))
    writer.close()


def test_resume_of_an_imported_world_names_it_in_a_few_words(tmp_path: Path) -> None:
    out = tmp_path / "world"
    out.mkdir()
    (out / "nodes.jsonl").write_text("")
    (out / "world.json").write_text(json.dumps({"source": {"system": "openevolve", "path": "/runs/x", "import": {
        f"count_{i}": i for i in range(30)}}}))
    request = DeployRequest(system="openevolve", task=TASK, out=out, resume=True)
    with pytest.raises(ValueError) as refused:
        open_world(request, "openevolve", write_task_files=_files, meta=_meta_of(request, "openevolve"))
    # the same system, imported: it said "another system wrote" it
    assert str(refused.value) == (f"{out} holds a world imported from a run of openevolve, not one that deploy "
                                  "recorded; --resume continues a deploy's own world (start the run in a new --out)")


def test_resume_of_a_task_given_as_files_needs_the_same_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = _files("first", tmp_path / "first"), _files("second", tmp_path / "second")
    out = tmp_path / "world"
    _new_world(DeployRequest(system="skydiscover", task=f"{first[0]},{first[1]}", out=out), "skydiscover",
               {"id": "root", "parent": None, "score": 1.0, "round": 0})
    monkeypatch.chdir(tmp_path)  # the same files by another path: the same task (control)
    same = DeployRequest(system="skydiscover", task="first/initial.py, ./first/evaluator.py", out=out, resume=True)
    writer, *_ = open_world(same, "skydiscover", write_task_files=_files, meta=_meta_of(same, "skydiscover"))
    writer.close()
    other = DeployRequest(system="skydiscover", task=f"{second[0]},{second[1]}", out=out, resume=True)
    with pytest.raises(ValueError, match=r"holds a run of --task .*first/initial.py,.*first/evaluator.py, not of "
                                         r"--task .*second/initial.py"):
        open_world(other, "skydiscover", write_task_files=_files, meta=_meta_of(other, "skydiscover"))


def test_resume_of_a_run_whose_initial_program_failed_names_the_failure(tmp_path: Path) -> None:
    out = tmp_path / "world"
    request = DeployRequest(system="shinkaevolve", task=TASK, out=out)
    _new_world(request, "shinkaevolve", {"id": "root", "parent": None, "score": None, "round": 0,
                                         "error": "RuntimeError: the evaluator broke; traceback:   File ..."})
    for resume in (True, False):  # without --resume: not "pass --resume", which is refused too
        request.resume = resume
        with pytest.raises(ValueError, match=r"the run's initial program failed its evaluation \(RuntimeError: the "
                                             r"evaluator broke\), so the run cannot continue; fix the task and start "
                                             r"it again in a new --out"):
            open_world(request, "shinkaevolve", write_task_files=_files, meta=_meta_of(request, "shinkaevolve"))


def test_a_task_that_names_nothing_is_refused_before_the_world_folder_is_made(tmp_path: Path) -> None:
    initial, evaluator = _files("files", tmp_path / "task")
    for spec, why in ((f"{initial}", "a task given as files is its two files, initial_program.py,evaluator.py"),
                      (f"{initial},{tmp_path / 'none.py'}", "none.py does not exist"),
                      ("no-such-task", "unknown task 'no-such-task'; known tasks:")):
        out = tmp_path / "world"
        request = DeployRequest(system="openevolve", task=spec, out=out)
        with pytest.raises((ValueError, OSError, LookupError), match=why):
            open_world(request, "system", write_task_files=_files, meta=_meta_of(request, "system"))
        assert not out.exists()
    request = DeployRequest(system="openevolve", task=f"{initial},{evaluator}", out=tmp_path / "world")  # control
    writer, name, *_ = open_world(request, "system", write_task_files=_files, meta=_meta_of(request, "system"))
    writer.close()
    assert name is None and (tmp_path / "world" / "world.json").is_file()


@pytest.mark.parametrize(("changed", "message"), [
    ({"workers": 4}, "workers 2, not 4"), ({"seed": 1}, "seed 0, not 1"), ({"beta": 1.0}, "beta 0.5, not 1.0"),
    ({"policy": "fixed"}, "policy 'greedy', not 'fixed'"),
    ({"policy_params": {"patience": 4}}, "policy_params {'patience': 2}, not {'patience': 4}"),
    ({"policy_params": {}}, "policy_params {'patience': 2}, not {}"),
])
def test_resume_with_other_run_settings_is_refused(tmp_path: Path, changed: dict[str, object], message: str) -> None:
    """world.json would describe one run and the nodes after it another: the fidelity study, which
    replays the recording policy (with its parameters) at the recorded W, seed and beta, would
    replay the wrong one."""
    out = tmp_path / "world"
    first = DeployRequest(system="openevolve", task=TASK, out=out, policy="greedy", workers=2, seed=0, beta=0.5,
                          policy_params={"patience": 2})
    _new_world(first, "openevolve", {"id": "root", "parent": None, "score": 1.0, "round": 0})
    assert json.loads((out / "world.json").read_text())["policy_params"] == {"patience": 2}  # replay needs them
    nodes_before = (out / "nodes.jsonl").read_bytes()
    same = DeployRequest(**{**vars(first), "resume": True})
    writer, *_ = open_world(same, "openevolve", write_task_files=_files, meta=_meta_of(same, "openevolve"))  # control
    writer.close()
    other = DeployRequest(**{**vars(first), "resume": True, **changed})
    with pytest.raises(ValueError, match=f"holds a run recorded with {message}: --resume continues a run with the "
                                         "settings it was started with"):
        open_world(other, "openevolve", write_task_files=_files, meta=_meta_of(other, "openevolve"))
    assert (out / "nodes.jsonl").read_bytes() == nodes_before


def test_a_world_written_before_policy_parameters_were_recorded_resumes_with_them(tmp_path: Path) -> None:
    """Such a world.json has no policy_params (a world now records them, {} included): nothing to compare."""
    out = tmp_path / "world"
    first = DeployRequest(system="openevolve", task=TASK, out=out, policy="greedy", policy_params={"patience": 2})
    _new_world(first, "openevolve", {"id": "root", "parent": None, "score": 1.0, "round": 0})
    meta = json.loads((out / "world.json").read_text())
    del meta["policy_params"]
    (out / "world.json").write_text(json.dumps(meta))
    again = DeployRequest(**{**vars(first), "resume": True})
    writer, *_ = open_world(again, "openevolve", write_task_files=_files, meta=_meta_of(again, "openevolve"))
    writer.close()
    unset = tmp_path / "unset"
    _new_world(DeployRequest(system="openevolve", task=TASK, out=unset, policy="greedy"), "openevolve",
               {"id": "root", "parent": None, "score": 1.0, "round": 0})
    assert json.loads((unset / "world.json").read_text())["policy_params"] == {}


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("command", [
    ["deploy", "--system", "openevolve", "--budget", "2"], ["deploy", "--system", "shinkaevolve", "--budget", "2"],
    ["deploy", "--system", "skydiscover", "--budget", "2"], ["openevolve", "run", "--iterations", "2"]])
def test_a_model_server_nobody_answers_at_is_refused_before_anything_is_written(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The systems retry an unreachable --api-base for minutes a proposal (ShinkaEvolve printed
    nothing for 6 minutes; SkyDiscover then ended "by budget" with the root alone)."""
    from dream_gym.cli import main

    system = command[2] if command[0] == "deploy" else "openevolve"
    pytest.importorskip({"shinkaevolve": "shinka", "skydiscover": "skydiscover"}.get(system, "openevolve"))
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    out = tmp_path / "world"
    assert main([*command, "--task", "circle-packing-26", "--policy", "greedy", "-W", "2", "--model", "m",
                 "--api-base", url, "--out", str(out)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert f"--api-base {url}: nothing accepts a connection at 127.0.0.1:" in line and "start the server" in line
    assert not out.exists()


@pytest.mark.parametrize("command", [
    ["deploy", "--system", "openevolve", "--budget", "2"], ["deploy", "--system", "shinkaevolve", "--budget", "2"],
    ["deploy", "--system", "skydiscover", "--budget", "2"], ["openevolve", "run", "--iterations", "2"]])
def test_a_hosted_model_out_of_reach_is_refused_before_anything_is_written(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --api-base the server is the one the system resolves the model to (here the
    environment's, as on a machine whose network is down): ShinkaEvolve retried it silently for
    minutes a proposal, OpenEvolve and SkyDiscover for about 30 s an iteration."""
    from dream_gym.cli import main

    system = command[2] if command[0] == "deploy" else "openevolve"
    pytest.importorskip({"shinkaevolve": "shinka", "skydiscover": "skydiscover"}.get(system, "openevolve"))
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):  # ours and SkyDiscover's; the OpenAI client's
        monkeypatch.setenv(name, url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = "gpt-4.1-mini" if system == "shinkaevolve" else "openai/gpt-4.1-mini"  # ShinkaEvolve's name of it
    out = tmp_path / "world"
    assert main([*command, "--task", "circle-packing-26", "--policy", "greedy", "-W", "2", "--model", model,
                 "--out", str(out)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert f"--model {model} is served at {url}" in line and "nothing accepts a connection at 127.0.0.1:" in line
    assert not out.exists()


def test_an_openevolve_model_of_another_provider_is_refused_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dream_gym.cli import main

    pytest.importorskip("openevolve")
    out = tmp_path / "world"
    assert main(["deploy", "--system", "openevolve", "--budget", "2", "--task", "circle-packing-26", "--model",
                 "anthropic/claude-x", "--out", str(out)]) == 2
    assert "OpenEvolve speaks the OpenAI API" in capsys.readouterr().err and not out.exists()


def test_behind_a_proxy_the_proxy_is_what_must_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The OpenAI client sends through the environment's proxy, where the host itself may be out
    of direct reach (its name does not even resolve here); NO_PROXY sends it direct again."""
    import socket

    from dream_gym.infrastructure.llm import unreachable

    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                 "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as proxy:
        proxy.bind(("127.0.0.1", 0))
        proxy.listen()
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.getsockname()[1]}")
        assert unreachable("https://api.example.invalid/v1") is None
        monkeypatch.setenv("NO_PROXY", "api.example.invalid")
        assert "nothing accepts a connection at api.example.invalid:443" in str(unreachable("https://api.example.invalid/v1"))
    monkeypatch.delenv("NO_PROXY")
    closed = _closed_port()
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{closed}")
    why = str(unreachable("https://api.example.invalid/v1"))
    assert f"127.0.0.1:{closed} (the proxy of the environment for api.example.invalid)" in why
