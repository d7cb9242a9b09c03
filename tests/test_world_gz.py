"""Compressed worlds (nodes.jsonl.gz): the loader, checksums, errors with file + line, the
compress/decompress helpers, interrupted compression, and the dataset store with gz worlds."""

from __future__ import annotations

import gzip
import hashlib
import json
import random
from pathlib import Path

import pytest
from test_world import GOOD, NODE_CASES, assert_names, base_meta, load_error
from worldgen import jsonl, meta_for, random_records, write_folder

from dream_gym.datasets.packing import pack
from dream_gym.datasets.store import validate
from dream_gym.world.registry import resolve_world
from dream_gym.world.tree import NODES_FILE, NODES_GZ_FILE, WORLD_FILE, WorldFormatError, load_world
from dream_gym.world.writer import WorldWriter, compress_world, decompress_world, write_world


def write_gz(folder: Path, meta: dict, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / WORLD_FILE).write_text(json.dumps(meta), encoding="utf-8")
    (folder / NODES_GZ_FILE).write_bytes(gzip.compress(data, mtime=0))
    return folder


def same_world(a, b) -> bool:
    return a.ids == b.ids and [dict(r) for r in a.records] == [dict(r) for r in b.records] and a.meta["id"] == b.meta["id"]


def test_gz_world_loads_like_the_plain_one(tmp_path: Path) -> None:
    records = random_records(random.Random(1), 50, extras=True)
    plain = load_world(write_folder(tmp_path / "plain", records))
    packed = load_world(write_world(tmp_path / "gz", meta_for(), records, compress=True))
    assert not (tmp_path / "gz" / NODES_FILE).exists() and (tmp_path / "gz" / NODES_GZ_FILE).is_file()
    assert same_world(plain, packed)
    assert (plain.score == packed.score).all() or ((plain.score != plain.score) == (packed.score != packed.score)).all()


def test_sha256_covers_the_stored_compressed_file(tmp_path: Path) -> None:
    folder = write_world(tmp_path / "w", meta_for(), GOOD, compress=True)
    meta = json.loads((folder / WORLD_FILE).read_text())
    assert meta["sha256"] == hashlib.sha256((folder / NODES_GZ_FILE).read_bytes()).hexdigest()
    # the same nodes recompressed differently: same content, different stored bytes -> refused
    data = gzip.decompress((folder / NODES_GZ_FILE).read_bytes())
    (folder / NODES_GZ_FILE).write_bytes(gzip.compress(data, compresslevel=1, mtime=12345))
    assert_names(load_error(folder), NODES_GZ_FILE, None, "checksum mismatch")


def test_compression_is_reproducible(tmp_path: Path) -> None:
    a = write_world(tmp_path / "a", meta_for(), GOOD, compress=True)
    b = write_world(tmp_path / "b", meta_for(), GOOD, compress=True)
    assert (a / NODES_GZ_FILE).read_bytes() == (b / NODES_GZ_FILE).read_bytes()


@pytest.mark.parametrize("case", sorted(NODE_CASES))
def test_gz_loader_errors_keep_file_and_line(tmp_path: Path, case: str) -> None:
    text, line, fragments = NODE_CASES[case]
    data = text.encode("utf-8") if isinstance(text, str) else text
    assert_names(load_error(write_gz(tmp_path / "w", base_meta(), data)), NODES_GZ_FILE, line, *fragments)


@pytest.mark.parametrize(
    ("stored", "fragment"),
    [(b"not gzip at all\n", "not a valid gzip file"), (gzip.compress(b"x" * 500, mtime=0)[:-12], "not a valid gzip file")],
)
def test_corrupt_gzip_is_named(tmp_path: Path, stored: bytes, fragment: str) -> None:
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / WORLD_FILE).write_text(json.dumps(base_meta()))
    (folder / NODES_GZ_FILE).write_bytes(stored)
    assert_names(load_error(folder), NODES_GZ_FILE, None, fragment)


def test_folder_with_both_node_files_is_an_error(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "w", GOOD)
    (folder / NODES_GZ_FILE).write_bytes(gzip.compress(b"{}\n"))
    err = load_error(folder)
    assert NODES_FILE in str(err) and NODES_GZ_FILE in str(err) and "both" in str(err)


def test_missing_node_file_names_both_names(tmp_path: Path) -> None:
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / WORLD_FILE).write_text(json.dumps(base_meta()))
    err = load_error(folder)
    assert "missing" in str(err) and NODES_GZ_FILE in str(err)


def test_compress_then_decompress_round_trips(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "w", GOOD)
    before = (folder / NODES_FILE).read_bytes()
    original = load_world(folder)
    assert compress_world(folder) == folder / NODES_GZ_FILE
    assert compress_world(folder) == folder / NODES_GZ_FILE  # idempotent
    assert same_world(original, load_world(folder))
    decompress_world(folder)
    assert (folder / NODES_FILE).read_bytes() == before and not (folder / NODES_GZ_FILE).exists()
    assert json.loads((folder / WORLD_FILE).read_text())["sha256"] == hashlib.sha256(before).hexdigest()


def test_compress_refuses_unfinished_and_broken_worlds(tmp_path: Path) -> None:
    with WorldWriter.create(tmp_path / "open", meta_for()) as writer:
        writer.extend(GOOD)
    with pytest.raises(WorldFormatError, match="not finished"):
        compress_world(tmp_path / "open")
    folder = write_folder(tmp_path / "bad", GOOD)
    (folder / NODES_FILE).write_text(jsonl(GOOD[:1]) + "{oops\n")
    with pytest.raises(WorldFormatError, match="checksum mismatch"):
        compress_world(folder)
    assert not (folder / NODES_GZ_FILE).exists()


def test_an_interrupted_compress_is_finished_by_running_it_again(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "w", GOOD)
    original = load_world(folder)
    # state after a crash between writing the gzip file and removing nodes.jsonl
    (folder / NODES_GZ_FILE).write_bytes(gzip.compress((folder / NODES_FILE).read_bytes(), mtime=0))
    with pytest.raises(WorldFormatError, match="both"):
        load_world(folder)
    compress_world(folder)
    assert same_world(original, load_world(folder)) and not (folder / NODES_FILE).exists()
    # ... but not when the two files disagree
    other = write_folder(tmp_path / "x", GOOD)
    (other / NODES_GZ_FILE).write_bytes(gzip.compress(jsonl(GOOD[:2]).encode()))
    with pytest.raises(WorldFormatError, match="different nodes"):
        compress_world(other)


def test_writer_refuses_to_resume_or_overwrite_a_compressed_world(tmp_path: Path) -> None:
    folder = write_world(tmp_path / "w", meta_for(), GOOD, compress=True)
    with pytest.raises(WorldFormatError, match="decompress_world"):
        WorldWriter.open(folder)
    (folder / WORLD_FILE).unlink()
    with pytest.raises(FileExistsError):
        WorldWriter.create(folder, meta_for())


def test_finish_compress_returns_the_stored_checksum(tmp_path: Path) -> None:
    with WorldWriter.create(tmp_path / "w", meta_for()) as writer:
        writer.extend(GOOD)
        digest = writer.finish(compress=True)
    assert digest == hashlib.sha256((tmp_path / "w" / NODES_GZ_FILE).read_bytes()).hexdigest()
    assert load_world(tmp_path / "w").size == len(GOOD)


def test_dataset_store_packs_validates_and_resolves_gz_worlds(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DREAM_GYM_HOME", str(tmp_path / "home"))
    plain = write_folder(tmp_path / "a", GOOD, world_id="a")
    packed = write_world(tmp_path / "b", meta_for("b"), random_records(random.Random(2), 30), compress=True)
    dataset = pack([plain, packed], "me/mixed-v0", held_out=["b"])
    assert f"b/{NODES_GZ_FILE}" in dataset.meta["files"] and f"a/{NODES_FILE}" in dataset.meta["files"]
    result = validate("me/mixed-v0")
    assert result.worlds == {"a": len(GOOD), "b": 30}
    assert validate(str(dataset.path / "b")).worlds == {"b": 30}
    assert resolve_world("me/mixed-v0/b").size == 30
    (dataset.path / "b" / NODES_GZ_FILE).write_bytes(b"tampered")
    with pytest.raises(Exception, match="sha256 mismatch"):
        validate("me/mixed-v0")


def test_the_cli_decompresses_a_world_and_grow_says_what_to_do_with_a_compressed_one(tmp_path: Path, capsys) -> None:
    """``grow --resume`` of a compressed world said "already holds a world; write the new one to
    another folder", and only Python could decompress it."""
    from dream_gym.cli import main
    from dream_gym.online.loop import GrowConfig, grow
    from dream_gym.policies import make_policy

    folder = tmp_path / "w"
    grow(GrowConfig(task="sum-difference", out=folder, workers=2, rounds=1, backend="serial"), make_policy("greedy"))
    before = (folder / NODES_FILE).read_bytes()
    assert main(["worlds", "compress", str(folder)]) == 0
    capsys.readouterr()
    with pytest.raises(FileExistsError, match=r"holds a compressed world \(nodes.jsonl.gz\), which does not grow as "
                                              r"it is: `dream-gym worlds decompress .*` first, then --resume"):
        grow(GrowConfig(task="sum-difference", out=folder, workers=2, rounds=2, backend="serial", resume=True),
             make_policy("greedy"))
    assert main(["worlds", "decompress", str(folder)]) == 0
    assert capsys.readouterr().out.startswith(f"{folder / NODES_FILE} (")
    assert (folder / NODES_FILE).read_bytes() == before
    result = grow(GrowConfig(task="sum-difference", out=folder, workers=2, rounds=2, backend="serial", resume=True),
                  make_policy("greedy"))
    assert result.rounds >= 1 and load_world(folder).meta["sha256"]
