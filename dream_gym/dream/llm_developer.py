"""The LLM policy developer: an LLM (through litellm) writes the next revision of the policy.

The prompt is built from the readable templates in ``agents/prompts/`` (of the repository, or of the
installed package's data: :func:`dream_gym.world.shipped.prompts_dir`):

* ``policy_developer_system.md``: the role and the principles a revision must follow (classify
  a failure before closing a branch, judge a branch by its whole trajectory, a portfolio batch
  with at most one recovery attempt, every threshold derived from beta read once, no fixed
  schedule);
* ``policy_interface.md``: the policy interface and every field of the context and the view;
* ``policy_developer_revision.md``: the incumbent's code and score, compact replay traces per
  world, this phase's earlier revisions with their scores and errors, and the best versions of
  earlier phases with their scores on this history (``$name`` placeholders, filled with
  :class:`string.Template`).

Every call goes through the run folder's :class:`~dream_gym.dream.journal.Journal`: written
before it is sent and before its reply is used; on resume an answered call is not sent again.
The request's seed is derived from (run seed, phase, revision), so a resumed run asks exactly
the same question. A reply without code is a revision without code (recorded, reported in the
next prompt); only an unreachable LLM raises (``dream_gym.infrastructure.llm.LLMError``), which stops the run so
that it can be resumed.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from string import Template
from typing import Any

from dream_gym.dream.developer import EarlierRevision, Feedback, Revision
from dream_gym.dream.journal import Journal
from dream_gym.dream.validate import MAX_REVISION_CHARS
from dream_gym.infrastructure.llm import LLMClient, clip, extract_code, one_line
from dream_gym.infrastructure.redact import redact_value
from dream_gym.world.shipped import prompts_dir

PROMPTS_DIR = prompts_dir()
SYSTEM_TEMPLATE = "policy_developer_system.md"
INTERFACE_TEMPLATE = "policy_interface.md"
REVISION_TEMPLATE = "policy_developer_revision.md"
MAX_TRACES_CHARS = 14_000
MAX_EARLIER_CODE_CHARS = 3_000
MAX_REFERENCE_CHARS = 6_000


def _read(folder: Path, name: str) -> str:
    path = folder / name
    if not path.is_file():
        raise FileNotFoundError(f"prompt template {path} is missing (prompts live in agents/prompts/)")
    return path.read_text(encoding="utf-8")


def _score(value: float | None) -> str:
    return "none (refused)" if value is None else f"{value:.4f}"


def _local_paths_hidden(text: str) -> str:
    """``text`` (a revision's error, which may quote the sandbox's PATH or a traceback) with this
    machine's paths named by role: the Python installation, the package, the home and temporary
    folders are no business of the LLM's provider."""
    import sys
    import tempfile

    places = {sys.prefix: "<python>", sys.base_prefix: "<python>", str(Path(__file__).parents[2]): "<dream_gym>",
              str(Path.home()): "~", tempfile.gettempdir(): "<tmp>"}
    for path in sorted((p for p in places if len(p) > 1), key=len, reverse=True):  # the longest first
        text = text.replace(path, places[path])
    return text


def _earlier_text(earlier: tuple[EarlierRevision, ...]) -> str:
    if not earlier:
        return "(none yet: this is the first revision of the phase)"
    parts = []
    for rev in earlier:
        head = f"### Revision {rev.m}: {rev.status}, score {_score(rev.score)}"
        error = f"\nError: {one_line(_local_paths_hidden(rev.error), 600)}" if rev.error else ""
        code = clip(rev.code, MAX_EARLIER_CODE_CHARS) if rev.code.strip() else "(no code)"
        parts.append(f"{head}{error}\n```python\n{code}\n```")
    return "\n\n".join(parts)


def _past_text(past: tuple[EarlierRevision, ...]) -> str:
    if not past:
        return "(none: this is the first phase, or no earlier version was carried over)"
    lines = [f"- phase {p.phase} version {p.m}: score {_score(p.score)} on this history" for p in past]
    best = past[0]
    code = clip(best.code, MAX_EARLIER_CODE_CHARS)
    return "\n".join(lines) + f"\n\nThe best of them (phase {best.phase} version {best.m}):\n```python\n{code}\n```"


def build_messages(feedback: Feedback, prompts_dir: Path = PROMPTS_DIR) -> list[dict[str, str]]:
    """The chat messages for one revision (a pure function of the feedback and the templates)."""
    select_rule = (
        "the mean over worlds of the mean replay score V over the betas" if feedback.select == "V"
        else "the mean over worlds of the Pareto objective v2 over the betas (area dominated by the "
             "(work, attainment) points of the betas, minus 0.1 x the mean rounds/attempts)"
    )
    reference = ""
    if feedback.reference:
        reference = ("\nThe current policy runs a built-in policy of the library; its source, for "
                     "reference (your revision must be self-contained and may not import from it):\n\n"
                     f"```python\n{clip(feedback.reference, MAX_REFERENCE_CHARS)}\n```\n")
    revision = Template(_read(prompts_dir, REVISION_TEMPLATE)).substitute(
        m=feedback.m, last_m=feedback.revisions - 1, phase=feedback.phase,
        interface=_read(prompts_dir, INTERFACE_TEMPLATE).strip(),
        n_worlds=len(feedback.history), history=", ".join(feedback.history),
        betas=", ".join(f"{b:g}" for b in feedback.betas), select_rule=select_rule,
        incumbent_score=_score(feedback.incumbent.score), incumbent_code=clip(feedback.incumbent.code, MAX_REVISION_CHARS),
        reference=reference, traces=clip(feedback.traces, MAX_TRACES_CHARS) or "(no traces)",
        earlier=_earlier_text(feedback.earlier), past=_past_text(feedback.past),
    )
    return [{"role": "system", "content": _read(prompts_dir, SYSTEM_TEMPLATE).strip()},
            {"role": "user", "content": revision}]


def request_seed(seed: int, phase: int, m: int) -> int:
    digest = hashlib.sha256(f"developer:{seed}:{phase}:{m}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


class LLMDeveloper:
    """Revisions written by an LLM through litellm (see the module docstring).

    Args:
        model: a litellm model string (``openai/<name>`` with ``api_base`` for a local server).
        folder: the run folder that holds the call journal.
        api_base, api_key, temperature, max_tokens, timeout_s, num_retries: the LLM client's.
        seed: the run seed (with phase and revision it seeds each request).
        prompts_dir: where the templates are (default ``agents/prompts/``).
    """

    def __init__(self, model: str, folder: str | os.PathLike[str], *, api_base: str | None = None,
                 api_key: str | None = None, temperature: float = 0.7, max_tokens: int = 8192,
                 timeout_s: float = 300, num_retries: int = 2, seed: int = 0,
                 prompts_dir: str | os.PathLike[str] | None = None, **client_options: Any):
        self.client = LLMClient(model, api_base=api_base, api_key=api_key, temperature=temperature,
                                max_tokens=max_tokens, timeout_s=timeout_s, num_retries=num_retries,
                                **client_options)
        self.journal = Journal(folder)
        self.seed = int(seed)
        self.prompts_dir = Path(prompts_dir) if prompts_dir is not None else PROMPTS_DIR
        self.name = f"litellm:{model}"

    def propose(self, feedback: Feedback) -> Revision:
        # the feedback quotes errors of untrusted revisions: the prompt kept is the one sent
        messages = redact_value(build_messages(feedback, self.prompts_dir))
        call = self.journal.complete(self.client, messages, seed=request_seed(self.seed, feedback.phase, feedback.m),
                                     phase=feedback.phase, revision=feedback.m)
        done = call.completion
        extraction = extract_code(done.reply)
        notes = [f"model={self.client.model}", f"extraction={extraction.method}",
                 "reply from the journal" if call.replayed else f"attempts={done.attempts}", *done.notes]
        if done.finish_reason:
            notes.append(f"finish_reason={done.finish_reason}")
        cost = {"calls": 1.0, "tokens_in": done.tokens_in, "tokens_out": done.tokens_out, "usd": done.usd,
                "seconds": done.seconds, "unpriced": 0.0 if done.priced else 1.0}
        prompt = "\n\n".join(f"<!-- {m['role']} -->\n{m['content']}" for m in messages)
        truncated = done.finish_reason == "length"
        if not extraction.usable:
            empty = " (the reply is empty)" if not done.reply.strip() else ""
            return Revision(code=None, notes="; ".join(notes), error=f"no code found in the reply{empty}",
                            prompt=prompt, reply=done.reply, cost=cost, truncated=truncated)
        return Revision(code=extraction.code, notes="; ".join(notes), prompt=prompt, reply=done.reply, cost=cost,
                        truncated=truncated)


def build(spec: str, folder: Any = None, *, api_base: str | None = None, seed: int = 0,
          **options: Any) -> LLMDeveloper:
    """``--developer MODEL`` (any litellm model string): an LLM developer journaling in ``folder``."""
    if folder is None:
        raise ValueError("an LLM developer needs a run folder for its call journal")
    return LLMDeveloper(spec, folder, api_base=api_base, seed=seed, **options)
