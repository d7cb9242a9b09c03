"""What a discovery system writes beside the world holds no secret once the run ends: OpenEvolve's
log and its failure trace quoted the key its server refused (``Incorrect API key provided: sk-...``,
as OpenAI's 401 says), where dream_gym's redaction of its own records did not reach. The system
runs for real (the installed package, the CLI) against the test's OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from openai_server import OpenAICompatServer, Reply

KEY = "sk-test-SECRET-12345"


@pytest.mark.slow
def test_a_refused_key_quoted_by_the_systems_own_files_is_redacted(tmp_path: Path) -> None:
    pytest.importorskip("openevolve")
    out = tmp_path / "world"
    config = tmp_path / "openevolve.yaml"  # no retries of the refused calls: the test takes seconds, not 30
    config.write_text("llm:\n  retries: 0\n  retry_delay: 0\nevaluator:\n  cascade_evaluation: false\n")
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error",
                                 "code": "invalid_api_key"}}).encode()
    with OpenAICompatServer() as server:
        server.responder = lambda request: Reply(status=401, raw_body=body)
        done = subprocess.run(
            [sys.executable, "-m", "dream_gym", "deploy", "--system", "openevolve", "--task", "sum-difference",
             "--policy", "greedy", "-W", "2", "--budget", "2", "--model", "openai/test-model",
             "--api-base", server.base_url, "--option", f"config_path={config}", "--out", str(out)],
            capture_output=True, text=True, env={**os.environ, "OPENAI_API_KEY": KEY}, timeout=600)
        assert server.requests and all(r.headers.get("authorization") == f"Bearer {KEY}" for r in server.requests)
    assert done.returncode == 2 and "Incorrect API key provided: [redacted:OPENAI_API_KEY]" in done.stderr
    written = [path for path in out.rglob("*") if path.is_file()]
    assert any(path.suffix == ".log" for path in written)  # OpenEvolve's own log is there, and was read
    assert not [path for path in written if KEY.encode() in path.read_bytes()]
    assert KEY not in done.stdout + done.stderr
