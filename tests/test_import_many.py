"""A folder of many runs through the real CLI: each run into a world of its own, named after its
folder; a run that cannot be imported is refused with its reason and the others go on; one run is
never split into its snapshots or phases."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from evotrace_runs import gepa_native_programs, write_corpus, write_refined_run
from openevolve_runs import write_resumed_run

from dream_gym.cli import main
from dream_gym.datasets.importers import RunImportError
from dream_gym.datasets.importers.many import find_runs, import_runs
from dream_gym.world.files import WorldFormatError
from dream_gym.world.tree import load_world
from dream_gym.world.writer import STAGING_NAME, WorldWriter, check_empty_folder, new_meta, write_world

GEPA_RUN = Path(__file__).parent / "data" / "gepa" / "linear-fit"
EXTERNAL_GEPA = Path(__file__).resolve().parents[2] / "shared" / "external-runs" / "gepa"


def _mixed_folder(root: Path) -> dict[str, Path]:
    """EvoTrace's layout (three backends), a GEPA run, a resumed OpenEvolve run and a broken run."""
    runs = {f"EvoTrace-{rel.replace('/', '-')}": path for rel, path in write_corpus(root / "EvoTrace").items()}
    shutil.copytree(GEPA_RUN, root / "gepa" / "linear-fit")
    runs["gepa-linear-fit"] = root / "gepa" / "linear-fit"
    runs["openevolve-resumed"] = write_resumed_run(root / "openevolve" / "resumed", iterations=(10, 10),
                                                   resume_at=(10,)).folder
    broken = write_refined_run(root / "broken" / "altered", "gepa_native", gepa_native_programs())
    blob = next((broken / "blobs").rglob("*.txt"))
    blob.write_text("altered\n")
    runs["broken-altered"] = broken
    return runs


def test_a_folder_of_runs_imports_each_into_its_own_world(tmp_path, capsys):
    runs = _mixed_folder(tmp_path / "runs")
    out = tmp_path / "worlds"
    assert main(["worlds", "import", "--from", "auto", str(tmp_path / "runs"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"imported 5 of 6 run(s) of {tmp_path / 'runs'} into {out} (1 refused)" in text
    assert "refused broken-altered: " in text and "hashes to sha256" in text
    # one row per run imported, in the table of its system
    for system, name in (("EvoTrace", "EvoTrace-gepa_native-circle-gepa-s0"), ("GEPA", "gepa-linear-fit"),
                         ("OpenEvolve", "openevolve-resumed")):
        row = text.index(f"\n{name[:20]}")  # a long name folds in its cell
        title = text.rindex(" runs scored by ", 0, row)  # the last table title above the row
        assert text[text.rindex("\n", 0, title) + 1: title] == system
    imported = sorted(p.name for p in out.iterdir())
    assert imported == sorted(set(runs) - {"broken-altered"})  # nothing is left of the refused run
    for name in imported:
        assert main(["worlds", "validate", str(out / name)]) == 0
        world = load_world(out / name)
        assert world.id == name and world.meta["source"]["path"].startswith(str(runs[name].resolve()))
    assert main(["replay", str(out / "gepa-linear-fit"), "--policy", "greedy"]) == 0


def test_the_table_of_runs_fits_an_80_column_terminal_and_names_what_they_share(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    for name in ("a", "b"):
        write_refined_run(tmp_path / "runs" / name, "gepa_native", gepa_native_programs())
    assert main(["worlds", "import", str(tmp_path / "runs"), "--out", str(tmp_path / "w")]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = lines[lines.index("") + 1: -1]  # between the summary and the stats hint
    assert table[0].startswith("EvoTrace runs scored by ") and len(table) == 5, lines  # title, head, rule, 2 rows
    assert table[1].split() == ["run", "nodes", "invalid", "orphans", "baseline", "best"]  # one system, one metric
    assert [row.split()[0] for row in table[3:]] == ["a", "b"]
    assert all(len(line) <= 80 for line in table)


def test_one_run_is_never_split_into_its_phases_or_snapshots(tmp_path, capsys):
    run = write_resumed_run(tmp_path / "run", iterations=(10, 10), resume_at=(10,))
    assert find_runs(run.folder) == [] and find_runs(run.resume_checkpoints[0]) == []
    assert main(["worlds", "import", str(run.folder), "--out", str(tmp_path / "w")]) == 0
    text = capsys.readouterr().out
    assert "imported OpenEvolve run" in text and "phases 2: 1 resumed phase(s) stitched" in text
    assert find_runs(GEPA_RUN) == []
    # two such runs side by side are two runs
    write_resumed_run(tmp_path / "two" / "a", iterations=(5,), resume_at=())
    write_resumed_run(tmp_path / "two" / "b", iterations=(5,), resume_at=())
    assert [p.name for p in find_runs(tmp_path / "two")] == ["a", "b"]


def test_a_folder_where_no_run_imports_fails_and_says_why_for_each(tmp_path, capsys):
    for name in ("x", "y"):
        run = write_refined_run(tmp_path / "runs" / name, "gepa_native", gepa_native_programs())
        (run / "meta.json").write_text('{"backend": "alphaevolve"}')
    assert main(["worlds", "import", str(tmp_path / "runs"), "--out", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "imported 0 of 2 run(s)" in err and err.count("backend 'alphaevolve' is none of EvoTrace's") == 2
    assert "none of its 2 run(s) could be imported" in err


def test_runs_of_other_systems_are_refused_in_a_line_a_system(tmp_path, capsys):
    """``--from`` one system on a folder of many systems' runs printed a line of ~250 characters
    per run of another system, each saying the same (40 of them on the shared external runs)."""
    runs = _mixed_folder(tmp_path / "runs")
    assert main(["worlds", "import", "--from", "evotrace", str(tmp_path / "runs"), "--out", str(tmp_path / "w")]) == 0
    text = capsys.readouterr().out
    assert "refused 1 run that looks like a GEPA run, not EvoTrace: gepa-linear-fit; import it with --from gepa " \
           "(or --from auto)" in text
    assert "refused 1 run that looks like an OpenEvolve run, not EvoTrace: openevolve-resumed" in text
    assert "refused gepa-linear-fit" not in text and "refused broken-altered: " in text  # a reason of its own
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == sorted(n for n in runs if n.startswith("EvoTrace"))


def test_a_world_id_is_refused_for_a_folder_of_runs(tmp_path, capsys):
    write_corpus(tmp_path / "corpus")
    assert main(["worlds", "import", str(tmp_path / "corpus"), "--out", str(tmp_path / "w"), "--id", "one"]) == 2
    assert "--id names one world, but this folder holds several runs" in capsys.readouterr().err


def test_every_run_of_a_folder_is_imported_by_the_system_named(tmp_path):
    write_corpus(tmp_path / "corpus")
    with pytest.raises(RunImportError) as refused:  # none of them is a GEPA run
        import_runs("gepa", tmp_path / "corpus", tmp_path / "w")
    assert "refused 3 runs that look like EvoTrace runs, not GEPA: " in str(refused.value)
    assert "import them with --from evotrace (or --from auto)" in str(refused.value)
    assert not (tmp_path / "w").exists()  # a refused run leaves nothing, the folder made for them included
    report = import_runs("evotrace", tmp_path / "corpus", tmp_path / "w2")
    assert [o.name for o in report.imported] == ["gepa_native-circle-gepa-s0", "openevolve_native-circle-oe-s0",
                                                 "shinkaevolve-circle-shinka-s0"]
    assert [o.report.nodes for o in report.imported if o.report] == [9, 4, 4]


@pytest.mark.usefixtures("external_runs")
def test_the_real_gepa_runs_as_one_folder(tmp_path, capsys):
    assert main(["worlds", "import", str(EXTERNAL_GEPA), "--out", str(tmp_path / "w")]) == 0
    text = capsys.readouterr().out
    assert "imported 3 of 3 run(s)" in text
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["gepa-cache-gemini3", "gepa-cache-gpt5",
                                                                "gepa-cache-gpt5-run0"]


def test_a_run_that_holds_only_its_initial_program_is_named_in_a_warning(tmp_path, capsys):
    """ShinkaEvolve's own circle-packing example holds its initial program alone: the folder import
    kept it with no word (its row said 1 node), and a history then replayed no decision on it."""
    runs = tmp_path / "runs"
    shutil.copytree(EXTERNAL_GEPA.parent / "shinkaevolve" / "circle-packing-example", runs / "circle-packing-example")
    shutil.copytree(GEPA_RUN, runs / "linear-fit")
    assert main(["worlds", "import", str(runs), "--out", str(tmp_path / "w")]) == 0
    text = capsys.readouterr().out
    assert "imported 2 of 2 run(s)" in text
    assert "warning: circle-packing-example holds only its initial program" in text
    assert "warning: linear-fit" not in text


def _runs_of(folder: Path) -> list[tuple[str, Path]]:
    """The runs of a folder import, by the names it gives them (the refused one among them)."""
    from dream_gym.datasets.importers.many import _names, find_runs

    runs = find_runs(folder)
    return list(zip(_names(folder, runs), runs, strict=True))


def _node_files(out: Path) -> dict[str, bytes]:
    return {p.parent.name: p.read_bytes() for p in sorted(out.glob("*/nodes.jsonl"))}


def test_an_import_stopped_mid_world_leaves_no_world_and_resume_imports_the_rest(tmp_path, capsys, monkeypatch):
    """Ctrl-C while a world is being written: that world is not there at all (it loaded and
    validated as if it were the whole run, with the nodes written so far), and the same command
    with --resume keeps the finished worlds and imports the others, as an uninterrupted import."""
    _mixed_folder(tmp_path / "runs")
    whole, out = tmp_path / "whole", tmp_path / "worlds"
    command = ["worlds", "import", str(tmp_path / "runs"), "--out"]
    assert main([*command, str(whole)]) == 0
    real, written = WorldWriter.append, []

    def append(self, record):  # Ctrl-C at the 30th node written
        if len(written) == 29:
            raise KeyboardInterrupt
        written.append(record["id"])
        real(self, record)

    monkeypatch.setattr(WorldWriter, "append", append)
    capsys.readouterr()
    assert main([*command, str(out)]) == 130
    assert "the same command with --resume continues it" in capsys.readouterr().err
    monkeypatch.setattr(WorldWriter, "append", real)
    finished = _node_files(out)
    assert finished and len(finished) < len(_node_files(whole))
    cut = [p for p in out.iterdir() if p.is_dir() and p.name not in finished]
    assert cut and not list(cut[0].iterdir())  # the world being written: nothing of it
    with pytest.raises(FileExistsError, match=rf"holds {len(finished)} world\(s\) of an import of .*runs of "
                                              r"[0-9]+ run\(s\) \(stopped, or some runs refused\): --resume imports "
                                              r"the others"):
        import_runs("auto", tmp_path / "runs", out)  # without --resume: refused, naming it, nothing touched
    assert main([*command, str(out), "--resume"]) == 0
    assert f"{len(finished)} imported before, kept" in capsys.readouterr().out
    assert _node_files(out) == _node_files(whole)
    # the same import again, finished, every run imported: it said the import "was stopped", to --resume it
    shutil.rmtree(next(run for name, run in _runs_of(tmp_path / "runs") if name not in _node_files(out)))
    with pytest.raises(FileExistsError, match=r"holds the worlds of an import of .*runs already, one for each of its "
                                              r"5 run\(s\): nothing to do"):
        import_runs("auto", tmp_path / "runs", out)
    for name in _node_files(out):
        assert main(["worlds", "validate", str(out / name)]) == 0


def test_resume_refuses_a_folder_holding_anything_but_that_folders_worlds(tmp_path):
    _mixed_folder(tmp_path / "runs")
    out = tmp_path / "worlds"
    import_runs("auto", tmp_path / "runs", out)
    shutil.copytree(out / "gepa-linear-fit", out / "someone-elses")
    with pytest.raises(FileExistsError, match="someone-elses, which is not the world of a run of"):
        import_runs("auto", tmp_path / "runs", out, resume=True)
    shutil.rmtree(out / "someone-elses")
    meta = out / "openevolve-resumed" / "world.json"
    meta.write_text(meta.read_text().replace(str(tmp_path / "runs" / "openevolve"), str(tmp_path / "elsewhere")))
    with pytest.raises(FileExistsError, match="not the import of"):
        import_runs("auto", tmp_path / "runs", out, resume=True)
    meta.write_text(meta.read_text().replace(str(tmp_path / "elsewhere"), str(tmp_path / "runs" / "openevolve")))
    with pytest.raises(FileExistsError, match=r"with W 1, not 3; orphans 'attach', not 'drop': --resume continues"):
        import_runs("auto", tmp_path / "runs", out, resume=True, workers=3, orphans="drop")
    assert import_runs("auto", tmp_path / "runs", out, resume=True).headline().count("imported before, kept")


def test_a_killed_whole_world_write_leaves_nothing_that_loads_and_the_next_write_succeeds(tmp_path):
    """kill -9 inside write_world leaves its hidden staging folder: the world folder counts as
    empty and the next write removes it."""
    records = [{"id": "root", "parent": None, "score": 1.0}, {"id": "a", "parent": "root", "score": 2.0}]
    folder = tmp_path / "w"
    (folder / STAGING_NAME).mkdir(parents=True)
    (folder / STAGING_NAME / "world.json").write_text("{}")  # what a killed write left
    assert check_empty_folder(folder) == folder
    with pytest.raises(WorldFormatError):
        load_world(folder)
    write_world(folder, new_meta("w", "t"), records)
    assert sorted(p.name for p in folder.iterdir()) == ["nodes.jsonl", "world.json"]
    assert load_world(folder).size == 2


def test_runs_nested_as_experiments_nest_them_are_each_a_world(tmp_path):
    """Two runs five folders down (task/config/date/seed) were read as one run, their trees
    stitched into one world of W = 1, with a note blaming an extra root."""
    for seed in (0, 1):
        write_resumed_run(tmp_path / "exp" / "fnmin" / "cfgA" / "20260101" / f"seed{seed}", iterations=(6,),
                          resume_at=())
    runs = find_runs(tmp_path / "exp")
    assert [run.relative_to(tmp_path).as_posix() for run in runs] == [
        "exp/fnmin/cfgA/20260101/seed0", "exp/fnmin/cfgA/20260101/seed1"]
    report = import_runs("auto", tmp_path / "exp", tmp_path / "worlds")
    assert [o.name for o in report.imported] == ["fnmin-cfgA-20260101-seed0", "fnmin-cfgA-20260101-seed1"]


def test_resume_of_a_finished_import_refuses_another_id_or_task(tmp_path, capsys):
    """Said "nothing to do" and kept the world's id and task, as if they had been taken."""
    run = write_resumed_run(tmp_path / "run", iterations=(6,), resume_at=()).folder
    out = tmp_path / "world"
    assert main(["worlds", "import", str(run), "--out", str(out)]) == 0
    assert main(["worlds", "import", str(run), "--out", str(out), "--resume"]) == 0
    assert "already: nothing to do" in capsys.readouterr().out
    assert main(["worlds", "import", str(run), "--out", str(out), "--resume", "--id", "other", "--task", "foo"]) == 2
    err = capsys.readouterr().err
    assert "with id 'world', not 'other'; task " in err and ", not 'foo'" in err


def test_a_second_import_into_the_same_out_is_refused_and_deletes_nothing(tmp_path):
    """Two imports of a folder into one --out ran side by side: each refused the runs the other was
    writing (or found its staging gone) and deleted those worlds, and both exited 0."""
    import subprocess
    import sys

    from dream_gym.infrastructure.locks import LockedError

    _mixed_folder(tmp_path / "runs")
    out = tmp_path / "worlds"
    report = import_runs("auto", tmp_path / "runs", out)
    before = _node_files(out)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom dream_gym.infrastructure.locks import folder_lock\n"
         f"with folder_lock({str(out)!r}):\n    print('held', flush=True)\n    time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LockedError, match=f"pid {holder.pid}"):
            import_runs("auto", tmp_path / "runs", out, resume=True)
    finally:
        holder.kill()
        holder.wait()
    assert _node_files(out) == before and report.imported
    assert import_runs("auto", tmp_path / "runs", out, resume=True).imported  # the control: free again


def test_a_folder_of_other_systems_runs_only_is_refused_in_a_line_a_system(tmp_path, capsys):
    """When no run imports (the usual wrong --from), the refusal listed a long line per run of
    another system; it groups them as an import of some does."""
    _mixed_folder(tmp_path / "runs")
    assert main(["worlds", "import", "--from", "shinkaevolve", str(tmp_path / "runs"), "--out",
                 str(tmp_path / "w")]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "refused 4 runs that look like EvoTrace runs, not ShinkaEvolve: " in said, said  # the broken one too
    assert "import them with --from evotrace (or --from auto)" in said and "none of its 6 run(s) could be imported" in said
    assert "refused 1 run that looks like a GEPA run, not ShinkaEvolve: gepa-linear-fit; import it with --from gepa" in said
    assert "refused   gepa-linear-fit" not in said
