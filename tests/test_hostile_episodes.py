"""The hostile suite, continued: what a policy episode can still try against the processes it
shares a machine with: the open file descriptions it inherits, the pid counter, the replies it
writes, the text it sends back, and the calls that reach the host past the sandbox's view.

Every attack is run through the processes users run (an isolated policy, ``evaluate``, the CLI)
and has a control that shows it works where the defence is absent: in processes that share
their descriptors, unconfined, or parsed the naive way.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from worldgen import another_run, random_records

from dream_gym.evaluation.evaluate import evaluate
from dream_gym.infrastructure.isolation import run_python
from dream_gym.policy import run_episode
from dream_gym.policy_files import IsolatedPolicy
from dream_gym.policy_files.errors import PolicyLoadError
from dream_gym.policy_files.wire import ReplyError, parse_reply
from dream_gym.world.tree import World, load_world
from dream_gym.world.writer import new_meta, write_world

HOSTILE = Path(__file__).resolve().parent / "hostile_policies"
REPO = Path(__file__).resolve().parents[1]
FAST: dict[str, Any] = dict(decision_timeout_s=20.0, episode_timeout_s=60.0, memory_mb=512)
TERMINAL_BYTES = ("\x1b", "\x07", "\x9b", "\r")


@pytest.fixture(scope="module")
def small_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("episodes") / "memory-world"
    yield write_world(folder, new_meta("memory", "toy", "a toy task", workers=3), random_records(random.Random(11), 120))


def _lines(policy: IsolatedPolicy, kind: str, count: int, stream: str = "stderr") -> list[dict[str, str]]:
    """The last ``count`` reports of ``kind`` (``READ``/``WROTE`` lines, one a channel) on the
    policy's ``stream``, once this process's drain thread has them."""
    deadline = time.monotonic() + 10
    text = ""
    while time.monotonic() < deadline:
        text = policy.output_tail(stream)
        if len(re.findall(rf"^{kind} ", text, re.M)) >= count:
            break
        time.sleep(0.02)
    return [{name: value for name, value in re.findall(rf"^{kind} (\S+) (.*)$", text, re.M)}]


# -- open file descriptions ----------------------------------------------------------------------
def test_memory_kept_in_descriptors_gains_nothing_in_a_grid_or_across_worlds(small_world: Path, tmp_path: Path) -> None:
    """The file reveals the world at beta 0 and writes the best node's branch and depth into its
    stdio's open file descriptions; every later episode (of the grid, and on a second world, a
    copy of the first, served by the same process) scores exactly what it scores alone."""
    spec = str(HOSTILE / "remembers_in_descriptors.py")
    twin = Path(write_world(tmp_path / "twin", new_meta("twin", "toy", "a toy task", workers=3),
                            another_run(random_records(random.Random(11), 120))))
    grid = evaluate([spec], [small_world, twin], betas="0,0.5,1", jobs=1, progress=False)
    assert len(grid) == 6 and all(r.error is None for r in grid), [r.error for r in grid]
    for result in grid:
        if result.beta == 0.0 and result.world == "memory":
            continue  # the writer itself
        alone = evaluate([spec], [small_world if result.world == "memory" else twin], betas=str(result.beta),
                         jobs=1, progress=False)[0]
        assert result == alone, (result, alone)


@pytest.mark.parametrize("harden", [True, False], ids=["hardened", "kernel-alone"])
def test_an_episode_can_change_no_descriptor_another_one_reads(small_world: Path, harden: bool) -> None:
    """Every write into a descriptor's shared state is refused, and every later episode finds
    its stdio as new: no signal, flag, pipe size or owner that an earlier one set."""
    world = load_world(small_world)
    with IsolatedPolicy(HOSTILE / "remembers_in_descriptors.py", harden=harden, **FAST) as policy:
        reads = []
        for beta in (0.0, 1.0, 1.0):
            policy.forget_output()
            assert run_episode(policy, world, seed=3, beta=beta, on_error="record").error is None
            if beta == 0.0:
                wrote, = _lines(policy, "WROTE", 5)
            reads += _lines(policy, "READ", 5)
    assert set(wrote.values()) == {"refused:PermissionError"} and len(wrote) == 5, wrote
    new = {"signal": "None", "flags": "None", "pipe-size": "None", "owner": "(0, None)", "nonblocking-ioctl": "(0, None)"}
    assert reads == [new] * 3, reads


_SHARED = """
import json, os, sys
sys.path.insert(0, {hostile!r})
import remembers_in_descriptors as attack
writer = os.fork()
if writer == 0:
    attack.store(5, 3)
    os._exit(0)
os.waitpid(writer, 0)
reader = os.fork()
if reader == 0:
    with open({out!r}, "w") as handle:
        json.dump({{k: repr(v) for k, v in attack.read_all().items()}}, handle)
    os._exit(0)
os.waitpid(reader, 0)
"""


def test_descriptors_carry_a_memory_between_processes_that_share_them(tmp_path: Path) -> None:
    """The control: two processes forked one after the other from a parent whose stdin, stdout
    and stderr are three pipes: what the first wrote, the second reads back, in every channel."""
    out = tmp_path / "read.json"
    done = subprocess.run([sys.executable, "-c", _SHARED.format(hostile=str(HOSTILE), out=str(out))],
                          stdin=subprocess.PIPE, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text()) == {"signal": "(5, 3)", "flags": "(5, 3)", "pipe-size": "(5, 3)",
                                           "owner": "(1, None)", "nonblocking-ioctl": "(1, None)"}


# -- the pid counter -----------------------------------------------------------------------------
def _after_a_writer(world: World, seed: int, **options: Any) -> dict[str, str]:
    """What counts_restarts.py reads at beta 1, after an episode that forced a restart of the
    template (odd ``seed``) or did not (even)."""
    options = {**FAST, "decision_timeout_s": 1.0, "harden": False, **options}  # the kernel alone
    with IsolatedPolicy(HOSTILE / "counts_restarts.py", **options) as policy:
        run_episode(policy, world, seed=seed, beta=0.0, on_error="record")
        assert policy.starts == 1
        policy.forget_output()
        assert run_episode(policy, world, seed=seed, beta=1.0, on_error="record").error is None
        assert policy.starts == 1 + seed % 2  # the writer's timeout restarted the template
        read, = _lines(policy, "READ", 11)
    return read


def test_the_pid_an_episode_sees_says_nothing_of_earlier_episodes(small_world: Path) -> None:
    world = load_world(small_world)
    after_restart, after_none = _after_a_writer(world, 1), _after_a_writer(world, 2)
    assert after_restart == after_none, (after_restart, after_none)
    refused = "refused:PermissionError"
    assert after_none == {"pid": "0", "tid": "0", "parent": "0", "group": "0", "signal-0": refused,
                          "getpgid": ",".join(map(str, range(1, 65))), "getsid": ",".join(map(str, range(1, 65))),
                          "sched": refused, "priority": refused, "futex-pi": refused,
                          "peer-credentials": refused}, after_none


def test_the_templates_frames_say_nothing_of_earlier_episodes(small_world: Path) -> None:
    """An episode walks up its stack into the template's frames (a caught exception's traceback):
    their record of the episodes forked before it (the one running, those retired, their pids)
    read differently in each episode, a counter; forked, an episode drops it first."""
    world = load_world(small_world)
    reads = []
    with IsolatedPolicy(HOSTILE / "reads_the_template.py", **FAST) as policy:
        for beta in (0.0, 0.25, 0.5, 0.75, 1.0):
            policy.forget_output()
            assert run_episode(policy, world, beta=beta, on_error="record").error is None
            reads.append(_lines(policy, "READ", 2)[0])
        assert policy.starts == 1  # one template forked them all
    assert "_serve_parent" in reads[0]["frames"].split(","), reads[0]
    assert len({read["template"] for read in reads}) == 1, reads


def test_unconfined_the_ways_of_reading_the_counter_work(small_world: Path) -> None:
    """The control: with the sandbox off, each way reads a real pid (the same one thrice)."""
    with pytest.warns(RuntimeWarning, match="WITHOUT the sandbox"):
        from dream_gym.infrastructure.sandbox.launch import _warn_unsafe

        _warn_unsafe.cache_clear()
        read = _after_a_writer(load_world(small_world), 2, unsafe_no_sandbox=True)
    pid = int(read["pid"])
    assert pid > 1 and int(read["parent"]) > 1, read
    assert read["tid"] == read["futex-pi"] == read["peer-credentials"] == str(pid), read
    assert re.fullmatch(r"[\d,]+", read["signal-0"]), read


_PIPES = """
import os, sys

def pipes(most):
    held = []
    try:
        while len(held) < most:
            held.append(os.pipe())
    except OSError as exc:
        return len(held), type(exc).__name__
    return len(held), "none"


class Policy:
    def reset(self, context):
        sys.stderr.write("PIPES %d %s\\n" % pipes(200))
        sys.stderr.flush()

    def act(self, view):
        return []
"""


def test_an_episode_holds_too_few_pipes_to_touch_the_users_pipe_quota(tmp_path: Path, small_world: Path) -> None:
    """Pipe buffers count against one quota per user, past which every new pipe of the user is
    smaller, which an episode running beside it could see: an episode makes no pipe of its own
    (refused: a SIGPIPE it raised would carry its pid), and may hold 64 descriptors."""
    spec = _file(tmp_path, "pipes.py", _PIPES)
    with IsolatedPolicy(spec, **FAST) as policy:
        assert run_episode(policy, load_world(small_world), seed=0, beta=0.5).error is None
        deadline = time.monotonic() + 10
        while "PIPES" not in policy.output_tail("stderr") and time.monotonic() < deadline:
            time.sleep(0.02)
        count, error = re.search(r"PIPES (\d+) (\w+)", policy.output_tail("stderr")).groups()  # type: ignore[union-attr]
    assert (count, error) == ("0", "PermissionError")
    # the control: the same code in a plain process holds all 200
    done = subprocess.run([sys.executable, "-c", _PIPES + "print(pipes(200))"],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "(200, 'none')", done.stdout + done.stderr


# -- replies ---------------------------------------------------------------------------------
FORGERIES = ("none", "huge", "objects", "lists", "strings", "died", "terminal")


def _forged(world: World, kind: str) -> str | None:
    with IsolatedPolicy(HOSTILE / "forges_replies.py", **FAST) as policy:
        return run_episode(policy, world, seed=FORGERIES.index(kind), beta=0.5, on_error="record").error


@pytest.mark.parametrize("kind, error", [
    ("none", None),
    ("huge", r"^PolicyProtocolError: policy \w+: reply of 629145\d\d bytes \(limit 16384\)$"),
    ("objects", r"^PolicyProtocolError: .*reply is not one JSON object holding at most one list$"),
    ("lists", r"^PolicyProtocolError: .*reply is not one JSON object holding at most one list$"),
    ("strings", r"^PolicyProtocolError: .*reply holds more than 1024 values$"),
    ("died", r"^PolicyProtocolError: .*a reply of unknown kind died$"),
])
def test_a_forged_reply_is_refused_before_it_is_parsed(small_world: Path, kind: str, error: str | None) -> None:
    """Each forgery is the policy's protocol error, named for what it is; none is taken for a
    death the template reports (the ``died`` forgery claims SIGXCPU, which would be a timeout)."""
    found = _forged(load_world(small_world), kind)
    assert (found is None) if error is None else re.match(error, found or ""), found


def test_text_that_drives_a_terminal_is_escaped_in_the_error(small_world: Path) -> None:
    found = _forged(load_world(small_world), "terminal")
    assert found is not None and found.startswith("PolicyException: "), found
    assert not any(c in found for c in TERMINAL_BYTES), repr(found)
    assert r"\x1b]0;owned\x07\x1b]52;c;" in found and r"\x1b[2J\x0dall good" in found, found


#: The peak resident memory of this process's own address space (``VmHWM``). Not ``ru_maxrss``:
#: Linux keeps that across ``execve``, so a child of a large test process starts with its peak.
_HIGH_WATER = """
def peak_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
"""

_PEAK = _HIGH_WATER + """
import sys
sys.path[:0] = {paths!r}
from dream_gym.policy import run_episode
from dream_gym.policy_files import IsolatedPolicy
from dream_gym.world.tree import load_world
world = load_world({world!r})
kinds = {kinds!r}
forgeries = ("none", "huge", "objects", "lists", "strings", "died", "terminal")
with IsolatedPolicy({spec!r}, decision_timeout_s=20, episode_timeout_s=60) as policy:
    for kind in kinds * 3:
        run_episode(policy, world, seed=forgeries.index(kind), beta=0.5, on_error="record")
print(peak_kb())
"""


def _peak_kb(world: Path, kinds: tuple[str, ...]) -> int:
    code = _PEAK.format(paths=[str(REPO / "tests"), str(REPO)], world=str(world), kinds=kinds,
                        spec=str(HOSTILE / "forges_replies.py"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def test_forged_replies_cost_the_evaluating_process_little_memory(small_world: Path) -> None:
    """The peak memory of a process that replays the forger, each forgery three times, stays
    within 1 MB of the same process replaying an honest file (a reply is at most 16 KiB, and the
    60 MB one is refused unread)."""
    honest = _peak_kb(small_world, ("none",))
    forged = _peak_kb(small_world, ("huge", "objects", "lists", "strings"))
    assert forged - honest < 1024, (forged, honest)


#: Just under 1 MB of empty objects in a batch: the largest forgery when a reply could be 1 MiB.
_OBJECTS = """data = b'{{"ok":true,"batch":[' + b"{{}}," * (((1 << 20) - 64) // 3) + b"{{}}]}}"
"""

_SHAPE = _HIGH_WATER + _OBJECTS + """
import sys
sys.path[:0] = {paths!r}
from dream_gym.policy_files.wire import ReplyError, parse_reply
before = peak_kb()
try:
    parse_reply(data, limit=1 << 20)
except ReplyError:
    pass
print(peak_kb() - before)
"""


def test_the_shape_check_refuses_a_reply_of_a_million_objects_without_building_them() -> None:
    """At the size a reply could once have (1 MiB), the shape check refuses the objects having
    built none: the peak grows by under 4 MB (a plain ``json.loads`` of it: the control below)."""
    code = _SHAPE.format(paths=[str(REPO)])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 4 * 1024, done.stdout


_NAIVE = _HIGH_WATER + _OBJECTS + """
import json
before = peak_kb()
reply = json.loads(data)
print(peak_kb() - before)
"""


def test_a_naive_parse_of_a_forged_reply_costs_many_times_its_size() -> None:
    """The control: the same forgery read with ``json.loads`` alone, as replies were read."""
    done = subprocess.run([sys.executable, "-c", _NAIVE.format()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 10 * 1024, done.stdout


@pytest.mark.parametrize("body", [
    b'{"ok":true,"batch":[' + b'"\\"' * 5_000 + b"]}",  # a string that never ends (within the size limit)
    b'"' + b'\\"' * 7_500,
    b'{"ok":true,"batch":[' + b"1," * 7_500 + b"1]}",
])
def test_a_reply_is_checked_in_one_pass(body: bytes) -> None:
    """Blanking the strings of a reply scans each byte once: a reply of escaped quotes that
    never closes used to take a scan per quote (seconds for 40 kB)."""
    with pytest.raises(ReplyError):
        parse_reply(body)


def test_an_honest_reply_is_read_as_it_was_written() -> None:
    reply = {"ok": True, "batch": [0, 3, 17, -1, 2.5, None, "x", True]}
    assert parse_reply(json.dumps(reply).encode()) == reply
    failure = {"ok": False, "kind": "exception", "error": 'ValueError: "[{" is no list, } nor {'}
    assert parse_reply(json.dumps(failure).encode()) == failure


# -- names and the probe -----------------------------------------------------------------------
def _file(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


@pytest.mark.parametrize("length", [100_000, 1_000_000])
def test_a_long_name_is_the_policys_load_error(tmp_path: Path, small_world: Path, length: int) -> None:
    spec = _file(tmp_path, "long_name.py", f"""
        class Policy:
            name = "n" * {length}

            def reset(self, context):
                pass

            def act(self, view):
                return []
        """)
    with pytest.raises(PolicyLoadError, match=f"the policy's name is {length} characters long \\(the limit is 200\\)"):
        IsolatedPolicy(spec, **FAST)
    with IsolatedPolicy(HOSTILE / "forges_replies.py", **FAST) as other:  # nothing else is touched
        assert run_episode(other, load_world(small_world), seed=0, beta=0.5).error is None


def test_a_probe_that_forges_a_sandbox_refusal_is_a_load_error(tmp_path: Path) -> None:
    """The module writes, at import, the reply the template sends when the kernel refuses the
    sandbox, into every pipe it can write, and exits: it is the file's load error, quoted."""
    spec = _file(tmp_path, "spoofs.py", """
        import os
        body = b'{"ok":false,"kind":"sandbox","error":"spoofed refusal"}'
        for fd in range(3, 64):
            try:
                os.write(fd, len(body).to_bytes(4, "big") + body)
            except OSError:
                pass
        os._exit(0)
        """)
    with pytest.raises(PolicyLoadError, match="spoofed refusal"):
        IsolatedPolicy(spec, **FAST)


def test_a_name_and_an_error_that_drive_a_terminal_are_escaped_through_the_cli(tmp_path: Path, small_world: Path) -> None:
    """The policy's name (which its errors quote) and its error both hold a window title, a
    clipboard write, an 8-bit CSI and a carriage return: what ``eval`` prints and records
    holds none of them, only their escapes."""
    spec = _file(tmp_path, "titled.py", """
        class Policy:
            name = "tidy\\x1b]0;owned\\x07\\x1b]52;c;ZXZpbA==\\x07\\x9b2J\\rname"

            def reset(self, context):
                pass

            def act(self, view):
                raise ValueError("all fine\\x1b[2J\\x1b]0;pwned\\x07")
        """)
    out = tmp_path / "results.jsonl"
    done = subprocess.run([sys.executable, "-m", "dream_gym", "eval", "--policy", str(spec), "--worlds", str(small_world),
                           "--betas", "0.5", "--out", str(out)], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env={**os.environ, "COLUMNS": "80"})
    recorded = json.loads(out.read_text().splitlines()[0])["error"]
    for shown in (done.stdout + done.stderr, recorded):
        assert not any(c in shown for c in TERMINAL_BYTES), repr(shown)
    assert r"policy titled (named 'tidy\x1b]0;owned\x07\x1b]52;c;ZXZpbA==\x07\x9b2J\x0dname') raised in act()" in recorded, recorded
    assert r"ValueError: all fine\x1b[2J\x1b]0;pwned\x07" in recorded, recorded
    assert r"all fine\x1b[2J" in done.stderr, done.stderr


# -- calls that reach the host ---------------------------------------------------------------
_HOST_CALLS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, call):
    try:
        result = call()
        if isinstance(result, int) and result < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        print(name, "done")
    except OSError as exc:
        print(name, exc.strerror)
buffer = ctypes.create_string_buffer(512)
attempt("sync", lambda: libc.sync() or 0)
attempt("syncfs", lambda: libc.syncfs(1))
attempt("sysinfo", lambda: libc.sysinfo(buffer))
attempt("statfs", lambda: os.statvfs("/"))
attempt("inotify", lambda: libc.inotify_init())
"""


def test_a_candidate_reaches_nothing_of_the_host_outside_its_view() -> None:
    out = run_python(code=_HOST_CALLS, wall_s=20)
    assert out.stdout.split("\n")[:5] == [f"{name} Operation not permitted"
                                          for name in ("sync", "syncfs", "sysinfo", "statfs", "inotify")], out.stdout + out.stderr


def test_unconfined_the_host_calls_answer() -> None:
    """The control: the same calls, with the sandbox off, all succeed."""
    from dream_gym.infrastructure.sandbox.launch import _warn_unsafe

    _warn_unsafe.cache_clear()
    with pytest.warns(RuntimeWarning, match="WITHOUT the sandbox"):
        out = run_python(code=_HOST_CALLS, wall_s=20, unsafe_no_sandbox=True)
    assert out.stdout.split("\n")[:5] == [f"{name} done" for name in ("sync", "syncfs", "sysinfo", "statfs", "inotify")], out.stdout


def _sleeping_group() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)


def test_a_retired_episodes_last_words_count_against_no_other_episode_yet_a_flood_of_them_is_stopped() -> None:
    """What a retired episode's pipes still held is drained after the next episode started: it
    is not charged to that episode (printing just under the limit each, it was stopped), and a
    retired episode that keeps printing past the limit is stopped as a flooding episode is."""
    from dream_gym.policy_files.output import Output

    group = _sleeping_group()
    try:
        output = Output(1000, group.pid)
        output.start(1)
        output.add("stdout", b"a" * 900, 1)
        output.start(2)
        output.add("stdout", b"b" * 300, 1)  # episode 1's last words, read once episode 2 runs
        output.add("stdout", b"c" * 900, 2)
        assert not output.overflow and group.poll() is None
        assert output.tail("stdout") == "c" * 900  # only the running episode's words are quoted
        output.add("stderr", b"d" * 800, 1)  # episode 1 still printing: 1,100 bytes since it was retired
        assert output.overflow
        assert group.wait(timeout=10) == -9
    finally:
        group.kill()
        group.wait()
