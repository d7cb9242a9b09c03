"""What every importer does the same way, because they share one frame (``importers/job.py``) and
one metric check: each system's run, made here by the project's own fixtures, is imported through
the public ``import_run``, refused into a folder that is not empty, refused by a metric it does not
hold (nothing written), and written with the options and the provenance asked for."""

from __future__ import annotations

import json
import sqlite3
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from evotrace_runs import write_corpus
from openevolve_runs import write_resumed_run

from dream_gym.datasets.importers import ImportOptions, RunImportError, import_run
from dream_gym.world.tree import load_world

DATA = Path(__file__).parent / "data"


def _openevolve(tmp: Path) -> Path:
    return write_resumed_run(tmp / "oe-run", iterations=(8,), resume_at=()).folder


def _trace(tmp: Path) -> Path:
    """An evolution trace alone: the initial program is rebuilt from the parent fields of its children."""
    lines = [{"iteration": i, "timestamp": 100.0 + i, "parent_id": "root" if i == 1 else f"c{i - 1}",
              "child_id": f"c{i}", "child_metrics": {"combined_score": 0.1 * i}, "child_code": f"# c{i}",
              "parent_metrics": {"combined_score": 0.0}, "parent_code": "# root"} for i in range(1, 5)]
    path = tmp / "evolution_trace.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _shinkaevolve(tmp: Path) -> Path:
    folder = tmp / "shinka-run"
    folder.mkdir()
    conn = sqlite3.connect(folder / "evolution_db.sqlite")
    conn.execute("CREATE TABLE programs (id TEXT, parent_id TEXT, generation INTEGER, timestamp REAL, "
                 "combined_score REAL, correct BOOLEAN, code TEXT, public_metrics TEXT)")
    conn.executemany("INSERT INTO programs VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
                     [("g0", None, 0, 1.0, 0.5, "# g0", '{"dist": 3}'), ("g1", "g0", 1, 2.0, 0.7, "# g1", '{"dist": 2}')])
    conn.commit()
    conn.close()
    return folder


def _skydiscover(tmp: Path) -> Path:
    with tarfile.open(DATA / "skydiscover" / "adaevolve-cp26.tar.gz") as archive:
        archive.extractall(tmp, filter="data")
    return tmp / "adaevolve-cp26" / "skydiscover"


def _gepa(tmp: Path) -> Path:
    return DATA / "gepa" / "linear-fit"  # read only


def _evotrace(tmp: Path) -> Path:
    return write_corpus(tmp / "evotrace")["openevolve_native/circle-oe-s0"]


# system -> (the run, the system the world's provenance names, the run's own metric)
RUNS: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    "openevolve": (_openevolve, "openevolve", "combined_score"),
    "openevolve-trace": (_trace, "openevolve", "combined_score"),
    "shinkaevolve": (_shinkaevolve, "shinkaevolve", "combined_score"),
    "skydiscover": (_skydiscover, "skydiscover", "combined_score"),
    "gepa": (_gepa, "gepa", "val_score"),
    "evotrace": (_evotrace, "evotrace", "overall_score"),  # EvoReplay's primary score of this run
}


@pytest.fixture(params=sorted(RUNS))
def source(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str, str]:
    make, system, metric = RUNS[request.param]
    return make(tmp_path), system, metric


def test_a_metric_no_program_holds_is_refused_naming_the_ones_it_does_and_nothing_is_written(source, tmp_path):
    src, system, own_metric = source
    out = tmp_path / "refused"
    with pytest.raises(RunImportError) as refused:
        import_run("auto", src, out, metric="no-such-metric")
    message = str(refused.value)
    assert "has metric 'no-such-metric'; metrics found: " in message and message.endswith("(choose one with --metric)")
    assert own_metric in message.split("metrics found: ")[1]
    assert not out.exists()
    report = import_run("auto", src, tmp_path / "control")  # the run's own metric imports it
    assert report.system == system and report.metric == own_metric and (tmp_path / "control" / "world.json").is_file()


def test_a_world_folder_that_is_not_empty_is_refused_and_left_as_it_was(source, tmp_path):
    src = source[0]
    out = tmp_path / "taken"
    out.mkdir()
    (out / "mine.txt").write_text("not yours")
    with pytest.raises(FileExistsError, match="output folder exists and is not empty"):
        import_run("auto", src, out)
    assert [p.name for p in out.iterdir()] == ["mine.txt"] and (out / "mine.txt").read_text() == "not yours"
    (out / "mine.txt").unlink()  # control: the same folder, once empty, takes the world
    import_run("auto", src, out)
    assert (out / "world.json").is_file()


def test_the_options_and_the_provenance_are_written_the_same_way_by_every_importer(source, tmp_path):
    src, system, own_metric = source
    options = ImportOptions(world_id="my run: 1", task_name="the task", task_description="what it does",
                            direction="minimize", workers=3)
    report = import_run("auto", src, tmp_path / "w", options)
    meta = json.loads((tmp_path / "w" / "world.json").read_text())
    assert (meta["id"], meta["task"], meta["direction"], meta["workers"]) == (
        "my-run-1", {"name": "the task", "description": "what it does"}, "minimize", 3)
    assert meta["source"]["system"] == system and meta["source"]["metric"] == own_metric
    assert meta["source"]["orphans"] == "attach" and meta["source"]["import"]["nodes"] == report.nodes
    assert report.world_id == "my-run-1" and report.seconds > 0
    world = load_world(tmp_path / "w")
    assert len(world.ids) == report.nodes and report.best == min(r["score"] for r in world.records
                                                                if r["score"] is not None)
