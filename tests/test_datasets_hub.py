"""Datasets on the Hugging Face Hub: the real ``huggingface_hub`` client against tests/hub_server.py.

Nothing of huggingface_hub is replaced: the client speaks HTTP to a small Hub on 127.0.0.1
(``HF_ENDPOINT``), which counts commits and can corrupt a stored file or go away.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hub_server import HubServer

import dream_gym.datasets as ds
from dream_gym.cli import main
from dream_gym.datasets import hub as hub_module
from dream_gym.datasets.hub import repository as hub_repository
from dream_gym.datasets.packing import delete, pack
from dream_gym.datasets.store import (
    DATASET_FILE,
    DatasetError,
    DatasetNotFoundError,
    local_path,
)
from dream_gym.infrastructure.extras import install_command
from dream_gym.world.tree import load_world
from dream_gym.world.writer import compress_world, new_meta, write_world

ROOT = Path(__file__).resolve().parents[1]


def make_world(folder: Path, world_id: str, scores=(1.0, 2.0, 3.0), *, gz: bool = False) -> Path:
    records = [{"id": "root", "parent": None, "score": scores[0], "code": "x = 0"}]
    for i, score in enumerate(scores[1:], start=1):
        records.append({"id": f"n{i}", "parent": "root" if i == 1 else f"n{i - 1}", "score": score, "round": i})
    write_world(folder, new_meta(world_id, "toy-task", "a toy"), records)
    if gz:
        compress_world(folder)
    return folder


def pack_version(tmp: Path, version: int, worlds: tuple[str, ...] = ("world-a", "world-b"), **kwargs) -> None:
    folders = [make_world(tmp / f"src-v{version}" / w, w, gz=(i == 1)) for i, w in enumerate(worlds)]
    pack(folders, f"me/toy-v{version}", description=f"toy worlds, version {version}", licence="CC-BY-4.0",
         **kwargs)


@pytest.fixture()
def hub(tmp_path, monkeypatch):
    monkeypatch.setenv("DREAM_GYM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DREAM_GYM_SHIPPED", str(tmp_path / "none"))
    monkeypatch.delenv("DREAM_GYM_REMOTE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    # The server does not speak Xet. The client reads HF_HUB_DISABLE_XET once, at import, and may
    # have been imported already: set the value the variable gives (subprocesses get the variable).
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    server = HubServer().start()
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    yield server
    server.stop()


def front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("\n---\n", 1)[0][4:])


def test_upload_is_one_commit_with_the_card_at_the_repository_root(hub, tmp_path):
    pack_version(tmp_path, 0)
    local = local_path("me/toy-v0")
    listed = ds.find_dataset("me/toy-v0").meta["files"]
    result = hub_module.upload("me/toy-v0", "hf://me")
    assert result.location == "hf://datasets/me/toy/v0"
    commits = hub.commits_to("me/toy")
    assert len(commits) == 1  # every file, dataset.json and the card: one commit
    assert commits[0][3] == len(listed) + 2
    files = hub.files("me/toy")
    assert sorted(files) == sorted([".gitattributes", "README.md", "v0/dataset.json", *(f"v0/{r}" for r in listed)])
    for rel in listed:
        assert files[f"v0/{rel}"] == (local / rel).read_bytes()
    assert any(rel.endswith(".gz") for rel in listed) and hub.lfs_objects  # the .gz went through LFS
    card = files["README.md"].decode()
    meta = front_matter(card)
    assert meta["license"] == "cc-by-4.0"
    assert meta["pretty_name"] == "me/toy"
    assert meta["task_categories"] == ["reinforcement-learning"]
    assert meta["size_categories"] == ["n<1K"]
    assert {"dream-gym", "gymnasium", "toy-task"} <= set(meta["tags"])
    assert meta["dream_gym"]["latest"] == "me/toy-v0" and meta["dream_gym"]["versions"] == ["v0"]
    assert "toy worlds, version 0" in card and "dream-gym worlds download me/toy --remote hf://me" in card
    assert ("POST", "/api/validate-yaml") in hub.requests  # the client had the Hub check the front matter
    assert not any("xet" in path for _, path in hub.requests)  # plain LFS, never the Xet protocol
    assert "uploaded me/toy-v0 to hf://datasets/me/toy/v0 in 1 commit" in result.summary()

    with pytest.raises(FileExistsError, match="already holds dataset me/toy-v0"):
        hub_module.upload("me/toy-v0", "hf://me")
    assert len(hub.commits_to("me/toy")) == 1


def test_force_replaces_a_version_in_one_commit_and_drops_its_stale_files(hub, tmp_path):
    pack_version(tmp_path, 0)
    hub_module.upload("me/toy-v0", "hf://me")
    pack([make_world(tmp_path / "other" / "world-c", "world-c")], "me/toy-v0", overwrite=True)
    hub_module.upload("me/toy-v0", "hf://me", overwrite=True)
    assert len(hub.commits_to("me/toy")) == 2
    held = sorted(p for p in hub.files("me/toy") if p.startswith("v0/"))
    assert held == ["v0/dataset.json", "v0/world-c/nodes.jsonl", "v0/world-c/world.json"]


def test_round_trip_passes_the_checksum_checks(hub, tmp_path):
    hub.page_size = 2  # the client follows the tree listing's pages
    pack_version(tmp_path, 0)
    original = {p.relative_to(local_path("me/toy-v0")).as_posix(): p.read_bytes()
                for p in local_path("me/toy-v0").rglob("*") if p.is_file()}
    ds.upload("me/toy-v0", "hf://me")
    delete("me/toy-v0")
    dataset = ds.download("me/toy-v0", "hf://me")
    assert dataset.id == "me/toy-v0" and dataset.world_names == ["world-a", "world-b"]
    fetched = {p.relative_to(dataset.path).as_posix(): p.read_bytes() for p in dataset.path.rglob("*") if p.is_file()}
    assert fetched == original
    assert load_world(dataset.world_path("world-b")).size == 3
    assert ds.validate("me/toy-v0").worlds == {"world-a": 3, "world-b": 3}
    with pytest.raises(FileExistsError, match="already in the local store"):
        ds.download("me/toy-v0", "hf://me")


@pytest.mark.parametrize("rel", ["world-a/nodes.jsonl", "world-b/nodes.jsonl.gz", DATASET_FILE])
def test_a_tampered_file_on_the_hub_is_refused_and_the_store_is_untouched(hub, tmp_path, rel):
    pack_version(tmp_path, 0)
    ds.upload("me/toy-v0", "hf://me")
    delete("me/toy-v0")
    stored = hub.files("me/toy")[f"v0/{rel}"]
    if rel == DATASET_FILE:  # another id: dataset.json is checked before any world is fetched
        changed = stored.replace(b'"me/toy-v0"', b'"me/toy-v9"')
        message = r"hf://datasets/me/toy/v0/dataset.json: holds dataset 'me/toy-v9', not 'me/toy-v0'"
    else:  # same length: the client's size check passes, the sha256 check must catch it
        changed = stored[:-2] + bytes([stored[-2] ^ 1]) + stored[-1:]
        message = rf"hf://datasets/me/toy/v0/{rel}: sha256 mismatch .* download refused"
    assert len(changed) == len(stored) and changed != stored
    hub.tamper("me/toy", f"v0/{rel}", changed)
    with pytest.raises(DatasetError, match=message):
        ds.download("me/toy-v0", "hf://me")
    assert not local_path("me/toy-v0").exists()
    namespace = local_path("me/toy-v0").parent  # (gone, where the download made it)
    assert not namespace.exists() or not any(p.name.startswith(".download") for p in namespace.iterdir())


def test_the_newest_version_is_found_locally_and_at_the_remote(hub, tmp_path):
    pack_version(tmp_path, 1, ("world-a", "world-b", "world-c"))
    pack_version(tmp_path, 0)
    ds.upload("me/toy-v1", "hf://me")
    ds.upload("me/toy-v0", "hf://me")  # an older version after a newer one: the card stays on v1
    assert len(hub.commits_to("me/toy")) == 2
    meta = front_matter(hub.files("me/toy")["README.md"].decode())
    assert meta["dream_gym"]["latest"] == "me/toy-v1" and meta["dream_gym"]["versions"] == ["v0", "v1"]
    assert [(d.id, d.location, d.worlds) for d in ds.list_remote("hf://me")] == [
        ("me/toy-v0", "hf://datasets/me/toy/v0", 2), ("me/toy-v1", "hf://datasets/me/toy/v1", 3)]
    assert ds.latest_version(ds.DatasetName("me", "toy"), "hf://me") == 1

    delete("me/toy-v1")
    assert ds.load("me/toy").id == "me/toy-v0"  # the newest in the local store, no network
    fetches = len(hub.requests)
    dataset = ds.load("me/toy", download=True, remote="hf://me")  # the newest at the remote
    assert dataset.id == "me/toy-v1" and len(dataset.world_names) == 3
    assert any(path.endswith("/v1/world-c/world.json") for _, path in hub.requests[fetches:])
    assert not any("/resolve/" in path and "/v0/" in path for _, path in hub.requests[fetches:])  # one version
    fetches = len(hub.requests)
    assert ds.load("me/toy", download=True, remote="hf://me").id == "me/toy-v1"  # already here: not fetched
    assert not any("/resolve/" in path for _, path in hub.requests[fetches:])
    assert ds.load("me/toy-v1/world-c").size == 3

    delete("me/toy-v0")
    delete("me/toy-v1")
    assert main(["worlds", "download", "me/toy", "--remote", "hf://me"]) == 0
    assert ds.find_dataset("me/toy-v1").world_names == ["world-a", "world-b", "world-c"]
    with pytest.raises(DatasetNotFoundError, match="holds versions v0, v1"):
        ds.download("me/toy-v7", "hf://me")
    with pytest.raises(DatasetNotFoundError, match="no version of dataset me/none"):
        ds.load("me/none")


def test_the_default_remote_comes_from_dream_gym_remote(hub, tmp_path, monkeypatch, capsys):
    pack_version(tmp_path, 0)
    with pytest.raises(ds.RemoteError, match="no remote given.*DREAM_GYM_REMOTE"):
        ds.upload("me/toy-v0")
    assert main(["worlds", "download", "me/toy"]) == 2
    assert "no remote given" in capsys.readouterr().err
    monkeypatch.setenv("DREAM_GYM_REMOTE", "hf://me")
    assert main(["worlds", "upload", "me/toy-v0"]) == 0
    out = capsys.readouterr().out
    assert "uploaded me/toy-v0 to hf://datasets/me/toy/v0 in 1 commit" in out and "/commit/" in out
    assert main(["worlds", "list", "--remote"]) == 0
    assert "me/toy-v0" in capsys.readouterr().out
    delete("me/toy-v0")
    assert main(["worlds", "download", "me/toy"]) == 0
    assert "downloaded me/toy-v0, the newest version at hf://me (2 world(s), every sha256 verified)" in (
        capsys.readouterr().out)
    delete("me/toy-v0")
    assert ds.load("me/toy-v0/world-a", download=True).size == 3


@pytest.mark.slow
def test_without_network_the_cli_prints_one_line_and_the_api_names_remote_and_cause(hub, tmp_path):
    pack_version(tmp_path, 0)
    ds.upload("me/toy-v0", "hf://me")
    delete("me/toy-v0")
    endpoint = hub.endpoint
    hub.stop()  # the port now refuses connections
    with pytest.raises(ds.RemoteError) as caught:
        ds.load("me/toy-v0", download=True, remote="hf://me")
    message = str(caught.value)
    assert "\n" not in message and "hf://me" in message and endpoint in message
    assert "cannot reach" in message and "ConnectError" in message
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DREAM_GYM_REMOTE": "hf://me"}
    for argv in (["download", "me/toy", "--remote", "hf://me"], ["list", "--remote"], ["upload", "me/toy-v0"]):
        if argv[0] == "upload":
            pack_version(tmp_path / "again", 0)
        run = subprocess.run([sys.executable, "-m", "dream_gym", "worlds", *argv], capture_output=True, text=True,
                             env=env, timeout=120, cwd=tmp_path)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 2, run.stderr
        assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
        assert lines[0].startswith(f"dream-gym worlds {argv[0]}: error: ") and "cannot reach hf://me" in lines[0]
        assert endpoint in lines[0] and run.stdout == ""
        if argv[0] == "download":
            assert not local_path("me/toy-v0").exists()  # the store is untouched


def test_errors_of_the_hub_are_one_line(hub, tmp_path, monkeypatch):
    pack_version(tmp_path, 0)
    with pytest.raises(DatasetNotFoundError, match=r"no dataset repository me/toy at hf://me \(http"):
        ds.download("me/toy", "hf://me")
    with pytest.raises(ds.RemoteError, match="--archive is for fsspec remotes"):
        ds.upload("me/toy-v0", "hf://me", archive=True)
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(ds.RemoteError, match=r"not authenticated \(HTTP 401\): log in with `hf auth login`"):
        ds.upload("me/toy-v0", "hf://me")
    assert hub.commits == []
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    ds.upload("me/toy-v0", "hf://datasets/me/shared")
    pack([make_world(tmp_path / "x" / "w", "w")], "other/toy-v1")
    with pytest.raises(DatasetError, match="hf://datasets/me/shared holds dataset me/toy, not other/toy"):
        ds.upload("other/toy-v1", "hf://datasets/me/shared")
    assert len(hub.commits) == 1
    with pytest.raises(ds.RemoteError, match="bad Hugging Face remote"):
        ds.upload("me/toy-v0", "hf://a/b/c")


def test_an_id_without_its_version_means_the_newest_on_fsspec_remotes_too(hub, tmp_path, monkeypatch):
    pack_version(tmp_path, 0)
    pack_version(tmp_path, 2, ("world-a",))
    remote = f"file://{tmp_path / 'remote'}"
    ds.upload("me/toy-v0", remote)
    ds.upload("me/toy-v2", remote, archive=True)
    assert ds.latest_version(ds.DatasetName("me", "toy"), remote) == 2
    delete("me/toy-v2")
    assert ds.download("me/toy", remote).id == "me/toy-v2"
    monkeypatch.setenv("DREAM_GYM_REMOTE", remote)
    assert ds.load("me/toy", download=True).id == "me/toy-v2"
    assert hub.requests == []  # a file:// remote never reaches the Hub


def test_dataset_references():
    assert ds.parse_dataset_ref("me/toy") == ds.DatasetName("me", "toy")
    assert ds.parse_dataset_ref("me/toy-v3") == ds.DatasetId("me", "toy", 3)
    assert ds.parse_dataset_ref("me/my-data-v1-v12") == ds.DatasetId("me", "my-data-v1", 12)
    for bad in ("me", "me/toy-v01", "me/toy/extra", "me/-toy", ""):
        with pytest.raises(ds.DatasetIdError, match="namespace/name"):
            ds.parse_dataset_ref(bad)
    assert ds.is_dataset_ref("me/toy") and not ds.is_dataset_ref("me/toy-v01")


def test_a_commit_landed_meanwhile_makes_the_upload_fail_instead_of_overwriting(hub, tmp_path):
    pack_version(tmp_path, 0)
    hub.before_commit = lambda repo: hub.commit_directly(repo, "notes.txt", b"written meanwhile")
    with pytest.raises(ds.RemoteError, match=r"the repository changed while this upload was prepared \(HTTP 412\)"):
        ds.upload("me/toy-v0", "hf://me")
    assert hub.commits == [] and "v0/dataset.json" not in hub.files("me/toy")
    hub.before_commit = None
    ds.upload("me/toy-v0", "hf://me")
    assert len(hub.commits) == 1 and hub.files("me/toy")["notes.txt"] == b"written meanwhile"


@pytest.mark.parametrize("verb", [["upload", "me/mine-v0"], ["download", "me/mine-v0"], ["list"]])
def test_without_huggingface_hub_each_hub_verb_names_the_extra_in_one_line(verb: list[str], tmp_path: Path) -> None:
    # None in sys.modules makes every import of the package fail as an uninstalled one does
    code = ("import sys; sys.modules['huggingface_hub'] = None; from dream_gym.cli import main; "
            f"sys.exit(main(['worlds', *{verb!r}, '--remote', 'hf://me']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DREAM_GYM_HOME": str(tmp_path)})
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        f"dream-gym worlds {verb[0]}: error: hf:// remotes need huggingface_hub: {install_command('share')}"], done.stderr


def _endless(chunk: bytes = b"0" * (1 << 20)):
    while True:
        yield chunk


def _trickle():
    while True:
        yield b"0"
        time.sleep(0.2)


@pytest.mark.parametrize(("path", "body", "message"), [
    ("v0/world-a/nodes.jsonl", _endless, r"v0/world-a/nodes.jsonl: the server sent more than the [0-9,]+ bytes its "
                                         r"listing gives; download refused"),
    ("v0/dataset.json", _endless, r"v0/dataset.json: the server sent more than the [0-9,]+ bytes its listing gives"),
    ("v0/world-a/nodes.jsonl", _trickle, r"me/toy/v0/world-a/nodes.jsonl: [0-9,]+ of [0-9,]+ bytes came in the 1 s a file "
                                         r"of its size is given \(1 s, then 1,000,000 kB/s\); download refused"),
])
def test_a_server_that_sends_more_than_it_lists_or_trickles_is_cut_off(hub, tmp_path, monkeypatch, path, body,
                                                                       message):
    """A file listed at 100 bytes whose GET streamed without end wrote 2.1 GB in 25 s (the limit
    was checked on the listing only), and a byte every 5 s kept a download going for ever."""
    pack_version(tmp_path, 0)
    ds.upload("me/toy-v0", "hf://me")
    delete("me/toy-v0")
    hub.streams[path] = body
    monkeypatch.setattr(hub_repository, "GRACE_S", 1.0)
    monkeypatch.setattr(hub_repository, "MIN_BYTES_PER_S", 1_000_000_000)  # 1 s for the whole file: the trickle fails
    if body is _endless:
        monkeypatch.setattr(hub_repository, "GRACE_S", 600.0)
    with pytest.raises((DatasetError, ds.RemoteError), match=message):
        ds.download("me/toy-v0", "hf://me")
    assert not local_path("me/toy-v0").exists()
    assert not list(local_path("me/toy-v0").parent.glob(".download-*"))  # nothing left in the store


def test_a_listing_with_no_last_page_is_cut_off(hub, tmp_path, monkeypatch):
    """Every page of the repository's tree linking a next one made the download list for ever."""
    pack_version(tmp_path, 0)
    ds.upload("me/toy-v0", "hf://me")
    delete("me/toy-v0")
    monkeypatch.setattr(hub_repository, "MAX_LISTED", 3)
    with pytest.raises(DatasetError, match=r"the listing holds more than 3 entries \(limit\); refused"):
        ds.download("me/toy-v0", "hf://me")


def test_a_repository_name_the_client_refuses_is_one_unreadable_row_of_the_listing(hub, tmp_path):
    """One id in a namespace's listing that huggingface_hub refuses (the server's own text) made
    the whole listing fail; the namespace's other datasets were not shown."""
    from hub_server import Repo

    pack_version(tmp_path, 0)
    ds.upload("me/toy-v0", "hf://me")
    good = hub.repos["me/toy"]
    hub.repos["me/.."] = Repo("me/..", good.commits, good.main)
    rows = ds.list_remote("hf://me")
    assert [(row.id, row.location) for row in rows if row.id != "(unreadable)"] == [
        ("me/toy-v0", "hf://datasets/me/toy/v0")]
    [bad] = [row for row in rows if row.id == "(unreadable)"]
    assert bad.location == "me/.." and bad.description.startswith("error: Repo id must use alphanumeric chars")
