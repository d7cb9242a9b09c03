"""Validation of a revision before it is evaluated (docs/concepts/dreaming.md).

:func:`validate_policy_file` checks, cheapest first, and returns the first problem as a message
(``None`` when the file passes):

1. it parses (``SyntaxError`` with the line);
2. it defines the policy interface at top level: ``make_policy()``, a class ``Policy``, a class
   with ``reset`` and ``act``, or a function ``act(view)`` / ``policy(view)`` (read from the
   syntax tree, nothing runs);
3. it loads and decides in an isolated child (the same :class:`IsolatedPolicy` evaluation uses,
   with its time and memory limits and hardening) on :func:`tiny_world`, a small recorded
   world with two branches, a repairable and a hard failure: a short episode (at most
   ``rounds`` decisions) under the strict reveal rules, so a crash, a hang, an illegal batch, a
   hostile file that reads disk or memory, or a batch that is not a list is caught here.

A failure never stops the dreaming loop: the improvement step records the message with the
revision and the next prompt reports it.
"""

from __future__ import annotations

import ast
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from dream_gym.policy import run_episode
from dream_gym.policy_files.isolated import DEFAULT_MEMORY_MB
from dream_gym.replay.session import ReplaySession
from dream_gym.world.tree import World, build_world
from dream_gym.world.writer import new_meta

POLICY_FACTORIES = ("make_policy",)
#: The longest revision kept: the incumbent goes into every later prompt, so a reply padded to
#: hundreds of KB would be paid for at every call (the library's own policies are under 8 KB).
MAX_REVISION_CHARS = 50_000
POLICY_FUNCTIONS = ("act", "policy")


@lru_cache(maxsize=1)
def tiny_world() -> World:
    """Root (1.0) with three branches: an improving chain, a chain with a repairable failure
    that a retry repairs, and a branch that ends in a hard failure. W = 2."""
    records: list[dict[str, Any]] = [
        {"id": "root", "parent": None, "score": 1.0, "code": "def solve():\n    return 1\n"},
        {"id": "a1", "parent": "root", "score": 1.2},
        {"id": "b1", "parent": "root", "score": None, "error": "SyntaxError: invalid syntax",
         "fail_class": "repairable"},
        {"id": "a2", "parent": "a1", "score": 1.5},
        {"id": "b2", "parent": "b1", "score": 1.1},
        {"id": "c1", "parent": "root", "score": 0.9},
        {"id": "a3", "parent": "a2", "score": 1.4},
        {"id": "c2", "parent": "c1", "score": None, "error": "infeasible answer", "fail_class": "hard"},
        {"id": "a4", "parent": "a3", "score": 1.7},
        {"id": "b3", "parent": "b2", "score": 1.3},
    ]
    meta = new_meta("dream-validation-tiny", "validation", "A tiny world for checking policy files.",
                    workers=2, source="dream_gym.dream.validate")
    return build_world(meta, records)


def _defines_policy(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in (
                *POLICY_FACTORIES, *POLICY_FUNCTIONS):
            return True
        if isinstance(node, ast.ClassDef):
            methods = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            if node.name == "Policy" or {"reset", "act"} <= methods:
                return True
    return False


def check_source(code: str, filename: str = "<revision>") -> str | None:
    """Steps 1 and 2: the syntax and the interface, without running anything (and the size)."""
    if len(code) > MAX_REVISION_CHARS:
        return (f"the file is {len(code):,} characters long; a revision is at most {MAX_REVISION_CHARS:,} (it is "
                "sent in every later prompt)")
    try:
        tree = ast.parse(code, filename=filename)
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    except ValueError as exc:  # e.g. null bytes
        return f"not Python source: {exc}"
    if not _defines_policy(tree):
        return ("the file defines no policy: define make_policy(), a class named Policy with "
                "reset(context) and act(view), or a top-level function act(view)")
    return None


def validate_policy_file(path: str | os.PathLike[str], *, rounds: int = 3, decision_timeout_s: float = 5.0,
                         episode_timeout_s: float = 20.0, memory_mb: int = DEFAULT_MEMORY_MB) -> str | None:
    """All three steps on a policy file; the first problem as a message, or None."""
    from dream_gym.policy_files import load_policy

    path = Path(path)
    problem = check_source(path.read_text(encoding="utf-8"), str(path))
    if problem is not None:
        return problem
    try:
        policy = load_policy(path, decision_timeout_s=decision_timeout_s, episode_timeout_s=episode_timeout_s,
                             memory_mb=memory_mb, startup_timeout_s=max(15.0, 2 * decision_timeout_s))
    except Exception as exc:  # noqa: BLE001 - every way of failing to load is the revision's problem
        return f"{type(exc).__name__}: {exc}"
    try:
        session = ReplaySession(tiny_world(), max_rounds=rounds)
        result = run_episode(policy, session, on_error="record")
    finally:
        close = getattr(policy, "close", None)
        if callable(close):
            close()
    return result.error
