"""A small OpenAI-compatible chat-completions server for tests (stdlib only).

It listens on 127.0.0.1 on a free port, in a background thread, and answers
``POST /v1/chat/completions`` and ``POST /chat/completions`` with a JSON body in the
OpenAI format, including ``usage``. Replies are scriptable:

* ``server.push(...)`` queues canned replies (a string, or a :class:`Reply` for a status
  code, a delay, explicit token counts or a raw body); they are served in order;
* ``server.responder = fn`` answers with ``fn(request_json) -> str | Reply`` once the
  queue is empty;
* otherwise the default reply is a small fenced Python program.

Every request received is recorded in ``server.requests`` (path, headers, parsed JSON
body) so tests can assert on the prompt and on the ``Authorization`` header.

Use :func:`openai_server` (a pytest fixture) or the class as a context manager.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

DEFAULT_REPLY = "Here is the program.\n\n```python\ndef solve():\n    return 42\n```\n"


@dataclass
class Reply:
    """One scripted reply.

    ``content`` is the assistant message text. ``status`` other than 200 sends an OpenAI-style
    error body instead. ``delay_s`` sleeps before answering (to provoke client timeouts).
    ``prompt_tokens`` / ``completion_tokens`` override the word-count estimate in ``usage``;
    ``headers`` adds response headers (an error's ``Retry-After``);
    ``include_usage=False`` omits ``usage``. ``raw_body`` (bytes) is sent verbatim.
    """

    content: str | None = DEFAULT_REPLY
    status: int = 200
    delay_s: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    include_usage: bool = True
    finish_reason: str = "stop"
    raw_body: bytes | None = None
    headers: dict[str, str] | None = None  # extra response headers (``Retry-After`` of a 429)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    def text(self) -> str:
        """All message contents joined (the full prompt as the server saw it)."""
        parts: list[str] = []
        for m in self.messages:
            c = m.get("content")
            if isinstance(c, str):
                parts.append(c)
            elif isinstance(c, list):  # content parts
                parts.extend(str(p.get("text", "")) for p in c if isinstance(p, dict))
        return "\n".join(parts)


def _count_tokens(text: str) -> int:
    return max(1, len(text.split()))


class OpenAICompatServer:
    """An OpenAI-compatible chat server on 127.0.0.1 that runs in a daemon thread."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._queue: deque[str | Reply] = deque()
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self.responder: Callable[[dict[str, Any]], str | Reply] | None = None
        self._httpd = ThreadingHTTPServer((host, port), self._make_handler())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- scripting -----------------------------------------------------------------------------
    def push(self, *replies: str | Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            item: str | Reply | None = self._queue.popleft() if self._queue else None
        if item is None:
            item = self.responder(body) if self.responder is not None else Reply()
        return Reply(content=item) if isinstance(item, str) else item

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The ``api_base`` to give an OpenAI client (ends with ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> OpenAICompatServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="openai-test-server",
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> OpenAICompatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP ----------------------------------------------------------------------------------
    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body are two writes: with Nagle's algorithm the body would wait for the
            # client's delayed acknowledgement of the headers (tens of ms a kept-alive request)
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr
                pass

            def _send_json(self, status: int, payload: dict[str, Any] | bytes,
                           headers: dict[str, str] | None = None) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # client gave up (timeout)
                    pass

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/") in ("/v1/models", "/models"):
                    self._send_json(200, {"object": "list", "data": [{"id": "test-model", "object": "model"}]})
                else:
                    self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0].rstrip("/")
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send_json(400, {"error": {"message": "invalid JSON", "type": "invalid_request_error"}})
                    return
                if path not in ("/v1/chat/completions", "/chat/completions"):
                    self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                rec = RecordedRequest(path=path, headers={k.lower(): v for k, v in self.headers.items()}, body=body)
                with server._lock:
                    server.requests.append(rec)
                reply = server._next_reply(body)
                if reply.delay_s > 0:
                    time.sleep(reply.delay_s)
                if reply.raw_body is not None:
                    self._send_json(reply.status, reply.raw_body)
                    return
                if reply.status != 200:
                    self._send_json(reply.status, {"error": {
                        "message": f"simulated server error {reply.status}",
                        "type": "server_error", "code": reply.status}}, reply.headers)
                    return
                content = reply.content
                prompt_tokens = (reply.prompt_tokens if reply.prompt_tokens is not None
                                 else _count_tokens(rec.text()))
                completion_tokens = (reply.completion_tokens if reply.completion_tokens is not None
                                     else _count_tokens(content or ""))
                payload: dict[str, Any] = {
                    "id": f"chatcmpl-test-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "test-model"),
                    "system_fingerprint": "fp_test",
                    "choices": [{
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "logprobs": None,
                        "finish_reason": reply.finish_reason,
                    }],
                }
                if reply.include_usage:
                    payload["usage"] = {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                    }
                self._send_json(200, payload)

        return Handler


@pytest.fixture
def openai_server() -> Iterator[OpenAICompatServer]:
    """A fresh OpenAI-compatible server on a free 127.0.0.1 port, stopped after the test."""
    with OpenAICompatServer() as srv:
        yield srv


def no_program_first(answer: Any) -> Any:
    """A test server's responder: the first LLM call (by its seed, so a transport-level retry of it
    too) gets an answer with no program in it; every other call gets ``answer``'s."""
    first: list[Any] = []

    def respond(body: dict[str, Any]) -> str:
        if not first:
            first.append(body.get("seed"))
        return "I would rather not write code today." if body.get("seed") == first[0] else answer(body)

    return respond


def calls(server: Any) -> int:
    """The LLM calls a test server answered (a client's transport-level retry repeats its call's seed)."""
    return len({request.body.get("seed") for request in server.requests})
