"""Importers on generated runs: resumed OpenEvolve phases (tests/openevolve_runs.py), stringified
values, migrants, orphans, evolution traces, and every error path. Real runs: test_importers_real.py."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import uuid
from pathlib import Path

import pytest
from openevolve_runs import write_resumed_run

from dream_gym.datasets.importers import (
    ImportOptions,
    NotARunError,
    OrphanWarning,
    RunImportError,
    detect_system,
    import_run,
)
from dream_gym.datasets.importers.many import import_runs
from dream_gym.datasets.importers.openevolve import import_openevolve
from dream_gym.datasets.importers.shinkaevolve import import_shinkaevolve
from dream_gym.world.tree import load_world


def _index(world):
    index = {node_id: i for i, node_id in enumerate(world.ids)}
    for i, record in enumerate(world.records[1:], start=1):
        assert index[record["parent"]] < i  # parents before children
    return index


# --------------------------------------------------------------------------- resumed OpenEvolve runs


def test_three_nested_resumes_are_stitched_onto_the_checkpoint_best(tmp_path):
    run = write_resumed_run(tmp_path / "run")  # four phases, each inside a checkpoint of the one before
    nested = run.phase_dirs[-1].relative_to(run.folder).as_posix()
    assert nested.count("openevolve_output") == 4 and nested.count("checkpoint_") == 3
    report = import_openevolve(run.folder, tmp_path / "w")
    world = load_world(tmp_path / "w")
    index = _index(world)
    migrants = {i for i, p in run.programs.items() if p.migrant}
    assert (report.phases, report.phases_stitched, report.orphans, report.dropped) == (4, 3, 0, 0)
    assert [s["by"] for s in report.stitches] == ["resume record"] * 3
    assert report.programs == len(run.programs) and report.migrants_collapsed == len(migrants)
    assert set(world.ids) == set(run.programs) - migrants - set(run.started_from)
    for phase_root, start in run.started_from.items():
        # the phase's root is gone; its children now continue from the program it copies
        assert phase_root not in index
        children = [p.id for p in run.programs.values() if p.parent == phase_root and not p.migrant]
        assert children and all(world.records[index[c]]["parent"] == start for c in children)
        assert phase_root in [s["id"] for s in world.records[index[start]]["stitched_roots"]]
    assert world.ids[0] == run.phase_roots[0]
    assert report.best == run.best_valid() and "phases 4: 3 resumed phase(s) stitched" in report.summary()


def test_rounds_keep_growing_across_resumed_phases(tmp_path):
    run = write_resumed_run(tmp_path / "run", iterations=(10, 10, 5), resume_at=(10, 5))
    import_openevolve(run.folder, tmp_path / "w")
    world = load_world(tmp_path / "w")
    rounds = {r["id"]: r["round"] for r in world.records}
    last = {phase: max(p.iteration for p in run.programs.values() if p.phase == phase) for phase in range(3)}
    offsets = [0, last[0], last[0] + last[1]]
    for program in run.programs.values():
        if program.id in rounds and program.id != world.ids[0]:
            assert rounds[program.id] == program.iteration + offsets[program.phase]
    assert max(rounds.values()) == 25


def test_phase_without_resume_record_is_stitched_by_identical_code(tmp_path):
    run = write_resumed_run(tmp_path / "run", iterations=(10, 10, 5), resume_at=(10, 5))
    (run.resume_checkpoints[1] / "best_program_info.json").unlink()
    report = import_openevolve(run.folder, tmp_path / "w")
    assert [s["by"] for s in report.stitches] == ["resume record", "identical code"]
    world = load_world(tmp_path / "w")
    index = _index(world)
    root = run.phase_roots[2]
    children = [p.id for p in run.programs.values() if p.parent == root and not p.migrant]
    assert all(world.records[index[c]]["parent"] == run.started_from[root] for c in children)


def _unplace_last_phase(run) -> str:
    """Make the last phase's start program unknowable: no resume record, edited code."""
    checkpoint = run.resume_checkpoints[-1]
    (checkpoint / "best_program_info.json").unlink()
    (checkpoint / "best_program.py").write_text("# edited by hand\n")
    root = run.phase_roots[-1]
    for path in run.phase_dirs[-1].rglob(f"programs/{root}.json"):
        data = json.loads(path.read_text())
        data["code"] = "# edited by hand\n"
        path.write_text(json.dumps(data))
    return root


def test_unplaceable_phase_root_is_attached_under_the_root_with_a_counting_warning(tmp_path):
    run = write_resumed_run(tmp_path / "run", iterations=(10, 10, 5), resume_at=(10, 5))
    root = _unplace_last_phase(run)
    with pytest.warns(OrphanWarning, match=r"1 orphan\(s\) attached under the root"):
        report = import_openevolve(run.folder, tmp_path / "w")
    world = load_world(tmp_path / "w")
    record = world.records[_index(world)[root]]
    assert record["parent"] == world.ids[0] and "start program" in record["orphan"]["reason"]
    assert (report.unplaced_roots, report.attached, report.dropped) == (1, 1, 0)
    assert report.nodes == len(run.programs) - report.migrants_collapsed - report.roots_stitched
    assert "warning: 1 orphan(s)" in report.summary()


def test_dropping_orphans_only_when_asked_and_never_below_half(tmp_path):
    small_first = write_resumed_run(tmp_path / "a", iterations=(5, 5, 20), resume_at=(5, 5))
    _unplace_last_phase(small_first)
    with pytest.raises(RunImportError, match=r"keep only \d+ of \d+ programs.*--orphans attach"):
        import_openevolve(small_first.folder, tmp_path / "wa", ImportOptions(orphans="drop"))
    big_first = write_resumed_run(tmp_path / "b", iterations=(20, 10, 5), resume_at=(20, 10))
    _unplace_last_phase(big_first)
    with pytest.warns(OrphanWarning, match="dropped with their subtrees as asked"):
        report = import_openevolve(big_first.folder, tmp_path / "wb", ImportOptions(orphans="drop"))
    last_phase = {i for i, p in big_first.programs.items() if p.phase == 2}
    assert report.dropped == len(last_phase) and not last_phase & set(load_world(tmp_path / "wb").ids)


def test_pruned_parents_attach_by_default(tmp_path):
    # a population limit prunes programs between checkpoints: some parents were never saved
    run = write_resumed_run(tmp_path / "run", iterations=(30,), resume_at=(), population=6, checkpoint_interval=5)
    lost = set(run.programs) - run.snapshotted
    orphans = {i for i in run.snapshotted if run.programs[i].parent in lost}
    assert orphans and run.phase_roots[0] in run.snapshotted  # the initial program survived the pruning
    with pytest.warns(OrphanWarning, match=f"{len(orphans)} orphan"):
        report = import_openevolve(run.folder, tmp_path / "w")
    world = load_world(tmp_path / "w")
    index = _index(world)
    assert report.dangling == len(orphans) and report.dropped == 0
    # without a trace: what keeps every program next time
    assert [w for w in report.warnings if "evolution_trace: {enabled: true" in w] == [
        f"{len(orphans)} program(s) whose parent OpenEvolve pruned before any checkpoint: its evolution trace "
        "records every program (evolution_trace: {enabled: true, include_code: true} in the run's config.yaml), "
        "and this import reads it"]
    for orphan in orphans:
        record = world.records[index[orphan]]
        assert record["parent"] == world.ids[0] and record["orphan"]["original_parent"] == run.programs[orphan].parent


def test_evolution_trace_recovers_programs_pruned_from_every_snapshot(tmp_path):
    run = write_resumed_run(tmp_path / "run", iterations=(30,), resume_at=(), population=6, checkpoint_interval=5)
    lost = sorted(set(run.programs) - run.snapshotted)
    with (run.phase_dirs[0] / "evolution_trace.jsonl").open("w") as trace:
        for p in sorted(run.programs.values(), key=lambda p: p.timestamp):
            if p.parent is not None and not p.migrant:
                trace.write(json.dumps({"iteration": p.iteration, "timestamp": p.timestamp, "parent_id": p.parent,
                                        "child_id": p.id, "child_metrics": p.metrics, "child_code": p.code}) + "\n")
        trace.write("{truncated\n")
    report = import_openevolve(run.folder, tmp_path / "w")  # no orphan is left: no warning
    world = load_world(tmp_path / "w")
    recovered = [r for r in world.records if r.get("recovered_from") == "evolution_trace"]
    lost_children = [i for i in lost if not run.programs[i].migrant]
    assert report.recovered == len(recovered) == len(lost_children) and report.orphans == 0 and not report.warnings
    lines = len((run.phase_dirs[0] / "evolution_trace.jsonl").read_text().splitlines())
    where = f"1 unreadable line(s) (the first: {run.phase_dirs[0] / 'evolution_trace.jsonl'} line {lines})"
    assert any(where in n for n in report.notes)  # the count said nothing of where
    assert all(r["code"] == run.programs[r["id"]].code for r in recovered)


def test_a_migrant_copy_no_snapshot_holds_is_placed_from_its_childs_trace_line(tmp_path):
    """OpenEvolve 0.4 names a migrant copy with a fresh uuid4 and may continue it; once MAP-Elites
    drops the copy, only its child's trace line (the parent's code and metrics) says what it was:
    the child hangs from the one program with that code and metrics, not under the root."""
    run = write_resumed_run(tmp_path / "run", iterations=(30,), resume_at=())
    copy = next(p for p in run.programs.values() if p.migrant and not run.programs[p.parent].migrant)
    child = next(c for c in run.programs.values() if c.parent is not None and not c.migrant
                 and c.id in run.snapshotted and c.iteration > copy.iteration)
    renamed = str(uuid.UUID(int=1))  # what OpenEvolve 0.4 calls a copy; the child continued it
    for path in run.folder.rglob("programs/*.json"):
        record = json.loads(path.read_text())
        if record["id"] == copy.id:
            path.unlink()
        elif record["id"] == child.id:
            path.write_text(json.dumps({**record, "parent_id": renamed}))
    line = {"iteration": child.iteration, "timestamp": child.timestamp, "parent_id": renamed, "child_id": child.id,
            "parent_code": copy.code, "parent_metrics": copy.metrics, "child_code": child.code,
            "child_metrics": child.metrics}
    (run.phase_dirs[0] / "evolution_trace.jsonl").write_text(json.dumps(line) + "\n")
    report = import_openevolve(run.folder, tmp_path / "w")
    placed = {r["id"]: r for r in load_world(tmp_path / "w").records}[child.id]
    assert placed["parent"] == copy.parent and not placed.get("orphan") and report.orphans == 0
    assert any("1 migrant copy(ies) in no snapshot" in note for note in report.notes)
    (run.phase_dirs[0] / "evolution_trace.jsonl").write_text(json.dumps({**line, "parent_code": "other"}) + "\n")
    with pytest.warns(OrphanWarning):  # matching no program, the copy stays unknown: its child is an orphan
        assert import_openevolve(run.folder, tmp_path / "w2").orphans == 1


def test_the_trace_alone_reads_the_failures_log_beside_it(tmp_path):
    """A trace file imported alone (a run killed before its first checkpoint) takes the failures log
    OpenEvolve writes beside it: an iteration without a program hangs under the program it
    continued, also when a later child continued it (the trace names it only as that child's parent)."""
    from openevolve.utils.trace_export_utils import append_trace_jsonl

    def line(iteration, parent, child, parent_code, parent_metrics, code, score):
        return {"iteration": iteration, "timestamp": 1000.0 + iteration, "parent_id": parent, "child_id": child,
                "parent_code": parent_code, "parent_metrics": parent_metrics, "child_code": code,
                "child_metrics": {"combined_score": score}}

    trace = tmp_path / "run" / "evolution_trace.jsonl"
    trace.parent.mkdir()
    lines = [line(1, "root", "a", "x = 0", {"combined_score": 1.0}, "x = 1", 1.5),
             line(3, "no-program-2", "b", "x = 1", {}, "x = 2", 2.0)]
    trace.write_text("".join(json.dumps(entry) + "\n" for entry in lines))
    append_trace_jsonl({"iteration": 2, "timestamp": 1002.0, "error": "No valid diffs found in response",
                        "parent_id": "a", "island_id": 0}, trace.with_name("evolution_trace_failures.jsonl"))
    report = import_run("auto", trace, tmp_path / "w")
    records = {r["id"]: r for r in load_world(tmp_path / "w").records}
    assert {i: r["parent"] for i, r in records.items()} == {"root": None, "a": "root", "no-program-2": "a",
                                                            "b": "no-program-2"}
    assert records["no-program-2"]["code"] == "x = 1" and records["no-program-2"]["score"] is None
    assert any("1 parent(s) that are never a child" in note for note in report.notes)
    # the task is the run's, named by its folder, as an import of the folder names it ("evolution_trace" was
    # every trace-only run's task); a trace file named otherwise names it
    assert load_world(tmp_path / "w").task_name == "run"
    import_run("auto", tmp_path / "run", tmp_path / "folder")
    assert load_world(tmp_path / "folder").task_name == "run"
    trace.rename(trace.with_name("fnmin_trace.jsonl"))
    import_run("auto", trace.with_name("fnmin_trace.jsonl"), tmp_path / "renamed")
    assert load_world(tmp_path / "renamed").task_name == "fnmin_trace"


def test_failure_logs_are_counted_plain_gzipped_and_cut_short(tmp_path):
    """OpenEvolve's log of iterations that made no program, written by OpenEvolve's own writer: a
    phase's ``compress``-ed log whose last gzip member was cut off (a killed run) still counts its
    lines, beside another phase's plain log."""
    from openevolve.utils.trace_export_utils import append_trace_jsonl

    run = write_resumed_run(tmp_path / "run", iterations=(10, 10), resume_at=(10,))
    gzipped = run.phase_dirs[0] / "evolution_trace_failures.jsonl"
    for iteration in (3, 5, 8):
        append_trace_jsonl({"iteration": iteration, "error": "No valid diffs found in response"}, gzipped,
                           compress=True)
    packed = gzipped.with_name(gzipped.name + ".gz")
    packed.write_bytes(packed.read_bytes()[:-10])  # the last member's trailer is lost
    append_trace_jsonl({"iteration": 14, "error": "LLM timeout"}, run.phase_dirs[1] / "evolution_trace_failures.jsonl")
    report = import_openevolve(run.folder, tmp_path / "w")
    note = next(n for n in report.notes if n.startswith("evolution_trace_failures.jsonl:"))
    assert "4 iteration(s) made no program" in note and "(3): No valid diffs found in response" in note


# --------------------------------------------------------------------------- synthetic records


def _write(folder: Path, program: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{program['id']}.json").write_text(json.dumps(program))


def _prog(pid, parent, score, ts, it, code=None, **extra):
    metrics = {"combined_score": score} if score is not None else {"error": "Traceback: boom"}
    base = {"id": pid, "parent_id": parent, "code": code or f"# {pid}", "timestamp": ts,
            "iteration_found": it, "generation": 0, "metrics": metrics, "metadata": {}}
    base.update(extra)
    return base


def test_stringified_values_migrants_readded_roots_and_dangling_parents(tmp_path):
    run = tmp_path / "run"
    ck1 = run / "checkpoints" / "checkpoint_5" / "programs"
    ck2 = run / "checkpoints" / "checkpoint_10" / "programs"
    _write(ck1, _prog("root", None, 1.0, 100.0, 0, code="def f(): pass\n"))
    # stringified values as seen in the wild: numbers as strings, metrics as a python repr
    _write(ck1, {"id": "a", "parent_id": "root", "code": "a", "timestamp": "101.5",
                 "iteration_found": "1", "generation": "1",
                 "metrics": "{'combined_score': 2.0, 'aux': 'x'}", "metadata": "{'island': '0'}",
                 "prompts": None})
    _write(ck2, _prog("a", "root", 2.0, 101.5, 1, code="a", prompts={"diff_user": {"user": "hi"}}))
    _write(ck2, _prog("b", "a", None, 102.0, 2))  # invalid: error metric
    _write(ck2, _prog("a-copy", "a", 2.0, 103.0, 0, code="a", metadata={"migrant": "True"}))
    _write(ck2, _prog("c", "a-copy", 3.0, 104.0, 3))  # child of a migrant -> re-parented onto a
    _write(ck2, _prog("root2", "None", 1.0, 150.0, 0, code="def f(): pass"))  # initial program re-added
    _write(ck2, _prog("d", "root2", 2.5, 151.0, 4))
    _write(ck2, _prog("e", "pruned-parent", 4.0, 152.0, 5))  # dangling
    _write(ck2, _prog("f", "e", 5.0, 153.0, 6))  # descendant of the dangling one
    _write(ck2, _prog("early-child", "d", 1.5, 140.0, 7))  # timestamp before its parent

    with pytest.warns(OrphanWarning, match=r"1 orphan\(s\) attached"):
        report = import_openevolve(run, tmp_path / "w")
    world = load_world(tmp_path / "w")
    index = _index(world)
    assert report.migrants_collapsed == 1 and "a-copy" not in index
    assert world.records[index["a"]]["copies"] == ["a-copy"]
    assert world.records[index["c"]]["parent"] == "a"
    assert report.roots_stitched == 1 and report.phases_stitched == 0 and "root2" not in index
    assert world.records[index["d"]]["parent"] == "root"
    assert world.records[0]["stitched_roots"][0]["by"] == "identical code"
    e = world.records[index["e"]]
    assert e["parent"] == "root" and e["orphan"]["original_parent"] == "pruned-parent"
    assert world.records[index["f"]]["parent"] == "e"
    assert report.reordered == 1 and index["early-child"] > index["d"]
    b = world.records[index["b"]]
    assert b["score"] is None and "Traceback: boom" in b["error"]
    a = world.records[index["a"]]
    assert a["metrics"] == {"combined_score": 2.0}  # the later snapshot wins
    assert a["prompts"] == {"diff_user": {"user": "hi"}}  # filled in from the later snapshot
    assert a["round"] == 1 and world.records[0]["round"] == 0
    assert world.frontier_rule == "any"  # a has children b and c

    with pytest.warns(OrphanWarning, match="dropped"):
        dropped = import_openevolve(run, tmp_path / "w2", ImportOptions(orphans="drop"))
    assert dropped.dropped == 2 and {"e", "f"}.isdisjoint(load_world(tmp_path / "w2").ids)


def test_a_parent_cycle_is_broken_at_its_earliest_node(tmp_path):
    folder = tmp_path / "run" / "db" / "programs"
    _write(folder, _prog("r", None, 1.0, 1.0, 0))
    _write(folder, _prog("x", "y", 2.0, 2.0, 1))
    _write(folder, _prog("y", "x", 3.0, 3.0, 2))
    with pytest.warns(OrphanWarning, match="1 in parent cycles"):
        report = import_openevolve(tmp_path / "run", tmp_path / "w")
    world = load_world(tmp_path / "w")
    assert report.cycles == 1 and world.ids == ("r", "x", "y")
    assert world.records[1]["parent"] == "r" and "loops" in world.records[1]["orphan"]["reason"]


def test_an_error_flag_of_zero_beside_a_score_is_no_failure_but_every_real_failure_still_is(tmp_path):
    folder = tmp_path / "run" / "programs"

    def flagged(pid, parent, metrics, it):
        program = _prog(pid, parent, 0.0, float(it), it)
        program["metrics"] = metrics
        return program

    # an evaluator that reports error as a 0/1 number beside every score (the root included)
    _write(folder, flagged("r", None, {"combined_score": 1.0, "error": 0.0}, 0))
    _write(folder, flagged("ok", "r", {"combined_score": 2.0, "error": 0}, 1))
    _write(folder, flagged("flag1", "r", {"combined_score": 0.0, "error": 1.0}, 2))
    # OpenEvolve's own failure: {"error": 0.0} without a score (and with a timeout)
    _write(folder, flagged("oe-fail", "r", {"error": 0.0}, 3))
    _write(folder, flagged("oe-timeout", "r", {"error": 0.0, "timeout": True}, 4))
    # an error message beside a score
    _write(folder, flagged("message", "r", {"combined_score": 3.0, "error": "Traceback: boom"}, 5))
    report = import_openevolve(tmp_path / "run", tmp_path / "w")
    world = load_world(tmp_path / "w")
    by_id = {r["id"]: r for r in world.records}
    assert world.baseline_score == 1.0 and by_id["ok"]["score"] == 2.0 and by_id["ok"].get("error") is None
    assert report.invalid == 4 and report.best == 2.0
    assert by_id["flag1"]["score"] is None and "error=1.0" in by_id["flag1"]["error"]
    assert by_id["oe-fail"]["score"] is None and "error=0.0" in by_id["oe-fail"]["error"]
    assert "metric 'combined_score' missing" in by_id["oe-timeout"]["error"]
    assert by_id["message"]["score"] is None and "Traceback: boom" in by_id["message"]["error"]


# --------------------------------------------------------------------------- OpenEvolve error paths


def test_openevolve_error_paths(tmp_path):
    with pytest.raises(FileNotFoundError):
        import_openevolve(tmp_path / "nope", tmp_path / "w")
    (tmp_path / "empty" / "checkpoints" / "checkpoint_1" / "programs").mkdir(parents=True)
    with pytest.raises(RunImportError, match="no OpenEvolve programs"):
        import_openevolve(tmp_path / "empty", tmp_path / "w")
    _write(tmp_path / "rootless" / "programs", _prog("x", "gone", 1.0, 1.0, 1))
    with pytest.raises(RunImportError, match="no initial program"):
        import_openevolve(tmp_path / "rootless", tmp_path / "w")
    bad_root = tmp_path / "badroot" / "programs"
    _write(bad_root, _prog("r", None, None, 1.0, 0))
    _write(bad_root, _prog("x", "r", 1.0, 2.0, 1))
    with pytest.raises(RunImportError, match="baseline"):
        import_openevolve(tmp_path / "badroot", tmp_path / "w")
    ok = tmp_path / "ok" / "programs"
    _write(ok, _prog("r", None, 1.0, 1.0, 0))
    with pytest.raises(RunImportError, match=r"no program has metric 'score'; metrics found: combined_score"):
        import_openevolve(tmp_path / "ok", tmp_path / "w", ImportOptions(metric="score"))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("occupied")
    with pytest.raises(FileExistsError):
        import_openevolve(tmp_path / "ok", tmp_path / "out")
    with pytest.raises(RunImportError, match="direction"):
        import_openevolve(tmp_path / "ok", tmp_path / "w", ImportOptions(direction="up"))
    with pytest.raises(RunImportError, match="orphans must be one of"):
        import_openevolve(tmp_path / "ok", tmp_path / "w", ImportOptions(orphans="reattach"))
    with pytest.raises(RunImportError, match="workers must be an integer >= 1, got 0"):
        import_run("openevolve", tmp_path / "ok", tmp_path / "w", workers=0)
    with pytest.raises(RunImportError, match="unknown import option.s. metrik; known: metric, direction"):
        import_run("openevolve", tmp_path / "ok", tmp_path / "w", metrik="score")
    assert not (tmp_path / "w").exists()  # refused before anything was written


def test_a_lone_surrogate_in_a_programs_json_is_imported_marked_with_a_warning(tmp_path):
    # valid JSON ("\ud83d"), which json.dump writes: the world writer refused the whole run, naming its
    # own temporary file
    programs = tmp_path / "run" / "programs"
    _write(programs, _prog("r", None, 1.0, 1.0, 0))
    _write(programs, _prog("x", "r", 2.0, 2.0, 1, code="emoji \ud83d end", metadata={"note\udc00": "a"}))
    report = import_openevolve(tmp_path / "run", tmp_path / "w")
    assert any("2 text value(s) of the run hold half of a UTF-16 pair" in w for w in report.warnings)
    assert load_world(tmp_path / "w").records[1]["code"] == "emoji \ufffd end"


def test_unreadable_json_names_the_file_unless_another_snapshot_has_the_program(tmp_path):
    run = tmp_path / "run"
    for n in (5, 10):
        _write(run / "checkpoints" / f"checkpoint_{n}" / "programs", _prog("r", None, 1.0, 1.0, 0))
    _write(run / "checkpoints" / "checkpoint_10" / "programs", _prog("x", "r", 2.0, 2.0, 1))
    (run / "checkpoints" / "checkpoint_10" / "programs" / "r.json").write_text('{"id": "r", "code": ')
    report = import_openevolve(run, tmp_path / "w")  # r is read from checkpoint_5
    assert report.unreadable == 1 and any("checkpoint_10/programs/r.json" in n for n in report.notes)
    broken = run / "checkpoints" / "checkpoint_10" / "programs" / "x.json"
    broken.write_text("\x00garbage")
    with pytest.raises(RunImportError, match=r"checkpoint_10/programs/x\.json: unreadable JSON.*would lose it"):
        import_openevolve(run, tmp_path / "w2")
    broken.write_text("[1, 2]")
    with pytest.raises(RunImportError, match=r"x\.json: not a program record"):
        import_openevolve(run, tmp_path / "w3")


# --------------------------------------------------------------------------- ShinkaEvolve (generated db)

# The programs table of ShinkaEvolve's shinka/database/dbase.py (as in the real evolution_db.sqlite files).
SHINKA_SCHEMA = """
CREATE TABLE IF NOT EXISTS programs (
    id TEXT PRIMARY KEY, code TEXT NOT NULL, language TEXT NOT NULL, parent_id TEXT,
    archive_inspiration_ids TEXT, top_k_inspiration_ids TEXT, generation INTEGER NOT NULL,
    timestamp REAL NOT NULL, code_diff TEXT, combined_score REAL, public_metrics TEXT,
    private_metrics TEXT, text_feedback TEXT, complexity REAL, embedding TEXT, embedding_pca_2d TEXT,
    embedding_pca_3d TEXT, embedding_cluster_id INTEGER, correct BOOLEAN DEFAULT 0,
    children_count INTEGER NOT NULL DEFAULT 0, metadata TEXT, migration_history TEXT, island_idx INTEGER
)
"""


def _shinka_results(folder: Path) -> Path:
    folder.mkdir(parents=True)
    conn = sqlite3.connect(folder / "evolution_db.sqlite")
    conn.execute(SHINKA_SCHEMA)
    rows = [
        # id, parent, generation, timestamp, score, correct, metadata, public metrics, island
        ("g0", None, 0, 10.0, 0.50, 1, {"compute_time": 1.5}, {"dist": 3}, 0),
        ("g0-copy", None, 0, 10.0, 0.50, 1, {"_is_island_copy": True, "_original_program_id": "g0"}, {"dist": 3}, 1),
        ("g1", "g0", 1, 11.0, 0.60, 1, {"api_costs": 0.01, "embed_cost": 0.001, "compute_time": 2.0}, {"dist": 2}, 0),
        ("g2", "g0-copy", 2, 12.0, 0.0, 0, {"api_costs": 0.02}, {}, 1),
        ("g3", "g1", 3, 13.0, 0.70, 1, {"api_costs": 0.015, "meta_cost": 0.005}, {"dist": 1}, 0),
        ("g4", "g1", 4, 14.0, 0.65, 1, {"api_costs": 0.01}, {"dist": 1}, 0),
        ("g5", "lost", 5, 15.0, 0.90, 1, {}, {}, 0),
    ]
    for pid, parent, gen, ts, score, correct, meta, public, island in rows:
        conn.execute(
            "INSERT INTO programs (id, code, language, parent_id, generation, timestamp, combined_score,"
            " public_metrics, private_metrics, text_feedback, correct, metadata, island_idx)"
            " VALUES (?, ?, 'python', ?, ?, ?, ?, ?, '{}', '', ?, ?, ?)",
            (pid, f"# {pid}", parent, gen, ts, score, json.dumps(public), correct, json.dumps(meta), island),
        )
    conn.commit()
    conn.close()
    results = folder / "gen_2" / "results"
    results.mkdir(parents=True)
    (results / "correct.json").write_text(json.dumps({"correct": False, "error": "AssertionError: overlap"}))
    return folder


def test_shinkaevolve_import(tmp_path):
    folder = _shinka_results(tmp_path / "results")
    with pytest.warns(OrphanWarning, match="1 orphan"):
        report = import_shinkaevolve(folder, tmp_path / "w", ImportOptions(world_id="shinka-toy"))
    world = load_world(tmp_path / "w")
    assert world.id == "shinka-toy" and world.ids == ("g0", "g1", "g2", "g3", "g4", "g5")
    assert report.migrants_collapsed == 1 and report.dangling == 1 and report.invalid == 1
    g2 = world.records[2]
    assert g2["parent"] == "g0" and g2["score"] is None and "AssertionError: overlap" in g2["error"]
    g1, g3 = world.records[1], world.records[3]
    assert g1["cost"]["usd"] == pytest.approx(0.011) and g1["duration_s"] == 2.0
    assert g3["cost"]["breakdown"] == {"api_costs": 0.015, "meta_cost": 0.005}
    assert g1["round"] == 1 and g1["code"] == "# g1" and world.records[5]["parent"] == "g0"
    assert world.baseline_score == 0.5 and world.best_score == pytest.approx(0.9)
    # another metric from public_metrics, minimised; g5 has no such metric: invalid
    with pytest.warns(OrphanWarning):
        import_shinkaevolve(folder / "evolution_db.sqlite", tmp_path / "w2", ImportOptions(metric="dist", direction="minimize"))
    world2 = load_world(tmp_path / "w2")
    assert world2.records[3]["score"] == 1 and world2.best_score == -1
    assert "metric 'dist' missing" in world2.records[5]["error"]


def test_a_program_whose_code_is_not_utf8_is_imported_marked_with_a_warning(tmp_path):
    # sqlite3 raised "Could not decode to UTF-8 column 'code'" from the middle of the import: a traceback
    folder = _shinka_results(tmp_path / "results")
    conn = sqlite3.connect(folder / "evolution_db.sqlite")
    conn.execute("UPDATE programs SET code = CAST(X'6361666ee9ff' AS TEXT) WHERE id = 'g3'")
    conn.commit()
    conn.close()
    with pytest.warns(OrphanWarning):
        report = import_shinkaevolve(folder, tmp_path / "w")
    assert any("1 program(s) hold code that is not UTF-8 in evolution_db.sqlite" in w for w in report.warnings)
    world = load_world(tmp_path / "w")
    assert world.records[world.ids.index("g3")]["code"] == "cafn\ufffd\ufffd" and world.size == 6


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


def test_a_shinkaevolve_database_in_wal_mode_is_read_without_writing_beside_it(tmp_path):
    """ShinkaEvolve keeps its database in WAL mode. SQLite's read-only mode still creates (or
    changes) the -shm file beside it, and fails in a read-only folder: the import reads the
    database as immutable, or, where its -wal file holds pages its writer never checkpointed,
    a copy of both, and leaves the run's folder as it was."""
    clean = _shinka_results(tmp_path / "clean")
    conn = sqlite3.connect(clean / "evolution_db.sqlite")
    assert conn.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    conn.close()  # the last connection checkpoints and removes the -wal file
    before = _files(clean)
    with pytest.warns(OrphanWarning):
        import_shinkaevolve(clean, tmp_path / "w-clean")
    assert _files(clean) == before and load_world(tmp_path / "w-clean").size == 6

    # a run whose writer never closed the database: its last programs are only in the -wal file
    live = _shinka_results(tmp_path / "live")
    writer = sqlite3.connect(live / "evolution_db.sqlite")
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("INSERT INTO programs (id, code, language, parent_id, generation, timestamp, combined_score,"
                   " public_metrics, private_metrics, text_feedback, correct, metadata, island_idx)"
                   " VALUES ('g6', '# g6', 'python', 'g3', 6, 16.0, 0.95, '{}', '{}', '', 1, '{}', 0)")
    writer.commit()
    archived = tmp_path / "archived"
    archived.mkdir()
    for name in ("evolution_db.sqlite", "evolution_db.sqlite-wal"):
        (archived / name).write_bytes((live / name).read_bytes())
    writer.close()
    assert (archived / "evolution_db.sqlite-wal").stat().st_size > 0
    before = _files(archived)
    with pytest.warns(OrphanWarning):
        import_shinkaevolve(archived / "evolution_db.sqlite", tmp_path / "w-archived")
    assert _files(archived) == before
    assert load_world(tmp_path / "w-archived").ids[-1] == "g6"  # read from the -wal file


def test_shinkaevolve_error_paths(tmp_path):
    with pytest.raises(FileNotFoundError):
        import_shinkaevolve(tmp_path / "missing.sqlite", tmp_path / "w")
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE runs (x)").connection.commit()
    with pytest.raises(RunImportError, match=r"no 'programs' table \(tables found: runs\)"):
        import_shinkaevolve(other, tmp_path / "w")
    old = tmp_path / "old.sqlite"
    sqlite3.connect(old).execute("CREATE TABLE programs (id, parent_id, generation, code)").connection.commit()
    with pytest.raises(RunImportError, match=r"table 'programs' lacks column\(s\) timestamp, combined_score, correct"):
        import_shinkaevolve(old, tmp_path / "w")
    not_sqlite = tmp_path / "evolution_db.sqlite"
    not_sqlite.write_text("this is not a database")
    with pytest.raises(RunImportError, match="not a SQLite database"):
        import_shinkaevolve(not_sqlite, tmp_path / "w")
    empty = tmp_path / "empty"
    empty.mkdir()
    sqlite3.connect(empty / "evolution_db.sqlite").execute(SHINKA_SCHEMA).connection.commit()
    with pytest.raises(RunImportError, match="program table is empty"):
        import_shinkaevolve(empty, tmp_path / "w")
    folder = _shinka_results(tmp_path / "results")
    with pytest.raises(RunImportError, match=r"no program has metric 'nonexistent'; metrics found: combined_score, dist"):
        import_shinkaevolve(folder, tmp_path / "w", ImportOptions(metric="nonexistent"))


def test_wrong_system_and_auto_detection(tmp_path):
    shinka = _shinka_results(tmp_path / "results")
    with pytest.raises(RunImportError, match="looks like a ShinkaEvolve run instead: import it with --from shinkaevolve"):
        import_run("openevolve", shinka, tmp_path / "w")
    with pytest.raises(NotARunError, match="no OpenEvolve programs found") as direct:
        import_openevolve(shinka, tmp_path / "w")  # the importer knows its own system only
    assert "looks like" not in str(direct.value)
    openevolve = tmp_path / "oe"
    _write(openevolve / "checkpoints" / "checkpoint_1" / "programs", _prog("r", None, 1.0, 1.0, 0))
    with pytest.raises(RunImportError, match="looks like an OpenEvolve run instead: import it with --from openevolve"):
        import_run("shinkaevolve", openevolve, tmp_path / "w")
    assert detect_system(openevolve) == "openevolve" and detect_system(shinka) == "shinkaevolve"
    assert detect_system(shinka / "evolution_db.sqlite") == "shinkaevolve" and detect_system(tmp_path / "no") is None
    report = import_run("auto", openevolve, tmp_path / "auto")
    assert report.system == "openevolve" and load_world(tmp_path / "auto").size == 1
    with pytest.raises(RunImportError, match="already a dream-gym world"):
        import_openevolve(tmp_path / "auto", tmp_path / "again")
    neither = tmp_path / "neither"
    neither.mkdir()
    (neither / "notes.txt").write_text("no run here")
    with pytest.raises(RunImportError, match="if a system of these wrote it, name it with --from"):
        import_run("auto", neither, tmp_path / "w")
    shutil.rmtree(tmp_path / "auto")


def test_an_error_the_evaluator_returns_twice_is_named_once(tmp_path):
    # an evaluator (dream_gym's sandboxed one too) may return its error as a metric and again as
    # an artifact: the node's error said it twice
    run = tmp_path / "run" / "checkpoints" / "checkpoint_2" / "programs"
    _write(run, _prog("root", None, 1.0, 1.0, 0))
    twice = json.dumps({"error": "RuntimeError: boom"})
    failed = {"combined_score": 0.0, "error": "RuntimeError: boom"}
    _write(run, _prog("twice", "root", None, 2.0, 1, metrics=failed, artifacts_json=twice))
    _write(run, _prog("more", "root", None, 3.0, 2, metrics=failed,
                      artifacts_json=json.dumps({"error": "line 3 of the evaluator"})))  # control: news kept
    import_run("openevolve", tmp_path / "run", tmp_path / "w")
    nodes = [json.loads(line) for line in (tmp_path / "w" / "nodes.jsonl").read_text().splitlines() if line]
    errors = {r["id"]: r["error"] for r in nodes if r.get("error")}
    assert errors["twice"] == "evaluator reported error='RuntimeError: boom'"
    assert errors["more"] == "evaluator reported error='RuntimeError: boom'; error: line 3 of the evaluator"


def test_a_run_whose_initial_program_failed_is_refused_in_one_line(tmp_path, capsys):
    from dream_gym.cli import main

    run = tmp_path / "run" / "checkpoints" / "checkpoint_1" / "programs"
    traceback = 'File "evaluator.py", line 3, in evaluate\n    raise RuntimeError("boom")\n'
    _write(run, _prog("root", None, None, 1.0, 0, metrics={"combined_score": 0.0, "error": "RuntimeError: boom"},
                      artifacts_json=json.dumps({"traceback": traceback})))
    _write(run, _prog("child", "root", 1.0, 2.0, 1))
    assert main(["worlds", "import", str(tmp_path / "run"), "--out", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert ("the initial program root has no valid score by metric 'combined_score' (evaluator reported "
            "error='RuntimeError: boom'); a world needs a baseline score") in err
    assert len(err.splitlines()) == 1 and "line 3" not in err


def test_auto_says_why_it_found_no_run(tmp_path, capsys):
    from dream_gym.cli import main

    openevolve = tmp_path / "oe"
    _write(openevolve / "checkpoints" / "checkpoint_1" / "programs", _prog("r", None, 1.0, 1.0, 0))
    assert main(["worlds", "import", str(openevolve), "--out", str(tmp_path / "world")]) == 0  # control
    capsys.readouterr()
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("not a run")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("not a run")
    (tmp_path / "worlds").mkdir()
    shutil.copytree(tmp_path / "world", tmp_path / "worlds" / "world")
    (tmp_path / "oe-nothing" / "logs").mkdir(parents=True)  # OpenEvolve ran, 3 iterations: no checkpoint, no trace
    (tmp_path / "oe-nothing" / "logs" / "openevolve_20261206_101010.log").write_text("...")
    for src, why in ((tmp_path / "no-such-run", f"{tmp_path / 'no-such-run'} does not exist"),
                     (tmp_path / "oe-nothing", "an OpenEvolve output folder without programs; OpenEvolve writes its "
                                               "programs at checkpoints, every checkpoint_interval iterations"),
                     (tmp_path / "world", f"{tmp_path / 'world'} is already a dream-gym world folder: load it directly"),
                     (tmp_path / "empty", f"{tmp_path / 'empty'} is an empty folder"),
                     (tmp_path / "notes.txt", f"{tmp_path / 'notes.txt'} is a file; a run is the folder its system wrote"),
                     (tmp_path / "worlds", f"{tmp_path / 'worlds'} holds dream-gym world folders: load them directly"),
                     (tmp_path / "other", "nor a refined EvoTrace run (meta.json and programs.jsonl) was found; "
                                          "if a system of these wrote it, name it with --from")):
        assert main(["worlds", "import", str(src), "--out", str(tmp_path / "w")]) == 2
        err = capsys.readouterr().err
        assert why in err and err.count("error:") == 1 and not (tmp_path / "w").exists()


def test_a_checkpoint_folder_given_as_the_run_still_stitches_the_phase_started_from_it(tmp_path):
    run = write_resumed_run(tmp_path / "run", iterations=(10, 10), resume_at=(10,))
    report = import_openevolve(run.resume_checkpoints[0], tmp_path / "w")
    assert (report.phases, report.phases_stitched) == (2, 1)
    assert report.stitches[0]["by"] == "resume record" and report.stitches[0]["phase"] == "."


def test_a_shinkaevolve_database_whose_values_grow_when_read_is_refused(tmp_path):
    """An 8 KB database whose code column was computed on every read (a generated column of
    100 MB each) wrote 573 MB into --out and took 1.1 GB before it failed."""
    computed = tmp_path / "computed"
    computed.mkdir()
    conn = sqlite3.connect(computed / "evolution_db.sqlite")
    conn.execute("CREATE TABLE programs (id, parent_id, generation, timestamp, combined_score, correct, "
                 "code TEXT GENERATED ALWAYS AS (hex(zeroblob(100000000))) VIRTUAL)")
    conn.executemany("INSERT INTO programs (id, parent_id, generation, timestamp, combined_score, correct) "
                     "VALUES (?, ?, ?, ?, ?, ?)", [("a", None, 0, 1.0, 0.5, 1), ("b", "a", 1, 2.0, 0.6, 1)])
    conn.commit()
    conn.close()
    with pytest.raises(RunImportError, match=r"column\(s\) computed when read \(code\)"):
        import_shinkaevolve(computed, tmp_path / "w")
    assert not (tmp_path / "w").exists()
    long = tmp_path / "long"  # a value stored long: read only up to the bound
    long.mkdir()
    conn = sqlite3.connect(long / "evolution_db.sqlite")
    conn.execute(SHINKA_SCHEMA)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(programs)")]
    row = {"id": "a", "parent_id": None, "generation": 0, "timestamp": 1.0, "combined_score": 0.5, "correct": 1,
           "code": "x" * (17 << 20), "language": "python"}
    conn.execute(f"INSERT INTO programs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))
    conn.commit()
    conn.close()
    assert set(row) <= set(columns)
    with pytest.raises(RunImportError, match="longer than 16 MB"):
        import_shinkaevolve(long, tmp_path / "w2")


def test_a_run_folders_side_files_are_read_as_data(tmp_path):
    """The OpenEvolve, ShinkaEvolve and SkyDiscover importers read side files plainly: a link to a
    file outside the run was copied into the world (a secret in ShinkaEvolve's correct.json), a
    FIFO hung the import, a link to /dev/zero or a 400 KB gzip of 400 MB took all the memory."""
    import gzip
    import os

    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"error": "SECRET-TOKEN"}))
    base = tmp_path / "base"
    write_resumed_run(base, iterations=(6,), resume_at=())
    cases = {
        "link": lambda best: best.symlink_to(secret),
        "fifo": lambda best: os.mkfifo(best),
        "zero": lambda best: best.symlink_to("/dev/zero"),
    }
    for name, plant in cases.items():
        run = tmp_path / name
        shutil.copytree(base, run)
        best = next(run.rglob("best_program_info.json"))
        best.unlink()
        plant(best)
        with pytest.raises(RunImportError, match=r"best_program_info.json is a (symbolic link|FIFO), not a regular file"):
            import_openevolve(run, tmp_path / f"w-{name}")
    bomb = tmp_path / "bomb"
    shutil.copytree(base, bomb)
    with gzip.open(bomb / "evolution_trace.jsonl.gz", "wb") as packed:
        for _ in range(20):
            packed.write(b" " * (1 << 20))  # 20 MB, no newline: past the line limit of 16 MB
    with pytest.raises(RunImportError, match="evolution_trace.jsonl.gz line 1: line longer than 16 MB"):
        import_openevolve(bomb, tmp_path / "w-bomb")
    shinka = _shinka_results(tmp_path / "shinka")
    correct = next(shinka.rglob("correct.json"))
    correct.unlink()
    correct.symlink_to(secret)
    with pytest.raises(RunImportError, match="correct.json is a symbolic link"):
        import_shinkaevolve(shinka, tmp_path / "w-shinka")
    assert not any("SECRET" in p.read_text() for p in tmp_path.glob("w-*/nodes.jsonl"))


def test_a_run_given_where_a_world_is_expected_is_told_to_import_it(tmp_path, capsys):
    """``replay``/``worlds show`` said ``world.json: missing`` and ``eval`` that the folder was
    neither a world nor a folder of worlds, of a run folder the user had not imported yet."""
    from dream_gym.cli import main

    run = tmp_path / "oe"
    _write(run / "checkpoints" / "checkpoint_1" / "programs", _prog("r", None, 1.0, 1.0, 0))
    for command in (["replay", str(run)], ["worlds", "show", str(run)],
                    ["eval", "-p", "greedy", "--worlds", str(run), "--no-progress"]):
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert f"dream-gym worlds import {run} --out WORLD_FOLDER" in err and err.count("error:") == 1, (command, err)


def test_a_damaged_shinkaevolve_database_is_recognised_and_named_with_sqlites_reason(tmp_path):
    """A run whose evolution_db.sqlite was cut or overwritten: its import says the database is
    damaged (SQLite's words), alone, as a file, and in a folder of runs, where it went unseen."""
    runs = tmp_path / "runs"
    _shinka_results(runs / "good")
    damaged = _shinka_results(runs / "damaged") / "evolution_db.sqlite"
    data = bytearray(damaged.read_bytes())
    data[100:112] = b"\xff" * 12  # the first page's b-tree header
    damaged.write_bytes(bytes(data))
    for src in (damaged.parent, damaged):
        with pytest.raises(RunImportError, match=r"a damaged SQLite database \(database disk image is malformed\)"):
            import_run("auto", src, tmp_path / "w")
    with pytest.warns(OrphanWarning):
        report = import_runs("auto", runs, tmp_path / "worlds")
    refused = {o.name: o.reason for o in report.outcomes if not o.imported}
    assert list(refused) == ["damaged"] and "a damaged SQLite database" in refused["damaged"]
    # a database by ShinkaEvolve's name that is no database, or empty: the auto import said "neither
    # ... nor ... was found", hiding the one file that is wrong
    for content, said in ((bytes(range(256)) * 4, "programs.sqlite: not a SQLite database"),
                          (b"", "programs.sqlite: has no 'programs' table (tables found: none)")):
        bad = tmp_path / "bad"
        bad.mkdir(exist_ok=True)
        (bad / "programs.sqlite").write_bytes(content)
        with pytest.raises(RunImportError, match=re.escape(said)):
            import_run("auto", bad, tmp_path / "w")


SHINKA_CONFIG = """database_config: &db !!python/object:omegaconf.dictconfig.DictConfig
  _content: {num_islands: 2}
  _parent: *db
evolution_config:
  llm_models: [gpt]
  max_parallel_jobs: 5
job_config: {eval_program_path: evaluate.py}
"""


def test_w_is_the_runs_own_configuration_unless_given(tmp_path):
    """OpenEvolve's evaluator.parallel_evaluations (config.yaml above its output folder, where its
    examples keep it) and ShinkaEvolve's max_parallel_jobs (its experiment_config.yaml, Python
    tags and a recursive anchor included) are W; -W gives another; nothing readable is W = 1."""
    example = tmp_path / "example"
    run = write_resumed_run(example / "openevolve_output", iterations=(8,), resume_at=())
    (example / "config.yaml").write_text("max_iterations: 8\nevaluator:\n  parallel_evaluations: 3\n")
    report = import_openevolve(run.folder, tmp_path / "w3")
    assert load_world(tmp_path / "w3").workers == 3
    assert any(n.startswith("W 3: evaluator.parallel_evaluations in ") for n in report.notes)
    import_openevolve(run.folder, tmp_path / "w2", ImportOptions(workers=2))
    assert load_world(tmp_path / "w2").workers == 2
    for bad in ("evaluator:\n  parallel_evaluations: 0\n", "evaluator: [1, 2]\n", "evaluator: {parallel_evaluations: x}\n",
                "{unclosed: [\n", "[" * 200_000):  # (nested past Python's stack: the import stopped)
        (example / "config.yaml").write_text(bad)
        shutil.rmtree(tmp_path / "w1", ignore_errors=True)
        import_openevolve(run.folder, tmp_path / "w1")
        assert load_world(tmp_path / "w1").workers == 1, bad
    folder = _shinka_results(tmp_path / "shinka")
    (folder / "experiment_config.yaml").write_text(SHINKA_CONFIG)
    with pytest.warns(OrphanWarning):
        import_shinkaevolve(folder, tmp_path / "w5")
    assert load_world(tmp_path / "w5").workers == 5


def test_w_is_the_same_given_the_output_folder_or_the_folder_that_holds_it(tmp_path):
    # config_used.yaml inside openevolve_output was read only when the output folder itself was given:
    # the same run imported at W = 4 one way and W = 1 the other
    run = write_resumed_run(tmp_path / "seed0", iterations=(6,), resume_at=())
    (run.folder / "openevolve_output" / "config_used.yaml").write_text("evaluator:\n  parallel_evaluations: 4\n")
    import_openevolve(run.folder, tmp_path / "holder")
    import_openevolve(run.folder / "openevolve_output", tmp_path / "output")
    assert load_world(tmp_path / "holder").workers == load_world(tmp_path / "output").workers == 4


def test_a_program_file_without_code_is_named_in_a_warning(tmp_path):
    # it was imported without its code and without a word (EvoTrace's importer warned)
    programs = tmp_path / "run" / "programs"
    _write(programs, _prog("r", None, 1.0, 1.0, 0))
    child = _prog("x", "r", 2.0, 2.0, 1)
    del child["code"]
    _write(programs, child)
    report = import_openevolve(tmp_path / "run", tmp_path / "w")
    assert "1 of 2 program file(s) hold no 'code' (a string): they are imported without code" in report.warnings
