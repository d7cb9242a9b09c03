"""Secrets never reach records or prompts (dream_gym.infrastructure.redact), unit by unit and end to end.

The end-to-end tests put a fresh fake key in the environment of this process and let untrusted
code leak it: a candidate or a policy revision whose exception message is the key (plainly,
reversed, base64, hex, split by spaces). The key is computed at run time from character codes, as
a program that read it would have it, so it reaches the records only through the program's
output; one reply also holds the key literally. Every file written and every later prompt is
then searched for the key in each of those forms.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import os
import re
import secrets
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from dream_gym.infrastructure.redact import (
    RedactingStream,
    redact,
    redact_files,
    redact_value,
    redacted_output,
    register_secret,
    secret_values,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic.*")

KEY_NAME = "OPENAI_API_KEY"
MARK = f"[redacted:{KEY_NAME}]"


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    value = "sk-test-" + secrets.token_hex(16)
    monkeypatch.setenv(KEY_NAME, value)
    return value


def leaked_forms(key: str) -> dict[str, str]:
    """How a leak of ``key`` would look in a file or a prompt (computed here, not by the module)."""
    raw = key.encode()
    return {
        "plain": key, "reversed": key[::-1], "hex": raw.hex(), "HEX": raw.hex().upper(),
        "base64": base64.b64encode(raw).decode()[:-4], "urlsafe-base64": base64.urlsafe_b64encode(raw).decode()[:-4],
        "spaced": " ".join(key), "middle": key[4:-4],
    }


def assert_no_leak(text: str, key: str, where: str) -> None:
    for form, value in leaked_forms(key).items():
        assert value not in text, f"the key ({form}) is in {where}"


def folder_text(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` as text (gzip files decompressed)."""
    texts = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        texts[str(path.relative_to(folder))] = data.decode("utf-8", "replace")
    return texts


# ------------------------------------------------------------------------------------------------
# unit tests
# ------------------------------------------------------------------------------------------------

def test_plain_value_is_replaced_by_its_name(key: str) -> None:
    assert redact(f"Error: bad key {key}!") == f"Error: bad key {MARK}!"


@pytest.mark.parametrize("encode", [
    lambda k: k[::-1],
    lambda k: k.encode().hex(),
    lambda k: k.encode().hex().upper(),
    lambda k: " ".join(k),
    lambda k: ", ".join(k),
    lambda k: f"{k[:5]} {k[5:12]}-{k[12:]}",
], ids=["reversed", "hex", "HEX", "spaced", "comma-separated", "chunked"])
def test_encoded_value_is_caught(key: str, encode) -> None:
    out = redact(f"ValueError: {encode(key)} (leaked)")
    assert out == f"ValueError: {MARK} (leaked)"


def test_url_quoted_and_rot13_values_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    import codecs

    password = "p@ss w/rd+" + secrets.token_hex(4)
    monkeypatch.setenv("DB_PASSWORD", password)
    for form in (quote(password, safe=""), quote_plus(password), codecs.encode(password, "rot13")):
        assert redact(f"url=https://h/?p={form}&x=1") == "url=https://h/?p=[redacted:DB_PASSWORD]&x=1", form


@pytest.mark.parametrize("encoder", [base64.b64encode, base64.urlsafe_b64encode], ids=["standard", "urlsafe"])
@pytest.mark.parametrize("prefix", ["", "a", "ab", "abc"])
def test_base64_at_every_alignment_inside_a_longer_text(key: str, encoder, prefix: str) -> None:
    blob = encoder(f"{prefix}{key}!tail".encode()).decode()
    out = redact(f"payload={blob}")
    assert MARK in out
    for piece in out.replace("payload=", "").split(MARK):  # what is left cannot give the key back
        for shift in range(4):
            try:
                decoded = base64.b64decode(piece[shift:].replace("-", "+").replace("_", "/") + "===")
            except binascii.Error:  # not a whole base64 text at this shift
                continue
            assert key[3:-3].encode() not in decoded


def test_nested_values_keys_included_other_types_kept(key: str) -> None:
    record = {"id": "n1", "score": 1.5, "ok": None, key: [1, {"error": f"boom {key}", "t": (key[::-1], 2)}]}
    out = redact_value(record)
    assert out == {"id": "n1", "score": 1.5, "ok": None, MARK: [1, {"error": f"boom {MARK}", "t": (MARK, 2)}]}
    assert key in json.dumps(record)  # the argument is not changed


def test_a_secret_that_needs_json_escapes_is_caught_before_json(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    from dream_gym.infrastructure.durable import write_json_atomic

    quoted = 'quo"te\\' + secrets.token_hex(6)
    monkeypatch.setenv("SERVICE_TOKEN", quoted)
    write_json_atomic(tmp_path / "x.json", {"error": f"it was {quoted}"})
    text = (tmp_path / "x.json").read_text()
    assert json.dumps(quoted)[1:-1] not in text and "[redacted:SERVICE_TOKEN]" in text


def test_short_values_and_other_names_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHORT_TOKEN", "abc1234")  # 7 characters: would mangle text
    monkeypatch.setenv("PLAIN_SETTING", "not-a-secret-value")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/ssh-agent-socket-path")
    text = "abc1234 not-a-secret-value /tmp/ssh-agent-socket-path"
    assert redact(text) == text
    names = {name for name, _ in secret_values()}
    assert not names & {"SHORT_TOKEN", "PLAIN_SETTING", "SSH_AUTH_SOCK"}


@pytest.mark.parametrize("name", ["HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "GITHUB_PAT",
                                  "pgpassword", "MY_COOKIE", "SENTRY_DSN", "SLACK_WEBHOOK_URL", "X_CREDENTIALS"])
def test_secret_names(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    value = secrets.token_urlsafe(12)
    monkeypatch.setenv(name, value)
    assert (name, value) in secret_values()


def test_url_password_is_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://dbuser:Pa55-word-xyz@db.example:5432/app")
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:8000/v1")  # an address, not a secret
    assert redact("login with Pa55-word-xyz at http://127.0.0.1:8000/v1") == (
        "login with [redacted:DATABASE_URL] at http://127.0.0.1:8000/v1")


def test_environment_changes_are_seen_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = "rot-first-" + secrets.token_hex(8), "rot-second-" + secrets.token_hex(8)  # no key's shape
    monkeypatch.setenv("ROTATED_API_KEY", first)
    assert redact(first) == "[redacted:ROTATED_API_KEY]"
    monkeypatch.setenv("ROTATED_API_KEY", second)
    assert redact(f"{first} {second}") == f"{first} [redacted:ROTATED_API_KEY]"
    monkeypatch.delenv("ROTATED_API_KEY")
    assert redact(second) == second


def test_registered_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    value = "explicit-" + secrets.token_hex(8)
    assert redact(value) == value
    register_secret(value, "LLM_API_KEY")
    assert redact(f"[{value}]") == "[[redacted:LLM_API_KEY]]"


def test_values_without_a_secret_come_back_unchanged(key: str) -> None:
    record = {"id": "n1", "code": "def solve():\n    return 1\n", "error": None, "t": (1, "x")}
    assert redact_value(record) == record
    assert redact("nothing here") == "nothing here"


def test_printed_output_is_redacted(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    with redacted_output():
        assert isinstance(sys.stdout, RedactingStream)
        print(f"error: {key}")
        print(f"warning: {key[::-1]}", file=sys.stderr)
    out, err = capsys.readouterr()
    assert out == f"error: {MARK}\n" and err == f"warning: {MARK}\n"


def test_a_traceback_escaping_the_cli_is_redacted(key: str, tmp_path: Path) -> None:
    """An exception the CLI does not handle is printed by Python after main() returns."""
    import subprocess
    import sys

    code = ("import os\nfrom dream_gym.infrastructure.redact import redacted_output\n"
            "with redacted_output():\n    raise KeyError(os.environ['OPENAI_API_KEY'])\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "KeyError" in run.stderr and MARK in run.stderr
    assert_no_leak(run.stdout + run.stderr, key, "the traceback")


# ------------------------------------------------------------------------------------------------
# each writer on its own
# ------------------------------------------------------------------------------------------------

def test_every_writer_of_records_redacts(key: str, tmp_path: Path) -> None:
    from dream_gym.dream.runfolder import JsonLog, write_json
    from dream_gym.evaluation.journal import EvalJournal
    from dream_gym.evaluation.results import dumps_row
    from dream_gym.infrastructure.durable import write_atomic, write_json_atomic
    from dream_gym.online.evidence import EvidenceLedger
    from dream_gym.policy import EpisodeResult
    from dream_gym.world.writer import WorldWriter, new_meta

    leak = f"ValueError: {key} {key[::-1]}"
    with WorldWriter.create(tmp_path / "world", new_meta("w", "t", f"described with {key}")) as writer:
        writer.append({"id": "root", "parent": None, "score": 1.0, "code": f"# {key}\n"})
        writer.append({"id": "n1", "parent": "root", "score": None, "error": leak, "diagnostics": leak})
        writer.update_meta(survival={"note": leak})
        assert_no_leak(json.dumps([writer.records, writer.meta]), key, "the writer's records")
        writer.finish(compress=True)
    ledger = EvidenceLedger(tmp_path / "world")
    ledger.append({"parsed": [0, leak], "cmd": "python harness.py"})
    ledger.close()
    JsonLog(tmp_path / "run" / "dream.jsonl").append({"type": "revision", "error": leak})
    write_json(tmp_path / "run" / "0.json", {"error": leak})
    write_json_atomic(tmp_path / "run" / "summary.json", {"iterations": [{"note": leak}]})
    write_atomic(tmp_path / "run" / "0.prompt.md", f"## Error\n{leak}\n")
    (tmp_path / "run" / "0.results.jsonl").write_text(dumps_row({"policy": "p", "error": leak}) + "\n")
    journal = EvalJournal.open(tmp_path / "eval" / "results.jsonl", {"policies": ["p"]}, resume=False)
    journal.append((0, 0), [EpisodeResult(world="w", policy="p", beta=0.5, replay_score=0.0, best_q=0.0,
                                          best_score=None, attempts=0, rounds=1, work=0.0, attainment=0.0,
                                          error=leak)])
    journal.close()
    texts = folder_text(tmp_path)
    assert {"world/nodes.jsonl.gz", "world/world.json", "world/evidence.jsonl", "eval/results.jsonl.partial"} <= set(texts)
    for name, text in texts.items():
        if name.endswith((".gz", ".json", ".jsonl", ".md", ".partial")):
            assert MARK in text, name
        assert_no_leak(text, key, name)


def test_a_resumed_run_with_a_secret_in_its_settings_is_not_refused(key: str, tmp_path: Path) -> None:
    from dream_gym.dream.runfolder import FINGERPRINT_FILE, check_fingerprint

    settings = {"api_base": f"http://user:{key}@127.0.0.1:9/v1", "seed": 1}
    check_fingerprint(tmp_path, settings, resume=False, command="dream-gym dream")
    assert_no_leak((tmp_path / FINGERPRINT_FILE).read_text(), key, "the fingerprint")
    check_fingerprint(tmp_path, settings, resume=True, command="dream-gym dream")  # the same settings


def test_leaderboard_errors_are_redacted(key: str) -> None:
    from dream_gym.evaluation.leaderboard import leaderboard
    from dream_gym.policy import EpisodeResult

    episode = EpisodeResult(world="w", policy="p", beta=0.5, replay_score=0.0, best_q=0.0, best_score=None,
                            attempts=0, rounds=1, work=0.0, attainment=0.0, error=f"PolicyException: {key}")
    board = leaderboard([episode])
    assert board.errors == [("p", "w", 0.5, f"PolicyException: {MARK}")]


# ------------------------------------------------------------------------------------------------
# end to end
# ------------------------------------------------------------------------------------------------

#: Python expressions over KEY (the key, computed at run time) that a leaking program raises.
LEAKS = {
    "plain": "KEY",
    "reversed": "KEY[::-1]",
    "base64": "base64.b64encode(KEY.encode()).decode()",
    "hex": "KEY.encode().hex()",
    "spaced": "' '.join(KEY)",
}


def _key_source(key: str) -> str:
    """Source lines that rebuild ``key`` at run time (no text form of the key in the source)."""
    return f"import base64\n\nKEY = ''.join(map(chr, {[ord(c) for c in key]!r}))\n"


def leaking_candidate(key: str, body: str) -> str:
    """A sum-difference candidate whose construct_set runs ``body`` (one line)."""
    return f"{_key_source(key)}\n\ndef construct_set():\n    {body}\n"


def _fenced(code: str) -> str:
    return f"Here is the program.\n\n```python\n{code}```\n"


def test_cli_prints_no_secret_from_a_policy_error(key: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from dream_gym.cli import main

    policy = tmp_path / "leaky_policy.py"
    policy.write_text(f"{_key_source(key)}\n\ndef act(view):\n    raise ValueError(KEY + ' ' + KEY[::-1])\n")
    assert main(["replay", "sd-fixed-s0", "--policy", str(policy)]) == 1
    out, err = capsys.readouterr()
    assert f"ValueError: {MARK} {MARK}" in err  # the error was printed (on stderr), redacted
    assert_no_leak(out + err, key, "the printed output")


@pytest.mark.slow
def test_grow_with_the_llm_agent_leaks_no_key(key: str, tmp_path: Path) -> None:
    """Round 1: each of 7 candidates leaks the key: 5 raise it in one form, one returns it in
    its answer (the evidence ledger records parsed answers), one comes from a reply that holds
    it literally. Round 2 refines each of them: its prompts quote those errors."""
    from dream_gym.online.evidence import read_evidence
    from dream_gym.online.loop import GrowConfig, grow, write_summary
    from dream_gym.policies import make_policy
    from tests.openai_server import OpenAICompatServer

    candidates = [leaking_candidate(key, f"raise ValueError({expression})") for expression in LEAKS.values()]
    candidates.append(leaking_candidate(key, "return [0, 1, KEY]"))
    candidates.append(f"def construct_set():\n    raise ValueError({key!r})\n")
    harmless = "def construct_set():\n    return [0, 1, 3, 7, 12, 20]\n"
    workers = len(candidates)
    with OpenAICompatServer() as server:
        server.responder = lambda body: _fenced(
            candidates[len(server.requests) - 1] if len(server.requests) <= workers else harmless)
        config = GrowConfig(task="sum-difference", out=tmp_path / "world", agent="openai/local-coder",
                            api_base=server.base_url, workers=workers, rounds=2, seed=1, backend="serial")
        result = grow(config, make_policy("fixed", branches=workers, depth=2))
        write_summary(result)
        bodies = [json.dumps(r.body) for r in server.requests]
    assert len(bodies) == 2 * workers

    nodes = (result.folder / "nodes.jsonl").read_text()
    assert nodes.count(MARK) >= workers  # every leak happened, and was caught
    for name, text in folder_text(result.folder).items():
        assert_no_leak(text, key, f"the world's {name}")
    evidence = json.dumps(read_evidence(result.folder))
    assert MARK in evidence  # the answer that held the key
    assert_no_leak(evidence, key, "the evidence ledger")
    for number, body in enumerate(bodies, 1):
        assert_no_leak(body, key, f"request {number}")
    assert all(MARK in body for body in bodies[workers:])  # the errors were fed back, redacted


def test_llm_client_redacts_what_it_sends_and_what_it_returns(key: str) -> None:
    """Below the records: a prompt that quotes the key (in two forms) is sent redacted, and a
    reply that quotes it comes back redacted (and so does the agent's recorded prompt)."""
    import numpy as np

    from dream_gym.online.agent_base import ParentContext
    from dream_gym.online.llm_agent import LiteLLMAgent
    from dream_gym.online.tasks import get_task
    from tests.openai_server import OpenAICompatServer

    leak = f"ValueError: {key} / {base64.b64encode(key.encode()).decode()}"
    parent = ParentContext(code=f"# {key[::-1]}\ndef construct_set():\n    return [0]\n", score=None,
                           diagnostics=leak, error=leak, history=[{"score": None, "error": leak}])
    with OpenAICompatServer() as server:
        server.push(_fenced(f"def construct_set():\n    return {key!r}\n"))
        agent = LiteLLMAgent("openai/local-coder", api_base=server.base_url, retry_backoff_s=0.0)
        proposal = agent.propose(get_task("sum-difference"), parent, np.random.default_rng(0))
        body = json.dumps(server.requests[0].body)
        assert server.requests[0].headers["authorization"] == f"Bearer {key}"  # the key is still used
    assert body.count(MARK) >= 4
    assert_no_leak(body, key, "the request")
    assert proposal.code == f"def construct_set():\n    return '{MARK}'\n"
    assert_no_leak(json.dumps([proposal.prompt, proposal.notes, proposal.code]), key, "the proposal")


def _revision(key: str, body: str) -> str:
    return _fenced(f"{_key_source(key)}\n\ndef act(view):\n{body}")


@pytest.mark.slow
def test_dream_with_the_llm_developer_leaks_no_key(key: str, tmp_path: Path) -> None:
    """Revisions that fail validation with the key in their error (in each form), one that fails
    only on the history (so its episodes' results hold the error), one whose reply holds the
    key literally, then a good one: the prompts quote every earlier error."""
    from dream_gym.dream.improve import DreamSettings, improvement_step
    from dream_gym.dream.llm_developer import LLMDeveloper
    from dream_gym.dream.scoring import ScoringSettings
    from dream_gym.evaluation.evaluate import resolve_worlds
    from tests import dream_revisions as revs
    from tests.openai_server import OpenAICompatServer

    replies = [_revision(key, f"    raise ValueError({expression})\n") for expression in LEAKS.values()]
    replies.append(_revision(key, "    if view.task_name != 'validation':\n"
                                  "        raise ValueError(base64.urlsafe_b64encode(KEY.encode()).decode())\n"
                                  "    return [0] if view.rounds == 0 else []\n"))
    replies.append(_fenced(f"def act(view):\n    raise RuntimeError({key!r})\n"))
    replies.append(revs.fenced(revs.WEAK))
    settings = DreamSettings(revisions=len(replies) + 1, scoring=ScoringSettings(betas=(0.5,), jobs=1))
    out = tmp_path / "run"
    with OpenAICompatServer() as server:
        server.responder = lambda body: replies[
            int(re.search(r"# Revision (\d+) of", body["messages"][-1]["content"]).group(1)) - 1]
        developer = LLMDeveloper("openai/local-dev", out, api_base=server.base_url, num_retries=0)
        result = improvement_step(out, 1, "greedy", resolve_worlds("sd-fixed-s0"), developer, settings)
        bodies = [json.dumps(r.body) for r in server.requests]
    assert len(bodies) == len(replies)

    status = {v.m: v.status for v in result.versions}
    assert [status[m] for m in range(1, len(LEAKS) + 1)] == ["invalid"] * len(LEAKS)
    assert status[len(LEAKS) + 1] == "failed" and status[len(replies)] == "ok"
    ledger = (out / "dream.jsonl").read_text()
    assert ledger.count(MARK) >= len(LEAKS) + 2  # every leak happened, and was caught
    assert MARK in (out / f"revisions/1/{len(LEAKS) + 1}.results.jsonl").read_text()
    for name, text in folder_text(out).items():
        assert_no_leak(text, key, f"the run folder's {name}")
    for number, body in enumerate(bodies, 1):
        assert_no_leak(body, key, f"request {number}")
    assert bodies[-1].count(MARK) >= len(LEAKS) + 2  # the errors were fed back, redacted


def test_a_key_of_a_known_shape_is_redacted_whatever_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run imported where its key is not set kept the key its systems' error texts quote
    ("Incorrect API key provided: sk-..."): into the world's nodes, which are packed and shared."""
    for name in [n for n in os.environ if "KEY" in n or "TOKEN" in n]:
        monkeypatch.delenv(name)
    keys = ["sk-test-SECRET-12345", "sk-proj-" + "a1B2" * 10, "sk-ant-api03-" + "Xy9" * 14, "hf_" + "Ab1" * 12,
            "AKIA" + "ABCDEFGH12345678", "ghp_" + "a" * 36, "AIza" + "b" * 35]
    for key in keys:
        assert redact(f"Incorrect API key provided: {key}.") == "Incorrect API key provided: [redacted:key]."
    record = {"error": f"401 {keys[0]}",
              "code": "task-level = 1\nrisk-assessment-of-the-whole-thing = 2\nname = 'sk-learn-compatible-estimator'"}
    assert redact_value(record) == {"error": "401 [redacted:key]", "code": record["code"]}  # not inside words
    assert redact_value({"code": "print('sk-short')"}) == {"code": "print('sk-short')"}  # too short for a key


def test_the_files_a_system_wrote_are_redacted_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A discovery system's own logs, traces and database beside the world quoted the key its
    server refused (OpenEvolve's log 12 times); the world's files and binary files are left."""
    import sqlite3

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-12345")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "run.log").write_text("401: Incorrect API key provided: sk-test-SECRET-12345\n")
    (tmp_path / "trace.jsonl").write_text('{"error": "sk-test-SECRET-12345"}\n')
    (tmp_path / "nodes.jsonl").write_text("kept as it is: sk-test-SECRET-12345\n")
    (tmp_path / "blob.bin").write_bytes(b"\0sk-test-SECRET-12345")
    with sqlite3.connect(tmp_path / "programs.sqlite") as db:
        db.execute("CREATE TABLE programs (id TEXT, model_name TEXT, score REAL)")
        db.execute("INSERT INTO programs VALUES ('a', 'http://u:sk-test-SECRET-12345@h/v1', 1.5)")
    changed = redact_files(tmp_path, keep=("nodes.jsonl",))
    assert sorted(Path(p).name for p in changed) == ["programs.sqlite", "run.log", "trace.jsonl"]
    assert "SECRET" not in (tmp_path / "logs" / "run.log").read_text() + (tmp_path / "trace.jsonl").read_text()
    with sqlite3.connect(tmp_path / "programs.sqlite") as db:
        assert db.execute("SELECT * FROM programs").fetchall() == [
            ("a", "http://u:[redacted:OPENAI_API_KEY]@h/v1", 1.5)]
    assert "SECRET" in (tmp_path / "nodes.jsonl").read_text() and b"SECRET" in (tmp_path / "blob.bin").read_bytes()
    assert redact_files(tmp_path, keep=("nodes.jsonl",)) == []  # nothing left to change


def test_the_credentials_of_an_api_base_are_secrets_once_registered() -> None:
    """``--api-base http://alice:pw@host/v1``: the command line a world records (and a system's
    logs and database) held the password word for word, where the error path hid it."""
    from dream_gym.infrastructure.redact import register_url_secrets

    password, token = "pw-" + secrets.token_hex(8), "q" + secrets.token_hex(8)
    command = f"dream-gym grow --api-base http://alice:{password}@127.0.0.1:9/v1?api_key={token}"
    assert redact(command) == command
    register_url_secrets(f"http://alice:{password}@127.0.0.1:9/v1?api_key={token}")
    assert redact(command) == ("dream-gym grow --api-base http://alice:[redacted:API_BASE]@127.0.0.1:9/v1"
                               "?api_key=[redacted:API_BASE]")
    register_url_secrets("http://127.0.0.1:9/v1")  # no credentials: nothing registered, nothing fails
    register_url_secrets(None)
