"""What the CLI says is true, said once, and fits an 80-column terminal.

Every command runs as users run it: the ``dream-gym`` program in a subprocess with ``COLUMNS=80``.
A failing policy makes ``eval``/``replay``/``dream`` exit 1 naming it once on stderr with its
first error and a count (``--allow-errors`` exits 0); the leaderboard keeps every column at 80
columns; an unknown name is one line with the nearest names; every figure says the W and betas it
was measured at (and train's held-out figures are the ones ``eval -W`` gives)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from dream_gym.cli import main as cli_main
from dream_gym.evaluation.leaderboard import Leaderboard, leaderboard
from dream_gym.evaluation.results import read_results
from dream_gym.world.registry import list_worlds

WORLDS = "cp26-puct-w4-s1,sd-puct-w8-s1"  # shipped, recorded at W = 4 and W = 8
BETAS = "0,0.5,1"
HEADERS = ["#", "policy", "v2", "auc", "pen", "V", "%lim", "q", "N", "k", "rec", "held", "err"]
LONG_NAME = "a_policy_file_with_a_rather_long_descriptive_name_for_the_table.py"
BROKEN = "def act(view):\n    raise ValueError('broken')\n"  # loads, and every episode fails
GOOD = "from dream_gym.policies import GreedyPolicy\n\n\ndef make_policy():\n    return GreedyPolicy()\n"


def dream_gym(*args: str, columns: int = 80, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the ``dream-gym`` program as a user does, at a terminal of ``columns`` columns."""
    program = Path(sys.executable).with_name("dream-gym")
    command = [str(program)] if program.exists() else [sys.executable, "-m", "dream_gym"]
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50"}
    env.pop("FORCE_COLOR", None)
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env, timeout=timeout)


def flat(text: str) -> str:
    """Text with its line breaks (rich wraps at the console width) turned into spaces."""
    return " ".join(text.split())


def table_lines(stdout: str) -> list[str]:
    """The lines of a command's tables: every line but its sentences (``label: text``), which a
    log keeps whole and a terminal wraps at its own width."""
    return [line for line in stdout.splitlines() if ": " not in line]


def stderr_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("truth-policies")
    (root / "broken.py").write_text(BROKEN)
    (root / LONG_NAME).write_text(GOOD)
    return {"broken": root / "broken.py", "long": root / LONG_NAME}


@pytest.fixture(scope="module")
def failing_eval(policies: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[
        subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("truth-eval") / "results.jsonl"
    done = dream_gym("eval", "-p", str(policies["broken"]), "-p", str(policies["long"]), "-p", "greedy",
                     "-w", WORLDS, "--betas", BETAS, "-j", "2", "--no-progress", "-o", str(out))
    return done, out


def percent(share: float) -> str:
    return "n/a" if share != share else f"{100 * share:.0f}%"


def table_blocks(stdout: str) -> list[list[str]]:
    """The printed tables: each a header line and its rows (the lines up to the next blank line)."""
    lines = stdout.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.split()[:2] == ["#", "policy"]:
            rows = []
            for row in lines[i + 2:]:  # after the rule under the header
                if not row.strip() or not row.split()[0].rstrip("=").isdigit():
                    break
                rows.append(row)
            blocks.append([line, *rows])
    return blocks


@pytest.mark.slow
def test_eval_exits_1_and_names_the_failing_policy_once(failing_eval: tuple[subprocess.CompletedProcess[str], Path],
                                                         policies: dict[str, Path]) -> None:
    done, _ = failing_eval
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = stderr_lines(done)
    naming = [line for line in lines if str(policies["broken"]) in line]
    assert naming == [f"dream-gym eval: policy {policies['broken']}: 6 of 6 episodes failed; first: "
                      f"{naming[0].split('; first: ', 1)[1]}"]
    assert "ValueError: broken" in naming[0] and "(on cp26-puct-w4-s1, beta 0)" in naming[0]
    # the error is said once in all the output, not once per episode
    assert (done.stdout + done.stderr).count("ValueError: broken") == 1
    assert lines[-1] == "dream-gym eval: exit status 1 because episodes failed (--allow-errors exits 0)"
    assert not any(str(policies["long"]) in line for line in lines)  # the good policies are not named


def test_allow_errors_exits_0_and_the_table_still_counts_the_errors(policies: dict[str, Path]) -> None:
    done = dream_gym("eval", "-p", str(policies["broken"]), "-p", "greedy", "-w", WORLDS, "--betas", BETAS,
                     "-j", "2", "--no-progress", "--allow-errors", "--summary", "-W", "2")
    assert done.returncode == 0, done.stderr
    [naming] = stderr_lines(done)
    assert naming.startswith(f"dream-gym eval: policy {policies['broken']}: 6 of 6 episodes failed; first: ")
    [table] = table_blocks(done.stdout)
    err = {row.split()[1] == "greedy": row.split()[-1] for row in table[1:]}  # a long path is shortened
    assert err == {False: "6/6", True: "0"}
    assert "replayed at W = 2; betas 0,0.5,1" in flat(done.stdout)  # -W given: the W it was replayed at


def test_the_leaderboard_keeps_every_column_at_80_columns(
        failing_eval: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    done, out = failing_eval
    assert all(len(line) <= 80 for line in done.stdout.splitlines()), max(done.stdout.splitlines(), key=len)
    blocks = table_blocks(done.stdout)
    assert len(blocks) == 3  # over both worlds, then one per world
    board = leaderboard(read_results(out))
    expected = [board.overall, *board.per_world.values()]
    for block, rows in zip(blocks, expected, strict=True):
        assert block[0].split() == HEADERS  # no column dropped
        assert len(block) - 1 == len(rows) == 3
        for line, row in zip(block[1:], rows, strict=True):
            cells = line.split()
            err = f"{row.errors}/{row.episodes}" if row.errors else "0"
            assert cells[0].rstrip("=") == str(row.rank)  # the two greedy policies tie: "1="
            assert cells[-5:-3] + cells[-1:] == [f"{row.attempts:.1f}", f"{row.rounds:.1f}", err]  # N, k, err whole
            assert cells[-3:-1] == [percent(row.on_record), percent(row.held)]  # rec, held
            assert cells[2:5] == [f"{row.v2:.4f}", f"{row.auc:.4f}", f"{row.penalty:.3f}"]
    # long names are shortened in the middle, and still say where they start and end
    for line, row in zip(blocks[0][1:], board.overall, strict=True):
        printed = line.split()[1]
        if row.policy == "greedy":
            assert printed == "greedy"
        else:
            head, tail = printed.split("\u2026")
            assert row.policy.startswith(head) and row.policy.endswith(tail) and len(tail) >= 8


@pytest.mark.parametrize("width", [80, 60])
def test_rich_console_width_keeps_every_column(failing_eval: tuple[subprocess.CompletedProcess[str], Path],
                                                width: int) -> None:
    _, out = failing_eval
    board = leaderboard(read_results(out))
    console = Console(width=width, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    board.print(console, per_world=False)
    text = console.export_text()
    assert all(len(line) <= width for line in text.splitlines())
    headers = [h for block in table_blocks(text) for h in block[0].split()]
    assert set(HEADERS) <= set(headers)  # at 60 columns in two parts, each with # and policy
    assert "6/6" in text
    for row in board.overall:
        assert f"{row.attempts:.1f}" in text and f"{row.rounds:.1f}" in text


def test_eval_says_the_w_and_betas_it_measured_at(failing_eval: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    done, _ = failing_eval
    text = flat(done.stdout)
    assert "replayed at each world's recorded W (4-8); betas 0,0.5,1" in text
    recorded = {row["name"]: row["workers"] for row in list_worlds()}
    for world in WORLDS.split(","):
        assert f"World {world} (W {recorded[world]}, limit V*" in text


UNKNOWN = [
    (["eval", "-p", "greedy", "-w", "cp26-puct-w4-s2"],
     "--worlds: unknown world 'cp26-puct-w4-s2'; did you mean 'cp26-puct-w4-s1'?"),
    (["eval", "-p", "greedy", "-w", "heldoutt"], "--worlds: unknown world 'heldoutt'; did you mean 'heldout'?"),
    (["eval", "-p", "greedyy", "-w", "heldout"], "unknown policy 'greedyy'; did you mean 'greedy'?"),
    (["replay", "cp26-puct-w4-s1", "--policy", "ppo-option"], "unknown policy 'ppo-option'; did you mean 'ppo-options'?"),
    (["replay", "sd-puct-w8-s2"], "unknown world 'sd-puct-w8-s2'; did you mean 'sd-puct-w8-s1'?"),
    (["grow", "--task", "circle-packin-26", "--out", "{tmp}/never-written"],
     "unknown task 'circle-packin-26'; did you mean 'circle-packing-26'"),
    (["rsi", "--task", "sum-diference", "--policy", "greedy", "-T", "1", "-M", "2", "--out", "{tmp}/never-written"],
     "unknown task 'sum-diference'; did you mean 'sum-difference'?"),
    (["worlds", "show", "dream-gym/recorded-v1/cp26-puct-w4-s9"],
     "dataset dream-gym/recorded-v1 has no world 'cp26-puct-w4-s9'; did you mean 'cp26-puct-w4-s1'?"),
    (["worlds", "stats", "lasso-ucb-w4-s9"], "unknown world 'lasso-ucb-w4-s9'; did you mean"),
]


@pytest.mark.parametrize(("argv", "message"), UNKNOWN, ids=[" ".join(a[:3]) for a, _ in UNKNOWN])
def test_an_unknown_name_is_one_line_with_the_nearest_names(argv: list[str], message: str, tmp_path: Path) -> None:
    done = dream_gym(*(a.replace("{tmp}", str(tmp_path)) for a in argv))
    assert done.returncode == 2
    [line] = stderr_lines(done)  # one line: no usage, no traceback, no list of every world
    typed = " ".join(argv[:2] if argv[0] == "worlds" else argv[:1])  # worlds show: error, as argparse says it
    assert line.startswith(f"dream-gym {typed}: error: {message}")
    assert not line.split("error: ", 1)[1].startswith(('"', "'"))  # no quoted KeyError repr
    assert line.count("-w4-") + line.count("-w8-") <= 3  # the nearest names, not all 56
    assert not (tmp_path / "never-written").exists()  # checked before anything is written


@pytest.mark.parametrize("command", [["grow", "--policy", "greedy"], ["rsi", "--policy", "greedy", "-T", "1", "-M", "2"]])
def test_a_task_given_as_files_points_dream_gyms_own_loop_to_the_systems(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """grow and rsi run built-in tasks; initial_program.py,evaluator.py was an "unknown task"."""
    files = Path(__file__).parent / "data" / "openevolve_task"
    task = f"{files / 'initial_program.py'},{files / 'evaluator.py'}"
    out = tmp_path / "never-written"
    assert cli_main([command[0], "--task", task, *command[1:], "--out", str(out)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "a task given as files runs in a discovery system (dream-gym deploy --system" in line
    assert "unknown task" not in line and "circle-packing-26" in line
    assert not out.exists()


def test_unknown_worlds_point_to_the_command_that_lists_them() -> None:
    done = dream_gym("eval", "-p", "greedy", "-w", "cp26-puct-w4-s1,nothing-like-it")
    [line] = stderr_lines(done)
    assert "unknown world 'nothing-like-it'" in line and "`dream-gym worlds list`" in line


@pytest.mark.slow
def test_replay_exits_1_naming_the_error_once_and_says_its_w(policies: dict[str, Path], tmp_path: Path) -> None:
    raises = tmp_path / "raises.py"
    raises.write_text("def act(view):\n    raise ValueError('boom in act')\n")
    done = dream_gym("replay", "cp26-puct-w4-s1", "--policy", str(raises))
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == f"world cp26-puct-w4-s1  policy {raises}  beta 0.5  W 4 (recorded)"
    naming = stderr_lines(done)[0]
    assert naming.startswith(f"dream-gym replay: policy {raises}: 1 of 1 episodes failed; first: PolicyException:")
    assert "ValueError: boom in act" in naming and (done.stdout + done.stderr).count("boom in act") == 1
    allowed = dream_gym("replay", "cp26-puct-w4-s1", "--policy", str(raises), "-W", "2", "--allow-errors")
    assert allowed.returncode == 0 and stderr_lines(allowed) == [naming]
    assert allowed.stdout.splitlines()[0].endswith("beta 0.5  W 2")


@pytest.mark.slow
def test_dream_exits_1_when_the_incumbent_fails(policies: dict[str, Path], tmp_path: Path) -> None:
    done = dream_gym("dream", "--history", "cp26-puct-w4-s1", "--policy", str(policies["broken"]), "-M", "2",
                     "--betas", "0,1", "-j", "1", "--quiet", "--out", str(tmp_path / "dream"))
    assert done.returncode == 1, done.stderr
    [naming] = [line for line in stderr_lines(done) if line.startswith("dream-gym dream: policy ")]
    assert naming.startswith(f"dream-gym dream: policy {policies['broken']}: 2 of 2 episodes failed; first: ")
    assert "score: mean V over 1 world x betas 0,1, replayed at W = 4 (the recorded W of the world)" in done.stdout
    assert all(len(line) <= 80 for line in table_lines(done.stdout))


@pytest.mark.slow
def test_rsi_summary_keeps_every_column_at_80_columns(tmp_path: Path) -> None:
    from dream_gym.dream.rsi import SUMMARY_COLUMNS

    done = dream_gym("rsi", "--task", "sum-difference", "--policy", "fixed", "--iterations", "1", "--revisions", "2",
                     "--workers", "2", "--rounds", "2", "--betas", "0.5", "-j", "1", "--backend", "serial", "--quiet",
                     "--out", str(tmp_path / "rsi"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in table_lines(done.stdout)), max(lines, key=len)
    assert "\u2026" not in done.stdout  # no cell or header cut short
    headers = [line for line in lines if line.startswith("t ")]
    assert len(headers) >= 2  # 16 columns do not fit 80: in parts, each starting with t
    printed = " ".join(headers)
    assert all(column in printed for column in SUMMARY_COLUMNS)
    [iteration] = json.loads((tmp_path / "rsi" / "summary.json").read_text())["iterations"]
    rows = [line for line in lines if line.startswith("1 ")]
    assert len(rows) == len(headers) and f"{iteration['total_usd']:.4f}" in rows[-1].split()


@pytest.mark.slow
def test_train_says_the_w_of_its_held_out_figures_and_eval_gives_them_at_that_w(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``train`` runs through the CLI's ``main`` in this process (its report is plain prints; a
    process of its own would spend most of its time importing torch and SB3); ``eval`` as a program."""
    pytest.importorskip("sb3_contrib")
    heldout = "sd-puct-w8-s1,cp26-random-w8-s1"  # recorded at W = 8; train replays at W = 4
    out = tmp_path / "train"
    capsys.readouterr()
    code = cli_main(["train", "--timesteps", "64", "--n-envs", "2", "--n-steps", "32", "--batch-size", "32",
                     "--eval-every", "0", "--checkpoint-every", "64", "--worlds", "cp26-puct-w4-s1",
                     "--heldout", heldout, "--betas", BETAS, "--out", str(out)])
    done = capsys.readouterr()
    assert code == 0, done.err
    text = flat(done.out)
    assert "train pool (1 world at W = 4, betas 0,0.5,1): v2 " in text
    held = next(line for line in done.out.splitlines() if line.startswith("held out ("))
    assert held.startswith("held out (2 worlds at W = 4, betas 0,0.5,1): v2 ")
    assert "`dream-gym eval` replays each world at its recorded W (8) unless given -W" in text
    mean_v = held.split("mean V ")[1].split()[0]
    # the note's command gives these figures; eval at the recorded W gives others
    at_w = dream_gym("eval", "-p", str(out / "model.zip"), "-w", heldout, "--betas", BETAS, "-W", "4",
                     "--summary", "--no-progress", "-j", "2")
    recorded = dream_gym("eval", "-p", str(out / "model.zip"), "-w", heldout, "--betas", BETAS,
                         "--summary", "--no-progress", "-j", "2")
    [row_w] = table_blocks(at_w.stdout)[0][1:]
    [row_recorded] = table_blocks(recorded.stdout)[0][1:]
    assert row_w.split()[5] == mean_v  # the V column
    assert row_recorded.split()[5] != mean_v
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["workers"] == 4


def test_a_library_board_lists_its_betas_and_counts_failures_per_policy(
        failing_eval: tuple[subprocess.CompletedProcess[str], Path], policies: dict[str, Path]) -> None:
    """The library's board (no CLI) lists its betas itself; the CLI adds where it measured."""
    _, out = failing_eval
    board: Leaderboard = leaderboard(read_results(out))
    assert board.legend().startswith("betas 0, 0.5, 1; ranked by v2")
    board.conditions = "replayed at W = 3; betas 0,0.5,1"
    assert board.legend().startswith("replayed at W = 3; betas 0,0.5,1; ranked by v2")
    assert "Conditions: replayed at W = 3" in board.to_markdown()
    assert [(f.policy, f.failed, f.episodes, f.world, f.beta) for f in board.failures()] == [
        (str(policies["broken"]), 6, 6, "cp26-puct-w4-s1", 0.0)]


@pytest.mark.parametrize("command", [
    ["grow", "--task", "sum-difference", "--agent", "builtin", "-W", "2", "--rounds", "2"],
    ["deploy", "--system", "openevolve", "--task", "circle-packing-26", "--policy", "greedy", "--budget", "2"],
    ["openevolve", "run", "--task", "circle-packing-26", "--policy", "greedy", "--iterations", "2"],
    ["dream", "--history", "cp26-puct-w4-s1", "--policy", "greedy"],
])
@pytest.mark.parametrize("seed", ["-1", "4294967296"])
def test_a_seed_no_generator_takes_is_refused_before_anything_is_written(
        command: list[str], seed: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # numpy's legacy seeding (the discovery systems' workers) takes 0 to 2**32 - 1: a negative
    # seed used to fail in the run's first round, its folder made
    out = tmp_path / "never-written"
    with pytest.raises(SystemExit) as refused:
        cli_main([*command, "--seed", seed, "--out", str(out)])
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        f"error: argument --seed: a whole number from 0 to 4294967295, got '{seed}'")
    assert not out.exists()


def test_a_run_config_refuses_a_seed_no_generator_takes(tmp_path: Path) -> None:
    from dream_gym.online.loop import GrowConfig
    from dream_gym.training.trainer import TrainConfig

    for make in (lambda seed: GrowConfig(task="sum-difference", out=tmp_path / "grown", policy="greedy", seed=seed),
                 lambda seed: TrainConfig(seed=seed, out=str(tmp_path / "trained"))):
        for seed in (-1, 2**32, 1.5, True):
            with pytest.raises(ValueError, match="seed must be a whole number from 0 to 4294967295"):
                make(seed)
        assert make(2**32 - 1).seed == 2**32 - 1


def test_deploy_from_python_refuses_a_seed_no_generator_takes(tmp_path: Path) -> None:
    pytest.importorskip("openevolve")
    from dream_gym.integrations.deploy import DeployRequest, deploy

    out = tmp_path / "never-written"
    with pytest.raises(ValueError, match="seed must be a whole number from 0 to 4294967295, got -1"):
        deploy(DeployRequest(system="openevolve", task="circle-packing-26", out=out, seed=-1))
    assert not out.exists()


@pytest.mark.parametrize("command", [
    ["grow", "--task", "sum-difference", "-W", "2", "--rounds", "2", "--agent", "gpt4o"],
    ["dream", "--history", "cp26-puct-w4-s1", "--policy", "greedy", "-M", "2", "--developer", "gpt4o"],
    ["rsi", "--task", "sum-difference", "--policy", "greedy", "-T", "1", "-M", "2", "--developer", "gpt4o"],
])
def test_a_model_no_provider_serves_is_refused_before_anything_is_written(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Found by trying: dream ran its incumbent's phase, failed on the first request, and the
    # corrected command was then refused as "already holds a dream-gym dream run".
    if importlib.util.find_spec("litellm") is None:  # importorskip would import it before dream_gym sets it offline
        pytest.skip("litellm is not installed")
    out = tmp_path / "never-written"
    assert cli_main([*command, "--out", str(out)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.endswith("error: model 'gpt4o': litellm knows no provider for it; name one as provider/model, e.g. "
                         "openai/gpt-4o-mini, or openai/<served-name> with --api-base for an OpenAI-compatible server")
    assert not out.exists()


@pytest.mark.parametrize(("argv", "said"), [
    (["replay", "cp26-fixed-w4-s0", "--polcy", "greedy"],
     "dream-gym replay: error: unrecognized arguments: --polcy; did you mean --policy?"),
    (["worlds", "upload", "me/ds-v1", "--to", "file:///elsewhere"],
     "dream-gym worlds upload: error: unrecognized arguments: --to"),
    # named even where a required option is missing too (argparse said only "required: --task")
    (["grow", "--taks", "sum-difference", "--out", "x"],
     "dream-gym grow: error: unrecognized arguments: --taks; did you mean --task?"),
    # an option is typed whole: --seed ran a study as --seeds
    (["fidelity", "--task", "sum-difference", "-p", "a", "-p", "b", "--seed", "1", "-n", "2", "--out", "x"],
     "dream-gym fidelity: error: unrecognized arguments: --seed; did you mean --seeds?"),
])
def test_an_unknown_option_is_said_by_the_command_typed(argv: list[str], said: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # argparse said these at the top ("dream-gym: error: ..." under the list of every command)
    with pytest.raises(SystemExit) as refused:
        cli_main(argv)
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == said
    assert err.startswith(f"usage: dream-gym {' '.join(argv[:2] if argv[0] == 'worlds' else argv[:1])} ")


@pytest.mark.parametrize("command", [
    ["grow", "--task", "sum-difference", "-W", "2", "--rounds", "2"],
    ["dream", "--history", "cp26-puct-w4-s1", "--policy", "greedy", "-M", "2"],
    ["worlds", "import", str(Path(__file__).parent / "data" / "gepa" / "linear-fit")],
])
@pytest.mark.parametrize("below", ["", "run"])
def test_an_out_that_is_or_runs_through_a_file_names_that_file(
        command: list[str], below: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # it said "[Errno 17] File exists: '...'" (or "[Errno 20] Not a directory")
    in_the_way = tmp_path / "results.txt"
    in_the_way.write_text("kept\n")
    out = in_the_way / below if below else in_the_way
    assert cli_main([*command, "--out", str(out)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    where = f"{out}: " if below else ""
    assert line.endswith(f"error: {where}{in_the_way} is a file, where a folder is wanted (name another path, "
                         "or move the file)")
    assert in_the_way.read_text() == "kept\n"


def test_an_error_of_the_system_is_said_as_its_path_and_what_is_wrong() -> None:
    from dream_gym.cli import error_text

    assert error_text(FileNotFoundError(2, "No such file or directory", "/nowhere/x")) == \
        "/nowhere/x: No such file or directory"
    assert error_text(OSError("no path in this one")) == "no path in this one"
    assert error_text(KeyError("unknown task 'x'; known tasks: a")) == "unknown task 'x'; known tasks: a"


def test_eval_writes_no_progress_bar_into_a_log() -> None:
    """Without a terminal (stderr piped into a log) the bar's last frame was written there."""
    done = dream_gym("eval", "--policy", "greedy", "--worlds", "sd-fixed-s0", "--betas", "0.5", "--summary")
    assert done.returncode == 0 and done.stderr == "" and "Leaderboard" in done.stdout


def test_policy_names_cut_to_the_column_stay_apart() -> None:
    """A file's path cut to the column keeps its end: the files one name in several run folders
    read apart by the folder nearest them (cut in the middle they read the same, out/dre…sen.py);
    two that still read the same have the cut moved to where they differ; other names are cut in
    the middle, and names that fit are whole."""
    from dream_gym.evaluation.leaderboard import shorten_middle, shortened_names

    runs = ["out/dream-doc/chosen.py", "out/dream/chosen.py", "out/dream3/chosen.py", "greedy"]
    assert len({shorten_middle(name, 16) for name in runs[:3]}) == 1  # the collision
    assert shortened_names(runs, 16) == ["…m-doc/chosen.py", "…dream/chosen.py", "…ream3/chosen.py", "greedy"]
    names = ["pol/func_policy.py", "pol/x_func_policy.py", "greedy"]  # the same last 11 characters
    cut = shortened_names(names, 12)
    assert len(set(cut)) == 3 and all(len(name) <= 12 for name in cut) and cut[2] == "greedy"
    spec = "my_project.policies.explore:BeamSearch"
    assert shortened_names([spec], 16) == [shorten_middle(spec, 16)]
    # settings of one spec: each pair is told apart where it differs, though no one cut fits both
    settings = ["mypkg.pols:Deepest(branches=3, budget=12)", "mypkg.pols:Deepest(branches=2, budget=12)",
                "ucb(c=0.5, patience=4)", "ucb(c=1.5, patience=4)", "greedy"]
    assert shortened_names(settings, 15) == ["mypk…hes=3, bu…", "mypk…hes=2, bu…", "ucb(c=0.5, pa…)",
                                             "ucb(c=1.5, pa…)", "greedy"]


@pytest.mark.parametrize("argv", [
    ["grow", "--task", "sum-difference", "--policy", "greedy"],
    ["dream", "--history", "sd-fixed-s0", "--policy", "greedy", "--revisions", "2"],
    ["deploy", "--system", "openevolve", "--task", "sum-difference", "--policy", "greedy", "--budget", "4"],
])
def test_resume_of_a_folder_that_does_not_exist_is_refused(argv: list[str], tmp_path: Path, capsys) -> None:
    """A mistyped folder with --resume started a new run from zero (exit 0, called resumed)."""
    from dream_gym.cli import main

    out = tmp_path / "typo"
    assert main([*argv, "--out", str(out), "--resume"]) == 2
    assert f"nothing to resume: {out} does not exist" in capsys.readouterr().err
    assert not out.exists()


def test_small_errors_say_what_to_do() -> None:
    """A backwards range of seeds said 'got []'; a taken port said only 'Address already in use'."""
    import socket

    from dream_gym.cli.fidelity import parse_seeds
    from dream_gym.online.agent_server import AgentServer

    with pytest.raises(ValueError, match=r"the range '3-1' runs backwards \(write 1-3\)"):
        parse_seeds("3-1")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}: Address already in use"):
            AgentServer("sum-difference", port=port)


def test_a_run_whose_policy_fails_says_where_its_world_is_kept_and_resume_continues_it(tmp_path: Path) -> None:
    """grow (and deploy) left the world of a policy that failed at its first decision, and said only
    the policy's error: the next command into that --out was refused twice (no --resume, then
    another policy). The error says what was kept and how to go on; --resume continues it."""
    policy, out = tmp_path / "mine.py", tmp_path / "world"
    policy.write_text(BROKEN)
    command = ("grow", "--task", "sum-difference", "--agent", "builtin", "--policy", str(policy), "-W", "2",
               "--rounds", "2", "--out", str(out))
    failed = dream_gym(*command)
    assert failed.returncode == 2 and "ValueError: broken" in failed.stderr, failed.stderr
    assert f"what was recorded is kept in {out}: once the policy is fixed, the same command with --resume " \
           "continues it" in " ".join(failed.stderr.split()), failed.stderr
    assert failed.stderr.count("error:") == 1 and (out / "nodes.jsonl").is_file()
    policy.write_text(GOOD)
    resumed = dream_gym(*command, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert " nodes, 2 rounds, " in resumed.stdout and "stopped by rounds" in resumed.stdout, resumed.stdout
    # an error that is not the policy's says nothing of a kept world (none was made)
    refused = dream_gym(*command[:-1], str(tmp_path / "other"), "-W", "0")
    assert refused.returncode == 2 and "kept in" not in refused.stderr


def test_openevolve_task_keeps_files_already_there_unless_forced(tmp_path: Path) -> None:
    """It replaced an edited evaluator.py without a word, where every other command refuses to
    overwrite."""
    first = dream_gym("openevolve", "task", "circle-packing-26", "--out", str(tmp_path))
    assert first.returncode == 0, first.stderr
    evaluator = tmp_path / "evaluator.py"
    evaluator.write_text(evaluator.read_text() + "# mine\n")
    again = dream_gym("openevolve", "task", "circle-packing-26", "--out", str(tmp_path))
    assert again.returncode == 2 and "holds initial_program.py, evaluator.py already; pass --force" in again.stderr
    assert evaluator.read_text().endswith("# mine\n")
    forced = dream_gym("openevolve", "task", "circle-packing-26", "--out", str(tmp_path), "--force")
    assert forced.returncode == 0 and not evaluator.read_text().endswith("# mine\n")


def test_every_task_option_lists_the_registered_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    """The help of a --task names every built-in task (grow's said "circle-packing-26,
    sum-difference, ..." and the others fewer; the list came only with an unknown name's error)."""
    from dream_gym.cli.options import BUILTIN_TASKS
    from dream_gym.online.tasks import list_tasks

    assert BUILTIN_TASKS == ", ".join(list_tasks())
    for verb in (["grow"], ["deploy"], ["rsi"], ["serve-agent"], ["fidelity"], ["openevolve", "task"]):
        with pytest.raises(SystemExit):
            cli_main([*verb, "--help"])
        shown = "".join(capsys.readouterr().out.split())  # argparse may wrap a name at its hyphens
        assert all(name in shown for name in list_tasks()), verb


def test_a_repeated_world_option_adds_its_worlds_and_output_options_that_clash_are_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`eval -w a -w b` evaluated b alone (the second -w replaced the first, without a word);
    `replay --json --tree` printed JSON then a tree (no JSON reader took it); `worlds show --json
    --plot` left the plot out; `dream -p` was refused though `-p` is --policy in eval and grow."""
    assert cli_main(["eval", "-p", "greedy", "-w", "cp26-fixed-s0", "-w", "cp26-greedy-s0", "--betas", "0.5",
                     "--no-progress"]) == 0
    assert "mean over 2 worlds" in capsys.readouterr().out
    for argv, clash in ((["replay", "cp26-fixed-s0", "--json", "--tree"], "argument --tree: not allowed with argument "
                                                                          "--json"),
                        (["worlds", "show", "cp26-fixed-s0", "--json", "--plot", "x.png"],
                         "argument --plot: not allowed with argument --json")):
        with pytest.raises(SystemExit) as refused:
            cli_main(argv)
        assert refused.value.code == 2 and capsys.readouterr().err.rstrip().endswith(clash)
    from dream_gym.cli import build_parser, command_parser

    for command in ("dream", "rsi", "deploy"):
        parser = command_parser(build_parser(command), [command])
        assert next(a for a in parser._actions if a.dest == "policy").option_strings == ["--policy", "-p"]


def test_resume_of_an_import_into_no_folder_and_a_missing_config_are_refused_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`worlds import --resume` into a folder that does not exist imported there, exit 0, as a
    resume (`--out` was read as text, which the check of every other --resume skipped); `openevolve
    run --config /missing` wrote the task's files into --out, then refused, and the same command
    with --resume then started a new run there."""
    out = tmp_path / "new"
    assert cli_main(["worlds", "import", str(Path(__file__).parent / "data" / "shinka_task"), "--out", str(out),
                     "--resume"]) == 2
    assert capsys.readouterr().err.strip() == (f"dream-gym worlds import: error: nothing to resume: {out} does not "
                                                "exist (leave out --resume to start a run there)")
    assert cli_main(["openevolve", "run", "--task", "sum-difference", "--iterations", "2", "--config",
                     str(tmp_path / "missing.yaml"), "--out", str(out)]) == 2
    assert f"--config {tmp_path / 'missing.yaml'}: no such file" in capsys.readouterr().err
    assert not out.exists()


def test_a_folder_that_cannot_be_written_or_read_says_what_is_kept_once_and_no_more(tmp_path: Path) -> None:
    """A disk full or a folder made read-only ended a run with a bare ``[Errno 28] No space left on
    device`` or the lock file's error, and no word of what was kept. An --out that cannot even be
    listed then ended in a traceback (the hint listed it again, inside the error handler), and an
    input that cannot be read (a world) got "kept …: --resume continues it", which no resume would
    mend. Run without the capability that lets root write and read anywhere."""
    as_root = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"] if os.geteuid() == 0 else []
    out = tmp_path / "world"
    command = ("grow", "--task", "sum-difference", "-W", "2", "--out", str(out), "--quiet")
    assert dream_gym(*command, "--rounds", "1").returncode == 0
    kept = (out / "nodes.jsonl").read_bytes()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*as_root, sys.executable, "-m", "dream_gym", *args], capture_output=True, text=True,
                              timeout=300)

    for path in [out, *out.iterdir()]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        read_only = run(*command, "--rounds", "4", "--resume")
        out.chmod(0o000)
        unreadable = run(*command, "--rounds", "4", "--resume")
        evaluated = run("eval", "-p", "greedy", "-w", str(out), "--betas", "0.5", "--out", str(tmp_path / "r.jsonl"))
    finally:
        out.chmod(0o755)
        for path in out.iterdir():
            path.chmod(0o755 if path.is_dir() else 0o644)
    for done in (read_only, unreadable, evaluated):
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.count("error:") == 1 and "Permission denied" in done.stderr, done.stderr
    assert f"what was finished is kept in {out}: once it can be written, the same command with --resume continues " \
           "it" in " ".join(read_only.stderr.split()), read_only.stderr
    assert "kept in" not in evaluated.stderr  # the world is an input of eval: nothing of the run is kept
    assert (out / "nodes.jsonl").read_bytes() == kept
