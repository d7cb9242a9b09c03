"""benchmarks/rl_results.py's tables: a figure never averages in an episode that ended with an error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dream_gym.world_writer import new_meta, write_world

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "benchmarks"))

from rl_results import scored  # noqa: E402


def toy_world(folder: Path) -> Path:
    records = [{"id": "r", "parent": None, "score": 0.0}]
    records += [{"id": f"n{i}", "parent": "r" if i < 4 else f"n{i - 3}", "score": float(i % 5)} for i in range(1, 20)]
    return write_world(folder, new_meta("toy-bench", "toy", workers=2), records)


def test_a_table_refuses_results_with_errored_episodes_naming_one(tmp_path: Path) -> None:
    world = str(toy_world(tmp_path / "w"))
    board, results = scored(["greedy"], [world], jobs=1)  # clean results pass through
    assert not board.errors and len(results) == len({r.beta for r in results}) > 1
    with pytest.raises(RuntimeError, match=r"episodes ended with an error, e\.g\. .*raises\.py on toy-bench"):
        scored(["greedy", str(HERE / "hostile_policies" / "raises.py")], [world], jobs=1)
