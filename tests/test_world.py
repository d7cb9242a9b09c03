"""The world format: loader errors (file, line, problem), checksum, minimize, unknown keys, writer."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from worldgen import jsonl, meta_for, node, random_records, write_folder, write_raw

from dream_gym.world import writer as writer_mod
from dream_gym.world.tree import FORMAT, WorldFormatError, load_world
from dream_gym.world.writer import WorldWriter, new_meta, write_world

GOOD = [
    node("root", None, 1.0),
    node("a", "root", 2.0),
    node("b", "root", None, error="boom"),
    node("c", "a", 3.0),
]


def base_meta(**changes):
    meta = {"format": FORMAT, "id": "w", "task": {"name": "t"}, "workers": 2}
    meta.update(changes)
    return meta


def load_error(folder: Path) -> WorldFormatError:
    with pytest.raises(WorldFormatError) as info:
        load_world(folder)
    return info.value


def assert_names(err: WorldFormatError, filename: str, line: int | None, *fragments: str) -> None:
    message = str(err)
    assert Path(err.path).name == filename, message
    assert err.line == line, message
    if line is not None:
        assert f"{filename}, line {line}:" in message
    else:
        assert filename in message
    for fragment in fragments:
        assert fragment.lower() in message.lower(), (fragment, message)


# -- nodes.jsonl errors ---------------------------------------------------------------------
NODE_CASES = {
    "empty": ("", None, ["empty"]),
    "only-newline": ("\n", None, ["empty"]),
    "bad-json": (jsonl(GOOD[:1]) + '{"id": "a", "parent": "root", score: 1}\n' + jsonl(GOOD[2:3]), 2, ["bad JSON"]),
    "truncated-last-line": (jsonl(GOOD[:2]) + '{"id": "b", "parent": "ro', 3, ["truncated last line"]),
    "valid-json-but-no-newline": (jsonl(GOOD[:2]) + json.dumps(GOOD[2]), 3, ["truncated last line", "newline"]),
    "blank-line": (jsonl(GOOD[:2]) + "\n" + jsonl(GOOD[2:]), 3, ["blank line"]),
    "not-an-object": (jsonl(GOOD[:1]) + "[1, 2]\n", 2, ["JSON object", "list"]),
    "missing-id": (jsonl([GOOD[0], {"parent": "root", "score": 1.0}]), 2, ["missing required key 'id'"]),
    "missing-parent": (jsonl([GOOD[0], {"id": "a", "score": 1.0}]), 2, ["missing required key 'parent'"]),
    "missing-score": (jsonl([GOOD[0], {"id": "a", "parent": "root"}]), 2, ["missing required key 'score'"]),
    "root-missing-score": (jsonl([{"id": "root", "parent": None}]), 1, ["missing required key 'score'"]),
    "id-not-string": (jsonl([GOOD[0], node(7, "root", 1.0)]), 2, ["'id' must be a non-empty string"]),
    "id-empty": (jsonl([GOOD[0], node("", "root", 1.0)]), 2, ["'id' must be a non-empty string"]),
    "id-list": (jsonl([GOOD[0], node(["a"], "root", 1.0)]), 2, ["'id' must be"]),
    "duplicate-id": (jsonl([*GOOD[:3], node("a", "b", 1.0)]), 4, ["duplicate id 'a'", "line 2"]),
    "duplicate-root-id": (jsonl([GOOD[0], node("root", "root", 1.0)]), 2, ["duplicate id 'root'"]),
    "unknown-parent": (jsonl([GOOD[0], node("a", "nope", 1.0)]), 2, ["parent 'nope'", "earlier line"]),
    "forward-reference": (
        jsonl([GOOD[0], node("a", "b", 1.0), node("b", "root", 1.0)]),
        2,
        ["parent 'b'", "earlier line"],
    ),
    "self-parent": (jsonl([GOOD[0], node("a", "a", 1.0)]), 2, ["parent 'a'", "earlier line"]),
    "parent-not-string": (jsonl([GOOD[0], node("a", 0, 1.0)]), 2, ["parent 0"]),
    "parent-list": (jsonl([GOOD[0], node("a", ["root"], 1.0)]), 2, ["parent ['root']"]),
    "second-root": (jsonl([GOOD[0], node("a", "root", 1.0), node("r2", None, 1.0)]), 3, ["second root 'r2'"]),
    "first-line-not-root": (jsonl([node("a", "root", 1.0), GOOD[0]]), 1, ["first line must be the root"]),
    "nan-score": (jsonl(GOOD[:1]) + '{"id": "a", "parent": "root", "score": NaN}\n', 2, ["NaN"]),
    "infinity-score": (jsonl(GOOD[:1]) + '{"id": "a", "parent": "root", "score": Infinity}\n', 2, ["Infinity"]),
    "minus-infinity-score": (
        jsonl(GOOD[:1]) + '{"id": "a", "parent": "root", "score": -Infinity}\n',
        2,
        ["Infinity"],
    ),
    "overflow-float-score": (jsonl(GOOD[:1]) + '{"id": "a", "parent": "root", "score": 1e400}\n', 2, ["finite"]),
    "huge-int-score": (
        jsonl(GOOD[:1]) + '{"id": "a", "parent": "root", "score": 1' + "0" * 400 + "}\n",
        2,
        ["finite"],
    ),
    "string-score": (jsonl([GOOD[0], node("a", "root", "1.5")]), 2, ["score must be a number", "str"]),
    "bool-score": (jsonl([GOOD[0], node("a", "root", True)]), 2, ["score must be a number", "bool"]),
    "list-score": (jsonl([GOOD[0], node("a", "root", [1])]), 2, ["score must be a number"]),
    "dict-score": (jsonl([GOOD[0], node("a", "root", {"v": 1})]), 2, ["score must be a number"]),
    "bad-utf8": (jsonl(GOOD[:1]).encode() + b'{"id": "\xff", "parent": "root", "score": 1}\n', 2, ["bad JSON"]),
    "unscored-root-without-baseline": (jsonl([node("root", None, None)]), 1, ["baseline_score"]),
}


@pytest.mark.parametrize("case", sorted(NODE_CASES))
def test_loader_names_file_line_and_problem(tmp_path: Path, case: str) -> None:
    text, line, fragments = NODE_CASES[case]
    folder = write_raw(tmp_path / "w", base_meta(), text)
    assert_names(load_error(folder), "nodes.jsonl", line, *fragments)


def test_error_in_a_late_line_is_reported_with_that_line(tmp_path: Path) -> None:
    records = random_records(__import__("random").Random(3), 40)
    text = jsonl(records[:30]) + json.dumps(node("x", "ghost", 1.0)) + "\n" + jsonl(records[30:])
    err = load_error(write_raw(tmp_path / "w", base_meta(), text))
    assert err.line == 31 and "ghost" in str(err)


def test_a_load_error_crosses_a_process_boundary_whole(tmp_path: Path) -> None:
    """A worker's WorldFormatError comes back through pickle with its file, line and problem."""
    import pickle

    records = random_records(__import__("random").Random(3), 10)
    text = jsonl(records[:5]) + json.dumps(node("x", "ghost", 1.0)) + "\n" + jsonl(records[5:])
    err = load_error(write_raw(tmp_path / "w", base_meta(), text))
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is WorldFormatError and str(back) == str(err)
    assert (back.path, back.line, back.problem) == (err.path, err.line, err.problem) and back.line == 6


def test_no_line_is_silently_dropped(tmp_path: Path) -> None:
    records = random_records(__import__("random").Random(4), 25, extras=True)
    world = load_world(write_raw(tmp_path / "w", base_meta(), jsonl(records)))
    assert world.size == len(records)
    assert list(world.ids) == [r["id"] for r in records]
    assert [dict(r) for r in world.records] == records


def test_crlf_line_endings_load(tmp_path: Path) -> None:
    text = jsonl(GOOD).replace("\n", "\r\n")
    assert load_world(write_raw(tmp_path / "w", base_meta(), text)).size == len(GOOD)


# -- world.json errors ----------------------------------------------------------------------
def _without(key):
    meta = base_meta()
    del meta[key]
    return meta


META_CASES = {
    "bad-json": ('{"format": "dream-gym-world/1", "id": ', ["bad JSON"]),
    "nan-in-json": ('{"format": "dream-gym-world/1", "id": "w", "task": {"name": "t"}, "baseline_score": NaN}', ["NaN"]),
    "not-an-object": ("[1, 2]", ["JSON object"]),
    "missing-format": (_without("format"), ["'format'"]),
    "missing-id": (_without("id"), ["'id'"]),
    "missing-task": (_without("task"), ["'task'"]),
    "task-without-name": (base_meta(task={"description": "x"}), ["'task'"]),
    "task-not-object": (base_meta(task="t"), ["'task'"]),
    "id-empty": (base_meta(id=""), ["'id'"]),
    "major-2": (base_meta(format="dream-gym-world/2"), ["unknown major format version", "dream-gym-world/2"]),
    "major-10": (base_meta(format="dream-gym-world/10"), ["unknown major format version"]),
    "major-0.9": (base_meta(format="dream-gym-world/0.9"), ["unknown major format version"]),
    "other-format-name": (base_meta(format="other-world/1"), ["not a dream-gym world format"]),
    "format-without-version": (base_meta(format="dream-gym-world"), ["'format'"]),
    "format-not-string": (base_meta(format=1), ["'format'"]),
    "bad-direction": (base_meta(direction="up"), ["'direction'", "'up'"]),
    "bad-frontier": (base_meta(frontier="all"), ["'frontier'", "'all'"]),
    "workers-zero": (base_meta(workers=0), ["'workers'"]),
    "workers-negative": (base_meta(workers=-2), ["'workers'"]),
    "workers-float": (base_meta(workers=2.0), ["'workers'"]),
    "workers-bool": (base_meta(workers=True), ["'workers'"]),
    "workers-string": (base_meta(workers="4"), ["'workers'"]),
    "baseline-string": (base_meta(baseline_score="0.5"), ["'baseline_score'"]),
    "baseline-bool": (base_meta(baseline_score=False), ["'baseline_score'"]),
    "sha256-short": (base_meta(sha256="abc"), ["'sha256'"]),
    "sha256-int": (base_meta(sha256=5), ["'sha256'"]),
}


@pytest.mark.parametrize("case", sorted(META_CASES))
def test_bad_world_json_names_file_and_problem(tmp_path: Path, case: str) -> None:
    meta, fragments = META_CASES[case]
    folder = write_raw(tmp_path / "w", meta, jsonl(GOOD))
    assert_names(load_error(folder), "world.json", None, *fragments)


def test_missing_folder_and_files(tmp_path: Path) -> None:
    assert "no such directory" in str(load_error(tmp_path / "absent"))
    (tmp_path / "only-meta").mkdir()
    (tmp_path / "only-meta" / "world.json").write_text(json.dumps(base_meta()))
    assert_names(load_error(tmp_path / "only-meta"), "nodes.jsonl", None, "missing")
    (tmp_path / "only-nodes").mkdir()
    (tmp_path / "only-nodes" / "nodes.jsonl").write_text(jsonl(GOOD))
    assert_names(load_error(tmp_path / "only-nodes"), "world.json", None, "missing")


@pytest.mark.parametrize("fmt", ["dream-gym-world/1", "dream-gym-world/1.3", "dream-gym-world/1.0.7"])
def test_minor_versions_are_accepted(tmp_path: Path, fmt: str) -> None:
    world = load_world(write_raw(tmp_path / "w", base_meta(format=fmt), jsonl(GOOD)))
    assert world.size == 4 and world.meta["format"] == fmt


def test_defaults_filled_in(tmp_path: Path) -> None:
    meta = {"format": FORMAT, "id": "w", "task": {"name": "t"}}
    world = load_world(write_raw(tmp_path / "w", meta, jsonl(GOOD)))
    assert (world.workers, world.frontier_rule, world.direction, world.task_description) == (1, "leaves", "maximize", "")


# -- checksum -------------------------------------------------------------------------------
def test_checksum_written_by_finish_verifies(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "w", GOOD)
    meta = json.loads((folder / "world.json").read_text())
    assert meta["sha256"] == hashlib.sha256((folder / "nodes.jsonl").read_bytes()).hexdigest()
    assert load_world(folder).size == 4


def test_checksum_mismatch_is_reported(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "w", GOOD)
    path = folder / "nodes.jsonl"
    path.write_bytes(path.read_bytes().replace(b"3.0", b"3.5"))
    assert_names(load_error(folder), "nodes.jsonl", None, "checksum mismatch")


def test_checksum_catches_appended_valid_line(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "w", GOOD)
    with open(folder / "nodes.jsonl", "a") as handle:
        handle.write(json.dumps(node("d", "c", 9.0)) + "\n")
    assert "checksum mismatch" in str(load_error(folder))


def test_a_node_file_cut_short_says_so(tmp_path: Path) -> None:
    """An interrupted copy or download: the mismatch says the file was cut short, plain or
    compressed; a file edited in place is said to be changed (the control)."""
    from dream_gym.world.writer import compress_world

    folder = write_folder(tmp_path / "w", GOOD)
    path = folder / "nodes.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    assert "its last line ends mid-record: it was cut short" in str(load_error(folder))
    path.write_bytes(whole.replace(b"3.0", b"3.5"))
    assert "the file was changed after world.json was written" in str(load_error(folder))
    path.write_bytes(whole)
    compress_world(folder)
    packed = folder / "nodes.jsonl.gz"
    packed.write_bytes(packed.read_bytes()[:-12])
    assert "the compressed file ends before its end marker: it was cut short" in str(load_error(folder))


def test_world_without_checksum_loads(tmp_path: Path) -> None:
    folder = write_raw(tmp_path / "w", base_meta(), jsonl(GOOD))
    world = load_world(folder)
    assert "sha256" not in world.meta and world.size == 4


# -- orientation, baseline, arrays, unknown keys --------------------------------------------------
def test_minimize_negates_scores_and_baseline(tmp_path: Path) -> None:
    recs = [node("root", None, 10.0), node("a", "root", 4.0), node("b", "root", None), node("c", "a", 12.0)]
    world = load_world(write_raw(tmp_path / "min", base_meta(direction="minimize"), jsonl(recs)))
    assert world.baseline_score == -10.0
    assert world.best_score == -4.0
    np.testing.assert_array_equal(world.score, [-10.0, -4.0, np.nan, -12.0])
    assert world.orient(3.0) == -3.0 and world.orient(None) is None
    explicit = load_world(write_raw(tmp_path / "min2", base_meta(direction="minimize", baseline_score=8), jsonl(recs)))
    assert explicit.baseline_score == -8.0
    maxi = load_world(write_raw(tmp_path / "max", base_meta(baseline_score=8), jsonl(recs)))
    assert maxi.baseline_score == 8.0 and maxi.best_score == 12.0


def test_baseline_from_world_json_when_root_unscored(tmp_path: Path) -> None:
    recs = [node("root", None, None), node("a", "root", 2.0)]
    world = load_world(write_raw(tmp_path / "w", base_meta(baseline_score=1.5), jsonl(recs)))
    assert world.baseline_score == 1.5 and math.isnan(world.score[0])


def test_best_score_without_any_valid_score_is_baseline(tmp_path: Path) -> None:
    recs = [node("root", None, None), node("a", "root", None)]
    world = load_world(write_raw(tmp_path / "w", base_meta(baseline_score=0.25), jsonl(recs)))
    assert world.best_score == 0.25


def test_children_in_creation_order_and_parent_array(tmp_path: Path) -> None:
    recs = [
        node("root", None, 0.0),
        node("a", "root", 1.0),
        node("b", "root", 1.0),
        node("a1", "a", 1.0),
        node("c", "root", 1.0),
        node("a2", "a", 1.0),
        node("b1", "b", 1.0),
    ]
    world = load_world(write_raw(tmp_path / "w", base_meta(), jsonl(recs)))
    assert world.parent.tolist() == [-1, 0, 0, 1, 0, 1, 2]
    assert world.children_of(0).tolist() == [1, 2, 4]
    assert world.children_of(1).tolist() == [3, 5]
    assert world.children_of(2).tolist() == [6]
    assert world.children_of(6).tolist() == []
    for array in (world.parent, world.score, world.children, world.children_start):
        assert not array.flags.writeable


def test_unknown_keys_are_kept(tmp_path: Path) -> None:
    recs = [node("root", None, 0.0, mystery={"x": [1, 2]}), node("a", "root", 1.0, tags=["t"], zzz=3)]
    meta = base_meta(custom_field={"deep": True}, licence="CC0")
    world = load_world(write_raw(tmp_path / "w", meta, jsonl(recs)))
    assert world.meta["custom_field"] == {"deep": True} and world.meta["licence"] == "CC0"
    assert world.records[0]["mystery"] == {"x": [1, 2]}
    assert world.records[1]["zzz"] == 3 and world.records[1]["tags"] == ["t"]


def test_single_root_world(tmp_path: Path) -> None:
    world = load_world(write_raw(tmp_path / "w", base_meta(), jsonl(GOOD[:1])))
    assert world.size == 1 and world.children_of(0).tolist() == [] and world.best_score == 1.0


# -- the writer ---------------------------------------------------------------------------------
def test_writer_flushes_and_fsyncs_every_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = writer_mod.os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(writer_mod.os, "fsync", counting_fsync)
    folder = tmp_path / "w"
    with WorldWriter.create(folder, meta_for()) as writer:
        for i, rec in enumerate(GOOD, start=1):
            before = len(synced)
            writer.append(rec)
            assert len(synced) == before + 1
            lines = (folder / "nodes.jsonl").read_text().splitlines()
            assert len(lines) == i and json.loads(lines[-1]) == rec
        assert len(writer) == 4 and "c" in writer and "zz" not in writer
        digest = writer.finish()
    assert digest == hashlib.sha256((folder / "nodes.jsonl").read_bytes()).hexdigest()
    assert json.loads((folder / "world.json").read_text())["sha256"] == digest
    world = load_world(folder)
    assert [dict(r) for r in world.records] == GOOD


BAD_APPENDS = {
    "duplicate": node("a", "root", 5.0),
    "unknown-parent": node("x", "ghost", 1.0),
    "second-root": node("x", None, 1.0),
    "nan-score": node("x", "root", float("nan")),
    "inf-score": node("x", "root", float("inf")),
    "bool-score": node("x", "root", False),
    "missing-score": {"id": "x", "parent": "root"},
    "nan-in-metrics": node("x", "root", 1.0, metrics={"m": float("nan")}),
    "unserialisable": node("x", "root", 1.0, blob=object()),
    "lone-surrogate": node("x", "root", 1.0, code="\ud800"),
}


@pytest.mark.parametrize("case", sorted(BAD_APPENDS))
def test_writer_refuses_bad_node_before_the_file(tmp_path: Path, case: str) -> None:
    folder = tmp_path / "w"
    with WorldWriter.create(folder, meta_for()) as writer:
        writer.extend(GOOD[:2])
        before = (folder / "nodes.jsonl").read_bytes()
        with pytest.raises(WorldFormatError) as info:
            writer.append(BAD_APPENDS[case])
        assert "nodes.jsonl, line 3" in str(info.value)
        assert (folder / "nodes.jsonl").read_bytes() == before
        assert len(writer) == 2
        writer.append(node("later", "a", 7.0))  # the writer is still usable
        writer.finish()
    world = load_world(folder)
    assert list(world.ids) == ["root", "a", "later"]


def test_writer_first_node_must_be_root(tmp_path: Path) -> None:
    folder = tmp_path / "w"
    with WorldWriter.create(folder, meta_for()) as writer:
        with pytest.raises(WorldFormatError, match="first line must be the root"):
            writer.append(node("a", "root", 1.0))
    assert (folder / "nodes.jsonl").read_bytes() == b""


def test_create_refuses_existing_world_and_bad_meta(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "w", GOOD)
    with pytest.raises(FileExistsError):
        WorldWriter.create(folder, meta_for())
    with pytest.raises(WorldFormatError, match="'workers'"):
        WorldWriter.create(tmp_path / "bad", {**meta_for(), "workers": 0})
    with pytest.raises(WorldFormatError, match="'direction'"):
        new_meta("x", "t", direction="sideways")


def test_torn_last_line_reported_then_repaired_and_resumed(tmp_path: Path) -> None:
    folder = tmp_path / "w"
    with WorldWriter.create(folder, meta_for()) as writer:
        writer.extend(GOOD[:3])
    full = json.dumps(node("c", "a", 3.0)).encode()
    with open(folder / "nodes.jsonl", "ab") as handle:
        handle.write(full[:17])  # a crash in the middle of a line
    (folder / ".world.json.pg3ugm0o.tmp").write_text('{"format"')  # and in world.json's next copy
    assert_names(load_error(folder), "nodes.jsonl", 4, "truncated last line")

    with WorldWriter.open(folder) as writer:
        assert not (folder / ".world.json.pg3ugm0o.tmp").exists()  # no later command removed it
        assert writer.repaired is not None and "17 bytes" in writer.repaired
        assert len(writer) == 3 and "b" in writer
        assert (folder / "nodes.jsonl").read_bytes().endswith(b"\n")
        writer.append(node("c", "a", 3.0))
        writer.append(node("d", "c", 4.0))
        writer.finish()
    world = load_world(folder)
    assert list(world.ids) == ["root", "a", "b", "c", "d"]


def test_torn_root_line_repairs_to_empty_world(tmp_path: Path) -> None:
    folder = tmp_path / "w"
    with WorldWriter.create(folder, meta_for()):
        pass
    (folder / "nodes.jsonl").write_bytes(b'{"id": "ro')
    assert_names(load_error(folder), "nodes.jsonl", 1, "truncated last line")
    with WorldWriter.open(folder) as writer:
        assert writer.repaired and len(writer) == 0
        writer.extend(GOOD)
        writer.finish()
    assert load_world(folder).size == 4


def test_open_clean_and_finished_world_resumes_and_reverifies(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "w", GOOD)
    with WorldWriter.open(folder) as writer:
        assert writer.repaired is None
        # finished until the first change: a resume refused after opening leaves it as it was
        assert "sha256" in json.loads((folder / "world.json").read_text())
        writer.append(node("d", "c", 4.0))
        assert "sha256" not in json.loads((folder / "world.json").read_text())
        with pytest.raises(WorldFormatError, match="duplicate"):
            writer.append(node("root", "d", 1.0))
        writer.finish()
    world = load_world(folder)
    assert world.size == 5 and world.meta["sha256"] == hashlib.sha256((folder / "nodes.jsonl").read_bytes()).hexdigest()


def test_open_refuses_an_invalid_world(tmp_path: Path) -> None:
    folder = write_raw(tmp_path / "w", base_meta(), jsonl([GOOD[0], node("a", "ghost", 1.0)]))
    with pytest.raises(WorldFormatError, match="ghost"):
        WorldWriter.open(folder)
    bad_meta = write_raw(tmp_path / "m", "{not json", jsonl(GOOD))
    with pytest.raises(WorldFormatError, match="bad JSON"):
        WorldWriter.open(bad_meta)
    with pytest.raises(WorldFormatError, match="missing"):
        WorldWriter.open(tmp_path / "nothing")


def test_update_meta_validates_and_clears_checksum(tmp_path: Path) -> None:
    folder = tmp_path / "w"
    with WorldWriter.create(folder, meta_for()) as writer:
        writer.extend(GOOD)
        writer.finish()
        writer.update_meta(licence="MIT")
        assert "sha256" not in json.loads((folder / "world.json").read_text())
        with pytest.raises(WorldFormatError):
            writer.update_meta(frontier="everything")
    world = load_world(folder)
    assert world.meta["licence"] == "MIT"


def test_write_world_round_trip_with_numpy_values(tmp_path: Path) -> None:
    recs = [node("root", None, np.float64(1.5)), node("a", "root", 2, metrics={"v": np.arange(3)})]
    folder = write_world(tmp_path / "w", meta_for(), recs)
    world = load_world(folder)
    assert world.score.tolist() == [1.5, 2.0]
    assert world.records[1]["metrics"] == {"v": [0, 1, 2]}


def test_open_refuses_a_finished_world_that_fails_its_checksum(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "w", GOOD)
    path = folder / "nodes.jsonl"
    path.write_bytes(path.read_bytes().replace(b"3.0", b"30.0"))
    with pytest.raises(WorldFormatError, match="checksum mismatch"):
        WorldWriter.open(folder)
    assert "checksum mismatch" in str(load_error(folder))  # not laundered into a new checksum


# --------------------------------------------------------------------------- prefixes


def test_a_prefix_is_the_run_stopped_after_its_first_attempts() -> None:
    import random

    from worldgen import make_world

    from dream_gym.world.tree import prefix_world

    full = make_world(random_records(random.Random(3), 40), world_id="run")
    short = prefix_world(full, 12)
    assert short.size == 13 and short.ids == full.ids[:13]
    assert short.parent.tolist() == full.parent[:13].tolist()
    assert np.array_equal(short.score, full.score[:13], equal_nan=True)
    assert short.best_score == float(np.nanmax(full.score[:13]))  # q renormalised to the prefix's best
    assert short.baseline_score == full.baseline_score
    assert short.id == "run@12" and short.meta["prefix_of"] == {"id": "run", "attempts": 12}
    assert all(c < 13 for i in range(13) for c in short.children_of(i).tolist())


@pytest.mark.parametrize("attempts", [0, 39, 40])
def test_a_prefix_must_be_shorter_than_the_world(attempts: int) -> None:
    import random

    from worldgen import make_world

    from dream_gym.world.tree import prefix_world

    full = make_world(random_records(random.Random(3), 40), world_id="run")
    with pytest.raises(ValueError, match="run: a prefix keeps 1 to 38 attempts"):
        prefix_world(full, attempts)


def test_a_world_is_finished_once_its_writer_records_the_checksum(tmp_path: Path):
    from dream_gym.world.files import is_finished

    folder = tmp_path / "w"
    assert not is_finished(folder)  # nothing there
    with WorldWriter.create(folder, new_meta("w", "t")) as writer:
        writer.append({"id": "root", "parent": None, "score": 1.0, "code": "x = 1"})
        assert not is_finished(folder)  # a run writing it
        writer.finish()
    assert is_finished(folder)
    (folder / "world.json").write_text("{not json")
    assert not is_finished(folder)  # unreadable: not a finished world, and no error


def test_a_root_without_score_or_baseline_is_named_as_a_failed_initial_program(tmp_path: Path) -> None:
    records = [node("root", None, None, error="could not load the task"), *GOOD[1:]]
    folder = write_raw(tmp_path / "w", base_meta(), jsonl(records))
    assert_names(load_error(folder), "nodes.jsonl", 1, "the root has no score (its initial program failed its "
                 "evaluation)", "a replay has no scored program to start from")
    write_raw(tmp_path / "b", base_meta(baseline_score=0.5), jsonl(records))  # a baseline given: it replays
    assert load_world(tmp_path / "b").size == 4
