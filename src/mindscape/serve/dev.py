"""Serving the graphs on loopback: ``langgraph dev`` on a free port, and the chat page beside it.

Used by ``mindscape ui`` (``make ui``), the browser and Studio tests and
``benchmarks/speed/chat_load.py``, so that each starts the server the same way: from the repository
root (the graph paths in ``langgraph.json`` are relative to it), without a browser or reload,
with tracing and analytics off, waiting until ``/ok`` answers.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from mindscape.errors import MindscapeError
from mindscape.models.server import free_port

__all__ = [
    "STARTUP_S",
    "ServeError",
    "langgraph_exe",
    "page_url",
    "serve_static",
    "start_langgraph_dev",
    "stop",
    "system_chromium",
]

STARTUP_S = 300
"""Longest wait for ``langgraph dev`` to answer, in seconds (a cold start imports torch)."""


class ServeError(MindscapeError):
    """A server did not start."""


def langgraph_exe() -> str:
    """The ``langgraph`` CLI beside this Python, else on PATH."""
    exe = Path(sys.executable).with_name("langgraph")
    return str(exe) if exe.exists() else (shutil.which("langgraph") or "langgraph")


def start_langgraph_dev(
    repo: Path, log: Path, env: dict[str, str] | None = None, *, startup_s: float = STARTUP_S
) -> tuple[subprocess.Popen[bytes], str]:
    """``langgraph dev`` for ``repo/langgraph.json`` on a free loopback port, its output in
    `log`, with `env` over this process's environment; returns the process and its URL once
    ``/ok`` answers. Raises :class:`ServeError` (naming the log) if it exits or times out."""
    port = free_port()
    full = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
        "NO_PROXY": "127.0.0.1,localhost",
        **(env or {}),
    }
    cmd = [langgraph_exe(), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
           "--port", str(port), "--config", str(repo / "langgraph.json")]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=repo, env=full, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + startup_s
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(1)
    stop(proc)
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    raise ServeError(f"langgraph dev did not start (its log: {log}):\n{tail}")


def stop(proc: subprocess.Popen[bytes], grace_s: float = 10) -> None:
    """Terminate `proc`, then kill it if it is still running after `grace_s`."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib name)
        pass


def serve_static(root: Path) -> tuple[ThreadingHTTPServer, str]:
    """Serve the folder `root` on a free loopback port, in a daemon thread; the server (call
    ``shutdown()`` to stop it) and its URL."""
    handler = functools.partial(_Quiet, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def system_chromium() -> str | None:
    """The system Chromium for Playwright (its own browser download cannot work offline):
    ``$MINDSCAPE_CHROMIUM``, else ``chromium`` or ``chromium-browser`` on PATH."""
    return os.environ.get("MINDSCAPE_CHROMIUM") or next(
        (p for n in ("chromium", "chromium-browser") if (p := shutil.which(n))), None
    )


def page_url(page: str, api: str, assistant: str = "chat") -> str:
    """The chat page's address, pointed at the LangGraph server `api`."""
    return f"{page}/?apiUrl={api}&assistantId={assistant}"
