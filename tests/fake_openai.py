"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, for tests (stdlib only).

Serves ``POST /v1/chat/completions`` and ``GET /v1/models``. Each completion request
is answered from a *script*: either a list of replies used in order, or a function
``(request_json) -> reply`` (route on the prompt, e.g. with :func:`last_user_text`).

A reply is one of:

* ``"text"``: the assistant's content (malformed JSON included, verbatim);
* ``{"content": "...", "usage": {...}, "finish_reason": "stop"}``: content with
  explicit ``prompt_tokens``/``completion_tokens`` (default: ceil(chars / 4));
* ``{"tool_calls": [{"name": ..., "arguments": dict | str}]}``: a function call;
* ``{"status": 500}`` / ``{"status": 429, "message": ...}``: an HTTP error;
* ``{"raw": "..."}``: a 200 response whose HTTP body is the given bytes verbatim.

Usage::

    with serve(["hello"]) as base_url:            # just the URL
        ...
    with FakeOpenAIServer(route) as server:       # URL plus recorded requests
        server.base_url, server.requests
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = str | dict[str, Any]
Script = Sequence[Reply] | Callable[[dict[str, Any]], Reply]

#: Status for "the test asked more than it scripted": not retried, not a 400.
SCRIPT_EXHAUSTED_STATUS = 418


def _tokens(text: str) -> int:
    """Default token count: one per started 4 characters."""
    return (len(text) + 3) // 4


def message_text(message: dict[str, Any]) -> str:
    """The text of one request message (string content or a list of text parts)."""
    content = message.get("content") or ""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def last_user_text(request: dict[str, Any]) -> str:
    """The last user message of a chat-completions request."""
    for message in reversed(request.get("messages", [])):
        if message.get("role") == "user":
            return message_text(message)
    return ""


def all_text(request: dict[str, Any]) -> str:
    """Every message's text joined by newlines (system prompt included)."""
    return "\n".join(message_text(m) for m in request.get("messages", []))


def tool_call(name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    """A reply that calls function ``name`` with ``arguments``."""
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def fail_first(
    script: Callable[[dict[str, Any]], Reply], *statuses: int
) -> Callable[[dict[str, Any]], Reply]:
    """Wrap a routing function so the first requests fail with ``statuses`` (e.g. 500, 429)."""
    pending = list(statuses)
    lock = threading.Lock()

    def route(request: dict[str, Any]) -> Reply:
        with lock:
            status = pending.pop(0) if pending else None
        return {"status": status} if status is not None else script(request)

    return route


class FakeOpenAIServer:
    """The server; a context manager that starts it on enter and stops it on exit.

    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1`` once started.
        requests: the JSON bodies of every completion request, in arrival order.
        authorizations: their Authorization headers.
    """

    def __init__(
        self, script: Script, *, models: Sequence[str] = ("fake-model",), port: int = 0
    ) -> None:
        self.port = port
        self._script = script if callable(script) else list(script)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.models = list(models)
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str] = []
        """The Authorization header of every completion request."""
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    # ---- lifecycle

    def start(self) -> FakeOpenAIServer:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        httpd = ThreadingHTTPServer(("127.0.0.1", self.port), _Handler)
        httpd.daemon_threads = True
        httpd.fake = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-openai",
            daemon=True,
        )
        self._thread.start()
        self.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        return self

    def stop(self) -> None:
        """Shut the server down and join its thread."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- answering

    def next_reply(self, request: dict[str, Any]) -> Reply:
        """Record ``request`` and return the scripted reply for it."""
        with self._lock:
            self.requests.append(request)
            if callable(self._script):
                script = self._script
            elif self._script:
                return self._script.pop(0)
            else:
                return {
                    "status": SCRIPT_EXHAUSTED_STATUS,
                    "message": "fake server: script exhausted",
                }
        return script(request)

    def completion(self, request: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        """A ``chat.completion`` body for ``reply`` (content or tool calls) and usage."""
        content = reply.get("content")
        message: dict[str, Any] = {"role": "assistant", "content": content}
        finish = reply.get("finish_reason", "stop")
        out_text = content or ""
        if reply.get("tool_calls"):
            calls = []
            for n, call in enumerate(reply["tool_calls"]):
                args = call["arguments"]
                args = args if isinstance(args, str) else json.dumps(args)
                out_text += args
                calls.append(
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": call["name"], "arguments": args},
                    }
                )
            message["tool_calls"] = calls
            finish = reply.get("finish_reason", "tool_calls")
        usage = {
            "prompt_tokens": _tokens(all_text(request)),
            "completion_tokens": _tokens(out_text),
        }
        usage.update(reply.get("usage", {}))
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return {
            "id": f"chatcmpl-fake-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", self.models[0]),
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            ],
            "usage": usage,
        }


class _Handler(BaseHTTPRequestHandler):
    """Routes requests to the owning :class:`FakeOpenAIServer`."""

    server_version = "FakeOpenAI/1.0"

    @property
    def fake(self) -> FakeOpenAIServer:
        return self.server.fake  # type: ignore[attr-defined,no-any-return]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Silence the default stderr access log."""

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, status: int, data: dict[str, Any]) -> None:
        self._send(status, json.dumps(data).encode("utf-8"))

    def _send_error(self, status: int, message: str) -> None:
        kind = {429: "rate_limit_exceeded", 400: "invalid_request_error"}.get(
            status, "server_error"
        )
        self._send_json(status, {"error": {"message": message, "type": kind, "code": kind}})

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") == "/v1/models":
            data = [{"id": m, "object": "model", "owned_by": "fake"} for m in self.fake.models]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_error(404, f"no route {self.path}")

    def do_POST(self) -> None:  # noqa: N802
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_error(404, f"no route {self.path}")
            return
        length = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(length) or b"{}")
        with self.fake._lock:
            self.fake.authorizations.append(self.headers.get("Authorization", ""))
        if request.get("stream"):
            self._send_error(400, "fake server: streaming is not supported")
            return
        reply = self.fake.next_reply(request)
        if isinstance(reply, str):
            reply = {"content": reply}
        if "status" in reply:
            self._send_error(
                int(reply["status"]), reply.get("message", f"scripted HTTP {reply['status']}")
            )
        elif "raw" in reply:
            self._send(200, str(reply["raw"]).encode("utf-8"))
        else:
            self._send_json(200, self.fake.completion(request, reply))


@contextmanager
def serve(script: Script) -> Iterator[str]:
    """Run a :class:`FakeOpenAIServer` for ``script``; yields its ``base_url``."""
    with FakeOpenAIServer(script) as server:
        yield server.base_url


def main(argv: Sequence[str]) -> None:
    """``python -m tests.fake_openai --port N``: echo every prompt until killed (for the
    local-server lifecycle tests, which run it where llama.cpp's server would run)."""
    port = int(argv[argv.index("--port") + 1])
    server = FakeOpenAIServer(lambda r: f"echo {last_user_text(r)}", port=port).start()
    assert server._thread is not None
    server._thread.join()


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
