"""Policy files from anywhere, untrusted ones isolated (dream_gym.policy_files), against a hostile suite.

Every hostile episode must end with a recorded error naming the problem, and a following
episode with a good policy must still work. Spies report what they found by raising
``FOUND=<json list>``; each spy also runs once where it *should* find something (in-process or
unhardened), so these tests fail if the spy itself is blind.
"""

from __future__ import annotations

import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from worldgen import random_records

from dream_gym.cli import main as cli_main
from dream_gym.infrastructure.extras import install_command
from dream_gym.policies import make_policy
from dream_gym.policy import RunContext, run_episode
from dream_gym.policy_files import (
    IsolatedPolicy,
    PolicyCrashed,
    PolicyException,
    PolicyLoadError,
    PolicyMemoryError,
    PolicyNotFoundError,
    PolicyProtocolError,
    load_policy,
)
from dream_gym.policy_files.child import EPISODE_DESCRIPTORS
from dream_gym.policy_files.specs import PolicySpec
from dream_gym.policy_files.wire import HEADER, decode_view, encode_view, frame_request, read_request
from dream_gym.replay.session import ReplaySession
from dream_gym.replay.view import PrefixView, ReceivedNodes
from dream_gym.world.tree import World, build_world
from dream_gym.world.writer import new_meta, write_world

REPO = Path(__file__).resolve().parents[1]
HOSTILE = Path(__file__).resolve().parent / "hostile_policies"
EXAMPLE = REPO / "agents" / "example_policy.py"
MARKER = "FUTURE-MARKER-4242"
SECRETS = {"OPENAI_API_KEY": "sk-test-do-not-leak", "AWS_SECRET_ACCESS_KEY": "aws-test-secret",
           "HF_TOKEN": "hf_test_token", "MY_SERVICE_PASSWORD": "hunter2"}
FAST: dict[str, Any] = dict(decision_timeout_s=10.0, episode_timeout_s=30.0, memory_mb=512)


def _records(n: int = 150, seed: int = 7) -> list[dict[str, Any]]:
    records = random_records(random.Random(seed), n, extras=True)
    for rec in records[1:]:  # every unrevealed node carries the marker a spy looks for
        rec["code"] = f"def solve():\n    # {MARKER} node {rec['id']}\n    return 1\n"
    return records


def _meta() -> dict[str, Any]:
    return new_meta("sandbox-test", "toy-task", "a toy task", workers=3)


@pytest.fixture(scope="module")
def world() -> World:
    return build_world(_meta(), _records())


@pytest.fixture(scope="module")
def good() -> Iterator[IsolatedPolicy]:
    """The example policy, isolated: the 'following episode still works' check."""
    with IsolatedPolicy(EXAMPLE, **FAST) as policy:
        yield policy


@pytest.fixture(scope="module")
def reference(world: World) -> Any:
    return run_episode(load_policy(EXAMPLE, isolate=False), world, seed=1, beta=0.5)


def _assert_good_still_works(good: IsolatedPolicy, world: World, reference: Any) -> None:
    result = run_episode(good, world, seed=1, beta=0.5, on_error="record")
    assert result.error is None
    assert result == reference


def _found(error: str | None) -> list[str]:
    assert error is not None
    match = re.search(r"FOUND=(\[.*?\])", error)
    assert match, f"the spy did not report: {error}"
    return list(json.loads(match.group(1)))


def _hostile(name: str, world: World, **limits: Any) -> tuple[IsolatedPolicy, Any]:
    policy = IsolatedPolicy(HOSTILE / name, **{**FAST, **limits})
    return policy, run_episode(policy, world, seed=0, beta=0.5, on_error="record")


# -- loading ------------------------------------------------------------------------------------
def test_load_policy_kinds(world: World) -> None:
    greedy = load_policy("greedy")
    assert type(greedy).__name__ == "GreedyPolicy"
    assert load_policy("dream_gym.policies.greedy:GreedyPolicy", params={"patience": 2}).patience == 2  # type: ignore[attr-defined]
    fn = load_policy("dream_gym.policies.base:open_nodes")
    assert type(fn).__name__ == "FunctionPolicy"
    in_process = load_policy(EXAMPLE, isolate=False)
    assert not isinstance(in_process, IsolatedPolicy) and type(in_process).__name__ == "Policy"


def test_a_policy_class_without_a_name_is_named_by_its_file(world: World, tmp_path: Path) -> None:
    # every file's class is called Policy: results and errors said "policy Policy" for each
    path = tmp_path / "beam_search.py"
    path.write_text("class Policy:\n    def reset(self, context):\n        pass\n\n"
                    "    def act(self, view):\n        return []\n")
    with IsolatedPolicy(str(path)) as isolated:
        assert isolated.name == "beam_search" and run_episode(isolated, world).policy == "beam_search"
    assert run_episode(load_policy(str(path), isolate=False), world).policy == "beam_search"
    assert run_episode(load_policy(EXAMPLE, isolate=False), world).policy == "example"  # its own name stands


@pytest.mark.parametrize(("spec", "kind"), [
    ("greedy", "builtin"),
    ("dream_gym.policies.greedy:GreedyPolicy", "module"),
    (EXAMPLE, "file"),
    ("folder/policy", "file"),
    ("model.zip", "model"),
    ("a.zip+b.zip", "model"),
    ("ppo-macro-v", "model"),
])
def test_a_spec_is_read_once_into_its_kind(spec: str, kind: str) -> None:
    read = PolicySpec.of(spec)
    assert (read.given, read.target, read.kind) == (str(spec), str(spec), kind)
    assert PolicySpec.of(read) is read


def test_recommended_keeps_its_name_and_loads_what_it_names() -> None:
    from dream_gym.policies.recommended import NAME, recommended_spec

    read = PolicySpec.of(NAME)
    assert read.given == NAME and read.target == recommended_spec() != NAME
    assert read.kind == PolicySpec.of(recommended_spec()).kind
    policy = load_policy(NAME)
    assert policy.name == NAME  # type: ignore[attr-defined]  # results are labelled as the user asked
    assert type(policy) is type(load_policy(recommended_spec()))


def test_a_model_without_the_rl_extra_names_the_extra_once(capsys: pytest.CaptureFixture[str]) -> None:
    """``recommended`` names a model: where torch and SB3 are not installed, replay (its default
    policy) stops with the extra to install, not a traceback. The control loads it, in this process
    (where torch is installed; a process of its own would spend most of its time importing it)."""
    absent = "import sys\nfor name in ('torch', 'stable_baselines3', 'sb3_contrib'): sys.modules[name] = None\n"
    replay = "from dream_gym.cli import main\nsys.exit(main(['replay', 'sd-fixed-s0']))\n"
    done = subprocess.run([sys.executable, "-c", absent + replay], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("error:") == 1 and install_command("rl") in done.stderr
    assert "Traceback" not in done.stderr and "'recommended (" in done.stderr
    capsys.readouterr()
    code = cli_main(["replay", "sd-fixed-s0"])
    control = capsys.readouterr()
    assert code == 0 and "V = " in control.out, control.err[-2000:]


def test_what_a_spec_loads_from_disk(tmp_path: Path) -> None:
    assert PolicySpec.of("greedy").files() == []
    assert PolicySpec.of(EXAMPLE).files() == [Path(EXAMPLE)]
    assert PolicySpec.of(tmp_path / "absent.py").files() == []
    with pytest.raises(PolicyNotFoundError, match="does not exist"):
        PolicySpec.of(tmp_path / "absent.zip").files()
    with pytest.raises(ValueError, match="not a model"):
        PolicySpec.of("greedy").model_files()


def test_load_policy_errors(tmp_path: Path) -> None:
    with pytest.raises(LookupError, match="unknown built-in policy 'nope'"):
        load_policy("nope")
    with pytest.raises(PolicyNotFoundError, match="does not exist"):
        load_policy(tmp_path / "missing.py")
    with pytest.raises(LookupError, match="no module"):
        load_policy("no_such_module_xyz:Policy")
    with pytest.raises(LookupError, match="no attribute"):
        load_policy("dream_gym.policies:NoSuchPolicy")
    with pytest.raises(ValueError, match="defines no policy.*make_policy"):
        load_policy(HOSTILE / "no_policy.py", isolate=False)
    with pytest.raises(PolicyLoadError, match="defines no policy"):
        load_policy(HOSTILE / "no_policy.py")  # isolated: the child reports it
    broken = tmp_path / "broken.py"
    broken.write_text("import math\nx = 1 / 0\n")
    with pytest.raises(PolicyLoadError, match="ZeroDivisionError"):
        load_policy(broken)
    with pytest.raises(ValueError, match="only apply to isolated"):
        load_policy("greedy", memory_mb=100)


def test_file_conventions(tmp_path: Path) -> None:
    two = tmp_path / "two.py"
    two.write_text("class A:\n    def reset(self, c): pass\n    def act(self, v): return []\n"
                   "class B(A):\n    pass\n")
    with pytest.raises(PolicyLoadError, match="2 policy classes"):
        load_policy(two, isolate=False)
    factory = tmp_path / "factory.py"
    factory.write_text("class A:\n    name = 'from-factory'\n    def reset(self, c): pass\n"
                       "    def act(self, v): return []\n"
                       "class B(A):\n    pass\n"
                       "def make_policy():\n    return B()\n")
    assert load_policy(factory, isolate=False).name == "from-factory"  # type: ignore[attr-defined]
    no_reset = tmp_path / "no_reset.py"  # it lacks reset() only, and is told so (it was "reset() and act()")
    no_reset.write_text("class B:\n    def act(self, v): return []\n"
                        "def make_policy():\n    return B()\n")
    with pytest.raises(PolicyLoadError, match=r"make_policy\(\) returned B, which lacks reset\(\)$"):
        load_policy(no_reset, isolate=False)
    fn = tmp_path / "fn_with_context.py"
    fn.write_text("def policy(view, context):\n    return [] if context.seed == 0 else [0]\n")
    assert load_policy(fn, isolate=False).name == "fn_with_context"  # type: ignore[attr-defined]


# -- equivalence --------------------------------------------------------------------------------
def test_view_wire_format_roundtrip(world: World) -> None:
    session = ReplaySession(world, beta=0.3)
    received = ReceivedNodes()
    sent = None
    for step in range(6):
        view = session.view()
        encoded, sent = encode_view(view, sent)
        assert encoded[0] == (0 if step == 0 else len(received))  # only the new nodes travel
        request = read_request(frame_request({"op": "act", "view": encoded})[HEADER.size:])
        rebuilt, received = decode_view(request["view"], received)
        assert rebuilt == PrefixView.from_dict(json.loads(view.to_json())) == view
        assert rebuilt.children(0) == view.children(0)
        session.step([view.frontier[-1]])
    full, _ = decode_view(encode_view(session.view())[0], ReceivedNodes())
    assert full == session.view()


@pytest.mark.parametrize("spec", ["example", "greedy", "random"])
def test_isolated_equals_in_process(spec: str, world: World, good: IsolatedPolicy) -> None:
    isolated: Any = good if spec == "example" else load_policy(spec, isolate=True, **FAST)
    in_process = load_policy(EXAMPLE if spec == "example" else spec, isolate=False)
    try:
        for seed, beta in ((0, 0.0), (3, 0.5), (5, 1.0)):
            a = run_episode(isolated, world, seed=seed, beta=beta, on_error="record")
            b = run_episode(in_process, world, seed=seed, beta=beta, on_error="record")
            assert a.error is None and a.attempts > 0
            assert a == b
    finally:
        if isolated is not good:
            isolated.close()
    assert good.starts == 1  # one child, reused across episodes


def test_child_inherits_nothing(good: IsolatedPolicy, monkeypatch: pytest.MonkeyPatch, world: World) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    with IsolatedPolicy(EXAMPLE, **FAST) as policy:
        pid = policy.pid
        assert pid is not None and os.getpgid(pid) == pid and os.getsid(pid) == pid
        warden = psutil.Process(pid)
        (init,) = warden.children()  # the namespace's init
        (template_process,) = init.children()
        episode = _episode_forked_ahead(template_process)
        sandbox = [warden, *warden.children(recursive=True)]
        assert {p.pid for p in sandbox} == {pid, init.pid, template_process.pid, episode.pid}
        for process in sandbox:
            environ = Path(f"/proc/{process.pid}/environ").read_bytes().decode()
            for name, value in SECRETS.items():
                assert name not in environ and value not in environ
            assert os.getpgid(process.pid) == pid  # one process group, killed as a whole
        template = template_process.pid
        cmdline = Path(f"/proc/{template}/cmdline").read_bytes().split(b"\0")
        assert b"-s" in cmdline and b"-E" not in cmdline and b"-I" not in cmdline  # -I would ignore PYTHONHASHSEED
        fds = _descriptors_once_passed_on(template)
        # stdin (/dev/null), the stdout and stderr this process drains, and the control socket:
        # no descriptor of this process, no episode's pipe
        drained = {os.readlink(f"/proc/self/fd/{stream.fileno()}") for stream in (policy._proc.stdout, policy._proc.stderr)}
        assert fds[0] == "/dev/null" and {fds[1], fds[2]} == drained, fds
        assert len(fds) == 4 and sum(target.startswith("socket:") for target in fds.values()) == 1, fds
        assert Path(os.readlink(f"/proc/{template}/cwd")).name.startswith("dream_gym_policy.")
        # the episode holds its two pipes besides stdio, and not the template's control socket
        episode_fds = [os.readlink(f"/proc/{episode.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{episode.pid}/fd")]
        assert len(episode_fds) == 5 and not any(target.startswith("socket:") for target in episode_fds), episode_fds
        assert policy.hardening[:2] == ["namespaces", "proc of its own"]
        assert policy.hardening[3:] == ["seccomp", "mapped-pages-cached", "audit-hook"]
        assert policy.hardening[2].startswith("landlock-abi")


def _descriptors_once_passed_on(template: int, timeout_s: float = 10.0) -> dict[int, str]:
    """The template's open descriptors once it has forked the episode ahead: it holds the four
    pipe ends the parent sends for that episode from their arrival until it has forked the episode
    on them and closed its copies, so a look in between sees four more (once in twelve runs here);
    a descriptor it keeps stays past the wait and fails the test as before."""
    def descriptors() -> dict[int, str]:
        return {int(fd): os.readlink(f"/proc/{template}/fd/{fd}") for fd in os.listdir(f"/proc/{template}/fd")}

    deadline = time.monotonic() + timeout_s
    while len(found := descriptors()) > 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    return found


def _episode_forked_ahead(template: psutil.Process, timeout_s: float = 10.0) -> psutil.Process:
    """The template's one child: the episode it forks ahead once it has loaded the file, awaited
    here (the parent does not wait for that fork) until it has closed what it inherited. Just
    after the fork it still holds the template's descriptors, before it runs anything of the
    policy; it lowers its descriptor limit to EPISODE_DESCRIPTORS only once the rest are closed."""
    deadline = time.monotonic() + timeout_s
    while not (children := template.children()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(children) == 1, children
    limits = Path(f"/proc/{children[0].pid}/limits")

    def settled() -> bool:
        found = re.search(r"^Max open files\s+(\d+)", limits.read_text(), re.MULTILINE)
        return found is not None and int(found.group(1)) == EPISODE_DESCRIPTORS

    while not settled() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert settled(), limits.read_text()
    return children[0]


@pytest.mark.slow
def test_hash_seed_sets_the_childs_string_hashes(tmp_path: Path, world: World) -> None:
    """The child honours hash_seed (PYTHONHASHSEED): 0 by default, the same in every run; another
    seed gives other hashes, so a determinism check can tell a policy that depends on them."""
    source = tmp_path / "hashes.py"
    source.write_text("import sys\n"
                      "def act(view):\n"
                      "    raise RuntimeError(f'HASH={hash(\"dream\")} PATH0={sys.path[0]!r}')\n")

    def child_hash(**options: Any) -> str:
        with IsolatedPolicy(source, **FAST, **options) as policy:
            error = run_episode(policy, world, on_error="record").error or ""
        match = re.search(r"HASH=(-?\d+) PATH0=('[^']*')", error)
        assert match, error
        assert match.group(2) != "''"  # the working folder is not on sys.path (as with -I)
        return match.group(1)

    default = child_hash()
    assert default == child_hash(hash_seed=0) == child_hash()
    assert child_hash(hash_seed=1) != default and child_hash(hash_seed=1) == child_hash(hash_seed=1)
    with pytest.raises(ValueError, match="hash_seed"):
        IsolatedPolicy(source, hash_seed=-1)


# -- the hostile suite --------------------------------------------------------------------------
def test_infinite_loop_times_out(world: World, good: IsolatedPolicy, reference: Any) -> None:
    policy, result = _hostile("infinite_loop.py", world, decision_timeout_s=0.5)
    with policy:
        assert result.error.startswith("PolicyTimeout: ") and "decision timeout of 0.5s" in result.error
        assert result.attempts == 0
        again = run_episode(policy, world, on_error="record")  # restarted, fails the same way
        assert again.error is not None and "PolicyTimeout" in again.error and policy.starts == 2
    _assert_good_still_works(good, world, reference)


def test_wall_time_limits_stretch_for_episodes_played_side_by_side(world: World, tmp_path: Path) -> None:
    """Episodes played side by side take turns, so a decision may wait for its episode's turn:
    the wall-time limits stretch by the number of episodes, and the error says by how much."""
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ndef act(view):\n    time.sleep(0.8)\n    return []\n")
    with IsolatedPolicy(slow, **{**FAST, "decision_timeout_s": 0.5}) as policy:
        assert policy.stretch == 1 and "PolicyTimeout" in str(run_episode(policy, world, on_error="record").error)
        policy.side_by_side = 3
        policy.prepare()  # as before the turns begin: the timeout ended its template
        assert policy.stretch == 3 and run_episode(policy, world, on_error="record").error is None
    policy, result = _hostile("infinite_loop.py", world, decision_timeout_s=0.5)
    with policy:
        policy.side_by_side = 2
        policy.prepare()
        again = run_episode(policy, world, on_error="record")
        assert "decision timeout of 0.5s, stretched to 1s for 2 episodes taking turns" in str(again.error)


def test_a_template_that_ended_is_not_started_again_for_an_episode_taking_turns(world: World) -> None:
    """Episodes taking turns start their templates before the turns begin: one that ended since
    fails its episode rather than start a template outside the turns."""
    with IsolatedPolicy(EXAMPLE, **FAST) as policy:
        policy.side_by_side = 2
        assert policy.pid is not None
        os.killpg(policy.pid, signal.SIGKILL)
        policy._proc.wait()  # type: ignore[union-attr]
        result = run_episode(policy, world, on_error="record")
        assert str(result.error).startswith("PolicyCrashed: ") and "ended before its episode began" in str(result.error)
        assert policy.starts == 1 and policy.pid is None
        policy.side_by_side = 1  # played alone, it starts again
        assert run_episode(policy, world, on_error="record").error is None and policy.starts == 2


def test_turns_with_no_group_to_schedule_end_when_the_episodes_do() -> None:
    """Every template gone before the turns began: the episodes fail at once, and the turns end
    with them (the schedule had no turn in which to hear that it was over)."""
    from dream_gym.policy_files.turns import Turns

    ends = iter([False, False, True])
    with Turns([]) as turns:
        turns.run(lambda: next(ends))


def test_a_file_may_ask_for_the_temp_folder_as_it_imports_but_writes_nothing_there(world: World,
                                                                                   tmp_path: Path) -> None:
    # tempfile tests its folder by writing to it, so dill (and torch where dill is installed),
    # which asks for it as it imports, failed to import ahead: "No usable temporary directory"
    pytest.importorskip("dill")
    path = tmp_path / "asks_for_tmp.py"
    path.write_text(textwrap.dedent("""
        import tempfile
        import dill

        def act(view):
            if view.attempts:
                return []
            with tempfile.NamedTemporaryFile() as kept:  # a policy writes nothing
                kept.write(b"x")
            return [0]
    """))
    with IsolatedPolicy(str(path)) as policy:
        result = run_episode(policy, world, on_error="record")
    assert result.error is not None and "PermissionError" in result.error, result.error


def test_a_file_whose_imports_outgrow_the_limit_is_said_to_be_out_of_memory(tmp_path: Path) -> None:
    # torch's threads cannot get their memory under 512 MB: the loader's "cannot allocate memory
    # for thread-local data" was read as a plain crash, with no word of the limit
    pytest.importorskip("torch")
    path = tmp_path / "uses_torch.py"
    path.write_text("import torch\n\ndef act(view):\n    return []\n")
    with pytest.raises(PolicyMemoryError, match="limit 512 MB"):
        IsolatedPolicy(str(path), memory_mb=512).close()


def test_memory_mb_gives_a_file_that_imports_torch_the_memory_it_needs(tmp_path: Path, capsys: Any) -> None:
    pytest.importorskip("torch")
    path = tmp_path / "uses_torch.py"
    path.write_text("import torch\n\ndef act(view):\n    return [] if view.attempts else [0]\n")
    assert cli_main(["replay", "sd-fixed-s0", "--policy", str(path)]) == 2
    assert "limit 512 MB, raised by --memory-mb or memory_mb=" in capsys.readouterr().err
    assert cli_main(["replay", "sd-fixed-s0", "--policy", str(path), "--memory-mb", "1536"]) == 0
    assert "attempts N = 1 " in capsys.readouterr().out
    with pytest.raises(SystemExit):  # argparse's refusal, naming the option
        cli_main(["replay", "sd-fixed-s0", "--policy", str(path), "--memory-mb", "0"])
    assert "argument --memory-mb: must be at least 32 (a policy process needs about 24 MB to start), got 0" in (
        capsys.readouterr().err)


def test_memory_bomb(world: World, good: IsolatedPolicy, reference: Any) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    policy, result = _hostile("memory_bomb.py", world, memory_mb=300)
    with policy:
        assert result.error.startswith("PolicyMemoryError: ") and "300 MB" in result.error
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 100  # the bomb went off in the child, not here
    _assert_good_still_works(good, world, reference)


def test_raises(world: World, good: IsolatedPolicy, reference: Any) -> None:
    policy, result = _hostile("raises.py", world)
    with policy:
        assert result.error.startswith("PolicyException: ")
        assert "ValueError: boom at round 0" in result.error and "raises.py line 5, in helper" in result.error
    _assert_good_still_works(good, world, reference)


def test_a_connection_is_refused_as_the_network_not_as_a_missing_codec(world: World, tmp_path: Path) -> None:
    """socket.create_connection looks up the idna codec when first called; an episode could not
    import it, and the policy (and the LLM told of its error) read "unknown encoding: idna"."""
    path = tmp_path / "net.py"
    path.write_text("import socket\n\n\ndef act(view):\n    socket.create_connection(('127.0.0.1', 9), 1)\n"
                    "    return []\n")
    with IsolatedPolicy(path, **FAST) as policy:
        result = run_episode(policy, world, seed=0, beta=0.5, on_error="record")
    assert result.error is not None and "idna" not in result.error
    assert "PermissionError: [Errno 1] an isolated policy may not use socket.getaddrinfo" in result.error


def test_illegal_ids(world: World, good: IsolatedPolicy, reference: Any) -> None:
    policy, result = _hostile("illegal_ids.py", world)
    with policy:
        assert result.error.startswith("IllegalBatchError: ") and "1001" in result.error
    _assert_good_still_works(good, world, reference)


@pytest.mark.parametrize("name, returned", [("returns_none.py", "None"), ("returns_string.py", "str")])
def test_returns_garbage(name: str, returned: str, world: World, good: IsolatedPolicy, reference: Any) -> None:
    policy, result = _hostile(name, world)
    with policy:
        assert result.error.startswith("PolicyProtocolError: ") and f"policy returned {returned}" in result.error
    _assert_good_still_works(good, world, reference)


def test_prints_megabytes(world: World, good: IsolatedPolicy, reference: Any) -> None:
    policy, result = _hostile("prints_megabytes.py", world, max_output_bytes=1 << 20)
    with policy:
        assert result.error.startswith("PolicyOutputError: ") and "printed more than 1048576 bytes" in result.error
        assert len(policy.output_tail("stdout")) <= 2000
    _assert_good_still_works(good, world, reference)


def test_chatty_policy_cannot_block_the_parent(world: World) -> None:
    policy, result = _hostile("chatty.py", world, max_output_bytes=8 << 20, decision_timeout_s=5.0)
    with policy:
        assert result.error is None and result.rounds == 4  # 4 batches of 300 kB each
        assert policy.output_tail("stdout").rstrip().endswith("chatter")


def test_crash_reports_exit_code_and_stderr(world: World, good: IsolatedPolicy, reference: Any) -> None:
    policy = IsolatedPolicy(HOSTILE / "crashes.py", **FAST)
    with policy:
        policy.reset(RunContext.from_view(ReplaySession(world).view()))
        with pytest.raises(PolicyCrashed) as info:
            policy.act(ReplaySession(world).view())
        assert info.value.exit_code == 3 and "LAST-WORDS-5512" in info.value.stderr_tail
        assert "exit code 3" in str(info.value) and "LAST-WORDS-5512" in str(info.value)
        result = run_episode(policy, world, on_error="record")
        assert result.error is not None and result.error.startswith("PolicyCrashed: ")
    _assert_good_still_works(good, world, reference)


def test_sleeps_past_episode_budget(world: World, good: IsolatedPolicy, reference: Any) -> None:
    policy, result = _hostile("sleeps_past_budget.py", world, decision_timeout_s=1.0, episode_timeout_s=1.0)
    with policy:
        assert result.error.startswith("PolicyTimeout: ") and "episode time budget of 1s" in result.error
        assert result.rounds >= 1  # it did make progress before the budget ran out
    _assert_good_still_works(good, world, reference)


def test_fork_refused_when_hardened(world: World, good: IsolatedPolicy, reference: Any) -> None:
    policy, result = _hostile("forks_child.py", world)
    with policy:
        assert result.error.startswith("PolicyException: ") and "may not use os.fork" in result.error
    _assert_good_still_works(good, world, reference)


def test_fork_refused_by_the_kernel_without_the_audit_hook(world: World) -> None:
    policy, result = _hostile("forks_child.py", world, harden=False)
    with policy:
        assert result.error.startswith("PolicyException: ")
        assert "PermissionError: [Errno 1] Operation not permitted (at forks_child.py line 9" in result.error


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_forked_grandchild_dies_with_the_group(world: World, good: IsolatedPolicy, reference: Any) -> None:
    """Even with no sandbox at all (the explicit opt-out), what a policy forks dies with it."""
    policy, result = _hostile("forks_child.py", world, harden=False, unsafe_no_sandbox=True)
    with policy:
        assert result.error.startswith("PolicyException: ") and "FORKED=" in result.error
        grandchild = int(re.search(r"FORKED=(\d+)", result.error).group(1))  # type: ignore[union-attr]
        assert _alive(grandchild)
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)  # closing the policy killed its process group
    _assert_good_still_works(good, world, reference)


# -- spies --------------------------------------------------------------------------------------
def test_spy_environ_finds_no_secrets(world: World, good: IsolatedPolicy, reference: Any,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    control = run_episode(load_policy(HOSTILE / "spy_environ.py", isolate=False), world, on_error="record")
    assert {f"env:{name}" for name in SECRETS} <= set(_found(control.error))  # the spy can see
    policy, result = _hostile("spy_environ.py", world)
    with policy:
        assert _found(result.error) == []
    _assert_good_still_works(good, world, reference)


@pytest.mark.slow
def test_spy_memory_finds_no_world(world: World, good: IsolatedPolicy, reference: Any) -> None:
    control = run_episode(load_policy(HOSTILE / "spy_memory.py", isolate=False), world, on_error="record")
    assert {"gc:World", "gc:ReplaySession"} <= set(_found(control.error))
    for harden in (True, False):  # the process boundary alone already hides the world
        policy, result = _hostile("spy_memory.py", world, harden=harden)
        with policy:
            assert _found(result.error) == []
    _assert_good_still_works(good, world, reference)


def test_spy_parent_finds_nothing(world: World, good: IsolatedPolicy, reference: Any) -> None:
    policy, result = _hostile("spy_parent.py", world)
    with policy:
        assert _found(result.error) == []
    _assert_good_still_works(good, world, reference)


def test_spy_parent_finds_nothing_without_the_audit_hook(world: World) -> None:
    policy, result = _hostile("spy_parent.py", world, harden=False)
    with policy:
        assert _found(result.error) == []


@pytest.mark.slow
def test_spy_parent_control_without_sandbox(world: World) -> None:
    """Without the sandbox (the explicit opt-out) the same spy gets into its parent: the tests
    above do not pass by accident."""
    policy, result = _hostile("spy_parent.py", world, harden=False, unsafe_no_sandbox=True, decision_timeout_s=30.0)
    with policy:
        found = _found(result.error)
    assert "read /proc/<ppid>/environ" in found and "may signal the parent" in found


def test_spy_disk_finds_no_world_file(world: World, good: IsolatedPolicy, reference: Any,
                                      short_tmp_path: Path) -> None:
    scratch = short_tmp_path  # in /tmp, where the spy looks
    folder = write_world(scratch / "world-on-disk", _meta(), _records())
    control = run_episode(load_policy(HOSTILE / "spy_disk.py", isolate=False), world, on_error="record")
    assert str(folder / "nodes.jsonl") in _found(control.error)
    policy, result = _hostile("spy_disk.py", world)
    with policy:
        assert _found(result.error) == []
    _assert_good_still_works(good, world, reference)


def test_runs_with_make_policy_names(world: World) -> None:
    """A built-in run isolated keeps its name (EpisodeResult.policy)."""
    with load_policy("greedy", isolate=True, **FAST) as policy:  # type: ignore[attr-defined]
        assert policy.name == make_policy("greedy").name  # type: ignore[attr-defined]
        result = run_episode(policy, world, on_error="record")
        assert result.policy == "greedy" and result.error is None


def test_protocol_violation_from_child(tmp_path: Path, world: World, good: IsolatedPolicy, reference: Any) -> None:
    """A policy writing garbage straight into the protocol pipe gets a protocol error."""
    forger = tmp_path / "forger.py"
    forger.write_text(
        "import os\n"
        "def act(view):\n"
        "    for fd in range(3, 1024):\n"
        "        try:\n"
        "            os.write(fd, b'\\x00\\x00\\x00\\x05hello')\n"
        "        except OSError:\n"
        "            pass\n"
        "    return [0]\n"
    )
    with IsolatedPolicy(forger, **FAST) as policy:
        result = run_episode(policy, world, on_error="record")
        assert result.error is not None and result.error.startswith("PolicyProtocolError: ")
    _assert_good_still_works(good, world, reference)
    assert isinstance(PolicyException("x"), RuntimeError) and issubclass(PolicyProtocolError, RuntimeError)


def test_a_load_error_longer_than_a_control_packet_is_cut_not_lost(tmp_path: Path) -> None:
    """The template reports a load error in one packet of its control socket: a file whose
    import raises a 300 kB message still comes back as the file's load error."""
    broken = tmp_path / "long_message.py"
    broken.write_text("raise ValueError('x' * 300_000)\n")
    with pytest.raises(PolicyLoadError, match=r"ValueError: x+\.\.\. \[cut: \d+ characters in all\]"):
        IsolatedPolicy(broken, **FAST)


def test_replay_show_output_shows_what_a_policy_file_printed_escaped(tmp_path: Path, capsys: Any) -> None:
    # run isolated, a file's prints went nowhere: no way to debug it from the command line
    path = tmp_path / "talky.py"
    path.write_text("import sys\n\ndef act(view):\n    print(f'round {view.rounds}')\n"
                    "    print('\\x1b[31mred\\x1b[0m', file=sys.stderr)\n    return [0] if view.rounds < 2 else []\n")
    assert cli_main(["replay", "sd-fixed-s0", "-p", str(path), "--show-output"]) == 0
    err = capsys.readouterr().err
    assert "policy stdout (its last 8 KB):\n  | round 0\n  | round 1\n  | round 2\n" in err
    assert "policy stderr (its last 8 KB):\n  | \\x1b[31mred\\x1b[0m\n" in err and "\x1b" not in err
    assert cli_main(["replay", "sd-fixed-s0", "-p", str(path)]) == 0
    assert "round 0" not in capsys.readouterr().err


def test_an_error_names_the_file_not_only_the_name_the_file_gives_itself(tmp_path: Path) -> None:
    """A file whose policy calls itself "greedy" had its errors read as the built-in's
    (``policy greedy raised in act()``), in results, journals and the developer's prompt."""
    path = tmp_path / "forge.py"
    path.write_text("class Policy:\n    name = 'greedy'\n    def reset(self, context):\n        pass\n"
                    "    def act(self, view):\n        raise RuntimeError('boom')\n")
    with IsolatedPolicy(path, **FAST) as policy:
        error = run_episode(policy, "sd-fixed-s0", on_error="record").error
    assert error is not None and "policy forge (named 'greedy') raised in act(): RuntimeError: boom" in error
    hangs = tmp_path / "hangs.py"  # a template started again after each timeout: the name is said once
    hangs.write_text("class Policy:\n    name = 'greedy'\n    def reset(self, context):\n        pass\n"
                     "    def act(self, view):\n        while True:\n            pass\n")
    with IsolatedPolicy(hangs, **{**FAST, "decision_timeout_s": 0.5}) as policy:
        errors = [run_episode(policy, "sd-fixed-s0", on_error="record").error for _ in range(3)]
    assert all(e is not None and "policy hangs (named 'greedy')" in e and e.count("(named") == 1 for e in errors), errors
    assert policy.starts == 3


def test_module_colon_class_of_a_file_in_this_folder_says_how_to_run_it(tmp_path: Path) -> None:
    # the console script does not import from the current folder: "no module 'mypol'" and no more
    (tmp_path / "mypol.py").write_text("def act(view):\n    return []\n")
    script = Path(sys.executable).with_name("dream-gym")
    done = subprocess.run([str(script), "replay", "sd-fixed-s0", "-p", "mypol:act"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().endswith("mypol.py is in this folder: give the file (mypol.py) to run it isolated, or "
                                        "put this folder on PYTHONPATH to import it as trusted code"), done.stderr
