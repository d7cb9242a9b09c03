"""Packaging: the wheel holds the shipped datasets, models and prompt templates, and works from a
fresh virtualenv outside the repository (the README's quick start, `eval` with a shipped model,
`demo`, `--version`), while a policy file run from that install still cannot read a shipped world.

The slow tests build the wheel from a copy of the working tree's files (so the repository gets no
build/ folder), install it with no dependencies into a new venv whose dependencies come from this
project's venv (a .pth file: nothing is downloaded but the build backend), and run everything
there from a temporary folder, with the repository's editable dream_gym out of reach.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from once import built_once
from test_demo import KEPT

import dream_gym
from dream_gym.cli import main as cli_main
from dream_gym.demo import DREAM_INCUMBENT, DREAMED
from dream_gym.world.shipped import models_dir, prompts_dir, shipped_root

REPO = Path(__file__).resolve().parents[1]
SPY = Path(__file__).resolve().parent / "hostile_policies" / "spy_shipped.py"
DATA_FOLDERS = ("recorded_worlds", "agents/models", "agents/prompts")  # as the repository lays them out


# -- in the repository (the editable install) -------------------------------------------------------
def test_the_checkout_reads_its_own_data_folders(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("DREAM_GYM_SHIPPED", "DREAM_GYM_MODELS"):
        monkeypatch.delenv(name, raising=False)
    assert (shipped_root(), models_dir(), prompts_dir()) == tuple(REPO / f for f in DATA_FOLDERS)
    assert not (REPO / "dream_gym" / "_shipped").exists()  # the wheel's folder: never in the checkout
    monkeypatch.setenv("DREAM_GYM_SHIPPED", str(tmp_path / "worlds"))
    monkeypatch.setenv("DREAM_GYM_MODELS", str(tmp_path / "models"))
    assert (shipped_root(), models_dir()) == (tmp_path / "worlds", tmp_path / "models")


def test_version_is_defined_once_and_printed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli_main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"dream-gym {dream_gym.__version__}\n"
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "dream_gym.__version__"}


# -- the installed wheel ------------------------------------------------------------------------------
@dataclass
class Installed:
    wheel: Path
    venv: Path
    cwd: Path
    env: dict[str, str]

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def run(self, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), cwd=self.cwd, env={**self.env, **env}, capture_output=True, text=True,
                              timeout=timeout)

    def python_code(self, code: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(self.python, "-c", textwrap.dedent(code), *args)


def _working_tree_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode()
    return [f for f in listed.split("\0") if f and (REPO / f).is_file()]


def _build_and_install(root: Path, env: dict[str, str]) -> None:
    source, dist, venv = root / "source", root / "dist", root / "venv"
    for rel in _working_tree_files():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, source / rel)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-w", str(dist)],
                           capture_output=True, text=True, env=env, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("dream_gym-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # this project's dependencies (and pip), without running its .pth files: the editable
    # dream_gym's finder is one of them
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    Path(site, "_project_dependencies.pth").write_text("".join(f"{p}\n" for p in ours))
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index",
                          "--ignore-installed", str(wheel)], capture_output=True, text=True, env=env, timeout=600)
    assert pip.returncode == 0, pip.stdout + pip.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """The wheel, built and installed once per session (whichever worker asks first); each
    module gets its own working folder and DREAM_GYM_HOME."""
    own = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "DREAM_GYM_SHIPPED", "DREAM_GYM_MODELS", "DREAM_GYM_UNSAFE_NO_SANDBOX")}
    env.update(PYTHONNOUSERSITE="1", DREAM_GYM_HOME=str(own / "home"), MPLBACKEND="Agg")
    root = built_once(tmp_path_factory, "installed-wheel", lambda folder: _build_and_install(folder, env))
    (wheel,) = (root / "dist").glob("dream_gym-*.whl")
    cwd = own / "run"
    cwd.mkdir()
    yield Installed(wheel, root / "venv", cwd, env)


@pytest.mark.slow
def test_the_wheel_works_from_a_fresh_venv_outside_the_repository(installed: Installed) -> None:
    dream_gym_cli = str(installed.venv / "bin" / "dream-gym")
    with ThreadPoolExecutor(2) as pool:  # the two long commands run while the quick checks do
        evaluating = pool.submit(installed.run, dream_gym_cli, "eval", "--policy", "ppo-options", "--worlds",
                                 "heldout", "--out", "results.jsonl", "--no-progress")
        demoing = pool.submit(installed.run, dream_gym_cli, "demo", "--out", "demo", COLUMNS="80")
        _quick_checks_of_the_wheel(installed)
        evaluated, demo = evaluating.result(), demoing.result()

    held_out = json.loads((REPO / "recorded_worlds" / "recorded-v1" / "dataset.json").read_text())["split"]["held_out"]
    assert evaluated.returncode == 0, evaluated.stderr
    assert f"Leaderboard: mean over {len(held_out)} worlds" in evaluated.stdout
    assert all(f"World {name} " in evaluated.stdout for name in held_out)
    rows = [json.loads(line) for line in (installed.cwd / "results.jsonl").read_text().splitlines()]
    assert {r["world"] for r in rows} == set(held_out) and {r["policy"] for r in rows} == {"ppo-options"}
    assert all(r["error"] is None for r in rows)

    # the demo (`make demo`'s job): baselines on the held-out split, a dreaming step whose kept
    # version improves on its incumbent on H and on the held-out worlds, what to run next
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-4000:]  # no failure of the demo
    out = installed.cwd / "demo"
    for name in ("results.jsonl", "leaderboard.md", "leaderboard_dreamed.md", "dream/chosen.py", "dream/ratchet.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    board = (out / "leaderboard_dreamed.md").read_text()
    assert list(out.glob("*.png")) and DREAMED in board and DREAM_INCUMBENT in board
    assert f"Leaderboard: mean over {len(held_out)} worlds" in board
    kept = KEPT.search(demo.stdout)
    assert kept is not None, demo.stdout[-3000:]
    assert int(kept.group(1)) >= 1 and float(kept.group(2)) > 0 and float(kept.group(3)) > 0
    assert "not used for selection" in demo.stdout and demo.stdout.count("dream-gym ") >= 3
    wide = [line for line in demo.stdout.splitlines() if len(line) > 80 and str(installed.cwd) not in line]
    assert wide == []  # the tables and the lines fit an 80-column terminal


def _quick_checks_of_the_wheel(installed: Installed) -> None:
    """What the wheel holds, where the installed package reads it from, and the quick start."""
    names = zipfile.ZipFile(installed.wheel).namelist()
    data = [n for n in names if n.startswith("dream_gym/_shipped/")]
    files = _working_tree_files()
    for rel in DATA_FOLDERS:  # every shipped file, and nothing of the folders' build scripts
        expected = {f for f in files if f.startswith(f"{rel}/") and Path(f).suffix not in (".py", ".sh", ".txt")}
        assert {n.removeprefix("dream_gym/_shipped/") for n in data if n.startswith(f"dream_gym/_shipped/{rel}/")} \
            == expected, rel
    assert not any(n.endswith("__init__.py") for n in data)
    assert "dream_gym/py.typed" in names and any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    metadata = zipfile.ZipFile(installed.wheel).read(f"dream_gym-{dream_gym.__version__}.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata

    where = installed.python_code("""
        import importlib.metadata, json, dream_gym
        from dream_gym.world.shipped import models_dir, prompts_dir, shipped_root
        print(json.dumps([dream_gym.__file__, importlib.metadata.version("dream-gym"),
                          str(shipped_root()), str(models_dir()), str(prompts_dir())]))""")
    assert where.returncode == 0, where.stderr
    package_file, version, *folders = json.loads(where.stdout)
    package = Path(package_file).parent
    assert package.is_relative_to(installed.venv) and not package.is_relative_to(REPO)  # the wheel, not the repo
    assert version == dream_gym.__version__
    assert folders == [str(package / "_shipped" / rel) for rel in DATA_FOLDERS]
    assert (package / "py.typed").is_file()
    version_run = installed.run(str(installed.venv / "bin" / "dream-gym"), "--version")
    assert (version_run.returncode, version_run.stdout) == (0, f"dream-gym {dream_gym.__version__}\n"), version_run.stderr

    # every shipped dataset validates (each listed file there with its sha256); every model and prompt loads
    for dataset in sorted(p.parent.name for p in (REPO / "recorded_worlds").glob("*/dataset.json")):
        valid = installed.run(str(installed.venv / "bin" / "dream-gym"), "worlds", "validate", f"dream-gym/{dataset}")
        assert valid.returncode == 0, valid.stdout + valid.stderr
    loaded = installed.python_code("""
        from dream_gym.dream.llm_developer import INTERFACE_TEMPLATE, REVISION_TEMPLATE, SYSTEM_TEMPLATE
        from dream_gym.policies.trained import SHIPPED_MODELS
        from dream_gym.policy_files import load_policy
        from dream_gym.world.shipped import prompts_dir
        assert all((prompts_dir() / t).is_file() for t in (INTERFACE_TEMPLATE, REVISION_TEMPLATE, SYSTEM_TEMPLATE))
        print(sorted(load_policy(name).name for name in SHIPPED_MODELS))""")
    assert loaded.returncode == 0, loaded.stderr

    # the README's quick start, as a user pastes it
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "gym.make(" in b or "run_episode(" in b)
    quick = installed.run(installed.python, "-c", snippet)
    assert quick.returncode == 0, quick.stderr


@pytest.mark.slow
def test_a_users_mypy_sees_the_installed_packages_types(installed: Installed) -> None:
    """py.typed: mypy reads dream_gym's annotations (without it: "missing library stubs or
    py.typed marker", and every dream_gym name is Any, so the wrong assignment passes)."""
    (installed.cwd / "user.py").write_text('import dream_gym\n\nworld = dream_gym.load_world("w")\nsize: str = world.size\n')
    # dream_gym's own modules only (its dependencies as Any): seconds instead of a minute
    (installed.cwd / "mypy.ini").write_text("[mypy]\nfollow_imports = skip\n\n[mypy-dream_gym,dream_gym.*]\n"
                                            "follow_imports = normal\n")
    checked = installed.run(sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--python-executable",
                            installed.python, "--cache-dir", str(installed.cwd / ".mypy_cache"), "--no-error-summary",
                            "user.py")
    assert checked.stdout.splitlines() == [
        'user.py:4: error: Incompatible types in assignment (expression has type "int", variable has type "str")  '
        "[assignment]"], checked.stdout + checked.stderr


@pytest.mark.slow
def test_a_policy_file_cannot_read_the_installed_wheels_shipped_data(installed: Installed) -> None:
    """The spy reads every shipped file it finds below the installed package: it finds none
    under the sandbox (no read root holds them, and a policy episode lists nothing), all of them
    with the explicit opt-out (so it does look in the right place)."""
    run = installed.python_code("""
        import json, sys
        import dream_gym
        from dream_gym.policy import run_episode
        from dream_gym.policy_files import IsolatedPolicy
        from dream_gym.world.registry import resolve_world, shipped_world_names
        from dream_gym.infrastructure.sandbox import read_roots
        from dream_gym.world.shipped import models_dir, prompts_dir, shipped_root
        world = resolve_world(shipped_world_names("dream-gym/recorded-v0")[0])
        report = {"package": dream_gym.__file__, "data": [str(shipped_root()), str(models_dir()), str(prompts_dir())], "roots": read_roots()}
        # the kernel alone (without the audit hook, which refuses even to list the folder), both
        # layers, and the opt-out
        for label, unsafe, harden in (("sandboxed", None, False), ("hardened", None, True), ("unsafe", True, False)):
            with IsolatedPolicy(sys.argv[1], unsafe_no_sandbox=unsafe, harden=harden, decision_timeout_s=30.0,
                                episode_timeout_s=60.0) as policy:
                report[label] = run_episode(policy, world, on_error="record").error
        print(json.dumps(report))""", str(SPY))
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    package = Path(report["package"]).parent
    assert package.is_relative_to(installed.venv)
    data = [Path(p) for p in report["data"]]
    assert all(folder.is_relative_to(package / "_shipped") for folder in data)

    # no read root holds the data, nor is inside it: the package folder is only listed (names)
    roots = report["roots"]
    for granted in map(Path, roots["tree"] + roots["file"]):
        assert not any(folder.is_relative_to(granted) or granted.is_relative_to(folder) for folder in data), granted
    assert str(package / "_shipped") not in roots["list"]
    assert str(package / "world") in roots["tree"]  # the code stays readable

    def found(error: str | None) -> dict[str, int]:
        assert error is not None and "FOUND=" in error, error
        value, _ = json.JSONDecoder().raw_decode(error.split("FOUND=", 1)[1])
        return {k: v for k, v in value.items() if k != "sample"}

    sandboxed, unsafe = found(report["sandboxed"]), found(report["unsafe"])
    shipped = sum(1 for _ in Path(data[0]).glob("*/*/nodes.jsonl"))
    # a policy episode lists no folder and reads no file, with the kernel alone or both layers
    assert sandboxed == {"tried": 0, "read": 0, "nodes": 0, "nodes_read": 0}, report["sandboxed"]
    assert found(report["hardened"])["read"] == 0
    # the control: with the opt-out the same file finds and reads every one of them
    assert shipped > 0 and unsafe["nodes"] == unsafe["nodes_read"] == shipped, unsafe
    assert unsafe["read"] == unsafe["tried"] > shipped, unsafe
