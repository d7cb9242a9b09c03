"""Validation before evaluation: syntax, interface, and a short isolated episode on a tiny world."""

from __future__ import annotations

from dream_gym.dream.validate import check_source, tiny_world, validate_policy_file
from tests import dream_revisions as revs


def _file(tmp_path, code):
    path = tmp_path / "revision.py"
    path.write_text(code)
    return path


def test_syntax_error_is_reported_with_its_line():
    assert check_source(revs.SYNTAX_ERROR) == "SyntaxError: '[' was never closed (line 2)"


def test_a_file_without_the_interface_is_refused_without_running_it():
    assert "defines no policy" in check_source(revs.NO_INTERFACE)
    assert "defines no policy" in check_source("x = 1\n")
    assert check_source("class Mine:\n    def reset(self, c): pass\n    def act(self, v): return []\n") is None


def test_good_file_passes(tmp_path):
    assert validate_policy_file(_file(tmp_path, revs.WEAK)) is None
    assert validate_policy_file(_file(tmp_path, revs.strong())) is None


def test_illegal_batch_fails_validation(tmp_path):
    assert "IllegalBatchError" in validate_policy_file(_file(tmp_path, revs.ILLEGAL_BATCH))


def test_hanging_policy_is_killed_at_the_decision_timeout(tmp_path):
    problem = validate_policy_file(_file(tmp_path, revs.INFINITE_LOOP), decision_timeout_s=0.5)
    assert problem.startswith("PolicyTimeout")


def test_hostile_file_cannot_read_a_world_from_disk(tmp_path):
    world = tmp_path / "secret-world" / "nodes.jsonl"
    world.parent.mkdir()
    world.write_text('{"id": "root"}\n')
    problem = validate_policy_file(_file(tmp_path, revs.reads_world_from_disk(str(world))))
    assert "PermissionError" in problem and "may not read this file" in problem


def test_tiny_world_has_branches_a_repairable_and_a_hard_failure():
    world = tiny_world()
    classes = {r.get("fail_class") for r in world.records}
    assert {"repairable", "hard"} <= classes and world.workers == 2
    assert len(world.children_of(0)) == 3
