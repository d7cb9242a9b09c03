"""The extension points are registries: a new importer or RL architecture is one module and one
registry entry, and everything that offers a choice (import_run, --from auto, the CLI's choices,
model loading) follows the registry."""

from __future__ import annotations

from pathlib import Path

import pytest
from extensions.csv_tree import IMPORTER as CSV_TREE

from dream_gym.cli import build_parser
from dream_gym.datasets.importers import IMPORTERS, RunImportError, detect_system, import_run
from dream_gym.world.tree import load_world

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
    with pytest.raises(RunImportError, match="looks like an OpenEvolve run instead: import it with --from openevolve"):
        import_run("csv-tree", tmp_path / "oe", tmp_path / "w")


def test_without_its_registry_line_an_importer_is_unknown(tmp_path):
    run = tmp_path / "run.csv"
    run.write_text(CSV_RUN, encoding="utf-8")
    assert detect_system(run) is None
    with pytest.raises(RunImportError, match="unknown system 'csv-tree'; expected one of .*openevolve.* or auto$") as refused:
        import_run("csv-tree", run, tmp_path / "w")
    assert all(name in str(refused.value) for name in IMPORTERS)


# -- RL architectures ------------------------------------------------------------------------------
REPO = Path(__file__).resolve().parents[1]
OLD_ZIPS = {  # saved before models recorded their architecture: the shape rule reads them
    REPO / "agents" / "models" / "ppo-options.zip": "options",
    REPO / "agents" / "models" / "ppo-options-v.zip": "options",
    REPO / "agents" / "models" / "ppo-macro-v.zip": "macro",
    REPO / "tests" / "data" / "models" / "ppo-macro.zip": "macro",
    REPO / "tests" / "data" / "models" / "ppo-macro-v.zip": "macro",
    REPO / "tests" / "data" / "models" / "ppo-node-v.zip": "node",
}


@pytest.mark.parametrize("path", sorted(OLD_ZIPS), ids=lambda p: p.name)
def test_zips_without_a_recorded_architecture_fall_back_to_the_shape_rule(path):
    pytest.importorskip("sb3_contrib")
    from stable_baselines3.common.save_util import load_from_zip_file

    from dream_gym.rl.archs import ARCH_ATTRIBUTE, ARCHITECTURES, model_arch, model_policy
    from dream_gym.rl.sb3 import load_model

    data, _, _ = load_from_zip_file(path, device="cpu")
    assert ARCH_ATTRIBUTE not in data
    assert model_arch(load_model(path)) == OLD_ZIPS[path]
    assert type(model_policy(path)) is ARCHITECTURES[OLD_ZIPS[path]].policy


@pytest.mark.parametrize("arch", ["macro", "node", "options"])
def test_a_saved_model_records_its_architecture(arch, tmp_path):
    pytest.importorskip("sb3_contrib")
    from stable_baselines3.common.save_util import load_from_zip_file
    from worldgen import random_pool

    from dream_gym.rl.archs import ARCH_ATTRIBUTE, ARCHITECTURES, model_arch, model_policy
    from dream_gym.rl.sb3 import load_model
    from dream_gym.training.trainer import TrainConfig, make_env, make_model

    config = TrainConfig(arch=arch, n_envs=2, n_steps=8, batch_size=8, out=str(tmp_path))
    model = make_model(config, make_env(config, random_pool(0, 3)))
    model.save(tmp_path / "model.zip")
    data, _, _ = load_from_zip_file(tmp_path / "model.zip", device="cpu")
    assert data[ARCH_ATTRIBUTE] == arch
    loaded = load_model(tmp_path / "model.zip")
    assert model_arch(loaded) == arch and type(model_policy(loaded)) is ARCHITECTURES[arch].policy


def test_the_recorded_architecture_wins_over_the_shape(monkeypatch):
    pytest.importorskip("sb3_contrib")
    from dream_gym.rl.archs import ARCHITECTURES, Arch, model_policy, record_arch
    from dream_gym.rl.sb3 import SB3Policy, load_model

    class Wrapped(SB3Policy):
        """A macro policy under another architecture's name."""

    macro = ARCHITECTURES["macro"]
    monkeypatch.setitem(ARCHITECTURES, "macro-wrapped", Arch("a macro model, wrapped", macro.make_env, macro.network,
                                                             Wrapped, lambda model: False, macro.defaults))
    model = record_arch(load_model(REPO / "tests" / "data" / "models" / "ppo-macro.zip"), "macro-wrapped")
    assert type(model_policy(model)) is Wrapped
    record_arch(model, "no-such-arch")
    with pytest.raises(ValueError, match="records architecture 'no-such-arch', which this version does not know"):
        model_policy(model)
