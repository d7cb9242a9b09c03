"""A policy's parameters (``--policy-arg KEY=VALUE``, ``load_policy(spec, params=...)``) are
checked against its constructor before anything runs or is written: a misspelt name or a word
where a number belongs is one error naming the parameter and the ones the policy takes, not a
TypeError's traceback from the middle of a run whose folder is already made; a policy file,
whose policy its own ``make_policy()`` builds, refuses parameters instead of ignoring them.
``replay`` takes them as ``grow`` and ``deploy`` do."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dream_gym.cli import main as cli_main
from dream_gym.policies import GreedyPolicy, make_policy
from dream_gym.policy import run_episode
from dream_gym.policy_files import load_policy
from dream_gym.policy_files.specs import PolicySpec
from dream_gym.replay.session import ReplaySession
from dream_gym.world.registry import resolve_world
from tests.test_cli_truth import dream_gym

WORLD = "cp26-fixed-w4-s0"
GOOD = "from dream_gym.policies import GreedyPolicy\n\n\ndef make_policy():\n    return GreedyPolicy()\n"


@pytest.mark.parametrize(("spec", "params", "message"), [
    ("greedy", {"patiance": 3}, "policy 'greedy' takes no parameter 'patiance'; its parameters: min_branches, patience"),
    ("greedy", {"patience": "x"}, "policy 'greedy': patience must be int, got 'x'"),
    ("greedy", {"patience": 2.5}, "policy 'greedy': patience must be int, got 2.5"),
    ("greedy", {"patience": True}, "policy 'greedy': patience must be int, got True"),
    ("random", {"p_stop": "often"}, "policy 'random': p_stop must be float, got 'often'"),
    ("hyperband", {"eta": 2.0}, "policy 'hyperband': eta must be int, got 2.0"),
    ("dream_gym.policies:UCBPolicy", {"C": 1.0},
     "policy 'dream_gym.policies:UCBPolicy' takes no parameter 'C'; its parameters: c, rounds, patience"),
])
def test_a_parameter_the_policy_does_not_take_is_refused_by_name(spec: str, params: dict, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        load_policy(spec, params=params)
    assert str(refused.value) == message


def test_parameters_of_the_right_kind_reach_the_policy() -> None:
    greedy = make_policy("greedy", patience=100, min_branches=None)
    assert (greedy.patience, greedy.min_branches) == (100, None)
    assert make_policy("ucb", c=2).c == 2  # an int where a float is annotated
    assert make_policy("coverage", deepen="0.1,0.5").deepen == (0.1, 0.5)  # a str where the annotation admits one
    assert load_policy("dream_gym.policies:GreedyPolicy", params={"patience": 7}).patience == 7


def test_a_policy_file_refuses_parameters_instead_of_ignoring_them(tmp_path: Path) -> None:
    path = tmp_path / "mine.py"
    path.write_text(GOOD)
    with pytest.raises(ValueError, match="parameters cannot be passed to a file's policy"):
        load_policy(str(path), params={"patience": 100})


def test_replay_takes_policy_args_as_the_library_does() -> None:
    shown = dream_gym("replay", WORLD, "--policy", "greedy", "--policy-arg", "patience=100", "--json")
    assert shown.returncode == 0, shown.stderr
    by_cli = json.loads(shown.stdout)
    patient = run_episode(GreedyPolicy(patience=100), ReplaySession(resolve_world(WORLD)))
    default = run_episode(GreedyPolicy(), ReplaySession(resolve_world(WORLD)))
    assert (by_cli["replay_score"], by_cli["attempts"]) == (patient.replay_score, patient.attempts)
    assert (patient.replay_score, patient.attempts) != (default.replay_score, default.attempts)  # the arg matters
    said = dream_gym("replay", WORLD, "--policy", "greedy", "--policy-arg", "patience=100")
    assert said.stdout.startswith(f"world {WORLD}  policy greedy (patience=100)  beta 0.5"), said.stdout


def refused_once(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    """``dream-gym argv`` (in this process: the refusal comes before any run) exits 2 with one line."""
    assert cli_main(argv) == 2
    assert capsys.readouterr().err.strip() == f"dream-gym {argv[0]}: error: {message}"


@pytest.mark.parametrize(("args", "message"), [
    (["--policy", "greedy", "--policy-arg", "patiance=3"],
     "policy 'greedy' takes no parameter 'patiance'; its parameters: min_branches, patience"),
    (["--policy", "greedy", "--policy-arg", "patience=x"], "policy 'greedy': patience must be int, got 'x'"),
    # the default policy is a trained model: a built-in's parameter was a traceback (exit 1)
    (["--policy-arg", "patience=10"], "policy 'recommended (cv-node-v)' is a trained model, which takes no "
                                      "parameter 'patience'; its parameter: deterministic (true or false)"),
])
def test_grow_refuses_a_bad_policy_arg_before_it_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       args: list[str], message: str) -> None:
    out = tmp_path / "grown"
    refused_once(capsys, ["grow", "--task", "sum-difference", "--agent", "builtin", "-W", "2", "--rounds", "2",
                          "--out", str(out), *args], message)
    assert not out.exists()


@pytest.mark.parametrize(("policy", "message"), [
    ("greedy", "policy 'greedy': patience must be int, got 'x'"),
    ("native", "policy parameters (patience) apply to a dream_gym policy; 'native' is the system's own selection"),
])
def test_deploy_refuses_a_bad_policy_arg_before_it_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         policy: str, message: str) -> None:
    pytest.importorskip("openevolve")
    out = tmp_path / "run"
    refused_once(capsys, ["deploy", "--system", "openevolve", "--task", "circle-packing-26", "--policy", policy,
                          "--policy-arg", "patience=x", "-W", "2", "--budget", "4", "--out", str(out)], message)
    assert not out.exists()  # so the corrected command is not refused as "already holds a world"


def test_deploy_refuses_parameters_for_a_policy_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("openevolve")
    path, out = tmp_path / "mine.py", tmp_path / "run"
    path.write_text(GOOD)
    refused_once(capsys, ["deploy", "--system", "openevolve", "--task", "circle-packing-26", "--policy", str(path),
                          "--policy-arg", "patience=3", "-W", "2", "--budget", "4", "--out", str(out)],
                 f"policy file {path}: parameters cannot be passed to a file's policy")
    assert not out.exists()


def test_values_a_command_line_cannot_give_are_left_to_the_policy() -> None:
    assert make_policy("coverage", deepen=[0.2, 0.4]).deepen == (0.2, 0.4)  # a list where a tuple is annotated


@pytest.mark.parametrize(("name", "params", "message"), [
    ("greedy", {"patience": -5}, "patience must be at least 1, got -5"),
    ("greedy", {"min_branches": 0}, "min_branches must be at least 1, got 0"),
    ("ucb", {"rounds": 0}, "rounds must be at least 1, got 0"),
    ("ucb", {"c": float("nan")}, "c must be at least 0, got nan"),
    ("random", {"p_stop": 1.5}, "p_stop must be in [0, 1], got 1.5"),
    ("fixed", {"depth": 0}, "depth must be at least 1, got 0"),  # 0 was read as "the default"
    ("openevolve", {"elite_ratio": -0.1}, "elite_ratio must be in [0, 1], got -0.1"),
])
def test_a_parameter_outside_its_range_is_refused_naming_it(name: str, params: dict[str, float], message: str) -> None:
    # patience=-5 replayed as an episode of no attempt, exit 0
    with pytest.raises(ValueError, match=re.escape(message)):
        make_policy(name, **params)


SYSTEM_PACKAGES = {"openevolve": "openevolve", "shinkaevolve": "shinka", "skydiscover": "skydiscover"}


@pytest.mark.parametrize("system", sorted(SYSTEM_PACKAGES))
@pytest.mark.parametrize(("args", "message"), [
    # (--beta 1.5 and nan: refused by argparse naming the option, tests/test_cli_naming.py)
    (["--policy", "gredy"], "unknown policy 'gredy'; did you mean 'greedy'? (built-ins: coverage, fixed, greedy, "
                            "hyperband, openevolve, puct, random, shinka, stagnation, ucb; shipped models: cv-node-v, "
                            "ppo-macro-v, ppo-options, ppo-options-v; recommended; or module:Class, a .py policy file "
                            "or a model .zip)"),
    (["--policy", "{missing}"], "policy file {missing} does not exist"),
    (["--policy", "{broken}"],
     "policy broken: loading failed in the isolated process: SyntaxError: invalid syntax (broken.py, line 1)"),
    # the model's own refusal came at its first decision, after the world's root was written
    (["--policy", "{model_w3}"],
     "model model_w3 was trained on the replay env at W = 3; it cannot play at W = 2 (run it with -W 3)"),
])
def test_deploy_refuses_a_policy_that_cannot_run_before_it_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 system: str, args: list[str], message: str) -> None:
    # Found by trying: each of these used to make the world folder (and start the system) before
    # failing, and the corrected command was then refused as "already holds a world".
    pytest.importorskip(SYSTEM_PACKAGES[system])
    out, broken, missing = tmp_path / "run", tmp_path / "broken.py", tmp_path / "missing.py"
    broken.write_text("def make_policy(:\n")
    paths = {"{broken}": str(broken), "{missing}": str(missing), "{model_w3}": str(tmp_path / "model_w3.zip")}
    if "{model_w3}" in args:
        _model_at_w3(tmp_path / "model_w3.zip")
    refused_once(capsys, ["deploy", "--system", system, "--task", "circle-packing-26",
                          *(paths.get(arg, arg) for arg in args), "-W", "2", "--budget", "4", "--out", str(out)],
                 message.replace("{missing}", str(missing)))
    assert not out.exists()


def _model_at_w3(path: Path) -> None:
    """An (untrained) MaskablePPO zip of the replay env at W = 3."""
    import random

    import gymnasium as gym
    from sb3_contrib import MaskablePPO
    from worldgen import make_world, random_records

    world = make_world(random_records(random.Random(1), 10), world_id="w3", workers=3)
    MaskablePPO("MultiInputPolicy", gym.make("DreamGym/Replay-v1", world=world, max_nodes=40), n_steps=64, seed=0,
                device="cpu").save(path)


def test_a_misspelt_policy_file_gets_the_file_beside_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # compared by file name: the folder every candidate shares once made any file there look close
    for name in ("mine.py", "broken.py"):
        (tmp_path / name).write_text(GOOD)
    command = ["deploy", "--system", "openevolve", "--task", "circle-packing-26", "-W", "2", "--budget", "4",
               "--out", str(tmp_path / "run"), "--policy"]
    refused_once(capsys, [*command, str(tmp_path / "mien.py")],
                 f"policy file {tmp_path / 'mien.py'} does not exist; did you mean '{tmp_path / 'mine.py'}'?")
    refused_once(capsys, [*command, str(tmp_path / "qqqq.py")], f"policy file {tmp_path / 'qqqq.py'} does not exist")
    # and without the ".py" they all share: missing.py was crashing.py's near name
    (tmp_path / "crashing.py").write_text(GOOD)
    refused_once(capsys, [*command, str(tmp_path / "missing.py")],
                 f"policy file {tmp_path / 'missing.py'} does not exist")
    assert not (tmp_path / "run").exists()


# -- parameters written in the spec: greedy(patience=10) -----------------------------------------
def test_a_spec_carries_its_parameters_and_labels_the_policy_with_them() -> None:
    policy = load_policy("greedy( patience = 10, min_branches=2 )")
    assert (type(policy), policy.patience, policy.min_branches) == (GreedyPolicy, 10, 2)
    assert policy.name == "greedy( patience = 10, min_branches=2 )"  # results name it as the user wrote it
    assert load_policy("dream_gym.policies:UCBPolicy(c=0.5)").c == 0.5
    assert load_policy("random(p_stop=0.25)").p_stop == 0.25  # a decimal number
    assert load_policy("greedy()").patience is None  # no parameters: the defaults
    widened = load_policy("coverage(deepen=0.3,1, widen=0,0.2)")  # a value may hold commas
    assert (widened.deepen, widened.widen) == (make_policy("coverage", deepen="0.3,1").deepen,
                                               make_policy("coverage", widen="0,0.2").widen)
    # --policy-arg and the spec together: the same key with another value is refused
    assert load_policy("greedy(patience=10)", params={"min_branches": 3}).min_branches == 3
    with pytest.raises(ValueError, match=re.escape("policy 'greedy(patience=10)': patience is given twice "
                                                   "(10 in the spec, 3 as a parameter)")):
        load_policy("greedy(patience=10)", params={"patience": 3})


@pytest.mark.parametrize(("spec", "message"), [
    ("greedy(patience)", "policy 'greedy(patience)': parameters are KEY=VALUE pairs separated by commas, as in "
                         "greedy(patience=10); 'patience' is not one"),
    ("greedy(patience=1, patience=2)", "policy 'greedy(patience=1, patience=2)': patience is given twice"),
    ("greedy(patiance=3)", "policy 'greedy' takes no parameter 'patiance'; its parameters: min_branches, patience"),
    ("greedy(patience=x)", "policy 'greedy': patience must be int, got 'x'"),
    ("dream_gym.policies:UCBPolicy(C=1)", "policy 'dream_gym.policies:UCBPolicy(C=1)': got an unexpected keyword "
                                          "argument 'C'"),
])
def test_a_spec_whose_parameters_cannot_be_built_is_refused_before_any_episode(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, message: str) -> None:
    out = tmp_path / "results.jsonl"
    refused_once(capsys, ["eval", "-p", "greedy", "-p", spec, "--worlds", WORLD, "--betas", "0.5",
                          "--out", str(out)], message)
    assert not out.exists()


def test_eval_compares_one_policy_at_two_settings(tmp_path: Path) -> None:
    """The spec with its parameters is the policy's label: two settings of greedy are two rows,
    each with the episode the policy built with those parameters plays."""
    out = tmp_path / "results.jsonl"
    shown = dream_gym("eval", "-p", "greedy(patience=100)", "-p", "greedy", "--worlds", WORLD, "--betas", "0.5",
                      "--out", str(out), "--no-progress")
    assert shown.returncode == 0, shown.stderr
    rows = {row["policy"]: row for row in map(json.loads, out.read_text().splitlines())}
    patient = run_episode(GreedyPolicy(patience=100), ReplaySession(resolve_world(WORLD), beta=0.5))
    default = run_episode(GreedyPolicy(), ReplaySession(resolve_world(WORLD), beta=0.5))
    assert (rows["greedy(patience=100)"]["replay_score"], rows["greedy(patience=100)"]["attempts"]) == (
        patient.replay_score, patient.attempts)
    assert (rows["greedy"]["replay_score"], rows["greedy"]["attempts"]) == (default.replay_score, default.attempts)
    assert patient.attempts != default.attempts


def test_a_path_is_a_file_whatever_its_name_and_a_file_takes_no_parameters(tmp_path: Path) -> None:
    odd = tmp_path / "policy(patience=3)"  # a file whose name ends in parentheses
    odd.write_text(GOOD)
    for path in (tmp_path / "runs(1)" / "mine.py", odd):
        spec = PolicySpec.of(str(path))
        assert (spec.kind, spec.name, spec.params) == ("file", str(path), ())
    with pytest.raises(LookupError, match="parameters cannot be passed to a file's policy"):
        PolicySpec.of(str(tmp_path / "other(patience=3)"))
    with pytest.raises(LookupError, match=re.escape("policy 'mine.py(patience=3)': parameters cannot be passed to a "
                                                    "file's policy")):
        PolicySpec.of("mine.py(patience=3)")


def test_a_model_takes_its_flag_in_the_spec_and_false_means_false() -> None:
    """``deterministic=false`` from a command line was the text 'false', which is true: the model
    acted on its most likely action when told to sample."""
    spec = PolicySpec.of("ppo-options-v(deterministic=false)")
    assert (spec.kind, spec.name, spec.params) == ("model", "ppo-options-v", (("deterministic", "false"),))
    assert load_policy("ppo-options-v(deterministic=false)").deterministic is False
    assert load_policy("ppo-options-v", params={"deterministic": "false"}).deterministic is False
    assert load_policy("ppo-options-v", params={"deterministic": "True"}).deterministic is True
    with pytest.raises(ValueError, match=re.escape("deterministic must be true or false, got 'maybe'")):
        PolicySpec.of("ppo-options-v(deterministic=maybe)").check()
    with pytest.raises(ValueError, match="is a trained model, which takes no parameter 'patience'"):
        PolicySpec.of("recommended(patience=3)").check()  # recommended names a model


@pytest.mark.parametrize(("spec", "params"), [
    ("greedy(patience=3,)", {"patience": 3}),  # a trailing comma
    ("greedy()", {}),
    ("ucb(c=inf)", {"c": float("inf")}),
])
def test_specs_a_user_may_write(spec: str, params: dict) -> None:
    assert dict(PolicySpec.of(spec).params) == params


def test_a_key_python_cannot_name_is_refused() -> None:
    with pytest.raises(LookupError, match="'if=3' is not one"):
        PolicySpec.of("greedy(if=3)")


def test_dreaming_starts_from_a_built_in_with_its_parameters() -> None:
    from dream_gym.dream.versions import incumbent_source

    text, reference = incumbent_source("greedy(patience=10)")
    namespace: dict[str, object] = {}
    exec(compile(text, "incumbent.py", "exec"), namespace)  # the wrapper file of version 0
    built = namespace["make_policy"]()  # type: ignore[operator]
    assert (type(built), built.patience) == (GreedyPolicy, 10) and "class GreedyPolicy" in reference
    assert text.startswith("\"\"\"Version 0: the built-in policy 'greedy(patience=10)' (")
    # a value is the user's text: quotes and line breaks stay inside the wrapper's docstring
    text, _ = incumbent_source('coverage(deepen=x"""\nimport os\nos.system)')
    namespace = {}
    exec(compile(text, "incumbent.py", "exec"), namespace)
    assert "os" not in namespace and text.splitlines()[0].endswith('like every version."""')
    text, _ = incumbent_source("ucb(c=inf)")  # a value with no literal of its own
    namespace = {}
    exec(compile(text, "incumbent.py", "exec"), namespace)
    assert namespace["make_policy"]().c == float("inf")  # type: ignore[operator]


def test_a_run_resumes_with_its_parameters_written_either_way(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """greedy(patience=2) and greedy with --policy-arg patience=2 are one run: either resumes it;
    another value is refused naming both."""
    out = tmp_path / "grown"
    grow = ["grow", "--task", "sum-difference", "--agent", "builtin", "-W", "2", "--rounds", "1", "--seed", "0",
            "--quiet", "--out", str(out)]
    assert cli_main([*grow, "--policy", "greedy(patience=2)"]) == 0
    grow[grow.index("1")] = "2"  # one more round
    assert cli_main([*grow, "--policy", "greedy", "--policy-arg", "patience=2", "--resume"]) == 0
    capsys.readouterr()
    assert cli_main([*grow, "--policy", "greedy(patience=3)", "--resume"]) == 2
    assert "policy_params {'patience': 2}, not {'patience': 3}" in capsys.readouterr().err
