"""What a prompt shows the agent: the other programs (fenced blocks, their scores and errors), and
the seed of a request."""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from .crossover import functions_of
from .history import (
    shows_error,
)
from .source import Donor, Source, compiles

# -- what a prompt shows ----------------------------------------------------------------------------------
_FENCE = re.compile(r"```([^\n`]*)\n(.*?)\n```[ \t]*(?=\n|$)", re.DOTALL)
_SCORED_HEADER = re.compile(r"score[^:\n]*:\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)", re.IGNORECASE)
_CODE_FENCES = ("", "python", "py", "python3")


def prompt_donors(texts: Sequence[str], parent: str) -> list[Donor]:
    """The other programs a prompt shows, as donors: every fenced Python block that compiles,
    is not the parent and shares its structure (a function name or a third of its lines), with
    the score of the header line above it when it has one (OpenEvolve's ``### Program 1 (Score:
    0.9)`` and ``### Inspiration 1 (Score: ...)``). Sorted by score, then text: the order a prompt
    lists them in does not matter."""
    parent_source = Source.read(parent)
    parent_names = set(functions_of(parent_source.tree)) if parent_source else set()
    parent_lines = parent.strip().split("\n")
    found: dict[str, Donor] = {}
    for text in texts:
        for match in _FENCE.finditer(text):
            language, code = match.group(1).strip().lower(), match.group(2)
            if language not in _CODE_FENCES or code.strip() == parent.strip() or code in found:
                continue
            donor_source = Source.read(code)
            if donor_source is None or not compiles(code):
                continue
            shared = parent_names & set(functions_of(donor_source.tree))
            ratio = difflib.SequenceMatcher(a=parent_lines, b=code.strip().split("\n"), autojunk=False).ratio()
            if not shared and ratio < 0.33:
                continue
            found[code] = Donor(code, _header_score(text, match.start()), shows_error(text, match.end()))
    return sorted(found.values(), key=lambda d: (-(d.score if d.score is not None else -math.inf),
                                                 hashlib.sha256(d.code.encode()).hexdigest()))


def _header_score(text: str, position: int) -> float | None:
    """The score on the header line just above a fenced block (``### Program 2 (Score: 0.5)``)."""
    before = text[:position].rstrip("\n").rsplit("\n", 2)[-2:]
    for line in reversed(before):
        if line.startswith("#"):
            match = _SCORED_HEADER.search(line)
            if match:
                try:
                    return float(match.group(1))
                except ValueError:
                    return None
    return None


def generic_seed(server_seed: int, request_seed: Any, parent: str, donors: Sequence[Donor],
                 messages: Any = None) -> list[int]:
    """Seed words of one request: the server's seed, the request's seed (OpenEvolve sends one per
    iteration), the parent and the donors (as a set). Other prompt text (metrics, timings, the
    order of the programs shown) does not change the child; without a request seed the whole
    messages are hashed too, so repeated requests still get different children."""
    material = [int(server_seed), request_seed if isinstance(request_seed, int) and not isinstance(
        request_seed, bool) else None, parent, sorted(hashlib.sha256(d.code.encode()).hexdigest() for d in donors)]
    if material[1] is None:
        material.append(json.dumps(messages, sort_keys=True, default=str))
    digest = hashlib.sha256(json.dumps(material).encode()).digest()
    return [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]
