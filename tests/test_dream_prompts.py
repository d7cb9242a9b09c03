"""The LLM developer's prompt: readable templates, every interface field, the principles, and no
placeholder left unfilled."""

from __future__ import annotations

import dataclasses

from dream_gym.dream.developer import EarlierRevision, Feedback
from dream_gym.dream.llm_developer import INTERFACE_TEMPLATE, PROMPTS_DIR, SYSTEM_TEMPLATE, build_messages
from dream_gym.policy import RunContext
from dream_gym.replay.view import NodeView, PrefixView


def test_interface_prompt_names_every_field_of_context_view_and_node():
    text = (PROMPTS_DIR / INTERFACE_TEMPLATE).read_text()
    names = {f.name for f in dataclasses.fields(RunContext)} | {f.name for f in dataclasses.fields(NodeView)}
    names |= {f.name for f in dataclasses.fields(PrefixView) if not f.name.startswith("_")}
    missing = sorted(n for n in names if f"`{n}`" not in text and f"`{n}`," not in text and n not in text)
    assert not missing, missing


def test_system_prompt_insists_on_the_principles():
    text = " ".join((PROMPTS_DIR / SYSTEM_TEMPLATE).read_text().lower().split())
    for phrase in ("classify a failed line of attack before you close it", "hard and unrecoverable",
                   "repairable implementation failure", "under-explored", "repeatedly poor after enough valid evidence",
                   "never conclude that an approach failed from one repairable error", "whole ordered trajectory",
                   "portfolio", "at most one recovery attempt", "read beta once", "no fixed widen-everything"):
        assert phrase in text, phrase


def test_revision_prompt_fills_every_placeholder_and_reports_earlier_errors():
    feedback = Feedback(
        phase=2, m=3, revisions=5, incumbent=EarlierRevision(0, "def act(view):\n    return []\n", "incumbent", 0.61),
        traces="### w1 ...", earlier=(EarlierRevision(1, "def act(v):\n", "invalid", None, "SyntaxError: x (line 1)"),
                                      EarlierRevision(2, "def act(view):\n    return [0]\n", "ok", 0.55)),
        select="v2", betas=(0.0, 1.0), history=("w1", "w2"), reference="class Builtin: ...",
    )
    system, user = build_messages(feedback)
    assert system["role"] == "system" and user["role"] == "user"
    text = user["content"]
    assert "$" not in text.replace("$name", "")
    assert "# Revision 3 of 4, phase 2" in text and "score 0.6100" in text and "w1, w2" in text
    assert "### Revision 1: invalid, score none (refused)\nError: SyntaxError: x (line 1)" in text
    assert "### Revision 2: ok, score 0.5500" in text and "Pareto objective v2" in text
    assert "class Builtin" in text and "### w1 ..." in text


def test_a_revision_too_long_is_refused_and_a_long_incumbent_is_cut_in_the_prompt():
    """A 610 KB reply was kept as a valid revision, and as the incumbent it went whole into every
    later prompt (618 K characters a call)."""
    from dream_gym.dream.validate import MAX_REVISION_CHARS, check_source

    padded = "def act(view):\n    return []\n" + "# padding\n" * 60_000
    assert check_source(padded) == (f"the file is {len(padded):,} characters long; a revision is at most "
                                    f"{MAX_REVISION_CHARS:,} (it is sent in every later prompt)")
    assert check_source("def act(view):\n    return []\n" + "#\n" * 1000) is None
    feedback = Feedback(phase=1, m=1, revisions=3, incumbent=EarlierRevision(0, padded, "incumbent", 0.5),
                        traces="", earlier=(), select="V", betas=(0.5,), history=("w1",))
    text = build_messages(feedback)[1]["content"]
    assert len(text) < MAX_REVISION_CHARS + 40_000 and text.count("# padding") < 5_000
    assert "characters omitted" in text and "def act(view):" in text


def test_an_errors_local_paths_are_named_by_role_in_the_prompt():
    """A revision that raised with os.environ sent the sandbox's PATH (this installation's folder)
    and its temporary HOME to the LLM's provider in the next prompt."""
    import sys
    import tempfile

    error = (f"PolicyException: KeyError: PATH={sys.prefix}/bin:/usr/bin "
             f"HOME={tempfile.gettempdir()}/dream_gym_policy.1.x (at 1.py line 3)")
    feedback = Feedback(phase=1, m=2, revisions=3, incumbent=EarlierRevision(0, "def act(v):\n    return []\n",
                                                                              "incumbent", 0.5),
                        traces="", earlier=(EarlierRevision(1, "def act(v):\n", "invalid", None, error),),
                        select="V", betas=(0.5,), history=("w1",))
    text = build_messages(feedback)[1]["content"]
    assert "Error: PolicyException: KeyError: PATH=<python>/bin:/usr/bin HOME=<tmp>/dream_gym_policy.1.x" in text
    assert sys.prefix not in text
