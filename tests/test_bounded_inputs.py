"""Bounded inputs: a compressed bomb, deep nesting, an over-long line and absurd numbers in a world
or a dataset are refused with an error that names the file (and line), the limit and how to raise
it; peak memory stays small (measured in a fresh process); nothing already stored is lost."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from dream_gym.datasets.archive import UnsafeArchiveError, check_members, make_archive
from dream_gym.datasets.packing import pack
from dream_gym.datasets.store import DatasetError, local_path, validate
from dream_gym.infrastructure.limits import DECOMPRESSED_ENV, LINE_ENV, MAX_JSON_DEPTH, max_decompressed_bytes
from dream_gym.world.registry import resolve_world
from dream_gym.world.tree import (
    MAX_ROUND,
    MAX_WORKERS,
    NODES_FILE,
    NODES_GZ_FILE,
    WORLD_FILE,
    WorldFormatError,
    load_world,
)
from dream_gym.world.writer import WorldWriter, compress_world, decompress_world, new_meta, write_world

MB = 1 << 20
ROOT = b'{"id": "root", "parent": null, "score": 0.0}\n'
PEAK_MB = 200  # a bomb that inflates to 2 GiB must be refused within this much memory


def _meta(**changes) -> dict:
    meta = {"format": "dream-gym-world/1", "id": "w", "task": {"name": "t"}, "workers": 2}
    meta.update(changes)
    return meta


def _world(folder: Path, nodes: bytes, *, gz: bool = False, **meta) -> Path:
    """A world folder holding ``nodes`` as they are (gzip bytes when ``gz``), with a correct sha256:
    what an attacker who knows the format ships."""
    folder.mkdir(parents=True)
    stored = folder / (NODES_GZ_FILE if gz else NODES_FILE)
    stored.write_bytes(nodes)
    (folder / WORLD_FILE).write_text(json.dumps(_meta(sha256=hashlib.sha256(nodes).hexdigest(), **meta)))
    return folder


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def zeros_bomb(total: int = 2 << 30) -> bytes:
    """~2 MB of gzip (concatenated members, as gzip allows) that inflate to ``total`` zero bytes:
    one line with no newline. Deflate stops near 1000:1, so 2 GiB cannot come from less."""
    member = _gz(bytes(64 * MB))
    return member * (total // (64 * MB))


def padded_lines_bomb(lines: int = 256) -> bytes:
    """Gzip of valid, distinct node lines, each padded with 8 MiB of JSON whitespace: 2 GiB of
    lines that pass every per-line check, so only the limit on decompressed data can stop it."""
    padding = _gz(b" " * (8 * MB) + b"\n")
    parts = [_gz(ROOT)]
    for i in range(lines):
        parts += [_gz(f'{{"id": "n{i}", "parent": "root", "score": {i}}}'.encode()), padding]
    return b"".join(parts)


def kept_lines_bomb(lines: int = 512) -> bytes:
    """Gzip of valid node lines, each holding 4 MiB of code: what a loader keeps, line by line."""
    code, tail = _gz(b"x" * (4 * MB)), _gz(b'"}\n')
    parts = [_gz(ROOT)]
    for i in range(lines):
        parts += [_gz(f'{{"id": "n{i}", "parent": "root", "score": {i}, "code": "'.encode()), code, tail]
    return b"".join(parts)


def _run_python(code: str, env: dict | None = None) -> dict:
    """Run ``code`` in a fresh interpreter; it sets ``out``; return it with the process's peak RSS."""
    # VmHWM, not ru_maxrss: ru_maxrss keeps the peak of the forked copy of this (large) process
    # from before the exec, VmHWM is the new program's own.
    script = textwrap.dedent(code) + textwrap.dedent("""
        import json as _json, re as _re
        _hwm = int(_re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
        print(_json.dumps({"out": out, "peak_mb": _hwm / 1024}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _run_cli(*args: str, env: dict | None = None) -> tuple[int, str, float]:
    """``dream-gym ARGS`` in a real process: its exit code, stderr and peak RSS (read by a parent
    process that runs nothing else)."""
    wrapper = textwrap.dedent(f"""
        import json, resource, subprocess, sys
        done = subprocess.run([sys.executable, "-m", "dream_gym", *{list(args)!r}], capture_output=True, text=True)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(json.dumps({{"code": done.returncode, "stderr": done.stderr, "peak_mb": peak}}))
    """)
    done = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    return report["code"], report["stderr"], report["peak_mb"]


def _assert_one_line_error(code: int, stderr: str, *fragments: str) -> None:
    assert code != 0
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def _load_error(folder: Path) -> WorldFormatError:
    with pytest.raises(WorldFormatError) as info:
        load_world(folder)
    return info.value


# -- the gzip bomb -------------------------------------------------------------------------------
LOAD_BOTH_WAYS = """
    import sys
    from dream_gym.world.tree import WorldFormatError, load_world
    from dream_gym.world.registry import resolve_world
    out = []
    for load in (load_world, resolve_world):
        try:
            load(sys.argv[1] if len(sys.argv) > 1 else {folder!r})
            out.append(None)
        except WorldFormatError as exc:
            out.append([str(exc), exc.line])
"""


@pytest.mark.slow
def test_a_2_gib_gzip_bomb_of_one_line_stops_at_the_line_limit_in_little_memory(tmp_path):
    bomb = zeros_bomb()
    assert len(bomb) < 3 * MB
    folder = _world(tmp_path / "bomb", bomb, gz=True)
    report = _run_python(LOAD_BOTH_WAYS.format(folder=str(folder)))
    for message, line in report["out"]:  # load_world, then the registry's cached loader
        assert line == 1
        assert f"{folder / NODES_GZ_FILE}, line 1:" in message
        assert "16 MB" in message and LINE_ENV in message
        assert "interrupted" not in message  # nobody was writing: do not blame a writer
    assert report["peak_mb"] < PEAK_MB, report


@pytest.mark.slow
def test_a_2_gib_gzip_bomb_of_valid_lines_stops_at_the_decompressed_limit_in_little_memory(tmp_path):
    folder = _world(tmp_path / "bomb", padded_lines_bomb(), gz=True)
    report = _run_python(LOAD_BOTH_WAYS.format(folder=str(folder)))
    for message, line in report["out"]:
        assert line is None
        assert str(folder / NODES_GZ_FILE) in message
        assert "256 MB" in message and DECOMPRESSED_ENV in message
    assert report["peak_mb"] < PEAK_MB, report


def test_a_bomb_of_kept_lines_costs_memory_by_the_limit_not_by_the_bomb(tmp_path):
    """Valid lines are kept (a world holds its nodes), so the limit is what bounds memory: with
    a 32 MB limit a 2 GiB bomb of 4 MiB code lines stops within it."""
    folder = _world(tmp_path / "bomb", kept_lines_bomb(), gz=True)
    report = _run_python(LOAD_BOTH_WAYS.format(folder=str(folder)), env={DECOMPRESSED_ENV: "32"})
    for message, _ in report["out"]:
        assert "32 MB uncompressed" in message
    assert report["peak_mb"] < PEAK_MB, report


def test_the_decompressed_limit_is_raised_by_its_environment_variable(tmp_path, monkeypatch):
    """A real world a little over a small limit is refused, and loads once the limit is raised:
    the variable is read at each load, and the same limit holds for a plain nodes.jsonl."""
    lines = ROOT + b"".join(f'{{"id": "n{i}", "parent": "root", "score": {i}}}\n'.encode() for i in range(400))
    plain = write_world(tmp_path / "plain", _meta(), [json.loads(line) for line in lines.splitlines()])
    packed = write_world(tmp_path / "packed", _meta(), [json.loads(line) for line in lines.splitlines()], compress=True)
    monkeypatch.setenv(DECOMPRESSED_ENV, "0.01")  # 10 KB; the node lines hold ~20 KB
    for folder, name in ((plain, NODES_FILE), (packed, NODES_GZ_FILE)):
        message = str(_load_error(folder))
        assert f"{folder / name}:" in message and "0.01 MB" in message and DECOMPRESSED_ENV in message
    monkeypatch.setenv(DECOMPRESSED_ENV, "0.1")
    assert load_world(plain).size == load_world(packed).size == 401


@pytest.mark.parametrize("value", ["abc", "0", "-5", "inf", "nan"])
def test_a_bad_limit_value_is_refused_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv(DECOMPRESSED_ENV, value)
    with pytest.raises(ValueError, match=f"{DECOMPRESSED_ENV}=.*positive size in MB"):
        max_decompressed_bytes()


def test_compress_and_decompress_refuse_a_bomb_and_leave_its_files_as_they_were(tmp_path, monkeypatch):
    monkeypatch.setenv(DECOMPRESSED_ENV, "1")
    bomb = _gz(b"\n".join([ROOT.strip()] * 50_000) + b"\n")  # 2.2 MB of lines beyond a 1 MB limit
    folder = _world(tmp_path / "bomb", bomb, gz=True)
    for step in (decompress_world, compress_world):
        with pytest.raises(WorldFormatError, match=f"{NODES_GZ_FILE}: holds more than 1 MB uncompressed"):
            step(folder)
        assert sorted(p.name for p in folder.iterdir()) == [NODES_GZ_FILE, WORLD_FILE]
        assert (folder / NODES_GZ_FILE).read_bytes() == bomb


# -- the bomb through `dream-gym worlds download` -------------------------------------------------
def _dataset_archive(tmp_path: Path, world: Path, dataset_id: str = "me/bomb-v0") -> tuple[Path, str]:
    """A remote holding ``dataset_id`` as one .tar.gz with ``world`` as its world "w" and a
    dataset.json whose sha256s match (the bomb is not caught by a checksum)."""
    namespace, name = dataset_id.split("/")
    staging = tmp_path / "staging"
    (staging / "w").mkdir(parents=True)
    files = {}
    for source in sorted(world.iterdir()):
        (staging / "w" / source.name).write_bytes(source.read_bytes())
        files[f"w/{source.name}"] = hashlib.sha256(source.read_bytes()).hexdigest()
    meta = {"format": "dream-gym-dataset/1", "id": dataset_id, "world_format": "dream-gym-world/1",
            "worlds": [{"name": "w"}], "split": {"train": ["w"]}, "files": files}
    (staging / "dataset.json").write_text(json.dumps(meta))
    remote = tmp_path / "remote"
    (remote / namespace).mkdir(parents=True)
    make_archive(staging, remote / namespace / f"{name}.tar.gz")
    return remote, f"file://{remote}"


@pytest.fixture()
def store(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("DREAM_GYM_HOME", str(home))
    monkeypatch.setenv("DREAM_GYM_SHIPPED", str(tmp_path / "none"))
    return {"DREAM_GYM_HOME": str(home), "DREAM_GYM_SHIPPED": str(tmp_path / "none")}


@pytest.mark.slow
def test_worlds_download_of_a_bomb_archive_fails_in_one_line_in_little_memory_and_keeps_the_stored_copy(
        tmp_path, store):
    good = write_world(tmp_path / "good" / "w", _meta(id="w"), [json.loads(ROOT)])
    pack([good], "me/bomb-v0")  # the copy already in the store, which a failed --force must keep
    kept = {p.relative_to(local_path("me/bomb-v0")): p.read_bytes() for p in local_path("me/bomb-v0").rglob("*")
            if p.is_file()}
    world = _world(tmp_path / "bomb", padded_lines_bomb(), gz=True)
    _, remote = _dataset_archive(tmp_path, world)
    code, stderr, peak = _run_cli("worlds", "download", "me/bomb-v0", "--remote", remote, "--force", env=store)
    _assert_one_line_error(code, stderr, f"error: {remote[len('file://'):]}/me/bomb-v0.tar.gz: w/{NODES_GZ_FILE}: holds",
                           "256 MB", DECOMPRESSED_ENV, "download refused")
    assert peak < PEAK_MB, (peak, stderr)
    after = {p.relative_to(local_path("me/bomb-v0")): p.read_bytes() for p in local_path("me/bomb-v0").rglob("*")
             if p.is_file()}
    assert after == kept
    assert sorted(p.name for p in local_path("me/bomb-v0").parent.iterdir()) == ["bomb-v0"]  # no staging left
    assert validate("me/bomb-v0").worlds == {"w": 1}


def _tar_gz_with_member_claiming(tmp_path: Path, size: int, kind: bytes = tarfile.REGTYPE) -> Path:
    """A .tar.gz whose one member header claims ``size`` bytes, followed by that many zeros
    (concatenated gzip members: ~1 MB per GiB)."""
    info = tarfile.TarInfo("w/nodes.jsonl" if kind == tarfile.REGTYPE else "././@PaxHeader")
    info.size, info.type = size, kind
    header = info.tobuf(format=tarfile.GNU_FORMAT if kind == tarfile.REGTYPE else tarfile.USTAR_FORMAT)
    zeros = _gz(bytes(64 * MB)) * (size // (64 * MB))
    path = tmp_path / "remote" / "me" / "bomb-v0.tar.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(_gz(header) + zeros + _gz(bytes(1024)))
    return path


def test_an_archive_member_larger_than_the_limit_is_refused_from_its_header(tmp_path, store):
    archive = _tar_gz_with_member_claiming(tmp_path, 2 << 30)
    with pytest.raises(UnsafeArchiveError, match=f"{archive}: member 'w/nodes.jsonl' holds more than 256 MB"):
        check_members(archive)
    code, stderr, peak = _run_cli("worlds", "download", "me/bomb-v0", "--remote", f"file://{tmp_path / 'remote'}",
                                  env=store)
    _assert_one_line_error(code, stderr, str(archive), "w/nodes.jsonl", DECOMPRESSED_ENV)
    assert peak < PEAK_MB
    assert not local_path("me/bomb-v0").exists()


def test_an_archive_header_that_claims_a_gigabyte_of_its_own_data_is_refused_in_little_memory(tmp_path):
    """tarfile reads a pax header's data whole: the bounded stream refuses the read itself."""
    archive = _tar_gz_with_member_claiming(tmp_path, 1 << 30, tarfile.XHDTYPE)
    report = _run_python(f"""
        from dream_gym.datasets.archive import UnsafeArchiveError, check_members
        try:
            check_members({str(archive)!r})
            out = None
        except UnsafeArchiveError as exc:
            out = str(exc)
    """)
    assert report["out"] and str(archive) in report["out"] and "header too large" in report["out"]
    assert report["peak_mb"] < PEAK_MB, report


def test_an_archive_with_a_sparse_member_is_refused(tmp_path):
    info = tarfile.TarInfo("w/nodes.jsonl")
    info.type, info.size = tarfile.GNUTYPE_SPARSE, 0
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        tar.addfile(info, io.BytesIO(b""))
    archive = tmp_path / "sparse.tar.gz"
    archive.write_bytes(buffer.getvalue())
    with pytest.raises(UnsafeArchiveError, match="sparse file"):
        check_members(archive)


# -- nesting -------------------------------------------------------------------------------------
def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, 400, 100_000])  # +1 for the node object: one too deep
def test_deep_nesting_in_a_node_names_file_and_line(tmp_path, depth):
    line = f'{{"id": "a", "parent": "root", "score": 1, "metrics": {_nested(depth)}}}\n'.encode()
    for gz in (False, True):
        nodes = ROOT + line
        folder = _world(tmp_path / f"w{gz}", _gz(nodes) if gz else nodes, gz=gz)
        err = _load_error(folder)
        assert err.line == 2 and f"{NODES_GZ_FILE if gz else NODES_FILE}, line 2:" in str(err)
        assert f"nested deeper than {MAX_JSON_DEPTH} levels" in str(err)


def test_nesting_up_to_the_limit_loads(tmp_path):
    line = f'{{"id": "a", "parent": "root", "score": 1, "metrics": {_nested(MAX_JSON_DEPTH - 1)}}}\n'
    assert load_world(_world(tmp_path / "w", ROOT + line.encode())).size == 2


def test_deep_nesting_in_world_json_and_dataset_json_names_the_file(tmp_path, store):
    folder = _world(tmp_path / "w", ROOT)
    meta = json.loads((folder / WORLD_FILE).read_text())
    (folder / WORLD_FILE).write_text(json.dumps(meta)[:-1] + f', "extra": {_nested(100_000)}}}')
    err = _load_error(folder)
    assert err.path == str(folder / WORLD_FILE) and "nested deeper" in str(err)
    code, stderr, _ = _run_cli("worlds", "validate", str(folder), env=store)
    _assert_one_line_error(code, stderr, str(folder / WORLD_FILE), "nested deeper")

    good = write_world(tmp_path / "good" / "w", _meta(id="w"), [json.loads(ROOT)])
    card = pack([good], "me/deep-v0").path / "dataset.json"
    card.write_text(card.read_text().rstrip()[:-1] + f', "extra": {_nested(100_000)}}}')
    with pytest.raises(DatasetError, match="dataset.json: JSON nested deeper"):
        validate("me/deep-v0")
    code, stderr, _ = _run_cli("worlds", "validate", "me/deep-v0", env=store)
    _assert_one_line_error(code, stderr, str(card), "nested deeper")


# -- long lines ----------------------------------------------------------------------------------
def test_an_over_long_line_names_file_line_limit_and_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(LINE_ENV, "1")
    long_line = b'{"id": "b", "parent": "root", "score": 1, "code": "' + b"x" * (2 * MB) + b'"}\n'
    nodes = ROOT + b'{"id": "a", "parent": "root", "score": 1}\n' + long_line
    for gz in (False, True):
        folder = _world(tmp_path / f"w{gz}", _gz(nodes) if gz else nodes, gz=gz)
        err = _load_error(folder)
        assert err.line == 3, str(err)
        assert "longer than 1 MB" in str(err) and LINE_ENV in str(err)
    monkeypatch.setenv(LINE_ENV, "3")
    assert load_world(folder).size == 3


def test_a_line_just_under_the_limit_loads(tmp_path, monkeypatch):
    monkeypatch.setenv(LINE_ENV, "1")
    head = b'{"id": "b", "parent": "root", "score": 1, "code": "'
    line = head + b"x" * (MB - len(head) - 2) + b'"}'  # exactly 1 MiB without its newline
    assert len(line) == MB
    assert load_world(_world(tmp_path / "w", ROOT + line + b"\n")).size == 2
    err = _load_error(_world(tmp_path / "w2", ROOT + line[:-2] + b'x"}\n'))  # one byte more
    assert err.line == 2


def test_an_over_long_world_json_is_refused_without_reading_it_all(tmp_path, monkeypatch):
    monkeypatch.setenv(LINE_ENV, "1")
    folder = _world(tmp_path / "w", ROOT)
    meta = json.loads((folder / WORLD_FILE).read_text())
    meta["padding"] = "x" * (2 * MB)
    (folder / WORLD_FILE).write_text(json.dumps(meta))
    err = _load_error(folder)
    assert err.path == str(folder / WORLD_FILE) and "file longer than 1 MB" in str(err) and LINE_ENV in str(err)


def test_resuming_a_world_with_an_over_long_line_fails_and_changes_nothing(tmp_path, monkeypatch):
    folder = write_world(tmp_path / "w", new_meta("w", "t"), [json.loads(ROOT)])
    meta = json.loads((folder / WORLD_FILE).read_text())
    del meta["sha256"]  # an unfinished world, as a grow leaves it
    (folder / WORLD_FILE).write_text(json.dumps(meta))
    with open(folder / NODES_FILE, "ab") as handle:
        handle.write(b'{"id": "a", "parent": "root", "score": 1, "code": "' + b"x" * (2 * MB) + b'"}\n')
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    monkeypatch.setenv(LINE_ENV, "1")
    with pytest.raises(WorldFormatError, match="line 2: line longer than 1 MB"):
        WorldWriter.open(folder)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.name in before} == before


# -- absurd numbers ------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [10**12, MAX_WORKERS + 1, 0, -3, 1.5, 2.0, True, "4", None, [4]])
def test_absurd_workers_are_refused_naming_world_json_and_the_field(tmp_path, workers):
    folder = _world(tmp_path / "w", ROOT, workers=workers)
    err = _load_error(folder)
    assert err.path == str(folder / WORLD_FILE)
    assert f"'workers' must be an integer from 1 to {MAX_WORKERS}" in str(err)
    with pytest.raises(WorldFormatError, match="'workers'"):
        new_meta("w", "t", workers=workers)  # nor can a writer record it


@pytest.mark.parametrize("workers", [1, MAX_WORKERS])
def test_workers_at_the_bounds_load(tmp_path, workers):
    assert load_world(_world(tmp_path / "w", ROOT, workers=workers)).workers == workers


def test_workers_10_to_the_12_fail_in_one_line_from_the_cli(tmp_path, store):
    folder = _world(tmp_path / "w", ROOT, workers=10**12)
    for args in (("worlds", "validate", str(folder)), ("eval", "--policy", "greedy", "--worlds", str(folder))):
        code, stderr, peak = _run_cli(*args, env=store)
        _assert_one_line_error(code, stderr, str(folder / WORLD_FILE), "'workers'", "1000000000000")
        assert peak < PEAK_MB


@pytest.mark.parametrize("value", [10**12, MAX_ROUND + 1, -1, 1.5, True, "3"])
def test_absurd_round_numbers_are_refused_naming_file_line_and_field(tmp_path, value):
    line = json.dumps({"id": "a", "parent": "root", "score": 1, "round": value}).encode() + b"\n"
    err = _load_error(_world(tmp_path / "w", ROOT + line))
    assert err.line == 2 and "'round' must be an integer from 0" in str(err)


@pytest.mark.parametrize("value", [0, MAX_ROUND, None])
def test_round_numbers_within_bounds_load(tmp_path, value):
    line = json.dumps({"id": "a", "parent": "root", "score": 1, "round": value}).encode() + b"\n"
    assert load_world(_world(tmp_path / "w", ROOT + line)).size == 2


@pytest.mark.parametrize("nodes", [10**12, 0, -5, "2", 1.0, True])
def test_a_dataset_declaring_a_wrong_or_absurd_node_count_is_refused(tmp_path, store, nodes):
    good = write_world(tmp_path / "good" / "w", _meta(id="w"), [json.loads(ROOT)])
    card = pack([good], "me/count-v0").path / "dataset.json"
    meta = json.loads(card.read_text())
    meta["worlds"][0]["nodes"] = nodes
    card.write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match=f"{card}: world 'w'") as info:
        validate("me/count-v0")
    assert "'nodes' must be a positive integer" in str(info.value) or "declares" in str(info.value)


def test_the_registry_refuses_a_shipped_world_with_absurd_workers(tmp_path, monkeypatch):
    folder = _world(tmp_path / "shipped" / "bad-world", ROOT, workers=10**12)
    monkeypatch.setenv("DREAM_GYM_SHIPPED", str(folder.parent))
    with pytest.raises(WorldFormatError, match="'workers'"):
        resolve_world("bad-world")
