"""An OpenAI-compatible chat-completions server whose "model" is a built-in discovery agent.

``dream-gym serve-agent --task T`` lets OpenEvolve (or any system that speaks the OpenAI chat API)
run on a laptop without an LLM or a key: each request is answered by ``builtin_agent(T)``
(:mod:`dream_gym.online.agents`), the same no-LLM agent ``dream-gym grow --agent builtin`` uses;
``--task initial_program.py,evaluator.py`` (any OpenEvolve-style task) is answered by the generic
agent (:mod:`dream_gym.online.agents.generic`: seeded edits of the parent, crossover with the
other programs the prompt shows).

* **What it reads** (:mod:`dream_gym.online.prompts`). The parent program is the fenced block under
  ``# Current Program`` of the last user message (OpenEvolve's ``diff_user`` and
  ``full_rewrite_user`` templates); any other client's prompt: its last fenced code block. The
  parent's error and diagnostics come from the ``### error`` / ``### diagnostics`` artifacts
  OpenEvolve shows under "Last Execution Output" (the evaluator files of
  :mod:`dream_gym.integrations.openevolve.evaluator` return them), its score from ``- Fitness:``; in
  SkyDiscover's prompts from the ``combined_score:`` and ``error:`` lines of the parent's
  "## Program Information" and the ``## error`` / ``## diagnostics`` artifact sections below its code
  (:func:`dream_gym.online.prompts.skydiscover_feedback`). The agent reads programs as text and
  never runs them.
* **What it answers.** When the prompt asks for SEARCH/REPLACE blocks (diff mode), the agent's new
  program as SEARCH/REPLACE blocks against the parent (:mod:`dream_gym.online.search_replace`: small
  hunks, each SEARCH unique in the parent, checked by applying them the way OpenEvolve does; one
  block of the whole program when hunks cannot be made unambiguous); otherwise the whole program in
  one fenced block.
* **Deterministic for a seed**: the agent's random generator is seeded from the server's seed,
  the request's ``seed`` (OpenEvolve sends one per iteration when it has a random seed) and the
  sha256 of the parent as the prompt gives it (the built-in agents: its code, score and error;
  without a request seed, the whole messages), so the same request gets the same answer,
  whatever the thread and whatever else the prompt shows.
* Listens on 127.0.0.1 only. ``POST /v1/chat/completions`` (and ``/chat/completions``),
  ``GET /v1/models``; ``usage`` counts tokens as characters / 4 (nothing is billed).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from dream_gym.online.agent_base import ParentContext, Proposal
from dream_gym.online.fitness import task_score
from dream_gym.online.prompts import ParsedPrompt, ShinkaPrompt, message_text, parse_prompt, shinka_prompt
from dream_gym.online.search_replace import apply_blocks, diff_blocks, format_diff

HOST = "127.0.0.1"
MODEL_NAME = "dream-gym-builtin"
MAX_BODY_BYTES = 64 * 1024 * 1024



def shinka_answer(prompt: ShinkaPrompt, proposal: Proposal) -> str:
    """The agent's child in the form ShinkaEvolve parses (its ``apply_diff_patch`` or
    ``apply_full_patch``): <NAME>, <DESCRIPTION>, then <DIFF> blocks or the whole file in <CODE>."""
    note = " ".join(proposal.notes.split())
    name = re.sub(r"[^a-z0-9_]+", "_", note.lower()).strip("_")[:60] or "edit"
    child = proposal.code.strip("\n")
    head = f"<NAME>\n{name}\n</NAME>\n\n<DESCRIPTION>\n{note}\n</DESCRIPTION>\n\n"
    if prompt.diff_mode:
        return head + f"<DIFF>\n{format_diff(shinka_blocks(prompt, child))}\n</DIFF>\n"
    program = f"{prompt.prefix}{child}\n{prompt.suffix}" if prompt.prefix else child
    return head + f"<CODE>\n```python\n{program.rstrip()}\n```\n</CODE>\n"


def shinka_blocks(prompt: ShinkaPrompt, child: str) -> list[tuple[str, str]]:
    """SEARCH/REPLACE blocks turning the parent's evolvable text into ``child``, checked with
    ShinkaEvolve's own ``apply_diff_patch`` when it is installed (it matches the first occurrence
    in the text so far and drops blank lines at a block's ends); else one block of the whole text."""
    code = prompt.code or ""
    parent = f"{prompt.prefix}{code}{prompt.suffix}"
    wanted = f"{prompt.prefix}{child}\n{prompt.suffix}"
    blocks = diff_blocks(code, child)
    try:
        from shinka.edit.apply_diff import apply_diff_patch
    except ImportError:
        return blocks
    applied, count, _, error, _, _ = apply_diff_patch(patch_str=format_diff(blocks), original_str=parent,
                                                       language="python", verbose=False)
    if error is None and count and _lines(applied) == _lines(wanted):
        return blocks
    return [(code.strip("\n"), child)]


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]


# -- the agent behind the server --------------------------------------------------------------------
class AgentResponder:
    """Turns a chat request into the agent's reply (thread-safe: no shared state).

    ``task_name`` is a built-in task (its built-in agent answers) or ``initial_program.py,evaluator.py``
    (any OpenEvolve-style task: the generic agent of :mod:`dream_gym.online.agents.generic` answers,
    from the parent and the other programs the prompt shows)."""

    def __init__(self, task_name: str, seed: int = 0):
        from dream_gym.online.agents import GenericAgent, builtin_agent
        from dream_gym.online.tasks import get_task

        self.task_name = task_name
        self.seed = int(seed)
        self.task = None
        self.generic: GenericAgent | None = None
        if "," in task_name:
            for path in (p.strip() for p in task_name.split(",", 1)):
                if not Path(path).is_file():
                    raise FileNotFoundError(f"--task {task_name}: {path} does not exist")
            self.generic = GenericAgent()
            return
        self.task = get_task(task_name, files_too=True)
        try:
            builtin_agent(task_name)
        except ValueError:  # a built-in task without an agent of its own
            self.generic = GenericAgent()

    def rng_for(self, body: dict[str, Any]) -> np.random.Generator:
        """The built-in agent's generator for one request: the server's seed, the request's seed
        and the parent as the prompt gives it (its code, score and error). The rest of the prompt
        (the other programs shown, which OpenEvolve's workers pick and order with their own
        unseeded generators; diagnostics, whose tracebacks name a temporary folder) does not
        change the child; without a request seed the whole messages are hashed, so repeated
        requests still get different children."""
        request_seed = body.get("seed")
        extra = request_seed % 2**32 if isinstance(request_seed, int) and not isinstance(request_seed, bool) else None
        messages = body.get("messages", [])
        material: Any = messages
        if extra is not None and isinstance(messages, list):
            parsed = shinka_prompt(messages) or parse_prompt(messages)
            material = [parsed.code, parsed.fitness, parsed.error]
        digest = hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).digest()
        words = [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]
        return np.random.default_rng([self.seed % 2**32, extra or 0, *words])

    def reply(self, body: dict[str, Any]) -> str:
        from dream_gym.online.agents import builtin_agent

        messages = body.get("messages")
        if not isinstance(messages, list):
            raise ValueError("the request has no 'messages' list")
        parsed = shinka_prompt(messages) or parse_prompt(messages)
        if parsed.code is None:
            return ("I found no program to improve in this prompt: put the current program in a fenced "
                    "code block (OpenEvolve's '# Current Program' section).")
        if self.generic is not None:
            return self._formatted(parsed, self._generic_proposal(parsed.code, parsed.fitness, messages, body))
        assert self.task is not None
        score = None if parsed.error or parsed.fitness is None or parsed.fitness <= 0 else task_score(
            parsed.fitness, self.task.direction)
        parent = ParentContext(
            code=parsed.code, score=score, diagnostics=parsed.diagnostics, error=parsed.error,
            history=[{"score": score, "error": parsed.error, "fail_class": None,
                      "diagnostics": parsed.diagnostics[:300], "code": parsed.code}],
        )
        proposal = builtin_agent(self.task_name).propose(self.task, parent, self.rng_for(body))
        return self._formatted(parsed, proposal)

    def _generic_proposal(self, code: str, fitness: float | None, messages: list[Any],
                          body: dict[str, Any]) -> Proposal:
        """The generic agent's child: seeded from the server's seed, the request's seed, the parent
        and the other programs shown (not the rest of the prompt's text); crossover takes from the
        shown programs scored at least the parent's ``fitness``."""
        from dream_gym.online.agents.generic import generic_seed, prompt_donors

        assert self.generic is not None
        texts = [message_text(m.get("content")) for m in messages if isinstance(m, dict)]
        donors = prompt_donors(texts, code)
        rng = np.random.default_rng(generic_seed(self.seed, body.get("seed"), code, donors, messages))
        return self.generic.propose(None, ParentContext(code=code, score=fitness), rng, donors=donors)

    @staticmethod
    def _formatted(parsed: ParsedPrompt, proposal: Proposal) -> str:
        assert parsed.code is not None
        if isinstance(parsed, ShinkaPrompt):
            return shinka_answer(parsed, proposal)
        note = proposal.notes.replace("\n", " ")
        if parsed.diff_mode:
            return f"Change: {note}\n\n{format_diff(diff_blocks(parsed.code, proposal.code))}\n"
        return f"Change: {note}\n\n```python\n{proposal.code.rstrip()}\n```\n"


class AgentServer:
    """The HTTP server (a daemon thread, or :meth:`serve_forever` in the foreground)."""

    def __init__(self, task_name: str, *, port: int = 0, seed: int = 0, host: str = HOST):
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"the agent server listens on the loopback interface only, not {host!r}")
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be in 0..65535 (0: a free one), got {port}")
        self.responder = AgentResponder(task_name, seed)
        self.requests = 0
        self._lock = threading.Lock()
        self._agent_lock = threading.Lock()  # see do_POST
        try:
            self._httpd = ThreadingHTTPServer((host, port), self._handler())
        except OSError as exc:  # the port taken: the message names it
            raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from None
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The ``api_base`` to give an OpenAI client (ends with ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> AgentServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="dream-gym-agent-server",
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> AgentServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body are two writes: with Nagle's algorithm the body would wait for the
            # client's delayed acknowledgement of the headers (tens of ms a kept-alive request)
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
                self._send(status, {"error": {"message": message, "type": kind, "code": status}})

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split("?", 1)[0].rstrip("/")
                if path in ("/v1/models", "/models"):
                    self._send(200, {"object": "list", "data": [
                        {"id": MODEL_NAME, "object": "model", "owned_by": "dream-gym",
                         "task": server.responder.task_name}]})
                elif path in ("/health", "/v1/health"):
                    self._send(200, {"status": "ok", "task": server.responder.task_name})
                else:
                    self._error(404, f"no route {self.path}", "not_found")

            def do_POST(self) -> None:  # noqa: N802
                path = self.path.split("?", 1)[0].rstrip("/")
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY_BYTES:
                    self.close_connection = True  # the unread body must not be taken for the next request
                    self._error(413, f"request body over {MAX_BODY_BYTES} bytes")
                    return
                raw = self.rfile.read(length) if length else b"{}"  # read first: the connection is kept alive
                if path not in ("/v1/chat/completions", "/chat/completions"):
                    self._error(404, f"no route {self.path}", "not_found")
                    return
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    self._error(400, "invalid JSON")
                    return
                if not isinstance(body, dict):
                    self._error(400, "the body must be a JSON object")
                    return
                if body.get("stream"):
                    self._error(400, "streaming is not supported: send stream=false")
                    return
                try:
                    with server._agent_lock:  # one answer at a time: the agents parse programs with
                        content = server.responder.reply(body)  # ast, whose C state CPython 3.11 shares
                except ValueError as exc:
                    self._error(400, str(exc))
                    return
                with server._lock:
                    server.requests += 1
                    number = server.requests
                prompt_chars = sum(len(message_text(m.get("content"))) for m in body.get("messages", [])
                                   if isinstance(m, dict))
                usage = {"prompt_tokens": max(1, prompt_chars // 4), "completion_tokens": max(1, len(content) // 4)}
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                self._send(200, {
                    "id": f"chatcmpl-dream-gym-{number}", "object": "chat.completion", "created": int(time.time()),
                    "model": str(body.get("model") or MODEL_NAME),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                 "finish_reason": "stop", "logprobs": None}],
                    "usage": usage,
                })

        return Handler


# What the server reads and how it writes a diff have modules of their own; named here too, where
# the bridges and their tests import them from.
__all__ = ["HOST", "MAX_BODY_BYTES", "MODEL_NAME", "AgentResponder", "AgentServer", "ParsedPrompt", "ShinkaPrompt",
           "apply_blocks", "diff_blocks", "format_diff", "message_text", "parse_prompt", "shinka_answer",
           "shinka_blocks", "shinka_prompt"]
