"""``dream-gym fidelity``: real online runs (grow, OpenEvolve), replay on their worlds, the
agreement statistics, the table, and a study killed with -9 that the same command continues."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from once import built_once
from scipy import stats

from dream_gym import load_world
from dream_gym.cli import main as cli_main
from dream_gym.fidelity.runs import JOURNAL, run_folder
from dream_gym.fidelity.study import pool_folder
from dream_gym.fidelity.table import render

TASK = "circle-packing-26"


def fidelity(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dream_gym", "fidelity", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "COLUMNS": "80"})


def journal(out: Path) -> list[dict[str, Any]]:
    path = out / JOURNAL
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


# -- a study with grow ---------------------------------------------------------------------------
GROW_STUDY = ("--task", TASK, "-p", "greedy", "-p", "random", "--seeds", "0-2", "-n", "8", "-W", "2")


@pytest.fixture(scope="module")
def grow_study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The study's folder and what it printed, once per test session (its tests only read the
    folder), whichever worker asks first."""
    def study(folder: Path) -> None:
        done = fidelity(*GROW_STUDY, "--out", str(folder / "grow"))
        assert done.returncode == 0, done.stderr[-3000:]
        (folder / "stdout.txt").write_text(done.stdout)

    folder = built_once(tmp_path_factory, "fidelity-grow-study", study)
    return folder / "grow", (folder / "stdout.txt").read_text()


@pytest.mark.slow
def test_a_grow_study_runs_replays_and_compares(grow_study: tuple[Path, str]) -> None:
    out, stdout = grow_study
    report = json.loads((out / "fidelity.json").read_text())
    assert [(r["policy"], r["seed"]) for r in report["runs"]] == [(p, s) for p in ("greedy", "random") for s in range(3)]
    assert all(r["reproduced"] for r in report["runs"])  # replay gives every run back
    assert len(report["replays"]) == 2 * 3 * 2  # two recorders (the policies) x three seeds x two policies
    assert set(report["agreement"]) == {"greedy", "random", "all recorders"}
    assert (out / "fidelity.txt").read_text().strip() == stdout.strip()
    assert all(len(line) <= 80 for line in stdout.splitlines())
    assert "Replay fidelity: circle-packing-26 (grow)" in stdout and "online ceiling" in stdout


@pytest.mark.slow
def test_the_figures_follow_from_the_worlds(grow_study: tuple[Path, str]) -> None:
    """Recomputed here from the worlds and the replay rows, with scipy: the online V, the
    per-policy means, and each recorder's rank correlations."""
    out, _ = grow_study
    report = json.loads((out / "fidelity.json").read_text())
    worlds = {(p, s): load_world(run_folder(out, p, s)) for p in ("greedy", "random") for s in range(3)}
    for run in report["runs"]:
        world = worlds[(run["policy"], run["seed"])]
        reference = max(w.best_score for (_, s), w in worlds.items() if s == run["seed"])
        q = (world.best_score - world.baseline_score) / (reference - world.baseline_score)
        rounds = max(r.get("round") or 0 for r in world.records)
        expected = q - 0.003 * (world.size - 1) + 0.02 * (world.size - 1) / max(1, rounds)
        assert run["online_V"] == pytest.approx(expected) and run["final_best"] == pytest.approx(world.best_score)
    for recorder in ("greedy", "random"):
        replay_v = {p: statistics.mean(r["V"] for r in report["replays"] if r["recorder"] == recorder and r["policy"] == p)
                    for p in ("greedy", "random")}
        for outcome in ("final_best", "online_V"):
            online = {p: statistics.mean(r[outcome] for r in report["runs"] if r["policy"] == p)
                      for p in ("greedy", "random")}
            xs, ys = [replay_v[p] for p in online], [online[p] for p in online]
            theirs = stats.spearmanr(xs, ys).statistic if len(set(xs)) > 1 and len(set(ys)) > 1 else math.nan
            ours = report["agreement"][recorder][outcome]["spearman"]["rho"]
            assert (ours is None and math.isnan(theirs)) or ours == pytest.approx(theirs)
            assert report["policies"]["greedy"][outcome] == pytest.approx(statistics.mean(
                r[outcome] for r in report["runs"] if r["policy"] == "greedy"))


def study_copy(grow_study: tuple[Path, str], tmp_path: Path) -> Path:
    """A copy of the session's study, for a test that runs the command on it: the command takes
    the folder's lock (a ``.lock`` file, removed when it ends), which the shared study must not get
    while other workers read or copy it."""
    out = tmp_path / "grow"
    shutil.copytree(grow_study[0], out)
    return out


@pytest.mark.slow
def test_the_same_command_again_runs_nothing_and_reports_the_same(grow_study: tuple[Path, str], tmp_path: Path) -> None:
    out = study_copy(grow_study, tmp_path)
    before = (out / "fidelity.json").read_text()
    again = fidelity(*GROW_STUDY, "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert "6 of 6 online runs done; running 0" in again.stderr
    assert (out / "fidelity.json").read_text() == before and again.stdout == grow_study[1]
    assert len(journal(out)) == 6


@pytest.mark.slow
def test_a_study_folder_keeps_its_settings(grow_study: tuple[Path, str], tmp_path: Path) -> None:
    out = study_copy(grow_study, tmp_path)
    other = fidelity(*[a if a != "2" else "4" for a in GROW_STUDY], "--out", str(out))
    assert other.returncode == 2
    assert "holds a study of other settings (workers 2 there, 4 here)" in other.stderr
    assert len(journal(out)) == 6  # nothing ran


@pytest.mark.slow
def test_a_pool_of_runs_is_a_recorder_held_to_the_online_budget(tmp_path: Path) -> None:
    """pool:A+B replays every policy on the seed's runs of A and B merged, at most the online
    runs' attempts per episode; the control: the same pool replayed without that limit lets a
    policy spend more than an online run could."""
    from dream_gym.evaluation.evaluate import evaluate

    out = tmp_path / "pooled"
    args = ("--task", "sum-difference", "-p", "greedy", "-p", "random", "--seeds", "0-2", "-n", "6", "-W", "2", "--frontier", "any",
            "--recorder", "greedy", "--recorder", "pool:random+greedy", "--recorder", "pool:all", "--out", str(out))
    done = fidelity(*args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "0 of 6 online runs done; running 6" in done.stderr  # a pool runs nothing of its own
    report = json.loads((out / "fidelity.json").read_text())
    assert set(report["agreement"]) == {"greedy", "pool:random+greedy", "pool:all"}  # one single run: no mean
    pooled = [r for r in report["replays"] if r["recorder"] == "pool:random+greedy"]
    assert len(pooled) == 3 * 2 and all(r["attempts"] <= 6 for r in pooled)
    costs = report["recorders"]
    unlimited = []
    for seed in range(3):
        runs = [load_world(run_folder(out, p, seed)) for p in ("random", "greedy")]
        pool = load_world(pool_folder(out, "pool:random+greedy", seed))
        assert [r["id"] for r in pool.meta["pool"]["runs"]] == [w.id for w in runs]  # in the order given
        assert pool.size == sum(w.size for w in runs) - pool.meta["pool"]["merged"]
        assert load_world(pool_folder(out, "pool:all", seed)).meta["pool"]["runs"][0]["id"] == runs[1].id  # greedy
        free = evaluate(["random", "greedy"], [pool], [0.5], workers=2, seed=seed, progress=False)
        unlimited += [r.attempts for r in free]
    assert max(unlimited) > 6  # without the limit, a policy spends more of the pool than a run could
    spent = {p: statistics.mean(r["nodes"] - 1 for r in report["runs"] if r["policy"] == p) for p in ("random", "greedy")}
    assert costs["pool:random+greedy"] == {"runs": ["random", "greedy"], "attempts": pytest.approx(sum(spent.values()))}
    assert costs["greedy"]["attempts"] == pytest.approx(spent["greedy"]) and costs["pool:all"]["runs"] == ["greedy", "random"]
    assert "recorder pool:random+greedy (" in done.stdout and all(len(x) <= 80 for x in done.stdout.splitlines())


# -- kill -9 and the lock ---------------------------------------------------------------------------
@pytest.mark.slow
def test_a_failed_run_is_counted_in_the_progress_and_named_once(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A run whose policy fails: its progress line took the count of the run before it ([1/2]
    twice), and the error began with a stray "RuntimeError: "."""
    boom = tmp_path / "boom.py"
    boom.write_text("def act(view):\n    raise RuntimeError('boom')\n")
    out = tmp_path / "study"
    assert cli_main(["fidelity", "--task", "sum-difference", "-p", "random", "-p", str(boom), "--seeds", "0",
                     "-n", "4", "-W", "2", "-j", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.split(" seed 0: ")[1].split()[0] for line in err if line.startswith("[")] == ["ran", "failed"]
    assert [line[:5] for line in err if line.startswith("[")] == ["[1/2]", "[2/2]"]
    (error,) = [line for line in err if line.startswith("dream-gym fidelity: error: ")]
    assert f"First: the run of {boom} on seed 0 failed (exit 2" in error


def test_killed_with_9_the_same_command_continues(tmp_path: Path) -> None:
    out = tmp_path / "study"
    args = ("--task", "sum-difference", "-p", "random", "-p", "greedy", "--seeds", "0,1", "-n", "40", "-W", "2",
            "-j", "1")
    command = [sys.executable, "-m", "dream_gym", "fidelity", *args, "--out", str(out)]
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    in_flight = None
    deadline = time.time() + 600
    while time.time() < deadline and in_flight is None:
        finished = {(r["policy"], r["seed"]) for r in journal(out)}
        for policy, seed in (("random", 0), ("random", 1), ("greedy", 0), ("greedy", 1)):
            nodes = run_folder(out, policy, seed) / "nodes.jsonl"
            if finished and (policy, seed) not in finished and nodes.exists() and nodes.read_bytes().count(b"\n") >= 4:
                in_flight = (policy, seed)
        time.sleep(0.05)
    assert in_flight is not None, "no run got under way"
    second = fidelity(*args, "--out", str(out))  # one writer per study
    assert second.returncode == 2 and f"pid {first.pid}" in second.stderr
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    kept = len(journal(out))
    assert 1 <= kept < 4

    resumed = fidelity(*args, "--out", str(out))  # not refused: nothing the study started holds a lock
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = {(r["policy"], r["seed"]): r for r in journal(out)}
    assert len(rows) == 4 and rows[in_flight]["resumed"]
    assert f"{kept} of 4 online runs done" in resumed.stderr
    report = json.loads((out / "fidelity.json").read_text())
    assert len(report["runs"]) == 4 and all(load_world(run_folder(out, p, s)).meta.get("sha256") for p, s in rows)
    assert all(r["reproduced"] for r in report["runs"] if not r["resumed"])


# -- OpenEvolve ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_an_openevolve_study_replays_on_openevolves_own_runs(tmp_path: Path) -> None:
    pytest.importorskip("openevolve")
    out = tmp_path / "oe"
    done = fidelity("--system", "openevolve", "--task", TASK, "-p", "greedy", "-p", "ucb", "--recorder", "native",
                    "--seeds", "1", "-n", "6", "-W", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "fidelity.json").read_text())
    assert set(report["agreement"]) == {"native"} and report["study"]["frontier"] == "any"
    assert len(report["runs"]) == 3 and len(report["replays"]) == 2
    assert all(r["reproduced"] for r in report["runs"] if r["policy"] != "native")
    assert all(r["reproduced"] is None for r in report["runs"] if r["policy"] == "native")
    native = load_world(run_folder(out, "native", 1))
    assert native.meta["policy"] == "native" and native.meta["frontier"] == "any"
    assert all(len(line) <= 80 for line in done.stdout.splitlines())


@pytest.mark.slow
def test_a_skydiscover_study_runs_its_runs_through_deploy_and_replays_on_its_own_selection(tmp_path: Path) -> None:
    pytest.importorskip("skydiscover")
    out = tmp_path / "sky"
    done = fidelity("--system", "skydiscover", "--task", TASK, "-p", "greedy", "-p", "ucb", "--recorder", "native",
                    "--seeds", "0", "-n", "4", "-W", "2", "-j", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "fidelity.json").read_text())
    assert report["study"]["system"] == "skydiscover" and report["study"]["frontier"] == "any"
    assert set(report["agreement"]) == {"native"} and len(report["runs"]) == 3
    native = load_world(run_folder(out, "native", 0))
    assert native.meta["policy"] == "native" and "SkyDiscover" in native.meta["source"]
    assert all(isinstance(r["reproduced"], bool) for r in report["runs"] if r["policy"] == "greedy")


@pytest.mark.parametrize("system", ["openevolve", "shinkaevolve", "skydiscover"])
def test_a_systems_study_is_recorded_under_the_rule_any_through_deploy(system: str, tmp_path: Path) -> None:
    """Every discovery system may continue any program it holds; its runs are deploy commands."""
    from dream_gym.fidelity.config import FidelityConfig
    from dream_gym.fidelity.runs import run_specs
    from dream_gym.fidelity.study import check_config

    pytest.importorskip({"shinkaevolve": "shinka"}.get(system, system))
    config = FidelityConfig(task=TASK, policies=["greedy", "ucb"], seeds=[0], iterations=4, workers=2,
                            out=tmp_path, system=system, recorders=["native"])
    check_config(config)
    assert config.rule == "any"
    [spec, *_] = run_specs(TASK, system, config.runs(), out=tmp_path, iterations=4, workers=2, beta=0.5,
                          frontier=config.rule)
    assert spec.argv[:3] == ("deploy", "--system", system) and spec.argv[-2:] == ("--budget", "4")
    with pytest.raises(ValueError, match=f"{system} may continue any program it holds"):
        check_config(FidelityConfig(task=TASK, policies=["greedy", "ucb"], seeds=[0], iterations=4, workers=2,
                                    out=tmp_path, system=system, frontier="leaves"))


# -- what is refused ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("extra", "message"), [
    (["-p", "native"], "'native' is the system's own parent selection"),
    (["-p", "greedy", "--recorder", "native"], "'native' is a recorder of a --system"),
    (["-p", "no_such_policy"], "no_such_policy"),
    (["-p", "greedy", "--seeds", "1,1"], "--seeds must name distinct seeds"),
    (["-p", "greedy", "--seeds", "one"], "--seeds: 'one' is not a seed"),
    (["-p", "greedy", "--seeds", "0,-1"], "--seeds: each seed must be a whole number from 0 to 4294967295, got -1"),
    (["-p", "greedy", "-p", "gredy"], "unknown policy 'gredy'; did you mean 'greedy'?"),
    (["-p", "greedy", "--system", "openevolve", "--frontier", "leaves"], "frontier rule 'any'"),
    (["-p", "greedy", "--recorder", "pool:greedy+ucb"], "ucb is not a --policy or --recorder of the study"),
    (["-p", "greedy", "-p", "ucb", "--recorder", "pool:greedy"], "a pool merges two or more distinct runs"),
    (["-p", "greedy", "--recorder", "ucb"], "one --policy (greedy) has no ranking to compare"),
])
def test_bad_settings_are_refused_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       extra: list[str], message: str) -> None:
    out = tmp_path / "study"
    code = cli_main(["fidelity", "--task", TASK, "-n", "4", "--out", str(out), *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("error:") == 1
    assert not out.exists()


def test_a_task_given_as_files_needs_openevolve_and_a_folder_must_be_a_studys(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = Path(__file__).parent / "data" / "openevolve_task"
    task = f"{files / 'initial_program.py'},{files / 'evaluator.py'}"
    assert cli_main(["fidelity", "--task", task, "-p", "greedy", "-n", "4", "--out", str(tmp_path / "a")]) == 2
    assert "runs with a --system (openevolve, shinkaevolve, skydiscover)" in capsys.readouterr().err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    assert cli_main(["fidelity", "--task", TASK, "-p", "greedy", "-p", "ucb", "-n", "4", "--out", str(busy)]) == 2
    assert "not a fidelity study's folder" in capsys.readouterr().err
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"]  # nothing written into it


# -- the table --------------------------------------------------------------------------------------
def _entry(rho: float | None) -> dict[str, Any]:
    return {"rho": rho, "interval": {"low": -1.0, "high": 1.0, "level": 0.95, "used": 10, "resamples": 10}}


def test_the_table_fits_80_columns_whatever_the_names() -> None:
    long_file = "agents/" + "a_policy_file_with_a_name_far_longer_than_any_column_" * 2 + "policy.py"
    hostile = "evil\x1b]52;c;Y2xpcGJvYXJk\x07.py"
    policies = [long_file, hostile, "greedy"]
    recorders = [long_file, "native", "all recorders"]
    cell = {"V": 0.123456, "coverage": 0.93, "on_record": 1.0, "cut_short": 0.0, "held": None, "errors": 123456}
    report = {
        "study": {"task": {"files": {}}, "system": "openevolve", "workers": 4096, "iterations": 100000,
                  "beta": 0.5, "seeds": list(range(40)), "requests": True},
        "policies": {p: {"final_best": 12345.678901, "online_V": None, "reproduced": 39, "checked": 40,
                         "replay": {r: cell for r in recorders}} for p in policies},
        "agreement": {r: {"final_best": {"spearman": _entry(-0.25), "kendall": _entry(None)},
                          "online_V": {"spearman": _entry(1.0), "kendall": _entry(0.5)}} for r in recorders},
        "recorders": {long_file: {"runs": [long_file], "attempts": 123456789.0}},
        "ceiling": {"final_best": {"raw": 0.5, "corrected": 0.67, "splits": 200},
                    "online_V": {"raw": None, "corrected": None, "splits": 0}},
    }
    text = render(report, width=80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "\x1b" not in text and "\\x1b" in text  # a name's control characters are shown escaped
    assert "every single-run recorder, V averaged" in text and "n/a" in text
    assert any(line.startswith("agents/a") and "\u2026" in line and "123456" in line for line in lines)
    assert "seeds 0-39, request mode" in text
