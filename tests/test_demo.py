"""`make demo`: the baselines on the held-out split, then an improvement step whose kept version
is ranked beside them, a line saying what it gained, and three commands to run next. The whole
demo runs end to end from the installed wheel (tests/test_packaging.py), as a user runs it."""

from __future__ import annotations

import re

import pytest

from dream_gym.cli.demo import exit_status
from dream_gym.demo import (
    DREAM_INCUMBENT,
    Demo,
    dream_step,
    kept_line,
    next_steps,
    step_failures,
)
from dream_gym.dream.improve import PhaseResult
from dream_gym.dream.versions import VersionRecord
from dream_gym.infrastructure.durable import read_jsonl

KEPT = re.compile(r"^kept version (\d+): ([+-]\d\.\d{4}) on H, ([+-]\d\.\d{4}) on held-out$", re.MULTILINE)


def _phase(*versions: VersionRecord) -> PhaseResult:
    """A phase that kept its best selectable version (as improvement_step selects)."""
    best = max((v for v in versions if v.status in ("incumbent", "ok")), key=lambda v: (v.score, -v.m))
    return PhaseResult(phase=1, incumbent="revisions/1/0.py", incumbent_score=versions[0].score, selected_m=best.m,
                       selected_score=best.score, deployed_m=best.m, deployed=best.file,
                       gain_history=best.score - versions[0].score, history=["w"], versions=list(versions))


def _version(m: int, status: str, score: float | None, **more) -> VersionRecord:
    return VersionRecord(1, m, f"revisions/1/{m}.py", status, score=score, **more)


@pytest.mark.slow
def test_dream_step_says_a_line_per_version_and_keeps_the_argmax_on_the_history(tmp_path):
    lines: list[str] = []
    result = dream_step(tmp_path / "dream", ["sd-fixed-w4-s0"], jobs=2, revisions=2, say=lines.append)
    assert (tmp_path / "dream" / "chosen.py").is_file() and (tmp_path / "dream" / "ratchet.png").is_file()
    versions = [r for r in read_jsonl(tmp_path / "dream" / "dream.jsonl") if r["type"] == "revision"]
    assert [v["m"] for v in versions] == [0, 1]
    assert lines[0].startswith(f"dreaming: the built-in developer (no LLM) revises {DREAM_INCUMBENT}")
    progress = [line for line in lines if line.startswith(("  incumbent ", "  revision "))]
    assert [line.split()[:4] for line in progress] == [  # one line per version, as it is scored
        ["incumbent", "mean", "V", "on"], ["revision", "1", "of", "1"]]
    best = max(versions, key=lambda v: (v["score"], -v["m"]))
    assert result.selected_m == best["m"] and f"best: version {best['m']}" in progress[-1]


def test_the_kept_line_says_the_gain_on_h_and_on_the_held_out_worlds():
    result = _phase(_version(0, "incumbent", 0.2), _version(1, "ok", 0.3))
    assert kept_line(result, 0.21, "held-out") == "kept version 1: +0.1000 on H, +0.2100 on held-out"
    assert KEPT.match(kept_line(result, -0.01, "held-out")).group(3) == "-0.0100"


def test_a_step_that_kept_its_incumbent_says_so_plainly():
    result = _phase(_version(0, "incumbent", 0.3), _version(1, "ok", 0.25), _version(2, "invalid", None))
    assert kept_line(result, None, "held-out") == (
        "the step did not improve: kept version 0, the incumbent; its best revision -0.0500 on H")


def test_a_step_whose_revision_the_held_out_check_refused_says_so():
    result = _phase(_version(0, "incumbent", 0.2), _version(1, "ok", 0.3))
    result.deployed_m, result.deployed, result.gated = 0, "revisions/1/0.py", True
    assert kept_line(result, None, "held-out") == (
        "the held-out check refused version 1 (+0.1000 on H): kept version 0, the incumbent")


def test_refused_versions_and_a_failing_incumbent_are_failures_of_the_demo():
    result = _phase(_version(0, "incumbent", 0.2, warning="2 of 12 episodes failed"), _version(1, "ok", 0.3),
                    _version(2, "nondeterministic", 0.4, error="two evaluations differ"))
    assert step_failures(result) == ["dream step: version 2 was nondeterministic: two evaluations differ",
                                     "dream step: the incumbent: 2 of 12 episodes failed"]
    assert step_failures(_phase(_version(0, "incumbent", 0.2), _version(1, "ok", 0.3))) == []


def test_the_demo_exits_1_naming_each_failed_step(capsys):
    assert exit_status(Demo([], "kept version 1: +0.1000 on H, +0.2000 on held-out")) == 0
    failed = Demo([], "kept", ["policy greedy: 1 of 176 episodes failed; first: boom (on w, beta 0)"])
    assert exit_status(failed) == 1
    err = capsys.readouterr().err
    assert "dream-gym demo: policy greedy: 1 of 176 episodes failed" in err and "exit status 1" in err


def test_the_next_steps_are_three_commands_of_at_most_80_columns(tmp_path):
    lines = next_steps(tmp_path.parent / "out", "heldout")
    assert len(lines) == 3 and all("dream-gym " in line for line in lines)
    assert str(tmp_path.parent / "out" / "dream" / "chosen.py") in lines[1]  # the kept version, where it is
    assert all(len(line) <= 80 for line in next_steps(type(tmp_path)("out/demo"), "heldout"))


