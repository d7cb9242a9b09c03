"""``dream-gym train``: (Maskable)PPO on a pool of worlds, crash-safe, with held-out curves.

Read top to bottom, as CleanRL's scripts are: the configuration (:class:`TrainConfig`, in
:mod:`dream_gym.training.config`), :func:`seed_everything`, the env (:func:`make_env`: the numba vector macro env, or the node env
in SB3's ``DummyVecEnv``), the model (:func:`make_model`), then :func:`train`, which resumes from
the last checkpoint when one exists. Each run folder holds:

* ``config.json``: the configuration (a resumed run must match it, except ``timesteps``);
* ``checkpoint-<step>.zip`` + ``progress.json`` (which names it): written durably (temp file,
  fsync, rename) every ``checkpoint_every`` steps, the checkpoint first, older ones deleted last,
  so a run killed with ``kill -9`` resumes from there (steps since the last checkpoint are redone;
  episodes in flight restart, so a resumed run is not bit-identical to an uninterrupted one).
  A resume reads a checkpoint of its own folder only (:func:`resume_checkpoint`), as data
  (:func:`load_checkpoint`);
* ``evals.jsonl``: every ``eval_every`` steps, v2, mean V and % of the oracle limit of the
  current policy on the train pool and on the held-out worlds (the held-out curve is reported,
  never used to select anything: the model kept is the last one);
* ``tb/``: TensorBoard logs (SB3's rollout and train scalars, plus ``eval/*``);
* ``model.zip`` and ``summary.json`` at the end (steps, seconds, fps, last evaluation).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from dream_gym.evaluation.leaderboard import leaderboard
from dream_gym.evaluation.world_specs import check_distinct_runs, check_held_out, resolve_worlds
from dream_gym.infrastructure.durable import read_json_object, read_jsonl, write_json_atomic, write_via
from dream_gym.infrastructure.extras import needs_extra
from dream_gym.infrastructure.locks import folder_lock, holds_only_its_lock
from dream_gym.infrastructure.printable import printable
from dream_gym.policy import EpisodeResult, run_episode
from dream_gym.replay.oracle import oracle_limit
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2
from dream_gym.rl.archs import ARCHITECTURES, model_policy, record_arch
from dream_gym.rl.model_zips import load_model_zip
from dream_gym.training.config import ALGOS, ARCHS, TrainConfig, config_fields, same_setting
from dream_gym.world.tree import World, prefix_world

#: What a resume reads of progress.json, and of what type.
PROGRESS_FIELDS = {"timesteps": int, "seconds": float, "checkpoint": str}
def seed_everything(seed: int, threads: int = 1, deterministic: bool = True) -> dict[str, Any]:
    """Seed python, numpy and torch, and pin what else changes torch's numbers on a CPU: the
    intra-op thread count (a different count splits reductions differently), one inter-op
    thread, and deterministic algorithms. Returns the settings (recorded in summary.json).

    Same seed, same settings, same machine: bit-identical weights and figures. Another CPU can
    round differently, and PPO amplifies any difference: hence figures as mean +- spread over seeds."""
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or inter-op work already ran in this process
        pass
    torch.use_deterministic_algorithms(deterministic)
    return {"seed": seed, "torch": torch.__version__, "intra_op_threads": torch.get_num_threads(),
            "inter_op_threads": torch.get_num_interop_threads(),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled()}


# --------------------------------------------------------------------------- env and model


def training_pool(config: TrainConfig) -> list[World]:
    """The worlds of ``config.worlds`` and, per ``config.prefixes`` entry n shorter than a world,
    that world stopped after n attempts (:func:`dream_gym.world.tree.prefix_world`)."""
    worlds = resolve_worlds(config.worlds)
    check_distinct_runs(worlds, "training worlds")
    prefixes = [prefix_world(w, n) for w in worlds for n in config.prefix_attempts if n < w.size - 1]
    return [*worlds, *prefixes]


def make_env(config: TrainConfig, worlds: Sequence[World]) -> Any:
    """The SB3 VecEnv of the run, the architecture's (the vector macro env, or n_envs node or
    options envs in a DummyVecEnv; env i seeded seed + i for its world and beta draws)."""
    env = ARCHITECTURES[config.arch].make_env(config, worlds, config.value_fn())
    env.seed(config.seed)
    return env


def algo_class(config: TrainConfig) -> Any:
    if config.algo == "maskable-ppo":
        from sb3_contrib import MaskablePPO

        return MaskablePPO
    from stable_baselines3 import PPO

    return PPO


def policy_class(config: TrainConfig) -> type:
    """The SB3 policy class of the run's architecture and algorithm ("MlpPolicy" resolved)."""
    policy, _ = ARCHITECTURES[config.arch].network(config)
    return algo_class(config).policy_aliases[policy] if isinstance(policy, str) else policy  # type: ignore[no-any-return]


def make_model(config: TrainConfig, env: Any) -> Any:
    """A fresh (Maskable)PPO with the architecture's network (an MLP on the macro or options
    features, or the permutation-equivariant node scorer), recording its architecture."""
    policy, policy_kwargs = ARCHITECTURES[config.arch].network(config)
    return record_arch(algo_class(config)(
        policy, env, learning_rate=config.learning_rate, n_steps=config.n_steps, batch_size=config.batch_size,
        n_epochs=config.n_epochs, gamma=config.gamma, gae_lambda=config.gae_lambda, clip_range=config.clip_range,
        ent_coef=config.ent_coef, policy_kwargs=policy_kwargs, seed=config.seed, device="cpu", verbose=0,
    ), config.arch)


# --------------------------------------------------------------------------- evaluation


def evaluate_policy(policy: Any, worlds: Sequence[World], betas: Sequence[float], workers: int,
                    limits: dict[str, float] | None = None, seed: int = 0) -> dict[str, float]:
    """v2, mean V and % of the oracle limit of a policy object over worlds x betas (in-process,
    the evaluation fast path; ``limits`` caches the worlds' oracle limits)."""
    limits = {} if limits is None else limits
    results: list[EpisodeResult] = []
    for world in worlds:
        if world.id not in limits:
            limits[world.id] = oracle_limit(world, workers, DEFAULT_BETA1, DEFAULT_BETA2).value
        for beta in betas:
            result = run_episode(policy, world, seed=seed, workers=workers, beta=beta)
            result.policy, result.limit = "model", limits[world.id]
            results.append(result)
    row = leaderboard(results).overall[0]
    return {"v2": row.v2, "auc": row.auc, "mean_v": row.mean_v, "limit_share": row.limit_share,
            "attempts": row.attempts, "rounds": row.rounds}


# --------------------------------------------------------------------------- durable files


def durable_json(path: Path, data: Any) -> None:
    write_json_atomic(path, data, indent=1, allow_nan=True)  # progress may hold NaN shares


def save_model(model: Any, path: Path) -> None:
    """``model.save`` made durable (SB3 writes the zip in place)."""
    write_via(path, model.save)


def read_evals(path: Path, up_to: int | None = None) -> list[dict[str, Any]]:
    """The evaluations of a run (those after step ``up_to`` are dropped: they will be redone)."""
    if not path.is_file():
        return []
    rows = read_jsonl(path)  # a line cut by a kill is left out: it is redone
    for number, row in enumerate(rows, 1):
        if not isinstance(row, dict) or not isinstance(row.get("timesteps"), int) or isinstance(row["timesteps"], bool):
            raise ValueError(f"{path}, line {number}: an evaluation without its step count; it is not what the run "
                             "wrote")
    return [r for r in rows if up_to is None or r["timesteps"] <= up_to]


# --------------------------------------------------------------------------- the run


class _RunCallback:
    """Checkpoints and evaluations at rollout ends (built lazily: SB3's BaseCallback needs sb3)."""

    @staticmethod
    def make(run: _Run) -> Any:
        from stable_baselines3.common.callbacks import BaseCallback

        class RunCallback(BaseCallback):  # type: ignore[misc]
            def _on_step(self) -> bool:
                return True

            def _on_rollout_end(self) -> None:
                run.on_rollout_end(self.model)

        return RunCallback()


class _Run:
    """The state of one training run folder."""

    def __init__(self, config: TrainConfig, worlds: list[World], heldout: list[World], log: Callable[[str], None]):
        self.config, self.worlds, self.heldout, self.log = config, worlds, heldout, log
        self.out = Path(config.out)
        self.limits: dict[str, float] = {}
        self.progress: dict[str, Any] = {"timesteps": 0, "seconds": 0.0}
        self._started = time.perf_counter()
        self._seconds_before = 0.0  # training seconds of earlier sessions of a resumed run
        self._eval_seconds = 0.0  # evaluations of this session (not training time)
        self._next_checkpoint = config.checkpoint_every
        self._next_eval = config.eval_every or config.timesteps

    def seconds(self) -> float:
        """Training seconds so far (all sessions of the run, evaluations excluded)."""
        return self._seconds_before + time.perf_counter() - self._started - self._eval_seconds

    def resume_from(self, progress: dict[str, Any]) -> None:
        done = int(progress["timesteps"])
        self.progress = dict(progress)
        self._seconds_before = float(progress["seconds"])
        every_c, every_e = self.config.checkpoint_every, self.config.eval_every
        self._next_checkpoint = (done // every_c + 1) * every_c if every_c else self.config.timesteps
        self._next_eval = (done // every_e + 1) * every_e if every_e else self.config.timesteps
        kept = read_evals(self.out / "evals.jsonl", up_to=done)
        write_via(self.out / "evals.jsonl", lambda tmp: tmp.write_text(
            "".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8"))

    def evaluate(self, model: Any) -> dict[str, Any]:
        started = time.perf_counter()
        policy = model_policy(model)
        row: dict[str, Any] = {"timesteps": int(model.num_timesteps), "seconds": round(self.seconds(), 3)}
        betas = self.config.beta_grid
        for label, worlds in (("train", self.worlds), ("heldout", self.heldout)):
            if worlds:
                for key, value in evaluate_policy(policy, worlds, betas, self.config.workers, self.limits).items():
                    row[f"{label}_{key}"] = value
                    model.logger.record(f"eval/{label}_{key}", value)
        model.logger.dump(model.num_timesteps)
        with open(self.out / "evals.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self._eval_seconds += time.perf_counter() - started
        said = [f"{name} v2 {row[f'{label}_v2']:.4f} V {row[f'{label}_mean_v']:.4f}"
                for label, name in (("train", "train"), ("heldout", "held out")) if f"{label}_v2" in row]
        self.log(f"step {row['timesteps']}: " + "; ".join(said))  # 80 columns; evals.jsonl has every figure
        return row

    def final_evaluation(self, model: Any) -> dict[str, Any]:
        """The evaluation at the last step: the one evals.jsonl already holds when a run was killed
        after writing it (its re-run then appends no second final row), else a new one."""
        steps = int(model.num_timesteps)
        done = [row for row in read_evals(self.out / "evals.jsonl") if row["timesteps"] == steps]
        return done[-1] if done else self.evaluate(model)

    def checkpoint(self, model: Any) -> None:
        """Write the checkpoint under a name of its own, then progress.json naming it, then drop the
        older ones: a kill at any point leaves progress.json and the checkpoint it names in step (one
        file written over the other could be killed between the two writes)."""
        name = f"checkpoint-{int(model.num_timesteps)}.zip"
        self.progress = {"timesteps": int(model.num_timesteps), "seconds": round(self.seconds(), 3),
                         "checkpoint": name}
        save_model(model, self.out / name)
        durable_json(self.out / "progress.json", self.progress)
        for old in self.out.glob("checkpoint*.zip"):
            if old.name != name:
                old.unlink()

    def on_rollout_end(self, model: Any) -> None:
        steps = model.num_timesteps
        if self.config.eval_every and steps >= self._next_eval and steps < self.config.timesteps:
            self.evaluate(model)
            self._next_eval = (steps // self.config.eval_every + 1) * self.config.eval_every
        if self.config.checkpoint_every and steps >= self._next_checkpoint:
            self.checkpoint(model)
            self._next_checkpoint = (steps // self.config.checkpoint_every + 1) * self.config.checkpoint_every


def resume_checkpoint(out: Path, progress: dict[str, Any]) -> Path | None:
    """The checkpoint ``progress.json`` names, if it exists: a relative path to a regular file
    below the run folder ``out`` (no absolute path, no ``..``, no symlink out of it), else
    ValueError and nothing is loaded. A folder's progress.json can come with a shared run: it
    must not make a resume load some other zip of the machine."""
    name = progress.get("checkpoint", "checkpoint.zip")  # runs of earlier versions: checkpoint.zip
    where = f"{out / 'progress.json'} names the checkpoint {printable(name, 200)!r}"
    relative = Path(name) if isinstance(name, str) and name.strip() else None
    if relative is None or relative.is_absolute() or ".." in relative.parts:
        raise ValueError(f"{where}: a checkpoint is a file name inside the run folder; nothing was loaded")
    path = out / relative
    if not os.path.lexists(path):
        return None  # killed before its first checkpoint: the run starts over
    real, folder = path.resolve(), out.resolve()
    if not real.is_relative_to(folder):
        raise ValueError(f"{where}, which leads out of the run folder (to {printable(real, 200)}); "
                         "nothing was loaded")
    if not real.is_file():
        raise ValueError(f"{where}, which is not a regular file; nothing was loaded")
    return real


def load_checkpoint(config: TrainConfig, path: Path, env: Any, trust_model: bool = False) -> Any:
    """The run's model from its checkpoint, loaded as data (:mod:`dream_gym.rl.model_zips`): its
    policy class must be the run's, its schedules are the config's constants, training goes on in
    ``env``. ``trust_model``: the old way, with the objects pickled in the zip."""
    return load_model_zip(path, trust=trust_model, env=env, policy_class=policy_class(config),
                          constants={"learning_rate": config.learning_rate, "clip_range": config.clip_range})


def _check_config(out: Path, config: TrainConfig) -> None:
    """Refuse to resume a run folder with another configuration (timesteps may change). The
    configuration is written only once the run's worlds and envs are built from it
    (:func:`_train`): a command refused for its arguments leaves no folder to refuse the next."""
    path = out / "config.json"
    mine = asdict(config)
    if not path.is_file() and not holds_only_its_lock(out):
        # its summary.json, evals.jsonl and model.zip would replace a dream's, a world's, anyone's
        raise FileExistsError(f"{out} is not empty and holds no training run (config.json): give a new or empty "
                              "--out")
    if path.is_file():
        theirs = read_json_object(path)
        defaults = asdict(TrainConfig(arch=config.arch))  # a field added since the run keeps its default
        # the folder is the run however it is spelled (out/rl, ./out/rl/, its absolute path, or
        # after a move); the steps may grow; the rest is compared as what it means
        differ = sorted(k for k in mine if k not in ("timesteps", "out")
                        and not same_setting(k, theirs.get(k, defaults[k]), mine[k]))
        if differ:
            raise ValueError(f"{out} holds a run with another configuration ({', '.join(differ)} differ): "
                             "use another --out, or the same options to resume it")


def train(config: TrainConfig, log: Callable[[str], None] = print, *, trust_model: bool = False) -> dict[str, Any]:
    """Train (or resume) the run of ``config``; return its summary (also in summary.json).

    A resume loads the checkpoint progress.json names, inside the run folder only, as data
    (:func:`resume_checkpoint`, :func:`load_checkpoint`); ``trust_model=True`` loads it with the
    objects pickled in it, for a run folder whose author you trust.

    The run holds its folder's lock (``<out>/.lock``, dream_gym.infrastructure.locks): a second train of the
    same folder is refused with LockedError naming this one. A finished run (its summary is of
    ``timesteps`` steps or more, and no checkpoint is past it) is returned as recorded: the same
    command run again trains nothing, evaluates nothing and appends nothing."""
    from dream_gym.policy_files.specs import missing_rl_package

    if (missing := missing_rl_package()) is not None:  # before the run folder is made
        raise RuntimeError(f"{needs_extra('training', 'rl')} (no module {missing!r})")
    out = Path(config.out)
    new = not out.exists()
    try:
        with folder_lock(out):
            _check_config(out, config)
            recorded = finished_summary(out, config)
            if recorded is not None:
                log(f"{out} is finished ({recorded['timesteps']} steps); nothing to do")
                return recorded
            return _train(config, out, log, trust_model)
    except Exception:
        if new and out.is_dir() and holds_only_its_lock(out):
            shutil.rmtree(out, ignore_errors=True)  # refused before anything was recorded: no folder left
        raise


def finished_summary(out: Path, config: TrainConfig) -> dict[str, Any] | None:
    """The summary of a finished run of at least ``config.timesteps`` steps (else None)."""
    summary_path, progress_path = out / "summary.json", out / "progress.json"
    if not (summary_path.is_file() and progress_path.is_file() and (out / "model.zip").is_file()):
        return None
    summary = read_json_object(summary_path, {"timesteps": int})
    progress = read_json_object(progress_path, PROGRESS_FIELDS)
    steps = int(summary.get("timesteps", 0))
    # a longer run resumed from this one and killed before its end has a later checkpoint: not finished
    if steps < config.timesteps or int(progress.get("timesteps", 0)) != steps:
        return None
    return dict(summary)


def _train(config: TrainConfig, out: Path, log: Callable[[str], None], trust_model: bool) -> dict[str, Any]:
    progress = read_json_object(out / "progress.json", PROGRESS_FIELDS) if (out / "progress.json").is_file() else {}
    checkpoint = resume_checkpoint(out, progress) if progress else None  # before anything is built
    settings = seed_everything(config.seed, config.torch_threads)
    worlds = training_pool(config)
    heldout = resolve_worlds(config.heldout) if config.heldout else []
    check_held_out(worlds, heldout, "training pool", "; give --held-out other worlds, or --held-out '' for none")
    env = make_env(config, worlds)
    durable_json(out / "config.json", asdict(config))  # the arguments held: the run is this folder's now
    run = _Run(config, worlds, heldout, log)

    if checkpoint is not None:
        model = record_arch(load_checkpoint(config, checkpoint, env, trust_model), config.arch)
        run.resume_from(progress)
        log(f"resuming {out} from step {model.num_timesteps}")
    else:
        model = make_model(config, env)
        (out / "evals.jsonl").unlink(missing_ok=True)
    from stable_baselines3.common.logger import configure

    model.set_logger(configure(str(out / "tb"), ["tensorboard"]))
    remaining = config.timesteps - model.num_timesteps
    if remaining > 0:
        model.learn(total_timesteps=remaining, callback=_RunCallback.make(run), reset_num_timesteps=False)
    run.checkpoint(model)
    seconds = run.seconds()
    final = run.final_evaluation(model)
    save_model(model, out / "model.zip")
    summary = {"config": asdict(config), "determinism": settings, "timesteps": int(model.num_timesteps),
               "seconds": seconds, "fps": model.num_timesteps / seconds if seconds else float("nan"),
               "train_worlds": [w.id for w in worlds], "heldout_worlds": [w.id for w in heldout], "final": final}
    durable_json(out / "summary.json", summary)
    log(f"trained {summary['timesteps']} steps in {seconds:.1f}s ({summary['fps']:.0f} steps/s); "
        f"saved {out / 'model.zip'}")
    return summary


__all__ = ["ALGOS", "ARCHS", "TrainConfig", "config_fields", "evaluate_policy", "load_checkpoint", "make_env",
           "make_model", "policy_class", "resume_checkpoint", "seed_everything", "train", "training_pool"]
