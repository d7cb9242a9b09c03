"""Dataset ids, the local store, dataset.json, pack/validate/delete and the shipped dataset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dream_gym.datasets import ids
from dream_gym.datasets.ids import DatasetId, DatasetIdError, parse_dataset_id, parse_world_ref
from dream_gym.datasets.packing import delete, pack
from dream_gym.datasets.store import (
    DATASET_FILE,
    DatasetError,
    DatasetNotFoundError,
    IncompatibleDatasetError,
    find_dataset,
    list_datasets,
    local_path,
    resolve_world_path,
    shipped_path,
    store_home,
    validate,
)
from dream_gym.world.tree import load_world
from dream_gym.world.writer import new_meta, write_world


def make_world(folder: Path, world_id: str, scores=(1.0, 2.0, None, 3.0)) -> Path:
    records = [{"id": "root", "parent": None, "score": scores[0], "code": "x = 0"}]
    for i, s in enumerate(scores[1:], start=1):
        rec = {"id": f"n{i}", "parent": "root" if i == 1 else f"n{i - 1}", "score": s, "round": i}
        if s is None:
            rec["error"] = "SyntaxError"
        records.append(rec)
    return write_world(folder, new_meta(world_id, "toy-task", "a toy"), records)


@pytest.fixture()
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("DREAM_GYM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DREAM_GYM_SHIPPED", str(tmp_path / "no-shipped-here"))
    return tmp_path


def test_id_grammar_accepts_minari_style_ids():
    did = parse_dataset_id("dream-gym/recorded-v0")
    assert did == DatasetId("dream-gym", "recorded", 0)
    assert str(did) == "dream-gym/recorded-v0"
    assert parse_dataset_id("me/my-data-v1-v12") == DatasetId("me", "my-data-v1", 12)
    assert parse_world_ref("ns/name-v3/cp26-s0") == (DatasetId("ns", "name", 3), "cp26-s0")
    assert ids.is_world_ref("ns/name-v3/w") and not ids.is_world_ref("ns/name-v3")


@pytest.mark.parametrize(
    "bad",
    ["recorded-v0", "ns/recorded", "ns/recorded-v", "ns/recorded-v01", "../x-v0", "ns/../x-v0",
     "ns/name-v0/extra", "/abs-v0", "ns/.hidden-v0", "ns/na me-v0", "", "ns/-v0"],
)
def test_bad_ids_are_refused_with_the_grammar(bad):
    with pytest.raises(DatasetIdError, match="namespace/name-vN"):
        parse_dataset_id(bad)


def test_bad_world_refs_are_refused():
    for bad in ("ns/name-v0", "ns/name-v0/..", "ns/name-v0/a/b", "ns/name/w"):
        with pytest.raises(DatasetIdError):
            parse_world_ref(bad)


def test_store_home_follows_env(store):
    assert store_home() == store / "home"
    assert local_path("a/b-v2") == store / "home" / "datasets" / "a" / "b-v2"


def test_pack_writes_dataset_json_and_resolves_worlds(store):
    a = make_world(store / "src" / "a", "world-a")
    b = make_world(store / "src" / "b", "world-b", scores=(5.0, 4.0))
    dataset = pack([a, b], "me/toy-v0", description="two toys", author="me", licence="CC-BY-4.0",
                   held_out=["world-b"])
    meta = json.loads((dataset.path / DATASET_FILE).read_text())
    assert meta["id"] == "me/toy-v0"
    assert meta["format"] == "dream-gym-dataset/1" and meta["world_format"] == "dream-gym-world/1"
    assert meta["split"] == {"train": ["world-a"], "held_out": ["world-b"]}
    assert set(meta["files"]) == {"world-a/world.json", "world-a/nodes.jsonl",
                                  "world-b/world.json", "world-b/nodes.jsonl"}
    assert [w["nodes"] for w in meta["worlds"]] == [4, 2]
    path = resolve_world_path("me/toy-v0/world-a")
    assert path == local_path("me/toy-v0") / "world-a"
    assert load_world(path).size == 4
    assert validate("me/toy-v0").worlds == {"world-a": 4, "world-b": 2}
    assert validate("me/toy-v0/world-b").worlds == {"world-b": 2}
    assert [d.id for d in list_datasets()] == ["me/toy-v0"]


def test_a_store_that_cannot_be_written_is_named_not_its_hidden_folder(store, monkeypatch):
    """A read-only store said ``Permission denied: '<store>/me/.new-v0._45qp99h'``, the name of a
    hidden folder the pack was about to make (``/sys`` refuses a new folder even to root)."""
    world = make_world(store / "src" / "a", "world-a")
    monkeypatch.setenv("DREAM_GYM_HOME", "/sys/dream_gym_store")
    with pytest.raises(PermissionError, match=r"^the dataset store /sys/dream_gym_store/datasets cannot be written "
                                              r"\(DREAM_GYM_HOME chooses where it is\); nothing was changed$"):
        pack([world], "me/new-v0")


def test_pack_refuses_existing_unknown_held_out_and_bad_worlds(store):
    a = make_world(store / "src" / "a", "world-a")
    pack([a], "me/toy-v0")
    with pytest.raises(FileExistsError, match="already exists"):
        pack([a], "me/toy-v0")
    pack([a], "me/toy-v0", overwrite=True, description="again")
    assert find_dataset("me/toy-v0").meta["description"] == "again"
    with pytest.raises(DatasetError, match="not among the packed worlds"):
        pack([a], "me/toy-v1", held_out=["nope"])
    with pytest.raises(DatasetError, match="same world id"):
        pack([a, a], "me/toy-v1")
    (store / "broken").mkdir()
    with pytest.raises(ValueError, match="missing"):
        pack([store / "broken"], "me/toy-v1")
    # one name is not a list of names a letter each ("w: is not a world folder", "e, v, o, x")
    with pytest.raises(TypeError, match="a list of world folders and a list of held-out world names"):
        pack(str(a), "me/toy-v1")
    with pytest.raises(TypeError, match="a list of held-out world names"):
        pack([a], "me/toy-v1", held_out="world-a")
    assert not local_path("me/toy-v1").exists()


def test_pack_refuses_the_id_of_a_shipped_dataset(store, monkeypatch):
    """The store's copy would shadow the shipped one in some places (the registered world ids)
    and not in others (the splits)."""
    monkeypatch.delenv("DREAM_GYM_SHIPPED")
    a = make_world(store / "src" / "a", "world-a")
    with pytest.raises(DatasetError, match="dream-gym/recorded-v1 is the id of a dataset dream_gym ships"):
        pack([a], "dream-gym/recorded-v1")
    assert not local_path("dream-gym/recorded-v1").exists()


def test_missing_dataset_message_says_how_to_download(store):
    with pytest.raises(DatasetNotFoundError) as info:
        resolve_world_path("someone/else-v0/w")
    message = str(info.value)
    assert "someone/else-v0" in message
    assert "dream-gym worlds download someone/else-v0 --remote" in message


def test_unknown_world_of_known_dataset_lists_the_worlds(store):
    pack([make_world(store / "src" / "a", "world-a")], "me/toy-v0")
    with pytest.raises(LookupError, match="world-a"):
        resolve_world_path("me/toy-v0/world-z")


def test_validate_names_the_tampered_file(store):
    dataset = pack([make_world(store / "src" / "a", "world-a")], "me/toy-v0")
    nodes = dataset.path / "world-a" / "nodes.jsonl"
    nodes.write_text(nodes.read_text().replace('"score": 3.0', '"score": 30.0'))
    with pytest.raises(DatasetError, match=r"world-a/nodes.jsonl: sha256 mismatch"):
        validate("me/toy-v0")


def test_validate_refuses_incompatible_format_version(store):
    dataset = pack([make_world(store / "src" / "a", "world-a")], "me/toy-v0")
    meta_path = dataset.path / DATASET_FILE
    meta = json.loads(meta_path.read_text())
    meta["format"] = "dream-gym-dataset/2"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(IncompatibleDatasetError, match="not compatible"):
        validate(dataset.path)
    meta["format"] = "dream-gym-dataset/1.3"  # a later minor version is fine
    meta["world_format"] = "dream-gym-world/9"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(IncompatibleDatasetError, match="dream-gym-world/9"):
        find_dataset("me/toy-v0")


def test_dataset_json_with_unsafe_file_names_is_refused(store):
    dataset = pack([make_world(store / "src" / "a", "world-a")], "me/toy-v0")
    meta_path = dataset.path / DATASET_FILE
    meta = json.loads(meta_path.read_text())
    meta["files"]["../../escape.txt"] = "0" * 64
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match="unsafe file name"):
        find_dataset("me/toy-v0")


def test_validate_a_single_world_folder(store):
    world = make_world(store / "src" / "a", "world-a")
    assert validate(world).kind == "world"
    (world / "nodes.jsonl").write_text('{"id": "root", "parent": null, "score": 1}\n{"bad"\n')
    with pytest.raises(ValueError, match="nodes.jsonl"):
        validate(world)


def test_delete(store):
    pack([make_world(store / "src" / "a", "world-a")], "me/toy-v0")
    delete("me/toy-v0")
    assert not local_path("me/toy-v0").exists()
    with pytest.raises(DatasetNotFoundError):
        delete("me/toy-v0")


def test_shipped_dataset_resolves_without_download(store, monkeypatch):
    shipped = store / "recorded_worlds"
    make_world(shipped / "src-a", "cp-a")
    # build the shipped folder the way the repo holds it: worlds + dataset.json at its top
    dataset = pack([shipped / "src-a"], "dream-gym/recorded-v0", description="shipped")
    for item in dataset.path.iterdir():
        item.rename(shipped / item.name)
    dataset.path.rmdir()  # the store keeps no copy: only the shipped folder has it
    monkeypatch.setenv("DREAM_GYM_SHIPPED", str(shipped))
    assert shipped_path() == shipped
    assert resolve_world_path("dream-gym/recorded-v0/cp-a") == shipped / "cp-a"
    assert validate("dream-gym/recorded-v0").worlds == {"cp-a": 4}
    listed = {d.id: d for d in list_datasets()}
    assert listed["dream-gym/recorded-v0"].shipped
    with pytest.raises(PermissionError, match="shipped"):
        delete("dream-gym/recorded-v0")


def test_repo_ships_recorded_v0_beside_the_default_dataset(monkeypatch):
    monkeypatch.delenv("DREAM_GYM_SHIPPED", raising=False)
    repo_shipped = Path(__file__).resolve().parents[1] / "recorded_worlds"
    v0 = find_dataset("dream-gym/recorded-v0")
    assert v0.shipped and v0.path == repo_shipped / "recorded-v0" and v0.world_names
    assert resolve_world_path(f"dream-gym/recorded-v0/{v0.world_names[0]}").is_dir()
    listed = {d.id: d for d in list_datasets()}
    assert listed["dream-gym/recorded-v0"].shipped
    if (repo_shipped / "recorded-v1" / DATASET_FILE).is_file():
        assert shipped_path() == repo_shipped / "recorded-v1"  # the default dataset
        assert listed["dream-gym/recorded-v1"].shipped


def test_several_shipped_datasets_default_to_v1_and_keep_their_ids(store, monkeypatch):
    import gymnasium as gym

    from dream_gym.envs.ids import register_envs
    from dream_gym.world.registry import list_worlds, shipped_env_ids

    shipped = store / "recorded_worlds"
    for version, world in ((0, "old-a"), (1, "new-a")):
        make_world(store / "src" / world, world)
        dataset = pack([store / "src" / world], f"dream-gym/recorded-v{version}")
        (shipped / f"recorded-v{version}").parent.mkdir(parents=True, exist_ok=True)
        dataset.path.rename(shipped / f"recorded-v{version}")
    monkeypatch.setenv("DREAM_GYM_SHIPPED", str(shipped))
    assert shipped_path() == shipped / "recorded-v1"
    assert shipped_path("dream-gym/recorded-v0") == shipped / "recorded-v0"
    assert [row["name"] for row in list_worlds()] == ["new-a", "old-a"]  # the default dataset first
    assert [row["name"] for row in list_worlds("dream-gym/recorded-v0")] == ["old-a"]
    assert shipped_env_ids() == {"DreamGym/new-a-v1": "new-a", "DreamGym/old-a-v0": "old-a"}
    register_envs()
    assert gym.make("DreamGym/old-a-v0").unwrapped.world.id == "old-a"
    assert gym.make("DreamGym/new-a-v1").unwrapped.world.id == "new-a"
    with pytest.raises(PermissionError, match="shipped"):
        delete("dream-gym/recorded-v0")


def test_gym_make_resolves_a_world_of_the_store(store):
    import gymnasium as gym

    import dream_gym  # noqa: F401  (registers DreamGym/Replay-v0)

    pack([make_world(store / "src" / "a", "world-a")], "me/toy-v0")
    env = gym.make("DreamGym/Replay-v0", world="me/toy-v0/world-a")
    env.reset(seed=0)
    env.close()
    with pytest.raises(LookupError, match="dream-gym worlds download me/missing-v0"):
        gym.make("DreamGym/Replay-v0", world="me/missing-v0/world-a")


def test_load_and_show_take_a_shipped_worlds_name_as_gym_make_does():
    # both said "is not a world folder (no such directory)"
    from dream_gym import datasets
    from dream_gym.world.registry import resolve_world

    assert datasets.load("cp26-fixed-w4-s0").id == resolve_world("cp26-fixed-w4-s0").id
    assert datasets.show("cp26-fixed-w4-s0").startswith("world cp26-fixed-w4-s0  (task circle-packing-26")
