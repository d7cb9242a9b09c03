"""The held-out check: before a phase deploys a revision, its score on worlds it was not selected on.

Selection sees only the history H, and the determinism gate compares two evaluations made at
the same moment on the same worlds. A revision that recognises H (by its task's name or
description) and behaves only there passes both: it scores on H and is useless, or worse,
everywhere else. So before a phase deploys a revision (``chosen.py``, ``pi_<t+1>.py``), it
scores the revision and the incumbent on *held-out* worlds and applies :func:`refusal`:

* the held-out worlds are the ``--validate`` worlds, or by default (:func:`auto_held_out`) one
  world of each task H does not hold, from the shipped dataset's held-out split (when H holds
  every shipped task: one held-out world of each of its tasks, none of H's own worlds);
* the revision is **not deployed** (the incumbent stays) when any of its held-out episodes
  ended with an error, or when its held-out score is more than :data:`HELD_OUT_MARGIN` below the
  incumbent's there; with ``gate``, also when it is below the incumbent's by any amount;
* a drop within the margin is deployed with a warning.

The scores, the worlds, the rule and the verdict are printed and recorded in the phase's line of
``dream.jsonl``; the episodes in ``revisions/<phase>/<m>.held_out.results.jsonl``.

What it cannot see: a revision that behaves differently at another time (a date or a deadline
in its code) scores the same on held-out worlds now; one that recognises every shipped task
passes on them and may still fail on a task of yours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dream_gym.dream.versions import TIE_TOLERANCE
from dream_gym.infrastructure.printable import TEXT_CHARS, printable
from dream_gym.world.tree import World

#: A revision whose held-out score is more than this below the incumbent's is not deployed. In the
#: units of the selection score (mean V, or v2): a tenth of the range between a world's baseline
#: and its best recorded score. Honest revisions measured on the shipped worlds stay well inside
#: it; one that stops on every task but H's falls by the incumbent's whole held-out score.
HELD_OUT_MARGIN = 0.1


def auto_held_out(history: Sequence[World]) -> list[World]:
    """The default held-out worlds of a history: one world of each task it does not hold, from
    the shipped dataset's held-out split (in split order); when it holds every task there, one
    held-out world of each of its tasks; never one of its own worlds. Empty when the shipped
    dataset is not present."""
    from dream_gym.evaluation.world_specs import resolve_worlds

    try:
        candidates = resolve_worlds("heldout")
    except LookupError:
        return []
    own = {world.id for world in history}
    tasks = {world.task_name for world in history}
    pool = [world for world in candidates if world.id not in own]
    return _one_per_task([w for w in pool if w.task_name not in tasks]) or _one_per_task(pool)


def _one_per_task(worlds: Sequence[World]) -> list[World]:
    first: dict[str, World] = {}
    for world in worlds:
        first.setdefault(world.task_name, world)
    return list(first.values())


def refusal(incumbent: float, selected: float, errors: Sequence[str], margin: float, gate: bool) -> str | None:
    """Why the selected revision must not be deployed, given its and the incumbent's held-out
    scores and its failed held-out episodes; None when it may be."""
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        first = printable(errors[0], TEXT_CHARS)
        return f"{len(errors)} of its episodes on the held-out worlds ended with an error; first: {first}{more}"
    drop = incumbent - selected
    if drop > margin + TIE_TOLERANCE:
        return (f"it scores {selected:.4f} on the held-out worlds against the incumbent's {incumbent:.4f}: "
                f"{drop:.4f} below, more than the margin {margin:g}")
    if gate and drop > TIE_TOLERANCE:
        return (f"it scores {selected:.4f} on the held-out worlds against the incumbent's {incumbent:.4f} "
                "and the gate allows no drop")
    return None


def report(worlds: Sequence[World], auto: bool, incumbent: float, selected: float, per_world: dict[str, float],
           errors: Sequence[str], margin: float, refused: str | None) -> dict[str, Any]:
    """The held-out check as the phase records it (``PhaseResult.validation``)."""
    return {
        "worlds": [world.id for world in worlds], "auto": auto, "incumbent": incumbent, "selected": selected,
        "gain": selected - incumbent, "per_world": dict(per_world), "errors": len(errors),
        "first_error": printable(errors[0], TEXT_CHARS) if errors else None, "margin": margin,
        "verdict": "deployed" if refused is None else "refused",
    }


def warning(m: int, check: dict[str, Any], refused: str | None) -> str | None:
    """The loud line of a phase whose selected revision was refused, or lost ground, on the
    held-out worlds (None when it did not)."""
    if refused is not None:
        return (f"version {m} is NOT deployed, the incumbent is kept: {refused} "
                f"(held-out worlds: {', '.join(check['worlds'])})")
    if check["gain"] < -TIE_TOLERANCE:
        return (f"version {m} is deployed but scores {-check['gain']:.4f} below the incumbent on the held-out "
                f"worlds (within the margin {check['margin']:g}): it may be overfit to the history")
    return None


__all__ = ["HELD_OUT_MARGIN", "auto_held_out", "refusal", "report", "warning"]
