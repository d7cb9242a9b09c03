"""The two checks of an output folder before a run writes there: empty for a new run, holding only
what a killed run leaves for a ``--resume`` that starts one; and the marking of text no world can
store, which imports and grown runs share."""

from __future__ import annotations

import json

import pytest

from dream_gym.infrastructure.walk import without_lone_surrogates
from dream_gym.world.writer import check_empty_folder, check_resumable_folder


def test_a_new_run_takes_an_absent_or_empty_folder_and_names_what_else_is_there(tmp_path):
    assert check_empty_folder(tmp_path / "new") == tmp_path / "new"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".lock").write_text("")
    assert check_empty_folder(tmp_path / "run") == tmp_path / "run"
    for name in ("a", "b", "c", "d", "e"):
        (tmp_path / "run" / name).write_text(name)
    with pytest.raises(FileExistsError, match=r"it holds a, b, c and 2 more\); give a new or empty folder"):
        check_empty_folder(tmp_path / "run")


def test_a_resume_starts_among_what_a_killed_run_leaves_and_nothing_else(tmp_path):
    folder = tmp_path / "run"
    (folder / "task").mkdir(parents=True)
    (folder / ".lock").write_text("")
    (folder / ".world.json.123.tmp").write_text("{")
    assert check_resumable_folder(folder, {"task"}) == folder
    with pytest.raises(FileExistsError, match=r"--resume: .*run holds no world to continue \(no nodes.jsonl\), but "
                                              r"other files \(task\): give the folder of the run to continue"):
        check_resumable_folder(folder)  # a grown run leaves no task files
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"other files \(notes.txt\)"):
        check_resumable_folder(folder, {"task"})
    assert (folder / "notes.txt").read_text() == "mine"


def test_a_lone_surrogate_is_marked_in_keys_and_values_and_counted_once_a_string():
    parsed = json.loads('{"k\\ud800": ["a\\udfffb\\ud800", "fine", 3, null], "t": "\\ud83d\\ude00"}')
    cleaned, marked = without_lone_surrogates(parsed)
    assert cleaned == {"k\ufffd": ["a\ufffdb\ufffd", "fine", 3, None], "t": "\U0001f600"}
    assert marked == 2
    json.dumps(cleaned, ensure_ascii=False).encode("utf-8")  # storable as UTF-8
    assert without_lone_surrogates({"a": ["b"]}) == ({"a": ["b"]}, 0)
