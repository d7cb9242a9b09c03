"""Seed ensembles (dream_gym.rl.ensemble): several models of one kind as one policy, their action
probabilities averaged; the ``a.zip+b.zip`` spec everywhere a model zip goes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from dream_gym.evaluation.evaluate import evaluate, resolve_worlds
from dream_gym.policy import run_episode
from dream_gym.policy_files import PolicyNotFoundError, load_policy
from dream_gym.replay.session import ReplaySession
from dream_gym.rl import EnsemblePolicy, SB3Policy, batch_for, macro_masks, model_policy

pytest.importorskip("sb3_contrib")

# macro and node models shipped before the recommended experiment, kept here as fixtures (no shipped model
# is a macro or node model now; options models are not ensembled)
FIXTURES = Path(__file__).resolve().parent / "data" / "models"
MACRO, MACRO_V = FIXTURES / "ppo-macro.zip", FIXTURES / "ppo-macro-v.zip"
NODE = FIXTURES / "ppo-node-v.zip"
WORLDS = "cp32-fixed-s0,sd-fixed-s1"


def spec(*paths: Path) -> str:
    return "+".join(str(p) for p in paths)


@pytest.mark.parametrize("member", [MACRO, NODE], ids=["macro", "node"])
def test_an_ensemble_of_identical_members_acts_as_the_member(member: Path) -> None:
    single, ensemble = model_policy(member), EnsemblePolicy([member, member, member])
    for world in resolve_worlds(WORLDS):
        for beta in (0.0, 0.5, 1.0):
            assert run_episode(ensemble, world, seed=0, beta=beta).batches == \
                run_episode(single, world, seed=0, beta=beta).batches


def test_a_macro_ensemble_takes_the_most_likely_action_of_the_averaged_probabilities() -> None:
    members = [model_policy(MACRO), model_policy(MACRO_V)]
    ensemble = EnsemblePolicy([MACRO, MACRO_V])
    session = ReplaySession(resolve_worlds("cp32-fixed-s0")[0], workers=4, beta=0.6)
    seen_disagreement = False
    while not session.done:
        view = session.view()
        masks = macro_masks(view)
        probs = []
        for member in members:
            assert isinstance(member, SB3Policy)
            obs, _ = member.model.policy.obs_to_tensor(member.features.from_view(view))
            with torch.no_grad():
                probs.append(member.model.policy.get_distribution(obs, action_masks=masks).distribution.probs[0].numpy())
        seen_disagreement |= int(np.argmax(probs[0])) != int(np.argmax(probs[1]))
        batch = ensemble.act(view)
        assert batch == batch_for(view, int(np.argmax(probs[0] + probs[1])))
        if not batch:
            break
        session.step(batch)
    assert seen_disagreement  # the two members differ somewhere, so the average decided


@pytest.mark.slow
def test_an_ensemble_spec_loads_everywhere_a_model_goes_with_the_same_results_in_workers() -> None:
    joined = spec(MACRO, MACRO_V)
    policy = load_policy(joined)
    assert isinstance(policy, EnsemblePolicy) and len(policy.members) == 2
    serial = evaluate([joined], WORLDS, "0,1", jobs=1, progress=False)
    pooled = evaluate([joined], WORLDS, "0,1", jobs=2, progress=False)
    assert [r.to_dict() for r in serial] == [r.to_dict() for r in pooled]
    assert all(r.error is None and r.policy == joined for r in serial)


def test_an_ensemble_spec_with_a_missing_member_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.zip"
    with pytest.raises(PolicyNotFoundError, match="nowhere.zip does not exist"):
        load_policy(spec(MACRO, missing))
    with pytest.raises(PolicyNotFoundError, match="nowhere.zip does not exist"):
        evaluate([spec(MACRO, missing)], WORLDS, "0", jobs=1, progress=False)  # before any worker starts
    with pytest.raises(PolicyNotFoundError, match="is no .zip"):
        load_policy(f"greedy+{MACRO}")


def test_ensembles_of_mixed_kinds_or_one_member_are_refused() -> None:
    with pytest.raises(ValueError, match="all be macro models or all node models"):
        EnsemblePolicy([MACRO, NODE])
    with pytest.raises(ValueError, match="two or more models"):
        EnsemblePolicy([MACRO])
    with pytest.raises(ValueError, match="acts deterministically"):
        load_policy(spec(MACRO, MACRO_V), params={"deterministic": False})
