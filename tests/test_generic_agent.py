"""The generic no-LLM agent (dream_gym.online.agents.generic) and OpenEvolve on any task without a key.

The agent's edits are tested one kind at a time on small programs written here; its answers
through the agent server against OpenEvolve's own prompt builder and parsers (diff and full
rewrite); `dream-gym serve-agent --task initial_program.py,evaluator.py` over HTTP; and
`dream-gym deploy --system openevolve` end to end on the project's own task
(tests/data/openevolve_task), twice with the same seed. What makes a run repeat (ordered island
sets, seeded ids, rounds taken in iteration order, seeded evaluations) is tested against its
control. OpenEvolve's own examples are measured in experiments/generic_agent/ (done_check.py).
"""

from __future__ import annotations

import ast
import difflib
import inspect
import json
import os
import re
import subprocess
import sys
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from dream_gym.online.agents.generic import (
    EDIT_WEIGHTS,
    EDITS,
    FILLS,
    Donor,
    GenericAgent,
    compiles,
    evolve_regions,
    generic_seed,
    prompt_donors,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "openevolve_task"
TASK = f"{FIXTURE / 'initial_program.py'},{FIXTURE / 'evaluator.py'}"
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")

PROGRAM = '''"""A program written for these tests."""
LIMIT = 7  # outside the evolve block: never edited
# EVOLVE-BLOCK-START
import math

MODE = "fast"  # one of ['fast', 'careful', 'exhaustive']
STEPS = 40
RATE = 0.25


def weight(i):
    return RATE * i


def search(values):
    best = values[0]
    total = 0.0
    for i in range(STEPS):
        total += weight(i)
        if total > 100:
            break
    k = 0
    while k < 10:
        k += 1
    best = min(best, min(values))
    return best, math.floor(total)


# EVOLVE-BLOCK-END
def main():
    return search([3, 1, 2])
'''


def only(kind: str) -> GenericAgent:
    """The agent making one kind of edit, one edit per child."""
    return GenericAgent(weights={kind: 1.0}, max_edits=1)


def children(agent: GenericAgent, code: str = PROGRAM, seeds: range = range(24), donors=()) -> list[tuple[str, str]]:
    return [(lambda c: (c[0], c[1][0]))(agent.child(code, donors, np.random.default_rng(s))) for s in seeds]


def changed_lines(parent: str, child: str) -> tuple[list[str], list[str]]:
    diff = list(difflib.unified_diff(parent.split("\n"), child.split("\n"), lineterm="", n=0))
    removed = [line[1:] for line in diff if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in diff if line.startswith("+") and not line.startswith("+++")]
    return removed, added


def block_of(code: str) -> str:
    first, last = evolve_regions(code)[0]
    return "\n".join(code.split("\n")[first - 1:last])


def outside(code: str) -> str:
    first, last = evolve_regions(code)[0]
    lines = code.split("\n")
    return "\n".join(lines[: first - 1] + lines[last:])


# -- the edits ---------------------------------------------------------------------------------------
def test_number_edits_keep_ints_ints_and_leave_indices_alone() -> None:
    found = children(only("number"))
    assert len({c for c, _ in found}) > 8  # seeded: different seeds, different children
    for child, note in found:
        assert compiles(child) and child != PROGRAM and outside(child) == outside(PROGRAM)
        removed, added = changed_lines(PROGRAM, child)
        assert len(removed) == len(added) == 1, note
        old_numbers, new_numbers = NUMBER.findall(removed[0]), NUMBER.findall(added[0])
        assert [type(ast.literal_eval(v)) for v in old_numbers] == [type(ast.literal_eval(v)) for v in new_numbers], note
        assert "values[0]" not in removed[0] or "values[0]" in added[0], note  # an index is not tuned
    steps = [int(ast.literal_eval(added[0].split("=")[1])) for child, _ in found
             for removed, added in [changed_lines(PROGRAM, child)] if removed[0].startswith("STEPS")]
    assert steps and all(0 < s != 40 for s in steps) and any(s > 40 for s in steps) and any(s < 40 for s in steps)
    assert all(abs(s - 40) <= 40 * 3 for s in steps)  # on the scale of the value, not a random number


def test_bound_compare_and_swap_edits() -> None:
    bounds = {note for _, note in children(only("bound"))}
    assert any("STEPS + 1" in n or "STEPS - 1" in n for n in bounds), bounds
    assert any(n.startswith("bound: bound 10 ->") for n in bounds), bounds  # the while limit nudged
    compares = children(only("compare"))
    for child, note in compares:
        removed, added = changed_lines(PROGRAM, child)
        assert len(removed) == len(added) == 1, note
        assert added[0] in (removed[0].replace(" > ", " >= "), removed[0].replace(" < ", " <= ")), note
    assert {n.split(":")[1].strip().split(" (")[0] for _, n in compares} == {"> -> >=", "< -> <="}
    swaps = children(only("swap"))
    assert {n.split(" (")[0] for _, n in swaps} == {"swap: min -> max", "swap: floor -> ceil"}
    for child, _ in swaps:
        assert compiles(child) and outside(child) == outside(PROGRAM)


def test_statement_edits_duplicate_delete_or_move_within_a_block() -> None:
    found = children(only("statement"), seeds=range(40))
    actions = {note.split(":")[1].split()[0] for _, note in found}
    assert actions == {"duplicated", "deleted", "moved"}
    for child, note in found:
        assert compiles(child) and outside(child) == outside(PROGRAM), note
        assert "def search(values):" in child and "return best" in child  # no def, no return touched


def test_string_edits_take_a_sibling_from_the_listed_options() -> None:
    found = children(only("string"))
    values = set()
    for child, note in found:
        removed, added = changed_lines(PROGRAM, child)
        assert removed[0].startswith('MODE = "fast"'), note
        values.add(ast.literal_eval(added[0].split("=")[1].split("#")[0].strip()))
    assert values == {"careful", "exhaustive"}


ARRAYS = '''"""A program written for these tests: points that are all one value."""
# EVOLVE-BLOCK-START
import numpy as np

WIDTH = 0.5


def points(n):
    grid = np.zeros((n, 2))
    filled = np.full((n,), WIDTH)
    return grid + filled[:, None]


# EVOLVE-BLOCK-END
'''


def run_points(code: str):
    namespace: dict = {}
    exec(compile(code, "<test program>", "exec"), namespace)  # a program written for this test
    return namespace["points"](7)


def test_a_constant_array_becomes_a_small_seeded_random_array_and_nothing_else() -> None:
    found = children(only("array"), code=ARRAYS, seeds=range(60))
    kinds, fills = set(), set()
    # one of the fills, scaled by a tenth or a hundredth of the literals' scale (0.5)
    expected = {f"{name} = {base}{form.format(np='np', random=f'np.random.default_rng(SEED).random({shape})', scale=scale)}"
                for name, base, shape in (("grid", "", "(n, 2)"), ("filled", "(WIDTH) + ", "(n,)"))
                for form in FILLS.values() for scale in ("0.05", "0.005")}
    for child, note in found:
        removed, added = changed_lines(ARRAYS, child)
        assert len(removed) == len(added) == 1, note
        kinds.add(removed[0].split("=")[0].strip())
        fills.add(re.sub(r"default_rng\(\d+\)", "default_rng(SEED)", added[0].strip()))
        assert re.sub(r"default_rng\(\d+\)", "default_rng(SEED)", added[0].strip()) in expected, added[0]
        values = run_points(child)
        assert values.shape == run_points(ARRAYS).shape == (7, 2) and len(np.unique(values)) > 2
        assert np.array_equal(values, run_points(child))  # seeded: the same child, the same points
    assert kinds == {"grid", "filled"}
    assert {f.split(" = ")[1].split("np.random")[0] for f in fills} == {"", "np.sort(", "(WIDTH) + ", "(WIDTH) + np.sort("}
    assert len({re.sub(r"0\.0+5$", "", f) for f in fills}) >= 8  # every form of fill, on both sites
    # the whole agent gives such a child no other edit (edits stacked on it mostly break the program)
    for child, notes in (GenericAgent().child(ARRAYS, [], np.random.default_rng(s), parent_score=0.0) for s in range(40)):
        if "default_rng" in child:
            assert len(notes) == 1 and len(changed_lines(ARRAYS, child)[0]) == 1, notes
    # the control: without numpy imported there is no site (a zeros() of another library is left alone)
    other = ARRAYS.replace("import numpy as np", "import torch as np")
    assert children(only("array"), code=other, seeds=range(3))[0][1] == "no edit site: a comment line added"
    # and a program without a site gets exactly the children of the agent without this edit
    without = GenericAgent(weights={k: w for k, w in EDIT_WEIGHTS.items() if k != "array"})
    for seed in range(20):
        for code in (PROGRAM, other):
            assert GenericAgent().child(code, [], np.random.default_rng(seed), parent_score=0.0) == without.child(
                code, [], np.random.default_rng(seed), parent_score=0.0)


def test_crossover_takes_a_function_or_a_block_from_a_better_program() -> None:
    donor_code = PROGRAM.replace("    k = 0\n", "    k = 3\n").replace(
        "    best = min(best, min(values))\n", "    best = min(values) - 1\n").replace(
        "    return RATE * i\n", "    return RATE * i * i\n")
    better = Donor(donor_code, score=2.0)
    found = [(c, n) for c, n in children(only("crossover"), donors=[better]) if n.startswith("crossover")]
    assert {note.split(":")[1].split()[0] for _, note in found} == {"function", "lines"}
    for child, note in found:
        assert compiles(child) and child not in (PROGRAM, donor_code), note
        _, added = changed_lines(PROGRAM, child)
        assert set(added) <= set(donor_code.split("\n")), note  # every new line is the donor's
    # a worse program is not crossed with: the agent falls back to a comment line
    worse = GenericAgent(weights={"crossover": 1.0}, max_edits=1).child(
        PROGRAM, [Donor(donor_code, score=0.5)], np.random.default_rng(0), parent_score=1.0)
    assert worse[1] == ["no edit site: a comment line added"] and compiles(worse[0])


def test_numbers_move_the_way_the_shown_history_says() -> None:
    """A program scored worse with a smaller STEPS: STEPS grows far more often than it shrinks."""
    worse = Donor(PROGRAM.replace("STEPS = 40", "STEPS = 30"), score=0.5)
    agent = only("number")
    moves = []
    for seed in range(60):
        child, notes = agent.child(PROGRAM, [worse], np.random.default_rng(seed), parent_score=1.0)
        if notes[0].startswith("number: 40 ->"):
            moves.append(int(notes[0].split("->")[1].split()[0]))
    assert len(moves) > 20
    assert sum(m > 40 for m in moves) > 3 * sum(m < 40 for m in moves)
    blind = [int(n.split("->")[1].split()[0]) for _, n in children(agent, seeds=range(200)) if n.startswith("number: 40")]
    assert sum(m > 40 for m in blind) < 3 * sum(m < 40 for m in blind)  # the control: no history, no lean


def test_a_failed_program_is_no_crossover_source_and_its_change_is_mostly_not_made_again() -> None:
    """A shown program that failed (an error shown) scored 2.0 by its header: crossover does not take
    from it; its literal's change is mostly not repeated (STEPS moves less often than without)."""
    donor_code = PROGRAM.replace("    return RATE * i\n", "    return RATE * i * i\n").replace("STEPS = 40", "STEPS = 30")
    crossing = GenericAgent(weights={"crossover": 1.0}, max_edits=1)
    failed = crossing.child(PROGRAM, [Donor(donor_code, 2.0, failed=True)], np.random.default_rng(0), parent_score=1.0)
    assert failed[1] == ["no edit site: a comment line added"]
    taken = crossing.child(PROGRAM, [Donor(donor_code, 2.0)], np.random.default_rng(0), parent_score=1.0)
    assert taken[1][0].startswith("crossover")  # the control: the same program without an error
    # the number whose change failed is left alone three times in four; with an equal score, not
    agent = only("number")
    def steps_moved(donor: Donor) -> int:
        notes = [agent.child(PROGRAM, [donor], np.random.default_rng(s), parent_score=1.0)[1][0] for s in range(120)]
        return sum(n.startswith("number: 40 ->") for n in notes)
    assert 3 * steps_moved(Donor(donor_code, 1.0, failed=True)) < steps_moved(Donor(donor_code, 1.0))


def test_a_structural_change_a_shown_program_failed_with_is_mostly_not_repeated() -> None:
    """The plain fill failed (shown with an error): the other fills are written far more often."""
    plain = [c for c, n in children(only("array"), code=ARRAYS, seeds=range(200))
             if re.search(r"grid = np\.random\.default_rng\(\d+\)\.random\(\(n, 2\)\) \* ", c)][0]
    def plain_share(donor: Donor) -> float:
        found = [GenericAgent(weights={"array": 1.0}, max_edits=1).child(
            ARRAYS, [donor], np.random.default_rng(s), parent_score=0.0)[0] for s in range(200)]
        grid = [c for c in found if "grid = np.zeros" not in c]
        return sum(bool(re.search(r"grid = np\.random\.default_rng\(\d+\)\.random\(\(n, 2\)\) \* ", c))
                   for c in grid) / len(grid)
    assert plain_share(Donor(plain, 0.0, failed=True)) < 0.5 * plain_share(Donor(plain, 0.0))


def test_a_parent_scoring_nothing_draws_its_constant_array_edit_more_often() -> None:
    """PROGRAM with an array of zeros besides its other sites: a parent scoring 0 gets the array
    edit in most children; the control: the same parent scoring 1.0, in a minority."""
    code = PROGRAM.replace("import math\n", "import math\n\nimport numpy as np\n").replace(
        "    total = 0.0\n", "    total = 0.0\n    grid = np.zeros((4, 2))\n").replace(
        "return best, math.floor(total)", "return best + grid.sum(), math.floor(total)")
    def array_share(score: float) -> float:
        notes = [GenericAgent().child(code, [], np.random.default_rng(s), parent_score=score)[1][0]
                 for s in range(100)]
        return sum(n.startswith("array") for n in notes) / len(notes)
    assert array_share(0.0) > 0.8 > 0.4 > array_share(1.0)


SHAPES = '''# EVOLVE-BLOCK-START
import numpy as np


def points(n):
    grid = np.zeros((n, 2)).reshape(2, n)
    return np.power(grid, 2) + np.ones(shape=(3, n))[:2]


# EVOLVE-BLOCK-END
'''


def test_the_shape_of_an_array_is_not_tuned() -> None:
    """The answer's shape is its interface with the evaluator; the control: another 2 is tuned,
    and a count read by ``range`` too."""
    named = "# EVOLVE-BLOCK-START\nimport numpy as np\n\nn = 11\nm = 7\n\n\ndef points():\n" \
            "    return np.zeros((n, 2)) + sum(range(m))\n# EVOLVE-BLOCK-END\n"
    notes = {n.split(" (")[0] for _, n in children(only("number"), code=named, seeds=range(30))}
    assert notes and all(n.startswith("number: 7 -> ") for n in notes), notes  # n = 11 is the shape
    changed = {changed_lines(SHAPES, c)[1][0].strip() for c, _ in children(only("number"), code=SHAPES, seeds=range(40))}
    # only the exponent of power() moves: zeros' shape, reshape's and shape= stay
    assert changed and all(re.fullmatch(r"return np\.power\(grid, \d+\) \+ np\.ones\(shape=\(3, n\)\)\[:2\]", c)
                           for c in changed), changed


CONFIG = '''# EVOLVE-BLOCK-START
def configure():
    # mode: ['fast', 'careful', 'exhaustive']
    config = {"mode": "fast", "level": 3}
    config = {"mode": "careful", "level": 4}
    return config


# EVOLVE-BLOCK-END
'''


def test_a_store_replaced_before_it_is_read_is_no_edit_site_and_is_not_copied() -> None:
    for kind in ("number", "string"):
        for child, note in children(only(kind), code=CONFIG, seeds=range(20)):
            removed, _ = changed_lines(CONFIG, child)
            assert removed == ['    config = {"mode": "careful", "level": 4}'], note  # the first store is dead
    alive = CONFIG.replace('    config = {"mode": "careful", "level": 4}\n', "")
    assert any('"fast"' in changed_lines(alive, c)[0][0] for c, _ in children(only("string"), code=alive))  # control
    # a deleted first store would leave its readers with an undefined name: only later stores go
    deleted = [n for _, n in children(only("statement"), seeds=range(80)) if n.startswith("statement: deleted")]
    assert deleted
    for note in deleted:
        line = PROGRAM.split("\n")[int(note.split("line ")[1].split("-")[0]) - 1].strip()
        assert not re.fullmatch(r"(STEPS|RATE|MODE|k|total|best) = .*", line) or "min(best" in line, note
    # a copy of a plain store would be dead: no duplicated assignment (``total += ...`` may be copied)
    duplicated = [n for _, n in children(only("statement"), seeds=range(80)) if n.startswith("statement: duplicated")]
    assert duplicated
    for note in duplicated:
        line = PROGRAM.split("\n")[int(note.split("line ")[1].split("-")[0]) - 1].strip()
        assert not re.fullmatch(r"(STEPS|RATE|MODE|k|total) = [^=]*", line) or "min(best" in line, note


def test_a_child_changes_each_place_once() -> None:
    """PROGRAM has one string literal with siblings: a child of several string edits (a parent
    scoring 0 asks for two or more) changes it once, never overwriting its own first change."""
    agent = GenericAgent(weights={"string": 1.0})
    found = [agent.child(PROGRAM, [], np.random.default_rng(s), parent_score=0.0) for s in range(30)]
    assert all(len(notes) == 1 and notes[0].startswith('string: "fast" ->') for _, notes in found)
    # the control: with two sites, two string edits in one child
    two = PROGRAM.replace("STEPS = 40", 'STEPS = 40\nLEVEL = "low"  # one of ["low", "high"]')
    assert any(len(notes) == 2 for _, notes in (agent.child(two, [], np.random.default_rng(s), parent_score=0.0)
                                                  for s in range(30)))


def test_a_value_tried_without_gain_is_not_tried_again() -> None:
    """A shown program scored as the parent with MODE "careful": the site stays open, "careful" is
    not tried again; the control: with no score to compare (no history), both siblings come."""
    tried = Donor(PROGRAM.replace('MODE = "fast"', 'MODE = "careful"').replace("RATE = 0.25", "RATE = 0.5"), score=1.0)
    def values(parent_score: float | None) -> set[str]:
        found = (only("string").child(PROGRAM, [tried], np.random.default_rng(s), parent_score=parent_score)
                 for s in range(24))
        return {ast.literal_eval(changed_lines(PROGRAM, child)[1][0].split("=")[1].split("#")[0].strip())
                for child, _ in found}
    assert values(1.0) == {"exhaustive"}
    assert values(None) == {"careful", "exhaustive"}


def test_every_child_compiles_differs_and_repeats_for_its_seed() -> None:
    agent = GenericAgent()
    donors = [Donor(PROGRAM.replace("RATE = 0.25", "RATE = 0.5"), 3.0)]
    for seed in range(60):
        child, notes = agent.child(PROGRAM, donors, np.random.default_rng(seed), parent_score=1.0)
        assert compiles(child) and child != PROGRAM and notes
        assert outside(child) == outside(PROGRAM)
        assert agent.child(PROGRAM, donors, np.random.default_rng(seed), parent_score=1.0) == (child, notes)
    counts = [len(agent.child(PROGRAM, donors, np.random.default_rng(s))[1]) for s in range(60)]
    assert min(counts) == 1 and max(counts) > 1  # a seeded number of edits


def test_a_program_without_sites_or_that_does_not_compile_still_gets_a_child() -> None:
    agent = GenericAgent()
    bare = "# EVOLVE-BLOCK-START\ndef f():\n    pass\n# EVOLVE-BLOCK-END\n"
    child, notes = agent.child(bare, [], np.random.default_rng(0))
    assert compiles(child) and child != bare and notes == ["no edit site: a comment line added"]
    broken = "# EVOLVE-BLOCK-START\ndef f(:\n    return 1\n# EVOLVE-BLOCK-END\n"
    fixed, notes = agent.child(broken, [Donor("# EVOLVE-BLOCK-START\ndef f():\n    return 2\n# EVOLVE-BLOCK-END\n", 1.0)],
                               np.random.default_rng(0))
    assert compiles(fixed) and "return 2" in fixed and notes[0].startswith("repair")
    alone, _ = agent.child(broken, [], np.random.default_rng(0))
    assert alone != broken  # the slip stays (nothing to take over), the text still changes


def test_unknown_edit_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown edit kinds"):
        GenericAgent(weights={"rewrite-everything": 1.0})
    assert set(EDITS) == {"number", "bound", "compare", "swap", "statement", "string", "crossover", "array"}


# -- what it reads off a prompt, and how it answers ---------------------------------------------------------
openevolve = pytest.importorskip("openevolve")

from openevolve.config import PromptConfig  # noqa: E402
from openevolve.prompt.sampler import PromptSampler  # noqa: E402
from openevolve.utils.code_utils import apply_diff_blocks, extract_diffs, parse_full_rewrite  # noqa: E402

from dream_gym.online.agent_server import AgentResponder  # noqa: E402


def fixture_parent() -> str:
    return (FIXTURE / "initial_program.py").read_text()


def prompt(code: str, others: list[tuple[str, float]], *, diff: bool, eval_time: float = 0.01) -> list[dict[str, str]]:
    """A prompt built by OpenEvolve's own PromptSampler and default templates."""
    programs = [{"id": f"p{i}", "code": other, "metrics": {"combined_score": score, "eval_time": eval_time},
                 "metadata": {}} for i, (other, score) in enumerate(others)]
    built = PromptSampler(PromptConfig()).build_prompt(
        current_program=code, parent_program=code, program_metrics={"combined_score": 0.3, "eval_time": eval_time},
        previous_programs=programs[:3], top_programs=programs, inspirations=programs[3:], language="python",
        evolution_round=2, diff_based_evolution=diff, feature_dimensions=[])
    return [{"role": "system", "content": built["system"]}, {"role": "user", "content": built["user"]}]


def others_of(code: str) -> list[tuple[str, float]]:
    return [(code.replace("SCALE = 1.0", f"SCALE = {1.0 + i / 4}"), 0.3 + i / 10) for i in range(1, 6)]


def test_prompt_donors_are_the_other_programs_shown() -> None:
    code = fixture_parent()
    others = others_of(code)
    found = prompt_donors([m["content"] for m in prompt(code, others, diff=True)], code)
    assert sorted((d.code.strip(), round(d.score, 4)) for d in found) == sorted((c.strip(), round(s, 4)) for c, s in others)
    assert [d.score for d in found] == sorted((d.score for d in found), reverse=True)


def test_prompt_donors_tell_the_programs_that_failed() -> None:
    """OpenEvolve lists a top program's error among its metrics: that program is read as failed.
    An inspiration's error it does not show (its line reads ``Unique approach: [Fragment
    formatting error: 'metric_name']``, a sentence, not a metric): that one is not."""
    code = fixture_parent()
    others = others_of(code)
    programs = [{"id": f"p{i}", "code": other, "metrics": {"combined_score": score}, "metadata": {}}
                for i, (other, score) in enumerate(others)]
    programs[1]["metrics"] = {"combined_score": 0.0, "error": "ValueError: no points"}
    programs[4]["metrics"] = {"combined_score": 0.0, "error": "NameError: name 'x' is not defined"}
    built = PromptSampler(PromptConfig()).build_prompt(
        current_program=code, parent_program=code, program_metrics={"combined_score": 0.3},
        previous_programs=programs[:3], top_programs=programs[:3], inspirations=programs[3:], language="python",
        evolution_round=2, diff_based_evolution=True, feature_dimensions=[])
    failed = {d.code for d in prompt_donors([built["user"]], code) if d.failed}
    assert failed == {others[1][0]}
    assert "Fragment formatting error" in built["user"]
    passed = [dict(p, metrics={"combined_score": 0.5}) for p in programs]
    built = PromptSampler(PromptConfig()).build_prompt(
        current_program=code, parent_program=code, program_metrics={"combined_score": 0.3},
        previous_programs=passed[:3], top_programs=passed[:3], inspirations=passed[3:], language="python",
        evolution_round=2, diff_based_evolution=True, feature_dimensions=[])
    found = prompt_donors([built["user"]], code)
    assert len(found) == 5 and not any(d.failed for d in found)  # the control: no error, none failed


@pytest.mark.parametrize("diff", [True, False])
def test_answers_apply_the_way_openevolve_applies_them(diff: bool) -> None:
    responder = AgentResponder(TASK, seed=3)
    code = fixture_parent()
    messages = prompt(code, others_of(code), diff=diff)
    for request_seed in range(12):
        answer = responder.reply({"messages": messages, "seed": request_seed})
        if diff:
            blocks = extract_diffs(answer)
            assert blocks and "```" not in answer
            child, applied = apply_diff_blocks(code, blocks)
            assert applied == len(blocks)
        else:
            assert "<<<<<<< SEARCH" not in answer
            child = parse_full_rewrite(answer, "python")
        assert child is not None and compiles(child) and child.strip() != code.strip()
        assert outside(child).strip() == outside(code).strip()  # the run() entry point is never touched
        assert responder.reply({"messages": messages, "seed": request_seed}) == answer


def test_the_child_depends_on_the_parent_the_programs_shown_and_the_seed_only() -> None:
    responder = AgentResponder(TASK, seed=3)
    code = fixture_parent()
    others = others_of(code)
    base = [responder.reply({"messages": prompt(code, others, diff=True), "seed": s}) for s in range(6)]
    # other timings and the programs listed in another order: the same answers
    shuffled = [responder.reply({"messages": prompt(code, others[::-1], diff=True, eval_time=0.7), "seed": s})
                for s in range(6)]
    assert shuffled == base
    # the controls: another request seed, another server seed, other programs shown
    assert len(set(base)) > 3
    assert [AgentResponder(TASK, seed=4).reply({"messages": prompt(code, others, diff=True), "seed": s})
            for s in range(6)] != base
    fewer = [responder.reply({"messages": prompt(code, others[:2], diff=True), "seed": s}) for s in range(6)]
    assert fewer != base
    assert generic_seed(0, 5, code, []) != generic_seed(0, 6, code, [])


def test_a_task_given_as_files_must_exist(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        AgentResponder(f"{tmp_path / 'initial_program.py'},{FIXTURE / 'evaluator.py'}")
    done = subprocess.run([sys.executable, "-m", "dream_gym", "serve-agent", "--task",
                           f"{tmp_path / 'nope.py'},{FIXTURE / 'evaluator.py'}", "--port", "0"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and done.stderr.count("does not exist") == 1


def test_serve_agent_answers_for_a_task_given_as_files() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "dream_gym", "serve-agent", "--task", TASK, "--port", "0",
                             "--seed", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        base = proc.stdout.readline().strip()
        assert base.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else base
        code = fixture_parent()
        body = json.dumps({"model": "dream-gym-builtin", "seed": 7,
                           "messages": prompt(code, others_of(code), diff=True)}).encode()
        request = urllib.request.Request(f"{base}/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())["choices"][0]["message"]["content"]
        child, applied = apply_diff_blocks(code, extract_diffs(answer))
        assert applied >= 1 and compiles(child) and child != code
        with urllib.request.urlopen(f"{base}/models", timeout=60) as response:
            assert json.loads(response.read())["data"][0]["task"] == TASK
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# -- a run that repeats: what OpenEvolve would otherwise vary -----------------------------------------------------
def test_the_evaluator_openevolve_gets_scores_a_program_the_same_way_each_time(tmp_path: Path) -> None:
    import importlib.util

    from dream_gym.integrations.files_task import FilesTask
    from dream_gym.integrations.openevolve.evaluator import write_files_evaluator

    def write_seeded_evaluator(evaluator: Path, folder: Path, seed: int) -> Path:
        return write_files_evaluator(FilesTask.of(evaluator, seed=seed, wall_s=60), folder)

    def load(path: Path, name: str):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    program = FIXTURE / "initial_program.py"
    raw = load(FIXTURE / "evaluator.py", "raw_fixture_evaluator")
    assert raw.evaluate(str(program))["combined_score"] != raw.evaluate(str(program))["combined_score"]  # the control
    seeded = load(write_seeded_evaluator(FIXTURE / "evaluator.py", tmp_path / "a", seed=5), "seeded_a")
    again = load(write_seeded_evaluator(FIXTURE / "evaluator.py", tmp_path / "b", seed=5), "seeded_b")
    other = load(write_seeded_evaluator(FIXTURE / "evaluator.py", tmp_path / "c", seed=6), "seeded_c")
    def score_of(evaluator) -> float:  # an OpenEvolve EvaluationResult, the sandbox's metrics
        return evaluator.evaluate(str(program)).metrics["combined_score"]

    score = score_of(seeded)
    assert score_of(seeded) == score == score_of(again)
    assert score_of(other) != score
    assert list(inspect.signature(seeded.evaluate).parameters) == ["program_path", "evaluator_args"]  # OpenEvolve reads it


def test_island_sets_iterate_in_insertion_order_whatever_the_hash_seed() -> None:
    script = ("import json, uuid, random\n"
              "from dream_gym.integrations.openevolve.bridge import OrderedIdSet\n"
              "ids = [str(uuid.UUID(int=random.Random(1).getrandbits(128) + i)) for i in range(40)]\n"
              "ordered = OrderedIdSet(ids[:30]); ordered.discard(ids[3]); ordered |= ids[30:]\n"
              "expected = ids[:3] + ids[4:]\n"
              "print(json.dumps([list(set(ids)), list(ordered), list(ordered.copy()), expected]))\n")
    runs = []
    for hash_seed in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": hash_seed})
        runs.append(json.loads(done.stdout))
    assert runs[0][0] != runs[1][0]  # the control: a plain set's order changes with the hash seed
    assert runs[0][1] == runs[1][1] == runs[0][2] == runs[0][3]  # insertion order, in any process


def test_a_rounds_results_are_taken_in_iteration_order() -> None:
    from dream_gym.integrations.openevolve.bridge import InOrderPool

    release = threading.Event()
    with ThreadPoolExecutor(max_workers=2) as executor:
        pool = InOrderPool(executor)
        pool.new_round()
        first = pool.submit(release.wait, 30)
        second = pool.submit(lambda: "quick")
        second.future.result(timeout=30)
        assert second.future.done() and not second.done()  # finished, but not before the first
        release.set()
        first.result(timeout=30)
        assert first.done() and second.done() and second.result() == "quick"
        pool.new_round()
        assert pool.submit(lambda: 1).result(timeout=30) == 1  # a new round waits on nothing earlier


def test_program_ids_come_from_the_seed() -> None:
    from dream_gym.integrations.openevolve.bridge import program_id

    assert program_id(0, 3, "parent", "code") == program_id(0, 3, "parent", "code")
    assert len({program_id(0, 3, "parent", "code"), program_id(1, 3, "parent", "code"),
                program_id(0, 4, "parent", "code")}) == 3


# -- end to end ----------------------------------------------------------------------------------------------------------
def deploy(out: Path, task: str = TASK, budget: int = 20, seed: int = 0) -> subprocess.CompletedProcess[str]:
    """`dream-gym deploy` with no --model and no key in its environment."""
    env = {k: v for k, v in os.environ.items() if "API_KEY" not in k and "API_BASE" not in k}
    return subprocess.run([sys.executable, "-m", "dream_gym", "deploy", "--system", "openevolve", "--task", task,
                           "--policy", "greedy", "-W", "2", "--budget", str(budget), "--seed", str(seed),
                           "--out", str(out)], capture_output=True, text=True, timeout=900, cwd=out.parent, env=env)


def tree(folder: Path) -> list[tuple]:
    records = [json.loads(line) for line in (folder / "nodes.jsonl").read_text().splitlines() if line.strip()]
    return [(r["id"], r["parent"], r["score"], r.get("code")) for r in records]


@pytest.mark.slow
def test_deploy_on_a_task_given_as_files_needs_no_key_and_repeats(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    done = deploy(first)
    assert done.returncode == 0, done.stderr[-3000:]
    assert deploy(second).returncode == 0
    nodes = tree(first)
    assert len(nodes) >= 15
    root_score = nodes[0][2]
    assert max(s for _, _, s, _ in nodes if s is not None) > root_score
    assert tree(second) == nodes  # ids, parents, scores and code
    meta = json.loads((first / "world.json").read_text())
    assert "generic agent" in json.dumps(meta)
    assert (first / "task" / "evaluator.py").is_file()
