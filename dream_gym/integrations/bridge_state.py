"""The side of one bridge run that every system shares: the world being written and the policy.

Each bridge's ``RunState`` (:mod:`.openevolve.bridge`, :mod:`.shinkaevolve.bridge`,
:mod:`.skydiscover.bridge`) is a :class:`BridgeState` with what its system needs besides. The
policy sees the run as a :class:`~dream_gym.replay.view.PrefixView` built by
:func:`dream_gym.online.real_tree.tree_view` from the nodes written so far (every program so far, with
its parent, ``combined_score`` and failure), so the same policy object runs unchanged in every
system, in ``grow`` and in replay; :meth:`BridgeState.choose` asks it for the next batch.
:func:`node_record` is the node of one program as the system's importer reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_gym.infrastructure.llm import usd_of_tokens
from dream_gym.infrastructure.printable import error_line, printable
from dream_gym.online.catch_up import catch_up
from dream_gym.online.real_tree import check_online_batch, tree_view
from dream_gym.policy import Policy, RunContext, batch_from
from dream_gym.replay.settings import DEFAULT_BETA, ReplaySettings
from dream_gym.replay.view import NodeView


@dataclass
class BridgeState:
    """The world being written (``writer``, a ``WorldWriter``), the policy (None: the system's own
    selection) and the rounds it has asked for."""

    writer: Any
    policy: Policy | None
    workers: int
    seed: int = 0
    beta: float = DEFAULT_BETA
    frontier: str = "any"
    round: int = 0
    reset_done: bool = False
    stopped_by: str = "iterations"
    batches: list[int] = field(default_factory=list)
    resumed: str = ""  # how a resumed run's policy caught up (dream_gym.online.catch_up)
    model: str | None = None  # --model, which prices the tokens of the run's LLM calls (None: the agent server's)
    #: the node views of the last view: the writer only appends, so they stand for the next one
    view_nodes: tuple[NodeView, ...] = field(default=(), repr=False)

    def choose(self, limit: int) -> list[str]:
        """The policy's next batch: the ids of the programs it continues, at most ``limit``."""
        assert self.policy is not None
        self.check_started()
        records = self.writer.records
        settings = ReplaySettings(self.workers, self.beta, frontier=self.frontier)
        view = tree_view(records, self.writer.meta, settings, rounds=self.round, known=self.view_nodes)
        self.view_nodes = view.nodes
        if not self.reset_done:
            if self.round:  # a resumed run: the policy is shown its recorded rounds again
                caught = catch_up(self.policy, records, self.writer.meta, settings, self.seed, whole_rounds=False)
                self.resumed = caught.note or f"the policy chose its {self.round} recorded round(s) again" + (
                    f"; round {self.round} holds {caught.unrecorded} fewer program(s) than the policy chose (a "
                    "stop in that round, or no free slot): they are not run again, so the world may differ from "
                    "an uninterrupted run's from here on" if caught.unrecorded else "")
                if self.writer.repaired:  # a write cut short (a crash of the machine): that node is lost
                    self.resumed = f"{self.writer.repaired}; that program is not in the world; {self.resumed}"
            else:
                self.policy.reset(RunContext.from_view(view, seed=self.seed))
            self.reset_done = True
        batch = check_online_batch(view, batch_from(self.policy.act(view)))[: max(0, limit)]
        return [str(records[i]["id"]) for i in batch]

    def check_started(self) -> None:
        """Refuse to go on from an initial program that failed its evaluation (a ValueError naming
        it): a policy has no scored program to start from, and the system's own selection would
        spend the whole budget (an LLM call each) on a world that nothing can replay."""
        records = self.writer.records
        if records and records[0].get("score") is None and "baseline_score" not in self.writer.meta:
            raise ValueError(initial_failure(records[0], self.writer.folder))

    def priced(self, tokens_in: int, tokens_out: int) -> dict[str, Any]:
        """A node's ``cost`` from the tokens of the calls that made it, at litellm's price for
        --model (a discovery system records tokens and no price)."""
        return {"tokens_in": tokens_in, "tokens_out": tokens_out, "usd": usd_of_tokens(self.model, tokens_in, tokens_out)}

    def start_round(self, ids: list[str]) -> list[str]:
        """Count a round of ``ids`` (none: no round)."""
        if ids:
            self.round += 1
            self.batches.append(len(ids))
        return ids


def initial_failure(root: dict[str, Any], folder: Path) -> str:
    """Why a policy cannot start: the initial program failed its evaluation (its error without
    the traceback that may follow it), and what the world folder left behind is."""
    return ("the initial program failed its evaluation, so the run has no scored program to start from: "
            f"{printable(error_line(root.get('error')) or 'no score', 300)}; {folder} keeps that evaluation (a "
            "world without a baseline, which eval and dream cannot replay): fix the task and run it again in a "
            f"new --out, or remove {folder}")


def node_record(parsed: Any, parent: str | None, placement: dict[str, Any]) -> dict[str, Any]:
    """The node of one program the system's importer has read (``parsed``: its score, error, code
    and the system's own fields), continuing ``parent``, with its ``placement`` in this run
    (``round``, and ``worker`` when a policy chose its parent)."""
    record: dict[str, Any] = {"id": parsed.id, "parent": parent, "score": parsed.score, **placement}
    if parsed.score is None:
        record["error"] = parsed.error or "no valid score"
    if parsed.code is not None:
        record["code"] = parsed.code
    for key, value in parsed.extra.items():
        record.setdefault(key, value)
    return record


__all__ = ["BridgeState", "initial_failure", "node_record"]
