"""Model zips load as data: nothing pickled in a stable-baselines3 zip runs unless the user passes
--trust-model (dream_gym.rl.model_zips).

Each hostile zip here is a shipped zip with one entry changed to something that acts when SB3's
own loader reads it (a pickle that writes a marker file, a reference that imports a planted
module, an "env" entry that makes SB3 build an env from a planted module, a weight set outside
the policy's weights). Each attack is refused as data, by name and with nothing run, and the
control loads the same zip trusted and shows the attack does act. Shipped zips load as data and
act exactly as when loaded trusted; a resumed training run reads its own folder's checkpoint only.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import shutil
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dream_gym.cli import main
from tests.test_evaluate import make_world

pytest.importorskip("sb3_contrib")

REPO = Path(__file__).resolve().parents[1]
SHIPPED = [*sorted((REPO / "agents" / "models").glob("*.zip")), *sorted((REPO / "tests" / "data" / "models").glob("*.zip"))]
OPTIONS_ZIP = REPO / "agents" / "models" / "ppo-options.zip"
MACRO_ZIP = REPO / "tests" / "data" / "models" / "ppo-macro.zip"
MASKABLE = ("sb3_contrib.common.maskable.policies", "MaskableActorCriticPolicy")


class _WritesMarker:
    """Pickles to ``eval`` of a list whose first item writes a line to ``marker`` and whose
    second is ``result`` (an expression): unpickling it runs code, then gives the real value."""

    def __init__(self, marker: Path, result: str):
        self.marker, self.result = marker, result

    def __reduce__(self) -> tuple[Any, ...]:
        return eval, (f"[open({str(self.marker)!r}, 'a').write('ran\\n'), {self.result}][1]",)


def _serialized(payload: bytes, kind: str) -> dict[str, str]:
    return {":type:": kind, ":serialized:": base64.b64encode(payload).decode()}


def _class_expression(module: str, name: str) -> str:
    return f"getattr(__import__({module!r}, fromlist=['_']), {name!r})"


def rewrite_zip(source: Path, target: Path, change: Callable[[dict[str, Any]], None] | None = None,
                files: dict[str, bytes] | None = None) -> Path:
    """A copy of the zip ``source`` at ``target``: its data passed through ``change``, ``files`` set."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for item in old.infolist():
            raw = old.read(item.filename)
            if item.filename == "data" and change is not None:
                data = json.loads(raw)
                change(data)
                raw = json.dumps(data).encode()
            if item.filename not in (files or {}):
                new.writestr(item, raw)
        for name, raw in (files or {}).items():
            new.writestr(name, raw)
    return target


def evil_policy_class(source: Path, target: Path, marker: Path, real: tuple[str, str] = MASKABLE) -> Path:
    """``source`` with a policy_class whose unpickling writes ``marker``, then gives the real class."""
    payload = pickle.dumps(_WritesMarker(marker, _class_expression(*real)))

    def change(data: dict[str, Any]) -> None:
        data["policy_class"] = _serialized(payload, "<class 'abc.ABCMeta'>") | {"__module__": real[0]}

    return rewrite_zip(source, target, change)


def planted_module(folder: Path, marker: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module of a fresh name in ``folder`` (put on sys.path) that writes ``marker`` when imported."""
    name = f"planted_{uuid.uuid4().hex[:10]}"
    (folder / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write('imported\\n')\n{body}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_world(tmp_path_factory.mktemp("zip-world") / "w0", 30, 0)


# -- the attack of the report, through the real CLI ---------------------------------------------


def test_eval_refuses_a_zip_whose_policy_class_runs_code_and_runs_it_only_with_trust_model(
        world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "ran.txt"
    evil = evil_policy_class(OPTIONS_ZIP, tmp_path / "evil.zip", marker)
    refused = subprocess.run([sys.executable, "-m", "dream_gym", "eval", "--policy", str(evil), "--worlds", str(world),
                              "--betas", "0.5", "--no-progress"], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2, refused.stderr
    assert "its data entry 'policy_class' is not a plain reference to a class" in refused.stderr
    assert "--trust-model" in refused.stderr and refused.stderr.count("error:") == 1
    assert not marker.exists()  # nothing in the zip ran

    options = ["--worlds", str(world), "--betas", "0.2,0.8", "--no-progress", "--backend", "serial",
               "--task-timeout", "0", "--summary"]
    trusted_out, shipped_out = tmp_path / "trusted.jsonl", tmp_path / "shipped.jsonl"
    assert main(["eval", "--policy", str(evil), "--trust-model", "--out", str(trusted_out), *options]) == 0
    assert marker.read_text() == "ran\n"  # the control: trusted, the zip's code runs (once)
    assert main(["eval", "--policy", "ppo-options", "--out", str(shipped_out), *options]) == 0  # as data
    capsys.readouterr()

    def scores(path: Path) -> list[tuple[Any, ...]]:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        return [(r["world"], r["beta"], r["replay_score"], r["attempts"], r["rounds"]) for r in rows]

    assert scores(trusted_out) == scores(shipped_out)  # and it scores as the shipped model does


def test_replay_and_the_library_refuse_it_too_and_trusted_models_opens_only_its_block(
        world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dream_gym.policy_files import load_policy
    from dream_gym.rl import UntrustedModelError, trusted_models

    marker = tmp_path / "ran.txt"
    evil = evil_policy_class(OPTIONS_ZIP, tmp_path / "evil.zip", marker)
    assert main(["replay", str(world), "--policy", str(evil)]) == 2
    assert "'policy_class'" in capsys.readouterr().err and not marker.exists()
    assert main(["grow", "--task", "sum-difference", "--policy", str(evil), "--out", str(tmp_path / "grown")]) == 2
    assert "'policy_class'" in capsys.readouterr().err and not marker.exists()
    with pytest.raises(UntrustedModelError, match="'policy_class'"):
        load_policy(str(evil))
    assert not marker.exists()
    with trusted_models():
        assert load_policy(str(evil)) is not None
    assert marker.read_text() == "ran\n"
    with pytest.raises(UntrustedModelError, match="'policy_class'"):  # the trusted load is not reused
        load_policy(str(evil))
    again = shutil.copyfile(evil, tmp_path / "evil-again.zip")  # a zip this process has not loaded yet
    assert main(["replay", str(world), "--policy", str(again), "--trust-model"]) == 0
    assert marker.read_text() == "ran\n" * 2


def _openevolve_run(evil: Path, out: Path, *options: str) -> int:
    pytest.importorskip("openevolve")
    return main(["openevolve", "run", "--task", "sum-difference", "--policy", str(evil), "--iterations", "1",
                 "--out", str(out), *options])


def test_openevolve_run_refuses_it_before_it_makes_its_folder(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "ran.txt"
    evil = evil_policy_class(OPTIONS_ZIP, tmp_path / "evil.zip", marker)
    assert _openevolve_run(evil, tmp_path / "run") == 2
    assert "its data entry 'policy_class'" in capsys.readouterr().err
    assert not marker.exists() and not (tmp_path / "run").exists()


def test_openevolve_run_with_trust_model_runs_it(tmp_path: Path) -> None:
    """The control of the test above: trusted, the zip's code runs and the run goes on."""
    marker = tmp_path / "ran.txt"
    evil = evil_policy_class(OPTIONS_ZIP, tmp_path / "evil.zip", marker)
    assert _openevolve_run(evil, tmp_path / "run", "--trust-model") == 0
    assert marker.read_text() == "ran\n" and (tmp_path / "run" / "world.json").is_file()


# -- shipped zips: as data, exactly as trusted ----------------------------------------------------


def _refuse_unpickling(monkeypatch: pytest.MonkeyPatch) -> None:
    import cloudpickle

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("cloudpickle.loads was called")

    monkeypatch.setattr(cloudpickle, "loads", refuse)  # what SB3's loader unpickles data entries with


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_zip_loads_without_unpickling_and_acts_as_when_trusted(path: Path, world: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from dream_gym.rl.sb3 import load_model

    with monkeypatch.context() as patched:
        _refuse_unpickling(patched)
        as_data = load_model(path)
        # the control: trusted, SB3 unpickles (what it raises is named as a zip that does not load)
        with pytest.raises(ValueError, match="does not load with --trust-model: AssertionError: cloudpickle.loads "
                                             "was called"):
            load_model(path, trust_model=True)
    trusted = load_model(path, trust_model=True)
    assert type(as_data) is type(trusted) and as_data.policy_class is trusted.policy_class
    assert as_data.observation_space == trusted.observation_space and as_data.action_space == trusted.action_space
    mine, theirs = as_data.policy.state_dict(), trusted.policy.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert_acts_alike(as_data, trusted, world)


def assert_acts_alike(model: Any, reference: Any, world: Path) -> None:
    """``model``'s policy plays the episodes of ``world`` at β 0.2 and 0.8 as ``reference``'s does:
    no error, the same batches, the same score."""
    from dream_gym.policy import run_episode
    from dream_gym.rl.archs import model_policy
    from dream_gym.world.tree import load_world

    episodes = load_world(world)
    for beta in (0.2, 0.8):
        ours = run_episode(model_policy(model), episodes, seed=0, beta=beta)
        theirs = run_episode(model_policy(reference), episodes, seed=0, beta=beta)
        assert ours.error is None and ours.batches == theirs.batches
        assert ours.replay_score == theirs.replay_score


# -- everything else is refused, by name ------------------------------------------------------------


def _variables() -> tuple[bytes, Any]:
    import torch

    planted = torch.full((10, 64), 7.0)
    buffer = io.BytesIO()
    torch.save({"policy.action_net.weight": planted}, buffer)
    return buffer.getvalue(), planted


def test_an_unknown_pickled_entry_is_refused_and_would_have_run(tmp_path: Path) -> None:
    from dream_gym.rl.model_zips import UntrustedModelError
    from dream_gym.rl.sb3 import load_model

    marker = tmp_path / "ran.txt"
    payload = pickle.dumps(_WritesMarker(marker, "None"))
    for entry in ("surprise", "learning_rate"):  # not an SB3 attribute; an attribute not rebuilt
        zip_path = rewrite_zip(MACRO_ZIP, tmp_path / f"{entry}.zip",
                               lambda data, e=entry: data.__setitem__(e, _serialized(payload, "<class 'float'>")))
        with pytest.raises(UntrustedModelError, match=f"its data entry '{entry}'"):
            load_model(zip_path)
        assert not marker.exists()
    load_model(tmp_path / "surprise.zip", trust_model=True)  # the control: SB3 unpickles every entry
    assert marker.read_text() == "ran\n"


def test_a_policy_class_that_names_a_planted_module_is_refused_without_importing_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dream_gym.rl.model_zips import UntrustedModelError, load_model_zip

    marker = tmp_path / "imported.txt"
    module = planted_module(tmp_path, marker, "from sb3_contrib.common.maskable.policies import "
                                              "MaskableActorCriticPolicy as Policy", monkeypatch)
    reference = f"\x80\x02c{module}\nPolicy\nq\x00.".encode("latin-1")  # GLOBAL module.Policy: a plain reference
    zip_path = rewrite_zip(MACRO_ZIP, tmp_path / "planted.zip", lambda data: data.__setitem__(
        "policy_class", _serialized(reference, "<class 'abc.ABCMeta'>")))
    with pytest.raises(UntrustedModelError, match=f"names {module}.Policy, which is not a policy class"):
        load_model_zip(zip_path)
    assert not marker.exists()
    assert load_model_zip(zip_path, trust=True) is not None  # the control: unpickling imports the module
    assert marker.read_text() == "imported\n"


def test_an_env_entry_is_refused_where_sb3_would_import_its_module(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from dream_gym.rl.model_zips import UntrustedModelError, load_model_zip

    marker = tmp_path / "imported.txt"
    module = planted_module(tmp_path, marker, "", monkeypatch)
    zip_path = rewrite_zip(MACRO_ZIP, tmp_path / "env.zip", lambda data: data.__setitem__("env", f"{module}:Evil-v0"))
    with pytest.raises(UntrustedModelError, match="its data entry 'env' is not an attribute stable-baselines3 saves"):
        load_model_zip(zip_path)
    assert not marker.exists()
    with pytest.raises(Exception, match="Evil"):  # the control: SB3 gym.make()s the env, importing the module
        load_model_zip(zip_path, trust=True)
    assert marker.read_text() == "imported\n"


def test_pytorch_variables_are_refused_where_sb3_would_set_them_over_the_weights(tmp_path: Path) -> None:
    import torch

    from dream_gym.rl.model_zips import UntrustedModelError, load_model_zip

    raw, planted = _variables()
    zip_path = rewrite_zip(MACRO_ZIP, tmp_path / "variables.zip", files={"pytorch_variables.pth": raw})
    with pytest.raises(UntrustedModelError, match=r"pytorch_variables.pth holds \['policy.action_net.weight'\]"):
        load_model_zip(zip_path)
    trusted = load_model_zip(zip_path, trust=True)  # the control: the planted weights replace the trained ones
    assert torch.equal(trusted.policy.action_net.weight, planted)


def test_weights_that_are_a_pickled_program_are_refused_whatever_the_sb3_version(tmp_path: Path) -> None:
    """SB3 2.9 reads a .pth with weights_only=True; SB3 2.3.2 reverted to weights_only=False. The
    check here does not depend on the SB3 that loads next."""
    import torch

    from dream_gym.rl.model_zips import UntrustedModelError, load_model_zip

    marker = tmp_path / "ran.txt"
    with zipfile.ZipFile(MACRO_ZIP) as shipped:
        weights = torch.load(io.BytesIO(shipped.read("policy.pth")), weights_only=True)
    buffer = io.BytesIO()
    torch.save({**weights, "extra": _WritesMarker(marker, "None")}, buffer)
    zip_path = rewrite_zip(MACRO_ZIP, tmp_path / "weights.zip", files={"policy.pth": buffer.getvalue()})
    with pytest.raises(UntrustedModelError, match="its policy.pth is not plain tensors"):
        load_model_zip(zip_path)
    assert not marker.exists()
    torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)  # the control: a loader that unpickles runs it
    assert marker.read_text() == "ran\n"


@pytest.mark.parametrize(("name", "files", "change", "refusal"), [
    ("extra-file", {"payload.pkl": b"\x80\x04N."}, None, "it holds the file 'payload.pkl'"),
    ("policy-kwargs", None, lambda data: data["policy_kwargs"].update(activation_fn="os.system"),
     "its data entry 'policy_kwargs' holds"),
    ("buffer-kwargs", None, lambda data: data.__setitem__("rollout_buffer_kwargs", {"device": "cuda"}),
     "its data entry 'rollout_buffer_kwargs' holds"),
    ("schedule", None, lambda data: data["clip_range"].__setitem__("value_schedule", "LinearSchedule(start=1)"),
     "its data entry 'clip_range' is not a constant schedule"),
    ("space", None, lambda data: data["action_space"].__setitem__(":type:", "<class 'gymnasium.spaces.tuple.Tuple'>"),
     "its data entry 'action_space'"),
])
def test_what_dream_gym_does_not_rebuild_is_refused_by_name(name: str, files: Any, change: Any, refusal: str,
                                                            tmp_path: Path) -> None:
    from dream_gym.rl.model_zips import UntrustedModelError, check_model_zip, load_model_zip

    zip_path = rewrite_zip(MACRO_ZIP, tmp_path / f"{name}.zip", change, files)
    for check in (check_model_zip, load_model_zip):
        with pytest.raises(UntrustedModelError, match=refusal) as refused:
            check(zip_path)
        assert "--trust-model" in str(refused.value)
    assert load_model_zip(rewrite_zip(MACRO_ZIP, tmp_path / "untouched.zip")) is not None  # the control


def test_every_architecture_trains_a_policy_class_a_zip_may_name() -> None:
    from dream_gym.rl.archs import ARCHITECTURES
    from dream_gym.rl.model_zips import POLICY_CLASSES
    from dream_gym.training.trainer import ALGOS, TrainConfig, policy_class

    for arch in ARCHITECTURES:
        for algo in ALGOS:
            cls = policy_class(TrainConfig(arch=arch, algo=algo))
            assert POLICY_CLASSES.get((cls.__module__, cls.__qualname__)) == algo, (arch, algo, cls)


@pytest.mark.parametrize("algo", ["maskable-ppo", "ppo"])
def test_the_entries_data_may_hold_are_what_sb3_saves(algo: str) -> None:
    from dream_gym.rl.model_zips import ARCH_ATTRIBUTE, SAVED_ATTRIBUTES
    from dream_gym.training.trainer import TrainConfig, algo_class

    bare = algo_class(TrainConfig(algo=algo))("MlpPolicy", env=None, _init_setup_model=False)
    torch_names = {name.split(".")[0] for names in bare._get_torch_save_params() for name in names}
    saved = set(vars(bare)) - set(bare._excluded_save_params()) - torch_names
    set_up_later = {"observation_space", "action_space", "lr_schedule", "n_envs"}  # by the env and the network
    assert SAVED_ATTRIBUTES == saved | set_up_later | {ARCH_ATTRIBUTE}


# -- a training run resumes from its own checkpoint only ---------------------------------------------


def test_train_resumes_from_a_checkpoint_of_its_own_folder_only(world: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    command = ["train", "--arch", "options", "--worlds", str(world), "--heldout", "", "--betas", "0.5",
               "--timesteps", "64", "--n-envs", "2", "--n-steps", "32", "--batch-size", "32", "--n-epochs", "1",
               "--checkpoint-every", "64", "--eval-every", "0", "--out", str(out)]
    assert main(command) == 0
    checkpoint = out / "checkpoint-64.zip"
    progress = json.loads((out / "progress.json").read_text())
    assert progress["checkpoint"] == checkpoint.name
    outside = tmp_path / "outside"
    outside.mkdir()
    marker = tmp_path / "ran.txt"
    evil = evil_policy_class(checkpoint, outside / "checkpoint-64.zip", marker)
    genuine = checkpoint.read_bytes()

    def resume(name: str, *options: str) -> tuple[int, str]:
        for done in ("summary.json", "model.zip"):  # not finished: the next train resumes
            (out / done).unlink(missing_ok=True)
        (out / "progress.json").write_text(json.dumps(progress | {"checkpoint": name}))
        code = main([*command, *options])
        printed = capsys.readouterr()
        return code, printed.out + printed.err

    (out / "escape.zip").symlink_to(evil)
    for name in (str(evil), "../outside/checkpoint-64.zip", "escape.zip"):
        code, printed = resume(name, "--trust-model")  # trusted: were the zip loaded, its code would run
        assert code == 2 and f"names the checkpoint '{name}'" in printed and "nothing was loaded" in printed, printed
        assert not marker.exists()
    (out / "escape.zip").unlink()

    shutil.copyfile(evil, checkpoint)  # the control: inside the folder, a trusted resume loads it
    code, printed = resume(checkpoint.name)
    assert code == 2 and "its data entry 'policy_class'" in printed and not marker.exists()  # as data: refused
    code, printed = resume(checkpoint.name, "--trust-model")
    assert code == 0 and f"resuming {out} from step 64" in printed and marker.read_text() == "ran\n"

    checkpoint.write_bytes(genuine)  # the run's own checkpoint resumes as data
    code, printed = resume(checkpoint.name)
    assert code == 0 and f"resuming {out} from step 64" in printed, printed
    assert marker.read_text() == "ran\n"

    # state files the run did not write are named (they made tracebacks, or "Expecting value"
    # naming no file), and nothing is trained
    kept = checkpoint.read_bytes()
    for name, text, said in (("progress.json", "[1]", "progress.json: a JSON object was expected, found list"),
                             ("progress.json", "{bad", "progress.json: not JSON"),
                             ("progress.json", json.dumps(progress | {"timesteps": "x"}),
                              "progress.json: 'timesteps' must be int, got 'x'"),
                             ("config.json", "[]", "config.json: a JSON object was expected, found list"),
                             ("evals.jsonl", "[1]\n", "evals.jsonl, line 1: an evaluation without its step count")):
        (out / "progress.json").write_text(json.dumps(progress | {"checkpoint": checkpoint.name}))
        before = (out / name).read_text() if (out / name).exists() else None
        (out / name).write_text(text)
        for done in ("summary.json", "model.zip"):
            (out / done).unlink(missing_ok=True)
        code = main(command)
        printed = capsys.readouterr()
        assert code == 2 and said in printed.err and printed.err.count("error:") == 1, (name, printed.err)
        assert "Traceback" not in printed.err and checkpoint.read_bytes() == kept
        if before is not None:
            (out / name).write_text(before)
    # a line cut by a kill (evals.jsonl is appended to) is left out, and the run resumes; it stopped it
    (out / "progress.json").write_text(json.dumps(progress | {"checkpoint": checkpoint.name}))
    (out / "evals.jsonl").write_text('{"timesteps": 64, "mean_v": 0.')
    for done in ("summary.json", "model.zip"):
        (out / done).unlink(missing_ok=True)
    assert main(command) == 0, capsys.readouterr().err


def test_data_of_the_wrong_type_is_one_clear_error(tmp_path: Path) -> None:
    from dream_gym.rl.model_zips import load_model_zip

    zip_path = rewrite_zip(MACRO_ZIP, tmp_path / "typed.zip", lambda data: data.__setitem__("learning_rate", "fast"))
    with pytest.raises(ValueError, match=r"typed.zip does not load: AssertionError: The learning rate schedule"):
        load_model_zip(zip_path)


def test_a_zip_entry_that_unpacks_far_past_its_size_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A 600 KB zip whose data entry unpacked to 600 MB took 1.3 GB before its refusal."""
    from dream_gym.rl.model_zips import UntrustedModelError, check_model_zip

    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(MACRO_ZIP) as real, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        for name in real.namelist():
            out.writestr(name, real.read(name) + (b" " * (20 << 20) if name == "data" else b""))
    with pytest.raises(UntrustedModelError, match=r"its 'data' entry would unpack to 2\d,\d{3},\d{3} bytes from"):
        check_model_zip(bomb)
    check_model_zip(MACRO_ZIP)  # the control: a real model's entries pass


def test_a_zip_that_does_not_load_when_trusted_is_one_clear_error(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Loaded the old way (--trust-model), a zip of other files ended in SB3's AssertionError
    traceback, and weights that are no tensors in an unpickling traceback of 54 lines."""
    import zipfile

    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("a.py", "x = 1\n")
    assert main(["replay", "sd-fixed-s0", "--policy", str(other), "--trust-model"]) == 2
    said = capsys.readouterr().err
    assert said.count("error:") == 1 and "Traceback" not in said
    assert f"model {other} does not load with --trust-model: AssertionError: No data found" in said
