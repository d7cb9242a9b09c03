"""Test-data helpers: random world records, world folders, hypothesis strategies, a reference replay.

Everything here is deterministic given its inputs (a ``random.Random`` or hypothesis draws), so a
failing example reproduces.
"""

from __future__ import annotations

import json
import pickle
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from dream_gym.replay.mechanics import ROOT, Replay
from dream_gym.world.tree import World, build_world, validate_meta
from dream_gym.world.writer import new_meta, write_world

Record = dict[str, Any]


# -- records ------------------------------------------------------------------------------
def node(node_id: str, parent: str | None, score: float | None, **extra: Any) -> Record:
    return {"id": node_id, "parent": parent, "score": score, **extra}


def random_records(
    rng: random.Random,
    n: int,
    *,
    shape: str = "mixed",
    p_unscored: float = 0.2,
    root_score: float | None = 0.0,
    extras: bool = False,
) -> list[Record]:
    """A valid world of ``n`` nodes (root included), in creation order.

    shape: "chain" (each node continues the previous one or opens a branch from the root),
    "bushy" (parent uniform over earlier nodes) or "mixed" (either, per node).
    """
    records = [node("root", None, root_score, code="def solve(): pass\n")]
    for i in range(1, n):
        kind = shape if shape != "mixed" else rng.choice(("chain", "bushy"))
        if kind == "chain":
            parent = i - 1 if rng.random() < 0.7 else 0
        else:
            parent = rng.randrange(i)
        score = None if rng.random() < p_unscored else round(rng.uniform(-5.0, 10.0), 3)
        rec = node(f"n{i}", records[parent]["id"], score, round=i)
        if score is None:
            rec["error"] = "SyntaxError: invalid syntax"
            rec["fail_class"] = "repairable"
        if extras:
            rec["code"] = f"def solve():\n    return {i}\n"
            rec["metrics"] = {"runtime": [i, i + 0.5], "nested": {"k": i}}
            rec["cost"] = {"tokens": 100 + i}
            rec["duration_s"] = 0.5 * i
        records.append(rec)
    return records


def meta_for(
    world_id: str = "w",
    *,
    workers: int = 2,
    frontier: str = "leaves",
    direction: str = "maximize",
    **extra: Any,
) -> dict[str, Any]:
    return new_meta(
        world_id, "toy-task", "a toy task", workers=workers, frontier=frontier, direction=direction, **extra
    )


def copied(records: Sequence[Record]) -> list[Record]:
    """A deep copy of plain records (a pickle round trip: about 5x faster than ``copy.deepcopy``,
    which the honesty tests spent a quarter of their time in)."""
    return pickle.loads(pickle.dumps(list(records), protocol=pickle.HIGHEST_PROTOCOL))


def make_world(records: Sequence[Record], **meta_kwargs: Any) -> World:
    """An in-memory world; records are deep-copied so the caller's list stays independent."""
    meta = validate_meta("<test world.json>", meta_for(**meta_kwargs))
    return build_world(meta, copied(records))


def random_pool(seed: int, count: int, prefix: str = "r") -> list[World]:
    """``count`` small random worlds (2-50 nodes, root scores 0, 3 or -2, W 1-4, either frontier
    rule), ids ``{prefix}{seed}-{i}``: a pool for the RL envs' tests."""
    rng = random.Random(seed)
    return [make_world(random_records(rng, rng.randint(2, 50), root_score=rng.choice([0.0, 3.0, -2.0])),
                       world_id=f"{prefix}{seed}-{i}", workers=rng.randint(1, 4), frontier=rng.choice(("leaves", "any")))
            for i in range(count)]


def write_folder(folder: Path, records: Sequence[Record], **meta_kwargs: Any) -> Path:
    """A finished world folder (with checksum) written through ``write_world``."""
    return write_world(folder, meta_for(**meta_kwargs), records)


def write_raw(folder: Path, meta: Any, nodes_text: str | bytes) -> Path:
    """A world folder with exactly the given world.json object/text and nodes.jsonl bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    meta_text = meta if isinstance(meta, str) else json.dumps(meta)
    (folder / "world.json").write_text(meta_text, encoding="utf-8")
    data = nodes_text.encode("utf-8") if isinstance(nodes_text, str) else nodes_text
    (folder / "nodes.jsonl").write_bytes(data)
    return folder


def jsonl(records: Sequence[Any]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


# -- random legal play ----------------------------------------------------------------------
def random_legal_batch(replay: Replay, rng: random.Random, p_stop: float = 0.0) -> list[int]:
    """A random legal, non-empty batch (or [] with probability p_stop or when nothing is legal)."""
    slots = [ROOT] * replay.root_slots + [i for i in replay.frontier() if i != ROOT]
    if not slots or rng.random() < p_stop:
        return []
    size = rng.randint(1, min(replay.workers, len(slots)))
    batch = rng.sample(slots, size)
    rng.shuffle(batch)
    return batch


def random_batch_sequence(
    world: World, workers: int, frontier: str, rng: random.Random, max_rounds: int = 12
) -> list[list[int]]:
    """A sequence of legal non-empty batches, played on a fresh Replay of ``world``."""
    replay = Replay(world, workers, frontier)
    batches: list[list[int]] = []
    for _ in range(max_rounds):
        batch = random_legal_batch(replay, rng)
        if not batch:
            break
        replay.apply(batch)
        batches.append(batch)
    return batches


# -- an independent, naive model of the reveal rules (docs/concepts/reveal-rules.md) -------------------------------
class ReferenceReplay:
    """Recomputes everything from the records on every call: slow, obviously right."""

    def __init__(self, records: Sequence[Record], workers: int, frontier: str):
        self.ids = [r["id"] for r in records]
        self.parent_of = {r["id"]: r["parent"] for r in records}
        self.children: dict[str, list[str]] = {r["id"]: [] for r in records}
        for r in records[1:]:
            self.children[r["parent"]].append(r["id"])
        self.workers, self.rule = workers, frontier
        self.order = [records[0]["id"]]  # observed id -> recorded id

    def unrevealed_children(self, rid: str) -> list[str]:
        return [c for c in self.children[rid] if c not in self.order]

    def revealed_children(self, rid: str) -> list[str]:
        return [c for c in self.children[rid] if c in self.order]

    def root_slots(self) -> int:
        return min(self.workers, len(self.unrevealed_children(self.order[0])))

    def frontier(self) -> tuple[int, ...]:
        legal = []
        for obs_id, rid in enumerate(self.order):
            if not self.unrevealed_children(rid):
                continue
            if obs_id == 0 or self.rule == "any" or not self.revealed_children(rid):
                legal.append(obs_id)
        return tuple(legal)

    def is_legal(self, batch: Sequence[int]) -> bool:
        if len(batch) > self.workers:
            return False
        nonroot = [b for b in batch if b != 0]
        if len(nonroot) != len(set(nonroot)) or batch.count(0) > self.root_slots():
            return False
        front = set(self.frontier())
        return all(b in front for b in batch)

    def apply(self, batch: Sequence[int]) -> list[int]:
        assert self.is_legal(batch)
        parents = [self.order[b] for b in batch]
        new = []
        for rid in parents:
            child = self.unrevealed_children(rid)[0]
            self.order.append(child)
            new.append(len(self.order) - 1)
        return new


# -- hypothesis strategies ----------------------------------------------------------------------
scores = st.one_of(
    st.none(),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.integers(min_value=-1000, max_value=1000),
)


@st.composite
def world_records(draw: st.DrawFn, min_nodes: int = 1, max_nodes: int = 30) -> list[Record]:
    """Random valid trees: chain-like, bushy or mixed; scores None or finite; root scored."""
    n = draw(st.integers(min_value=min_nodes, max_value=max_nodes))
    shape = draw(st.sampled_from(("chain", "bushy", "mixed")))
    records = [node("root", None, draw(st.floats(-100, 100, allow_nan=False)))]
    for i in range(1, n):
        kind = shape if shape != "mixed" else draw(st.sampled_from(("chain", "bushy")))
        if kind == "chain":
            parent = i - 1 if draw(st.booleans()) else 0
        else:
            parent = draw(st.integers(min_value=0, max_value=i - 1))
        records.append(node(f"n{i}", records[parent]["id"], draw(scores), code=f"c{i}"))
    return records


workers_st = st.integers(min_value=1, max_value=4)
frontier_st = st.sampled_from(("leaves", "any"))


def another_run(records: Sequence[Record]) -> list[Record]:
    """The same tree as another run's: its root's code differs by a comment, so that evaluation
    takes the two as two runs (it refuses one run twice, by the nodes' checksum)."""
    root, *rest = records
    return [{**root, "code": f"{root.get('code') or ''}# another run of the same tree\n"}, *rest]
