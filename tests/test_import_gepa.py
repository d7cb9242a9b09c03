"""GEPA runs through the real CLI: accepted candidates as valid nodes, rejected children and failed
iterations as invalid ones; the state read as plain data only.

``tests/data/gepa/linear-fit`` is a run made here by the real ``gepa`` package (0.1.4, no LLM: see
``tests/data/gepa/make_run.py``). The world is checked against the files GEPA wrote beside its
pickled state, read independently of the importer: ``candidates.json`` (every accepted candidate),
``run_log.json`` (the trace of every iteration) and ``run_log.txt`` (its log: the validation score
of each new candidate). The real GEPA runs in ../shared/external-runs/gepa are checked against
their SOURCE.md figures (skipped where absent)."""

from __future__ import annotations

import json
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dream_gym.cli import main
from dream_gym.world.tree import load_world

RUN = Path(__file__).parent / "data" / "gepa" / "linear-fit"
EXTERNAL_GEPA = Path(__file__).resolve().parents[2] / "shared" / "external-runs" / "gepa"


def _import(src: Path, out: Path, *extra: str) -> int:
    return main(["worlds", "import", "--from", "auto", str(src), "--out", str(out), *extra])


def _log_val_scores(log: Path) -> dict[int, float]:
    """Candidate index -> the validation score GEPA's log printed for it."""
    scores, pending = {}, None
    for line in log.read_text().splitlines():
        if m := re.match(r"Iteration 0: Base program full valset score: (\S+)", line):
            scores[0] = float(m.group(1))
        if m := re.match(r"Iteration \d+: Valset score for new program: (\S+)", line):
            pending = float(m.group(1))
        if (m := re.match(r"Iteration \d+: New program candidate index: (\d+)", line)) and pending is not None:
            scores[int(m.group(1))], pending = pending, None
    return scores


def _trace_attempts(trace: list[dict]) -> tuple[dict[int, int], int, int, list[tuple[int, int, int]]]:
    """From run_log.json: candidate -> iteration accepted, rejected children, failed proposals, accepted merges."""
    accepted, rejected, failed, merges = {}, 0, 0, []
    for entry in trace:
        new = entry.get("new_program_indices", [])
        for k in new:
            accepted[k] = entry["i"]
        if entry.get("merged"):
            if new:
                merges.append((new[0], *entry["merged_entities"][:2]))
            else:
                rejected += 1
            continue
        tasks = entry.get("tasks", [])
        evaluated = sum(1 for t in tasks if "new_subsample_scores" in t)
        failed += len(tasks) - evaluated
        rejected += evaluated - len(new)
    return accepted, rejected, failed, merges


def test_a_real_gepa_run_round_trips_through_the_cli(tmp_path, capsys):
    out = tmp_path / "w"
    assert _import(RUN, out) == 0
    text = capsys.readouterr().out
    assert f"imported GEPA run {RUN / 'gepa_state.bin'}" in text and "by metric 'val_score'" in text
    assert main(["worlds", "validate", str(out)]) == 0
    assert main(["replay", str(out), "--policy", "greedy"]) == 0
    world = load_world(out)
    nodes = {r["id"]: r for r in world.records}
    candidates = json.loads((RUN / "candidates.json").read_text())
    trace = json.loads((RUN / "run_log.json").read_text())
    accepted, rejected, failed, merges = _trace_attempts(trace)
    val_scores = _log_val_scores(RUN / "run_log.txt")
    # every accepted candidate is a valid node with GEPA's text and score; the seed is the root
    assert world.ids[0] == "c0" and len(val_scores) == len(candidates)
    for k, candidate in enumerate(candidates):
        node = nodes[f"c{k}"]
        assert node["code"] == "\n".join(f"### component: {name}\n{text}" for name, text in candidate.items())
        assert node["score"] == pytest.approx(val_scores[k]) and node["gepa"]["candidate"] == candidate
        assert node["round"] == (0 if k == 0 else accepted[k] + 1)
    # merges keep both parents; rejected children and failed iterations are invalid children
    assert merges and all(nodes[f"c{k}"]["parents"] == [f"c{a}", f"c{b}"] for k, a, b in merges)
    invalid = [r for r in world.records if r["score"] is None]
    assert sum("rejected" in r["tags"] for r in invalid) == rejected > 0
    assert sum("failed" in r["tags"] for r in invalid) == failed > 0
    assert len(world.records) == len(candidates) + rejected + failed
    assert all("does not beat its parent's" in r["error"] or "does not reach the better parent's" in r["error"]
               for r in invalid if "rejected" in r["tags"])
    # the failed iterations' reason comes from GEPA's log
    assert all("timed out" in r["error"] for r in invalid if "failed" in r["tags"])
    # GEPA's order: parents first, then iteration by iteration
    index = {node_id: i for i, node_id in enumerate(world.ids)}
    assert all(index[r["parent"]] < index[r["id"]] for r in world.records[1:])
    rounds = [r["round"] for r in world.records]
    assert rounds == sorted(rounds)
    assert world.best_score == pytest.approx(max(val_scores.values()))


def test_the_state_file_alone_imports_and_an_unknown_metric_is_named(tmp_path, capsys):
    assert _import(RUN / "gepa_state.bin", tmp_path / "w") == 0
    world = load_world(tmp_path / "w")
    assert (world.id, world.task_name) == ("w", "linear-fit")  # named by its folder; the task by the run's
    assert _import(RUN, tmp_path / "w2", "--metric", "combined_score") == 2
    assert "no candidate has metric 'combined_score'; metrics found: val_score" in capsys.readouterr().err


def _run_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(RUN, copy)
    return copy


class _Mkdir:
    """Pickles to a call of os.mkdir: what unpickling a hostile state would run."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        import os

        return (os.mkdir, (self.path,))


def test_a_state_that_names_code_is_refused_and_runs_nothing(tmp_path, capsys):
    run = _run_copy(tmp_path)
    marker = tmp_path / "pwned"
    state = pickle.loads((run / "gepa_state.bin").read_bytes())
    control = tmp_path / "control"
    state["adapter_state"] = {"payload": _Mkdir(str(control))}
    # without the defence: a plain unpickle of such a state runs the call
    subprocess.run([sys.executable, "-c", "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"],
                   input=pickle.dumps(state), check=True)
    assert control.is_dir()
    state["adapter_state"] = {"payload": _Mkdir(str(marker))}
    (run / "gepa_state.bin").write_bytes(pickle.dumps(state))
    assert _import(run, tmp_path / "w") == 2
    err = capsys.readouterr().err
    assert "gepa_state.bin: the pickle names posix.mkdir, not plain data" in err
    assert not marker.exists()


def _shared_lists(depth: int) -> list:
    shared: list = [0]
    for _ in range(depth):
        shared = [shared, shared]  # pickled once, referred to again in two bytes
    return shared


def _expanding(path: Path) -> None:
    """A state whose trace shares one list 2^24 times over: 531 bytes that took 2.8 GB to import."""
    state = {"program_candidates": [{"x": "a"}], "parent_program_for_candidate": [[None]],
             "prog_candidate_val_subscores": [[0.5]], "full_program_trace": [{"subsample_ids": _shared_lists(24)}]}
    path.write_bytes(pickle.dumps(state))


def _holding_itself(path: Path) -> None:
    loop: list = []
    loop.append(loop)
    path.write_bytes(pickle.dumps({"program_candidates": [{"x": "a"}], "parent_program_for_candidate": [[None]],
                                   "prog_candidate_val_subscores": [[0.5]], "full_program_trace": [loop]}))


@pytest.mark.parametrize("damage, message", [
    (_expanding, "the pickle would write out more than"),
    (_holding_itself, "the pickle holds a container inside itself"),
])
def test_a_state_that_refers_to_its_lists_again_and_again_is_refused(tmp_path, capsys, damage, message):
    run = _run_copy(tmp_path)
    damage(run / "gepa_state.bin")
    assert (run / "gepa_state.bin").stat().st_size < 2000
    assert _import(run, tmp_path / "w") == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("damage, message", [
    (lambda p: p.write_bytes(p.read_bytes()[:5000]), "not a readable GEPA state"),
    (lambda p: p.write_bytes(pickle.dumps({"i": 3})), "not a GEPA state"),
    (lambda p: p.write_bytes(pickle.dumps({"program_candidates": [{"x": 1}], "parent_program_for_candidate": [[None]],
                                           "prog_candidate_val_subscores": [[0.5]]})),
     "candidate 0 is not a mapping of component names to texts"),
    (lambda p: p.write_bytes(pickle.dumps({"program_candidates": [{"x": "a"}], "parent_program_for_candidate": [],
                                           "prog_candidate_val_subscores": [[0.5]]})),
     "field 'parent_program_for_candidate' is not a list of 1 (one per candidate)"),
])
def test_a_damaged_state_is_refused_by_name(tmp_path, capsys, damage, message):
    run = _run_copy(tmp_path)
    damage(run / "gepa_state.bin")
    assert _import(run, tmp_path / "w") == 2
    assert message in capsys.readouterr().err


def test_a_state_that_is_a_fifo_or_a_link_is_refused(tmp_path, capsys):
    import os

    run = _run_copy(tmp_path)
    state = run / "gepa_state.bin"
    state.rename(tmp_path / "state.bin")
    state.symlink_to(tmp_path / "state.bin")
    assert _import(run, tmp_path / "w") == 2
    assert "gepa_state.bin is a symbolic link, not a regular file" in capsys.readouterr().err
    state.unlink()
    os.mkfifo(state)
    assert _import(run, tmp_path / "w") == 2
    assert "gepa_state.bin is a FIFO, not a regular file" in capsys.readouterr().err


# run: (accepted candidates, rejected children, failed iterations, best val_score), from SOURCE.md and the trace
REAL_RUNS = {
    "gepa-cache-gpt5": (38, 63, 1, 0.25926008333333345),
    "gepa-cache-gemini3": (29, 73, 0, 0.2627519583333333),
    "gepa-cache-gpt5-run0": (37, 64, 1, 0.24497379166666663),
}


@pytest.mark.usefixtures("external_runs")
@pytest.mark.parametrize("name", sorted(REAL_RUNS))
def test_the_real_gepa_runs_import(name, tmp_path, capsys):
    accepted, rejected, failed, best = REAL_RUNS[name]
    out = tmp_path / name
    assert _import(EXTERNAL_GEPA / name, out) == 0
    capsys.readouterr()
    assert main(["worlds", "validate", str(out)]) == 0
    world = load_world(out)
    tags = [tuple(r.get("tags", ())) for r in world.records]
    assert sum(1 for r in world.records if r["id"].startswith("c")) == accepted
    assert tags.count(("rejected",)) == rejected and tags.count(("failed",)) == failed
    assert world.best_score == best and world.baseline_score == 0.2066171041666667
    assert all(r["code"] for r in world.records if r["score"] is not None)
    # the one iteration without a child timed out, as the run's log says
    assert all("litellm.Timeout" in r["error"] for r in world.records if "failed" in r.get("tags", ()))


def test_trace_entries_that_are_no_iterations_record_are_counted(tmp_path, capsys):
    """An entry of full_program_trace without an integer 'i' was dropped without a word."""
    run = _run_copy(tmp_path)
    state = pickle.loads((run / "gepa_state.bin").read_bytes())  # the test's own data: plain lists and dicts
    state["full_program_trace"][3]["i"] = "x"
    state["full_program_trace"].append("not a record")
    (run / "gepa_state.bin").write_bytes(pickle.dumps(state))
    assert _import(run, tmp_path / "w") == 0
    assert "2 entry(ies) of full_program_trace skipped: not an iteration's record" in " ".join(
        capsys.readouterr().out.split())
