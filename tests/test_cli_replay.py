"""`dream-gym replay`: one policy on one world, its record and the revealed tree."""

from __future__ import annotations

import json
import random

from worldgen import random_records, write_folder

from dream_gym.cli import main


def test_replay_prints_score_and_tree(tmp_path, capsys):
    folder = write_folder(tmp_path / "w", random_records(random.Random(2), 40))
    assert main(["replay", str(folder), "--policy", "fixed", "--beta", "0.5", "--tree"]) == 0
    out = capsys.readouterr().out
    assert "V = " in out and "attempts N = " in out
    assert main(["replay", str(folder), "--policy", "fixed", "--beta", "0.5", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best_score"]
    # the result's line fits an 80-column terminal: the best score to six digits (whole in --json)
    assert f"best score = {best:.6g}  " in out.splitlines()[1] and len(out.splitlines()[1]) <= 80
    assert out.splitlines()[2].startswith("coverage (the rule's frontier): ")
    assert out.splitlines()[3].startswith("round ")  # the tree drawing's header
    assert "0: " in out


def test_replay_json_record_is_deterministic(tmp_path, capsys):
    folder = write_folder(tmp_path / "w", random_records(random.Random(3), 40))
    main(["replay", str(folder), "--policy", "random", "--json", "--seed", "4"])
    first = json.loads(capsys.readouterr().out)
    main(["replay", str(folder), "--policy", "random", "--json", "--seed", "4"])
    assert json.loads(capsys.readouterr().out) == first
    assert first["policy"] == "random" and first["attempts"] == sum(len(b) for b in first["batches"])


def test_replay_unknown_world_is_a_clear_error(capsys):
    assert main(["replay", "no-such-world"]) == 2
    assert "unknown world 'no-such-world'" in capsys.readouterr().err


def test_replay_records_a_policy_error_and_exits_1(tmp_path, capsys):
    folder = write_folder(tmp_path / "w", random_records(random.Random(5), 20))
    bad = tmp_path / "bad_policy.py"
    bad.write_text("def act(view):\n    return [999]\n")
    assert main(["replay", str(folder), "--policy", str(bad)]) == 1
    captured = capsys.readouterr()
    assert "1 of 1 episodes failed; first: IllegalBatchError: id 999 is not an observed node" in captured.err
    assert "IllegalBatchError" not in captured.out  # said once, on stderr
    # the coverage line says the episode ended by the error, and counts no request as none
    assert "coverage (the rule's frontier): no request was made; ended by the policy's error (on stderr)" in captured.out


def test_an_episode_ended_by_max_attempts_is_not_blamed_on_the_policy(capsys):
    assert main(["replay", "sd-ucb-w4-s1", "-p", "greedy", "--max-attempts", "3"]) == 1
    captured = capsys.readouterr()
    assert "EpisodeLimitError: episode exceeded 3 attempts" in captured.err
    assert "; ended at --max-attempts (on stderr);" in captured.out and "policy's error" not in captured.out


def test_a_policy_file_is_named_as_given_as_eval_names_it(tmp_path, capsys):
    # the header named the file's policy by its own name, the summary and eval by the spec
    mine = tmp_path / "mine.py"
    mine.write_text("from dream_gym.policies import GreedyPolicy\n\n\ndef make_policy():\n    return GreedyPolicy()\n")
    assert main(["replay", "sd-ucb-w4-s1", "-p", str(mine)]) == 0
    assert capsys.readouterr().out.startswith(f"world sd-ucb-w4-s1  policy {mine}  beta 0.5")


def test_replay_json_gives_the_oracle_limit_eval_gives(tmp_path, capsys):
    """``replay --json`` printed ``"limit": null``; eval's rows give the world's V* at the episode's
    settings: the same figure for the same episode."""
    folder = write_folder(tmp_path / "w", random_records(random.Random(5), 40))
    assert main(["replay", str(folder), "--policy", "greedy", "--beta", "0.5", "-W", "2", "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert main(["eval", "-p", "greedy", "-w", str(folder), "--betas", "0.5", "-W", "2", "--no-progress", "-j", "1",
                 "--out", str(tmp_path / "r.jsonl")]) == 0
    (row,) = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert replayed["limit"] == row["limit"] > 0 and replayed["replay_score"] == row["replay_score"]
