"""Text from worlds, datasets and remotes never drives the terminal.

Worlds and datasets written for these tests hold, in their id, task name, description, author,
licence and node errors, the escapes a terminal acts on: OSC 52 (writes the clipboard), OSC 0
(sets the window title), ``ESC [2J`` (clears the screen), the 8-bit CSI ``0x9b``, BEL, CR and
U+202E (reverses what follows); and names of a megabyte. The real ``dream-gym`` commands run on
them in a subprocess; what reaches stdout and stderr must hold none of those characters, show
their escaped form instead, and keep every line short. A well-named world is the control: its
non-ASCII id prints unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from dream_gym.cli.shown import LINE_CHARS
from dream_gym.datasets.packing import pack
from dream_gym.datasets.store import local_path
from dream_gym.world.writer import new_meta, write_world

DREAM_GYM = str(Path(sys.executable).with_name("dream-gym"))

OSC52 = "\x1b]52;c;c2VjcmV0\x07"
OSC0 = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
CSI8 = "\x9b31m"
HOSTILE = f"h{OSC52}{OSC0}{CLEAR}{CSI8}\x07bell\rcr\u202eevil"
#: What each attack looks like once escaped: visible text.
ESCAPED = ["\\x1b]52;c;c2VjcmV0\\x07", "\\x1b]0;pwned\\x07", "\\x1b[2J", "\\x9b31m", "\\x07bell", "\\x0dcr", "\\u202eevil"]
BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
MEGABYTE = 1_000_000
#: The longest line any command may print: a line of a report (dream_gym.cli.shown.LINE_CHARS) and its cut marker.
LONGEST_LINE = LINE_CHARS + 50
GOOD_ID = "good-world-é-漢字-🙂"
GOOD_TASK = "tâche-漢字"


def make_world(folder: Path, world_id: str, task: str = "toy", *, error: str = "boom", licence: str = "CC-BY-4.0") -> Path:
    records = [{"id": "root", "parent": None, "score": 1.0, "code": f"# {world_id}"},  # two runs, not one twice
               {"id": "n1", "parent": "root", "score": 2.0, "round": 1},
               {"id": "n2", "parent": "n1", "score": None, "round": 2, "error": error}]
    meta = new_meta(world_id, task, description=HOSTILE)
    meta["licence"] = licence
    return write_world(folder, meta, records)


def hostile_world(folder: Path, prefix: str = "w") -> Path:
    return make_world(folder, prefix + HOSTILE, "task" + HOSTILE, error="error" + HOSTILE, licence=HOSTILE)


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DREAM_GYM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DREAM_GYM_SHIPPED", str(tmp_path / "none"))
    monkeypatch.delenv("DREAM_GYM_REMOTE", raising=False)
    return tmp_path


def run(*args: str, columns: int = 200, status: int = 0) -> str:
    """``dream-gym ARGS`` in a subprocess; check that neither stdout nor stderr could drive a
    terminal and that every line is short; return both, decoded."""
    env = {**os.environ, "COLUMNS": str(columns)}
    done = subprocess.run([DREAM_GYM, *args], capture_output=True, env=env, timeout=300)
    for stream in (done.stdout, done.stderr):
        assert_inert(stream)
    out = done.stdout.decode("utf-8") + done.stderr.decode("utf-8")
    assert done.returncode == status, out
    return out


def assert_inert(stream: bytes) -> None:
    for byte in (b"\x1b", b"\x07", b"\r"):
        assert byte not in stream, f"{byte!r} reached the terminal: {stream[:300]!r}"
    text = stream.decode("utf-8")
    controls = {c for c in text if unicodedata.category(c) == "Cc" and c != "\n"} | (BIDI & set(text))
    assert not controls, f"{sorted(controls)} reached the terminal"
    longest = max(len(line) for line in text.split("\n"))
    assert longest <= LONGEST_LINE, f"a line of {longest} characters"


def assert_escaped(out: str) -> None:
    for escaped in ESCAPED:
        assert escaped in out, f"{escaped} is not shown"


# --------------------------------------------------------------------------- worlds


@pytest.mark.parametrize("command", [["worlds", "validate"], ["worlds", "show"], ["worlds", "stats"],
                                     ["worlds", "stats", "--markdown"]], ids=" ".join)
def test_a_hostile_world_is_shown_escaped(home, command):
    world = hostile_world(home / "hostile")
    out = run(*command, str(world), columns=1000)
    assert_escaped(out)
    assert "wh\\x1b]52;c;" in out  # the world's id, escaped
    if command != ["worlds", "validate"]:
        assert "taskh\\x1b]52;c;" in out  # and its task name


@pytest.mark.parametrize("command", [["worlds", "validate"], ["worlds", "show"], ["worlds", "stats"],
                                     ["worlds", "stats", "--markdown"]], ids=" ".join)
def test_a_megabyte_name_is_cut_with_its_length(home, command):
    world = make_world(home / "big", "b" * MEGABYTE + OSC0, "t" * MEGABYTE)
    out = run(*command, str(world), columns=1000)  # run() checks that no line is long
    assert f"b... [cut: {MEGABYTE + len(OSC0)} characters in all]" in out
    if command != ["worlds", "validate"]:
        assert f"t... [cut: {MEGABYTE} characters in all]" in out


def test_a_well_named_world_prints_unchanged(home):
    """The control: letters, CJK and emoji are text, not controls; they are shown as they are."""
    world = make_world(home / "good", GOOD_ID, GOOD_TASK)
    assert f"{GOOD_ID} (3 nodes)" in run("worlds", "validate", str(world))
    shown = run("worlds", "show", str(world))
    assert f"world {GOOD_ID}  (task {GOOD_TASK}," in shown and "\\x" not in shown
    stats = run("worlds", "stats", str(world))
    assert GOOD_ID in stats and GOOD_TASK in stats
    replayed = run("replay", str(world), "--policy", "greedy", "--tree")
    assert f"world {GOOD_ID}  policy greedy" in replayed and "[boom]" in replayed


def test_replay_escapes_the_world_id_and_the_recorded_errors_of_its_tree(home):
    world = hostile_world(home / "hostile")
    out = run("replay", str(world), "--policy", "greedy", "--tree")
    assert "world wh\\x1b]52;c;c2VjcmV0\\x07" in out
    assert "[errorh\\x1b]52;c;c2VjcmV0\\x07" in out  # the node's recorded error, escaped and cut


def test_eval_tables_escape_world_ids(home):
    first, second = hostile_world(home / "a", "a"), hostile_world(home / "b", "b")
    out = run("eval", "--policy", "greedy", "--worlds", f"{first},{second}", "--betas", "0.5", "-j", "1",
              "--no-progress", columns=1000)
    titles = " ".join(line.strip() for line in out.splitlines())  # a title may wrap at its table's width
    assert "World ah\\x1b]52;c;c2VjcmV0\\x07" in titles and "World bh\\x1b]52;c;c2VjcmV0\\x07" in titles
    assert_escaped(titles)


def test_markup_in_a_world_id_is_shown_as_text_not_read(home):
    """rich reads ``[...]`` in strings as markup: ``[link=...]`` would write an OSC 8 hyperlink and
    an unmatched ``[/x]`` stops the command with MarkupError. Tables show ids as plain Text."""
    markup = "m[/x][link=https://example.invalid]click[/link][bold]"
    first, second = make_world(home / "a", markup + "1"), make_world(home / "b", markup + "2")
    for out in (run("worlds", "stats", str(first), str(second), columns=1000),
                run("eval", "--policy", "greedy", "--worlds", f"{first},{second}", "--betas", "0.5", "-j", "1",
                    "--no-progress", columns=1000)):
        assert markup + "1" in out and markup + "2" in out


def test_tables_still_fit_80_columns(home):
    first, second = hostile_world(home / "a", "a"), make_world(home / "b", "b" * MEGABYTE)
    for out in (run("worlds", "stats", str(first), str(second), columns=80),
                run("eval", "--policy", "greedy", "--worlds", f"{first},{second}", "--betas", "0.5", "-j", "1",
                    "--no-progress", columns=80)):
        assert max(len(line) for line in out.splitlines()) <= 80


def test_the_stats_legend_wraps_at_the_terminals_width_not_the_tables(home):
    world = make_world(home / "w", "w")
    lines = run("worlds", "stats", str(world), columns=80).splitlines()
    legend = next(i for i, line in enumerate(lines) if "0 = baseline" in line)
    # a paragraph from the left margin, not a column as narrow as the table, centred under it
    assert lines[legend].startswith("q: 0 = baseline") and len(lines[legend]) > 70, lines
    assert max(len(line) for line in lines) <= 80


def test_an_error_naming_a_hostile_folder_is_escaped(home):
    """A folder unpacked from elsewhere may carry escapes in its name; the error that names it
    (here: a world whose nodes file is missing) shows them escaped, on one line."""
    folder = home / f"run{OSC0}{CLEAR}"
    make_world(folder, "w")
    (folder / "nodes.jsonl").unlink()
    out = run("worlds", "validate", str(folder), status=2)
    assert "error: " in out and "run\\x1b]0;pwned\\x07\\x1b[2J" in out and "nodes.jsonl: missing" in out


def test_an_imported_run_is_shown_escaped(home):
    """``worlds import`` names the world's task after the run's folder: a folder unpacked from
    elsewhere may carry escapes in its name; the summary, the coverage report and the statistics
    table show them escaped."""
    from openevolve_runs import write_resumed_run

    run_folder = home / f"run{OSC52}{OSC0}{CLEAR}{CSI8}"
    write_resumed_run(run_folder, iterations=(6, 4), resume_at=(5,))
    out = run("worlds", "import", "--from", "openevolve", str(run_folder), "--out", str(home / "imported"),
              columns=1000)
    assert "imported OpenEvolve run " in out and f"run{OSC52}" not in out
    assert "(task run\\x1b]52;c;c2VjcmV0\\x07\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m," in out


def test_json_output_keeps_values_whole_and_escaped_by_json(home):
    world = hostile_world(home / "hostile")
    done = subprocess.run([DREAM_GYM, "worlds", "show", str(world), "--json"], capture_output=True, timeout=300,
                          env={**os.environ})
    assert done.returncode == 0 and b"\x1b" not in done.stdout and b"\x07" not in done.stdout
    assert json.loads(done.stdout)["world_id"] == "w" + HOSTILE  # the data itself is unchanged


# --------------------------------------------------------------------------- datasets


def test_dataset_fields_are_escaped_by_list_and_show(home):
    pack([make_world(home / "src" / "okid", "okid", "task" + HOSTILE)], "me/hostile-v0",
         description="d" + HOSTILE, author="a" + HOSTILE, licence="l" + HOSTILE)
    listed = run("worlds", "list")
    assert "me/hostile-v0" in listed and "1 world(s)\n    dh\\x1b]52;c;" in listed
    assert_escaped(listed)
    shown = run("worlds", "show", "me/hostile-v0", columns=1000)
    for field, first in (("description", "d"), ("author", "a"), ("licence", "l")):
        assert f"{field:<11} {first}h\\x1b]52;c;c2VjcmV0\\x07" in shown
    assert "(task taskh\\x1b]52;c;" in shown
    assert "OK: dataset me/hostile-v0" in run("worlds", "validate", "me/hostile-v0")


def test_a_megabyte_description_is_cut(home):
    pack([make_world(home / "src" / "okid", "okid")], "me/big-v0", description="d" * MEGABYTE)
    assert f"[cut: {MEGABYTE} characters in all]" in " ".join(run("worlds", "list").split())
    assert f"[cut: {MEGABYTE} characters in all]" in run("worlds", "show", "me/big-v0")


def test_the_listing_wraps_a_description_within_80_columns(home):
    words = " ".join(f"word{i}" for i in range(40))  # 308 characters: wrapped whole, under its cut
    pack([make_world(home / "src" / "okid", "okid")], "me/long-v0", description=words)
    out = run("worlds", "list", columns=80)
    lines = [line for line in out.splitlines() if line]
    assert lines[0].split() == ["me/long-v0", "local", "1", "world(s)"]
    assert all(len(line) <= 80 for line in lines) and all(line.startswith("    ") for line in lines[1:])
    assert " ".join(" ".join(lines[1:]).split()) == words


def test_a_broken_dataset_is_listed_escaped(home):
    folder = home / "home" / "datasets" / "me" / f"bad{OSC0}-v0"
    folder.mkdir(parents=True)
    (folder / "dataset.json").write_text(json.dumps({"format": "dream-gym-dataset/1", "id": "x" + HOSTILE}))
    out = run("worlds", "list")
    assert "me/bad\\x1b]0;pwned\\x07-v0" in out and "BROKEN" in out and "bad dataset id" in out


def test_a_remote_listing_is_escaped_and_nothing_is_fetched(home):
    remote = home / "remote"
    pack([make_world(home / "src" / "okid", "okid")], "me/toy-v0", description="fine")
    run("worlds", "upload", "me/toy-v0", "--remote", f"file://{remote}")
    listed_file = remote / "me" / "toy-v0" / "dataset.json"
    meta = json.loads(listed_file.read_text())
    listed_file.write_text(json.dumps({**meta, "id": "r" + HOSTILE, "description": "d" + HOSTILE,
                                       "worlds": "not a list"}))
    run("worlds", "delete", "me/toy-v0")
    out = run("worlds", "list", "--remote", f"file://{remote}", columns=1000)
    assert out.startswith("rh\\x1b]52;c;c2VjcmV0\\x07") and "folder\n    dh\\x1b]52;c;" in out
    assert_escaped(out)
    assert not local_path("me/toy-v0").exists()


def test_a_hub_listing_is_escaped(home, monkeypatch):
    from hub_server import HubServer

    from dream_gym.datasets import hub as hub_module

    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")  # the test server does not speak Xet
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    with HubServer() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        pack([make_world(home / "src" / "okid", "okid")], "me/toy-v0", description="fine", licence="CC-BY-4.0")
        hub_module.upload("me/toy-v0", "hf://me")
        repo = server.repos["me/toy"]
        meta = json.loads(repo.head.files["v0/dataset.json"].data)
        server.commit_directly(repo, "v0/dataset.json",
                               json.dumps({**meta, "id": "r" + HOSTILE, "description": "d" + HOSTILE}).encode())
        out = run("worlds", "list", "--remote", "hf://me", columns=1000)
    assert out.startswith("rh\\x1b]52;c;c2VjcmV0\\x07") and "1 world(s)\n    dh\\x1b]52;c;" in out
    assert_escaped(out)


# --------------------------------------------------------------------------- dream and grow


def test_a_revisions_error_is_shown_escaped_and_never_read_as_markup():
    """A revision's error and notes (untrusted text) in dream's progress line and phase table:
    rich must show ``[/x]`` and ``[link=...]`` as text, and no escape may reach the output."""
    from io import StringIO
    from types import SimpleNamespace

    from rich.console import Console

    from dream_gym.cli.dream import phase_table, version_line

    error = f"PolicyException: [/x] [link=https://evil.example]click[/link] {HOSTILE}"
    record = SimpleNamespace(score=None, status="failed", phase=1, m=2, seconds=1.0, error=error, warning=None)
    best = SimpleNamespace(m=0, score=0.5)
    result = SimpleNamespace(phase=1, incumbent_score=0.5, deployed_m=0,
                             versions=[SimpleNamespace(m=2, status="failed", score=None, error=error, warning=None,
                                                       notes=None)])
    out = StringIO()
    console = Console(file=out, width=200, color_system=None)
    console.print(version_line(record, 4, best))
    console.print(phase_table(result))
    shown = out.getvalue()
    assert_inert(shown.encode("utf-8"))
    assert "[/x] [link=https://evil.example]click[/link]" in shown, shown
    assert "\\x1b]52;c;c2VjcmV0\\x07" in shown, shown


def test_dreams_progress_continues_a_wrapped_line_under_its_text_and_keeps_it_whole_in_a_log() -> None:
    """rich wrapped a version's line and its error at column 0 on a terminal (under the label
    "phase 1 version ..."); they now continue two columns past their indent, styles kept."""
    from io import StringIO
    from types import SimpleNamespace

    from rich.console import Console

    from dream_gym.cli.dream import version_line
    from dream_gym.cli.shown import Hanging

    error = "PolicyException: the policy file raised in act() at line 12 for a reason long enough to wrap"
    record = SimpleNamespace(score=None, status="failed", phase=1, m=2, seconds=1.0, error=error, warning=None)
    line = version_line(record, 4, SimpleNamespace(m=0, score=0.5), indent=2)
    terminal = StringIO()
    Console(file=terminal, width=50, force_terminal=True, color_system="standard").print(Hanging(line))
    assert "\x1b[31m" in terminal.getvalue()  # the status keeps its colour
    shown = Console(file=StringIO(), width=50, force_terminal=True, color_system=None)
    shown.print(Hanging(line))
    lines = shown.file.getvalue().splitlines()
    assert lines == ["  phase 1 revision 2 of 3 failed score -  best so", "    far version 0 (0.5000)  1.0s",
                     "      PolicyException: the policy file raised in", "        act() at line 12 for a reason long enough",
                     "        to wrap"]
    log = StringIO()
    Console(file=log, width=50, soft_wrap=True).print(Hanging(line))
    assert log.getvalue().splitlines() == [line.plain.split("\n")[0], "      " + error]


def test_the_phase_tables_notes_leave_out_what_every_call_that_went_well_has() -> None:
    """Every LLM revision took three table lines at 80 columns on "model=...; extraction=python-block;
    attempts=1; finish_reason=stop", and a note that mattered was cut."""
    from dream_gym.cli.dream import notable

    assert notable("model=openai/gpt-4o-mini; extraction=python-block; attempts=1; finish_reason=stop") == ""
    assert notable("model=openai/m; extraction=python-block; reply from the journal; finish_reason=length; "
                   "no litellm price for 'openai/m' (NotFoundError); usd=0") == (
        "reply from the journal; finish_reason=length; no litellm price for 'openai/m' (NotFoundError); usd=0")
    assert notable("params from the family search") == "params from the family search"  # the built-in's own


def test_a_line_too_wide_continues_at_the_column_it_is_given() -> None:
    """A row of fixed columns then a name (``worlds list``) continues under the name, not at its
    own indent; by default a line continues two columns past its indent."""
    from dream_gym.cli.shown import fitted

    row = "    195     1  finished    openevolve-binpack-null-islands-s42 (binpack-null-islands-s42)"
    assert fitted(row, 64, hang=27).split("\n") == [
        "    195     1  finished    openevolve-binpack-null-islands-s42",
        " " * 27 + "(binpack-null-islands-s42)"]
    assert fitted(row, 64).split("\n")[1] == " " * 6 + "(binpack-null-islands-s42)"
