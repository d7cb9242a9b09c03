"""``PoolEpisodes``: what the single-episode RL envs share (the macro, node and options envs):
a pool of worlds, their replay settings taken once (:mod:`dream_gym.rl.pool_settings`), a world
and a beta drawn per episode (and, when given several, a (W, beta1, beta2) setting), one
ReplaySession per (world, beta, setting)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from dream_gym.envs.vector_episodes import WorldRef
from dream_gym.replay.objectives import Progress, ValueFn
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.settings import ReplaySettings, is_whole
from dream_gym.rl.pool_settings import pool_settings, settings_of
from dream_gym.world.registry import resolve_world


class PoolEpisodes(gym.Env):  # type: ignore[type-arg]
    """What the single pool envs share: the pool's worlds, a world and a beta drawn per episode
    (or given in ``reset``'s options), a (W, beta1, beta2) setting drawn per episode when the env
    was given several (``draws``), and one ReplaySession per (world, beta, setting), kept since a
    session caches its world's node views. With one setting nothing more is drawn, so an env's
    episodes are those it gave before settings could be drawn."""

    metadata: dict[str, Any] = {"render_modes": []}
    value_fn: ValueFn  # set by each env: the value whose changes are the rewards (see _reward)

    def _init_pool(
        self,
        worlds: Sequence[WorldRef],
        settings: ReplaySettings | None,
        replay: Mapping[str, object],
        draws: Sequence[tuple[int, float, float]] = (),
    ) -> None:
        """Take the pool and its settings: ``settings=`` and the replay keywords ``replay`` of the
        env's constructor (:func:`~dream_gym.rl.pool_settings.pool_settings`), and ``draws``."""
        if not worlds:
            raise ValueError(f"{type(self).__name__} needs at least one world")
        self.worlds = [resolve_world(w) for w in worlds]  # type: ignore[arg-type]
        pool = pool_settings(self, settings, replay)
        self.betas = pool.betas
        self.episode_settings = settings_of(pool.workers, pool.settings.beta1, pool.settings.beta2, draws)
        workers, beta1, beta2 = self.episode_settings[0]
        # every world of the pool at one W; the beta of an episode replaces the first one's
        self.settings = pool.settings.replace(workers=workers, beta1=beta1, beta2=beta2)
        self.workers = workers
        self.beta1, self.beta2, self.max_rounds = beta1, beta2, self.settings.max_rounds
        self._sessions: dict[tuple[int, float, int], ReplaySession] = {}
        self.session: ReplaySession | None = None
        self._value = 0.0

    def _session(self, world: int, beta: float, setting: int = 0) -> ReplaySession:
        key = (world, beta, setting)
        if key not in self._sessions:
            workers, beta1, beta2 = self.episode_settings[setting]
            settings = self.settings.replace(workers=workers, beta=beta, beta1=beta1, beta2=beta2)
            self._sessions[key] = ReplaySession(self.worlds[world], settings, strict=True)
        return self._sessions[key]

    def _start_episode(self, seed: int | None, options: dict[str, Any] | None) -> ReplaySession:
        """Seed, draw (or take) the world and beta, then the setting, reset their session; the value
        restarts at 0."""
        gym.Env.reset(self, seed=seed)
        options = options or {}
        unknown = sorted(set(options) - {"world", "beta"})
        if unknown:  # ignored, they would look taken
            raise ValueError(f"{type(self).__name__}.reset takes the options 'world' (an index of the pool) and "
                             f"'beta', got {', '.join(map(repr, unknown))}")
        if "world" in options:
            world = options["world"]
            if not is_whole(world):  # 1.7 was world 1
                raise ValueError(f"options['world'] is the index of a world of the pool, got {world!r}")
            world = int(world)
        else:
            world = int(self.np_random.integers(len(self.worlds)))
        if not 0 <= world < len(self.worlds):
            raise ValueError(f"world index {world} out of range (pool of {len(self.worlds)})")
        if "beta" in options:
            beta = float(options["beta"])
            if not 0.0 <= beta <= 1.0:
                raise ValueError(f"options['beta'] must be in [0, 1], got {options['beta']!r}")
        else:
            beta = self.betas[int(self.np_random.integers(len(self.betas)))] if len(self.betas) > 1 else self.betas[0]
        count = len(self.episode_settings)
        setting = int(self.np_random.integers(count)) if count > 1 else 0  # one setting: nothing drawn
        self.session = self._session(world, beta, setting)
        self.session.reset()
        self._value = 0.0
        return self.session

    def _reward(self) -> float:
        """The change of ``self.value_fn`` since the last call (0 at the episode's start), so an
        episode's rewards sum to the value of its final state."""
        session = self.session
        assert session is not None
        value = float(self.value_fn(Progress(session.best_q, session.attempts, session.rounds, session.beta,
                                             session.beta1, session.beta2, max(1, session.world.size - 1))))
        reward, self._value = value - self._value, value
        return reward

    def _info(self, batch: list[int]) -> dict[str, Any]:
        assert self.session is not None
        return {"world": self.session.world.id, "beta": self.session.beta, "replay_score": self.session.value,
                "batch": batch}


__all__ = ["PoolEpisodes", "WorldRef"]
