"""Step results pinned to a golden file: the observations, rewards, flags and infos (the action
mask and the prefix view's contents included) of seeded random episodes on random worlds, for the
single env, the gymnasium-free session and the vector env, must stay bit for bit what they were
when ``tests/data/step_golden.json`` was recorded (before the step was made cheaper).

Each step is reduced to one hash of everything it returned (arrays: dtype, shape and bytes;
floats: their exact bits). Record the file again only for an intended behaviour change:

    .venv/bin/python tests/test_step_golden.py --record
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import sys
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from worldgen import make_world, random_records

from dream_gym.envs.env import ReplayEnv
from dream_gym.envs.vector_env import ReplayVectorEnv
from dream_gym.replay.mechanics import IllegalBatchError
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.view import NODE_FIELDS, PrefixView, thaw

GOLDEN = Path(__file__).parent / "data" / "step_golden.json"
DIGEST_CHARS = 16


# -- canonical encodings --------------------------------------------------------------------
def _canon(value: Any) -> Any:
    """A JSON-able, exact encoding of a step output (arrays by bytes, floats by bits)."""
    if isinstance(value, np.ndarray) and value.dtype == object:  # its bytes are pointers: each element instead
        return ["ndarray", "object", list(value.shape), [_canon(v) for v in value.ravel().tolist()]]
    if isinstance(value, np.ndarray):
        return ["ndarray", value.dtype.str, list(value.shape),
                hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()]
    if isinstance(value, (bool, np.bool_)):
        return ["bool", bool(value)]
    if isinstance(value, (int, np.integer)):
        return ["int", int(value)]
    if isinstance(value, (float, np.floating)):
        return ["float", float(value).hex()]
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, PrefixView):
        return ["view", _view_contents(value)]
    if isinstance(value, dict):
        return ["dict", [[_canon(k), _canon(v)] for k, v in value.items()]]  # order matters
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [_canon(v) for v in value]]
    return ["other", type(value).__name__, str(value)]


def _view_contents(view: PrefixView) -> Any:
    data = view.to_dict()
    return {
        "dict": _canon(data),
        "nodes": [[_canon(thaw(getattr(n, f))) for f in NODE_FIELDS] for n in view.nodes],
        "children": [list(view.children(n.id)) for n in view.nodes],
        "leaves": list(view.leaves()),
        "best": view.best().id,
        "n_branches": view.n_branches,
        "len": len(view),
    }


def _digest(*parts: Any) -> str:
    text = json.dumps(_canon(list(parts)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


# -- random worlds and actions ------------------------------------------------------------------
def _world(rng: random.Random, index: int, size: int | None = None, **meta: Any) -> Any:
    n = size if size is not None else rng.choice((2, 5, 12, 30, 80, 200, 400))
    shape = rng.choice(("chain", "bushy", "mixed"))
    root_score = rng.choice((0.0, 3.0, -2.0, None))
    records = random_records(rng, n, shape=shape, root_score=root_score, extras=rng.random() < 0.6)
    meta.setdefault("workers", rng.randint(1, 5))
    meta.setdefault("frontier", rng.choice(("leaves", "any")))
    meta.setdefault("direction", rng.choice(("maximize", "minimize")))
    if root_score is None:
        meta["baseline_score"] = 1.5
    return make_world(records, world_id=f"g{index}", **meta)


def _action(rng: random.Random, info: dict[str, Any], workers: int, pad: int) -> Any:
    """Mostly legal batches (in random order, as lists or padded arrays), sometimes illegal ids,
    duplicates, non-ints, padding only, or the empty batch."""
    roll = rng.random()
    slots = [node for node, times in info["frontier"].items() for _ in range(times)]
    observed = info["attempts"] + 1
    if roll < 0.85 and slots:
        batch = rng.sample(slots, rng.randint(1, min(workers, len(slots))))
        if rng.random() < 0.5:
            return np.array(batch + [pad] * (workers - len(batch)), dtype=np.int64)
        return batch
    if roll < 0.92:  # random ids, some padding, some out of range
        choices = (rng.randrange(observed), rng.randrange(observed + 3), pad, rng.randint(0, pad))
        return np.array([rng.choice(choices) for _ in range(workers)], dtype=np.int64)
    if roll < 0.97:
        batch: list[Any] = [rng.choice((0, rng.randrange(observed), -1, observed + 3)) for _ in range(workers)]
        if slots:
            batch[0] = slots[0]
            batch.append(slots[-1])  # maybe a duplicate, maybe more than W
        if rng.random() < 0.3:
            batch.insert(rng.randrange(len(batch) + 1), rng.choice(("3", True, 1.5)))
        return batch
    if roll < 0.99:
        return np.full(workers, pad, dtype=np.int64)
    return []


# -- the three streams ------------------------------------------------------------------------
def env_configs() -> Iterator[tuple[str, dict[str, Any], Any]]:
    rng = random.Random(20261201)
    for index in range(40):
        world = _world(rng, index)
        kwargs: dict[str, Any] = {}
        if rng.random() < 0.25:
            kwargs["max_rounds"] = rng.randint(1, 8)
        if rng.random() < 0.25:
            kwargs["max_nodes"] = rng.randint(max(world.workers + 1, 3), max(world.workers + 2, world.size + 5))
        if rng.random() < 0.2:
            kwargs["share_obs"] = True
        if rng.random() < 0.3:
            kwargs["beta"] = rng.choice((0.0, 1.0, 0.3))
            kwargs["beta2"] = rng.choice((0.0, 0.05))
        yield f"env-{index}", kwargs, world
    big = _world(rng, 100, size=1500, workers=4, frontier="leaves")
    yield "env-big", {"max_nodes": 1600}, big
    yield "env-big-cut", {"max_nodes": 64}, big


def env_stream(kwargs: dict[str, Any], world: Any, seed: int, keep: str = "all") -> list[str]:
    """``keep``: which outputs the caller holds on to (the env may write the buffers of an
    observation again once nobody holds it): "all", "none", or "some" (a random part of some
    steps' outputs: the observation dict, one array, a numpy view of one, the action mask)."""
    rng = random.Random(seed)
    keeper = random.Random(seed + 1)
    out: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = ReplayEnv(world, **kwargs)
        workers, pad = env.workers, env.max_nodes
        for _ in range(4):
            kept: list[tuple[Any, Any]] = []

            def hold(obs: dict[str, Any], info: dict[str, Any], kept: list[tuple[Any, Any]] = kept) -> None:
                if keep == "all":
                    kept.append((copy.deepcopy(obs), obs))
                    kept.append((copy.deepcopy(info["action_mask"]), info["action_mask"]))
                elif keep == "some" and keeper.random() < 0.4:
                    held = keeper.choice((obs, obs["nodes"], obs["score"], obs["nodes"][:, 4], obs["globals"][1:],
                                          info["action_mask"], info["action_mask"][0]))
                    kept.append((copy.deepcopy(held), held))

            obs, info = env.reset(seed=seed)
            out.append(_digest("reset", obs, info, env.action_masks()))
            hold(obs, info)
            for _ in range(60):
                action = _action(rng, info, workers, pad)
                obs, reward, terminated, truncated, info = env.step(action)
                out.append(_digest("step", obs, reward, terminated, truncated, info, env.action_masks()))
                hold(obs, info)
                if terminated or truncated:
                    break
            if not env.share_obs:  # a returned observation is never changed by a later step
                for snapshot, returned in kept:
                    if isinstance(snapshot, dict):
                        for key in snapshot:
                            np.testing.assert_array_equal(snapshot[key], returned[key])
                    else:
                        np.testing.assert_array_equal(snapshot, returned)
            del obs, info
    return out


def session_stream(world: Any, seed: int) -> list[str]:
    """A strict session (what run_episode drives): illegal batches raise; views every step."""
    rng = random.Random(seed)
    session = ReplaySession(world, beta=0.25)
    out = []
    for _ in range(3):
        session.reset()
        view = session.view()
        out.append(_digest("reset", view))
        for _ in range(60):
            info = {"frontier": dict.fromkeys(view.frontier, 1), "attempts": view.attempts}
            if view.root_slots:
                info["frontier"][0] = view.root_slots
            action = _action(rng, info, session.workers, 10**6)
            if isinstance(action, np.ndarray):
                action = [a for a in action.tolist() if a != 10**6]
            try:
                outcome = session.step(action)
            except IllegalBatchError as error:
                out.append(_digest("illegal", str(error), repr(error.node)))
                continue
            view = session.view()
            out.append(_digest("step", tuple(outcome), view, session.value, session.best_score))
            if session.done:
                break
    return out


def vector_configs() -> Iterator[tuple[str, dict[str, Any], list[Any]]]:
    rng = random.Random(7)
    for index in range(8):
        workers = rng.randint(1, 4)
        worlds = [_world(rng, 200 + 10 * index + i, workers=workers) for i in range(rng.randint(1, 4))]
        kwargs: dict[str, Any] = {"num_envs": rng.randint(1, 6),
                                  "autoreset_mode": rng.choice(("NextStep", "SameStep"))}
        if rng.random() < 0.3:
            kwargs["max_rounds"] = rng.randint(1, 8)
        if rng.random() < 0.3:
            kwargs["max_nodes"] = rng.randint(workers + 1, 40)
        if rng.random() < 0.3:
            kwargs["frontier"] = rng.choice(("leaves", "any"))
        yield f"vector-{index}", kwargs, worlds


def vector_stream(kwargs: dict[str, Any], worlds: list[Any], seed: int, keep: str = "all") -> list[str]:
    """``keep`` as for :func:`env_stream` (the vector env writes a dropped buffer set again)."""
    rng = np.random.default_rng(seed)
    keeper = random.Random(seed + 1)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = ReplayVectorEnv(world=worlds, **kwargs)
        env.action_space.seed(seed)
        obs, info = env.reset(seed=seed)
        out.append(_digest("reset", obs, info, env.action_masks()))
        kept: list[tuple[Any, Any]] = []

        def hold(obs: dict[str, Any]) -> None:
            if keep == "all":
                kept.append((copy.deepcopy(obs), obs))
            elif keep == "some" and keeper.random() < 0.4:
                held = keeper.choice((obs, obs["nodes"], obs["score"][0], obs["nodes"][:, :, 4], obs["globals"]))
                kept.append((copy.deepcopy(held), held))

        hold(obs)
        for _ in range(70):
            actions = env.action_space.sample()
            masks = env.action_masks().reshape(env.num_envs, env.workers, -1)
            for e in range(env.num_envs):
                for j in range(env.workers):
                    if rng.random() < 0.8:
                        actions[e, j] = rng.choice(np.flatnonzero(masks[e, j]))
            obs, rewards, terminated, truncated, info = env.step(actions)
            out.append(_digest("step", obs, rewards, terminated, truncated, dict(sorted(info.items())),
                               env.action_masks()))
            hold(obs)
        for snapshot, returned in kept:
            if isinstance(snapshot, dict):
                for key in snapshot:
                    np.testing.assert_array_equal(snapshot[key], returned[key])
            else:
                np.testing.assert_array_equal(snapshot, returned)
    return out


def _seed(name: str) -> int:
    return zlib.crc32(name.encode())


def _with_session(name: str) -> bool:
    """Every third env config also runs a strict session on its world."""
    return name[4:].isdigit() and int(name[4:]) % 3 == 0


def all_streams() -> dict[str, list[str]]:
    streams: dict[str, list[str]] = {}
    for name, kwargs, world in env_configs():
        streams[name] = env_stream(kwargs, world, _seed(name))
        if _with_session(name):
            session_name = "session" + name[3:]
            streams[session_name] = session_stream(world, _seed(session_name))
    for name, kwargs, worlds in vector_configs():
        streams[name] = vector_stream(kwargs, worlds, _seed(name))
    return streams


# -- the test ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def golden() -> dict[str, list[str]]:
    return json.loads(GOLDEN.read_text())["streams"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", [name for name, _, _ in env_configs()])
def test_env_steps_match_the_golden_file(golden: dict[str, list[str]], name: str) -> None:
    kwargs, world = {n: (k, w) for n, k, w in env_configs()}[name]
    for keep in ("all", "none", "some"):
        assert env_stream(kwargs, world, _seed(name), keep) == golden[name], keep
    if _with_session(name):
        session_name = "session" + name[3:]
        assert session_stream(world, _seed(session_name)) == golden[session_name]


@pytest.mark.parametrize("name", [name for name, _, _ in vector_configs()])
def test_vector_steps_match_the_golden_file(golden: dict[str, list[str]], name: str) -> None:
    kwargs, worlds = {n: (k, w) for n, k, w in vector_configs()}[name]
    for keep in ("all", "none", "some"):
        assert vector_stream(kwargs, worlds, _seed(name), keep) == golden[name], keep


def test_the_golden_file_covers_every_kind_of_step(golden: dict[str, list[str]]) -> None:
    assert len(golden) == len(list(env_configs())) + len(list(vector_configs())) + 14
    assert sum(len(s) for s in golden.values()) > 2000


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        raise SystemExit(__doc__)
    streams = all_streams()
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps({"about": "tests/test_step_golden.py", "streams": streams}, indent=0) + "\n")
    print(f"{len(streams)} streams, {sum(len(s) for s in streams.values())} steps -> {GOLDEN}")
