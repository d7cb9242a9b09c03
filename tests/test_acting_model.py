"""A model loaded to act (dream_gym.rl.acting_model): the policies of trained models load their
zips without building an optimizer, act exactly as a model loaded to train, save what the zip
held, refuse to train, and spare a process the import of torch._dynamo."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_evaluate import make_world
from tests.test_model_zips import SHIPPED, assert_acts_alike

pytest.importorskip("sb3_contrib")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_world(tmp_path_factory.mktemp("acting-world") / "w0", 30, 0)


def same_state(mine: object, theirs: object) -> bool:
    """Nested optimizer or module state, tensors compared by value."""
    import torch

    if isinstance(mine, torch.Tensor):
        return isinstance(theirs, torch.Tensor) and torch.equal(mine, theirs)
    if isinstance(mine, dict):
        return isinstance(theirs, dict) and mine.keys() == theirs.keys() and all(
            same_state(mine[k], theirs[k]) for k in mine)
    if isinstance(mine, (list, tuple)):
        return type(mine) is type(theirs) and len(mine) == len(theirs) and all(map(same_state, mine, theirs))
    return mine == theirs


# every zip as data; trusted (the old loader, the same optimizer stand-in) once, on the node model
CASES = [*((path, False) for path in SHIPPED), next((path, True) for path in SHIPPED if path.stem == "cv-node-v")]


@pytest.mark.parametrize(("path", "trust"), CASES, ids=lambda case: case.name if isinstance(case, Path) else
                         ("trusted" if case else "as-data"))
def test_a_model_loaded_to_act_acts_as_one_loaded_to_train_and_saves_what_its_zip_held(
        path: Path, trust: bool, world: Path, tmp_path: Path) -> None:
    import torch

    from dream_gym.rl.acting_model import SavedOptimizerState
    from dream_gym.rl.model_zips import load_model_zip

    acting = load_model_zip(path, trust=trust, to_act=True)
    training = load_model_zip(path, trust=trust)
    assert isinstance(acting.policy.optimizer, SavedOptimizerState)
    assert isinstance(training.policy.optimizer, torch.optim.Adam)  # the control: SB3 builds one
    assert same_state(acting.policy.state_dict(), training.policy.state_dict())
    assert same_state(acting.policy.optimizer.state_dict(), training.policy.optimizer.state_dict())
    assert acting.policy_kwargs == training.policy_kwargs and acting.policy.optimizer_class is torch.optim.Adam
    assert_acts_alike(acting, training, world)
    # saved again, it is the zip it came from: the same weights, optimizer state and arguments
    acting.save(tmp_path / "again.zip")
    again = load_model_zip(tmp_path / "again.zip", trust=trust)
    assert same_state(again.policy.state_dict(), training.policy.state_dict())
    assert same_state(again.policy.optimizer.state_dict(), training.policy.optimizer.state_dict())
    assert again.policy_kwargs == training.policy_kwargs and isinstance(again.policy.optimizer, torch.optim.Adam)


def test_training_a_model_loaded_to_act_is_refused_naming_the_way_to_train() -> None:
    from stable_baselines3.common.logger import configure

    from dream_gym.rl.model_zips import load_model_zip

    acting = load_model_zip(SHIPPED[0], to_act=True)
    acting.set_logger(configure(None, []))
    with pytest.raises(AttributeError, match=r"loaded to act .*dream_gym\.rl\.sb3\.load_model to train it"):
        acting._update_learning_rate(acting.policy.optimizer)  # what learn() does first
    with pytest.raises(AttributeError, match="loaded to act"):
        acting.policy.optimizer.zero_grad()


SCRIPT = """
import sys
from dream_gym.cli import main
code = main(["replay", sys.argv[1], "--policy", sys.argv[2], "--json"])
print("torch._dynamo" in sys.modules, "torch" in sys.modules, code)
"""


@pytest.mark.parametrize("policy", ["recommended", "ppo-options"])
def test_a_process_that_replays_a_model_does_not_import_torch_dynamo(policy: str, world: Path) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(world), policy], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "False True 0"  # the model ran (torch), its optimizer was not built
