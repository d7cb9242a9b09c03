"""Gymnasium adapter over a replay session: ``gym.make("DreamGym/Replay-v1", world=...)``."""

from __future__ import annotations

import copy
import mmap
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from dream_gym.envs.buffers import BufferPool, bases_of, read_only_arrays
from dream_gym.envs.frontier import FrontierCounts, add_counts, drop_id, frontier_of, ones_for, set_count
from dream_gym.envs.ids import SpecOfOneWorld
from dream_gym.envs.spaces import (
    DEFAULT_MAX_NODES,
    GLOBAL_COLUMNS,
    NODE_COLUMNS,
    PADDING_ROW,
    capacity_for,
    observation_space,
)
from dream_gym.replay.layout import (
    END_FULL,
    END_LIMIT,
    END_RECORD,
    END_TERMINATED,
    END_TRUNCATED,
    F_REWARD,
    F_VALUE,
    H_DST,
    H_MODE,
    H_N,
    H_O_REFUSED,
    H_OBSERVED,
    H_OUTLEN,
    H_REFUSALS,
    H_REFUSED,
    H_ROOT_SLOTS,
    H_ROUNDS,
    H_STATUS,
    H_STEP_REFUSED,
    MODE_RESET,
    MODE_STEP,
    OUT_HEADER,
    STATUS_ILLEGAL,
)
from dream_gym.replay.mechanics import ROOT, IllegalBatchError, judge_batch, refused_among, why_illegal
from dream_gym.replay.node_stores import RevealedNodes
from dream_gym.replay.score import DEFAULT_BETA1, DEFAULT_BETA2
from dream_gym.replay.session import ReplaySession, world_fields
from dream_gym.replay.settings import DEFAULT_BETA, DEFAULT_MAX_ATTEMPTS, ReplaySettings, check_flags
from dream_gym.replay.view import PrefixView, render_tree
from dream_gym.world.registry import is_path, resolve_world
from dream_gym.world.tree import World

_new_object = object.__new__
_refs = sys.getrefcount
_TRUNCATED_BY = {END_TRUNCATED: "max_rounds", END_FULL: "capacity", END_LIMIT: "max_attempts", END_RECORD: "record"}

RENDER_MODES = ("human", "ansi", "rgb_array")


class ReplayEnv(SpecOfOneWorld, gym.Env):  # type: ignore[type-arg]
    """Replay of a recorded discovery tree: choose where the next attempts start.

    ## Description
    A recorded world is the search tree of a finished AI discovery run (root = the initial
    program; every other node one generate-and-evaluate attempt). Each step the policy submits a
    batch of at most W selections from the revealed tree; each selection reveals one recorded
    attempt: selecting the root (id 0) opens the next branch in creation order and may be
    repeated up to ``root_slots`` times; selecting a revealed non-root node reveals its
    earliest-created unrevealed recorded child. Nothing is generated: replay only reveals what
    was recorded.

    ## Action Space
    ``MultiDiscrete([max_nodes + 1] * W)``: each slot holds an observed node id, or
    ``max_nodes`` for "no selection". Every element of the space is a valid action: selections
    that break the reveal rules (an id not revealed yet, off the frontier, a non-root id twice,
    the root more often than ``root_slots``) are dropped and listed in ``info["dropped"]`` with
    the reason, and the legal rest is applied. **A batch with no legal selection left (all
    padding, all illegal, or ``[]``) is the empty batch: it stops the episode** (terminated,
    reward 0; ``info["illegal_stop"]`` is True when the action held a selection,
    padding aside: all padding is a stop as ``[]`` is). Programmatic
    callers may pass any sequence of ids (``[0, 0, 3]``). With ``strict=True`` an illegal
    selection raises :class:`dream_gym.replay.mechanics.IllegalBatchError` naming the id and the reason
    instead.

    Masks, as Gymnasium's Taxi gives them: ``info["action_mask"]`` is an ``int8`` array of shape
    ``(W, max_nodes + 1)``, row j the mask of slot j (1 where the slot may hold that value: the
    frontier, the padding value, and the root in the first ``root_slots`` slots). Masked sampling
    takes one mask per slot: ``env.action_space.sample(mask=tuple(info["action_mask"]))`` draws
    a selection per slot from the legal ones (two slots may still draw the same non-root node:
    the second is dropped). One array rather than a tuple, so that Gymnasium's vector envs stack
    the masks of their sub-envs. ``action_masks()`` gives the same masks as one flat bool array,
    the layout sb3-contrib's MaskablePPO expects.

    ## Observation Space
    A ``Dict`` of three boxes; observed ids index the rows:

    | key     | shape          | dtype   | content                                            |
    |---------|----------------|---------|----------------------------------------------------|
    | nodes   | (max_nodes, 5) | int32   | columns revealed (1 for ids in use), parent (-1    |
    |         |                |         | for the root and padding), depth, scored (1 for a  |
    |         |                |         | valid score), frontier (1 where selectable)        |
    | score   | (max_nodes,)   | float64 | raw score, higher is better (0 where unscored or   |
    |         |                |         | padding)                                           |
    | globals | (4,)           | float64 | root_slots, baseline, rounds (k), attempts (N)     |

    Column names: :data:`NODE_COLUMNS`, :data:`GLOBAL_COLUMNS`. Scores are raw, never
    normalised: q depends on the world's best recorded score, which a policy must not learn.
    The capacity ``max_nodes`` is :data:`DEFAULT_MAX_NODES` (1,024) unless given, whatever the
    world: the shape of an observation never tells the world's size. Nothing in the
    observation, the spaces or the info depends on unrevealed nodes, except through the frontier
    (a revealed leaf off the frontier is where the original run stopped; ``root_slots`` tells
    how many more branches the root may open, capped at W). No later step changes an
    observation (or action mask) the caller still holds: observations are read-only arrays (they
    cannot be made writeable; copy one to change it), and the env writes a buffer again only
    once nobody holds it or any numpy view of it, so a step writes the rows it changed instead
    of copying max_nodes rows (``share_obs=True``: one set of buffers, overwritten by every step,
    for callers that copy what they keep).

    ## Rewards
    The change of the replay score ``V = max q - beta1 * N + beta2 * N / max(1, k)`` caused by
    the step (V is 0 before the first step), so an episode's rewards sum to its final V. q is 0
    at the baseline and 1 at the world's best recorded score: the reward is the one quantity a
    step returns that depends on a recorded fact the policy has not seen (the best recorded
    score, through q's scale). It is the training signal, never part of the observation or info.

    ## Starting State
    Only the root is revealed. The env is deterministic: ``seed`` changes nothing.

    ## Episode End
    Terminated when the batch has no legal selection (see Action Space) or nothing is left to
    reveal. Truncated when ``k`` reaches ``max_rounds``; with an explicit ``max_nodes``
    smaller than the world, when the next batch might not fit in the free rows (fewer free rows
    than ``min(W, root_slots + open nodes)``: decided from the frontier alone;
    ``info["capacity_full"]``, and a warning the first time); and when a batch would take the
    episode past ``max_attempts`` attempts (default
    :data:`~dream_gym.replay.settings.DEFAULT_MAX_ATTEMPTS`, 10,000): that batch is not applied (the
    observation stays, reward 0). In request mode, a batch the record can answer none of truncates
    the episode too (nothing applied, reward 0; ``info["cut_short"]``). ``info["truncated_by"]``
    says which: ``"max_rounds"``, ``"capacity"``, ``"max_attempts"`` (then
    ``env.unwrapped.session.limit_error`` holds the message) or ``"record"``. A world that fits the capacity and has at most ``max_attempts`` attempts is never
    cut short; one bigger than the default capacity is an error at make time.

    ## Info
    ``view`` (a :class:`dream_gym.replay.view.PrefixView`, the policy interface's input),
    ``frontier`` ({id: allowed multiplicity}, a read-only dict: :class:`FrontierCounts`),
    ``action_mask`` (see Action Space), ``attempts``
    (N), ``rounds`` (k), ``new_ids``, ``dropped`` ([(selection, reason)], empty unless
    strict=False dropped something), ``refused`` (the step's selections an online run of the
    rule would have made that the record could not answer: dropped ones under the rule's
    frontier, refused ones in request mode) and ``coverage`` (N / (N + refused so far): the
    share of the episode's requests the record answered; both count only what the policy
    chose, docs/concepts/coverage.md) and, when they apply, ``illegal_stop``, ``capacity_full``,
    ``cut_short`` (the record ended the episode: nothing left to reveal, or a batch it could
    answer none of) and ``truncated_by``. V so far is the sum of the rewards:
    ``env.unwrapped.value`` (with ``env.unwrapped.attempts`` and ``env.unwrapped.rounds``, read
    from the engine at no cost; ``env.unwrapped.session.value`` gives the same).
    Infos, observations, views and the env itself pickle and deep-copy (async vector envs and
    SB3's vector envs need it); a copied or unpickled env continues the same episode.

    ## Rendering
    ``render_mode="human"``: the text drawing printed to standard output after ``reset`` and
    every step (``render()`` returns None). ``"ansi"``: the same text drawing of the revealed
    tree, returned by ``render()``. ``"rgb_array"``: the revealed
    tree as an image (``uint8`` array, 480 x 640 x 3; nodes at their depth, coloured by score,
    the frontier ringed, the best revealed node starred), drawn with matplotlib's Agg canvas
    without touching pyplot or the caller's backend: the frames ``gymnasium.wrappers.RecordVideo``
    records (it needs moviepy), and what SB3's ``make_vec_env`` asks for.

    ## Arguments
    ``world`` (folder, shipped world name, ``namespace/name-vN/<world>`` or a World),
    ``workers`` (W, default the world's), ``beta`` (budget preference shown to policies, in
    [0, 1]), ``beta1``, ``beta2`` (score coefficients), ``max_rounds`` (K2, default none),
    ``frontier`` ("leaves" | "any", default the world's), ``max_nodes`` (observation capacity,
    default :data:`DEFAULT_MAX_NODES`), ``strict`` (default False), ``share_obs`` (default
    False), ``render_mode`` (None | "human" | "ansi" | "rgb_array"), ``max_attempts`` (the most attempts
    one episode may make, default 10,000), ``requests`` (request mode, default False: the
    frontier, the mask and the root's slots are an online run's, every revealed node the rule
    lets it continue and the root W times; a selection the record cannot answer is refused,
    reveals nothing, costs nothing and is listed in ``info["refused"]``; the vector envs do not
    have it).

    ## Registered ids
    ``DreamGym/Replay-v1`` (pass ``world=``) and one ``DreamGym/<world>-v1`` per shipped world,
    whose kwargs hold the full dataset reference (``{"world": "dream-gym/recorded-v1/<world>"}``)
    and which replays that world only (``world=`` naming another is an error: make
    ``DreamGym/Replay-v1`` for it).
    The ``-vN`` of an id is this env's behaviour version (below); the dataset's own version is
    the ``-vN`` inside that reference. All have ``vector_entry_point``
    :class:`dream_gym.envs.vector_env.ReplayVectorEnv`.

    ## Version History
    * v1, a shipped world's id replays that world only (same spaces, values and episodes):
      ``gym.make("DreamGym/<world>-v1", world=other)`` is an error naming the id's world; before,
      it replayed the other world under the first one's id.
    * v1, with ``render_mode="human"`` (same spaces, values and episodes): the text drawing
      printed after ``reset`` and every step; before, Gymnasium wrapped the env in its
      ``HumanRendering``, which needs pygame and an image.
    * v1, with reset options checked (same spaces, values and episodes): ``reset(options=...)``
      with any option is an error naming it (the env takes none; W, beta and the rest are
      arguments of ``gym.make``); before, they were ignored, ``beta`` among them. A ``beta`` that
      is no number is an error naming it (before, a ``TypeError`` from a comparison).
    * v1, a step's cost no longer grows with the frontier (same spaces, values and episodes):
      ``info["frontier"]`` is a read-only dict (:class:`FrontierCounts`; before, a fresh dict the
      caller could change: change ``dict(info["frontier"])`` instead) that the env brings up to
      date with the ids a step changed; ``env.unwrapped.value``, ``.attempts`` and ``.rounds``;
      the session's ``value``, ``attempts``, ``rounds`` and ``workers`` are read from the engine
      without playing the batches the session has not seen.
    * v1, with coverage (same spaces, values and episodes): ``info["refused"]``, ``info["coverage"]``
      and ``info["cut_short"]`` (coverage); the ``requests`` argument (request mode) and
      ``info["truncated_by"] == "record"``.
    * v1, end of 2026-12 (same spaces, values and episodes on every world of at most
      ``max_attempts`` + 1 nodes, which holds every shipped world and every world that fits the
      default capacity): ``max_attempts`` (default 10,000) truncates an episode whose next batch
      would take it past that many attempts, the batch not applied; ``info["truncated_by"]``
      says why an episode was truncated (``"max_rounds"``, ``"capacity"``, ``"max_attempts"``).
    * v1, later in 2026-12 (same spaces, values and episodes): observations and action masks
      are read-only arrays over buffers the env writes again once nobody holds them (before: a
      fresh writeable copy every step); a step's cost no longer grows with ``max_nodes``;
      ``info["view"]`` fills its fields, and builds its node views, when first read; the env
      steps its episode in compiled code and ``env.session`` follows it when read; ``step``
      before ``reset`` is an error.
    * v1 (2026-12): the default capacity is the constant :data:`DEFAULT_MAX_NODES` instead of
      the world's size (which the observation's shape told); a world bigger than it is an error
      at make time naming ``max_nodes``; an explicit smaller capacity truncates when the next
      batch might not fit (from the frontier; before, from the world's size).
      ``info["replay_score"]`` removed (through q it told the world's best recorded score);
      ``info["action_mask"]`` added; ``render_mode="rgb_array"``; the env, its infos and views
      pickle and deep-copy. The v0 ids (``DreamGym/Replay-v0``, ``DreamGym/<world>-v0`` of
      recorded-v0 worlds) stay registered as aliases of v1; Gymnasium warns that they are out
      of date.
    * v0 (unreleased; changes before the first release are listed here):
      - 2026-12: every element of the action space is valid (``strict=False`` by default; an
        action with no legal selection stops); capacity defaults to the world's size; the
        observation is three arrays (``nodes``, ``score``, ``globals``) instead of ten, written
        row by row. Then a faster step (same spaces, still a fresh observation every step):
        ``info["frontier"]`` lists its ids in frontier order (the root first).
      - 2026-11: initial version.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(
        self,
        world: World | str | os.PathLike[str],
        workers: int | None = None,
        beta: float = DEFAULT_BETA,
        beta1: float = DEFAULT_BETA1,
        beta2: float = DEFAULT_BETA2,
        max_rounds: int | None = None,
        frontier: str | None = None,
        max_nodes: int | None = None,
        strict: bool = False,
        share_obs: bool = False,
        render_mode: str | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        requests: bool = False,
    ):
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode must be None, 'human', 'ansi' or 'rgb_array', got {render_mode!r}")
        check_flags(strict=strict, share_obs=share_obs)
        resolved = resolve_world(world)  # first: a reference that is none (None, a number) is named so
        # What pickling rebuilds the env from (a copy replays the episode's batches on it).
        self._arguments: dict[str, Any] = {
            "world": _portable_reference(world), "workers": workers, "beta": beta, "beta1": beta1, "beta2": beta2,
            "max_rounds": max_rounds, "frontier": frontier, "max_nodes": max_nodes, "strict": strict,
            "share_obs": share_obs, "render_mode": render_mode, "max_attempts": max_attempts, "requests": requests,
        }
        settings = ReplaySettings(workers, beta, beta1, beta2, max_rounds, frontier, max_attempts, requests)
        self._session = _FollowingSession(resolved, settings, strict=strict)
        session = self._session
        self.settings = session.settings  # resolved on the world: the W and rule replayed
        self.world = session.world
        self.workers = workers = session.workers
        self.strict = bool(strict)
        self.max_nodes = capacity_for(max_nodes, self.world.size, workers, f"world {self.world.id!r}")
        self._warned_full = False
        self.share_obs = bool(share_obs)
        self._use_render_mode(render_mode)
        self.action_space = spaces.MultiDiscrete(np.full(workers, self.max_nodes + 1, dtype=np.int64))
        self.observation_space = observation_space(self.max_nodes, workers)
        # The episode lives in two flat arrays stepped by one compiled call (numba loads here, on
        # the first env, not with dream_gym).
        from dream_gym.replay import engine

        self._kernel = engine.episode_kernel()
        self.requests = session.replay.requests
        arrays = engine.EpisodeArrays(self.world, workers, self.max_nodes, session.replay.frontier_rule == "leaves",
                                      max_rounds, session.beta1, session.beta2, session.max_attempts, self.requests)
        self._engine_arrays = arrays
        self._state, self._floats = arrays.S, arrays.F
        self._smv: Any = memoryview(self._state)  # type: ignore[arg-type]  # scalar reads and writes
        self._fmv: Any = memoryview(self._floats)  # type: ignore[arg-type]
        self._o_batch, self._o_out = arrays.offsets["batch"], arrays.offsets["out"]
        self._o_open, self._o_revealed = arrays.offsets["open"], arrays.offsets["revealed"]
        self._o_sets = arrays.offsets["sets"]
        self._batch_array = self._state[self._o_batch: self._o_batch + workers]
        self._fields = world_fields(self.world)
        self._field_of = self._fields.__getitem__
        self._layout = engine.set_layout(workers, self.max_nodes)
        self._constants = session._frozen_constants
        self._leaves_rule = session.replay.frontier_rule == "leaves"
        # Observation buffer sets (nodes, score, globals, action mask): each step brings one that
        # no caller holds up to date (writing the rows revealed since it was last written) and
        # returns it (dream_gym.envs.buffers).
        self._pool: BufferPool[_ObservationSet] = BufferPool(self._new_set, self._forget_set)
        self._sets = self._pool.sets
        # Per buffer set, info["frontier"] as of the rows it holds: a step brings it up to date
        # with the ids it changed (a copy first when someone holds it).
        self._fronts: list[FrontierCounts] = [FrontierCounts()]
        if self.share_obs:
            nodes, scores, glob, mask = self._sets[0].out
            self._shared = {"nodes": nodes, "score": scores, "globals": glob}
            self._shared_mask = mask
        # The episode: its revealed nodes (what its views share), its batches, how it ended.
        self._episode = 0  # episodes started (0: never reset)
        self._revealed = RevealedNodes()
        # the end of each applied batch in revealed.parents (a batch's selections are the parents
        # of the nodes it revealed): ints, so a long episode adds no object the collector scans
        self._batch_ends: list[int] = []
        self._done = False
        self._stopped = False  # by an empty batch
        self._cut = False  # truncated because the capacity cannot hold the next batch
        self._refused = 0  # the size of the batch refused at max_attempts (which ended the episode)
        self._cut_short = False  # the record, not the policy, ended the episode (coverage)
        self._view: PrefixView | None = None
        self._ready = False  # reset, and the episode not over
        # what step reads on every call, in one attribute
        self._step_refs = (self._state, self._smv, self._fmv, self._o_batch, workers, self._kernel, self._pool,
                           self._o_out, self._field_of, self._constants, self._fronts)
        self._episode_lists = (self._revealed, self._revealed.parents, self._revealed.fixed, self._batch_ends)
        # env.session follows the episode when read (it plays the batches it has not seen)
        self._followed: tuple[int, int, bool] = (0, 0, False)  # (episode, batches, done) it has played
        self._followed_batches = 0
        self._session._follow = self._follow
        self._session._engine_read = self._engine_read

    # -- the session, brought up to date when read ----------------------------------------
    @property
    def session(self) -> ReplaySession:
        """The :class:`~dream_gym.replay.session.ReplaySession` of the current episode (V so far is its
        ``value``). The env steps its own arrays; the session's ``value``, ``attempts``,
        ``rounds`` and ``workers`` are read from them, and its other state plays the batches it
        has not seen when first read after a step (a Python session step per batch)."""
        return self._session

    @property
    def value(self) -> float:
        """V so far: the replay score of the episode's revealed nodes (0 before the first step),
        the sum of its rewards; the same value as ``session.value``, read from the engine."""
        return float(self._fmv[F_VALUE]) if self._episode else 0.0

    @property
    def attempts(self) -> int:
        """N so far: the attempts the episode revealed (``info["attempts"]``)."""
        return int(self._smv[H_OBSERVED]) - 1 if self._episode else 0

    @property
    def rounds(self) -> int:
        """k so far: the batches the episode applied (``info["rounds"]``)."""
        return int(self._smv[H_ROUNDS]) if self._episode else 0

    def _engine_read(self, name: str) -> Any:
        """The session's V, N, k or W, from the engine (what following the env would give)."""
        if name == "workers":
            return self.workers
        return self.value if name == "value" else self.attempts if name == "attempts" else self.rounds

    def _applied_batches(self, start: int) -> list[list[int]]:
        """The episode's applied batches (their legal parts) from the ``start``-th on."""
        parents, ends = self._revealed.parents, self._batch_ends
        begin = ends[start - 1] if start else 1  # parents[0] is the root's (none)
        batches = []
        for end in ends[start:]:
            batches.append(parents[begin:end])
            begin = end
        return batches

    def _follow(self) -> None:
        """Bring the session to the env's episode (called before any attribute of it is read)."""
        now = (self._episode, len(self._batch_ends), self._done)
        if self._followed == now:
            return
        session = self._session
        session._follow = None  # its own reads while it plays need no following
        try:
            if self._followed[0] != self._episode:
                session.reset()
                self._followed_batches = 0
            for batch in self._applied_batches(self._followed_batches):
                session.step(batch)
            self._followed_batches = len(self._batch_ends)
            if not session.done:
                if self._stopped:
                    session.step([])
                elif self._cut:
                    session.truncate()
                elif self._refused:
                    session._refuse_over_limit(self._refused, [])
                elif self._cut_short:  # request mode: a batch of refusals ended it
                    session.truncated = session.done = True
            # what the session's own steps (the applied batches) cannot know: the refusals
            session.refused = int(self._smv[H_REFUSALS])
            session.cut_short = session.cut_short or self._cut_short
            self._followed = now
        finally:
            session._follow = self._follow

    # -- observation buffers ----------------------------------------------------------------
    def _new_set(self) -> _ObservationSet:
        """A buffer set in its first state (padding rows, the padding value allowed): one block of
        memory that the engine writes (``buffer``) and callers read through ``out``."""
        layout, size = self._layout
        # private: the kernel merges neighbouring private anonymous mappings, never shared ones, and a
        # caller keeping every observation (or info: the mask is in the set) kept one mapping each,
        # up to the process's limit (~65,000), where the next set failed with "Cannot allocate memory"
        memory = mmap.mmap(-1, max(size, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        buffer = np.frombuffer(memory, dtype=np.uint8)
        (_, nodes_shape, _), _, _, (_, mask_shape, mask_at) = layout
        np.frombuffer(memory, dtype=np.int32, count=int(np.prod(nodes_shape))).reshape(nodes_shape)[:] = PADDING_ROW
        buffer[mask_at: mask_at + int(np.prod(mask_shape))].reshape(mask_shape)[:, -1] = 1  # padding: allowed
        out = read_only_arrays(memoryview(memory).toreadonly(), layout)
        return _ObservationSet(out, bases_of(out), buffer)  # type: ignore[arg-type]

    def _forget_set(self, index: int) -> None:
        """Set ``index`` is new: nothing of an episode is written in it, and its frontier is empty."""
        if index == len(self._fronts):
            self._fronts.append(FrontierCounts())
        else:
            self._fronts[index] = FrontierCounts()
        self._state[self._o_sets + 2 * index: self._o_sets + 2 * index + 2] = (0, -1)

    def _free_set(self) -> int:
        """A buffer set nobody but the env holds (:meth:`BufferPool.free`); set 0 when the
        observation is shared. (:meth:`step` has the common case inline.)"""
        return 0 if self.share_obs else self._pool.free()

    def _run(self, mode: int) -> int:
        """One call of the engine on a free buffer set (the batch is in place); its index."""
        index = self._free_set()
        smv = self._smv
        smv[H_MODE] = mode
        smv[H_DST] = index
        self._kernel(self._state, self._sets[index].buffer)
        return index

    # -- gymnasium API ----------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)  # the replay is deterministic; seeding only for API conformance
        if options:  # ignored, a beta given here would look taken
            raise ValueError(f"{type(self).__name__}.reset takes no options, got {', '.join(map(repr, options))}: W, "
                             "beta and the other replay settings are arguments of gym.make")
        self._episode += 1
        self._revealed = revealed = RevealedNodes()
        revealed.fixed.append(self._fields[ROOT])
        revealed.parents.append(-1)
        self._batch_ends = []
        self._episode_lists = (revealed, revealed.parents, revealed.fixed, self._batch_ends)
        self._done = self._stopped = self._cut = self._cut_short = False
        self._refused = 0
        self._ready = True
        index = self._run(MODE_RESET)
        self._smv[H_MODE] = MODE_STEP
        obs, _, _, _, info = self._result(index, [])
        info["new_ids"] = [ROOT]
        if self.render_mode == "human":
            self.render()
        return obs, info

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        # The hot path, inline: a list of plain ints or an integer array of at most W values is
        # written straight into the engine's batch; anything else, and a batch the engine finds
        # illegal, is judged in Python (_step_judged).
        if not self._ready:
            raise RuntimeError("the episode is over; call reset() first" if self._done else "call reset() before step()")
        S, smv, fmv, at, workers, kernel, pool, out_at, field_of, constants, fronts = self._step_refs
        if type(action) is list:
            if len(action) > workers:
                return self._step_judged(action)
            n = 0
            try:
                for selection in action:
                    if type(selection) is not int:
                        return self._step_judged(action)
                    smv[at + n] = selection
                    n += 1
            except (OverflowError, ValueError):  # past int64: no id (memoryview says ValueError)
                return self._step_judged(action)
        elif type(action) is np.ndarray and action.dtype.kind == "i" and action.size <= workers:
            n = action.size
            self._batch_array[:n] = action.reshape(-1)
        else:
            return self._step_judged(action)
        smv[H_N] = n
        # a free buffer set (_free_set, inline): the one after the last returned, usually
        sets = pool.sets
        index = pool.last + 1
        if index == len(sets):
            index = 0
        (nodes, scores, glob, mask), (nodes_base, mask_base), buffer = sets[index]
        # each: the set's tuple, this frame's name, getrefcount's argument (a base: its array too)
        if not (_refs(nodes) == 3 and _refs(scores) == 3 and _refs(glob) == 3 and _refs(mask) == 3
                and _refs(nodes_base) == 4 and _refs(mask_base) == 4) and not self.share_obs:
            del nodes, scores, glob, mask, nodes_base, mask_base
            index = self._free_set()
            (nodes, scores, glob, mask), _, buffer = sets[index]
        smv[H_DST] = index
        kernel(S, buffer)
        if smv[H_STATUS] == STATUS_ILLEGAL:
            del nodes, scores, glob, mask
            return self._step_judged(action)
        # the engine's output (_result, inline): header, kept selections, their nodes, the
        # frontier or its changes since the set was written (frontier_of, inline)
        out = smv[out_at: out_at + smv[H_OUTLEN]].tolist()
        k, first, root_slots, rounds, end, removed = out[:OUT_HEADER]
        revealed, parents, fixed, batch_ends = self._episode_lists
        if k:
            parents.extend(out[OUT_HEADER: OUT_HEADER + k])
            fixed.extend(map(field_of, out[OUT_HEADER + k: OUT_HEADER + 2 * k]))
            batch_ends.append(len(parents))
        added_at = OUT_HEADER + 2 * k  # the whole frontier, or the ids removed, then the ids added
        if removed < 0:
            counts = fronts[index] = FrontierCounts(ones_for(out[added_at:], 1))
            if root_slots:
                set_count(counts, 0, root_slots)
        else:
            counts = fronts[index]
            if _refs(counts) != 3:  # the list, this frame's name, getrefcount's argument
                counts = fronts[index] = FrontierCounts(counts)
            if removed:
                for obs_id in out[added_at: added_at + removed]:
                    drop_id(counts, obs_id)
                added_at += removed
            if root_slots:
                set_count(counts, 0, root_slots)
            elif 0 in counts:
                drop_id(counts, 0)
            if len(out) > added_at:
                add_counts(counts, ones_for(out[added_at:], 1))
        observed = first + k
        self._view = view = _new_object(PrefixView)
        view.__dict__["_lazy"] = (revealed, observed, counts, root_slots, rounds, observed - 1, constants)
        pool.last = index
        refused = smv[H_STEP_REFUSED]  # request mode's refusals of this batch
        info = {"view": view, "frontier": counts, "action_mask": mask, "attempts": observed - 1,
                "rounds": rounds, "new_ids": list(range(first, observed)), "dropped": [],
                "refused": self._step_refusals(refused) if refused else [],
                "coverage": (observed - 1) / (observed - 1 + smv[H_REFUSALS]) if smv[H_REFUSALS] else 1.0}
        if end:
            self._end(end, k, info)
        # every end from END_TRUNCATED on truncates the episode
        return {"nodes": nodes, "score": scores, "globals": glob}, fmv[F_REWARD], end == END_TERMINATED, \
            end >= END_TRUNCATED, info

    def _step_refusals(self, count: int) -> list[int]:
        """The selections of the last batch the record refused (the engine's refused section)."""
        at = self._smv[H_O_REFUSED]
        return self._state[at: at + count].tolist()

    def _end(self, end: int, k: int, info: dict[str, Any]) -> None:
        self._done, self._ready = True, False
        if end == END_TERMINATED:
            self._stopped = not k  # an empty batch (else nothing is left to reveal)
            # nothing left to reveal, or a batch that asked only for what the record does not hold
            self._cut_short = bool(k) or bool(info["refused"])
            if self._cut_short:
                info["cut_short"] = True
            return
        if end == END_RECORD:
            self._cut_short = info["cut_short"] = True
        info["truncated_by"] = _TRUNCATED_BY[end]
        if end == END_FULL:  # the capacity cannot hold the next batch
            self._cut = True
            info["capacity_full"] = True
            self._warn_full()
        elif end == END_LIMIT:  # the batch would have taken the episode past max_attempts
            self._refused = self._smv[H_REFUSED]

    def _step_judged(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """A batch with an illegal selection, or of a kind the engine does not take: judged by the
        replay rules (the reasons are Replay's), then its legal part applied."""
        batch = self._batch_from_action(action)
        smv = self._smv
        observed, root_slots = smv[H_OBSERVED], smv[H_ROOT_SLOTS]
        if self.strict and len(batch) > self.workers:
            raise IllegalBatchError(f"batch of {len(batch)} selections exceeds W={self.workers} workers")
        kept, dropped = judge_batch(batch, self.workers, observed, _OpenIds(smv, self._o_open, observed), root_slots,
                                    self._why_illegal)
        if self.strict and dropped:
            selection, reason = dropped[0]
            raise IllegalBatchError(reason, selection)
        # Under the rule's frontier, the dropped selections an online run would have taken are the
        # requests the record refused (request mode: the engine tells them apart among the kept).
        refused = [] if self.requests or not dropped else refused_among(
            batch, kept, self.workers, observed, _OnlineIds(smv, self._o_revealed, observed, self._leaves_rule),
            self._why_illegal)
        self._batch_array[: len(kept)] = kept
        smv[H_N] = len(kept)
        index = self._run(MODE_STEP)
        if refused:
            smv[H_REFUSALS] += len(refused)
        return self._result(index, dropped, illegal_stop=bool(batch) and not kept, refused=refused)

    def _why_illegal(self, obs_id: int) -> str:
        return why_illegal(obs_id, self._leaves_rule, self._smv[self._o_revealed + obs_id] > 0)

    def _result(self, index: int, dropped: list[tuple[object, str]], illegal_stop: bool = False,
                refused: list[int] | None = None) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """The observation (buffer set ``index``), reward, flags and info of the engine's output
        (:meth:`step` has this inline)."""
        at = self._o_out
        out = self._state[at: at + self._smv[H_OUTLEN]].tolist()
        k, first, root_slots, rounds, end, removed = out[:OUT_HEADER]
        revealed = self._revealed
        if k:
            revealed.parents.extend(out[OUT_HEADER: OUT_HEADER + k])
            revealed.fixed.extend(map(self._field_of, out[OUT_HEADER + k: OUT_HEADER + 2 * k]))
            self._batch_ends.append(len(revealed.parents))
        counts = self._fronts[index]
        if _refs(counts) != 3 and removed >= 0:  # held by a caller (or a view): its copy is brought up to date
            counts = FrontierCounts(counts)
        counts = self._fronts[index] = frontier_of(counts, out[OUT_HEADER + 2 * k:], removed, root_slots)
        observed = first + k
        self._view = view = _new_object(PrefixView)
        view.__dict__["_lazy"] = (revealed, observed, counts, root_slots, rounds, observed - 1, self._constants)
        self._pool.last = index
        if self.share_obs:
            obs = self._shared
        else:
            nodes, scores, glob, mask = self._sets[index].out
            obs = {"nodes": nodes, "score": scores, "globals": glob}
        smv = self._smv
        if not refused and smv[H_STEP_REFUSED]:
            refused = self._step_refusals(smv[H_STEP_REFUSED])
        refusals = smv[H_REFUSALS]
        info = {"view": view, "frontier": counts, "action_mask": self._shared_mask if self.share_obs else mask,
                "attempts": observed - 1, "rounds": rounds, "new_ids": list(range(first, observed)),
                "dropped": dropped, "refused": refused or [],
                "coverage": (observed - 1) / (observed - 1 + refusals) if refusals else 1.0}
        if end:
            self._end(end, k, info)
        if illegal_stop:
            info["illegal_stop"] = True
        return obs, self._fmv[F_REWARD], end == END_TERMINATED, end >= END_TRUNCATED, info

    def _warn_full(self) -> None:
        if not self._warned_full:
            self._warned_full = True
            warnings.warn(
                f"max_nodes={self.max_nodes}: the episode was truncated when the next batch might not fit in "
                "the free observation rows (info['capacity_full']); leave max_nodes unset, or pass at least the "
                "world's size, to hold every episode whole",
                stacklevel=5,
            )

    def _batch_from_action(self, action: Any) -> list[Any]:
        if isinstance(action, np.ndarray):
            action = action.reshape(-1).tolist()
        elif type(action) is not list and (isinstance(action, (str, bytes)) or not isinstance(action, Sequence)):
            raise TypeError(f"action must be a sequence of node ids, got {type(action).__name__}")
        pad = self.max_nodes  # padding means "no selection"; anything else is judged by the rules
        if pad not in action:  # the common case: nothing to filter (a C-level scan)
            return list(action)
        return [a for a in action if a != pad or not isinstance(a, (int, np.integer)) or isinstance(a, bool)]

    def action_masks(self) -> np.ndarray:
        """Per-slot legality masks, concatenated (sb3-contrib's MultiDiscrete mask layout): the
        masks of ``info["action_mask"]`` as one flat bool array (a fresh array of W x
        (max_nodes + 1) values).

        Every slot may hold the padding value; slots beyond ``root_slots`` cannot hold the root.
        Duplicate non-root selections across slots cannot be masked per slot: they are dropped.
        """
        return self._sets[self._pool.last].out[3].astype(bool).reshape(-1)

    def _replayed_world_ids(self) -> list[str]:
        return [self.world.id]

    def _use_render_mode(self, render_mode: str | None) -> None:
        self.render_mode = self._arguments["render_mode"] = render_mode
        if render_mode == "human":  # drawn after every step; the other modes keep the inline step
            self.step = self._step_drawn  # type: ignore[method-assign]

    def _step_drawn(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        result = type(self).step(self, action)
        self.render()
        return result

    def render(self) -> Any:
        if self.render_mode is None:
            return None
        view = self._view if self._view is not None else self.session.view()
        if self.render_mode == "human":
            print(render_tree(view), end="\n\n", flush=True)
            return None
        if self.render_mode == "ansi":
            return render_tree(view)
        from dream_gym.envs.tree_image import tree_image  # matplotlib loads on the first frame only

        return tree_image(view)

    # -- copies: rebuilt from the arguments, the episode replayed ------------------------
    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore_env, (type(self), self._arguments, self._episode_state()))

    def __deepcopy__(self, memo: dict[int, Any]) -> ReplayEnv:
        # The world is immutable: the copy shares it instead of copying every record. The generators
        # are copied: shared, a draw in the copy (a wrapper's, a planner's) moved the original's too.
        return _restore_env(type(self), {**self._arguments, "world": self.world},
                            copy.deepcopy(self._episode_state(), memo))

    def _episode_state(self) -> dict[str, Any]:
        return {
            "started": self._episode > 0,
            "batches": self._applied_batches(0),
            "stopped": self._stopped,  # by an empty batch
            "refused": self._refused,  # a batch refused at max_attempts ended it
            "refusals": int(self._smv[H_REFUSALS]),  # requests the record could not answer
            "cut_short": self._cut_short,
            "warned_full": self._warned_full,
            "np_random": self._np_random,
            "np_random_seed": self._np_random_seed,
            # the spaces' generators, as seeded (action_space.seed): None until one is used
            "space_random": (self.action_space._np_random, self.observation_space._np_random),
        }


# Session attributes set once, when it is made: read without following the env.
_SESSION_CONSTANTS = frozenset({"settings", "world", "beta", "beta1", "beta2", "max_rounds", "max_attempts",
                                "strict", "normalizer"})
# Session attributes the env's engine holds too (ReplayEnv._engine_read): read from there.
_SESSION_FROM_ENGINE = frozenset({"value", "attempts", "rounds", "workers"})
# What would move the session away from the env's episode: refused (the env would not know).
_SESSION_WRITES = frozenset({"step", "reset", "truncate"})


class _FollowingSession(ReplaySession):
    """The session of a :class:`ReplayEnv`: before any of its attributes is read, it plays the
    env's batches it has not seen yet (``_follow``, set by the env), except V, N, k and W, which
    the env's engine gives as they are (``_engine_read``), and the settings, which never change.
    It is read-only: its ``step``, ``reset`` and ``truncate`` are refused (the env steps it)."""

    _follow: Any = None
    _engine_read: Any = None

    def __getattribute__(self, name: str) -> Any:
        follow = object.__getattribute__(self, "_follow")
        if follow is not None:
            if name in _SESSION_WRITES:
                raise RuntimeError(f"env.unwrapped.session follows the env's episode and is read-only: step the env, "
                                   f"not its session (session.{name} would leave the two apart; "
                                   "copy.deepcopy(env.unwrapped.session) is a session of its own to step)")
            if name in _SESSION_FROM_ENGINE:
                return object.__getattribute__(self, "_engine_read")(name)
            if name not in _SESSION_CONSTANTS:
                follow()
        return object.__getattribute__(self, name)

    def __reduce__(self) -> tuple[Any, ...]:  # a copy is a plain session in the same state
        copied = ReplaySession.__new__(ReplaySession)
        copied.__dict__.update({k: v for k, v in self.__dict__.items() if k not in ("_follow", "_engine_read")})
        reduced = copied.__reduce_ex__(2)
        assert isinstance(reduced, tuple)
        return reduced


class _OnlineIds:
    """The non-root ids an online run of the env's rule could select, from the engine's state:
    under "leaves" the revealed ids with no revealed child, under "any" every revealed id."""

    __slots__ = ("_smv", "_at", "_observed", "_leaves")

    def __init__(self, smv: Any, at: int, observed: int, leaves: bool):
        self._smv, self._at, self._observed, self._leaves = smv, at, observed, leaves

    def __contains__(self, obs_id: object) -> bool:
        return (type(obs_id) is int and 0 < obs_id < self._observed
                and (not self._leaves or self._smv[self._at + obs_id] == 0))


class _OpenIds:
    """The non-root frontier of the engine's state, as a container of observed ids."""

    __slots__ = ("_smv", "_at", "_observed")

    def __init__(self, smv: Any, at: int, observed: int):
        self._smv, self._at, self._observed = smv, at, observed

    def __contains__(self, obs_id: object) -> bool:
        return type(obs_id) is int and 0 < obs_id < self._observed and self._smv[self._at + obs_id] == 1


class _ObservationSet(NamedTuple):
    """One observation buffer set: what callers get (read-only arrays: nodes, score, globals,
    action mask), the arrays that numpy views of its two matrices refer to, and the bytes the
    engine writes."""

    out: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    bases: tuple[np.ndarray, np.ndarray]
    buffer: np.ndarray


def _portable_reference(world: World | str | os.PathLike[str]) -> World | str:
    """A world reference that resolves the same in another process: folders become absolute."""
    if isinstance(world, World):
        return world
    if is_path(world, "is_dir"):
        return str(Path(world).expanduser().resolve())
    return os.fspath(world)


def _restore_env(cls: type[ReplayEnv], arguments: dict[str, Any], state: dict[str, Any]) -> ReplayEnv:
    """An env built from ``arguments`` and brought to the state of the episode it was copied in
    (the replay is deterministic: the same batches give the same observations and flags)."""
    env = cls(**{**arguments, "render_mode": None})  # the episode's frames were drawn once, by the original
    env._np_random, env._np_random_seed = state["np_random"], state["np_random_seed"]
    if state["started"]:
        env._warned_full = True  # the original warned already, or will
        ReplayEnv.reset(env)
        env._np_random, env._np_random_seed = state["np_random"], state["np_random_seed"]
        for batch in state["batches"]:
            env.step(batch)
        if state["stopped"] and not env._done:
            env.step([])
        if state.get("refused") and not env._done:  # the refused batch changed nothing but the end
            env._done, env._ready, env._refused = True, False, state["refused"]
        # refused requests changed nothing but the counts and (a batch of them) the end
        env._smv[H_REFUSALS] = state.get("refusals", 0)
        if state.get("cut_short"):
            env._done, env._ready, env._cut_short = True, False, True
    env._warned_full = state["warned_full"]
    env._use_render_mode(arguments["render_mode"])
    env.action_space._np_random, env.observation_space._np_random = state.get("space_random", (None, None))
    return env


# The observation's columns and capacity and info["frontier"]'s type have modules of their own;
# the env's docs (this module's docstring) name them here, where users import them from.
__all__ = ["DEFAULT_MAX_NODES", "GLOBAL_COLUMNS", "NODE_COLUMNS", "PADDING_ROW", "FrontierCounts", "ReplayEnv",
           "capacity_for", "observation_space"]
