"""The extension points are registries: a new importer or RL architecture is one module and one
registry entry, and everything that offers a choice (import_run, --from auto, the CLI's choices,
model loading) follows the registry."""

from __future__ import annotations

import pytest
from extensions.csv_tree import IMPORTER as CSV_TREE

from dream_gym.cli import build_parser
from dream_gym.datasets.importers import IMPORTERS, RunImportError, detect_system, import_run
from dream_gym.world import load_world

CSV_RUN = "id,parent,score\nr,,1.0\na,r,2.0\nb,r,\nc,a,3.5\n"


@pytest.fixture
def csv_registered(monkeypatch):
    monkeypatch.setitem(IMPORTERS, "csv-tree", CSV_TREE)  # the registry line, in-process


def test_a_registered_importer_imports_detects_and_is_a_cli_choice(tmp_path, csv_registered):
    run = tmp_path / "run.csv"
    run.write_text(CSV_RUN, encoding="utf-8")
    assert detect_system(run) == "csv-tree"
    report = import_run("auto", run, tmp_path / "w")
    world = load_world(tmp_path / "w")
    assert report.system == "csv-tree" and world.ids == ("r", "a", "b", "c")
    assert report.summary().startswith("imported CSV tree run") and "CSV tree" in world.task_description
    parser = build_parser("worlds")
    worlds = parser._subparsers._group_actions[0].choices["worlds"]  # type: ignore[union-attr]
    importer = worlds._subparsers._group_actions[0].choices["import"]
    choices = next(a.choices for a in importer._actions if a.dest == "system")
    assert list(choices) == ["auto", *IMPORTERS] and "csv-tree" in choices


def test_a_new_importer_gets_the_wrong_system_hint_from_the_registry(tmp_path, csv_registered):
    openevolve_run = tmp_path / "oe" / "programs"
    openevolve_run.mkdir(parents=True)
    (openevolve_run / "r.json").write_text("{}", encoding="utf-8")
    with pytest.raises(RunImportError, match="looks like a OpenEvolve run instead: import it with --from openevolve"):
        import_run("csv-tree", tmp_path / "oe", tmp_path / "w")


def test_without_its_registry_line_an_importer_is_unknown(tmp_path):
    run = tmp_path / "run.csv"
    run.write_text(CSV_RUN, encoding="utf-8")
    assert detect_system(run) is None
    with pytest.raises(RunImportError, match="unknown system 'csv-tree'; expected one of openevolve, shinkaevolve"):
        import_run("csv-tree", run, tmp_path / "w")
