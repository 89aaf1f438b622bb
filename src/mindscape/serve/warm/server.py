"""The warm process: answers ``mindscape ask`` requests over a Unix socket, models kept loaded.

It is an ordinary threaded socket server from the standard library
(:class:`socketserver.ThreadingUnixStreamServer`): one thread per connection, so a status
request or a second ``ask`` is answered while a question runs. Questions themselves run one
at a time, under one lock: the local model answers one request at a time anyway, and it keeps
the process-wide working directory, ``sys.stdout`` and ``sys.stderr`` free to be the
caller's while its question runs.

A question runs exactly as in ``ask``'s own process: the same function (``ask``'s
:func:`~mindscape.commands.ask.answer_here`, which its caller hands :func:`serve`) on the same
options (the ``argparse`` namespace sent as JSON), from the caller's working directory, with
what it prints and logs sent back to the caller. What makes the second question cheap is
what that function leaves in this process's caches: the embedder
(:func:`mindscape.embeddings.load_embedder`), the open stores and their retrievers
(:mod:`mindscape.deps`), and the local model's server (:mod:`mindscape.models.server`).

It stops by itself after ``idle_minutes`` without a request, when its sources or a model file
it uses change, and when a caller with other sources or settings found it (that caller
answers in its own process). Before each question it compares the store's manifest with the
one it opened and reads a store indexed again afresh.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mindscape.errors import MindscapeError
from mindscape.serve.warm.caller import Reply, caller_context
from mindscape.serve.warm.common import (
    INFO,
    LOCK,
    LOG,
    SOCKET,
    Lines,
    describe_version,
    file_stamp,
    path,
    read_info,
    send,
    settings_env,
    store_fingerprint,
    version,
)

__all__ = [
    "Answer",
    "CHECK_S",
    "REQUEST_S",
    "WarmServer",
    "model_stamps",
    "peer",
    "rss_mb",
    "serve",
]

logger = logging.getLogger(__name__)

Answer = Callable[[argparse.Namespace], Any]
"""What answers one question: ``ask``'s options in, the QA output (a dict) out."""

CHECK_S = 2.0
"""How often the watcher looks at the idle time, the sources and the model files."""
REQUEST_S = 10.0
"""How long a connection may take to send its request."""


def model_stamps() -> dict[str, tuple[int, int] | None]:
    """The model files this process uses or would use, each with its size and mtime: the
    default local model (or ``MINDSCAPE_LOCAL_MODEL``) and the model of every local server
    started so far."""
    from mindscape.models.local import default_model_path

    files = [os.environ.get("MINDSCAPE_LOCAL_MODEL", "").strip() or str(default_model_path())]
    served = sys.modules.get("mindscape.models.server")
    if served is not None:
        files += [key[0] for key in getattr(served, "_SERVERS", {})]
    return {f: file_stamp(f) for f in files}


def rss_mb(pid: int) -> float | None:
    """A process's resident memory in MB (Linux), or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


class WarmServer:
    """The warm process. :meth:`run` serves until it stops; `answer` answers one question
    (``ask``'s own function; tests pass a fake)."""

    def __init__(
        self,
        *,
        idle_minutes: float,
        answer: Answer,
        preload: bool = True,
        llm: str | None = None,
    ) -> None:
        self.idle_s = idle_minutes * 60
        self.answer = answer
        self.preload = preload
        self.llm = llm
        """The backend to have ready (``ask``'s ``--llm``; None: the environment's)."""
        self.version = version()
        self.env = settings_env()
        self.models = model_stamps()
        self.started = self.last_request = time.time()
        self.requests = 0
        self.busy = 0
        self.stores: dict[str, str | None] = {}
        """Each store a question opened, with its manifest's fingerprint then."""
        self.answer_lock = threading.Lock()
        self.state_lock = threading.Lock()
        self.stopping: str | None = None
        self.stopped = threading.Event()
        self._server: socketserver.ThreadingUnixStreamServer | None = None

    # ---- life
    def run(self) -> None:
        """Take the lock, bind the socket, serve until stopped, then clean up.

        Raises:
            MindscapeError: another warm process is running, or the socket cannot be bound.
        """
        lock = path(LOCK).open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            pid = (read_info() or {}).get("pid", "?")
            raise MindscapeError(
                f"a warm process is already running (pid {pid}); `mindscape serve --stop` stops it"
            ) from None
        sock = path(SOCKET)
        try:
            sock.unlink(missing_ok=True)  # a socket file left by a process that died
            umask = os.umask(0o177)  # the socket is created 0600, never wider
            try:
                self._server = _Server(str(sock), _Handler)
            finally:
                os.umask(umask)
        except OSError as exc:
            lock.close()
            raise MindscapeError(f"cannot listen on {sock}: {exc}") from exc
        self._server.warm = self  # type: ignore[attr-defined]
        info = path(INFO)
        info.write_text(json.dumps(self.info()))
        info.chmod(0o600)
        logger.info("warm process %d listening on %s", os.getpid(), sock)
        self._signals()
        threading.Thread(target=self._watch, daemon=True, name="warm-watch").start()
        if self.preload:
            threading.Thread(target=self._preload, daemon=True, name="warm-preload").start()
        try:
            self._server.serve_forever(poll_interval=0.5)
        finally:
            self._server.server_close()  # waits for questions still running
            if (read_info() or {}).get("pid") == os.getpid():
                info.unlink(missing_ok=True)
                sock.unlink(missing_ok=True)
            lock.close()  # before `stopped`: a successor started on it must find the lock free
            logger.info("warm process %d stopped: %s", os.getpid(), self.stopping)
            self.stopped.set()

    def stop(self, reason: str) -> None:
        """Stop serving (questions already running finish first); idempotent."""
        with self.state_lock:
            if self.stopping is not None:
                return
            self.stopping = reason
        logger.info("stopping: %s", reason)
        if self._server is not None:
            threading.Thread(target=self._server.shutdown, daemon=True).start()

    def _signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda signum, _frame: self.stop(signal.Signals(signum).name))

    def _watch(self) -> None:
        """Stop when idle too long, or when the sources or a model file changed."""
        while not self.stopped.wait(CHECK_S):
            reason = self.stale()
            if reason is not None and self.busy == 0:
                self.stop(reason)
                return

    def stale(self) -> str | None:
        """Why this process should stop now, or None."""
        idle = time.time() - self.last_request
        if idle > self.idle_s:
            return f"no request for {idle / 60:.1f} minutes"
        if version() != self.version:
            return "the mindscape sources changed"
        now = model_stamps()
        for file, stamp in now.items():
            if file in self.models and self.models[file] != stamp:
                return f"the model file {file} changed"
            self.models.setdefault(file, stamp)
        return None

    def _preload(self) -> None:
        """Before the first question: import the QA graph and load the default embedder here
        while the local model's server starts beside (its own process loads the model, so
        the two overlap); the first question waits for both."""
        with self.answer_lock:
            model = threading.Thread(target=self._preload_model, name="warm-model")
            model.start()
            try:
                import mindscape.graphs.qa  # noqa: F401
                from mindscape.embeddings import load_embedder

                load_embedder()
            except Exception as exc:  # noqa: BLE001 - the first question will say it properly
                logger.warning("preloading failed: %s", exc)
            model.join()

    def _preload_model(self) -> None:
        """Start the local model's server when the backend (:attr:`llm`, else the
        environment's) resolves to the local model: the one a question's chat model uses."""
        try:
            from mindscape.llm import LLMSettings
            from mindscape.llm.chat import local_base_url

            settings = LLMSettings.from_env(backend=self.llm).resolved()
            if settings.backend == "local" and settings.base_url is None:
                local_base_url(settings)
        except Exception as exc:  # noqa: BLE001 - the first question will say it properly
            logger.warning("starting the local model failed: %s", exc)

    # ---- what --status shows
    def info(self) -> dict[str, Any]:
        """``warm.json``: enough for ``serve --status`` and a client to find this process."""
        return {
            "pid": os.getpid(),
            "socket": str(path(SOCKET)),
            "log": str(path(LOG)),
            "started": self.started,
            "idle_minutes": self.idle_s / 60,
            "version": describe_version(self.version),
        }

    def status(self) -> dict[str, Any]:
        """The live state: requests, idle time, stores, model servers, memory."""
        servers = []
        served = sys.modules.get("mindscape.models.server")
        for key, server in list(getattr(served, "_SERVERS", {}).items()):
            servers.append({"model": key[0], "port": server.port, "pid": server.pid})
        embedders = sys.modules.get("mindscape.embeddings")
        loaded = getattr(embedders, "load_embedder", None)
        own = [rss_mb(os.getpid())] + [rss_mb(s["pid"]) for s in servers if s["pid"]]
        return {
            **self.info(),
            "uptime_s": round(time.time() - self.started, 1),
            "idle_s": round(time.time() - self.last_request, 1),
            "requests": self.requests,
            "busy": self.busy,
            "stores": sorted(self.stores),
            "embedders": loaded.cache_info().currsize if loaded is not None else 0,
            "model_servers": servers,
            "rss_mb": round(sum(m for m in own if m), 1),
            "stopping": self.stopping,
        }

    # ---- one connection
    def handle(self, conn: socket.socket) -> None:
        """Serve one connection: a status, stop or ask request from the same user."""
        pid, uid = peer(conn)
        if uid != os.getuid():
            send(conn, {"refused": "the warm process serves only its own user"})
            return
        conn.settimeout(REQUEST_S)
        request = Lines(conn).next() or {}
        conn.settimeout(None)
        op = request.get("op")
        if op == "status":
            send(conn, self.status())
        elif op == "stop":
            send(conn, {"stopping": os.getpid()})
            self.stop(f"`mindscape serve --stop` (pid {pid})")
        elif op == "ask":
            self.ask(conn, request)
        else:
            send(conn, {"refused": f"unknown request {op!r}"})

    def refusal(self, request: dict[str, Any]) -> str | None:
        """Why this process must not answer `request`, or None. Another version or other
        settings also stop it (a later ``ask`` starts a fresh one)."""
        me = f"the warm process (pid {os.getpid()})"
        if self.stopping:
            return f"{me} is stopping ({self.stopping})"
        theirs = request.get("version") or {}
        if theirs != self.version:
            why = (
                f"{me} runs another version of mindscape ({describe_version(self.version)}; "
                f"this ask: {describe_version(theirs)})"
            )
            self.stop("a caller runs another version")
            return why
        env = request.get("env") or {}
        differ = sorted(k for k in set(env) | set(self.env) if env.get(k) != self.env.get(k))
        if differ:
            self.stop("a caller has other settings")
            return f"{me} was started with other settings ({', '.join(differ)})"
        return None

    def ask(self, conn: socket.socket, request: dict[str, Any]) -> None:
        """Answer one question, one at a time, beating while the caller waits."""
        why = self.refusal(request)
        if why:
            send(conn, {"refused": why})
            return
        reply = Reply(conn)
        reply.send({"accepted": {"pid": os.getpid()}})
        with self.state_lock:
            self.busy += 1
            self.requests += 1
            self.last_request = time.time()
        threading.Thread(target=reply.beat, daemon=True, name="warm-beat").start()
        try:
            with self.answer_lock:
                result = self._answer(request, reply)
        finally:
            reply.done.set()
            with self.state_lock:
                self.busy -= 1
                self.last_request = time.time()
        reply.send(result)

    def _answer(self, request: dict[str, Any], reply: Reply) -> dict[str, Any]:
        """Run the question with the caller's options, directory and output streams."""
        args = argparse.Namespace(**request.get("args", {}))
        try:
            with caller_context(reply, request.get("cwd") or "/", request.get("tty") or [0, 0]):
                if getattr(args, "store", None):
                    self._fresh(args.store)
                return {"result": self.answer(args)}
        except (MindscapeError, ValueError) as exc:
            return {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - the caller answers in its own process
            logger.exception("the question failed")  # into this process's log
            return {"failed": f"{type(exc).__name__}: {exc}"}

    def _fresh(self, store: str) -> None:
        """Forget a store whose manifest changed since it was opened here (indexed again), so
        this question reads it afresh."""
        key = str(Path(store).expanduser().resolve())
        now = store_fingerprint(key)
        if key in self.stores and self.stores[key] != now:
            from mindscape.deps import forget_store

            logger.info("the store %s was indexed again; reading it afresh", key)
            forget_store(key)
        self.stores[key] = now


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = False  # stopping waits for the questions that are running
    block_on_close = True


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        warm: WarmServer = self.server.warm  # type: ignore[attr-defined]
        try:
            warm.handle(self.request)
        except (OSError, ValueError) as exc:  # the caller went away, or sent garbage
            logger.info("connection dropped: %s", exc)


def peer(conn: socket.socket) -> tuple[int, int]:
    """The (pid, uid) of the process at the other end of a Unix socket (``SO_PEERCRED``)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


def serve(idle_minutes: float, answer: Answer, quiet: bool = False, llm: str | None = None) -> None:
    """Run the warm process in this process until it stops (``mindscape serve``), answering
    with `answer` (``ask``'s :func:`~mindscape.commands.ask.answer_here`); its own
    lines (start, stop and why) go to stderr unless `quiet`. The warnings of a question go
    to its caller, which shows them unless its ``ask`` is quiet. `llm` is the backend to have
    ready (None: the environment's)."""
    log = logging.getLogger("mindscape.serve.warm")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s mindscape warm: %(message)s"))
        log.addHandler(handler)
        log.propagate = False
    log.setLevel(logging.WARNING if quiet else logging.INFO)
    logging.getLogger("mindscape").setLevel(logging.WARNING)  # the callers' --quiet decides
    WarmServer(idle_minutes=idle_minutes, answer=answer, llm=llm).run()
    served = sys.modules.get("mindscape.models.server")
    if served is not None:
        served.stop_all()  # the local model's server goes with this process (atexit would too)
