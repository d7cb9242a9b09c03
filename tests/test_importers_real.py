"""Importers on every real run in ../shared/external-runs, checked against the raw files.

Each run is read from the shared folder (never copied here); its SOURCE.md gives origin and
licence. For every run the test recomputes from the raw records, independently of the importer:
the programs read, the copies that collapse, each node's parent, which programs are valid, the
best valid score, and checks the world against them.
"""

from __future__ import annotations

import json
import math
import sqlite3
import warnings
from itertools import pairwise
from pathlib import Path

import pytest

from dream_gym.datasets.importers import RunImportError, import_run
from dream_gym.world.tree import load_world

EXTERNAL = Path(__file__).resolve().parents[2] / "shared" / "external-runs"
needs_runs = pytest.mark.usefixtures("external_runs")  # skips where the runs are absent

# run: (metric, files read, distinct programs, nodes, copies collapsed, invalid, best)
OPENEVOLVE_RUNS = {
    "binpack-null-islands-s42": ("combined_score", 201, 201, 195, 6, 0, 0.9630793184233848),
    "binpack-pe-islands-s42": ("combined_score", 191, 191, 191, 0, 0, 0.9603229517109063),
    "fnmin-islands10_config_s42": ("combined_score", 529, 101, 101, 0, 7, 0.9847200506074152),
    "fnmin-mig_fast_config_s42": ("combined_score", 625, 120, 102, 18, 0, 0.997358227973649),
    "fnmin-no_migration_config_s42": ("combined_score", 573, 102, 102, 0, 4, 0.999617866209002),
    "fnmin-single_island_config_s42": ("combined_score", 566, 101, 101, 0, 2, 0.9970640123775331),
    "yunmin-nbody": ("combined_score", 52, 52, 51, 1, 35, 1.5707),
    "yunmin-stencil": ("gflops", 47, 47, 46, 1, 1, 8.90988),
}
SHINKA_RUNS = {
    "circle-packing-example": ("combined_score", 3, 5, 1, 4, 0, 0.9597642169962064),
    "macaulay2-resurgence": ("combined_score", 83, 42, 41, 1, 28, 180.0),
}


def _import(system: str, src: Path, out: Path, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a real run imported here must not need orphan handling
        report = import_run(system, src, out, **options)
    return report, load_world(out)


def _check_order(world, report) -> None:
    index = {node_id: i for i, node_id in enumerate(world.ids)}
    for i, record in enumerate(world.records[1:], start=1):
        assert index[record["parent"]] < i  # parents first
    stamps = [r.get("openevolve", r.get("shinkaevolve", {})).get("timestamp") for r in world.records]
    inversions = sum(1 for a, b in pairwise(stamps) if a is not None and b is not None and b < a)
    assert inversions <= report.reordered


def _raw_openevolve(src: Path) -> dict[str, dict]:
    raws: dict[str, dict] = {}
    for path in sorted(src.rglob("*.json")):
        if path.parent.name == "programs":
            data = json.loads(path.read_text())
            raws.setdefault(data["id"], {}).update(data)
    return raws


def _valid_openevolve(metrics: dict, metric: str) -> bool:
    value = metrics.get(metric)
    flags = [metrics.get(k) for k in ("validity", "valid", "valid_solution", "is_valid") if k in metrics]
    return (isinstance(value, (int, float)) and math.isfinite(value) and "error" not in metrics
            and all(float(f) != 0.0 for f in flags))


@needs_runs
@pytest.mark.parametrize("name", sorted(OPENEVOLVE_RUNS))
def test_real_openevolve_run_is_imported_faithfully(name, tmp_path):
    metric, files, programs, nodes, copies, invalid, best = OPENEVOLVE_RUNS[name]
    src = EXTERNAL / "openevolve" / name
    report, world = _import("openevolve", src, tmp_path / "w", metric=metric)
    raws = _raw_openevolve(src)
    migrants = {i for i, r in raws.items() if (r.get("metadata") or {}).get("migrant") or "_migrant_" in i}
    # programs read = every distinct id; nodes = programs minus collapsed copies; nothing dropped
    assert (report.files_read, report.programs, report.nodes, report.migrants_collapsed) == (
        files, programs, nodes, copies)
    assert report.programs == len(raws) and report.migrants_collapsed == len(migrants)
    assert set(world.ids) == set(raws) - migrants and report.dropped == report.orphans == 0
    # parents are the recorded ones, a migrant parent standing for the program it copies
    for record in world.records[1:]:
        parent = raws[record["id"]]["parent_id"]
        while parent in migrants:
            parent = raws[parent]["parent_id"]
        assert record["parent"] == parent
    # valid programs scored by the metric, invalid ones kept with a null score and their error
    for record in world.records:
        raw_metrics = raws[record["id"]]["metrics"]
        if _valid_openevolve(raw_metrics, metric):
            assert record["score"] == raw_metrics[metric]
        else:
            assert record["score"] is None and record["error"]
    assert report.invalid == invalid == sum(r["score"] is None for r in world.records)
    valid_scores = [r["metrics"][metric] for i, r in raws.items() if i not in migrants
                    and _valid_openevolve(r["metrics"], metric)]
    assert report.best == best == max(valid_scores) and world.best_score == best
    # creation order: timestamps; rounds are the iterations (single-phase runs)
    _check_order(world, report)
    assert all(r["round"] == (raws[r["id"]]["iteration_found"] if i else 0) for i, r in enumerate(world.records))
    assert world.meta["source"]["system"] == "openevolve"


@needs_runs
@pytest.mark.parametrize("name", sorted(SHINKA_RUNS))
def test_real_shinkaevolve_run_is_imported_faithfully(name, tmp_path):
    metric, files, programs, nodes, n_copies, invalid, best = SHINKA_RUNS[name]
    src = EXTERNAL / "shinkaevolve" / name
    report, world = _import("shinkaevolve", src, tmp_path / "w", metric=metric)
    conn = sqlite3.connect(src / "evolution_db.sqlite")
    conn.row_factory = sqlite3.Row
    rows = {r["id"]: dict(r) for r in conn.execute("SELECT * FROM programs")}
    conn.close()
    copies = {i: json.loads(r["metadata"])["_original_program_id"] for i, r in rows.items()
              if json.loads(r["metadata"]).get("_is_island_copy")}
    assert (report.files_read, report.programs, report.nodes, report.migrants_collapsed) == (
        files, programs, nodes, n_copies)
    assert len(copies) == n_copies and set(world.ids) == set(rows) - set(copies) and report.dropped == report.orphans == 0
    for record in world.records[1:]:
        parent = rows[record["id"]]["parent_id"]
        assert record["parent"] == copies.get(parent, parent)
        assert record["round"] == rows[record["id"]]["generation"]
    for record in world.records:
        row = rows[record["id"]]
        if row["correct"]:
            assert record["score"] == row["combined_score"]
        else:
            correct_json = src / f"gen_{row['generation']}" / "results" / "correct.json"
            assert record["score"] is None and json.loads(correct_json.read_text())["error"] in record["error"]
    assert report.invalid == invalid
    assert report.best == best == max(r["combined_score"] for r in rows.values() if r["correct"])
    _check_order(world, report)


@needs_runs
def test_migrants_collapse_and_prompts_stay(tmp_path):
    src = EXTERNAL / "openevolve" / "fnmin-mig_fast_config_s42"
    report, world = _import("openevolve", src, tmp_path / "w")
    index = {node_id: i for i, node_id in enumerate(world.ids)}
    best = "fe8b8554-1d74-44bc-a72f-09ee1366bb53"  # the best program, migrated onto islands 1 and 4
    assert world.records[index[best]]["score"] == world.best_score == report.best
    assert {f"{best}_migrant_1", f"{best}_migrant_4"} <= set(world.records[index[best]]["copies"])
    assert report.migrants_collapsed == 18 and world.size == 102
    assert world.baseline_score == pytest.approx(0.7796537424534681)
    assert world.frontier_rule == "any" and report.max_children_non_root == 5
    files = src.rglob("programs/*.json")
    with_prompts = {d["id"] for d in map(json.loads, (f.read_text() for f in files)) if d.get("prompts")}
    with_prompts &= set(world.ids)
    assert with_prompts and {r["id"] for r in world.records if "prompts" in r} == with_prompts


@needs_runs
def test_fnmin_metrics_under_other_names(tmp_path):
    src = EXTERNAL / "openevolve" / "fnmin-islands10_config_s42"
    with pytest.raises(RunImportError, match=r"metrics found: .*overall_score.*value_score"):
        import_run("openevolve", src, tmp_path / "x", metric="fitness")
    report, world = _import("openevolve", src, tmp_path / "w", metric="distance_score")
    errors = [r["error"] for r in world.records if r["score"] is None]
    assert report.invalid == 7 and all("evaluator reported error=" in e for e in errors)
    assert any("is not defined" in e for e in errors)


@needs_runs
def test_another_metric_failures_and_the_run_best_is_explained(tmp_path):
    src = EXTERNAL / "openevolve" / "fnmin-no_migration_config_s42"
    report, world = _import("openevolve", src, tmp_path / "w", metric="value_score")
    failed = [r for r in world.records if r["score"] is None]
    assert len(failed) == report.invalid == 4
    assert all("evaluator reported error=" in r["error"] and "metric 'value_score' missing" in r["error"]
               for r in failed)
    # best/best_program_info.json is the best by combined_score, not the best by value_score: the note says so
    info = json.loads((src / "best" / "best_program_info.json").read_text())
    assert info["metrics"]["value_score"] == 0.9996855385836881 < report.best == 0.9996856891551625
    assert any("run's own best" in n and "0.9996855385836881" in n for n in report.notes)
    # minimising a latency: failed programs (p99 0.0 beside an error) are not the best
    minimised = import_run("openevolve", EXTERNAL / "openevolve" / "yunmin-nbody", tmp_path / "m",
                           metric="p99_latency_us", direction="minimize")
    raw = [r["score"] for r in load_world(tmp_path / "m").records if r["score"] is not None]
    assert minimised.invalid == 35 and minimised.best == min(raw) == 2512.162


@needs_runs
def test_noema_runs_take_costs_from_the_evolution_trace(tmp_path):
    src = EXTERNAL / "openevolve" / "binpack-pe-islands-s42"
    report, world = _import("openevolve", src, tmp_path / "w")
    trace = [json.loads(line) for line in (src / "evolution_trace.jsonl").read_text().splitlines() if line]
    usd = sum(c["cost"] for t in trace for c in t["metadata"]["token_ledger"]["calls"])
    assert sum(r.get("cost", {}).get("usd", 0.0) for r in world.records) == pytest.approx(usd)
    assert sum(1 for r in world.records if "cost" in r) == len(trace) == 174
    assert report.recovered == 0 and any("evolution trace: 1 file(s), 174 children" in n for n in report.notes)
    # all-in cost: the LLM calls of rejected proposals are counted, not silently lost
    assert any("214 LLM call(s)" in n and "40 of them ($0.0249)" in n for n in report.notes)
    # the derivative's extra programs (paradigm shifts) keep their parents and origin
    shifted = world.records[world.ids.index("it000079-pe000")]
    assert shifted["parent"] == "it000039-pe002"
    assert shifted["openevolve"]["metadata"]["origin"] == "paradigm_shift"


@needs_runs
def test_shinka_island_copy_children_hang_from_the_original_and_errors_come_from_gen_folders(tmp_path):
    src = EXTERNAL / "shinkaevolve" / "macaulay2-resurgence"
    report, world = _import("auto", src, tmp_path / "w")
    assert report.system == "shinkaevolve"
    root = world.records[0]
    assert root["id"].startswith("dfb32761") and len(root["copies"]) == 1
    by_prefix = {r["id"][:8]: r for r in world.records}
    assert by_prefix["d8c47d67"]["parent"] == root["id"]  # child of the island-1 copy of the root
    assert "Computation timed out after 120 seconds" in by_prefix["533fca65"]["error"]
    cost = by_prefix["3f981000"]["cost"]
    assert cost["usd"] == pytest.approx(0.183236 + 1.185e-05) and cost["tokens_out"] == 15007
    assert by_prefix["3f981000"]["duration_s"] == pytest.approx(2.0611791610717773)
    assert by_prefix["d8c47d67"]["shinkaevolve"]["migration_history"][0]["to"] == 0
    assert by_prefix["3f981000"]["prompts"]["system"]


@needs_runs
def test_shinka_run_of_initial_copies_only_is_a_root_world(tmp_path):
    report, world = _import("shinkaevolve", EXTERNAL / "shinkaevolve" / "circle-packing-example", tmp_path / "w")
    assert world.size == 1 and report.migrants_collapsed == 4 and report.roots_found == 1


@needs_runs
@pytest.mark.parametrize(("name", "nodes", "invalid", "orphans", "best"), [
    ("oe-bm25-composable", 179, 11, 0, 0.43045407582053996),
    ("oe-bm25-constrained", 185, 0, 12, 0.4259518327666566),
    ("oe-bm25-freeform", 200, 6, 0, 0.442431217235689),
])
def test_runs_whose_evaluator_flags_error_as_a_number_import(name, nodes, invalid, orphans, best, tmp_path):
    src = EXTERNAL / "openevolve" / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constrained's population cap pruned 12 parents: orphans attach
        report = import_run("auto", src, tmp_path / "w")
    world = load_world(tmp_path / "w")
    raws = _raw_openevolve(src)
    # every program reports error as 0.0 or 1.0 beside its combined_score; 1.0 is a failure (12 datasets failed)
    flags = {float(r["metrics"]["error"]) for r in raws.values()}
    assert flags <= {0.0, 1.0}
    for record in world.records:
        metrics = raws[record["id"]]["metrics"]
        failed = metrics["error"] == 1.0
        assert (record["score"] is None) == failed
        if failed:
            assert metrics["datasets_failed"] > 0 and "error=1.0" in record["error"]
    assert (world.size, report.invalid, report.orphans, report.best) == (nodes, invalid, orphans, best)
    assert world.baseline_score == raws[world.ids[0]]["metrics"]["combined_score"]


@needs_runs
def test_a_folder_that_holds_a_second_run_says_the_run_best_may_be_that_runs(tmp_path):
    """yunmin-experiment-a holds a second run started 70 hours later with an initial program of its
    own: the note blamed only a best written before the run ended."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = import_run("auto", EXTERNAL / "openevolve" / "yunmin-experiment-a", tmp_path / "w")
    note = next(n for n in report.notes if n.startswith("the run's own best"))
    assert report.roots_found == 2 and report.unplaced_roots == 1
    assert note.endswith("or it is the best of another run in this folder (2 initial programs; 1 attached under "
                         "the first)")


@needs_runs
def test_a_value_no_world_may_hold_is_named_in_the_run_not_in_a_file_that_is_gone(tmp_path):
    """A program's negative iteration: the error named the import's staging file
    (``out/.writing/nodes.jsonl, line 16``), removed by then, and not the run."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(EXTERNAL / "openevolve" / "wilds-prompt-v1-al0", run)
    for path in sorted((run / "database" / "programs").glob("*.json")):
        program = json.loads(path.read_text())
        if program.get("parent_id"):
            program["iteration_found"] = -5
            path.write_text(json.dumps(program))
    with pytest.raises(RunImportError) as refused:
        import_run("openevolve", run, tmp_path / "out")
    said = str(refused.value)
    assert said.startswith(f"{run}: the run holds what no world may: ") and ".writing" not in said
    assert "'round' must be an integer from 0 to 1000000, got -5" in said
    assert not (tmp_path / "out" / "world.json").exists()
