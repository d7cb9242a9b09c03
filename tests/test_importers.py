"""Importers: real OpenEvolve runs, stringified values, migrants, resumed roots, dangling parents,
and a ShinkaEvolve database built here with ShinkaEvolve's ``programs`` schema."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from dream_gym.datasets.importers import ImportError_
from dream_gym.datasets.importers.openevolve import find_program_files, import_openevolve
from dream_gym.datasets.importers.shinkaevolve import import_shinkaevolve
from dream_gym.world import load_world

EXTERNAL = Path(__file__).resolve().parents[2] / "shared" / "external-runs" / "openevolve"
needs_runs = pytest.mark.skipif(
    not EXTERNAL.is_dir(), reason=f"real OpenEvolve runs not found at {EXTERNAL} (CI has them)"
)


def _check_tree(world):
    index = {node_id: i for i, node_id in enumerate(world.ids)}
    for i, record in enumerate(world.records[1:], start=1):
        assert index[record["parent"]] < i  # parents before children
    return index


# --------------------------------------------------------------------------- real runs


@needs_runs
def test_real_qos_run(tmp_path):
    src = EXTERNAL / "qos-error-mitigation"
    report = import_openevolve(src, tmp_path / "qos")
    world = load_world(tmp_path / "qos")
    ids = {json.loads(p.read_text())["id"] for p in find_program_files(src)}
    assert report.files_read == 668 and report.programs == len(ids) == 204
    assert report.migrants_collapsed == 3
    assert world.size == report.nodes == 204 - 3
    assert report.roots_found == 1 and report.dangling == 0 and report.dropped == 0
    assert report.invalid == 0
    assert world.frontier_rule == "any" and any("frontier 'any'" in n for n in report.notes)
    index = _check_tree(world)
    # migrant copies are gone, their children now hang from the copied program
    migrants = {"3e2ec1f4-8ecf-46b7-996a-699d601547ea", "daf342f8-9850-4faa-b3c6-ec4b3d209fca",
                "901f2ff2-c4c5-47ca-ab25-3fe82b6c03c0"}
    assert not migrants & set(world.ids)
    copied = world.records[index["98108acb-7f07-41f3-bea7-91d48ec6750d"]]
    assert {"3e2ec1f4-8ecf-46b7-996a-699d601547ea", "901f2ff2-c4c5-47ca-ab25-3fe82b6c03c0"} <= set(
        copied["migrant_copies"]
    )
    root = world.records[0]
    assert root["parent"] is None and root["metrics"]["combined_score"] == pytest.approx(0.33222591362126247)
    assert world.baseline_score == pytest.approx(0.33222591362126247)
    assert world.best_score == pytest.approx(0.5060616171727284)
    # code, metrics and prompts kept; creation order follows timestamps
    assert all("code" in r and "metrics" in r for r in world.records)
    with_prompts = {json.loads(p.read_text())["id"] for p in find_program_files(src)
                    if json.loads(p.read_text()).get("prompts")} - migrants
    assert with_prompts and {r["id"] for r in world.records if "prompts" in r} == with_prompts
    stamps = [r["openevolve"]["timestamp"] for r in world.records]
    assert stamps == sorted(stamps)
    assert world.meta["source"]["system"] == "openevolve"


@needs_runs
def test_real_no_three_in_line_run_with_invalid_programs(tmp_path):
    src = EXTERNAL / "no-three-in-line"
    with pytest.raises(ImportError_, match="overall_score"):  # default metric absent: names the others
        import_openevolve(src, tmp_path / "n3-default")
    report = import_openevolve(src, tmp_path / "n3", metric="overall_score")
    world = load_world(tmp_path / "n3")
    assert report.programs == world.size == 81
    assert report.invalid == 12 and report.scored == 69
    _check_tree(world)
    failed = [r for r in world.records if r["score"] is None]
    assert len(failed) == 12 and all(r["error"] for r in failed)
    assert any("evaluator reported error" in r["error"] for r in failed)
    assert any("valid_solution=0" in r["error"] for r in failed)
    assert world.baseline_score == 68.0 and world.best_score == 75.0
    assert int(np.isnan(world.score).sum()) == 12


@needs_runs
def test_real_run_minimize_direction(tmp_path):
    report = import_openevolve(EXTERNAL / "no-three-in-line", tmp_path / "w", metric="runtime",
                               direction="minimize")
    world = load_world(tmp_path / "w")
    raw = [r["score"] for r in world.records if r["score"] is not None]
    assert report.best == min(raw)
    assert world.best_score == pytest.approx(-min(raw))


# --------------------------------------------------------------------------- synthetic OpenEvolve


def _write(folder: Path, program: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{program['id']}.json").write_text(json.dumps(program))


def _prog(pid, parent, score, ts, it, code=None, **extra):
    metrics = {"combined_score": score} if score is not None else {"error": "Traceback: boom"}
    base = {"id": pid, "parent_id": parent, "code": code or f"# {pid}", "timestamp": ts,
            "iteration_found": it, "generation": 0, "metrics": metrics, "metadata": {}}
    base.update(extra)
    return base


def test_stringified_values_migrants_resumed_roots_and_dangling(tmp_path):
    run = tmp_path / "run"
    ck1 = run / "checkpoints" / "checkpoint_5" / "programs"
    ck2 = run / "checkpoints" / "checkpoint_10" / "programs"
    nested = run / "checkpoints" / "checkpoint_10" / "resumed" / "checkpoints" / "checkpoint_3" / "programs"
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
    _write(nested, _prog("root2", "None", 1.0, 200.0, 0, code="def f(): pass"))  # resumed root
    _write(nested, _prog("d", "root2", 2.5, 201.0, 4))
    _write(nested, _prog("e", "pruned-parent", 4.0, 202.0, 5))  # dangling
    _write(nested, _prog("f", "e", 5.0, 203.0, 6))  # descendant of the dangling one
    _write(nested, _prog("early-child", "d", 1.5, 150.0, 7))  # timestamp before its parent

    report = import_openevolve(run, tmp_path / "w")
    world = load_world(tmp_path / "w")
    index = _check_tree(world)
    assert report.migrants_collapsed == 1 and "a-copy" not in index
    assert world.records[index["c"]]["parent"] == "a"
    assert report.roots_merged == 1 and "root2" not in index
    assert world.records[index["d"]]["parent"] == "root"
    assert world.records[0]["merged_roots"] == ["root2"]
    assert report.dangling == 1 and report.dropped == 2 and "e" not in index and "f" not in index
    assert report.reordered == 1 and index["early-child"] > index["d"]
    b = world.records[index["b"]]
    assert b["score"] is None and "Traceback: boom" in b["error"]
    a = world.records[index["a"]]
    assert a["metrics"] == {"combined_score": 2.0}  # the later snapshot wins
    assert a["prompts"] == {"diff_user": {"user": "hi"}}  # filled in from the later snapshot
    assert a["round"] == 1 and world.records[0]["round"] == 0
    assert world.frontier_rule == "any"  # a has children b and c

    report2 = import_openevolve(run, tmp_path / "w2", orphans="reattach")
    world2 = load_world(tmp_path / "w2")
    assert report2.reattached == 1 and report2.dropped == 0
    e = world2.records[world2.ids.index("e")]
    assert e["parent"] == "root" and e["orphan"]["original_parent"] == "pruned-parent"
    assert world2.records[world2.ids.index("f")]["parent"] == "e"


def test_importer_error_paths(tmp_path):
    with pytest.raises(FileNotFoundError):
        import_openevolve(tmp_path / "nope", tmp_path / "w")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImportError_, match="no OpenEvolve programs"):
        import_openevolve(tmp_path / "empty", tmp_path / "w")
    run = tmp_path / "rootless" / "programs"
    _write(run, _prog("x", "gone", 1.0, 1.0, 1))
    with pytest.raises(ImportError_, match="no initial program"):
        import_openevolve(tmp_path / "rootless", tmp_path / "w")
    bad_root = tmp_path / "badroot" / "programs"
    _write(bad_root, _prog("r", None, None, 1.0, 0))
    _write(bad_root, _prog("x", "r", 1.0, 2.0, 1))
    with pytest.raises(ImportError_, match="baseline"):
        import_openevolve(tmp_path / "badroot", tmp_path / "w")
    ok = tmp_path / "ok" / "programs"
    _write(ok, _prog("r", None, 1.0, 1.0, 0))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("occupied")
    with pytest.raises(FileExistsError):
        import_openevolve(tmp_path / "ok", tmp_path / "out")
    with pytest.raises(ImportError_, match="direction"):
        import_openevolve(tmp_path / "ok", tmp_path / "w", direction="up")


# --------------------------------------------------------------------------- ShinkaEvolve

SHINKA_SCHEMA = """
CREATE TABLE IF NOT EXISTS programs (
    id TEXT PRIMARY KEY,
    code TEXT NOT NULL,
    language TEXT NOT NULL,
    parent_id TEXT,
    archive_inspiration_ids TEXT,
    top_k_inspiration_ids TEXT,
    generation INTEGER NOT NULL,
    timestamp REAL NOT NULL,
    code_diff TEXT,
    combined_score REAL,
    public_metrics TEXT,
    private_metrics TEXT,
    text_feedback TEXT,
    complexity REAL,
    embedding TEXT,
    embedding_pca_2d TEXT,
    embedding_pca_3d TEXT,
    embedding_cluster_id INTEGER,
    correct BOOLEAN DEFAULT 0,
    children_count INTEGER NOT NULL DEFAULT 0,
    metadata TEXT,
    migration_history TEXT,
    island_idx INTEGER,
    system_prompt_id TEXT
)
"""


def _shinka_db(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute(SHINKA_SCHEMA)
    rows = [
        # id, parent, generation, timestamp, score, correct, feedback, metadata, public metrics
        ("g0", None, 0, 10.0, 0.50, 1, "", {"compute_time": 1.5}, {"dist": 3}),
        ("g1", "g0", 1, 11.0, 0.60, 1, "", {"api_costs": 0.01, "embed_cost": 0.001, "compute_time": 2.0},
         {"dist": 2}),
        ("g2", "g0", 2, 12.0, 0.0, 0, "AssertionError: overlap", {"api_costs": 0.02}, {}),
        ("g3", "g1", 3, 13.0, 0.70, 1, "", {"api_costs": 0.015}, {"dist": 1}),
        ("g4", "g1", 4, 14.0, 0.65, 1, "", {"api_costs": 0.01}, {"dist": 1}),
        ("g5", "lost", 5, 15.0, 0.90, 1, "", {}, {}),
    ]
    for pid, parent, gen, ts, score, correct, feedback, meta, public in rows:
        conn.execute(
            "INSERT INTO programs (id, code, language, parent_id, generation, timestamp, combined_score,"
            " public_metrics, private_metrics, text_feedback, correct, metadata, island_idx)"
            " VALUES (?, ?, 'python', ?, ?, ?, ?, ?, '{}', ?, ?, ?, 0)",
            (pid, f"# {pid}", parent, gen, ts, score, json.dumps(public), feedback, correct, json.dumps(meta)),
        )
    conn.commit()
    conn.close()
    return path


def test_shinkaevolve_import(tmp_path):
    db = _shinka_db(tmp_path / "evolution_db.sqlite")
    report = import_shinkaevolve(db, tmp_path / "w", world_id="shinka-toy")
    world = load_world(tmp_path / "w")
    assert world.id == "shinka-toy" and world.ids == ("g0", "g1", "g2", "g3", "g4")
    assert report.dangling == 1 and report.dropped == 1 and report.invalid == 1
    g2 = world.records[2]
    assert g2["score"] is None and "AssertionError: overlap" in g2["error"]
    g1 = world.records[1]
    assert g1["cost"]["usd"] == pytest.approx(0.011) and g1["duration_s"] == 2.0
    assert g1["round"] == 1 and g1["code"] == "# g1"
    assert world.frontier_rule == "any"  # g1 has two children
    assert world.baseline_score == 0.5 and world.best_score == pytest.approx(0.7)
    # another metric from public_metrics, minimised
    import_shinkaevolve(db, tmp_path / "w2", metric="dist", direction="minimize")
    world2 = load_world(tmp_path / "w2")
    assert world2.records[3]["score"] == 1 and world2.best_score == -1


def test_shinkaevolve_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        import_shinkaevolve(tmp_path / "missing.sqlite", tmp_path / "w")
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(ImportError_, match="no 'programs' table"):
        import_shinkaevolve(other, tmp_path / "w")
    db = _shinka_db(tmp_path / "evolution_db.sqlite")
    with pytest.raises(ImportError_, match="no program has metric"):
        import_shinkaevolve(db, tmp_path / "w", metric="nonexistent")
