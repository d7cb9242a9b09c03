"""The RL experiments' tables and shipping step (experiments.rl): a figure never averages in an
episode that ended with an error; shipping copies the right seeds and keeps the card's other lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import experiments.rl.ship as rl_ship
from dream_gym.world.writer import new_meta, write_world
from experiments.rl.results import scored

HERE = Path(__file__).resolve().parent


def toy_world(folder: Path) -> Path:
    records = [{"id": "r", "parent": None, "score": 0.0}]
    records += [{"id": f"n{i}", "parent": "r" if i < 4 else f"n{i - 3}", "score": float(i % 5)} for i in range(1, 20)]
    return write_world(folder, new_meta("toy-bench", "toy", workers=2), records)


@pytest.mark.slow
def test_a_table_refuses_results_with_errored_episodes_naming_one(tmp_path: Path) -> None:
    world = str(toy_world(tmp_path / "w"))
    board, results = scored(["greedy"], [world], jobs=1)  # clean results pass through
    assert not board.errors and len(results) == len({r.beta for r in results}) > 1
    with pytest.raises(RuntimeError, match=r"episodes ended with an error, e\.g\. .*raises\.py on toy-bench"):
        scored(["greedy", str(HERE / "hostile_policies" / "raises.py")], [world], jobs=1)


def fake_runs(folder: Path, kind: str, seeds: list[int]) -> dict[int, dict[str, object]]:
    runs: dict[int, dict[str, object]] = {}
    for seed in seeds:
        (folder / f"{kind}-s{seed}").mkdir(parents=True)
        (folder / f"{kind}-s{seed}" / "model.zip").write_text(f"seed {seed}")
        runs[seed] = {"final": {"train_v2": seed / 10, "train_mean_v": 0.5}, "seconds": 9.0,
                      "command": f"dream-gym train --arch node --seed {seed} --out out/{kind}-s{seed} --x 1"}
    return runs


def test_an_ensemble_kind_ships_its_first_groups_members_under_the_shipped_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(rl_ship.SHIPPED_MODELS, "ppo-node", "a.zip+b.zip")
    runs, target = fake_runs(tmp_path, "node", [3, 4, 5, 6]), tmp_path / "models"
    target.mkdir()
    line = rl_ship.ship("node", runs, tmp_path, target, [[3, 4], [5, 6]])
    assert (target / "a.zip").read_text() == "seed 3" and (target / "b.zip").read_text() == "seed 4"
    assert "--seed S --out out/node-sS --x 1" in line and "seeds [3, 4]" in line
    with pytest.raises(ValueError, match="ships 2 members .*pass --ensemble node"):
        rl_ship.ship("node", runs, tmp_path, target, None)
    with pytest.raises(ValueError, match="names 2 files for ppo-node, the first group has 3"):
        rl_ship.ship("node", runs, tmp_path, target, [[3, 4, 5]])


def test_a_single_model_kind_ships_its_best_train_pool_seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(rl_ship.SHIPPED_MODELS, "ppo-node", "one.zip")
    target = tmp_path / "models"
    target.mkdir()
    rl_ship.ship("node", fake_runs(tmp_path, "node", [0, 2, 1]), tmp_path, target, None)
    assert (target / "one.zip").read_text() == "seed 2"  # the best train-pool v2, never a held-out figure


def test_shipping_some_kinds_keeps_the_other_kinds_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    for name, files in (("ppo-macro", "ppo-macro.zip"), ("ppo-node", "ppo-node-1.zip+ppo-node-2.zip"),
                        ("ppo-node-v", "ppo-node-v.zip")):  # kinds shipped before the recommended experiment
        monkeypatch.setitem(rl_ship.SHIPPED_MODELS, name, files)

    readme = tmp_path / "README.md"
    readme.write_text("# Shipped models\n\nintro\n\n- `ppo-macro.zip`: seed 0 (macro)\n"
                      "- `ppo-node-1.zip`, `ppo-node-2.zip`: the ensemble (node)\n- `ppo-node-v.zip`: seed 3 (node v)\n")
    lines = rl_ship.kept_lines(readme)
    assert lines == {"ppo-macro": "- `ppo-macro.zip`: seed 0 (macro)",
                     "ppo-node": "- `ppo-node-1.zip`, `ppo-node-2.zip`: the ensemble (node)",
                     "ppo-node-v": "- `ppo-node-v.zip`: seed 3 (node v)"}
    assert rl_ship.kept_lines(tmp_path / "missing.md") == {}


def test_the_ship_command_copies_the_best_seed_and_writes_the_model_card(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(rl_ship.SHIPPED_MODELS, "ppo-node", "one.zip")
    runs = fake_runs(tmp_path / "runs", "node", [0, 1])
    for seed, summary in runs.items():  # finished runs: nothing is trained
        (tmp_path / "runs" / f"node-s{seed}" / "summary.json").write_text(json.dumps(summary))
    models = tmp_path / "models"
    assert rl_ship.main(["--kinds", "node", "--seeds", "0,1", "--out", str(tmp_path / "runs"),
                         "--models", str(models)]) == 0
    assert (models / "one.zip").read_text() == "seed 1"
    card = (models / "README.md").read_text()
    assert card.startswith("# Shipped models\n") and "`--policy ppo-node`" in card
    assert "- `one.zip`: seed 1 of [0, 1], `dream-gym train --arch node --seed 1 " in card


def test_ensemble_groups_parse_and_refuse_one_seed_groups() -> None:
    from experiments.rl.results import seed_groups

    assert seed_groups("0-4,5-9") == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    with pytest.raises(ValueError, match="two or more seeds, got '7'"):
        seed_groups("0-4,7")


def test_an_ensemble_row_is_set_against_the_mean_of_its_members_alone() -> None:
    from types import SimpleNamespace

    from experiments.rl.results import members_lines

    rows = {name: SimpleNamespace(v2=v2, mean_v=v2 / 2) for name, v2 in
            {"a.zip": 0.5, "b.zip": 0.7, "c.zip": 0.2, "d.zip": 0.4, "a.zip+b.zip": 0.9, "c.zip+d.zip": 0.1}.items()}
    lines = members_lines({"node": ["a.zip", "b.zip"], "node ×2": ["a.zip+b.zip", "c.zip+d.zip"]}, rows)
    assert lines == [
        "- ppo-node ×2, members a.zip, b.zip: members' mean v2 0.6000, mean V 0.3000 -> ensemble v2 0.9000, mean V 0.4500",
        "- ppo-node ×2, members c.zip, d.zip: members' mean v2 0.3000, mean V 0.1500 -> ensemble v2 0.1000, mean V 0.0500",
        "- ppo-node ×2: all 4 members alone: v2 0.4500 ± 0.2082, mean V 0.2250 ± 0.1041",
    ]


def test_a_kind_row_is_followed_by_each_seeds_scores_in_seed_order() -> None:
    from types import SimpleNamespace

    from experiments.rl.results import seed_lines

    rows = {"s0.zip": SimpleNamespace(v2=0.7, mean_v=0.5), "s1.zip": SimpleNamespace(v2=0.6, mean_v=0.55)}
    assert seed_lines({"options-long": ["s0.zip", "s1.zip"]}, rows) == [
        "- ppo-options-long per seed: v2 0.7000, 0.6000; mean V 0.5000, 0.5500"]


def test_a_kind_names_its_arch_and_objective_and_unknown_kinds_are_refused() -> None:
    from experiments.rl.results import OPTIONS, kind_options, train_command

    assert kind_options("node") == ("node", [])
    assert kind_options("macro-v") == ("macro", ["--objective", "v"])
    assert kind_options("options-long") == ("options", [])  # v2; its price comes from OPTIONS
    command = train_command("options-long", 3, Path("o"), 10, OPTIONS["options-long"])
    assert command[command.index("--price-low") + 1] == "0.1" and "--objective" not in command
    for bad in ("node-long", "macro-x", "tree", "options-"):
        with pytest.raises(ValueError, match="unknown model kind"):
            kind_options(bad)


def test_the_price_choice_can_score_one_pools_check_half_and_train_on_the_rest(tmp_path: Path) -> None:
    from dream_gym.evaluation.evaluate import resolve_worlds
    from experiments.rl.price_range import inner_split, parts

    for task, seeds in (("aa", 4), ("bb", 2)):
        for seed in range(seeds):
            write_world(tmp_path / f"{task}-w{seed}", new_meta(f"{task}-w{seed}", task, workers=2),
                        [{"id": "r", "parent": None, "score": 0.0}, {"id": "a", "parent": "r", "score": 1.0}])
    pool = resolve_worlds(str(tmp_path))
    long_ones = [w for w in pool if w.id in ("aa-w0", "aa-w1", "bb-w0", "bb-w1")]
    fit, check = parts(pool, long_ones)
    assert [w.id for w in check] == ["aa-w1", "bb-w1"]  # the check half of the inner split of `within`
    assert [w.id for w in fit] == ["aa-w0", "aa-w2", "aa-w3", "bb-w0"]  # every other world of the pool
    assert parts(pool, None) == inner_split(pool)
