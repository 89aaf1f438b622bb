"""The local model's server: llama.cpp's OpenAI-compatible server on a free loopback port.

One :class:`LocalServer` per (model, threads, context size) per process, shared by every
caller in that process (:func:`shared_server`). It is started on first use on a free
``127.0.0.1`` port, health-checked (``GET /v1/models``) before use, and stopped when the
process exits: at interpreter exit (``atexit``, which also runs after Ctrl-C), on SIGTERM
(a handler is installed when none is), and, if the parent dies without cleaning up (SIGKILL,
a crash), by the child itself: :mod:`mindscape.models._serve` watches its parent and exits
when it is gone. Processes share: the first one to need a server starts it and registers its
port under ``~/.cache/mindscape/servers/`` (under a file lock); the others attach to it while it
answers, so one model sits in memory however many processes ask. When its owner exits, the
next request of an attached process fails, and :func:`revive` starts a server on the same
port (once), so that process goes on. ``mindscape model serve`` runs one in the foreground.

The chat client is the ordinary OpenAI-compatible path (``langchain-openai``): the same code
that talks to OpenAI, vLLM or Ollama.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mindscape.errors import ModelError
from mindscape.models.cache import cache_root

logger = logging.getLogger(__name__)

_LOCK = threading.RLock()
ServerKey = tuple[str, int, int, str]
"""What a server serves: the model file, threads, context size and the LoRA adapter file
(empty: none)."""
_SERVERS: dict[ServerKey, LocalServer] = {}
_STARTED: list[LocalServer] = []
"""Every server started in this process (stopped at exit)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def default_threads() -> int:
    """Threads for generation: every core this process may use (2 on the reference machine)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def llama_server_args(
    model: Path, port: int, *, threads: int, n_ctx: int, adapter: Path | None = None
) -> list[str]:
    """The llama.cpp server (:mod:`mindscape.models.llama_server`) and its arguments for one model
    on ``127.0.0.1:port``, with its LoRA adapter when one is given."""
    lora = ["--lora_path", str(adapter)] if adapter is not None else []
    return [
        "mindscape.models.llama_server",
        "--model", str(model),
        "--model_alias", "local",
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_threads", str(threads),
        "--n_threads_batch", str(threads),
        "--n_ctx", str(n_ctx),
        "--seed", "0",
        "--verbose", "False",
        *lora,
    ]  # fmt: skip


@dataclass
class LocalServer:
    """A child process serving an OpenAI-compatible API on ``127.0.0.1:port``.

    ``argv`` is the module to run and its arguments (``["mindscape.models.llama_server", "--model",
    …]``),
    started through :mod:`mindscape.models._serve`; tests pass a fake server module.
    """

    argv: Sequence[str]
    port: int
    startup_timeout_s: float = 180.0
    log_path: Path | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    restarts: int = 0
    """Times :func:`revive` brought this server back after it stopped (at most once)."""
    attached: bool = False
    """Another process's server (found through the registry): used, never started or stopped."""
    registry: Path | None = None
    """The registry file this process wrote for its server (removed when it stops)."""

    def alive(self) -> bool:
        """An own server whose process runs, or an attached one that answers."""
        if self.attached:
            return self.healthy()
        return self.process is not None and self.process.poll() is None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible root, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The child's pid while it runs."""
        return self.process.pid if self.process is not None else None

    def healthy(self, timeout_s: float = 2.0) -> bool:
        """Whether the server answers ``GET /v1/models`` with 200."""
        try:
            with urllib.request.urlopen(self.base_url + "/models", timeout=timeout_s) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def _log_tail(self) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return ""
        lines = self.log_path.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else ""

    def start(self) -> LocalServer:
        """Start the child and wait until it is healthy; a ModelError says why it is not."""
        if self.attached or (self.process is not None and self.process.poll() is None):
            return self
        cmd = [sys.executable, "-m", "mindscape.models._serve", "--parent", str(os.getpid())]
        cmd += ["--", *self.argv]
        out = self.log_path.open("ab") if self.log_path is not None else subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
            )
        finally:
            if self.log_path is not None:
                out.close()  # type: ignore[union-attr]
        _register_cleanup()
        if self not in _STARTED:
            _STARTED.append(self)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self._log_tail()
                self.process = None
                raise ModelError(
                    "the local model server exited during start-up"
                    + (f": {tail}" if tail else "")
                    + (f" (log: {self.log_path})" if self.log_path else "")
                )
            if self.healthy():
                logger.info("local model server ready at %s (pid %d)", self.base_url, self.pid)
                return self
            time.sleep(0.2)
        self.stop()
        raise ModelError(
            f"the local model server did not answer within {self.startup_timeout_s:.0f}s"
        )

    def stop(self, timeout_s: float = 5.0) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after ``timeout_s``), reap it, and drop
        its registry entry if it still names this process."""
        if self.registry is not None:
            try:
                if json.loads(self.registry.read_text()).get("pid") == os.getpid():
                    self.registry.unlink()
            except (OSError, ValueError):
                pass
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            try:  # killed: the kernel reaps it; a machine too busy to say so in time is no error
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                logger.warning("the local model server (pid %d) was killed, not yet gone", proc.pid)


def shared_server(
    model: Path, *, threads: int, n_ctx: int, adapter: Path | None = None
) -> LocalServer:
    """The server for this model and settings, healthy: the process's own, or one another
    mindscape process started and registered (:func:`_attach_or_start`), so several processes
    on one machine share one model in memory."""
    key: ServerKey = (str(model), threads, n_ctx, str(adapter or ""))
    with _LOCK:
        server = _SERVERS.get(key)
        if server is not None and server.alive():
            return server
        _SERVERS[key] = _attach_or_start(key, None)
        return _SERVERS[key]


def _registry(key: ServerKey) -> Path:
    """The file naming the port of the server that serves `key` on this machine."""
    name = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
    folder = cache_root() / "servers"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name}.json"


def _attach_or_start(
    key: ServerKey, port: int | None, own: LocalServer | None = None
) -> LocalServer:
    """Under a machine-wide file lock: attach to the registered server if it answers (on
    `port`, when given), else start one and register it. `own` is this process's stopped
    server, restarted as it was; otherwise a llama.cpp server for `key` is started (on `port`
    when given, so clients that know it keep working)."""
    reg = _registry(key)
    with open(reg.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            known = json.loads(reg.read_text()) if reg.is_file() else None
        except (OSError, ValueError):
            known = None
        if known and (port is None or known.get("port") == port):
            attached = LocalServer([], int(known["port"]), attached=True)
            if attached.healthy():
                logger.info("using the local model server of pid %s", known.get("pid"))
                return attached
        if own is None:
            log_dir = cache_root() / "logs"
            log_dir.mkdir(parents=True, exist_ok=True)
            port = port or free_port()
            model, threads, n_ctx, adapter = key
            own = LocalServer(
                llama_server_args(
                    Path(model),
                    port,
                    threads=threads,
                    n_ctx=n_ctx,
                    adapter=Path(adapter) if adapter else None,
                ),  # fmt: skip
                port,
                log_path=log_dir / f"llama-server-{os.getpid()}.log",
            )
        own.process = None
        own.registry = reg
        own.start()
        reg.write_text(json.dumps({"port": own.port, "pid": os.getpid()}))
        return own


def revive() -> bool:
    """Bring back each shared server that stopped answering, on the same port: attach to
    another process's server there, or start one. Another process's server going away is
    normal (its process finished) and is always handled; this process's own server is
    restarted once, and if it dies again it stays down and the caller's error says so. True if
    one came back, so a request that failed on it can be retried."""
    with _LOCK:
        dead = [(k, s) for k, s in _SERVERS.items() if not s.alive()]
        revived = False
        for key, server in dead:
            if not server.attached and server.restarts >= 1:
                continue  # our own server died twice: a crash, not an owner leaving
            (logger.info if server.attached else logger.warning)(
                "the local model server (port %d) stopped; starting it again", server.port
            )
            restarts = server.restarts + 1
            if server.attached:
                fresh = _attach_or_start(key, server.port)
            else:
                server.stop()
                fresh = _attach_or_start(key, server.port, own=server)
            fresh.restarts = restarts if fresh is server else 0
            _SERVERS[key] = fresh
            revived = True
        return revived


def stop_all() -> None:
    """Stop every server this process started."""
    with _LOCK:
        _SERVERS.clear()
        servers = list(_STARTED)
        _STARTED.clear()
    for server in servers:
        server.stop()


_REGISTERED = False


def _on_sigterm(signum: int, frame: object) -> None:
    stop_all()
    raise SystemExit(128 + signum)


def _register_cleanup() -> None:
    """atexit (normal exit, Ctrl-C) and a SIGTERM handler when none is installed."""
    global _REGISTERED
    if _REGISTERED:
        return
    _REGISTERED = True
    atexit.register(stop_all)
    if threading.current_thread() is threading.main_thread():
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, _on_sigterm)
