"""What the agent server reads off a discovery system's chat request: the parent program, whether a
diff or a whole program is asked for, and the parent's score, error and diagnostics, in the prompts
of OpenEvolve, SkyDiscover and ShinkaEvolve (any other client's: its last fenced code block).
Programs are read as text, never run."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dream_gym.online.search_replace import SEARCH

_FENCE = re.compile(r"```[^\n`]*\n(.*?)\n```[ \t]*(?=\n|$)", re.DOTALL)
_HEADER = re.compile(r"^# Current Program[ \t]*$", re.MULTILINE)
_FITNESS = re.compile(r"^- Fitness:\s*([-+0-9.eEinfa]+)\s*$", re.MULTILINE)


@dataclass
class ParsedPrompt:
    """What the server read off one request."""

    code: str | None
    diff_mode: bool
    fitness: float | None
    error: str | None
    diagnostics: str


def message_text(content: Any) -> str:
    """A message's content as text (a string, or OpenAI content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def parse_prompt(messages: Sequence[dict[str, Any]]) -> ParsedPrompt:
    """The parent program, the mode asked for and the parent's feedback from a chat request."""
    users = [message_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    text = users[-1] if users else ""
    code: str | None = None
    after = text
    headers = list(_HEADER.finditer(text))  # the header line: SkyDiscover's task text also quotes it
    header = headers[-1].start() if headers else text.rfind("# Current Program")
    skydiscover = None
    if header >= 0:
        match = _FENCE.search(text, header)
        if match:
            code, after = match.group(1), text[match.end():]
            skydiscover = skydiscover_feedback(text[header:match.start()], after)
    if skydiscover is not None:
        return ParsedPrompt(code=code, diff_mode=SEARCH in after, fitness=skydiscover[0], error=skydiscover[1],
                            diagnostics=skydiscover[2])
    if code is None:
        blocks = list(_FENCE.finditer(text))
        if blocks:
            code, after = blocks[-1].group(1), text[blocks[-1].end():]
    fitness = _number_after(_FITNESS, text)
    outputs = text[: header if header >= 0 else len(text)]
    start = outputs.find("Last Execution Output")
    outputs = outputs[start:] if start >= 0 else ""
    return ParsedPrompt(
        code=code, diff_mode=SEARCH in after, fitness=fitness,
        error=_artifact(outputs, "error"), diagnostics=_artifact(outputs, "diagnostics") or "",
    )


def _number_after(pattern: re.Pattern[str], text: str) -> float | None:
    """The number ``pattern``'s first group finds in ``text``, or None (not found, not a number)."""
    found = pattern.search(text)
    if found is None:
        return None
    try:
        return float(found.group(1))
    except ValueError:
        return None


# SkyDiscover's prompts (its default templates): the parent's block under "# Current Program" opens
# with "## Program Information" ("combined_score: 0.9798", "error: ..."), and the evaluator's artifacts
# follow the code as "## <key>" sections, up to "# Task".
_SKY_INFO = "## Program Information"
_SKY_SCORE = re.compile(r"^combined_score:[ \t]*(\S+)[ \t]*$", re.MULTILINE)
_SKY_ERROR = re.compile(r"^error:[ \t]*(.*)$", re.MULTILINE)
_SKY_SECTION = re.compile(r"^## ([A-Za-z_][\w-]*)\n(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)


def skydiscover_feedback(before_code: str, after_code: str) -> tuple[float | None, str | None, str] | None:
    """(fitness, error, diagnostics) of the parent in a SkyDiscover prompt, or None for another client's.

    ``before_code`` is the "# Current Program" section up to the parent's code block, ``after_code``
    what follows the block (the evaluator's artifacts, then "# Task")."""
    if _SKY_INFO not in before_code:
        return None
    info = before_code[before_code.find(_SKY_INFO):]
    fitness = _number_after(_SKY_SCORE, info)
    end = after_code.find("\n# Task")
    artifacts = {m.group(1): m.group(2).strip() for m in _SKY_SECTION.finditer(after_code[: end if end >= 0 else None])}
    error_line = _SKY_ERROR.search(info)
    error = artifacts.get("error") or (error_line.group(1).strip() if error_line else None) or None
    return fitness, error, artifacts.get("diagnostics", "")


# ShinkaEvolve's prompts (shinka.prompts, 0.0.7): the system message asks for <NAME>, <DESCRIPTION> and
# either <DIFF> (SEARCH/REPLACE blocks) or <CODE> (the whole program in a fence); the parent is the
# fenced block under "# Current program" ("# Incorrect Program to Fix" in fix mode), followed by
# "Combined score to maximize: ..." and, with use_text_feedback, the evaluator's text feedback.
# Only the text between the EVOLVE-BLOCK-START and -END lines may change: the agent sees that text.
_SHINKA_HEADER = re.compile(r"^# (?:Current program|Incorrect Program to Fix)[ \t]*$", re.MULTILINE)
_SHINKA_SCORE = re.compile(r"^Combined score to maximize:[ \t]*(\S+)", re.MULTILINE)
_SHINKA_FEEDBACK = "Here is additional text feedback about the current program:"
_SHINKA_STDERR = re.compile(r"^### Standard Error \(stderr\):\n\n```\n(.*?)\n```", re.MULTILINE | re.DOTALL)
_EVOLVE_LINE = re.compile(r"^[^\n]*EVOLVE-BLOCK-(START|END)[^\n]*\n?", re.MULTILINE)


@dataclass
class ShinkaPrompt(ParsedPrompt):
    """A ShinkaEvolve request: ``code`` is the parent's evolvable text, between ``prefix`` and ``suffix``."""

    prefix: str = ""
    suffix: str = ""


def shinka_prompt(messages: Sequence[dict[str, Any]]) -> ShinkaPrompt | None:
    """What a ShinkaEvolve request asks (None for another client's prompt)."""
    system = "\n".join(message_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "system")
    if "<NAME>" not in system or ("<DIFF>" not in system and "<CODE>" not in system):
        return None
    users = [message_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    text = users[0] if users else ""  # retries append "try again" turns; the first holds the parent
    headers = list(_SHINKA_HEADER.finditer(text))
    block = _FENCE.search(text, headers[-1].end()) if headers else None
    if block is None:
        return None
    after = text[block.end():]
    found = _SHINKA_SCORE.search(after)
    try:
        fitness = float(found.group(1)) if found else None
    except ValueError:
        fitness = None
    feedback = after[after.find(_SHINKA_FEEDBACK):] if _SHINKA_FEEDBACK in after else ""
    stderr = _SHINKA_STDERR.search(after)
    error = _artifact(feedback, "error") or (stderr.group(1).strip() if stderr else None)
    if error is None and "Incorrect Program to Fix" in headers[-1].group(0):
        error = "the program is incorrect: it did not pass validation"
    prefix, code, suffix = evolve_region(block.group(1))
    return ShinkaPrompt(code=code, diff_mode="<DIFF>" in system, fitness=fitness, error=error,
                        diagnostics=_artifact(feedback, "diagnostics") or "", prefix=prefix, suffix=suffix)


def evolve_region(program: str) -> tuple[str, str, str]:
    """(prefix, evolvable text, suffix) of a program with one EVOLVE-BLOCK region; ("", program, "")
    for a program without markers or with several regions."""
    markers = list(_EVOLVE_LINE.finditer(program))
    if [m.group(1) for m in markers] != ["START", "END"]:
        return "", program, ""
    start, end = markers
    return program[: start.end()], program[start.end(): end.start()], program[end.start():]


def _artifact(section: str, key: str) -> str | None:
    match = re.search(rf"^### {re.escape(key)}\n```\n(.*?)\n```", section, flags=re.MULTILINE | re.DOTALL)
    return match.group(1) if match else None
