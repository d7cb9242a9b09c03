"""Isolation overhead: episodes/s of a policy file run isolated vs the same file in-process.

    .venv/bin/python -m benchmarks.isolation_overhead [--nodes 150] [--episodes 60] [--grid-rounds 3]
                                                    [--cpu-episodes 300] [--wait-rounds 3]

Part 1, the shipped held-out grid (16 worlds of 251 nodes x 11 betas) through ``evaluate``:
agents/example_policy.py as a policy file (isolated: one sandboxed child per job process, reused
across worlds, a fresh episode process per reset) against the same class as ``module:Class``
(in-process), at the default jobs (a grid this small runs in this process) and at ``jobs=2``;
wall-time ratio isolated / in-process (target <= 2). Part 2, per episode:

The policies are agents/example_policy.py (stops after a few rounds) and a tiny "exhaustive" file
policy that keeps extending the frontier until the world runs out (~50 decisions per episode);
the world is a random ~150-node tree (W=3, frontier rule "any"). Each episode is a full replay.
The isolated run pays, per episode, one fork of the sandboxed template (a fresh process, the
policy file's module executed afresh, the episode's confinement: seccomp, a nested Landlock
domain and, hardened, the audit hook), and one round trip per decision (length-prefixed JSON
over the episode's own pipes, views sent incrementally); the sandbox itself starts once.

Part 3, the floor (:mod:`benchmarks.fork_floor`): a bare template (the standard library only,
as the example file's template) that forks one process per episode and answers the grid's mean
number of decisions per episode over pipes, without a sandbox, a policy or JSON, one episode
after another and with 16 in flight; printed as a ratio to the in-process grid of part 1. No
design with a fresh process per episode can beat it here.

Part 4, where an isolated episode's CPU time goes (``--cpu-episodes``), by process: this process
(the env, the views it encodes, the pipes), the template (forking the episodes, answering the
control socket, reaping) and the episodes themselves (their whole life, fork to exit, as the
template reaps them), with each one's page faults (after a fork, the first write to a page the
two processes still share copies it); with the sandbox and, for this measurement only, without
it (``unsafe_no_sandbox=True``); the in-process episode's CPU beside them.

Part 5, where the grid's isolated wall time goes (``--wait-rounds``), as this process sees it:
the held-out grid's 176 episodes replayed one after another with one isolated example file,
each message's wait timed from sending it to holding its reply: ``next`` (the template stops the
current episode and hands over the one forked ahead), ``reset`` (the fresh episode executes the
file's module, builds the policy and resets it), the first decision and the later ones; the
rest is this process's own work (the replay, encoding views).
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import psutil

from dream_gym.evaluation.evaluate import evaluate, parse_betas, resolve_worlds
from dream_gym.policy import run_episode
from dream_gym.policy_files import IsolatedPolicy, load_policy
from dream_gym.world import registry
from dream_gym.world.tree import build_world
from dream_gym.world.writer import new_meta

EXAMPLE = Path(__file__).resolve().parents[1] / "agents" / "example_policy.py"
EXHAUSTIVE = """
def act(view):
    batch = [0] * min(view.root_slots, 1) + [i for i in view.frontier if i != 0]
    return batch[: view.workers]
"""


def random_world(n: int, seed: int = 0):
    rng = random.Random(seed)
    records = [{"id": "root", "parent": None, "score": 0.0, "code": "def solve(): pass\n"}]
    for i in range(1, n):
        parent = i - 1 if rng.random() < 0.6 else rng.randrange(i)
        score = None if rng.random() < 0.2 else round(rng.uniform(-5.0, 10.0), 3)
        records.append({"id": f"n{i}", "parent": records[parent]["id"], "score": score,
                        "code": f"def solve():\n    return {i}  # {'x' * 200}\n", "cost": {"tokens": 100 + i}})
    return build_world(new_meta("bench", "toy-task", "a random world", workers=3, frontier="any"), records)


def measure(policy, world, episodes: int, beta: float) -> tuple[float, int]:
    decisions = 0
    start = time.perf_counter()
    for seed in range(episodes):
        result = run_episode(policy, world, seed=seed, beta=beta)
        decisions += result.rounds + 1
    return episodes / (time.perf_counter() - start), decisions


def compare(path: Path, world, episodes: int, beta: float) -> None:
    in_process = load_policy(path, isolate=False)
    t0 = time.perf_counter()
    isolated = IsolatedPolicy(path)
    startup = time.perf_counter() - t0
    unhardened = IsolatedPolicy(path, harden=False)
    try:
        for policy in (in_process, isolated, unhardened):
            measure(policy, world, 3, beta)  # warm-up
        fast, decisions = measure(in_process, world, episodes, beta)
        slow, _ = measure(isolated, world, episodes, beta)
        slow_nh, _ = measure(unhardened, world, episodes, beta)
    finally:
        isolated.close()
        unhardened.close()
    per_decision_ms = (1 / slow - 1 / fast) * 1000 * episodes / decisions
    print(f"{path.name}: {decisions / episodes:.1f} decisions/episode")
    print(f"  in-process:           {fast:8.1f} episodes/s")
    print(f"  isolated (sandbox + audit hook): {slow:8.1f} episodes/s")
    print(f"  isolated (sandbox alone):        {slow_nh:8.1f} episodes/s")
    print(f"  ratio in-process / isolated: {fast / slow:.1f}x  "
          f"(~{per_decision_ms:.2f} ms extra per decision; child start {startup * 1000:.0f} ms, once)")


def grid_overhead(rounds: int) -> tuple[float, int, int]:
    """Wall time of the held-out grid: the example policy file isolated vs in-process, same run.
    At the default jobs the file runs from this process (a small grid) and the reference is the
    serial backend without a watchdog; at jobs=2 both run in two job processes."""
    configs = {"default jobs": ({}, {"backend": "serial", "task_timeout": None}),
               "jobs=2": ({"jobs": 2}, {"jobs": 2})}
    for label, (file_options, class_options) in configs.items():
        runs = {"isolated": (str(EXAMPLE), file_options), "in-process": ("agents.example_policy:Policy", class_options)}
        seconds: dict[str, list[float]] = {name: [] for name in runs}
        rows: dict[str, list[dict]] = {}
        for _ in range(rounds):
            for name, (spec, options) in runs.items():
                registry._CACHE.clear()
                start = time.perf_counter()
                results = evaluate([spec], "heldout", progress=False, **options)
                seconds[name].append(time.perf_counter() - start)
                rows[name] = [{**r.to_dict(), "policy": None} for r in results]
        isolated, in_process = statistics.median(seconds["isolated"]), statistics.median(seconds["in-process"])
        print(f"held-out grid ({len(rows['isolated'])} episodes), {label}: isolated {isolated:.2f} s, "
              f"in-process {in_process:.2f} s, ratio {isolated / in_process:.2f} (target <= 2; medians of "
              f"{rounds}; results identical: {rows['isolated'] == rows['in-process']})")
        if label == "default jobs":
            reference = (in_process, len(rows["in-process"]), sum(r["rounds"] + 1 for r in rows["in-process"]))
    return reference


def floor(in_process_s: float, episodes: int, decisions: int) -> None:
    """Part 3: the fork-per-episode floor for the grid's episodes and decisions."""
    per_episode = max(1, round(decisions / episodes))
    for concurrent in (1, 16):
        command = [sys.executable, "-m", "benchmarks.fork_floor", "--episodes", str(episodes),
                   "--decisions", str(per_episode), "--concurrent", str(concurrent)]
        ms = float(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
        total = ms * episodes / 1000
        print(f"floor, {episodes} episodes x {per_episode} decisions, {concurrent} in flight: {ms:.2f} ms per "
              f"episode, {total:.2f} s = {total / in_process_s:.2f}x the in-process grid (before the sandbox starts)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=150)
    parser.add_argument("--episodes", type=int, default=60, help="episodes per run of part 2 (0: skip it)")
    parser.add_argument("--beta", type=float, default=1.0)
    parser.add_argument("--grid-rounds", type=int, default=3, help="repetitions of the held-out grid (0: skip)")
    parser.add_argument("--cpu-episodes", type=int, default=300, help="episodes of part 4 (0: skip it)")
    parser.add_argument("--wait-rounds", type=int, default=3, help="passes over the grid in part 5 (0: skip it)")
    args = parser.parse_args()
    if min(args.episodes, args.grid_rounds, args.cpu_episodes, args.wait_rounds) < 0:
        parser.error("--episodes, --grid-rounds, --cpu-episodes and --wait-rounds count runs: 0 or more")
    if args.grid_rounds:
        floor(*grid_overhead(args.grid_rounds))
    if args.episodes:
        per_episode(args.nodes, args.episodes, args.beta)
    if args.cpu_episodes:
        cpu_split(args.nodes, args.cpu_episodes, args.beta)
    if args.wait_rounds:
        waits(args.wait_rounds)


def per_episode(nodes: int, episodes: int, beta: float) -> None:
    world = random_world(nodes)
    print(f"world: {nodes} nodes, W=3, beta={beta}, {episodes} episodes per run")
    compare(EXAMPLE, world, episodes, beta)
    with tempfile.TemporaryDirectory() as tmp:
        exhaustive = Path(tmp) / "exhaustive_policy.py"
        exhaustive.write_text(EXHAUSTIVE)
        compare(exhaustive, world, episodes, beta)



def cpu_split(nodes: int, episodes: int, beta: float) -> None:
    """Part 4: CPU milliseconds and page faults per episode of the example file, by process."""
    world = random_world(nodes)
    in_process = load_policy(EXAMPLE, isolate=False)
    measure(in_process, world, 20, beta)
    start = time.process_time()
    measure(in_process, world, episodes, beta)
    reference = (time.process_time() - start) / episodes * 1000
    print(f"CPU per episode of {EXAMPLE.name} ({nodes}-node world, beta={beta}, {episodes} episodes; "
          f"in-process {reference:.2f} ms):")
    print("| sandbox | wall | this process | template | episodes | page faults (template, episodes) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, unsafe in (("on", False), ("off (measurement only)", True)):
        wall, own, template, forked = _isolated_cpu(world, episodes, beta, unsafe)
        print(f"| {label} | {wall:.2f} ms | {own[0]:.2f} ms | {template[0]:.2f} ms | {forked[0]:.2f} ms | "
              f"{template[1]:.0f}, {forked[1]:.0f} |")


def _isolated_cpu(world, episodes: int, beta: float, unsafe: bool):
    """Wall ms per episode, then (CPU ms, page faults) per episode of this process, the
    template and the episodes the template reaped."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the unsafe mode's warning, expected here
        policy = IsolatedPolicy(EXAMPLE, unsafe_no_sandbox=unsafe)
    with policy:
        measure(policy, world, 20, beta)  # warm-up; then the template has an episode forked ahead
        template = _template_pid(policy)
        before = (*_own_usage(), *_proc_usage(template))
        start = time.perf_counter()
        measure(policy, world, episodes, beta)
        wall = (time.perf_counter() - start) / episodes * 1000
        after = (*_own_usage(), *_proc_usage(template))
    cpu_s, faults, tpl_s, tpl_faults, forked_s, forked_faults = (
        (a - b) / episodes for a, b in zip(after, before, strict=True))
    return wall, (cpu_s * 1000, faults), (tpl_s * 1000, tpl_faults), (forked_s * 1000, forked_faults)


class _TimedPolicy(IsolatedPolicy):
    """The example file, isolated, timing how long this process waits for each message's
    reply (part 5 only)."""

    def __init__(self, path: Path):
        super().__init__(path)
        self.waits: dict[str, list[float]] = collections.defaultdict(list)
        self.decision = 0

    def _next_episode(self) -> None:
        start = time.perf_counter()
        super()._next_episode()
        self.waits["next"].append(time.perf_counter() - start)
        self.decision = 0

    def _exchange(self, message, *args, **kwargs):
        start = time.perf_counter()
        reply = super()._exchange(message, *args, **kwargs)
        if message["op"] == "act":
            self.decision += 1
        kind = {0: "reset", 1: "first decision"}.get(self.decision, "later decisions")
        self.waits[kind].append(time.perf_counter() - start)
        return reply


def waits(rounds: int) -> None:
    """Part 5: the grid's isolated wall time by the message this process waits for."""
    worlds, betas = resolve_worlds("heldout"), parse_betas(None)
    with _TimedPolicy(EXAMPLE) as policy:
        passes = []
        for _ in range(rounds + 1):  # the first pass warms up
            policy.waits.clear()
            start = time.perf_counter()
            for world in worlds:
                for beta in betas:
                    run_episode(policy, world, seed=0, beta=beta)
            passes.append((time.perf_counter() - start, {k: list(v) for k, v in policy.waits.items()}))
    wall, timed = sorted(passes[1:], key=lambda p: p[0])[len(passes[1:]) // 2]  # the median pass
    episodes = len(timed["reset"])
    print(f"where the isolated grid's time goes (held-out grid, {episodes} episodes one after another, the median "
          f"of {rounds} passes: {wall:.2f} s, {wall / episodes * 1000:.2f} ms an episode):")
    print("| waiting for | per episode | median wait | total | share of the wall time |")
    print("|---|---:|---:|---:|---:|")
    for kind in ("next", "reset", "first decision", "later decisions"):
        seconds = timed.get(kind, [])
        print(f"| {kind} | {len(seconds) / episodes:.1f} | {statistics.median(seconds) * 1e6:.0f} µs | "
              f"{sum(seconds):.2f} s | {sum(seconds) / wall:.0%} |")
    own = wall - sum(sum(v) for v in timed.values())
    print(f"| (this process's own work) | | | {own:.2f} s | {own / wall:.0%} |")


def _template_pid(policy: IsolatedPolicy) -> int:
    """The template: the parent of the episodes (the sandbox's leaves: the current one, the one
    forked ahead, killed ones not yet reaped)."""
    leaves = [p for p in psutil.Process(policy.pid).children(recursive=True) if not p.children()]
    (template,) = {leaf.ppid() for leaf in leaves}
    return template


def _own_usage() -> tuple[float, int]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, usage.ru_minflt


def _proc_usage(pid: int) -> tuple[float, int, float, int]:
    """(CPU s, page faults) of process ``pid``, then of the children it has reaped."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    minflt, cminflt, utime, stime, cutime, cstime = (int(fields[i]) for i in (7, 8, 11, 12, 13, 14))
    return (utime + stime) / tick, minflt, (cutime + cstime) / tick, cminflt


if __name__ == "__main__":
    main()
