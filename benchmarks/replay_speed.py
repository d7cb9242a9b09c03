"""Replay speed against CartPole, measured in the same run, episode cost against world size, and
world load time/memory.

    python -m benchmarks.replay_speed [--steps 50000] [--repeats 10] [--step-sizes 151,600,1001]
                                      [--wide-sizes 150,1000,10000,100000] [--shape chains|bushy] [--read-value]
                                      [--cpu-time] [--parts wide,breakdown,steps,episodes,load]

Prints (0) steps/s of W-wide frontier batches with default arguments on 150- to 100,000-node
worlds against CartPole, all in one run (targets: on root + 8 chains worlds >= 1.5x CartPole up to
1,000 nodes and >= 1.0x at every size; on bushy worlds >= 1.0x at 100,000 nodes), and (with ``--parts breakdown``) where that step's time goes: the policy, the
``gym.make`` wrappers, the env's Python and the compiled engine's call; (1) env steps/s of DreamGym/Replay-v1 with default arguments (fresh observation arrays
and action masks every step, the default capacity of 1,024 rows whatever the world) vs
``gym.make("CartPole-v1")`` with sampled actions (both through gym.make's default wrappers), for
two policies: one selection per step (the last non-root frontier node) and W-wide batches (the
frontier in order, the root as often as it may open a branch, at most W); the single-selection
policy also with ``share_obs=True`` and on the gymnasium-free ReplaySession; on 151- and 600-node
worlds (the target's sizes) and a 1,001-node one (the size of recorded-v1's bigger worlds); (2)
episodes/s of one policy on a 150-node and a 100,000-node world of the same shape (a fresh
session per episode, as evaluation runs them, and one session reset between episodes): the
reset and set-up costs must not grow with the world; (3) load time and peak memory of 1k / 10k /
100k-node worlds (each load in a fresh process, so peak RSS is that load's own), and that peak
against the memory the parsed node records alone take (read in another fresh process; target:
at most 1.5x).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import dream_gym  # noqa: F401  (registers the env ids)
from dream_gym.envs.env import DEFAULT_MAX_NODES
from dream_gym.policies import make_policy
from dream_gym.policy import run_episode
from dream_gym.replay.session import ReplaySession
from dream_gym.world.tree import build_world
from dream_gym.world.writer import new_meta


def chain_world_records(n: int, branches: int, seed: int = 0) -> list[dict]:
    """Root + chains (Dream-RSI shape) with code and diagnostics like real worlds."""
    rng = np.random.default_rng(seed)
    records = [{"id": "root", "parent": None, "score": 1.0, "code": "x = 1\n" * 20}]
    tails = ["root"] * branches
    for i in range(1, n):
        b = int(rng.integers(branches))
        valid = rng.random() > 0.2
        records.append({
            "id": f"n{i}", "parent": tails[b], "score": float(1 + rng.random()) if valid else None,
            "round": i, "code": f"def f():\n    return {i}\n" * 10, "diagnostics": f"attempt {i}: ok" * 3,
            "error": None if valid else "ValueError: shape", "duration_s": float(rng.random()),
        })
        tails[b] = f"n{i}"
    return records


# The clock of the step-rate tables: wall time, or (--cpu-time) this process's CPU time, which
# other jobs on a busy machine disturb less (they still share the caches).
CLOCK = time.perf_counter


def steps_per_second(make_env, pick_action, steps: int) -> float:
    env = make_env()
    obs, info = env.reset(seed=0)
    done_steps = 0
    start = CLOCK()
    while done_steps < steps:
        obs, reward, terminated, truncated, info = env.step(pick_action(env, info))
        done_steps += 1
        if terminated or truncated:
            obs, info = env.reset()
    return steps / (CLOCK() - start)


def single_node_batch(env, info) -> list[int]:
    view = info["view"]
    non_root = [i for i in view.frontier if i != 0]
    return [non_root[-1]] if non_root else [0]


def frontier_batch(env, info) -> list[int]:
    """W-wide: the frontier in order, each id as often as the batch may hold it, at most W (W
    read from the env). It stops after W ids: on a bushy world the frontier holds hundreds."""
    workers = env.unwrapped.workers
    batch: list[int] = []
    for node, times in info["frontier"].items():
        batch += [node] * min(times, workers - len(batch))
        if len(batch) == workers:
            break
    return batch


def frontier_batch_reading_value(env, info) -> list[int]:
    """:func:`frontier_batch`, and V so far read from ``env.unwrapped.session`` every step, as
    the README's quick start reads it once."""
    env.unwrapped.session.value  # noqa: B018 - the read is what is measured
    return frontier_batch(env, info)


def branches_of(shape: str, nodes: int) -> int:
    """The chains a world of ``nodes`` nodes has: 8 ("chains"), or for a bushy root about the
    square root of its size, 29 to 300 ("bushy": 29 at 150 nodes, 31 at 1,001, 100 at 10,000,
    300 at 100,000)."""
    if shape == "chains":
        return 8
    if shape == "bushy":
        return min(300, max(29, math.isqrt(nodes)))
    raise ValueError(f"shape must be 'chains' or 'bushy', got {shape!r}")


def session_steps_per_second(world, steps: int) -> float:
    session = ReplaySession(world, workers=4, strict=False)
    done_steps = 0
    start = time.perf_counter()
    while done_steps < steps:
        view = session.view()
        non_root = [i for i in view.frontier if i != 0]
        session.step([non_root[-1]] if non_root else [0])
        done_steps += 1
        if session.done:
            session.reset()
    return steps / (time.perf_counter() - start)


def step_speed(nodes: int, steps: int, repeats: int) -> None:
    world = build_world(new_meta(f"bench-{nodes}", "bench", workers=4), chain_world_records(nodes, branches=8))
    contenders = {
        "CartPole-v1 (gym.make)": lambda n: steps_per_second(
            lambda: gym.make("CartPole-v1"), lambda env, info: env.action_space.sample(), n),
        "DreamGym/Replay-v1 (gym.make, defaults), one selection a step": lambda n: steps_per_second(
            lambda: gym.make("DreamGym/Replay-v1", world=world), single_node_batch, n),
        "DreamGym/Replay-v1 (gym.make, defaults), W-wide batches": lambda n: steps_per_second(
            lambda: gym.make("DreamGym/Replay-v1", world=world), frontier_batch, n),
        "DreamGym/Replay-v1 (gym.make, share_obs=True), one selection a step": lambda n: steps_per_second(
            lambda: gym.make("DreamGym/Replay-v1", world=world, share_obs=True), single_node_batch, n),
        "ReplaySession + view (no gymnasium), one selection a step": lambda n: session_steps_per_second(world, n),
    }
    # Interleave short blocks and keep each contender's median, so that load changes on a
    # shared machine hit all of them alike.
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, measure in contenders.items():
            samples[name].append(measure(steps // repeats))
    rates = {name: statistics.median(values) for name, values in samples.items()}
    cartpole = rates["CartPole-v1 (gym.make)"]
    print(f"## Step speed: {nodes}-node world, W = 4, root + 8 chains (capacity {DEFAULT_MAX_NODES}, the default), "
          "same run")
    print("| env | steps/s | ratio to CartPole-v1 |")
    print("|---|---:|---:|")
    for name, rate in rates.items():
        print(f"| {name} | {rate:,.0f} | {rate / cartpole:.2f} |")
    print()


def wide_speed(sizes: list[int], steps: int, repeats: int, shape: str = "chains", read_value: bool = False) -> None:
    """W-wide batches from the frontier (default arguments) against CartPole at each world size,
    contenders interleaved in one run. No ``gc.freeze``: a built world holds a few objects the
    garbage collector tracks whatever its size (its records hold only atomic values), counted
    and printed here, and a step leaves none for its episode (tests/test_env.py)."""
    gc.collect()
    tracked = len(gc.get_objects())
    worlds = {n: build_world(new_meta(f"bench-{n}", "bench", workers=4),
                             chain_world_records(n, branches=branches_of(shape, n)))
              for n in sizes}
    gc.collect()
    tracked = len(gc.get_objects()) - tracked
    policy = frontier_batch_reading_value if read_value else frontier_batch
    contenders = {"CartPole-v1 (gym.make)": lambda n: steps_per_second(
        lambda: gym.make("CartPole-v1"), lambda env, info: env.action_space.sample(), n)}
    for world in worlds.values():
        # worlds above the default capacity refuse it: they get max_nodes = their size
        options = {} if world.size <= DEFAULT_MAX_NODES else {"max_nodes": world.size}
        contenders[f"{world.size:,} nodes"] = (lambda w, o: lambda k: steps_per_second(
            lambda: gym.make("DreamGym/Replay-v1", world=w, **o), policy, k))(world, options)
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, measure in contenders.items():
            samples[name].append(measure(steps // repeats))
    rates = {name: statistics.median(values) for name, values in samples.items()}
    cartpole = rates.pop("CartPole-v1 (gym.make)")
    chains = ", ".join(f"{branches_of(shape, n)}" for n in sizes)
    reading = "; the policy reads env.unwrapped.session.value every step" if read_value else ""
    print(f"## W-wide batches from the frontier: DreamGym/Replay-v1 (gym.make, defaults: capacity "
          f"{DEFAULT_MAX_NODES}; larger worlds max_nodes = their size), W = 4, root + {chains} chains{reading}, "
          f"against CartPole-v1 ({cartpole:,.0f} steps/s) in the same run")
    print(f"(objects the garbage collector tracks, added by building all {len(worlds)} worlds: {tracked})")
    print("| world | steps/s | ratio to CartPole-v1 | target |")
    print("|---:|---:|---:|---:|")
    for name, rate in rates.items():
        size = int(name.split()[0].replace(",", ""))
        print(f"| {name} | {rate:,.0f} | {rate / cartpole:.2f} | {wide_target(shape, size)} |")
    print()


def wide_target(shape: str, size: int) -> str:
    """The stated target of a W-wide step at ``size`` nodes: the chain worlds' (>= 1.5x CartPole up
    to 1,000 nodes, >= 1.0x beyond), the bushy worlds' (>= 1.0x at 100,000 nodes, none below)."""
    if shape == "bushy":
        return ">= 1.0" if size >= 100_000 else ""
    return ">= 1.5" if size <= 1001 else ">= 1.0"


def step_breakdown(sizes: list[int], steps: int, repeats: int, shape: str = "chains") -> None:
    """Where a W-wide step's time goes, per world size (see :func:`_breakdown`)."""
    print(f"## A W-wide step, part by part ({shape} worlds; microseconds a step; medians of interleaved blocks)")
    print("| world | policy (frontier_batch) | gym.make wrappers | env in Python | engine call |")
    print("|---:|---:|---:|---:|---:|")
    for n in sizes:
        m = _breakdown(n, steps, repeats, shape)
        print(f"| {n:,} nodes | {m['policy']:.2f} | {m['wrapped'] - m['bare']:.2f} | "
              f"{m['bare'] - m['engine']:.2f} | {m['engine']:.2f} |")
    print()


def _breakdown(n: int, steps: int, repeats: int, shape: str) -> dict[str, float]:
    """The policy's batches are recorded once, then replayed through the ``gym.make`` stack,
    through the bare env, and through the bare env with the compiled engine's call timed; the
    policy alone is timed on the recorded frontiers. Medians, microseconds a step."""
    world = build_world(new_meta(f"bench-{n}", "bench", workers=4),
                        chain_world_records(n, branches=branches_of(shape, n)))
    wrapped = gym.make("DreamGym/Replay-v1", world=world, **({} if n <= DEFAULT_MAX_NODES else {"max_nodes": n}))
    bare = wrapped.unwrapped
    _, info = wrapped.reset(seed=0)
    actions, infos = [], []
    while len(actions) < steps:
        action = frontier_batch(wrapped, info)
        actions.append(action)
        infos.append({"frontier": info["frontier"]})  # not the info: its action mask holds a buffer set
        _, _, terminated, truncated, info = wrapped.step(action)
        if terminated or truncated:
            actions.append(None)
            _, info = wrapped.reset()
    del info
    clock, kernel, engine_ns = time.perf_counter_ns, bare._kernel, [0]

    def timed_kernel(state, buffer) -> None:
        start = clock()
        kernel(state, buffer)
        engine_ns[0] += clock() - start

    def replay(env) -> float:
        env.reset(seed=0)
        start = time.perf_counter()
        for action in actions:
            if action is None:
                env.reset()
            else:
                env.step(action)
        return (time.perf_counter() - start) * 1e6 / len(actions)

    def policy_only() -> float:
        start = time.perf_counter()
        for recorded in infos:
            frontier_batch(wrapped, recorded)
        return (time.perf_counter() - start) * 1e6 / len(infos)

    def engine_only() -> float:
        hot = bare._step_refs
        bare._step_refs = (*hot[:5], timed_kernel, *hot[6:])
        engine_ns[0] = 0
        try:
            replay(bare)
        finally:
            bare._step_refs = hot
        one_read = -min(clock() - clock() for _ in range(1000))  # the timer's own cost, once per call
        return (engine_ns[0] / len(actions) - max(0, one_read)) / 1000

    samples: dict[str, list[float]] = {"policy": [], "wrapped": [], "bare": [], "engine": []}
    for _ in range(repeats):
        samples["policy"].append(policy_only())
        samples["wrapped"].append(replay(wrapped))
        samples["bare"].append(replay(bare))
        samples["engine"].append(engine_only())
    return {key: statistics.median(values) for key, values in samples.items()}


def episodes_per_second(world, policy: str, fresh: bool, seconds: float) -> float:
    """Episodes/s of a built-in policy (beta 0.5): a fresh ReplaySession per episode (``fresh``,
    what evaluation does) or one session reset between episodes."""
    session = ReplaySession(world, workers=4)
    agent = make_policy(policy)
    episodes, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        if fresh:
            run_episode(agent, world, workers=4)
        else:
            run_episode(agent, session)
        episodes += 1
    return episodes / (time.perf_counter() - start)


def reset_cost(policy: str, repeats: int) -> None:
    small = build_world(new_meta("chains-150", "bench", workers=4), chain_world_records(150, branches=8))
    big = build_world(new_meta("chains-100k", "bench", workers=4), chain_world_records(100_000, branches=8))
    for world in (small, big):  # per-world caches (lists, q) are built once, before measuring
        run_episode(make_policy(policy), world, workers=4)
    rates: dict[tuple[str, bool], list[float]] = {}
    for _ in range(repeats):
        for world in (small, big):
            for fresh in (True, False):
                rates.setdefault((world.id, fresh), []).append(episodes_per_second(world, policy, fresh, 0.3))
    print(f"## Episode cost against world size: policy {policy!r}, beta 0.5, W = 4, root + 8 chains, same run")
    print("| world | fresh session per episode (episodes/s) | session reset (episodes/s) |")
    print("|---|---:|---:|")
    medians = {key: statistics.median(values) for key, values in rates.items()}
    for world in (small, big):
        print(f"| {world.size:,} nodes | {medians[(world.id, True)]:,.0f} | {medians[(world.id, False)]:,.0f} |")
    ratio_fresh = medians[(big.id, True)] / medians[(small.id, True)]
    ratio_reset = medians[(big.id, False)] / medians[(small.id, False)]
    print(f"\n100,000-node / 150-node episodes/s: {ratio_fresh:.2f} (fresh sessions), {ratio_reset:.2f} (reset); "
          "target >= 0.5\n")


# Peak RSS is the process's own high-water mark (VmHWM): ru_maxrss would also count the RSS of
# the forked benchmark process that exec'd it (Linux keeps that maximum across exec).
PEAK = "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) / 1024"

LOAD_SNIPPET = f"""
import json, sys, time
t = time.perf_counter()
from dream_gym.world.tree import load_world
w = load_world(sys.argv[1])
print(json.dumps({{"seconds": time.perf_counter() - t, "nodes": w.size, "peak_mb": {PEAK}}}))
"""

RECORDS_SNIPPET = """
import json, resource, sys
from pathlib import Path
from dream_gym.world.tree import read_node_file
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20
base = rss_mb()
records = read_node_file(Path(sys.argv[1]) / "nodes.jsonl")
print(json.dumps({"records_mb": rss_mb() - base}))
"""

BASELINE_SNIPPET = f"""
import json
import numpy, dream_gym.world.tree
print(json.dumps({{"peak_mb": {PEAK}}}))
"""


def write_unsynced(folder: Path, records: list[dict]) -> None:
    """A world folder written in one go (WorldWriter fsyncs every line: 100k fsyncs is slow)."""
    folder.mkdir(parents=True)
    (folder / "world.json").write_text(json.dumps(new_meta(folder.name, "bench", workers=4)))
    (folder / "nodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def load_cost(sizes: list[int]) -> list[dict]:
    rows = []
    base = json.loads(subprocess.run([sys.executable, "-c", BASELINE_SNIPPET], capture_output=True, text=True,
                                     check=True).stdout)["peak_mb"]
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            folder = Path(tmp) / f"w{n}"
            write_unsynced(folder, chain_world_records(n, branches=max(4, n // 50)))
            out = subprocess.run([sys.executable, "-c", LOAD_SNIPPET, str(folder)], capture_output=True,
                                 text=True, check=True).stdout
            row = json.loads(out)
            row.update(json.loads(subprocess.run([sys.executable, "-c", RECORDS_SNIPPET, str(folder)],
                                                 capture_output=True, text=True, check=True).stdout))
            row["file_mb"] = (folder / "nodes.jsonl").stat().st_size / 2**20
            row["world_mb"] = row["peak_mb"] - base
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--step-sizes", default="151,600,1001", help="world sizes of the step-speed tables")
    parser.add_argument("--sizes", default="1000,10000,100000", help="world sizes of the load table")
    parser.add_argument("--wide-sizes", default="150,1000,10000,100000",
                        help="world sizes of the W-wide table (all in one run)")
    parser.add_argument("--shape", default="chains", choices=("chains", "bushy"),
                        help="the W-wide table's worlds: root + 8 chains, or a bushy root (29 to 300 chains)")
    parser.add_argument("--read-value", action="store_true",
                        help="the W-wide policy also reads env.unwrapped.session.value every step")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time the step tables by this process's CPU time instead of wall time")
    parser.add_argument("--parts", default="wide,steps,episodes,load", help="which tables to print")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
        print("(rates in CPU time of this process)")

    if "wide" in parts:
        wide_speed([int(n) for n in args.wide_sizes.split(",")], args.steps, args.repeats, args.shape, args.read_value)
    if "breakdown" in parts:
        step_breakdown([int(n) for n in args.wide_sizes.split(",")], min(args.steps, 20000), args.repeats,
                       args.shape)
    if "steps" in parts:
        for nodes in (int(n) for n in args.step_sizes.split(",")):
            step_speed(nodes, args.steps, args.repeats)
    if "episodes" in parts:
        reset_cost("fixed", max(3, args.repeats // 2))
    if "load" in parts:
        print("## World load (fresh process each)")
        print("| nodes | nodes.jsonl MB | load s | memory MB (peak RSS above an empty import) | parsed records MB "
              "| peak / records (target <= 1.5) |")
        print("|---:|---:|---:|---:|---:|---:|")
        for row in load_cost([int(s) for s in args.sizes.split(",")]):
            print(f"| {row['nodes']:,} | {row['file_mb']:.1f} | {row['seconds']:.2f} | {row['world_mb']:.0f} | "
                  f"{row['records_mb']:.0f} | {row['world_mb'] / row['records_mb']:.2f} |")

if __name__ == "__main__":
    main()
