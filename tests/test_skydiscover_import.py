"""Importing SkyDiscover output folders (dream_gym.datasets.importers.skydiscover).

The fixture is a run made here by the real SkyDiscover package through `dream-gym deploy`
(tests/data/skydiscover/README.md: its command); the five real public runs in
../shared/external-runs/skydiscover are imported too where that folder exists.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from dream_gym import load_world
from dream_gym.datasets.importers import IMPORTERS, RunImportError, detect_system, import_run

FIXTURE = Path(__file__).parent / "data" / "skydiscover" / "adaevolve-cp26.tar.gz"


def nodes(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "nodes.jsonl").read_text().splitlines() if line.strip()]


def tree(records: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    return {r["id"]: (r["parent"], r["score"], r.get("code"), r.get("error")) for r in records}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """The fixture's --out folder, unpacked."""
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path / "adaevolve-cp26"


def programs_of(folder: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in folder.rglob("programs/*.json")}


def test_skydiscovers_output_imports_as_the_tree_the_bridge_recorded(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "imported"
    done = subprocess.run([sys.executable, "-m", "dream_gym", "worlds", "import", str(run / "skydiscover"),
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("imported SkyDiscover run") and "copies collapsed 8" in done.stdout
    imported, recorded = nodes(out), nodes(run)
    assert tree(imported) == tree(recorded) and len(imported) == 17
    saved = programs_of(run / "skydiscover")
    copies = {i for i, p in saved.items() if {"seeded_to_island", "migrated_from"} & set(p["metadata"] or {})}
    assert len(saved) == 25 and len(copies) == 8 and copies.isdisjoint(tree(imported))
    root = imported[0]
    assert root["parent"] is None and root["round"] == 0 and root["skydiscover"]["iteration_found"] == 0
    seeded = next(i for i in copies if "seeded_to_island" in saved[i]["metadata"])
    assert seeded in root["copies"]  # AdaEvolve's copy of the initial program is the root
    for record in imported:
        raw = saved[record["id"]]
        assert record["code"] == raw["solution"] and record["metrics"] == raw["metrics"]
        assert record["skydiscover"]["inspirations"] == (raw["other_context_ids"] or [])
    invalid = [r for r in imported if r["score"] is None]
    assert len(invalid) == 1 and "error" in invalid[0]["metrics"] and invalid[0]["error"].startswith("evaluator reported")
    best = json.loads((run / "skydiscover" / "best" / "best_program_info.json").read_text())
    world = load_world(out)
    assert max(s for s in world.score if s == s) == best["metrics"]["combined_score"]
    assert json.loads((out / "world.json").read_text())["source"]["system"] == "skydiscover"


def test_auto_detection_asks_skydiscover_before_openevolve(run: Path, tmp_path: Path) -> None:
    """Both systems keep programs/*.json: OpenEvolve's detector alone would claim a SkyDiscover
    folder (the control); SkyDiscover is asked first, and ``--from openevolve`` of it is refused
    with the system to name (it imported a world without any code, with exit status 0)."""
    sky = run / "skydiscover"
    assert detect_system(sky) == "skydiscover"
    assert IMPORTERS["openevolve"].detect(sky)  # the control: OpenEvolve's detector claims it too
    with pytest.raises(RunImportError, match=r"hold a 'solution', not OpenEvolve's 'code'; it looks like a "
                                             r"SkyDiscover run instead: import it with --from skydiscover"):
        import_run("openevolve", sky, tmp_path / "as-openevolve")
    assert not (tmp_path / "as-openevolve").exists()
    from openevolve_runs import write_resumed_run

    write_resumed_run(tmp_path / "oe", iterations=(6,), resume_at=())
    assert detect_system(tmp_path / "oe") == "openevolve"
    with pytest.raises(RunImportError, match="looks like an OpenEvolve run instead: import it with --from openevolve"):
        import_run("skydiscover", tmp_path / "oe", tmp_path / "wrong")


def test_checkpoints_alone_import_with_a_note_of_what_they_lack(run: Path, tmp_path: Path) -> None:
    """Without db/ (SkyDiscover's save-as-added folder, when db_path is set) only the snapshots
    remain: here every program is in one. A program dropped between two checkpoints is in none:
    the import says how many iterations its programs fall short of."""
    sky = run / "skydiscover"
    (sky / "db").rename(tmp_path / "db-aside")
    report = import_run("auto", sky, tmp_path / "imported")
    assert tree(nodes(tmp_path / "imported")) == tree(nodes(run)) and report.snapshots > 25
    assert not any("reached iteration" in note for note in report.notes)
    parents = {r["parent"] for r in nodes(run)}
    leaf = next(r["id"] for r in reversed(nodes(run)) if r["id"] not in parents and r["score"] is not None)
    for path in sky.rglob(f"programs/{leaf}.json"):
        path.unlink()
    partial = import_run("auto", sky, tmp_path / "partial")
    assert partial.nodes == 16 and leaf not in tree(nodes(tmp_path / "partial"))
    assert any("reached iteration 16 and 15 of its programs" in note for note in partial.notes)


def test_a_program_without_its_solution_that_others_continue_is_refused(run: Path, tmp_path: Path) -> None:
    """A program whose every file lost its 'solution' was skipped with a note, its children hung
    under the root as orphans: it is refused as an unreadable file is; a leaf is skipped, noted."""
    sky = run / "skydiscover"
    parents = {r["parent"] for r in nodes(run)}
    inner = next(r["id"] for r in nodes(run)[1:] if r["id"] in parents)
    leaf = next(r["id"] for r in reversed(nodes(run)) if r["id"] not in parents)

    def drop_solution(program: str) -> None:
        for path in sky.rglob(f"programs/{program}.json"):
            raw = json.loads(path.read_text())
            del raw["solution"]
            path.write_text(json.dumps(raw))

    drop_solution(leaf)
    report = import_run("auto", sky, tmp_path / "leaf")
    assert any("1 program file(s) without a 'solution' field skipped" in note for note in report.notes)
    drop_solution(inner)
    with pytest.raises(RunImportError, match=f"program {inner} has no 'solution' field in any of its files, and "
                                             "programs of the run continue it: the import would lose it"):
        import_run("auto", sky, tmp_path / "inner")
    assert not (tmp_path / "inner").exists()


def test_a_folder_without_skydiscover_programs_is_refused_once(tmp_path: Path) -> None:
    (tmp_path / "empty" / "checkpoints").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "dream_gym", "worlds", "import", str(tmp_path / "empty"),
                           "--from", "skydiscover", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode != 0 and "no SkyDiscover programs found" in done.stderr
    assert done.stderr.count("error:") == 1 and not (tmp_path / "out").exists()


# The figures docs/guides/import.md gives: files read, programs, nodes, copies collapsed, invalid, best.
SKYDISCOVER_RUNS = {
    "sky-adaevolve-circlepack": (362, 83, 58, 25, 13, 0.994968),
    "sky-budgetevolve-circlepack": (357, 53, 40, 13, 11, 0.999254),
    "sky-costada-circlepack": (358, 86, 71, 15, 51, 0.931277),
    "sky-evox-circlepack": (328, 72, 72, 0, 0, 0.958411),
    "sky-evox-circlepack-run2": (248, 62, 62, 0, 0, 0.958399),
}


@pytest.mark.parametrize("name", sorted(SKYDISCOVER_RUNS))
def test_the_real_public_runs_import(external_runs: Path, tmp_path: Path, name: str) -> None:
    src = external_runs / "skydiscover" / name
    assert detect_system(src) == "skydiscover"
    report = import_run("auto", src, tmp_path / name)
    world = load_world(tmp_path / name)
    records = nodes(tmp_path / name)
    source = (src / "SOURCE.md").read_text()
    best = float(re.search(r"best score: combined_score ([0-9.]+)", source).group(1))
    assert report.best == pytest.approx(best) and report.orphans == 0 and report.roots_found == 1
    assert all(r.get("code") for r in records) and len(records) == len(world.score)
    raws = programs_of(src)
    copies = {i for i, p in raws.items() if {"seeded_to_island", "migrated_from"} & set(p["metadata"] or {})}
    assert report.programs == len(raws) and report.nodes == len(raws) - len(copies)
    assert report.migrants_collapsed == len(copies) and (copies > set() or "evox" in name)
    files, programs, count, collapsed, invalid, best_shown = SKYDISCOVER_RUNS[name]
    assert (report.files_read, report.programs, report.nodes, report.migrants_collapsed, report.invalid) == (
        files, programs, count, collapsed, invalid)
    assert report.best == pytest.approx(best_shown, abs=5e-7)
    if "evox" in name:
        assert any("evolved search strategies" in note for note in report.notes)
