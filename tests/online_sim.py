"""A synthetic online run: the real online loop's view and batch checks, a made-up agent and evaluator.

:func:`simulate_run` grows a world the way ``dream-gym grow`` does (each round the policy sees
:func:`dream_gym.online.loop.tree_view` of the tree so far, its batch is checked with
``check_online_batch``, the children are recorded in the batch's slot order with their round and
worker) but the agent and the evaluator are a few lines of arithmetic, so a test can grow many
runs in a second. The agent is deterministic: the k-th child of a program (in this run) has the
same code in every run, so runs that continue the same node the same number of times record the
same programs, which pooling merges (unless ``agent`` names another agent). Scores drift upwards
with depth, with spread, and one attempt in ten fails.
"""

from __future__ import annotations

import hashlib
from typing import Any

from dream_gym.online.loop import check_online_batch, tree_view
from dream_gym.policies import make_policy
from dream_gym.policy import RunContext, batch_from
from dream_gym.replay.settings import ReplaySettings
from dream_gym.world.tree import World, build_world
from dream_gym.world.writer import new_meta

TASK = "synthetic"
ROOT_CODE = "x = 0\n"


def _unit(text: str) -> float:
    """A number in [0, 1) determined by ``text``."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


def child_of(parent: dict[str, Any], k: int, agent: str = "") -> tuple[str, float | None]:
    """The code and score of the k-th child of ``parent`` (``agent``: another agent, other code)."""
    code = f"{parent['code']}x += {k}  # {_unit(agent + str(parent['code']) + str(k)):.6f}\n"
    if _unit("fail" + code) < 0.1:
        return code, None
    base = parent["score"] if parent["score"] is not None else 0.0
    return code, round(base + _unit(code) - 0.35, 6)


def simulate_run(policy: str | Any, *, seed: int, attempts: int, workers: int = 2, frontier: str = "any",
                 beta: float = 0.5, agent: str = "", world_id: str | None = None, **params: Any) -> World:
    """One run of ``policy`` (a built-in name, or a policy object) for ``attempts`` attempts."""
    meta = new_meta(world_id or f"sim-{policy}-s{seed}", TASK, "a synthetic task", workers=workers,
                    frontier=frontier, policy=str(policy), seed=seed)
    records: list[dict[str, Any]] = [{"id": "root", "parent": None, "score": 0.0, "code": ROOT_CODE, "round": 0}]
    chooser = make_policy(policy, **params) if isinstance(policy, str) else policy
    settings = ReplaySettings(workers, beta, frontier=frontier)
    view = tree_view(records, meta, settings, rounds=0)
    chooser.reset(RunContext.from_view(view, seed=seed))
    children: dict[str, int] = {}
    round_no = 0
    while len(records) - 1 < attempts:
        batch = check_online_batch(view, batch_from(chooser.act(view)))[: attempts - (len(records) - 1)]
        if not batch:
            break
        round_no += 1
        parents = [records[i] for i in batch]
        for slot, parent in enumerate(parents):
            k = children.get(parent["id"], 0)
            children[parent["id"]] = k + 1
            code, score = child_of(parent, k, agent)
            node = {"id": f"r{round_no}w{slot}", "parent": parent["id"], "score": score, "code": code,
                    "round": round_no, "worker": slot}
            if score is None:
                node["error"] = "ValueError: the synthetic evaluator failed"
                node["fail_class"] = "repairable"
            records.append(node)
        view = tree_view(records, meta, settings, rounds=round_no)
    return build_world(meta, records)
