"""What the warm process and its clients share: files, settings, protocol and fingerprints.

Files: a private runtime directory per user (mode 0700: ``$MINDSCAPE_RUNTIME_DIR``, else
``$XDG_RUNTIME_DIR/mindscape``, else ``/tmp/mindscape-UID``) holds

* ``warm.sock``: the Unix socket (mode 0600; the server also checks each caller's uid);
* ``warm.json``: who serves (pid, version, start time, log), read by ``serve --status``;
* ``warm.lock``: locked by the running server for its whole life, so at most one serves;
* ``warm.log``: the output of a server that ``ask`` started in the background.

Protocol: one JSON object per line, both ways. A client sends one request
(``{"op": "ask" | "status" | "stop", ...}``); for ``ask`` the server answers at once with
``{"accepted": ...}`` or ``{"refused": why}``, then sends ``{"wait": 1}`` every second while it
works, what the answer prints (``{"out": text}``, ``{"err": text}``, ``{"log": [...]}``), and
last ``{"result": ...}``, ``{"error": message}`` (a user error) or ``{"failed": why}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_IDLE_MINUTES",
    "ENV_IDLE",
    "ENV_RUNTIME_DIR",
    "ENV_WARM",
    "NOT_SETTINGS",
    "SETTINGS_PREFIXES",
    "Lines",
    "WarmUnavailable",
    "describe_version",
    "enabled",
    "file_stamp",
    "idle_minutes",
    "path",
    "pid_alive",
    "read_info",
    "runtime_dir",
    "send",
    "settings_env",
    "store_fingerprint",
    "version",
]

ENV_RUNTIME_DIR = "MINDSCAPE_RUNTIME_DIR"
"""Where the socket and its files live (tests point it at a temporary folder)."""
ENV_WARM = "MINDSCAPE_WARM"
"""``0``, ``off``, ``false`` or ``no``: ``ask`` answers in its own process (as ``--no-warm``)."""
ENV_IDLE = "MINDSCAPE_WARM_IDLE_MINUTES"
"""Minutes without a request after which the warm process stops (default 10)."""
DEFAULT_IDLE_MINUTES = 10.0
SOCKET, INFO, LOCK, LOG = "warm.sock", "warm.json", "warm.lock", "warm.log"
SETTINGS_PREFIXES = ("MINDSCAPE_", "OPENAI_")
"""Environment variables that may change an answer (backend, model, endpoint, embedder)."""
NOT_SETTINGS = {ENV_RUNTIME_DIR, ENV_WARM, ENV_IDLE, "MINDSCAPE_DEBUG", "MINDSCAPE_STORE"}
"""...except these: the warm process's own settings, and ``--store``'s default, which the
client resolves before it asks."""


class WarmUnavailable(Exception):
    """The warm process cannot answer this request; the message says why in a few words, and
    ``ask`` answers in its own process. Not a :class:`~mindscape.errors.MindscapeError`: the
    user's question is fine."""


def enabled() -> bool:
    """Whether ``ask`` uses the warm process (``MINDSCAPE_WARM`` does not turn it off)."""
    return os.environ.get(ENV_WARM, "1").strip().lower() not in {"0", "off", "false", "no"}


def idle_minutes() -> float:
    """``MINDSCAPE_WARM_IDLE_MINUTES``, else 10."""
    raw = os.environ.get(ENV_IDLE, "").strip()
    try:
        return float(raw) if raw else DEFAULT_IDLE_MINUTES
    except ValueError:
        return DEFAULT_IDLE_MINUTES


def runtime_dir() -> Path:
    """The private runtime directory, created with mode 0700; WarmUnavailable when it exists
    but belongs to someone else."""
    explicit = os.environ.get(ENV_RUNTIME_DIR)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if explicit:
        folder = Path(explicit)
    elif xdg:
        folder = Path(xdg) / "mindscape"
    else:
        folder = Path(tempfile.gettempdir()) / f"mindscape-{os.getuid()}"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.stat().st_uid != os.getuid():
        raise WarmUnavailable(f"the runtime folder {folder} belongs to another user")
    folder.chmod(0o700)
    return folder


def path(name: str) -> Path:
    """One of the runtime files (:data:`SOCKET`, :data:`INFO`, :data:`LOCK`, :data:`LOG`)."""
    return runtime_dir() / name


def read_info() -> dict[str, Any] | None:
    """``warm.json``: the running (or last) server's pid, version and files; None if none."""
    try:
        return dict(json.loads(path(INFO).read_text()))
    except (OSError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


# ---- the line protocol
def send(sock: socket.socket, message: dict[str, Any]) -> None:
    """Write one message as a JSON line."""
    sock.sendall(json.dumps(message, ensure_ascii=False, default=str).encode() + b"\n")


class Lines:
    """Reads JSON lines from a socket; :meth:`next` honours the socket's timeout."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def next(self) -> dict[str, Any] | None:
        """The next message, or None when the other side closed the connection."""
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return dict(json.loads(line))


# ---- fingerprints: what makes a warm process stale
def version() -> dict[str, Any]:
    """This code: the package version, the newest modification time of its sources (an
    editable install changes without a version bump) and the Python that runs it."""
    import mindscape

    root = Path(mindscape.__file__).parent
    newest = max((p.stat().st_mtime_ns for p in root.rglob("*.py")), default=0)
    return {"version": mindscape.__version__, "sources": newest, "python": sys.executable}


def describe_version(v: dict[str, Any]) -> str:
    """``0.1.0, sources of 2026-12-06 06:20:11`` for messages."""
    import time

    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(int(v.get("sources", 0)) / 1e9))
    return f"{v.get('version')}, sources of {when}"


def settings_env() -> dict[str, str]:
    """The environment variables that may change an answer, each as a short hash of its value
    (so a key never crosses the socket)."""
    return {
        k: hashlib.sha256(v.encode()).hexdigest()[:16]
        for k, v in sorted(os.environ.items())
        if k.startswith(SETTINGS_PREFIXES) and k not in NOT_SETTINGS
    }


def store_fingerprint(store: str | Path) -> str | None:
    """The store's manifest (each document's content, settings, status and update time) as a
    hash: it changes when the store is indexed again. None when there is no readable one."""
    db = Path(store).expanduser() / "cache.sqlite3"
    if not db.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            rows = conn.execute(
                "SELECT doc_id, content_hash, config_hash, status, updated FROM docs"
                " ORDER BY doc_id"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return hashlib.sha256(repr((db.stat().st_ino, rows)).encode()).hexdigest()[:16]


def file_stamp(file: str | Path) -> tuple[int, int] | None:
    """A file's (size, modification time), or None when it is missing."""
    try:
        st = Path(file).stat()
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)
