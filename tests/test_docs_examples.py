"""The examples of README.md and docs/ run, so none can rot.

* ```` ```python ```` blocks are executed, each in a fresh interpreter in an empty folder (with the
  repository's ``agents/`` beside it). ```` ```python {.no-run} ```` blocks are compiled only.
* ```` ```console ```` and ```` ```bash ```` blocks: every ``dream-gym`` command in them (after
  ``$`` in console blocks) runs with the venv's ``dream-gym``, must exit 0, and each output line
  shown under it must be a line it prints (a shown line ending in ``...`` is a prefix). A block
  marked ``{.no-run}`` (training, growing, OpenEvolve runs, a remote) is not run.
* Everywhere, in text blocks (synopses) too: every option a ``dream-gym`` command line uses is one
  its sub-command's ``--help`` lists, and every script (``python path.py``) or project module
  (``python -m experiments.x``) a command line runs exists.

Pages that include a file kept elsewhere (``<!-- include: ... -->``) are read with it included,
as the site shows them. Running the examples takes minutes (``slow``); the option, script and
syntax checks take a few seconds.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from docs.hooks.include import expand  # the docs site's own include hook

REPO = Path(__file__).resolve().parents[1]

FENCE = re.compile(r"^```(\w*)\s*(\{[^}]*\})?\s*$")
SCRIPT = re.compile(r"(?:^|\s)(?:\S*/)?python3?\s+(?!-)(\S+\.py)\b")
MODULE = re.compile(r"(?:^|\s)(?:\S*/)?python3?\s+-m\s+((?:experiments|benchmarks|agents|dream_gym)(?:\.\w+)+)")
RUNNERS = ("console", "bash", "shell")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, whether it runs, its text."""

    page: str
    line: int
    lang: str
    runs: bool
    text: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def doc_pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks_of(page: Path) -> list[Block]:
    lines = expand(page.read_text(encoding="utf-8")).splitlines()
    found, start, head, body = [], 0, None, []
    for number, line in enumerate(lines, 1):
        fence = FENCE.match(line)
        if head is None and fence:
            head, start, body = fence, number, []
        elif head is not None and line.startswith("```"):
            attrs = head.group(2) or ""
            found.append(Block(str(page.relative_to(REPO)), start, head.group(1) or "text",
                               ".no-run" not in attrs, "\n".join(body) + "\n"))
            head = None
        elif head is not None:
            body.append(line)
    assert head is None, f"{page}: a code block opened at line {start} is never closed"
    return found


def all_blocks() -> list[Block]:
    return [block for page in doc_pages() for block in blocks_of(page)]


def command_lines(block: Block) -> list[tuple[str, list[str]]]:
    """The block's commands, continuation lines joined, each with the output lines shown under it
    (console blocks: a command starts with ``$``; other blocks: every line is a command)."""
    commands: list[tuple[str, list[str]]] = []
    pending = ""
    for raw in block.text.splitlines():
        line = raw.rstrip()
        if pending:
            pending += " " + line.strip()
        elif block.lang == "console" and not line.startswith("$ "):
            if commands and line.strip():
                commands[-1][1].append(line.strip())
            continue
        else:
            pending = line[2:] if line.startswith("$ ") else line
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        if pending.strip():
            commands.append((pending.strip(), []))
        pending = ""
    return commands


def without_comment(command: str) -> str:
    return re.sub(r"\s+#.*$", "", command)


@cache
def cli_options() -> dict[tuple[str, ...], set[str]]:
    """Every sub-command path of ``dream-gym`` and the options it takes."""
    from dream_gym.cli import build_parser

    options: dict[tuple[str, ...], set[str]] = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        options[path] = {flag for action in parser._actions for flag in action.option_strings}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))

    walk(build_parser(), ())
    return options


def subcommand_of(words: list[str]) -> tuple[str, ...]:
    path: tuple[str, ...] = ()
    for word in words:
        if (*path, word) not in cli_options():
            break
        path = (*path, word)
    return path


def dream_gym_lines() -> list[tuple[Block, str]]:
    """Every line of every block that calls dream-gym, with the block it is in."""
    found = []
    for block in all_blocks():
        for command, _ in command_lines(block):
            command = without_comment(command)
            if command.startswith("dream-gym "):
                found.append((block, command))
    return found


@pytest.mark.parametrize("block,command", dream_gym_lines(), ids=lambda x: str(x)[:60])
def test_every_dream_gym_command_uses_options_its_help_lists(block: Block, command: str) -> None:
    words = command.split()[1:]
    path = subcommand_of([w for w in words if not w.startswith("-")][:2])
    assert path or all(w.startswith("-") for w in words), f"{block}: `{command}` names no dream-gym command"
    used = set(re.findall(r"(?<![\w/.-])(--?[a-zA-Z][\w-]*)", command))
    unknown = sorted(flag for flag in used if flag not in cli_options()[path])
    assert not unknown, f"{block}: `dream-gym {' '.join(path)}` has no option {unknown}: `{command}`"


def test_every_script_a_command_runs_exists() -> None:
    missing = []
    for block in all_blocks():
        for command, _ in command_lines(block):
            for script in SCRIPT.findall(without_comment(command)):
                if not (REPO / script).is_file():
                    missing.append(f"{block}: {script}")
            for module in MODULE.findall(without_comment(command)):
                path = REPO / module.replace(".", "/")
                if not (path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()):
                    missing.append(f"{block}: python -m {module}")
    assert not missing, "scripts named in the docs that do not exist:\n" + "\n".join(missing)


def test_the_checks_see_the_examples() -> None:
    """The parsers find what the pages hold (so an empty match cannot pass silently)."""
    blocks = all_blocks()
    assert sum(b.lang == "python" for b in blocks) >= 4
    assert sum(b.lang in RUNNERS and b.runs for b in blocks) >= 5
    assert len(dream_gym_lines()) >= 30
    console = Block("x.md", 1, "console", True, "$ dream-gym replay w \\\n  --beta 0.5\nworld w\n$ ls\n")
    assert command_lines(console) == [("dream-gym replay w --beta 0.5", ["world w"]), ("ls", [])]
    assert shows(["world w policy greedy"], "world w   policy greedy") and shows(["V = 0.5 best"], "V = 0.5 ...")
    assert not shows(["V = 0.5475"], "V = 0.5476") and not shows(["V = 0.5"], "W ...")
    assert MODULE.findall("nice -n 5 .venv/bin/python -m experiments.rl.budget --x") == ["experiments.rl.budget"]
    assert SCRIPT.findall(".venv/bin/python agents/train_ppo.py --help") == ["agents/train_ppo.py"]
    assert subcommand_of(["worlds", "import"]) == ("worlds", "import") and subcommand_of(["replay", "w"]) == ("replay",)


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.lang == "python"], ids=str)
def test_python_blocks_compile(block: Block) -> None:
    compile(block.text, str(block), "exec")


def sandbox_folder(tmp_path: Path) -> Path:
    """An empty folder with the repository's example policies beside the user's files."""
    (tmp_path / "agents").symlink_to(REPO / "agents")
    return tmp_path


def example_env() -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", NO_COLOR="1",
                PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def python_examples() -> list[Block]:
    return [b for b in all_blocks() if b.lang == "python" and b.runs]


def run_python(block: Block, folder: Path, timeout: int) -> None:
    result = subprocess.run([sys.executable, "-c", block.text], cwd=folder, capture_output=True, text=True,
                            timeout=timeout, env=example_env())
    assert result.returncode == 0, f"{block} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("block", python_examples(), ids=str)
def test_python_examples_run(block: Block, tmp_path: Path) -> None:
    run_python(block, sandbox_folder(tmp_path), timeout=300)


def normalised(line: str) -> str:
    return " ".join(line.split())


def shows(printed: list[str], shown: str) -> bool:
    """Whether a line shown in the docs is one the command printed (``...`` ends a prefix)."""
    want = normalised(shown)
    if want.endswith(("...", "…")):
        return any(line.startswith(want.rstrip(".…").rstrip()) for line in printed)
    return want in printed


def runnable_blocks() -> list[Block]:
    return [b for b in all_blocks() if b.lang in RUNNERS and b.runs
            and any(without_comment(c).startswith("dream-gym ") for c, _ in command_lines(b))]


@pytest.mark.slow
@pytest.mark.parametrize("block", runnable_blocks(), ids=str)
def test_commands_run_and_print_what_the_docs_show(block: Block, tmp_path: Path) -> None:
    folder = sandbox_folder(tmp_path)
    for command, shown in command_lines(block):
        command = without_comment(command)
        if not command.startswith("dream-gym "):
            continue
        result = subprocess.run(shlex.split(command), cwd=folder, capture_output=True, text=True, timeout=600,
                                env=example_env())
        assert result.returncode == 0, f"{block}: `{command}` exited {result.returncode}:\n{result.stderr[-3000:]}"
        printed = [normalised(line) for line in (result.stdout + result.stderr).splitlines()]
        missing = [line for line in shown if not shows(printed, line)]
        assert not missing, f"{block}: `{command}` did not print {missing}; it printed:\n" + "\n".join(printed[-40:])


def resolves(dotted: str) -> bool:
    """Whether ``dream_gym.a.b.c`` names a module, or an attribute reached from the longest module prefix."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:]:
            if not hasattr(target, name):
                return False
            target = getattr(target, name)
        return True
    return False


@pytest.mark.slow  # imports every module the docs name, the RL stack included
def test_every_dream_gym_name_in_the_docs_resolves() -> None:
    """A module or function renamed in the code shows here instead of sending readers nowhere."""
    names = {name for page in doc_pages()
             for name in re.findall(r"`(dream_gym(?:\.\w+)+)", expand(page.read_text(encoding="utf-8")))}
    assert len(names) >= 30
    assert not resolves("dream_gym.no_such_module") and resolves("dream_gym.envs.env.ReplayEnv")
    unresolved = sorted(name for name in names if not resolves(name))
    assert not unresolved, f"names in the docs that dream_gym does not have: {unresolved}"


def test_an_included_file_keeps_its_text_with_headings_down_and_links_as_repository_paths() -> None:
    from docs.hooks.include import included_text

    text = included_text("experiments/recommended/RESULTS.md")
    source = (REPO / "experiments" / "recommended" / "RESULTS.md").read_text(encoding="utf-8")
    assert text.startswith("## ") and source.startswith("# ")
    assert "`experiments/recommended/PROTOCOL.md`" in text and "](PROTOCOL.md)" in source
    table_rows = [line for line in source.splitlines() if line.startswith("|")]
    assert table_rows and all(row in text for row in table_rows)  # every measured row survives


REPO_PATH = re.compile(r"`((?:dream_gym|agents|benchmarks|experiments|tests|recorded_worlds|notebooks|docs)/[\w./-]*\w\.\w+)"
                       r"(?:::(\w+))?`")


def test_every_repository_file_and_test_the_docs_name_exists() -> None:
    """`path/file.py` and `tests/test_x.py::test_name` in the prose: a moved file or a renamed test
    shows here instead of sending readers nowhere."""
    named = [(page, path, test) for page in doc_pages()
             for path, test in REPO_PATH.findall(expand(page.read_text(encoding="utf-8")))]
    assert len(named) >= 100 and any(test for _, _, test in named)
    missing = [f"{page.relative_to(REPO)}: {path}" for page, path, _ in named if not (REPO / path).exists()]
    missing += [f"{page.relative_to(REPO)}: {path}::{test}" for page, path, test in named
                if test and (REPO / path).is_file()
                and not re.search(rf"def {test}\b", (REPO / path).read_text(encoding="utf-8"))]
    assert not missing, "files and tests named in the docs that do not exist:\n" + "\n".join(missing)


def test_the_api_page_lists_every_name_the_package_exports_and_no_other() -> None:
    """The page listed ``register_envs``, which ``__all__`` left out, and left out ``ReplayEnv``."""
    import dream_gym

    page = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "api.md").read_text()
    block = page.split("::: dream_gym\n", 1)[1].split("show_submodules", 1)[0]
    listed = re.search(r"members: \[([^\]]*)\]", block, re.S)
    assert listed is not None
    assert sorted(name.strip() for name in listed[1].split(",")) == sorted(dream_gym.__all__)
