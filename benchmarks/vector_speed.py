"""Vector replay speed: macro steps/s of MacroVectorEnv against the single MacroReplayEnv, node
steps/s of the Replay-v0 vector env against the single ReplayEnv, and the env's share of
MaskablePPO training time, each measured in the same run (contenders interleaved).

    python -m benchmarks.vector_speed [--num-envs 1024] [--nodes 300] [--repeats 5]
                                      [--against-cartpole 251,1001] [--counts 1024,4096]
                                      [--shape chains|bushy] [--cpu-time] [--parts cartpole,macro,node,train]

First, the node-level vector env through ``gym.make_vec("DreamGym/Replay-v1", N,
vectorization_mode="vector_entry_point")`` against Gymnasium's own CartPole vector env at N =
1,024 and 4,096 on 251- and 1,001-node worlds (target: >= 0.5x CartPole's env-steps/s).

Worlds: 8 root-and-chains worlds (``replay_speed.chain_world_records``, 8 branches each) of
``--nodes`` nodes, W = 4. Actions: uniform over the 10 macro actions (a masked one stops, as it
does in the single env), the same distribution for both contenders; node-level envs pick a random
legal selection per slot. Targets (set for the vector env): >= 10^6 macro steps/s at N = 1,024 on 300-node
worlds, >= 50x the single macro env, and the env < 5 % of MaskablePPO training time.
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import numpy as np

from benchmarks.replay_speed import branches_of, chain_world_records
from dream_gym.envs.env import ReplayEnv
from dream_gym.envs.vector_env import ReplayVectorEnv
from dream_gym.rl import MACRO_ACTIONS, MacroReplayEnv, MacroVectorEnv, sb3_vec_env
from dream_gym.world.tree import World, build_world
from dream_gym.world.writer import new_meta

BETAS = [0.1, 0.5, 0.9]


def worlds_of(nodes: int, count: int = 8, shape: str = "chains") -> list[World]:
    """``count`` worlds of a root and chains (8, or for ``shape="bushy"`` about the square root of
    ``nodes``: 31 at 1,001 nodes), W = 4."""
    return [build_world(new_meta(f"{shape}-{nodes}-{i}", "bench", workers=4),
                        chain_world_records(nodes, branches_of(shape, nodes), seed=i))
            for i in range(count)]


def vector_macro_rate(env: MacroVectorEnv, steps: int, rng: np.random.Generator) -> float:
    actions = rng.integers(len(MACRO_ACTIONS), size=(steps, env.num_envs))
    start = time.perf_counter()
    for row in actions:
        env.step(row)
    return steps * env.num_envs / (time.perf_counter() - start)


def single_macro_rate(env: MacroReplayEnv, steps: int, rng: np.random.Generator) -> float:
    actions = rng.integers(len(MACRO_ACTIONS), size=steps).tolist()
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def legal_picks(masks: np.ndarray, workers: int, rng: np.random.Generator) -> np.ndarray:
    """One random allowed value per slot (masks: (N, W * width))."""
    grid = masks.reshape(masks.shape[0], workers, -1)
    noise = rng.random(grid.shape) * grid
    return noise.argmax(axis=2)


def vector_node_rate(env: ReplayVectorEnv, steps: int, rng: np.random.Generator) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        env.step(legal_picks(env.action_masks(), env.workers, rng))
    return steps * env.num_envs / (time.perf_counter() - start)


def single_node_rate(env: ReplayEnv, steps: int, rng: np.random.Generator) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        action = legal_picks(env.action_masks()[None, :], env.session.workers, rng)[0]
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def interleaved(contenders: dict, repeats: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, measure in contenders.items():
            samples[name].append(measure())
    return {name: statistics.median(values) for name, values in samples.items()}


def macro_speed(worlds: list[World], num_envs: int, repeats: int) -> None:
    rng = np.random.default_rng(0)
    vector = MacroVectorEnv(worlds, num_envs, workers=4, beta=BETAS)
    vector.reset(seed=0)
    single = MacroReplayEnv(worlds, workers=4, beta=BETAS)
    single.reset(seed=0)
    vector_macro_rate(vector, 5, rng)  # compile the numba kernels before measuring
    cartpole = gym.make("CartPole-v1")
    rates = interleaved({
        f"MacroVectorEnv, N = {num_envs}": lambda: vector_macro_rate(vector, 100, rng),
        "MacroReplayEnv (single)": lambda: single_macro_rate(single, 5000, rng),
        "CartPole-v1 (gym.make, load reference)": lambda: cartpole_rate(cartpole, 5000),
    }, repeats)
    reference = rates["MacroReplayEnv (single)"]
    print(f"## Macro steps/s ({worlds[0].size}-node worlds, W = 4, random macro actions)")
    print("| env | steps/s | ratio to the single env | ratio to CartPole's step |")
    print("|---|---:|---:|---:|")
    for name, rate in rates.items():
        print(f"| {name} | {rate:,.0f} | {rate / reference:.1f} | {rate / rates['CartPole-v1 (gym.make, load reference)']:.1f} |")
    print()


def cartpole_rate(env, steps: int) -> float:
    """CartPole's gym.make steps/s with sampled actions: how fast this machine is right now."""
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def node_speed(worlds: list[World], num_envs: int, repeats: int) -> None:
    rng = np.random.default_rng(1)
    vector = ReplayVectorEnv(num_envs, world=worlds)
    vector.reset(seed=0)
    single = ReplayEnv(worlds[0])
    single.reset()
    vector_node_rate(vector, 3, rng)
    rates = interleaved({
        f"Replay-v0 vector env, N = {num_envs}": lambda: vector_node_rate(vector, 20, rng),
        "ReplayEnv (single)": lambda: single_node_rate(single, 3000, rng),
    }, repeats)
    reference = rates["ReplayEnv (single)"]
    print(f"## Node-level steps/s ({worlds[0].size}-node worlds, W = 4, random legal selections, masks included)")
    print("| env | steps/s | ratio to the single env |")
    print("|---|---:|---:|")
    for name, rate in rates.items():
        print(f"| {name} | {rate:,.0f} | {rate / reference:.1f} |")
    print()


def newest_batches(env: ReplayVectorEnv) -> np.ndarray:
    """W-wide batches in O(N x W): the root while it may open a branch, then the newest revealed
    nodes (mostly open leaves; a closed one is dropped, as the env's rules say). The root's
    slots are computed once (six numpy operations a step)."""
    replay, w = env.replay, env.workers
    slots = np.arange(w)[None, :]
    root_slots = replay.root_slots[:, None]
    newest = np.clip(replay.observed[:, None] - 1 + root_slots - slots, 0, env.max_nodes)
    newest[slots < root_slots] = 0
    return newest


# The clock of the CartPole table: wall time, or (--cpu-time) this process's CPU time.
CLOCK = time.perf_counter


def vector_wide_rate(env: ReplayVectorEnv, steps: int) -> float:
    start = CLOCK()
    for _ in range(steps):
        env.step(newest_batches(env))
    return steps * env.num_envs / (CLOCK() - start)


def cartpole_vector_rate(env, actions: np.ndarray, steps: int) -> float:
    start = CLOCK()
    for i in range(steps):
        env.step(actions[i % len(actions)])
    return steps * env.num_envs / (CLOCK() - start)


def vector_against_cartpole(sizes: list[int], counts: list[int], repeats: int, shape: str = "chains") -> None:
    """The Replay-v1 vector env (``gym.make_vec(..., "vector_entry_point")``, default arguments)
    against Gymnasium's CartPole vector env at each N, in the same run (blocks interleaved)."""
    rng = np.random.default_rng(2)
    chains = ", ".join(f"{branches_of(shape, n)}" for n in sizes)
    print(f"## Vector replay against Gymnasium's CartPole vector env (env-steps/s, W = 4, worlds of a root and "
          f"{chains} chains, W-wide batches of the root and the newest nodes; medians of interleaved blocks)")
    print("| world | N | Replay-v1 vector | CartPole-v1 vector | ratio | target |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in counts:
        cartpole = gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode="vector_entry_point")
        cartpole.reset(seed=0)
        actions = rng.integers(2, size=(64, n))
        envs = {}
        for nodes in sizes:
            env = gym.make_vec("DreamGym/Replay-v1", num_envs=n, vectorization_mode="vector_entry_point",
                               world=worlds_of(nodes, shape=shape))
            env.reset(seed=0)
            vector_wide_rate(env, 3)  # compile the kernels before measuring
            envs[nodes] = env
        steps = max(20, 40_000 // n)
        contenders = {"cartpole": lambda c=cartpole, a=actions, k=steps: cartpole_vector_rate(c, a, k)}
        contenders.update({nodes: lambda e=env, k=steps: vector_wide_rate(e, k) for nodes, env in envs.items()})
        rates = interleaved(contenders, repeats)
        for nodes in sizes:
            print(f"| {envs[nodes].unwrapped.pool.max_size:,} nodes | {n:,} | {rates[nodes]:,.0f} | "
                  f"{rates['cartpole']:,.0f} | {rates[nodes] / rates['cartpole']:.2f} | >= 0.5 |")
    print()


class TimedVecEnv:
    """Counts the seconds spent inside an SB3 VecEnv's step_wait and reset."""

    def __init__(self, venv):
        self.venv, self.seconds = venv, 0.0
        for name in ("step_wait", "reset", "env_method"):
            original = getattr(venv, name)
            setattr(venv, name, self._timed(original))

    def _timed(self, method):
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
        return call


def training_share(worlds: list[World], n_envs: int, timesteps: int) -> tuple[float, float, float]:
    """(env seconds, total seconds, training fps) of MaskablePPO on the SB3 adapter."""
    import torch
    from sb3_contrib import MaskablePPO

    torch.set_num_threads(1)
    venv = sb3_vec_env(worlds, n_envs, workers=4, beta=BETAS)
    timer = TimedVecEnv(venv)
    n_steps = max(8, 2048 // n_envs)
    model = MaskablePPO("MlpPolicy", venv, n_steps=n_steps, batch_size=256, n_epochs=10, seed=0, device="cpu",
                        policy_kwargs={"net_arch": {"pi": [64, 64], "vf": [64, 64]}})
    start = time.perf_counter()
    model.learn(total_timesteps=timesteps)
    total = time.perf_counter() - start
    return timer.seconds, total, model.num_timesteps / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--train-steps", type=int, default=40_960)
    parser.add_argument("--against-cartpole", default="251,1001",
                        help="world sizes of the vector table against CartPole's vector env ('' to skip)")
    parser.add_argument("--counts", default="1024,4096", help="N of that table")
    parser.add_argument("--shape", default="chains", choices=("chains", "bushy"),
                        help="the CartPole table's worlds: root + 8 chains, or a bushy root (31 chains at 1,001 nodes)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time the CartPole table by this process's CPU time instead of wall time")
    parser.add_argument("--parts", default="cartpole,macro,node,train", help="which tables to print")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
        print("(rates in CPU time of this process)")
    if "cartpole" in parts and args.against_cartpole:
        vector_against_cartpole([int(n) for n in args.against_cartpole.split(",")],
                                [int(n) for n in args.counts.split(",")], args.repeats, args.shape)
    if not parts & {"macro", "node", "train"}:
        return
    worlds = worlds_of(args.nodes)
    if "macro" in parts:
        macro_speed(worlds, args.num_envs, args.repeats)
    if "node" in parts:
        node_speed(worlds, args.num_envs, args.repeats)
    if "train" not in parts:
        return
    print("## MaskablePPO on the SB3 adapter: the env's share of training time")
    print("| n_envs | training fps | env seconds / total seconds | env share |")
    print("|---:|---:|---:|---:|")
    for n_envs in (4, 64):
        env_s, total_s, fps = training_share(worlds, n_envs, args.train_steps)
        print(f"| {n_envs} | {fps:,.0f} | {env_s:.2f} / {total_s:.1f} | {100 * env_s / total_s:.1f} % |")


if __name__ == "__main__":
    main()
