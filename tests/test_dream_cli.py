"""`dream-gym dream` and `dream-gym rsi`: the run folder layout, M counting the incumbent, the
fingerprint refusing other settings by name, resuming a finished run, the all-in cost table."""

from __future__ import annotations

import json

import pytest

from dream_gym.cli import main
from dream_gym.infrastructure.durable import read_jsonl

DREAM = ["dream", "--history", "sd-fixed-s0", "--policy", "greedy", "--developer", "builtin", "--revisions", "2",
         "--betas", "0.5", "-j", "1", "--quiet"]


def test_dream_writes_the_run_folder_and_m_counts_the_incumbent(tmp_path, capsys):
    out = tmp_path / "dream"
    assert main([*DREAM, "--out", str(out)]) == 0
    assert sorted(p.name for p in (out / "revisions" / "1").glob("*.py")) == ["0.py", "1.py", "chosen.py"]
    for name in ("dream.jsonl", "chosen.py", "ratchet.png", "fingerprint.json"):
        assert (out / name).exists(), name
    rows = read_jsonl(out / "dream.jsonl")
    assert [r["type"] for r in rows] == ["revision", "revision", "phase"]
    printed = capsys.readouterr().out
    assert "Phase 1: versions on the history" in printed and "chosen policy" in printed


def test_dream_resume_with_other_settings_is_refused_naming_the_difference(tmp_path, capsys):
    out = tmp_path / "dream"
    assert main([*DREAM, "--out", str(out)]) == 0
    assert main([*DREAM, "--out", str(out)]) == 2  # without --resume
    assert "pass --resume" in capsys.readouterr().err
    changed = [*DREAM, "--out", str(out), "--resume", "--select", "v2"]
    assert main(changed) == 2
    err = capsys.readouterr().err
    assert "select: the run has 'V', this command gives 'v2'" in err
    assert main([*DREAM, "--out", str(out), "--resume"]) == 0  # same settings: read back, nothing redone
    assert len(read_jsonl(out / "dream.jsonl")) == 3
    # the decision timeout decides which episodes fail: resumed with another, it was taken silently
    assert main([*DREAM, "--out", str(out), "--resume", "--decision-timeout", "3"]) == 2
    assert "decision_timeout_s: the run has none, this command gives 3.0" in capsys.readouterr().err



def test_a_resumed_run_refuses_a_ledger_or_fingerprint_it_did_not_write(tmp_path, capsys):
    """The ledger names each version's file and score, read back on --resume: a file named outside
    the run was deployed as chosen.py under the journaled score (never evaluated), an edited version
    file too, and a score or a fingerprint that was not what the run wrote made a traceback or an
    error naming no file."""
    import shutil

    done = tmp_path / "done"
    assert main([*DREAM, "--out", str(done)]) == 0
    rows = read_jsonl(done / "dream.jsonl")
    assert all(len(r.get("sha256") or "") == 64 for r in rows if r["type"] == "revision")
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text("def act(view):\n    return []\n")

    def resumed(change) -> str:  # the run killed before its phase line, its folder then changed
        out = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        shutil.copytree(done, out)
        kept = [dict(r) for r in rows if r["type"] != "phase"]
        change(out, kept)
        (out / "dream.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
        capsys.readouterr()
        assert main([*DREAM, "--out", str(out), "--resume"]) == 2
        error = capsys.readouterr().err
        assert error.count("error:") == 1 and "Traceback" not in error
        return error

    def outside(out, kept):
        kept[1]["file"] = str(elsewhere)

    def edited(out, kept):
        (out / "revisions" / "1" / "1.py").write_text("def act(view):\n    return []\n")

    def string_score(out, kept):
        kept[1]["score"] = "x"

    assert "dream.jsonl, line 2: version 1 of phase 1 is" in resumed(outside)
    assert "revisions/1/1.py is not the file that was evaluated" in resumed(edited)
    assert "version 1 of phase 1 holds a score that is not a number" in resumed(string_score)
    for text in ("[1]", "{bad"):
        said = resumed(lambda out, kept, text=text: (out / "fingerprint.json").write_text(text))
        assert "fingerprint.json is not the settings of a dream-gym dream run" in said
    # the control: the same copy unchanged resumes and deploys what was evaluated
    same = tmp_path / "same"
    shutil.copytree(done, same)
    (same / "dream.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["type"] != "phase"))
    assert main([*DREAM, "--out", str(same), "--resume"]) == 0
    assert (same / "revisions" / "1" / "chosen.py").read_bytes() == (done / "revisions" / "1" / "chosen.py").read_bytes()


RSI = ["rsi", "--task", "sum-difference", "--policy", "fixed", "--iterations", "2", "--revisions", "2",
       "--workers", "2", "--rounds", "2", "--betas", "0.5", "-j", "1", "--backend", "serial", "--quiet"]


@pytest.mark.slow
def test_rsi_runs_rollout_dream_deploy_and_reports_all_in_cost(tmp_path, capsys):
    out = tmp_path / "rsi"
    assert main([*RSI, "--out", str(out)]) == 0
    for name in ("worlds/iter-1/world.json", "worlds/iter-2/nodes.jsonl", "policies/pi_2.py", "policies/pi_3.py",
                 "dream/dream.jsonl", "dream/ratchet.png", "summary.md", "summary.json", "fingerprint.json"):
        assert (out / name).exists(), name
    summary = json.loads((out / "summary.json").read_text())["iterations"]
    assert [r["t"] for r in summary] == [1, 2]
    for row in summary:
        assert row["attempts"] == row["discovery"]["attempts"] > 0
        assert row["total_usd"] == row["discovery"]["usd"] + row["development"]["usd"]
        assert row["development"]["calls"] == 0  # the built-in developer calls no LLM
    # phase 2's incumbent is what phase 1 deployed
    phase2 = (out / "dream/revisions/2/0.py").read_text()
    assert phase2 == (out / "policies/pi_2.py").read_text()
    world2 = json.loads((out / "worlds/iter-2/world.json").read_text())
    assert world2["policy"].endswith("policies/pi_2.py") and "dream-gym rsi" in world2["command"]
    assert "disc $" in capsys.readouterr().out
    # resumed with fewer iterations, it cut the summaries to them and said nothing
    fewer = [a if i != RSI.index("--iterations") + 1 else "1" for i, a in enumerate(RSI)]
    before = (out / "summary.json").read_text()
    assert main([*fewer, "--out", str(out), "--resume"]) == 2
    assert "has finished 2 iterations: --iterations 1 is fewer (it may grow; give 2 or more)" in capsys.readouterr().err
    assert (out / "summary.json").read_text() == before


@pytest.mark.slow
def test_rsi_resume_refuses_other_settings_and_redoes_nothing(tmp_path, capsys):
    out = tmp_path / "rsi"
    args = [a if a != "2" or i != RSI.index("--iterations") + 1 else "1" for i, a in enumerate(RSI)]
    assert main([*args, "--out", str(out)]) == 0
    capsys.readouterr()
    workers = args.index("--workers") + 1
    other = [*args[:workers], "3", *args[workers + 1:], "--out", str(out), "--resume"]
    assert main(other) == 2
    assert "workers: the run has 2, this command gives 3" in capsys.readouterr().err
    before = (out / "rsi.jsonl").read_text()
    assert main([*args, "--out", str(out), "--resume"]) == 0
    assert (out / "rsi.jsonl").read_text() == before


@pytest.mark.parametrize("command", [DREAM, RSI])
def test_an_api_base_nothing_in_the_run_calls_is_refused(tmp_path, capsys, command):
    """The built-in developer (and agent) call no LLM: the URL was taken and ignored without a word."""
    out = tmp_path / "run"
    assert main([*command, "--api-base", "http://127.0.0.1:9/v1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and ("--api-base http://127.0.0.1:9/v1: nothing in this run calls an LLM (the "
                                         "built-in developer and agent call none)") in err
    assert not out.exists()


def test_a_developer_no_call_can_reach_is_refused_before_the_run_folder_is_made(tmp_path, capsys, monkeypatch):
    """It scored the incumbent first, then failed on its first call with a transport error."""
    out = tmp_path / "dream"
    llm = [a if a != "builtin" else "openai/dev" for a in DREAM]
    assert main([*llm, "--api-base", "http://127.0.0.1:9/v1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--api-base http://127.0.0.1:9/v1: nothing accepts a connection" in err and err.count("error:") == 1
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main([*llm, "--out", str(out)]) == 2
    assert "OPENAI_API_KEY is not set in the environment" in capsys.readouterr().err
    assert not out.exists()


def test_a_policy_file_that_does_not_load_is_named_before_the_run_folder_is_made(tmp_path, capsys):
    """dream ran the whole step on it, naming the run's copy (0.py); grow started its run."""
    broken = tmp_path / "broken.py"
    broken.write_text("def act(view)\n    return []\n")
    for command in ([*[a if a != "greedy" else str(broken) for a in DREAM], "--out", str(tmp_path / "dream")],
                    ["grow", "--task", "sum-difference", "--policy", str(broken), "--rounds", "1", "--out",
                     str(tmp_path / "grow")]):
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert "SyntaxError: expected ':' (broken.py, line 1)" in err and err.count("error:") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.py"]


def test_an_incumbent_module_the_sandbox_cannot_import_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    """Every version runs isolated: a module:Class incumbent on PYTHONPATH (not an installed
    package) made a wrapper that failed every episode, scored 0, and the run went on to report
    a gain over it. An installed one, with its parameters, passes the check."""
    (tmp_path / "mypols.py").write_text("from dream_gym.policies import GreedyPolicy as Deep\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "dream"
    spec = "mypols:Deep(patience=4)"
    assert main([*[a if a != "greedy" else spec for a in DREAM], "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dream-gym dream: error: incumbent {spec}: every version runs isolated, and its version-0 "
                          "wrapper does not load there (") and "No module named 'mypols'" in err, err
    assert err.count("error:") == 1, err
    assert "install the package that holds it (pip install -e .), or give the policy as a .py file" in err
    assert not out.exists()
    from dream_gym.cli.names import check_incumbent

    assert check_incumbent("dream_gym.policies:GreedyPolicy(patience=4)") == "dream_gym.policies:GreedyPolicy(patience=4)"
    assert check_incumbent("ucb(c=inf)") == "ucb(c=inf)"  # its wrapper wrote c=inf, a NameError in every episode
    with pytest.raises(ValueError, match="unexpected keyword argument 'C'"):  # checked before the run, as eval does
        check_incumbent("dream_gym.policies:UCBPolicy(C=1)")


def test_a_held_out_world_in_the_history_is_refused_before_the_run_folder_is_made(tmp_path, capsys):
    """The run folder (its fingerprint) was written first, and then refused the corrected command."""
    out = tmp_path / "dream"
    assert main([*DREAM, "--validate", "sd-fixed-s0", "--out", str(out)]) == 2
    assert "held-out worlds must not be in the history: ['sd-fixed-s0']" in capsys.readouterr().err
    assert not out.exists()


def test_a_held_out_world_that_is_a_history_world_under_another_id_is_refused(tmp_path, capsys):
    """The check compared ids only: one run imported twice, into two folders, was a history world
    and a held-out world at once, and its held-out figure was neither."""
    import shutil

    from dream_gym.world.registry import resolve_world

    copy = tmp_path / "sd-copy"
    shutil.copytree(resolve_world("sd-fixed-s0").path, copy)
    meta = json.loads((copy / "world.json").read_text())
    (copy / "world.json").write_text(json.dumps({**meta, "id": "sd-copy"}))
    out = tmp_path / "dream"
    assert main([*DREAM, "--validate", str(copy), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "held-out worlds must not be in the history: ['sd-copy' (the run of the history's 'sd-fixed-s0')]" in err
    assert not out.exists()


HASHY = ("def act(view):\n"
         "    order = sorted(view.frontier, key=lambda i: hash(str(i)))  # another order in each hash seed\n"
         "    return order[:1] if view.attempts < 8 else []\n")


def test_a_nondeterministic_incumbent_is_named_and_the_run_exits_1(tmp_path, capsys):
    """It stays the fallback, but it was 'refused' in its row, then selected and deployed, exit 0."""
    hashy = tmp_path / "hashy.py"
    hashy.write_text(HASHY)
    command = [*[a if a != "greedy" else str(hashy) for a in DREAM], "--validate", "none"]
    assert main([*command, "--out", str(tmp_path / "d1")]) == 1
    err = capsys.readouterr().err
    assert f"policy {hashy}: nondeterministic (two evaluations in separate processes differ)" in err
    assert err.rstrip().endswith("exit status 1 because the incumbent is nondeterministic (--allow-errors exits 0)")
    assert main([*command, "--allow-errors", "--out", str(tmp_path / "d2")]) == 0
    rows = read_jsonl(tmp_path / "d2" / "dream.jsonl")
    assert rows[0]["status"] == "incumbent" and rows[0]["warning"].startswith("nondeterministic: ")


def test_the_held_out_verdict_under_gate_names_the_gate_not_the_margin():
    """With --gate the verdict line said 'margin 0.1', which the gate does not apply."""
    from types import SimpleNamespace

    from dream_gym.cli.dream import held_out_lines

    check = {"worlds": ["w"], "auto": False, "incumbent": 0.5, "selected": 0.49, "gain": -0.01, "margin": 0.1,
             "verdict": "refused"}
    result = SimpleNamespace(validation=check, selected_m=1, warning=None)
    gated, plain = (str(held_out_lines(result, gate)[1]) for gate in (True, False))
    assert gated.endswith("(gain -0.0100; --gate: no drop): refused") and plain.endswith("(gain -0.0100; margin 0.1): refused")


def test_resume_takes_the_same_policy_file_by_another_path_and_refuses_other_contents(tmp_path, monkeypatch):
    from dream_gym.dream.runfolder import SettingsChanged, check_fingerprint
    from dream_gym.evaluation.journal import policy_digest

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pol.py").write_text("def choose(view):\n    return []\n")

    def settings(spec):
        return {"policy": spec, "policy_sha256": policy_digest(spec), "seed": 0}

    check_fingerprint(tmp_path / "run", settings("pol.py"), resume=False, command="dream-gym dream")
    for same in ("./pol.py", str(tmp_path / "pol.py")):
        check_fingerprint(tmp_path / "run", settings(same), resume=True, command="dream-gym dream")
    (tmp_path / "pol.py").write_text("def choose(view):\n    return [0]\n")
    with pytest.raises(SettingsChanged, match="policy: the run has 'pol.py', this command gives './pol.py'"):
        check_fingerprint(tmp_path / "run", settings("./pol.py"), resume=True, command="dream-gym dream")
    with pytest.raises(SettingsChanged, match="policy: the run has 'pol.py', this command gives 'greedy'"):
        check_fingerprint(tmp_path / "run", settings("greedy"), resume=True, command="dream-gym dream")


def test_rsi_checks_each_phase_on_the_held_out_worlds_it_is_given(tmp_path, capsys):
    """rsi takes dream's held-out options; --quiet hid a revision the check kept out, and a resume
    with --held-out-margin inf was taken silently (JSON has no inf)."""
    one = [a if a != "2" or i != RSI.index("--iterations") + 1 else "1" for i, a in enumerate(RSI)]
    args = [*one, "--validate", "sd-fixed-s0", "--out", str(tmp_path / "rsi")]
    assert "--quiet" in args and main(args) == 0
    assert "WARNING: version 1 is NOT deployed" in capsys.readouterr().err
    phase = next(r for r in read_jsonl(tmp_path / "rsi/dream/dream.jsonl") if r["type"] == "phase")
    assert phase["validation"]["worlds"] == ["sd-fixed-s0"] and not phase["validation"]["auto"]
    assert phase["validation"]["margin"] == 0.1 and phase["validation"]["verdict"] == "refused"
    assert main([*args, "--resume", "--gate"]) == 2
    assert "gate: the run has none, this command gives True" in capsys.readouterr().err
    assert main([*args, "--resume", "--held-out-margin", "inf"]) == 2
    assert "held_out_margin: the run has none, this command gives 'inf'" in capsys.readouterr().err
    other = [*one, "--validate", "sd-greedy-s0", "--out", str(tmp_path / "rsi"), "--resume"]
    assert main(other) == 2  # the worlds named, not their checksums
    assert "validate: the run has the worlds sd-fixed-s0, this command gives the worlds sd-greedy-s0" in (
        capsys.readouterr().err)
    refused = tmp_path / "refused"
    assert main([*one, "--history", "sd-fixed-s0", "--validate", "sd-fixed-s0", "--out", str(refused)]) == 2
    assert "held-out worlds must not be in the history: ['sd-fixed-s0']" in capsys.readouterr().err
    assert not refused.exists()


def test_resume_refuses_a_history_world_whose_recorded_w_changed(tmp_path, capsys):
    """Imported again with another -W, a world keeps its nodes' checksum: the resumed run mixed
    scores replayed at the old W with new ones, and said the new W."""
    import shutil

    from dream_gym.world.registry import resolve_world

    world = tmp_path / "history"
    shutil.copytree(resolve_world("sd-fixed-s0").path, world)
    command = ["dream", "--history", str(world), "--policy", "fixed", "--developer", "builtin", "-M", "2",
               "--betas", "0.5", "-j", "1", "--out", str(tmp_path / "dream")]
    assert main(command) == 0
    meta = json.loads((world / "world.json").read_text())
    meta["workers"] = meta["workers"] + 1
    (world / "world.json").write_text(json.dumps(meta))
    assert main([*command, "--resume"]) == 2
    err = capsys.readouterr().err
    assert "cannot resume" in err and f"history: the run has the worlds sd-fixed-s0 (W {meta['workers'] - 1}, " in err
    assert f"this command gives the worlds sd-fixed-s0 (W {meta['workers']}, " in err


def test_a_model_as_the_incumbent_is_refused_before_rsi_grows_anything(tmp_path, capsys):
    # rsi grew its first world (with an LLM agent, at a cost) and only then refused the model
    from pathlib import Path

    model = Path(__file__).parent / "data" / "models" / "ppo-node-v.zip"
    out = tmp_path / "rsi"
    assert main([*RSI[:RSI.index("--policy")], "--policy", str(model), *RSI[RSI.index("--policy") + 2:],
                 "--out", str(out)]) == 2
    assert "an SB3 model cannot be the incumbent of the dreaming loop" in capsys.readouterr().err
    assert not out.exists()
