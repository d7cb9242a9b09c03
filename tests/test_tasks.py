"""Built-in tasks: initial programs score as documented; bad candidates are rejected correctly."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dream_gym.online.tasks import TASKS, Limits, get_task, list_tasks
from dream_gym.online.tasks.circle_packing import format_array, ring_layout, safe_radii
from dream_gym.online.tasks.sleep_task import code_score

CP_HEAD = "import numpy as np\n"


def packing_program(centers, radii, extra=""):
    return (CP_HEAD + extra + f"\ndef construct_packing():\n    return np.array({format_array(np.asarray(centers))}),"
            f" np.array({format_array(np.asarray(radii))})\n").replace("nan", "float('nan')")


def grid_packing(n=26):
    side = 6
    centers = np.array([((i % side + 0.5) / side, (i // side + 0.5) / side) for i in range(n)])
    return centers, np.full(n, 0.5 / side - 1e-6)


@pytest.fixture(scope="module")
def cp26():
    task = get_task("circle-packing-26")
    task.limits = Limits(wall_s=3.0, memory_mb=1024)  # short timeouts keep the tests fast
    return task


def test_registry_lists_and_rejects_unknown_names():
    assert {"circle-packing-26", "circle-packing-32", "sum-difference", "lasso-path"} <= set(list_tasks())
    assert "sleep-task" not in list_tasks() and "sleep-task" in list_tasks(include_hidden=True)
    with pytest.raises(KeyError, match="known tasks: .*circle-packing-26") as refused:
        get_task("circle-packing-27")
    assert "sleep-task" not in str(refused.value) and "initial_program.py" not in str(refused.value)
    with pytest.raises(KeyError, match="sum-difference; or a task of your own as its two files, initial_program.py,"):
        get_task("circle-packing-27", files_too=True)  # for the commands that take a task as files
    for name, factory in TASKS.items():
        task = factory()
        assert task.name == name and task.direction in ("maximize", "minimize") and task.description


@pytest.mark.parametrize("name,low,high", [("circle-packing-26", 0.9, 1.0), ("circle-packing-32", 0.9, 1.1)])
def test_circle_packing_initial_program(tmp_path, name, low, high):
    task = get_task(name)
    ev = task.evaluate(task.initial_program(), tmp_path)
    assert ev.valid and ev.fail_class is None and ev.error is None
    assert low <= ev.score <= high
    assert ev.metrics["sum_radii"] == pytest.approx(ev.score)
    # the built-in agent computes the initial program's radii with the function the program holds
    assert ev.score == pytest.approx(safe_radii(ring_layout(task.n)).sum(), rel=1e-12)
    evidence = ev.evidence
    assert evidence["admissible"] and evidence["exit"] == 0 and evidence["env_digest"].startswith("sha256:")
    assert {"t", "cmd", "duration_ms", "artifacts", "parsed"} <= set(evidence)
    assert any(a["path"] == "candidate.py" and len(a["sha256"]) == 64 for a in evidence["artifacts"])


def test_circle_packing_valid_grid_scores_its_sum(tmp_path, cp26):
    centers, radii = grid_packing()
    ev = cp26.evaluate(packing_program(centers, radii), tmp_path)
    assert ev.valid and ev.score == pytest.approx(radii.sum())


@pytest.mark.parametrize("mutate,needle,fail_class", [
    (lambda c, r: (c, np.where(np.arange(26) == 7, r + 0.01, r)), "overlap", "hard"),
    (lambda c, r: (np.where(np.arange(26)[:, None] == 0, [0.05, 0.5], c), np.where(np.arange(26) == 0, 0.07, r)),
     "sticks out of the unit square", "hard"),
    (lambda c, r: (c, np.where(np.arange(26) == 5, -0.01, r)), "non-positive radius", "hard"),
    (lambda c, r: (c[:25], r[:25]), "wrong shape", "repairable"),
    (lambda c, r: (c, np.where(np.arange(26) == 2, np.nan, r)), "non-finite", "repairable"),
])
def test_circle_packing_rejects_bad_packings(tmp_path, cp26, mutate, needle, fail_class):
    centers, radii = mutate(*grid_packing())
    ev = cp26.evaluate(packing_program(centers, radii), tmp_path)
    assert not ev.valid and ev.score is None
    assert ev.fail_class == fail_class and needle in ev.error, ev.error


@pytest.mark.parametrize("code,needle", [
    ("def construct_packing(:\n    pass\n", "SyntaxError"),
    ("import not_a_real_module_xyz\n", "ModuleNotFoundError"),
    ("def build():\n    return None\n", "construct_packing"),
    ("def construct_packing():\n    raise RuntimeError('boom')\n", "RuntimeError: boom"),
    ("def construct_packing():\n    while True:\n        pass\n", "timeout"),
    ("def construct_packing():\n    return [bytearray(1 << 30) for _ in range(8)]\n", "MemoryError"),
])
def test_circle_packing_broken_programs_are_repairable(tmp_path, cp26, code, needle):
    ev = cp26.evaluate(code, tmp_path)
    assert not ev.valid and ev.fail_class == "repairable" and needle in ev.error, ev.error


def test_self_reported_scores_and_forged_results_gain_nothing(tmp_path, cp26):
    centers, radii = grid_packing()
    # OpenEvolve-style third return value claiming a huge sum: ignored, the sum is recomputed.
    inflated = packing_program(centers, radii).replace("np.array([", "np.array([", 1)
    inflated = inflated.rstrip("\n") + ", 99.0\n"
    ev = cp26.evaluate(inflated, tmp_path)
    assert ev.valid and ev.score == pytest.approx(radii.sum()) and "ignored" in ev.diagnostics
    # A program that overwrites the harness's result file at exit with a fake score.
    forge = ("import atexit, json\natexit.register(lambda: json.dump({'ok': True, 'answer': {'score': 100}}, "
             "open('_result.json', 'w')))\n")
    ev = cp26.evaluate(packing_program(centers, radii, extra=forge), tmp_path / "forge")
    assert not ev.valid and "malformed answer" in ev.error
    # A program that patches the harness's json.dump to inject huge radii: validated, rejected.
    patch = ("import json\n_dump = json.dump\n"
             "def fake(obj, fh, **kw):\n    if obj.get('ok'):\n        obj['answer']['radii'] = [0.4] * 26\n"
             "    return _dump(obj, fh, **kw)\njson.dump = fake\n")
    ev = cp26.evaluate(packing_program(centers, radii, extra=patch), tmp_path / "patch")
    assert not ev.valid and ev.fail_class == "hard" and "circle" in ev.error


def test_evaluator_child_does_not_see_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    code = ("import os\ndef construct_set():\n    leaked = [k for k in ('OPENAI_API_KEY', 'AWS_SECRET_ACCESS_KEY') "
            "if k in os.environ]\n    return [0, 1, 2] + ([100] if leaked else [])\n")
    ev = get_task("sum-difference").evaluate(code, tmp_path)
    assert ev.valid and ev.metrics["size"] == 3


def test_sum_difference_initial_and_known_mstd_set(tmp_path):
    task = get_task("sum-difference")
    ev = task.evaluate(task.initial_program(), tmp_path)
    assert ev.valid and ev.score == pytest.approx(1.0)
    ev = task.evaluate("def construct_set():\n    return [0, 2, 3, 4, 7, 11, 12, 14]\n", tmp_path)
    # |A+A| = 26, |A-A| = 25 for this classic MSTD set.
    assert ev.valid and ev.metrics["sums"] == 26 and ev.metrics["differences"] == 25
    assert ev.score == pytest.approx(np.log(26 / 8) / np.log(25 / 8))


@pytest.mark.parametrize("values,needle,fail_class", [
    ("[0, 1, 1, 5]", "duplicated element 1", "hard"),
    ("[0, -3, 5]", "negative element -3", "hard"),
    ("list(range(600))", "at most 512", "hard"),
    ("[0, 10**8]", "not below", "hard"),
    ("[7]", "at least 2", "hard"),
    ("[0, 1.5, 3]", "not an integer", "repairable"),
])
def test_sum_difference_rejects_bad_sets(tmp_path, values, needle, fail_class):
    ev = get_task("sum-difference").evaluate(f"def construct_set():\n    return {values}\n", tmp_path)
    assert not ev.valid and ev.fail_class == fail_class and needle in ev.error, ev.error


def test_lasso_initial_program_is_valid_and_timed(tmp_path):
    task = get_task("lasso-path")
    assert task.direction == "minimize" and task.noisy
    ev = task.evaluate(task.initial_program(), tmp_path)
    assert ev.valid, ev.error
    assert 0.0 < ev.score < 3.0 and ev.score == min(ev.metrics["seconds"])
    assert ev.metrics["kkt_max_rel_violation"] <= 1e-3


def test_lasso_kkt_violation_and_shape_are_rejected(tmp_path):
    task = get_task("lasso-path")
    zeros = "import numpy as np\ndef lasso_path(X, y, lambdas):\n    return np.zeros((len(lambdas), X.shape[1]))\n"
    ev = task.evaluate(zeros, tmp_path)
    assert not ev.valid and ev.fail_class == "hard" and "KKT violated" in ev.error
    wrong = "import numpy as np\ndef lasso_path(X, y, lambdas):\n    return np.zeros((3, 3))\n"
    ev = task.evaluate(wrong, tmp_path)
    assert not ev.valid and ev.fail_class == "repairable" and "wrong shape" in ev.error


def test_lasso_timing_cannot_be_faked_by_patching_time(tmp_path):
    task = get_task("lasso-path")
    patched = ("import time, sys\ntime.perf_counter = lambda: 0.0\ntime.time = lambda: 0.0\n"
               "print('@@DONE 0', flush=True)\n" + task.initial_program())
    ev = task.evaluate(patched, tmp_path)
    assert ev.valid and ev.score > 0.01  # the parent's clock measured a real solve


def test_sleep_task_is_a_fixed_duration_measurement(tmp_path):
    task = get_task("sleep-task")
    code = task.initial_program()
    ev = task.evaluate(code, tmp_path)
    assert ev.valid and ev.score == code_score(code) and 0.45 <= ev.duration_s <= 1.0
    ev = task.evaluate("def payload(:\n", tmp_path)
    assert not ev.valid and ev.fail_class == "repairable" and "SyntaxError" in ev.error


def test_limits_are_frozen():
    limits = Limits(wall_s=1.0, memory_mb=100)
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.wall_s = 2.0  # type: ignore[misc]


def test_lasso_judges_the_coefficients_there_when_the_clock_stopped(tmp_path):
    """A candidate returned zeros at once and solved at exit, over the harness's files: it was
    timed doing nothing (0.003 s against 0.3 s) and judged on the files it wrote afterwards."""
    task = get_task("lasso-path")
    solver = task.initial_program().replace("def lasso_path(", "def _solve(", 1)
    cheat = solver + (
        "\n\nimport atexit\n_pending = []\n\n\n"
        "def lasso_path(X, y, lambdas):\n    _pending.append((X, y, lambdas))\n"
        "    return np.zeros((len(lambdas), X.shape[1]))\n\n\n"
        "@atexit.register\ndef _afterwards():\n    for k, (X, y, lambdas) in enumerate(_pending):\n"
        "        np.save('_coef_%d.npy' % k, _solve(X, y, lambdas), allow_pickle=False)\n")
    assert "import numpy as np" in cheat
    ev = task.evaluate(cheat, tmp_path)
    assert not ev.valid and "KKT violated" in ev.error, (ev.score, ev.error)
