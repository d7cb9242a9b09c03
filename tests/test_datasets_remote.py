"""Remotes through fsspec (file:// for real), sha256 verification, version checks, safe archives."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from dream_gym.datasets.archive import UnsafeArchiveError, check_members, make_archive, safe_extract
from dream_gym.datasets.fetched import RemoteError
from dream_gym.datasets.packing import delete, pack
from dream_gym.datasets.remote import download, list_remote, upload
from dream_gym.datasets.store import (
    DatasetError,
    DatasetNotFoundError,
    IncompatibleDatasetError,
    find_dataset,
    local_path,
    resolve_world_path,
)
from dream_gym.world.tree import load_world
from dream_gym.world.writer import new_meta, write_world


def make_world(folder: Path, world_id: str) -> Path:
    records = [{"id": "root", "parent": None, "score": 1.0},
               {"id": "n1", "parent": "root", "score": 2.0, "round": 1}]
    return write_world(folder, new_meta(world_id, "toy"), records)


@pytest.fixture()
def shared(tmp_path, monkeypatch):
    monkeypatch.setenv("DREAM_GYM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DREAM_GYM_SHIPPED", str(tmp_path / "none"))
    pack([make_world(tmp_path / "src" / "a", "world-a"), make_world(tmp_path / "src" / "b", "world-b")],
         "me/toy-v0", description="toy", readme=None)
    remote_dir = tmp_path / "remote"
    remote_dir.mkdir()
    return tmp_path, f"file://{remote_dir}"


def test_upload_list_delete_download_roundtrip(shared):
    tmp_path, remote = shared
    where = upload("me/toy-v0", remote)
    assert where.endswith("me/toy-v0")
    assert (tmp_path / "remote" / "me" / "toy-v0" / "dataset.json").is_file()
    assert [(d.id, d.kind, d.worlds) for d in list_remote(remote)] == [("me/toy-v0", "folder", 2)]
    with pytest.raises(FileExistsError):
        upload("me/toy-v0", remote)
    delete("me/toy-v0")
    with pytest.raises(DatasetNotFoundError, match="download"):
        resolve_world_path("me/toy-v0/world-a")
    dataset = download("me/toy-v0", remote)
    assert dataset.world_names == ["world-a", "world-b"]
    assert load_world(resolve_world_path("me/toy-v0/world-b")).size == 2
    with pytest.raises(FileExistsError, match="already in the local store"):
        download("me/toy-v0", remote)


def test_plain_path_remote_works_too(shared):
    tmp_path, _ = shared
    upload("me/toy-v0", str(tmp_path / "plain"))
    delete("me/toy-v0")
    assert download("me/toy-v0", str(tmp_path / "plain")).id == "me/toy-v0"


def test_tampered_remote_file_is_refused_and_named(shared):
    tmp_path, remote = shared
    upload("me/toy-v0", remote)
    delete("me/toy-v0")
    nodes = tmp_path / "remote" / "me" / "toy-v0" / "world-b" / "nodes.jsonl"
    nodes.write_text(nodes.read_text().replace("2.0", "9.0"))
    with pytest.raises(DatasetError, match=r"world-b/nodes.jsonl: sha256 mismatch.*refused"):
        download("me/toy-v0", remote)
    assert not local_path("me/toy-v0").exists()
    namespace = local_path("me/toy-v0").parent  # (gone, where the download made it)
    assert not namespace.exists() or not any(p.name.startswith(".download") for p in namespace.iterdir())
    nodes.unlink()  # a listed file gone: it said only the file's path
    with pytest.raises(RemoteError, match=r"world-b/nodes.jsonl: listed in dataset.json but missing at the remote; "
                                          r"download refused"):
        download("me/toy-v0", remote)
    assert not local_path("me/toy-v0").exists()


def test_incompatible_remote_version_is_refused_before_download(shared):
    tmp_path, remote = shared
    upload("me/toy-v0", remote)
    delete("me/toy-v0")
    meta_path = tmp_path / "remote" / "me" / "toy-v0" / "dataset.json"
    meta = json.loads(meta_path.read_text())
    meta["format"] = "dream-gym-dataset/2.0"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(IncompatibleDatasetError, match="not compatible"):
        download("me/toy-v0", remote)
    assert not local_path("me/toy-v0").exists()


def test_missing_remote_dataset(shared):
    _, remote = shared
    with pytest.raises(DatasetNotFoundError, match="not at remote"):
        download("me/other-v0", remote)


def test_archive_upload_and_download(shared):
    tmp_path, remote = shared
    where = upload("me/toy-v0", remote, archive=True)
    assert where.endswith("me/toy-v0.tar.gz")
    assert [(d.id, d.kind) for d in list_remote(remote)] == [("me/toy-v0", "archive")]
    # one version is one copy: the other form is refused, and --force replaces the copy
    with pytest.raises(FileExistsError, match="already holds me/toy-v0 as an archive"):
        upload("me/toy-v0", remote)
    upload("me/toy-v0", remote, overwrite=True)
    assert [(d.id, d.kind) for d in list_remote(remote)] == [("me/toy-v0", "folder")]
    with pytest.raises(FileExistsError, match="already holds me/toy-v0 as a folder"):
        upload("me/toy-v0", remote, archive=True)
    upload("me/toy-v0", remote, archive=True, overwrite=True)
    assert [(d.id, d.kind) for d in list_remote(remote)] == [("me/toy-v0", "archive")]
    delete("me/toy-v0")
    assert download("me/toy-v0", remote).world_names == ["world-a", "world-b"]
    with pytest.raises(RemoteError, match="no such folder"):  # a mistyped path is not an empty remote
        list_remote(str(tmp_path / "no-such-remote"))
    for dataset in ("me/toy-v0", "me/toy"):  # nor a remote without the dataset
        with pytest.raises(RemoteError, match="no-such-remote: no such folder"):
            download(dataset, str(tmp_path / "no-such-remote"), overwrite=True)
    (tmp_path / "a-file").write_text("")
    with pytest.raises(RemoteError, match="a-file: not a folder"):
        list_remote(str(tmp_path / "a-file"))


def test_tampered_archive_member_is_named(shared):
    tmp_path, remote = shared
    source = local_path("me/toy-v0")
    (source / "world-a" / "nodes.jsonl").write_text(
        (source / "world-a" / "nodes.jsonl").read_text().replace("2.0", "7.0")
    )
    bad = tmp_path / "remote" / "me" / "toy-v0.tar.gz"
    bad.parent.mkdir(parents=True)
    make_archive(source, bad)  # dataset.json inside still has the old digests
    delete("me/toy-v0")
    with pytest.raises(DatasetError, match=r"world-a/nodes.jsonl: sha256 mismatch") as refused:
        download("me/toy-v0", remote)
    # named inside the archive: the staging folder it was unpacked into is gone
    assert str(refused.value).startswith(f"{bad}: world-a/nodes.jsonl: sha256 mismatch")
    assert ".download-" not in str(refused.value)


def test_upload_refuses_a_corrupt_local_dataset(shared):
    _, remote = shared
    nodes = local_path("me/toy-v0") / "world-a" / "nodes.jsonl"
    nodes.write_bytes(nodes.read_bytes().replace(b"2.0", b"3.0"))
    with pytest.raises(DatasetError, match="world-a/nodes.jsonl"):
        upload("me/toy-v0", remote)


def _tar_with(tmp_path: Path, add) -> Path:
    path = tmp_path / "evil.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        add(tar)
    return path


def _file(tar: tarfile.TarFile, name: str, data: bytes = b"x") -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda t: _file(t, "/etc/evil"), "absolute path"),
        (lambda t: _file(t, "ok/../../evil"), r"'\.\.'"),
        (lambda t: t.addfile(_link("link", tarfile.SYMTYPE, "/etc/passwd")), "is a link"),
        (lambda t: t.addfile(_link("hard", tarfile.LNKTYPE, "dataset.json")), "is a link"),
        (lambda t: t.addfile(_link("dev", tarfile.CHRTYPE, "")), "device or special"),
        (lambda t: t.addfile(_link("fifo", tarfile.FIFOTYPE, "")), "device or special"),
    ],
)
def test_unsafe_archive_members_are_refused(tmp_path, build, message):
    archive = _tar_with(tmp_path, build)
    dest = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError, match=message):
        safe_extract(archive, dest)
    assert not dest.exists()  # nothing written before every member was checked


def _link(name: str, kind: bytes, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def test_archive_size_and_count_limits(tmp_path):
    def many(tar):
        for i in range(5):
            _file(tar, f"f{i}", b"0123456789")

    archive = _tar_with(tmp_path, many)
    assert len(check_members(archive)) == 5
    with pytest.raises(UnsafeArchiveError, match="more than 3 members"):
        safe_extract(archive, tmp_path / "a", max_files=3)
    with pytest.raises(UnsafeArchiveError, match="more than 25 bytes"):
        safe_extract(archive, tmp_path / "b", max_bytes=25)
    written = safe_extract(archive, tmp_path / "c")
    assert sorted(p.name for p in written) == [f"f{i}" for i in range(5)]


def test_not_an_archive(tmp_path):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tar")
    with pytest.raises(UnsafeArchiveError, match="not a readable tar"):
        safe_extract(junk, tmp_path / "x")


def test_hf_remote_maps_to_huggingface_filesystem_without_network():
    from dream_gym.datasets.remote import _filesystem

    fs, root = _filesystem("hf://datasets/someone/dream-gym-worlds")
    assert type(fs).__name__ == "HfFileSystem"
    assert root == "datasets/someone/dream-gym-worlds"


def test_unknown_protocol_is_a_clear_error():
    from dream_gym.datasets.remote import RemoteError, _filesystem

    with pytest.raises(RemoteError, match="cannot open remote"):
        _filesystem("nosuchproto://x/y")


def test_incompatible_world_format_inside_a_dataset_is_refused(shared):
    tmp_path, remote = shared
    source = local_path("me/toy-v0")
    world_json = source / "world-a" / "world.json"
    meta = json.loads(world_json.read_text())
    meta["format"] = "dream-gym-world/2"
    world_json.write_text(json.dumps(meta))
    from dream_gym.datasets.packing import file_digests
    from dream_gym.datasets.store import DATASET_FILE

    dataset_meta = json.loads((source / DATASET_FILE).read_text())
    dataset_meta["files"] = file_digests(source)  # a consistent dataset of a future world format
    (source / DATASET_FILE).write_text(json.dumps(dataset_meta))
    upload("me/toy-v0", remote)
    delete("me/toy-v0")
    with pytest.raises(ValueError, match="unknown major format version"):
        download("me/toy-v0", remote)
    assert not local_path("me/toy-v0").exists()


def test_a_local_remotes_links_fifos_and_oversized_archives_are_refused_before_they_are_read(shared, monkeypatch):
    """A link in a file:// remote read a file from outside it (its sha256 then printed), a FIFO as
    dataset.json hung download and list, and an archive was fetched whole before its size mattered."""
    import os
    import shutil

    tmp_path, remote = shared
    upload("me/toy-v0", remote)
    delete("me/toy-v0")
    folder = tmp_path / "remote" / "me" / "toy-v0"
    world_json = folder / "world-a" / "world.json"
    outside = tmp_path / "outside.json"
    shutil.copy(world_json, outside)
    world_json.unlink()
    world_json.symlink_to(outside)
    with pytest.raises(DatasetError, match="world-a/world.json is a symbolic link, not a regular file"):
        download("me/toy-v0", remote)
    (folder / "dataset.json").unlink()
    os.mkfifo(folder / "dataset.json")
    with pytest.raises(DatasetError, match="dataset.json is a FIFO, not a regular file"):
        download("me/toy-v0", remote)
    assert [d.description.startswith("error:") and "is a FIFO" in d.description for d in list_remote(remote)] == [True]
    archive = tmp_path / "remote" / "me" / "big-v0.tar.gz"
    archive.write_bytes(os.urandom(2 << 20))
    monkeypatch.setenv("DREAM_GYM_MAX_DECOMPRESSED_MB", "1")
    with pytest.raises(DatasetError, match="big-v0.tar.gz: holds 2097152 bytes, more than 1 MB"):
        download("me/big-v0", remote)


def test_an_archive_holds_only_the_listed_files_and_a_forced_folder_upload_leaves_no_old_world(shared):
    """A file in the store beside the dataset's own (a README, a build script) went into the
    archive, whose download then refused it; a forced folder upload of a new version of the same
    id left the old version's worlds beside the new ones."""
    tmp_path, remote = shared
    store = find_dataset("me/toy-v0").path
    (store / "notes.txt").write_text("mine, not the dataset's")
    upload("me/toy-v0", remote, archive=True)
    delete("me/toy-v0")
    assert download("me/toy-v0", remote).world_names == ["world-a", "world-b"]
    upload("me/toy-v0", remote, overwrite=True)  # as a folder
    pack([make_world(tmp_path / "src" / "c", "world-c")], "me/toy-v0", description="toy", readme=None,
         overwrite=True)
    upload("me/toy-v0", remote, overwrite=True)
    held = sorted(p.relative_to(tmp_path / "remote" / "me" / "toy-v0").parts[0]
                  for p in (tmp_path / "remote" / "me" / "toy-v0").rglob("*") if p.is_file())
    assert set(held) == {"dataset.json", "world-c"}


def test_a_readme_that_is_no_regular_file_or_too_large_is_refused_before_packing(tmp_path, monkeypatch):
    """``--readme /dev/zero`` was copied without end (a CPU at 100 %, a file growing)."""
    from dream_gym.datasets.store import DatasetError, local_path

    monkeypatch.setenv("DREAM_GYM_HOME", str(tmp_path / "home"))
    world = make_world(tmp_path / "src" / "a", "world-a")
    big = tmp_path / "big.md"
    big.write_bytes(b"x" * ((1 << 20) + 1))
    for readme, said in (("/dev/zero", "not a regular file"), (tmp_path / "missing.md", "not a regular file"),
                         (big, "1,048,577 bytes; a README holds at most 1,048,576")):
        with pytest.raises(DatasetError, match=said):
            pack([world], "me/toy-v1", description="toy", readme=readme)
    from dream_gym.datasets.ids import parse_dataset_id

    assert not local_path(parse_dataset_id("me/toy-v1")).exists()


def test_a_version_dream_gym_ships_is_not_downloaded_over_it(tmp_path, monkeypatch):
    """An adversary's remote served its own dream-gym/recorded-v1 (one world, scored 99): the copy
    shadowed the shipped dataset in some commands (worlds validate, the dataset's world refs) and
    not in others (a world's bare name, the splits)."""
    import shutil

    from dream_gym.datasets.store import shipped_path

    monkeypatch.setenv("DREAM_GYM_HOME", str(tmp_path / "home"))
    shipped = shipped_path("dream-gym/recorded-v1")
    assert shipped is not None
    remote = tmp_path / "remote"
    shutil.copytree(shipped, remote / "dream-gym" / "recorded-v1")
    for ref in ("dream-gym/recorded-v1", "dream-gym/recorded"):
        with pytest.raises(DatasetError, match=r"dream-gym/recorded-v1 is a dataset dream_gym ships: it is installed "
                                               r"already, and a downloaded copy under its id would shadow it"):
            download(ref, str(remote))
    assert not (tmp_path / "home").exists() or not list((tmp_path / "home").rglob("dataset.json"))


def test_a_file_reached_through_a_linked_folder_inside_the_dataset_is_refused(shared):
    """A linked folder inside the dataset (``sub -> /proc/self``) passed the check of the last
    component: the user's /proc/self/environ was fetched and its sha256 printed."""
    import hashlib
    import json as _json
    import os as _os

    tmp_path, remote = shared
    folder = tmp_path / "remote" / "me" / "toy-v0"
    upload("me/toy-v0", remote)
    delete("me/toy-v0")
    _os.symlink("/proc/self", folder / "sub")
    meta = _json.loads((folder / "dataset.json").read_text())
    meta["files"]["sub/environ"] = hashlib.sha256(b"").hexdigest()
    (folder / "dataset.json").write_text(_json.dumps(meta))
    with pytest.raises(DatasetError, match=r"sub/environ: reached through a link inside the dataset") as refused:
        download("me/toy-v0", remote)
    assert "sha256" not in str(refused.value)


def test_an_archive_member_dataset_json_does_not_list_is_refused_before_any_world_is_written(shared):
    """An archive of 4 MB unpacked 4.2 GB (members dataset.json does not list) before the refusal,
    which its member list already allowed."""
    import fsspec

    from dream_gym.datasets import remote as remote_module
    from dream_gym.datasets.archive import make_archive

    tmp_path, _ = shared
    store = find_dataset("me/toy-v0").path
    (store / "junk.bin").write_bytes(b"\0" * (1 << 20))
    names = [*find_dataset("me/toy-v0").meta["files"], "dataset.json", "junk.bin"]
    archive = make_archive(store, tmp_path / "toy-v0.tar.gz", names)
    staging = tmp_path / "staging"
    with pytest.raises(DatasetError, match=r"toy-v0.tar.gz: holds files not listed in dataset.json: junk.bin"):
        remote_module._download_archive(fsspec.filesystem("file"), str(archive), staging, "me/toy-v0")
    assert [p.name for p in staging.rglob("*") if p.is_file()] == ["dataset.json"]  # no world, no junk
