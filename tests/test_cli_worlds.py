"""``dream-gym worlds ...`` in-process."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from dream_gym.cli import main
from dream_gym.world.tree import load_world
from dream_gym.world.writer import new_meta, write_world

EXTERNAL = Path(__file__).resolve().parents[2] / "shared" / "external-runs" / "openevolve"
SHINKA = EXTERNAL.parent / "shinkaevolve"


def make_world(folder: Path, world_id: str) -> Path:
    records = [{"id": "root", "parent": None, "score": 1.0, "code": f"# {world_id}"},  # two runs, not one twice
               {"id": "n1", "parent": "root", "score": 2.0, "round": 1},
               {"id": "n2", "parent": "n1", "score": None, "round": 2, "error": "boom"}]
    return write_world(folder, new_meta(world_id, "toy"), records)


@pytest.fixture()
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("DREAM_GYM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DREAM_GYM_SHIPPED", str(tmp_path / "none"))
    return tmp_path


def test_pack_takes_a_folder_of_worlds_and_held_out_names_split_on_commas(env, capsys):
    """As --worlds and --betas take them: a folder of worlds packed each, "a,b" two names (it
    was one name, unknown; the folder was read as a world without world.json)."""
    for name in ("world-a", "world-b", "world-c"):
        make_world(env / "many" / name, name)
    assert main(["worlds", "pack", str(env / "many"), "--id", "me/many-v0", "--held-out", "world-a,world-c"]) == 0
    assert "packed 3 world(s) as me/many-v0" in capsys.readouterr().out
    assert main(["worlds", "show", "me/many-v0", "--json"]) == 0
    split = json.loads(capsys.readouterr().out)["dataset"]["split"]
    assert split == {"train": ["world-b"], "held_out": ["world-a", "world-c"]}


def test_held_out_before_the_world_folders_takes_one_name_an_option(env, capsys):
    """``--held-out W FOLDER...`` read the folders as held-out names too (a list option before the
    positional ones), and then said no world folder was given."""
    for name in ("world-a", "world-b", "world-c"):
        make_world(env / name, name)
    folders = [str(env / name) for name in ("world-a", "world-b", "world-c")]
    assert main(["worlds", "pack", "--held-out", "world-a", "--held-out", "world-b", *folders, "--id", "me/order-v0"]) == 0
    assert "packed 3 world(s) as me/order-v0" in capsys.readouterr().out
    assert main(["worlds", "show", "me/order-v0", "--json"]) == 0
    split = json.loads(capsys.readouterr().out)["dataset"]["split"]
    assert split == {"train": ["world-c"], "held_out": ["world-a", "world-b"]}


def test_an_id_without_its_version_is_the_newest_version_in_every_command(env, capsys, monkeypatch):
    """``me/toy`` is me/toy-v1 wherever a dataset id is taken (``worlds show`` without --json
    was a traceback; stats, eval, replay and gym.make took only ``me/toy-v1``)."""
    import gymnasium as gym

    import dream_gym  # noqa: F401  (registers the envs)

    make_world(env / "a", "world-a")
    make_world(env / "b", "world-b")
    assert main(["worlds", "pack", str(env / "a"), "--id", "me/toy-v0"]) == 0
    assert main(["worlds", "pack", str(env / "a"), str(env / "b"), "--id", "me/toy-v1", "--held-out", "world-b"]) == 0
    capsys.readouterr()
    assert main(["worlds", "show", "me/toy"]) == 0
    assert capsys.readouterr().out.startswith("dataset me/toy-v1")
    assert main(["worlds", "validate", "me/toy"]) == 0
    assert "OK: dataset me/toy-v1" in capsys.readouterr().out
    assert main(["worlds", "stats", "me/toy", "--json"]) == 0
    assert [w["world_id"] for w in json.loads(capsys.readouterr().out)] == ["world-a", "world-b"]
    assert main(["worlds", "stats", "me/toy:held_out", "--json"]) == 0
    assert [w["world_id"] for w in json.loads(capsys.readouterr().out)] == ["world-b"]
    assert main(["worlds", "stats", "me/toy", "--rows"]) == 2  # it printed the table without rows, silently
    assert "--rows lays out the --markdown table" in capsys.readouterr().err
    assert main(["replay", "me/toy/world-b", "--policy", "greedy"]) == 0
    capsys.readouterr()
    # the version a result was measured on is said (eval's leaderboard named no dataset)
    assert main(["eval", "-p", "greedy", "--worlds", "me/toy", "--betas", "0.5", "--no-progress", "--summary"]) == 0
    assert "note: me/toy is me/toy-v1, its newest version here" in capsys.readouterr().err
    assert main(["worlds", "show", "me/toy/world-b"]) == 0
    assert capsys.readouterr().out.startswith("world world-b")
    env_ = gym.make("DreamGym/Replay-v1", world="me/toy/world-b")
    assert env_.unwrapped.world.id == "world-b"
    monkeypatch.chdir(env)
    assert main(["worlds", "stats", "me/none"]) == 2
    err = capsys.readouterr().err
    assert f"me/none: no such folder ({env / 'me' / 'none'}), and no version of dataset me/none" in err


def test_pack_list_show_validate_share_delete(env, capsys):
    a = make_world(env / "a", "world-a")
    b = make_world(env / "b", "world-b")
    assert main(["worlds", "list"]) == 0
    assert "no datasets" in capsys.readouterr().out
    assert main(["worlds", "pack", str(a), str(b), "--id", "me/toy-v0", "--description", "toys",
                 "--held-out", "world-b"]) == 0
    assert "packed 2 world(s) as me/toy-v0" in capsys.readouterr().out
    assert main(["worlds", "list"]) == 0
    assert "me/toy-v0" in capsys.readouterr().out
    assert main(["worlds", "show", "me/toy-v0", "--plot", str(env / "plots")]) == 0
    out = capsys.readouterr().out
    assert "dataset me/toy-v0" in out and "split held_out" in out and "world world-a" in out
    assert re.search(r"^  created     20\d\d-\d\d-\d\dT", out, re.M)  # when it was packed
    assert (env / "plots" / "world-a.png").is_file()
    assert main(["worlds", "show", "me/toy-v0/world-a", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nodes"] == 3
    assert main(["worlds", "show", "me/toy-v0", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["dataset"]["id"] == "me/toy-v0" and shown["worlds"]["world-b"]["nodes"] == 3
    assert main(["worlds", "validate", "me/toy-v0"]) == 0
    assert "OK: dataset me/toy-v0" in capsys.readouterr().out
    remote = f"file://{env / 'remote'}"
    assert main(["worlds", "upload", "me/toy-v0", "--remote", remote]) == 0
    assert main(["worlds", "list", "--remote", remote]) == 0
    assert "me/toy-v0" in capsys.readouterr().out
    assert main(["worlds", "delete", "me/toy-v0"]) == 0
    capsys.readouterr()
    assert main(["worlds", "show", "me/toy-v0/world-a"]) == 2
    assert "dream-gym worlds download me/toy-v0 --remote" in capsys.readouterr().err
    assert main(["worlds", "download", "me/toy-v0", "--remote", remote]) == 0
    assert "every sha256 verified" in capsys.readouterr().out


def test_errors_are_exit_code_2_with_messages(env, capsys):
    assert main(["worlds", "pack", str(make_world(env / "a", "world-a")), "--id", "bad-id"]) == 2
    assert "namespace/name-vN" in capsys.readouterr().err
    assert main(["worlds", "delete", "me/none-v0"]) == 2
    assert "not in the local store" in capsys.readouterr().err
    assert main(["worlds", "validate", str(env / "nothing")]) == 2
    assert "nothing" in capsys.readouterr().err
    assert main(["worlds", "download", "me/none-v0", "--remote", f"file://{env / 'empty'}"]) == 2
    assert "empty: no such folder" in capsys.readouterr().err  # a mistyped remote, not a missing dataset
    (env / "empty").mkdir()
    assert main(["worlds", "download", "me/none-v0", "--remote", f"file://{env / 'empty'}"]) == 2
    assert "not at remote" in capsys.readouterr().err
    assert not (env / "home" / "datasets" / "me").exists()  # the namespace's folder made for it is gone


def test_show_a_world_folder_with_plot(env, capsys):
    world = make_world(env / "a", "world-a")
    assert main(["worlds", "show", str(world), "--plot", str(env / "t.png")]) == 0
    out = capsys.readouterr().out
    assert "scored           1/2" in out and (env / "t.png").is_file()


@pytest.mark.usefixtures("external_runs")
def test_import_real_openevolve_run(env, capsys):
    out = env / "fnmin"
    assert main(["worlds", "import", "--from", "openevolve", str(EXTERNAL / "fnmin-mig_fast_config_s42"),
                 "--out", str(out), "--id", "fnmin"]) == 0
    text = capsys.readouterr().out
    assert "migrant and island copies collapsed 18" in text and "frontier 'any'" in text
    assert "world fnmin  (task" in text and "stopped leaves" in text  # the coverage report follows
    assert "World statistics" in text and "oracle limit V*" in text and "successive new bests" in text
    assert main(["worlds", "validate", str(out)]) == 0
    # W is the run's own (config_used.yaml: evaluator.parallel_evaluations 4); --resume finds it done
    assert load_world(out).workers == 4 and "note: W 4: evaluator.parallel_evaluations in " in text
    command = ["worlds", "import", str(EXTERNAL / "fnmin-mig_fast_config_s42"), "--out", str(out), "--id", "fnmin"]
    assert main(command) == 2 and "output folder exists and is not empty" in capsys.readouterr().err
    assert main([*command, "--resume"]) == 0 and "holds the world imported from" in capsys.readouterr().out
    assert main([*command, "--resume", "-W", "2"]) == 2 and "with W 4, not 2" in capsys.readouterr().err
    assert main(["worlds", "import", "--from", "openevolve", str(EXTERNAL / "fnmin-islands10_config_s42"),
                 "--out", str(env / "f10"), "--metric", "nope"]) == 2
    assert "overall_score" in capsys.readouterr().err


@pytest.mark.usefixtures("external_runs")
def test_import_recognises_the_system_and_refuses_the_wrong_one(env, capsys):
    run = SHINKA / "macaulay2-resurgence"
    assert main(["worlds", "import", "--from", "openevolve", str(run), "--out", str(env / "x")]) == 2
    assert "import it with --from shinkaevolve" in capsys.readouterr().err
    assert main(["worlds", "import", str(run), "--out", str(env / "m2")]) == 0
    text = capsys.readouterr().out
    assert "imported ShinkaEvolve run" in text and "nodes written 41 (scored 13, invalid 28)" in text


@pytest.mark.parametrize("command", [
    ["worlds", "show", "dream-gym/recorded-v1"], ["replay", "cp26-fixed-w4-s0", "--policy", "greedy"],
    # printed by rich, which ended such a process with status 1 (the status of failed episodes)
    ["eval", "--policy", "greedy", "--worlds", "sd-fixed-w4-s0", "--betas", "0", "-j", "1"],
    ["worlds", "stats", "sd-fixed-w4-s0"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(command):
    """``dream-gym ... | head``: a reader that closed its end ends the command with a shell's
    status for SIGPIPE (141) and nothing on stderr, not ``error: [Errno 32] Broken pipe``."""
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line
    try:
        done = subprocess.run([sys.executable, "-m", "dream_gym", *command], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    assert done.returncode == 141 and done.stderr == "", (done.returncode, done.stderr)


def test_a_dataset_without_its_creation_time_says_so(capsys):
    assert main(["worlds", "show", "dream-gym/recorded-v0"]) == 0  # built before datasets recorded it
    assert "\n  created     not recorded\n" in capsys.readouterr().out


def test_compress_refuses_a_world_of_a_packed_dataset(env, capsys):
    """Its dataset.json lists nodes.jsonl and its sha256: compressed in place, the dataset no longer
    validated or uploaded, while the world still loaded."""
    make_world(env / "a", "world-a")
    assert main(["worlds", "pack", str(env / "a"), "--id", "me/cmp-v0"]) == 0
    inside = env / "home" / "datasets" / "me" / "cmp-v0" / "world-a"
    before = sorted(p.name for p in inside.iterdir())
    capsys.readouterr()
    assert main(["worlds", "compress", str(inside)]) == 2
    assert "is a world of a packed dataset" in capsys.readouterr().err
    assert sorted(p.name for p in inside.iterdir()) == before
    assert main(["worlds", "validate", "me/cmp-v0"]) == 0
    assert main(["worlds", "compress", str(env / "a")]) == 0  # a world folder of its own: compressed


def test_an_empty_split_is_named(env, capsys):
    make_world(env / "a", "world-a")
    assert main(["worlds", "pack", str(env / "a"), "--id", "me/one-v0"]) == 0  # no held-out world
    capsys.readouterr()
    assert main(["eval", "--policy", "greedy", "--worlds", "me/one-v0:held_out", "--no-progress"]) == 2
    assert "dataset me/one-v0 has no world in its held_out split" in capsys.readouterr().err


def test_a_worlds_id_cannot_place_its_plot_outside_the_folder_given(env, capsys):
    """An id is its author's text: ``../victim/planted`` or an absolute id wrote the plot outside
    the folder, creating folders on the way; and ``$\\frac...$`` was drawn as mathtext."""
    for world_id, name in (("../victim/planted", "victim_planted.png"), (f"{env}/abs/planted", None),
                           ("$\\frac{a}{b}$", "frac_a_b_.png")):
        world = make_world(env / "hostile", world_id)
        assert main(["worlds", "show", str(world), "--plot", str(env / "plots")]) == 0
        written = capsys.readouterr().out.rsplit("tree plot written to ", 1)[1].strip()
        assert Path(written).parent == env / "plots" and (name is None or Path(written).name == name)
        shutil.rmtree(env / "hostile")
    assert not (env / "victim").exists() and not (env / "abs").exists()


def test_show_plot_writes_where_it_says(env, capsys, monkeypatch):
    """A folder given for a world's plot got plots.png beside it; a file in a new folder failed."""
    world = make_world(env / "a", "world-a")
    monkeypatch.chdir(env)
    (env / "plots").mkdir()
    for given, written in (("plots", env / "plots" / "world-a.png"), ("newdir/tree.png", env / "newdir" / "tree.png"),
                           ("figs", env / "figs" / "world-a.png")):
        assert main(["worlds", "show", str(world), "--plot", given]) == 0
        assert written.is_file() and f"tree plot written to {written.relative_to(env)}" in capsys.readouterr().out
    assert not (env / "plots.png").exists()
    assert main(["worlds", "show", str(world), "--plot", "newdir/tree.png"]) == 0  # its own plot: replaced
    capsys.readouterr()
    (env / "notes.png").write_text("not an image")  # anything else named .png was replaced
    assert main(["worlds", "show", str(world), "--plot", "notes.png"]) == 2
    said = capsys.readouterr().err
    assert "notes.png exists and is not a PNG image" in said and said.count("error:") == 1
    assert (env / "notes.png").read_text() == "not an image"


def test_show_and_validate_of_a_folder_of_worlds_say_what_it_is(env, capsys):
    """A folder import's --out holds worlds: show and validate said its world.json was missing and
    suggested importing it."""
    make_world(env / "all" / "a", "world-a")
    make_world(env / "all" / "b", "world-b")
    for verb in ("show", "validate"):
        assert main(["worlds", verb, str(env / "all")]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"{env / 'all'} is a folder of 2 world(s), not one world or a dataset" in err
        assert f"dream-gym worlds stats {env / 'all'}" in err and "worlds import" not in err
    assert main(["worlds", "stats", str(env / "all"), "--json"]) == 0


def test_validate_takes_a_shipped_worlds_name_as_show_does(capsys):
    assert main(["worlds", "validate", "cp26-fixed-w4-s0"]) == 0
    assert "1 world(s): cp26-fixed-w4-s0 (" in capsys.readouterr().out
    assert main(["worlds", "validate", "no-such-world"]) == 2
    assert "or a shipped world's name" in capsys.readouterr().err


def test_list_of_a_folder_gives_each_worlds_nodes_w_run_and_task_and_why_one_does_not_load(env, capsys):
    """``worlds list FOLDER`` (an import's --out): it was "unrecognized arguments"."""
    from dream_gym.world.writer import WorldWriter

    make_world(env / "runs" / "a", "a")
    with WorldWriter.create(env / "runs" / "deep" / "b", new_meta("b", "other", workers=3)) as writer:
        writer.append({"id": "root", "parent": None, "score": 1.0, "code": "x = 1"})  # a run still writing it
    (env / "runs" / "c").mkdir()
    (env / "runs" / "c" / "world.json").write_text("[1]")
    assert main(["worlds", "list", str(env / "runs")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split() for line in lines[:3]] == [["nodes", "W", "run", "world", "(task)"],
                                                     ["3", "1", "finished", "a", "(toy)"],
                                                     ["-", "-", "BROKEN", "c:", *lines[2].split()[4:]]]
    assert lines[2].endswith("c/world.json: must hold a JSON object, got list")
    assert lines[3].split() == ["1", "3", "unfinished", "deep/b", "(other)"]
    assert main(["worlds", "list", str(env / "runs" / "a")]) == 0  # a world itself
    assert capsys.readouterr().out.splitlines()[1].split() == ["3", "1", "finished", str(env / "runs" / "a"), "(toy)"]
    assert main(["worlds", "list", str(env / "absent")]) == 2
    assert capsys.readouterr().err.strip() == f"dream-gym worlds list: error: {env / 'absent'}: no such folder"
    assert main(["worlds", "list", str(env / "runs" / "a" / "world.json")]) == 2
    assert capsys.readouterr().err.strip().endswith("a/world.json: not a folder")
    assert main(["worlds", "list", str(env / "runs"), "--remote"]) == 2
    assert capsys.readouterr().err.strip() == "dream-gym worlds list: error: give a FOLDER or --remote, not both"


def test_validate_of_a_folder_that_is_no_world_names_world_json_and_the_import(env, capsys):
    (env / "task").mkdir()
    assert main(["worlds", "validate", str(env / "task")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"dream-gym worlds validate: error: {env / 'task' / 'world.json'}: missing (a world folder holds world.json and "
        f"nodes.jsonl; a discovery run's output becomes one with: dream-gym worlds import {env / 'task'} --out "
        "WORLD_FOLDER)")
    assert main(["worlds", "validate", str(env / "absent")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"dream-gym worlds validate: error: {env / 'absent'}: no such folder, nor a dataset id, a dataset's world "
        "(namespace/name-vN/world) or a shipped world's name")


def test_the_files_eval_is_told_to_write_are_written_when_its_reader_goes_away(tmp_path):
    """``eval ... --markdown board.md | head -1``: the leaderboard's file was written after the table,
    so a reader that stopped early ended the command before it (exit 141, no file, nothing said)."""
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "dream_gym", "eval", "--policy", "greedy", "--worlds",
                               "sd-fixed-w4-s0", "--betas", "0", "-j", "1", "--markdown", str(tmp_path / "board.md"),
                               "--out", str(tmp_path / "results.jsonl")],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    assert done.returncode == 141 and done.stderr == "", (done.returncode, done.stderr)
    assert "| greedy |" in (tmp_path / "board.md").read_text()
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 1


def test_pack_and_validate_say_which_worlds_are_not_finished_and_what_pack_leaves(env, capsys):
    """An unfinished world (a run stopped by an unreachable LLM) was packed and validated without
    a word, while compress refused it; pack left out grow's evidence and summary without a word."""
    from dream_gym.world.writer import WorldWriter

    make_world(env / "many" / "done", "done")
    with WorldWriter.create(env / "many" / "stopped", new_meta("stopped", "toy")) as writer:
        writer.append({"id": "root", "parent": None, "score": 1.0, "code": "# stopped"})
    assert main(["worlds", "validate", str(env / "many" / "stopped")]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "note: not finished (world.json holds no checksum: its run stopped before its end, or is running): stopped")
    assert main(["worlds", "pack", str(env / "many"), "--id", "me/mixed-v0"]) == 0
    done = capsys.readouterr()
    assert done.out.splitlines()[1].startswith("  each world's world.json and nodes file; its other files")
    assert done.err.strip().endswith("or is running): " + str(env / "many" / "stopped"))
    assert main(["worlds", "validate", "me/mixed-v0"]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith("or is running): stopped")
