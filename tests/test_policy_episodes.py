"""The episode processes of an isolated policy, attacked where they are made cheap.

The template builds the audit hook once (each episode process installs it), forks the next
episode ahead while the current one runs, and kills an episode before the next one sees its
first message (it is reaped later). Each test is an attack on one of those steps, with the
observation that would show it working."""

from __future__ import annotations

import importlib
import os
import re
import time
from pathlib import Path

import pytest
from worldgen import random_records

from dream_gym.policy import run_episode
from dream_gym.policy_files import IsolatedPolicy, PolicyLoadError
from dream_gym.world.tree import World, build_world
from dream_gym.world.writer import new_meta

HOSTILE = Path(__file__).resolve().parent / "hostile_policies"
FAST = dict(decision_timeout_s=10.0, episode_timeout_s=30.0, memory_mb=512)


@pytest.fixture(scope="module")
def world() -> World:
    import random

    return build_world(new_meta("episodes-test", "toy-task", "a toy task", workers=3),
                       random_records(random.Random(3), 40, extras=True))


def _errors(policy: IsolatedPolicy, world: World, episodes: int) -> list[str]:
    errors = []
    for seed in range(episodes):
        result = run_episode(policy, world, seed=seed, beta=0.5, on_error="record")
        assert result.error is not None
        errors.append(result.error)
    return errors


def test_a_hook_switched_off_in_one_episode_is_on_in_the_next(world: World) -> None:
    with IsolatedPolicy(HOSTILE / "unhooks.py", **FAST) as policy:
        errors = _errors(policy, world, 4)
    answers = [re.search(r"FIRST=(\w+) SECOND=(\w+)", e).groups() for e in errors]  # type: ignore[union-attr]
    # the attack works within its episode (the kernel alone refuses the second fork) ...
    assert all(second == "kernel" for _, second in answers), errors
    # ... and every episode, the pre-forked ones included, starts with the hook on
    assert [first for first, _ in answers] == ["hook"] * 4, errors


def test_without_the_hook_only_the_kernel_refuses(world: World) -> None:
    """The control: unhardened, nothing answers 'hook' (the observation above can fail)."""
    with IsolatedPolicy(HOSTILE / "unhooks.py", harden=False, **FAST) as policy:
        errors = _errors(policy, world, 2)
    assert all("FIRST=kernel SECOND=kernel" in e for e in errors), errors


def _report(policy: IsolatedPolicy) -> tuple[int, int, str]:
    reports = re.findall(r"REPORT FDS=(\d+) PID=(-?\d+) TOKEN=(\w+)", policy.output_tail("stdout"))
    assert reports, policy.output_tail("stdout")
    return int(reports[-1][0]), int(reports[-1][1]), reports[-1][2]


def _wait_for(ready, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_an_episode_is_gone_before_the_next_one_runs_and_holds_only_its_own_pipes(world: World) -> None:
    with IsolatedPolicy(HOSTILE / "outlives.py", **FAST) as policy:
        reports = []
        for seed in range(5):
            assert run_episode(policy, world, seed=seed, beta=0.5, on_error="record").error is None
            # this process drains the episode's output in a thread: wait for its report (the
            # tails hold the output of the episode that ran last alone)
            _wait_for(lambda: "REPORT " in policy.output_tail("stdout"))
            reports.append(_report(policy))
        tokens = [token for _, _, token in reports]
        policy.forget_output()
        _wait_for(lambda: f"ALIVE {tokens[-1]}" in policy.output_tail("stderr"))
        time.sleep(0.2)  # time enough for an earlier episode's timer, were it alive, to speak too
        speaking = set(re.findall(r"ALIVE (\w+)", policy.output_tail("stderr")))
    assert len(set(tokens)) == 5
    # the last episode's timer still speaks (the observation works); no earlier one does: each
    # episode ran in a process of its own, gone before the next one started
    assert speaking == {tokens[-1]}, (speaking, tokens)
    # stdin, stdout, stderr and the episode's own two pipes, in the episodes forked ahead too
    assert [fds for fds, _, _ in reports] == [5] * 5, reports
    # and none is told its pid (which would count the episodes forked before it)
    assert {pid for _, pid, _ in reports} == {0}, reports


def test_replies_forged_into_a_pipe_reach_no_later_episode(world: World) -> None:
    """Each episode talks to this process over pipes of its own: what the forger (beta 0) left
    in its pipes is gone with them, and the episodes after it play as if it never ran."""
    betas = [0.5, 1.0]
    with IsolatedPolicy(HOSTILE / "forges.py", **FAST) as clean:
        expected = [run_episode(clean, world, seed=0, beta=beta).to_dict() for beta in betas]
    with IsolatedPolicy(HOSTILE / "forges.py", **FAST) as policy:
        forger = run_episode(policy, world, seed=0, beta=0.0, on_error="record")
        after = [run_episode(policy, world, seed=0, beta=beta).to_dict() for beta in betas]
    # the forgery works on the forger's own episode (it reads its forged stop) ...
    assert forger.rounds == 0, forger
    # ... and on no later one
    assert after == expected
    assert all(result["rounds"] == 6 for result in after), after


def _probe_error(tmp_path: Path, world: World, text: str) -> tuple[str, list[str]]:
    """The error of one episode of the policy file ``text`` (a probe reports by raising), and the
    sandbox's layers in force."""
    source = tmp_path / "probe.py"
    source.write_text(text)
    with IsolatedPolicy(source, **FAST) as policy:
        result = run_episode(policy, world, seed=0, beta=0.5, on_error="record")
        hardening = policy.hardening
    assert result.error is not None
    return result.error, hardening


def test_a_files_imports_are_imported_in_the_template_but_those_that_act(tmp_path: Path, world: World) -> None:
    """The template imports the modules a file imports, the standard library's and installed
    packages (the episodes find them imported); not a module that acts when imported."""
    error, _ = _probe_error(tmp_path, world,
                            "import sys\n"
                            "AHEAD = sorted(name for name in ('difflib', 'rich', 'this') if name in sys.modules)\n"
                            "import difflib\n"
                            "import rich\n"
                            "def never():\n"
                            "    import this\n"
                            "def act(view):\n"
                            "    raise RuntimeError(f'AHEAD={AHEAD}')\n")
    assert "AHEAD=['difflib', 'rich']" in error, error


def test_an_episode_imports_only_what_was_imported_ahead_and_says_so(tmp_path: Path, world: World) -> None:
    """An episode reads no file: a module named by a literal (an import statement or
    ``import_module("...")``) was imported ahead and imports; one whose name is computed cannot,
    and the error says what to add."""
    error, _ = _probe_error(tmp_path, world,
                            "import importlib\n"
                            "def act(view):\n"
                            "    importlib.import_module('heapq')\n"
                            "    importlib.import_module('color' + 'sys')\n")
    assert "no module colorsys in this episode" in error and "add 'import colorsys' to the file" in error, error
    missing = tmp_path / "missing.py"
    missing.write_text("import no_such_module_here\ndef act(view):\n    return []\n")
    with pytest.raises(PolicyLoadError, match="importing no_such_module_here failed ahead of the episodes: No module"):
        IsolatedPolicy(missing, **FAST)


def test_a_submodule_a_package_loads_on_first_use_is_loaded_ahead(tmp_path: Path, world: World) -> None:
    """numpy 2 loads ``numpy.random`` when its attribute is first read, and ``np.median`` reads
    ``np.ma``; an episode could do neither: the template reads each attribute chain of the file
    and loads each deferred submodule the package's own code reads (the control: a deferred
    submodule that neither reads, ``numpy.typing``, fails through a computed name)."""
    error, _ = _probe_error(tmp_path, world,
                            "import numpy as np\n"
                            "def act(view):\n"
                            "    value = int(np.random.default_rng(0).integers(10)) + float(np.median([1.0, 2.0]))\n"
                            "    raise RuntimeError(f'VALUE={value}')\n")
    assert "VALUE=" in error, error
    error, _ = _probe_error(tmp_path, world,
                            "import numpy as np\n"
                            "def act(view):\n"
                            "    getattr(np, 'typ' + 'ing')\n")
    assert "no module numpy.typing in this episode" in error and "add 'import numpy.typing'" in error, error


_COMMON_CALLS = """
import bisect, copy, datetime, functools, heapq, itertools, json, math, random, re, statistics
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
import numpy as np

@dataclass
class Stats:
    values: list = field(default_factory=list)

@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def act(view):
    rng, values = random.Random(0), [3.0, 1.0, 2.0, 5.0, float("nan")]
    clean = values[:-1]
    done = [Counter("abca").most_common(1), statistics.median(clean), statistics.stdev(clean),
            rng.sample(clean, 2), heapq.nlargest(2, clean), math.log1p(2.0), list(itertools.combinations(clean, 2))[0],
            fib(20), copy.deepcopy(Stats(clean)), json.loads(json.dumps({"a": clean})), re.search(r"b+", "abbc").group(),
            datetime.datetime.strptime("2024-01-02", "%Y-%m-%d").day, bisect.bisect(sorted(clean), 2.5),
            defaultdict(int)["x"], deque(clean, maxlen=2), sorted(clean, key=lambda v: -v)[0],
            float(np.median(clean)), float(np.percentile(clean, 90)), float(np.quantile(clean, 0.5)),
            float(np.nanmedian(values)), float(np.nanmean(values)), np.unique([1, 1, 2]).tolist(),
            np.argsort(clean).tolist(), float(np.linalg.norm(clean)), np.histogram(clean, bins=2)[0].tolist(),
            np.polyfit([0, 1, 2], [1, 3, 5], 1).round(3).tolist(), np.convolve(clean, [1, 1]).tolist(),
            int(np.random.default_rng(0).integers(10)), float(np.std(clean)), np.isclose(1.0, 1.0 + 1e-12).item()]
    raise RuntimeError(f"DONE={len(done)}")
"""


def test_the_calls_policy_files_commonly_make_work_in_an_episode(tmp_path: Path, world: World) -> None:
    """A policy file that calls what policy files commonly call: the standard library's
    deferred imports (``Counter.most_common`` imports ``heapq`` on its first call, ``strptime``
    imports ``_strptime``) and numpy's deferred submodules were loaded ahead."""
    error, _ = _probe_error(tmp_path, world, _COMMON_CALLS)
    assert "DONE=30" in error, error


def test_a_built_in_policy_runs_from_a_file_that_wraps_it(tmp_path: Path, world: World) -> None:
    """The dreaming loop's version 0 of a built-in is such a wrapper: each built-in's module loads
    what it uses when it is imported, not on its first use in an episode."""
    from dream_gym.policies import POLICIES

    for name in sorted(POLICIES):
        source = tmp_path / f"{name}.py"
        source.write_text("from dream_gym.policies import make_policy as _builtin\n\n"
                          f"def make_policy():\n    return _builtin({name!r})\n")
        with IsolatedPolicy(source, **FAST) as policy:
            result = run_episode(policy, world, seed=0, beta=0.5, on_error="record")
        assert result.error is None, (name, result.error)


_THREADING_PROBE = (
    "import sys\n"
    "LOADED = sorted(name for name in ('threading', 'subprocess', 'pyseccomp') if name in sys.modules)\n"
    "def act(view):\n"
    "    raise RuntimeError(f'LOADED={LOADED}')\n")


def test_the_template_imports_nothing_that_works_at_each_fork(tmp_path: Path, world: World) -> None:
    """``threading`` registers a handler that runs in every forked child and copies the pages it
    writes; the template gets its seccomp programs from the parent, so neither pyseccomp (whose
    search for libseccomp runs ldconfig through ``subprocess``) nor ``threading`` is imported."""
    error, hardening = _probe_error(tmp_path, world, _THREADING_PROBE)
    assert "seccomp" in hardening
    assert "LOADED=[]" in error, error


def test_a_template_without_the_parents_programs_builds_its_own(tmp_path: Path, world: World,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Where this process cannot build the programs, the template builds them itself (it imports
    pyseccomp before Landlock) and its episodes are confined all the same."""
    monkeypatch.setattr(importlib.import_module("dream_gym.infrastructure.sandbox.launch"), "_compiled_filters", dict)
    error, hardening = _probe_error(tmp_path, world, _THREADING_PROBE)
    assert "seccomp" in hardening
    assert "'pyseccomp'" in error, error
    with IsolatedPolicy(HOSTILE / "unhooks.py", harden=False, **FAST) as policy:
        errors = _errors(policy, world, 1)
    assert "FIRST=kernel SECOND=kernel" in errors[0], errors  # the kernel refuses the episode's fork


@pytest.mark.parametrize(("imports", "ahead"), [
    ("import random\n", "numpy=False init=False"),  # the standard library alone: a lean template
    ("def helper():\n    import numpy\n", "numpy=True init=False"),  # numpy, even inside a function
    ("import rich\n", "numpy=False init=False"),  # another installed package: itself ahead, not numpy
    ("from dream_gym import PrefixView\n", "numpy=True init=True"),  # the package's __init__ ran ahead
])
def test_the_template_imports_numpy_and_dream_gym_only_for_files_that_import_them(
        tmp_path: Path, world: World, imports: str, ahead: str) -> None:
    error, _ = _probe_error(tmp_path, world,
                            "import sys\n"
                            "AHEAD = f\"numpy={'numpy' in sys.modules} init={'dream_gym.envs.env' in sys.modules}\"\n"
                            f"{imports}"
                            "def act(view):\n"
                            "    raise RuntimeError(f'AHEAD {AHEAD}')\n")
    assert f"AHEAD {ahead}" in error, error


def test_the_template_imports_no_modules_main(tmp_path: Path, world: World) -> None:
    """A package's ``__main__`` runs its program when imported (``unittest.__main__`` runs the
    test runner, ``dream_gym.__main__`` the CLI): the template never imports one for a file."""
    error, _ = _probe_error(tmp_path, world,
                            "import sys\n"
                            "SEEN = sorted(m for m in ('dream_gym.cli', 'unittest') if m in sys.modules)\n"
                            "def act(view):\n"
                            "    if False:\n"
                            "        import dream_gym.__main__\n"
                            "        import unittest.__main__\n"
                            "    raise RuntimeError(f'SEEN={SEEN}')\n")
    assert "SEEN=[]" in error, error


def test_calls_newer_than_libseccomp_are_refused_by_number(world: World, tmp_path: Path) -> None:
    """A libseccomp that did not know ``getxattrat`` or ``file_getattr`` left them open (the
    filter skipped the names): an episode kept a counter in an extended attribute of a file it
    could only read, and probed paths. Each is refused now; ``getuid`` shows raw calls work."""
    import shutil

    policy_file = tmp_path / "calls_the_newest_syscalls.py"
    shutil.copy(HOSTILE / policy_file.name, policy_file)
    with IsolatedPolicy(policy_file, **FAST) as policy:
        (error,) = _errors(policy, world, 1)
    answers = dict(re.findall(r"CALL (\w+)=(-?\d+/\w+)", error))
    assert answers.pop("getuid").startswith("0/"), error
    refused = {"setxattrat": "ENOTSUP", "getxattrat": "ENOTSUP", "listxattrat": "ENOTSUP",
               "removexattrat": "ENOTSUP", "setxattr": "ENOTSUP", "getxattr": "ENOTSUP",
               "open_tree_attr": "EPERM", "file_getattr": "EPERM", "file_setattr": "EPERM",
               "statmount": "EPERM", "listmount": "EPERM", "unknown_490": "ENOSYS"}
    assert answers == {call: f"-1/{code}" for call, code in refused.items()}, error
    assert not os.listxattr(policy_file)


def test_an_episode_learns_neither_its_pid_nor_the_collectors_count(world: World) -> None:
    """The siginfo of a SIGPIPE an episode raised on itself held its pid (2, 3, 4, ...: a count
    of the episodes before it), and the collector's counts, which the template's allocations
    moved, went 47, 48, 49. Both read the same in every episode now."""
    with IsolatedPolicy(HOSTILE / "counts_itself_by_sigpipe.py", **FAST) as policy:
        errors = _errors(policy, world, 3)
    assert len({re.search(r"PID=(\w+) GETPID=0", e).group(1) for e in errors}) == 1, errors  # type: ignore[union-attr]
    assert "PID=PermissionError" in errors[0]
    with IsolatedPolicy(HOSTILE / "reads_the_collector.py", **FAST) as policy:
        errors = _errors(policy, world, 6)
    read = [re.search(r"COLLECTOR=(.*\]) (\d+) \(at", e).groups() for e in errors]  # type: ignore[union-attr]
    assert len({collector for collector, _ in read}) == 1, errors
    # the allocator's block count: the same, but for a block or two that the names in the type
    # attribute cache can move (a known limit: see the security notes), not a count of the episodes
    blocks = [int(count) for _, count in read]
    assert max(blocks) - min(blocks) <= 3, blocks  # seen two apart at most; a count would be five apart


def test_untrusted_code_finds_every_nodes_fields_made_before_its_first_decision(tmp_path: Path) -> None:
    """The replay made a node's fields when a session first revealed it and kept them for every
    later session on the world, so a later episode could time which nodes an earlier one had
    revealed (a batch of cached nodes answered about 30 us sooner, AUC 0.91-0.94). An isolated
    policy now finds them all made; a trusted one still makes them as it goes (the control)."""
    import random

    from dream_gym.policies import make_policy
    from dream_gym.replay.session import world_fields

    def fresh_world() -> World:
        return build_world(new_meta("fields", "toy-task", "a toy task", workers=3),
                           random_records(random.Random(5), 60, extras=True))

    trusted = fresh_world()
    run_episode(make_policy("greedy"), trusted, seed=0, beta=0.0)
    assert 0 < len(world_fields(trusted)) < trusted.size
    untrusted = fresh_world()
    with IsolatedPolicy(HOSTILE / "returns_none.py", **FAST) as policy:
        run_episode(policy, untrusted, seed=0, beta=0.0, on_error="record")
    assert len(world_fields(untrusted)) == untrusted.size


def test_an_episode_reads_no_count_in_its_thread_descriptor(world: World, tmp_path: Path) -> None:
    """The kernel writes a forked process's id into its thread descriptor, which an episode read
    with numpy (4, 5, 6, 7: the episodes before it, and a restart); it reads one value now."""
    import ctypes

    offset = (ctypes.c_uint32 * 3).in_dll(ctypes.CDLL(None), "_thread_db_pthread_tid")[2]
    source = (HOSTILE / "reads_its_thread_descriptor.py").read_text()
    policy_file = tmp_path / "reads_its_thread_descriptor.py"
    policy_file.write_text(source.replace("TID_OFFSET = 0x2D0", f"TID_OFFSET = {offset}"))
    with IsolatedPolicy(policy_file, **FAST) as policy:
        errors = _errors(policy, world, 4)
    assert [re.search(r"TID=(-?\d+)", e).group(1) for e in errors] == ["1"] * 4, errors  # type: ignore[union-attr]


def test_an_episodes_death_is_named_by_its_own_output(world: World) -> None:
    """An earlier episode's stderr made a later one's exit a 'PolicyMemoryError' in its words."""
    with IsolatedPolicy(HOSTILE / "plants_a_memory_error.py", **FAST) as policy:
        first = run_episode(policy, world, seed=0, beta=0.5, on_error="record")
        second = run_episode(policy, world, seed=1, beta=0.5, on_error="record")
    assert first.error is None
    assert second.error is not None and second.error.startswith("PolicyCrashed"), second.error
    assert "exit code 3" in second.error and "planted" not in second.error, second.error
