"""A resumed online run brought back to where the uninterrupted one would be.

A policy may remember (a patience counter, a schedule, its random generator), and a run killed
mid-round may have recorded only some of that round's slots (each slot is written as soon as it
and the slots before it have finished). So ``grow --resume`` does not just ask the policy for the
next round: it resets the policy as the run started it, then shows it each recorded round's view
again and checks that it chooses the recorded batch. When every choice repeats, the policy's
memory is what it was, and the slots of the last round that the kill lost are run now (the agent
is seeded by the run's seed, the round and the slot): the resumed world is the world the run
would have grown. A bridge into a discovery system (``deploy --resume``) catches its policy up
the same way; what the system itself runs again on a resume is the system's. A policy that
chooses otherwise on the record (it is not seeded, or remembers something the record does not
hold) continues from the record with its memory started again, and the run says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dream_gym.online.real_tree import check_online_batch, tree_view
from dream_gym.policy import Policy, RunContext, batch_from
from dream_gym.replay.settings import ReplaySettings
from dream_gym.replay.view import PrefixView


@dataclass
class CatchUp:
    """Where a resumed run goes on from.

    Attributes:
        view: the view the next choice is made on (the recorded rounds' view; with ``missing``,
            the view before the last recorded round).
        missing: (slot, parent index) of the last recorded round that were chosen and not
            recorded, to run before the next round.
        note: empty when the policy chose every recorded batch again; else at which round it did
            not, its memory having been started again there.
        unrecorded: with ``whole_rounds=False``, how many of the last round's chosen programs have
            no node (a run stopped in the round, or the system ran fewer); none is run again.
    """

    view: PrefixView
    missing: list[tuple[int, int]] = field(default_factory=list)
    note: str = ""
    unrecorded: int = 0


def catch_up(policy: Policy, records: Sequence[dict[str, Any]], meta: dict[str, Any], settings: ReplaySettings,
             seed: int, max_attempts: int | None = None, *, whole_rounds: bool = True) -> CatchUp:
    """Reset ``policy`` as the run started it and replay its choices over the recorded rounds
    (see the module doc); ``records`` hold the root and the rounds in the order they were written,
    each non-root node with its ``round`` and its slot (``worker``) in the round's batch.

    ``whole_rounds``: the run records every slot of a round (``grow``), so a round with fewer
    slots than the batch was cut, and only the last one may be; a discovery system behind a
    bridge may run fewer programs than a batch holds (its free slots, its budget), so there only
    the recorded slots are compared and none is run again."""
    start = tree_view(list(records[:1]), meta, settings, rounds=0)
    policy.reset(RunContext.from_view(start, seed=seed))
    index_of = {str(r["id"]): i for i, r in enumerate(records)}
    rounds = [int(r.get("round") or 0) for r in records]
    done_rounds = max(rounds, default=0)
    view, written, unrecorded = start, 1, 0
    for round_no in range(1, done_rounds + 1):
        end = written
        while end < len(records) and rounds[end] == round_no:
            end += 1
        recorded = records[written:end]
        if any(rounds[i] <= round_no for i in range(end, len(records))):  # the rounds are not in order
            return _started_again(policy, records, meta, settings, seed, done_rounds, round_no)
        batch = check_online_batch(view, batch_from(policy.act(view)))
        if max_attempts is not None:
            batch = batch[: max(0, max_attempts - (written - 1))]
        slots = {r.get("worker"): index_of.get(str(r["parent"])) for r in recorded}
        if any(not isinstance(slot, int) or slot >= len(batch) or batch[slot] != parent
               for slot, parent in slots.items()):
            return _started_again(policy, records, meta, settings, seed, done_rounds, round_no)
        if whole_rounds and len(slots) < len(batch):
            if round_no < done_rounds:  # only the last round can be cut
                return _started_again(policy, records, meta, settings, seed, done_rounds, round_no)
            return CatchUp(view, [(slot, parent) for slot, parent in enumerate(batch) if slot not in slots])
        written = end
        view = tree_view(list(records[:written]), meta, settings, rounds=round_no, known=view.nodes)
        unrecorded = max(0, len(batch) - len(slots))
    return CatchUp(view, unrecorded=unrecorded)


def _started_again(policy: Policy, records: Sequence[dict[str, Any]], meta: dict[str, Any],
                   settings: ReplaySettings, seed: int, done_rounds: int, round_no: int) -> CatchUp:
    view = tree_view(list(records), meta, settings, rounds=done_rounds)
    policy.reset(RunContext.from_view(view, seed=seed))
    return CatchUp(view, note=(
        f"the policy did not choose round {round_no}'s recorded batch again, so it goes on from the record "
        "with its memory started again (the world may differ from an uninterrupted run's)"))


__all__ = ["CatchUp", "catch_up"]
