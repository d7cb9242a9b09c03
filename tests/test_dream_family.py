"""The parametric policy family and the built-in developer: legal batches for any parameters,
parameter blocks round-trip, proposals are deterministic and resumable, the file is a
self-contained policy file that runs isolated."""

from __future__ import annotations

import ast
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dream_gym.dream import family_policy
from dream_gym.dream.builtin_developer import SEARCH_SPACE, BuiltinDeveloper, family_file, read_params
from dream_gym.dream.developer import EarlierRevision, Feedback
from dream_gym.policy import run_episode
from dream_gym.replay.session import ReplaySession
from tests.worldgen import make_world, world_records


@st.composite
def family_params(draw):
    params = {}
    for name, (lo, hi) in SEARCH_SPACE.items():
        params[name] = draw(st.integers(int(lo), int(hi))) if isinstance(lo, int) else draw(st.floats(lo, hi))
    return params


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world_records(min_nodes=1, max_nodes=40), family_params(), st.integers(1, 5), st.floats(0, 1),
       st.sampled_from(("leaves", "any")))
def test_family_policy_returns_legal_batches_for_any_parameters(records, params, workers, beta, frontier):
    world = make_world(records, frontier=frontier)
    session = ReplaySession(world, workers=workers, beta=beta, max_rounds=60, strict=True)
    result = run_episode(family_policy.Policy(params), session)  # strict: an illegal batch raises
    assert result.error is None


def test_parameter_block_round_trips_and_other_code_has_none():
    rng = random.Random(0)
    params = {n: (rng.randint(int(lo), int(hi)) if isinstance(lo, int) else round(rng.uniform(lo, hi), 6))
              for n, (lo, hi) in SEARCH_SPACE.items()}
    code = family_file(params, header="test")
    assert read_params(code) == params
    assert read_params(family_policy.__doc__ or "") is None
    assert read_params("def act(view):\n    return []\n") is None
    assert read_params(family_file(family_policy.PARAMS)) == family_policy.PARAMS


def test_family_file_is_self_contained_and_runs_isolated(tmp_path):
    from dream_gym.policy_files import load_policy

    code = family_file(family_policy.PARAMS)
    imports = [n for n in ast.walk(ast.parse(code)) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert all(getattr(n, "module", None) == "__future__" for n in imports)
    path = tmp_path / "family.py"
    path.write_text(code)
    world = make_world(world_records_example())
    with load_policy(path) as isolated:
        a = run_episode(isolated, ReplaySession(world, workers=3, beta=0.4))
    b = run_episode(family_policy.Policy(), ReplaySession(world, workers=3, beta=0.4))
    assert a.batches == b.batches and a.replay_score == b.replay_score


def world_records_example():
    rng = random.Random(7)
    records = [{"id": "root", "parent": None, "score": 0.0}]
    for i in range(1, 60):
        parent = records[rng.randrange(len(records))]["id"] if rng.random() < 0.3 else records[-1]["id"]
        records.append({"id": f"n{i}", "parent": parent if rng.random() < 0.8 else "root",
                        "score": None if rng.random() < 0.2 else rng.uniform(0, 10)})
    return records


def _feedback(m, earlier=(), incumbent_code="def act(view):\n    return []\n", phase=1):
    return Feedback(phase=phase, m=m, revisions=10, incumbent=EarlierRevision(0, incumbent_code, "incumbent", 0.4),
                    traces="", earlier=tuple(earlier), select="V", betas=(0.5,), history=("w",))


def test_builtin_developer_starts_from_the_default_then_proposes_deterministically():
    first = BuiltinDeveloper(seed=1).propose(_feedback(1))
    assert first.params == family_policy.PARAMS and first.cost["calls"] == 0
    earlier = [EarlierRevision(1, first.code, "ok", 0.5, params=first.params)]
    a = BuiltinDeveloper(seed=1).propose(_feedback(2, earlier))
    b = BuiltinDeveloper(seed=1).propose(_feedback(2, earlier))  # a fresh object: as after a resume
    c = BuiltinDeveloper(seed=2).propose(_feedback(2, earlier))
    assert a.code == b.code and a.params == b.params
    assert c.params != a.params
    assert read_params(a.code) == a.params


def test_builtin_developer_learns_from_a_family_incumbent_and_refused_revisions():
    incumbent = family_file(family_policy.PARAMS)
    earlier = [EarlierRevision(1, family_file({**family_policy.PARAMS, "patience_lo": 5}), "failed", None)]
    revision = BuiltinDeveloper(seed=0).propose(_feedback(2, earlier, incumbent_code=incumbent))
    assert "from 2 evaluated family version" in revision.notes  # the incumbent and the refused one
    assert set(revision.params) == set(SEARCH_SPACE)
    for name, (lo, hi) in SEARCH_SPACE.items():
        assert lo <= revision.params[name] <= hi
