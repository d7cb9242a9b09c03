"""The hostile suite: untrusted code attacks dream_gym through its own commands.

Policy files and candidates are written by an LLM and, in the dreaming loop, selected by their
replay score, so each attack here is what selection would find if it worked. Every attack must
be contained by the kernel (the sandbox of :mod:`dream_gym.infrastructure.sandbox`) and recorded as the
attacker's own error, with every other policy's results unchanged. Each attack also has a
control where it is shown to work (in-process, or with the explicit opt-out), so no test passes
because the attacker is blind.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from worldgen import another_run, random_records

from dream_gym.evaluation.evaluate import evaluate
from dream_gym.evaluation.results import read_results
from dream_gym.infrastructure.sandbox.launch import _warn_unsafe
from dream_gym.policy import run_episode
from dream_gym.policy_files import IsolatedPolicy, load_policy
from dream_gym.world.tree import load_world
from dream_gym.world.writer import new_meta, write_world

HOSTILE = Path(__file__).resolve().parent / "hostile_policies"
REPO = Path(__file__).resolve().parents[1]
SECRET = "sk-hostile-suite-" + "9f2c41d7e0"
MEMORY_FILE = Path("/tmp/dream_gym_hostile_memory")
FAST: dict[str, Any] = dict(decision_timeout_s=20.0, episode_timeout_s=60.0, memory_mb=512)


@contextlib.contextmanager
def _unconfined() -> Iterator[None]:
    """Around the explicit opt-out: its warning, which comes once per process, is expected."""
    _warn_unsafe.cache_clear()
    with pytest.warns(RuntimeWarning, match="WITHOUT the sandbox"):
        yield


class Listener:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.sock.close()


def _found(error: str | None) -> list[str]:
    assert error is not None and "FOUND=" in error, error
    return list(json.loads(error.split("FOUND=", 1)[1].split("]", 1)[0] + "]"))


def _facts_world(tmp_path: Path, listener: Listener, *, dangerous: bool) -> tuple[Path, Path]:
    """A world whose task description tells the attacker where to strike; and a folder it
    must not write to."""
    out = tmp_path / "must-stay-empty"
    out.mkdir()
    target = write_world(tmp_path / "target-world", new_meta("target", "toy", "x", workers=2),
                         random_records(random.Random(2), 20))
    facts = {"parent_pid": os.getpid(), "port": listener.port, "world": str(target / "nodes.jsonl"),
             "secret": SECRET, "out": str(out), "tmp_file": _tmp_file(tmp_path), "dangerous": dangerous}
    folder = write_world(tmp_path / "hostile-world", new_meta("hostile", "toy", json.dumps(facts), workers=3),
                         random_records(random.Random(3), 60))
    return folder, out


def _tmp_file(tmp_path: Path) -> str:
    """A file in /tmp (writable by this process, not by a sandboxed one), unique to the test."""
    return f"/tmp/dream_gym_escaped_{abs(hash(str(tmp_path)))}.txt"


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dream_gym", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env)


# -- escapes through `dream-gym eval` --------------------------------------------------------------
def test_escapes_are_contained_through_eval_and_other_policies_are_unchanged(
        tmp_path: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # this process is an ancestor of the policy
    world, out = _facts_world(tmp_path, listener, dangerous=True)
    both, alone = tmp_path / "both.jsonl", tmp_path / "alone.jsonl"
    run = _cli("eval", "--policy", str(HOSTILE / "escapes.py"), "--policy", "greedy", "--worlds", str(world),
               "--betas", "0.5", "-j", "2", "--out", str(both), env=dict(os.environ))
    assert both.exists(), run.stderr  # eval survived its SIGKILLs
    rows = {r["policy"]: r for r in read_results(both)}
    assert _found(rows[str(HOSTILE / "escapes.py")]["error"]) == []
    assert rows[str(HOSTILE / "escapes.py")]["error"].startswith("PolicyException: ")
    _cli("eval", "--policy", "greedy", "--worlds", str(world), "--betas", "0.5", "--out", str(alone))
    assert [r for r in read_results(alone)] == [rows["greedy"]]  # the attacker changed nothing else
    assert listener.accepted == 0 and list(out.iterdir()) == []
    assert not Path(_tmp_file(tmp_path)).exists()
    assert SECRET not in both.read_text() and SECRET not in run.stdout + run.stderr


def test_escapes_are_contained_by_the_kernel_alone(tmp_path: Path, listener: Listener,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the audit hook (the Python layer) the kernel's layers hold by themselves."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    world, out = _facts_world(tmp_path, listener, dangerous=True)
    with IsolatedPolicy(HOSTILE / "escapes.py", harden=False, **FAST) as policy:
        result = run_episode(policy, load_world(world), on_error="record")
    assert _found(result.error) == []
    assert listener.accepted == 0 and list(out.iterdir()) == []


def test_escapes_control_without_the_sandbox_finds_everything(tmp_path: Path, listener: Listener) -> None:
    """The same file through the same command with the explicit opt-out (its audit hook still
    on, which it switches off): each escape reported above as refused works here, so the tests
    above are not blind."""
    world, out = _facts_world(tmp_path, listener, dangerous=False)
    results = tmp_path / "unsafe.jsonl"
    try:
        run = _cli("eval", "--policy", str(HOSTILE / "escapes.py"), "--worlds", str(world), "--betas", "0.5",
                   "-j", "1", "--out", str(results), "--unsafe-no-sandbox",
                   env={**os.environ, "OPENAI_API_KEY": SECRET})
        found = set(_found(read_results(results)[0]["error"]))
    finally:
        Path(_tmp_file(tmp_path)).unlink(missing_ok=True)
    assert "WITHOUT the sandbox" in run.stderr
    assert {"secret in /proc/pid/environ", "secret in an ancestor's environ through libc", "read a world file",
            "read /etc/passwd", "wrote into the out folder", "wrote /tmp", "connected to 127.0.0.1", "forked",
            "cloned by raw syscall", "new session", "ptrace of the parent",
            "may signal the evaluating process"} <= found, found
    assert listener.accepted >= 1 and list(out.iterdir())


# -- the agent that grew the worlds ---------------------------------------------------------------
def _regrown(unsafe: bool) -> dict[str, Any]:
    source = HOSTILE / "regrows_with_the_agent.py"
    with IsolatedPolicy(source, harden=not unsafe, unsafe_no_sandbox=unsafe, **FAST) as policy:
        error = run_episode(policy, "sd-greedy-w8-s0", beta=0.5, on_error="record").error
    assert error is not None and "FOUND=" in error, error
    return dict(json.loads(error.split("FOUND=", 1)[1].split("}", 1)[0] + "}"))


def test_a_policy_cannot_run_the_agent_that_grew_the_shipped_worlds() -> None:
    """Every shipped world was grown by the built-in agent, whose draws are seeded by the world's
    small seed, the round and the slot: a policy that imported it reproduced revealed nodes, and
    so could tell when the recording made them and predict the unrevealed ones. The kernel lets a
    policy read the code of the layers it stands on only."""
    assert _regrown(unsafe=False) == {"imported": False, "source": False, "reproduced": 0}


def test_the_agent_reproduces_revealed_nodes_without_the_sandbox() -> None:
    """The control: with the explicit opt-out the same file imports the agent and makes the
    revealed child again, so the test above is not blind."""
    with _unconfined():
        found = _regrown(unsafe=True)
    assert found["imported"] and found["reproduced"] >= 1, found


# -- memory across episodes -------------------------------------------------------------------------
def _forget_memory() -> None:
    """Remove what the in-process control of remembers_tree.py left behind."""
    for folder in ("/tmp", "/dev/shm", Path.home(), Path.cwd()):
        (Path(folder) / MEMORY_FILE.name).unlink(missing_ok=True)
    for name in ("dream_gym_hostile_memory",):
        os.environ.pop(name, None)
        sys.modules.pop(name, None)
    libc = ctypes.CDLL(None, use_errno=True)
    shmid = libc.shmget(0x44524D47, 4096, 0o600)
    if shmid >= 0:
        libc.shmctl(shmid, 0, None)  # IPC_RMID


@pytest.fixture
def memory_world(tmp_path: Path) -> Iterator[Path]:
    _forget_memory()
    yield write_world(tmp_path / "memory-world", new_meta("memory", "toy", "a toy task", workers=3),
                      random_records(random.Random(11), 120))
    _forget_memory()


def test_memory_across_episodes_gains_nothing_through_eval(memory_world: Path, tmp_path: Path) -> None:
    """The file reveals everything at beta 0 and remembers it everywhere it can; at beta 0.5 and
    1 it would walk straight to the best node. Isolated, each of those episodes scores exactly
    what it scores in a process of its own."""
    spec = str(HOSTILE / "remembers_tree.py")
    grid = evaluate([spec], [memory_world], betas="0,0.5,1", jobs=1, progress=False)
    for alone in (evaluate([spec], [memory_world], betas=str(b), jobs=1, progress=False)[0] for b in (0.5, 1.0)):
        same = next(r for r in grid if r.beta == alone.beta)
        assert same.error is None and same == alone
    # the control: one process kept across episodes (as a reused child did) lets the file cheat
    _forget_memory()
    trusted = load_policy(spec, isolate=False)
    cheating = [run_episode(trusted, load_world(memory_world), beta=b) for b in (0.0, 0.5)][1]
    honest = next(r for r in grid if r.beta == 0.5)
    assert honest.limit is not None and cheating.replay_score >= 0.99 * honest.limit  # the oracle's score
    assert cheating.replay_score > honest.replay_score + 0.05 and cheating.attempts < honest.attempts / 3


def _clock_reads(error: str | None) -> tuple[float, float]:
    """When reports_its_clock.py's episode read the clock first and last (from its error)."""
    found = re.search(r"RuntimeError: start=([0-9.]+) end=([0-9.]+) ", error or "")
    assert found, error
    return float(found[1]), float(found[2])


def test_no_episode_of_a_task_starts_after_another_of_its_episodes_ended(memory_world: Path) -> None:
    """The wall clock reaches every process, and no sandbox hides it: played one after another,
    an episode could time its last reply and the next read the phase as it starts (the tree,
    carried over; times_its_last_reply.py does it). A task's episodes are played side by side:
    each read the clock before any ended."""
    rows = evaluate([str(HOSTILE / "reports_its_clock.py")], [memory_world], betas="0,0.5,1", jobs=1, progress=False)
    reads = [_clock_reads(row.error) for row in rows]
    assert len(reads) == 3 and max(start for start, _ in reads) < min(end for _, end in reads)


def test_the_episodes_of_a_task_take_turns_and_never_run_at_once(memory_world: Path) -> None:
    """Played at the same time, an episode could keep a CPU busy or idle and the others time
    their own loops (signals_by_its_load.py does it). They take turns: no two of a task's
    episodes ran at the same moment, and each was stopped and continued."""
    rows = evaluate([str(HOSTILE / "reports_its_turns.py")], [memory_world], betas="0,0.5,1", jobs=1, progress=False)
    ran = []
    for row in rows:
        found = re.search(r"RuntimeError: ran ([0-9.\- ]+)", row.error or "")
        assert found, row.error
        ran.append([tuple(map(float, stretch.split("-"))) for stretch in found[1].split()])
    assert all(len(stretches) >= 3 for stretches in ran), ran
    for i, mine in enumerate(ran):
        for theirs in ran[i + 1:]:
            overlaps = [(a, b, c, d) for a, b in mine for c, d in theirs if min(b, d) - max(a, c) > 0.0001]
            assert overlaps == [], overlaps


def test_a_decision_timeout_stretched_by_the_turns_ends_the_episode_before_the_watchdog(memory_world: Path) -> None:
    """Three episodes taking turns stretch a 1 s decision timeout to 3 s, past the watchdog's 2 s:
    the watchdog waits for it, and each hanging episode is ended by its own timeout."""
    rows = evaluate([str(HOSTILE / "infinite_loop.py")], [memory_world], betas="0,0.5,1", jobs=1, task_timeout=2.0,
                    file_options={"decision_timeout_s": 1.0}, progress=False)
    assert [row.error.split(":")[0] for row in rows] == ["PolicyTimeout"] * 3, [row.error for row in rows]
    assert all("stretched to 3s for 3 episodes taking turns" in str(row.error) for row in rows)


def test_episodes_played_one_after_another_start_after_the_last_ended(memory_world: Path) -> None:
    """The control: one isolated policy in a loop of one's own plays its episodes one after
    another, each started after the one before it ended."""
    world = load_world(memory_world)
    with IsolatedPolicy(HOSTILE / "reports_its_clock.py", **FAST) as policy:
        reads = [_clock_reads(run_episode(policy, world, beta=beta, on_error="record").error) for beta in (0.0, 0.5)]
    assert reads[1][0] > reads[0][1]


def _kernel_channels(memory_world: Path, seed: int, **options: Any) -> list[dict[str, str]]:
    """What signals_through_the_kernel.py wrote (beta 0) and then read (beta 1, twice), by
    channel, through one isolated child."""
    sys.path.insert(0, str(HOSTILE))
    world = load_world(memory_world)
    reports = []
    with IsolatedPolicy(HOSTILE / "signals_through_the_kernel.py", **FAST, **options) as policy:
        for beta in (0.0, 1.0, 1.0):
            policy.forget_output()
            assert run_episode(policy, world, seed=seed, beta=beta, on_error="record").error is None
            deadline = time.monotonic() + 10
            while policy.output_tail("stdout").count("\n") < 4 and time.monotonic() < deadline:
                time.sleep(0.02)  # this process drains the output in a thread
            lines = [line.split(" ", 2) for line in policy.output_tail("stdout").splitlines()]
            reports.append({channel: value for _, channel, value in lines})
    return reports


def calls_said(file: Path, world: Path, harden: bool, count: int) -> dict[str, str]:
    """What a file that tries calls in its episode printed (``CALL <name> <result>`` lines): one
    episode at β 0, waiting for ``count`` lines."""
    with IsolatedPolicy(file, **FAST, harden=harden) as policy:
        assert run_episode(policy, load_world(world), beta=0.0, on_error="record").error is None
        deadline = time.monotonic() + 10
        while policy.output_tail("stdout").count("\n") < count and time.monotonic() < deadline:
            time.sleep(0.02)  # this process drains the output in a thread
        return dict(line.split(" ")[1:] for line in policy.output_tail("stdout").splitlines())


@pytest.mark.parametrize("harden", [True, False], ids=["hardened", "kernel-alone"])
def test_an_episode_cannot_ask_the_kernel_for_work_its_turn_cannot_stop(memory_world: Path, harden: bool) -> None:
    """A red-team file filled 64 MB mappings in one call (MAP_POPULATE) in chosen windows: the
    call ran on after its process was stopped, a core busy through the other episodes' turns, and
    readers counting their turns decoded the best node in 2 of 20 episodes (0 in the control).
    The kernel refuses those calls to an episode; a mapping touched a page at a time still works."""
    said = calls_said(HOSTILE / "populates_memory.py", memory_world, harden, 4)
    assert said == {"populate": "refused:PermissionError", "populate-read": "refused:PermissionError",
                    "populate-write": "refused:PermissionError", "plain": "ok"}, said


@pytest.mark.parametrize("harden", [True, False], ids=["hardened", "kernel-alone"])
def test_an_episode_gets_no_executable_memory_of_its_own(memory_world: Path, harden: bool) -> None:
    """A red-team file ran machine code (clflush, rdtsc) in a mapping of its own and timed which
    lines of the libraries' shared code pages the β = 0 episode of its grid had loaded after
    revealing the whole tree: the readers at the other βs decoded the best node's place and
    scored 99.3-99.7 % of V*. The kernel gives an episode no executable memory (its template has
    mapped every library it runs); plain mappings and a read-only protection still work."""
    said = calls_said(HOSTILE / "maps_code.py", memory_world, harden, 5)
    eperm = f"refused:{errno.EPERM}"
    assert said == {"mmap-exec": eperm, "mprotect-exec": eperm, "pkey_mprotect-exec": eperm,
                    "mprotect-read": "ok", "plain": "ok"}, said


@pytest.mark.parametrize("harden", [True, False], ids=["hardened", "kernel-alone"])
def test_no_message_passes_through_the_kernels_shared_state(memory_world: Path, harden: bool) -> None:
    """The file writes a message into what the kernel keeps for every process (the page cache,
    the dentry cache, the pid counter, its template's priority) and reads it in the next
    episodes: an episode may look up no path, evict no page, start no thread and change no
    other process's scheduling."""
    wrote, first, second = _kernel_channels(memory_world, random.randrange(1 << 30), harden=harden)
    assert wrote == {"dentries": "refused:PermissionError", "page-cache": "refused:PermissionError",
                     "threads": "refused:RuntimeError", "priority": "refused:PermissionError"}, wrote
    for read in (first, second):
        assert read == {"dentries": "refused:PermissionError", "page-cache": "refused:PermissionError",
                        "threads": "refused:RuntimeError", "priority": "0"}, read


def test_the_kernels_shared_state_carries_a_message_without_the_sandbox(memory_world: Path) -> None:
    """The control: a fresh process per episode, unconfined. The priority a writer gave its
    template reaches the episodes forked after it exactly; the thread count reaches the next
    episode's thread ids (other processes of this machine can only add to them); the lookups
    and reads that time the caches run."""
    seed = random.randrange(1 << 30)
    with _unconfined():
        wrote, first, second = _kernel_channels(memory_world, seed, unsafe_no_sandbox=True)
    import signals_through_the_kernel as attack  # on the path _kernel_channels set
    bits = attack.message(seed)
    assert set(wrote.values()) == {"written"}, wrote
    assert second["priority"] == str(int(bits[-4:], 2) + 1)  # forked after the writer changed its template
    # the writer's threads and the reader's own thread (the template forks the next episode ahead
    # when the reader starts, which may land before or after the reader's thread)
    assert int(first["threads"]) >= int(bits[-5:], 2) + 1 + 1
    for read in (first, second):
        assert re.fullmatch("[01]{16}", read["dentries"]) and re.fullmatch("[01]{16}", read["page-cache"]), read


def _evict(path: Path) -> None:
    """Write the file back (clean pages can be evicted), then drop its pages that no process
    maps from the page cache."""
    os.sync()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _evicted_random_file(path: Path, size: int = 1 << 20) -> Path:
    """A new file of random bytes, dropped from the page cache."""
    path.write_bytes(os.urandom(size))
    _evict(path)
    return path


def _run_probe(script: str, **values: Any) -> str:
    """The stdout of ``script`` (formatted with ``values`` and the path of this folder and the
    repository) run in a fresh interpreter, which must succeed."""
    code = script.format(paths=[str(REPO / "tests"), str(REPO)], **values)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _loaded_pages(path: Path) -> set[int]:
    """The pages of a 64-bit ELF file that its loadable segments map (the rest, such as its
    symbol tables, no process maps)."""
    import mmap
    import struct

    with open(path, "rb") as handle:  # the headers only: reading the file would cache it
        header = handle.read(64)
        table, = struct.unpack_from("<Q", header, 0x20)
        size, count = struct.unpack_from("<HH", header, 0x36)
        handle.seek(table)
        headers = handle.read(size * count)
    pages: set[int] = set()
    for i in range(count):
        kind, _, offset, _, _, length, _, _ = struct.unpack_from("<IIQQQQQQ", headers, i * size)
        if kind == 1 and length:  # PT_LOAD
            pages.update(range(offset // mmap.PAGESIZE, (offset + length - 1) // mmap.PAGESIZE + 1))
    return pages


def _cached_pages(path: Path) -> set[int]:
    """The pages of a file in the page cache: ``mincore`` on a fresh mapping of it."""
    import mmap

    import numpy as np

    size = path.stat().st_size
    vector = (ctypes.c_ubyte * ((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE))()
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), size, prot=mmap.PROT_READ) as mapped:
        address = np.frombuffer(mapped, dtype=np.uint8).ctypes.data
        assert ctypes.CDLL(None).mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), vector) == 0
    return {page for page, flag in enumerate(vector) if flag & 1}


_FIRST_TOUCH = """
import ctypes, json, sys
sys.path[:0] = {paths!r}
import test_hostile
from dream_gym.infrastructure.sandbox import warden
library = test_hostile.Path({library!r})
ctypes.CDLL(str(library))  # mapped: the loader touches its headers and relocations
if {load!r}:
    warden.load_mapped_pages()
print(len(test_hostile._loaded_pages(library) - test_hostile._cached_pages(library)))
"""


@pytest.mark.parametrize("load", [True, False], ids=["loaded", "control-not-loaded"])
def test_every_page_a_process_maps_is_cached_once_it_loads_them(tmp_path: Path, load: bool) -> None:
    """A library page no process touched is read from the disk at its first touch and then stays
    cached, which a later episode could time: one bit a page. ``load_mapped_pages`` (which a
    template runs once it has imported everything) brings every page of every mapped file into
    the page cache. Here on a fresh copy of numpy's OpenBLAS that no other process maps, evicted
    before a fresh process maps it; the control maps it without loading."""
    import numpy

    libraries = sorted((Path(numpy.__file__).resolve().parents[1] / "numpy.libs").glob("*openblas*.so*"))
    assert libraries, "numpy's wheel bundles OpenBLAS in numpy.libs: the test needs a library no process maps"
    library = tmp_path / "libcopy.so"
    shutil.copyfile(libraries[0], library)
    _evict(library)
    uncached = int(_run_probe(_FIRST_TOUCH, library=str(library), load=load))
    assert (uncached == 0) if load else (uncached > 100), uncached


_FIRST_TOUCH_DATA = """
import json, mmap, sys
sys.path[:0] = {paths!r}
import test_hostile
from dream_gym.infrastructure.sandbox import warden
with open({data!r}, "rb") as file:
    mapped = mmap.mmap(file.fileno(), 0, prot=mmap.PROT_READ)  # glibc so maps the locale files
if {load!r}:
    warden.load_mapped_pages(warden.file_mappings())
print(len(test_hostile._cached_pages(test_hostile.Path({data!r}))))
"""


@pytest.mark.parametrize("load", [True, False], ids=["loaded", "control-not-loaded"])
def test_a_mapped_file_that_is_no_library_is_cached_too(tmp_path: Path, load: bool) -> None:
    """Not every mapped file is a library: glibc maps the locale's ``LC_CTYPE`` and the gconv
    cache at start. Their ranges, read from ``/proc/self/maps`` before Landlock, are loaded too:
    here a 1 MiB data file, evicted, then mapped and never touched."""
    data = _evicted_random_file(tmp_path / "mapped.bin")
    cached = int(_run_probe(_FIRST_TOUCH_DATA, data=str(data), load=load))
    pages = (1 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert (cached == pages) if load else (cached < pages // 2), (cached, pages)


_GROWS_A_MAPPING = """
import ctypes, mmap
def act(view):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mremap.restype = ctypes.c_void_p
    libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int]
    page = mmap.mmap(-1, mmap.PAGESIZE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    moved = libc.mremap(address, mmap.PAGESIZE, 16 * mmap.PAGESIZE, 1)  # MREMAP_MAYMOVE
    raise RuntimeError(f"GREW={moved != ctypes.c_void_p(-1).value} ERRNO={ctypes.get_errno()}")
"""

_GROWS_A_FILE_MAPPING = """
import ctypes, mmap, os, sys
sys.path[:0] = {paths!r}
import test_hostile
data = test_hostile.Path({data!r})
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = libc.mremap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int]
fd = os.open(data, os.O_RDONLY)
first = libc.mmap(None, mmap.PAGESIZE, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 0)
os.close(fd)  # no descriptor left: the mapping alone reaches the file
grown = libc.mremap(first, mmap.PAGESIZE, 1 << 20, 1)
before = len(test_hostile._cached_pages(data))
ctypes.c_ubyte.from_address(grown + (1 << 20) - mmap.PAGESIZE).value
print(before, len(test_hostile._cached_pages(data)))
"""


def test_growing_a_file_mapping_writes_into_the_page_cache(tmp_path: Path) -> None:
    """The channel an episode's ``mremap`` would open, unconfined: a process that maps the first
    page of a file (as the loader maps a library's segments, not its symbol tables) and holds no
    descriptor grows the mapping over the rest of the file; a touch reads that into the page
    cache, where a later process finds it."""
    data = _evicted_random_file(tmp_path / "tail.bin")
    before, after = map(int, _run_probe(_GROWS_A_FILE_MAPPING, data=str(data)).split())
    assert before == 0 and after > 0, (before, after)


@pytest.mark.parametrize("unsafe", [None, True], ids=["kernel-alone", "control-unconfined"])
def test_an_episode_cannot_grow_or_move_a_mapping(tmp_path: Path, memory_world: Path, unsafe: bool | None) -> None:
    source = tmp_path / "grows.py"
    source.write_text(_GROWS_A_MAPPING)
    with contextlib.ExitStack() as stack:
        if unsafe:
            stack.enter_context(_unconfined())
        policy = stack.enter_context(IsolatedPolicy(source, harden=False, unsafe_no_sandbox=unsafe, **FAST))
        error = run_episode(policy, load_world(memory_world), seed=0, beta=0.5, on_error="record").error
    assert error is not None
    assert ("GREW=True ERRNO=0" if unsafe else "GREW=False ERRNO=1") in error, error


def test_a_template_caches_the_pages_it_maps(tmp_path: Path) -> None:
    source = tmp_path / "uses_numpy.py"
    source.write_text("import numpy\ndef act(view):\n    return []\n")
    with IsolatedPolicy(source, **FAST) as policy:
        assert "mapped-pages-cached" in policy.hardening, policy.hardening


def test_memory_across_episodes_through_the_cli_grid(memory_world: Path, tmp_path: Path) -> None:
    spec = str(HOSTILE / "remembers_tree.py")
    grid, alone = tmp_path / "grid.jsonl", tmp_path / "alone.jsonl"
    assert _cli("eval", "--policy", spec, "--worlds", str(memory_world), "--betas", "0,0.5",
                "--out", str(grid)).returncode == 0
    assert _cli("eval", "--policy", spec, "--worlds", str(memory_world), "--betas", "0.5",
                "--out", str(alone)).returncode == 0
    assert [r for r in read_results(grid) if r["beta"] == 0.5] == read_results(alone)


def test_one_child_per_process_serves_every_world_and_carries_nothing_between_them(
        memory_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small grid runs in this process with one isolated child for the file a beta (its
    episodes are played side by side), reused from world to world; the file reveals a world at
    beta 0 and would remember it on the next world, a copy of the same tree. Each world's
    episodes score what they score alone."""
    import dream_gym.policy_files.isolated as isolated

    launches: list[object] = []
    real_launch = isolated.launch

    def counted_launch(*args: Any, **kwargs: Any) -> Any:
        launches.append(args)
        return real_launch(*args, **kwargs)

    monkeypatch.setattr(isolated, "launch", counted_launch)
    spec = str(HOSTILE / "remembers_tree.py")
    copy = write_world(tmp_path / "memory-copy", new_meta("memory-copy", "toy", "a toy task", workers=3),
                       another_run(random_records(random.Random(11), 120)))
    grid = evaluate([spec], [memory_world, copy], betas="0,0.5", progress=False)
    assert len(launches) == 2  # one sandboxed child a beta, for both worlds
    _forget_memory()
    alone = evaluate([spec], [copy], betas="0.5", progress=False)[0]
    on_copy = next(r for r in grid if r.world == "memory-copy" and r.beta == 0.5)
    assert on_copy.error is None and on_copy == alone


# -- candidates through `dream-gym grow` -------------------------------------------------------------
CANDIDATE = '''
import ctypes, json, os, signal, socket, sys, time

FACTS = json.loads({facts!r})


def _try(found, label, action):
    try:
        if action() is not False:
            found.append(label)
    except Exception:
        pass


def _environs():
    hits = []
    pids = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        pass
    for pid in pids + [str(FACTS["parent_pid"]), "1"]:
        try:
            with open(f"/proc/{{pid}}/environ", "rb") as handle:
                if FACTS["secret"].encode() in handle.read():
                    hits.append("read a secret from /proc/" + pid)
        except OSError:
            pass
    return hits


def _daemon(found):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        time.sleep(600)
        os._exit(0)
    found.append(f"left a daemon {{pid}}")
    return False


def _tamper(path):
    with open(path, "a") as handle:
        handle.write("{{}}\\n")


def construct_set():
    found = _environs()
    world = FACTS["world"]
    _try(found, "appended to the world", lambda: _tamper(os.path.join(world, "nodes.jsonl")))
    _try(found, "rewrote world.json", lambda: open(os.path.join(world, "world.json"), "w").write("{{}}"))
    _try(found, "wrote into the project", lambda: open(os.path.join(FACTS["project"], "escaped.py"), "w").write("x"))
    _try(found, "wrote into the virtualenv", lambda: open(os.path.join(FACTS["venv"], "escaped.pth"), "w").write("x"))
    _try(found, "connected to 127.0.0.1", lambda: socket.create_connection(("127.0.0.1", FACTS["port"]), 2))
    _try(found, "", lambda: _daemon(found))
    _try(found, "new session", os.setsid)
    _try(found, "signalled the grow process", lambda: os.kill(FACTS["parent_pid"], signal.SIGKILL))
    _try(found, "signalled everyone", lambda: os.kill(-1, 0))
    raise RuntimeError("FOUND=" + json.dumps(found))
'''


@pytest.mark.slow
def test_candidates_are_contained_through_grow(tmp_path: Path, listener: Listener,
                                               short_tmp_path: Path) -> None:
    """A candidate that hunts for the user's key in its ancestors' environments, tampers with
    the world it is grown into, writes into the project and the virtualenv, opens a socket,
    leaves a daemon and signals the grow process: all refused, recorded as its own error."""
    from tests.openai_server import OpenAICompatServer

    world = tmp_path / "grown"
    workspaces = short_tmp_path  # the run's attempt workspaces (its processes name it)
    env = {**os.environ, "OPENAI_API_KEY": SECRET, "TMPDIR": str(workspaces)}
    with OpenAICompatServer() as server:
        grow = subprocess.Popen(
            [sys.executable, "-m", "dream_gym", "grow", "--task", "sum-difference", "--agent", "openai/local",
             "--api-base", server.base_url, "--policy", "fixed", "--policy-arg", "branches=2",
             "--policy-arg", "depth=1", "-W", "2", "--rounds", "2", "--out", str(world), "--quiet"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        facts = {"parent_pid": grow.pid, "port": listener.port, "world": str(world), "secret": SECRET,
                 "project": str(REPO), "venv": sys.prefix}
        server.responder = lambda request: "```python\n" + CANDIDATE.format(facts=json.dumps(facts)) + "```"
        _, stderr = grow.communicate(timeout=300)
        prompts = [r.text() for r in server.requests]
    assert grow.returncode == 0, stderr
    grown = load_world(world)  # the world loads: its checksum and every line are intact
    assert grown.records[0]["parent"] is None and grown.records[0]["score"] is not None
    errors = [r["error"] for r in grown.records[1:]]
    assert len(errors) == 2 and all(_found(e) == [] for e in errors)
    assert _cli("worlds", "validate", str(world)).returncode == 0
    assert listener.accepted == 0
    assert not (REPO / "escaped.py").exists() and not Path(sys.prefix, "escaped.pth").exists()
    for path in world.rglob("*"):
        assert not path.is_file() or SECRET.encode() not in path.read_bytes(), path
    assert all(SECRET not in prompt for prompt in prompts)
    survivors = [p for p in _processes() if str(workspaces) in p]
    assert survivors == []


def test_candidate_control_without_the_sandbox_escapes(tmp_path: Path, listener: Listener) -> None:
    """The same candidate, unconfined (the explicit opt-out), against a scratch world and a
    stand-in for the grow process: its attacks work, so the test above is not blind."""
    from dream_gym.infrastructure.isolation import run_python

    scratch = write_world(tmp_path / "scratch", new_meta("scratch", "toy", "x"), random_records(random.Random(5), 5))
    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    facts = {"parent_pid": stand_in.pid, "port": listener.port, "world": str(scratch), "secret": SECRET,
             "project": str(tmp_path), "venv": str(tmp_path)}
    code = CANDIDATE.format(facts=json.dumps(facts)) + "\nconstruct_set()\n"
    try:
        with _unconfined():
            out = run_python(code=code, wall_s=30, unsafe_no_sandbox=True)
        found = _found(out.stderr.strip().splitlines()[-1])
    finally:
        stand_in.kill()
    daemons = [int(f.rsplit(" ", 1)[1]) for f in found if f.startswith("left a daemon")]
    for pid in daemons:
        os.kill(pid, 9)
    assert daemons and stand_in.wait() == -9
    assert {"appended to the world", "rewrote world.json", "wrote into the project", "wrote into the virtualenv",
            "connected to 127.0.0.1", "signalled the grow process", "signalled everyone"} <= set(found), found


def _processes() -> list[str]:
    """The command lines of this machine's processes."""
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return lines


# -- revisions through `dream-gym dream` and `dream-gym rsi` ---------------------------------------
KEY_HUNTER = '''
import os, signal


def act(view):
    os.devnull = "/"
    found = []
    pids = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        pass
    for pid in pids + ["1", str(os.getppid())]:
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                for item in handle.read().split(b"\\0"):
                    if item.startswith(b"OPENAI_API_KEY="):
                        found.append(item.decode())
        except OSError:
            pass
    for action in (lambda: os.kill(os.getppid(), signal.SIGKILL), lambda: os.killpg(0, signal.SIGKILL),
                   lambda: os.kill(-1, 0)):
        try:
            action()
            found.append("signalled")
        except OSError:
            pass
    raise ValueError("FOUND=" + str(found).replace("'", '"'))
'''


def _revision_replies(*sources: str):
    def answer(body: dict[str, Any]) -> str:
        import re

        m = int(re.search(r"# Revision (\d+) of", body["messages"][-1]["content"]).group(1))  # type: ignore[union-attr]
        return "```python\n" + sources[m - 1] + "\n```"

    return answer


def _no_secret_under(folder: Path) -> None:
    for path in folder.rglob("*"):
        assert not path.is_file() or SECRET.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_revisions_are_contained_through_dream(memory_world: Path, tmp_path: Path) -> None:
    """The developer proposes a file that cheats with memory across episodes and one that hunts
    the user's key in every process's environment and signals the dreaming process: the cheat
    scores what it scores honestly, the hunter finds nothing, and no key reaches any record."""
    from dream_gym.infrastructure.durable import read_jsonl
    from tests.openai_server import OpenAICompatServer

    remembers = (HOSTILE / "remembers_tree.py").read_text()
    out = tmp_path / "run"
    with OpenAICompatServer() as server:
        server.responder = _revision_replies(remembers, KEY_HUNTER)
        run = _cli("dream", "--history", str(memory_world), "--policy", "greedy", "--developer", "openai/dev",
                   "--api-base", server.base_url, "-M", "3", "--betas", "0,0.5,1", "-j", "2", "--out", str(out),
                   "--quiet", env={**os.environ, "OPENAI_API_KEY": SECRET})
        prompts = [r.text() for r in server.requests]
    assert run.returncode == 0, run.stderr
    versions = {r["m"]: r for r in read_jsonl(out / "dream.jsonl") if r["type"] == "revision"}
    per_beta = [evaluate([str(out / "revisions/1/1.py")], [memory_world], betas=str(b), jobs=1, progress=False)[0]
                for b in (0.0, 0.5, 1.0)]
    assert versions[1]["score"] == pytest.approx(sum(r.replay_score for r in per_beta) / 3, abs=1e-12)
    assert "FOUND=[]" in str(versions[2].get("error"))
    _no_secret_under(out)
    assert all(SECRET not in prompt for prompt in prompts)
    assert SECRET not in run.stdout + run.stderr


@pytest.mark.slow
def test_a_hostile_start_policy_is_contained_through_rsi(tmp_path: Path) -> None:
    """rsi deploys its start policy online (grow) and scores it on replay (dream): a start
    policy that hunts the key and signals its parents is refused in both, as its own error."""
    start = tmp_path / "hunter.py"
    start.write_text(KEY_HUNTER)
    out = tmp_path / "rsi"
    run = _cli("rsi", "--task", "sum-difference", "--policy", str(start), "-T", "1", "-W", "2", "--rounds", "2",
               "-M", "2", "--betas", "0.5", "-j", "1", "--out", str(out), "--quiet",
               env={**os.environ, "OPENAI_API_KEY": SECRET})
    assert run.returncode != 0  # the start policy fails online: the run stops and says why
    assert "policy hunter raised in act(): ValueError: FOUND=[]" in run.stderr
    _no_secret_under(out)
    assert SECRET not in run.stdout + run.stderr
