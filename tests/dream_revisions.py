"""Policy files an LLM developer might write, good and bad, for the dreaming-loop tests.

Each is the text of a whole policy file. The test server answers with them (fenced, as an LLM
would); the hostile ones must end as recorded failures, the good one is kept only when it
scores higher than the incumbent.
"""

from __future__ import annotations

from dream_gym.dream.builtin_developer import family_file

SYNTAX_ERROR = """def act(view):
    return [0] if view.rounds == 0 else [
"""

INFINITE_LOOP = """def act(view):
    while True:
        pass
"""

ILLEGAL_BATCH = """def act(view):
    # 999 is never on the frontier, and a non-root id may not repeat
    return [999] if view.rounds else [0, 0]
"""

NO_INTERFACE = """def decide(view):
    return []
"""


def reads_world_from_disk(world_file: str) -> str:
    """Tries to open a history world's nodes.jsonl (the worst case: it knows the path)."""
    return f'''def act(view):
    with open({world_file!r}) as handle:
        handle.read()
    return [0]
'''


READS_WORLD_FROM_MEMORY = """import gc


def act(view):
    worlds = [o for o in gc.get_objects() if type(o).__name__ in ("World", "ReplaySession", "Replay")]
    if not worlds:
        raise RuntimeError("no world in memory to peek at")
    return [0]
"""

UNSEEDED_RANDOM = """import random


def act(view):
    if view.rounds >= 6:
        return []
    legal = list(view.frontier)
    pick = random.choice(legal)
    return [pick] if pick != 0 or view.root_slots else []
"""

#: Deterministic within a process, but its choice follows the iteration order of a set of strings,
#: which depends on PYTHONHASHSEED.
HASH_ORDER = """def act(view):
    if view.rounds >= 5:
        return []
    names = {f"node-{i}" for i in view.frontier}
    pick = int(next(iter(names)).split("-")[1])
    return [pick] if pick != 0 or view.root_slots else []
"""

#: Opens one branch, refines it twice, stops: valid, deterministic, and weak.
WEAK = """def act(view):
    if view.rounds == 0:
        return [0]
    if view.rounds >= 3:
        return []
    leaves = [i for i in view.frontier if i != 0]
    return leaves[:1]
"""

#: A parametric family file with parameters that score well on the shipped sum-difference and
#: lasso worlds (found by the built-in developer's search).
STRONG_PARAMS = {
    "branches_lo": 2.56, "branches_hi": 2.47, "patience_lo": 9, "patience_hi": 13, "rounds_lo": 9,
    "rounds_hi": 23, "width_lo": 0.63, "width_hi": 0.95, "stall_width": 0.89, "explore_lo": 0.33,
    "explore_hi": 0.74, "recovery": 1, "retries": 2, "branch_patience": 1, "min_gain": 0.039,
    "trend_weight": 0.075, "momentum": 0.0,
}


def strong() -> str:
    return family_file(STRONG_PARAMS, header="a tuned revision")


def fenced(code: str, words: str = "Here is the revised policy.") -> str:
    return f"{words}\n\n```python\n{code.rstrip()}\n```\n"


def off_task(task: str) -> str:
    """The tuned family file, except that on any task but ``task`` it stops at once (an empty
    batch): it scores like :func:`strong` on a history of that task and 0 everywhere else."""
    code = strong().replace(
        "    def act(self, view):\n",
        f"    def act(self, view):\n        if view.task_name != {task!r}:\n            return []\n", 1)
    assert code != strong(), "the family file has no act() to guard"
    return code
