"""Compact replay traces of a policy's episodes, written for a policy developer to read.

Per world, one header line (task, W, recorded nodes, the policy's V and v2 on that world, the
world's oracle limit and the share of it the policy reached), a line per beta of the grid (V
and its % of the limit, best q, attempts N, rounds k, stop reason, error), and for the
beta in the middle of the grid the episode round by round: the batch (``root`` opens a
branch), each revealed node with its quality q (0 = baseline, 1 = the world's best record),
``+`` on the node whose quality was a new best, failures with their class and the last line of their error;
then where quality rose and how many attempts were spent after the last improvement.

Quality q uses the world's best recorded score, which a *policy* never sees: traces are for
the developer, who reads finished replays offline; the code it writes still sees only views.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dream_gym.infrastructure.llm import one_line
from dream_gym.policy import EpisodeResult
from dream_gym.replay.mechanics import ROOT
from dream_gym.replay.score import DEFAULT_LAMBDA, v2_objective
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.settings import ReplaySettings
from dream_gym.world.tree import World

MAX_ROUNDS_SHOWN = 14
MAX_WORLDS_SHOWN = 12


@dataclass(frozen=True)
class RoundLine:
    round: int
    batch: tuple[int, ...]
    revealed: tuple[str, ...]  # "7:0.812" or "8:fail(repairable: SyntaxError ...)"
    improved: bool


def _node_text(session: ReplaySession, obs_id: int) -> str:
    node = session.nodes[obs_id]
    if node.score is None:
        cause = (node.error or "no score").strip().splitlines()
        last = one_line(cause[-1] if cause else "no score", 60)
        return f"{obs_id}:fail({node.fail_class or 'unclassified'}: {last})"
    return f"{obs_id}:{session.normalizer.q(node.score):.3f}"


def episode_rounds(world: World, result: EpisodeResult, settings: ReplaySettings) -> tuple[list[RoundLine], list[int]]:
    """Replay an episode's batches at the ``settings`` it was played at; per round what was
    revealed, and the attempts at which the best quality rose."""
    session = ReplaySession(world, settings, beta=result.beta)
    lines: list[RoundLine] = []
    rises: list[int] = []
    for number, batch in enumerate(result.batches, 1):
        best = before = session.best_q
        outcome = session.step(batch)
        first = session.attempts - len(outcome.new_ids)  # the attempts before this round's
        texts = []
        for k, obs_id in enumerate(outcome.new_ids, 1):  # the node that rose is marked, at its own attempt
            text, q = _node_text(session, obs_id), session.normalizer.q(session.nodes[obs_id].score)
            if q is not None and q > best + 1e-12:
                best, text = q, text + "+"
                rises.append(first + k)
            texts.append(text)
        lines.append(RoundLine(number, tuple(batch), tuple(texts), session.best_q > before + 1e-12))
    return lines, rises


def _batch_text(batch: Sequence[int]) -> str:
    return "[" + ", ".join("root" if i == ROOT else str(i) for i in batch) + "]"


def _stop_reason(result: EpisodeResult) -> str:
    if result.error:
        return "error"
    if result.truncated:
        return "round limit"
    return "stopped" if result.terminated else "ended"


def world_trace(world: World, results: Sequence[EpisodeResult], settings: ReplaySettings,
                lam: float = DEFAULT_LAMBDA) -> str:
    """The trace block of one policy on one world (``results``: its episodes there, one per beta)."""
    results = sorted(results, key=lambda r: r.beta)
    mean_v = sum(r.replay_score for r in results) / len(results)
    v2 = v2_objective([(r.work, r.attainment, r.rounds, r.attempts) for r in results], lam=lam).value
    limit = results[0].limit  # the world's oracle limit, recorded by the evaluation

    def share(v: float) -> str:
        return f"{100 * v / limit:.0f}% of the limit" if limit is not None and limit > 0 else "no positive limit"

    limit_text = f" {limit:.4f}" if limit is not None else ""
    out = [f"### {world.id} (task {world.task_name}, W={world.workers}, {world.size - 1} recorded attempts, "
           f"frontier {world.frontier_rule}, baseline {world.baseline_score:.6g}, best recorded "
           f"{world.best_score:.6g}): mean V {mean_v:.4f} ({share(mean_v)}{limit_text}), v2 {v2:.4f}"]
    for r in results:
        error = f", error: {one_line(r.error, 200)}" if r.error else ""
        out.append(f"- beta {r.beta:g}: V {r.replay_score:.4f} ({share(r.replay_score)}), best q {r.best_q:.3f}, "
                   f"N {r.attempts}, k {r.rounds}, {_stop_reason(r)}{error}")
    shown = results[len(results) // 2]
    lines, rises = episode_rounds(world, shown, settings)
    out.append(f"Rounds at beta {shown.beta:g} (id:q of each revealed node; + marks a new best):")
    for line in lines[:MAX_ROUNDS_SHOWN]:
        out.append(f"  r{line.round} {_batch_text(line.batch)} -> {', '.join(line.revealed)}")
    if len(lines) > MAX_ROUNDS_SHOWN:
        out.append(f"  ... {len(lines) - MAX_ROUNDS_SHOWN} more rounds")
    failures = sum(1 for line in lines for t in line.revealed if ":fail(" in t)
    after = shown.attempts - (rises[-1] if rises else 0)
    rose = ", ".join(str(a) for a in rises) if rises else "never"
    out.append(f"  quality rose at attempts {rose}; {after} attempts after the last improvement; "
               f"{failures} failed attempts")
    return "\n".join(out)


def policy_traces(worlds: Sequence[World], results: Sequence[EpisodeResult], settings: ReplaySettings, *,
                  lam: float = DEFAULT_LAMBDA, max_worlds: int = MAX_WORLDS_SHOWN) -> str:
    """Trace blocks for a policy's episodes on each world (the weakest worlds first when there
    are more than ``max_worlds``)."""
    by_world: dict[str, list[EpisodeResult]] = {}
    for result in results:
        by_world.setdefault(result.world, []).append(result)
    blocks = []
    for world in worlds:
        episodes = by_world.get(world.id)
        if episodes:
            mean_v = sum(r.replay_score for r in episodes) / len(episodes)
            blocks.append((mean_v, world.id, world_trace(world, episodes, settings, lam=lam)))
    blocks.sort()
    omitted = len(blocks) - max_worlds
    text = "\n\n".join(block for _, _, block in blocks[:max_worlds])
    if omitted > 0:
        text += f"\n\n({omitted} world(s) where the policy scores higher are not shown)"
    return text
