"""The warm process seen from the command line: ``ask`` through it, ``--status``, ``--stop``.

:func:`answer` is what ``mindscape ask`` calls. It asks the warm process when one runs, and
starts one when none does (detached: ``python -m mindscape.commands.serve``, which is ``mindscape
serve``; its output goes to ``warm.log``). When the warm process cannot answer, this process
answers after one line saying why: it died, does not answer within :data:`HELLO_S`, goes
silent for :data:`SILENCE_S` mid-answer, runs another version or other settings, or failed on
the question.

The answer comes back as ``ask`` would have computed it here (the graph's output), and what
the warm process printed and logged meanwhile is printed and logged here, in order.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from mindscape.errors import MindscapeError
from mindscape.serve.warm.common import (
    INFO,
    LOCK,
    LOG,
    SOCKET,
    Lines,
    WarmUnavailable,
    enabled,
    path,
    pid_alive,
    read_info,
    send,
    settings_env,
    version,
)

__all__ = [
    "HELLO_S",
    "SILENCE_S",
    "START_S",
    "Ask",
    "answer",
    "ask",
    "connect",
    "forget",
    "options",
    "status",
    "stop",
]

logger = logging.getLogger(__name__)

HELLO_S = 10.0
"""How long the warm process may take to accept a request before it counts as hung."""
SILENCE_S = 60.0
"""How long it may stay silent while it answers (it sends a beat every second)."""
START_S = 300.0
"""How long a warm process started by ``ask`` may take to listen (a cold start imports torch)."""

Ask = Callable[[argparse.Namespace], dict[str, Any]]


def answer(args: argparse.Namespace, ask_here: Ask) -> dict[str, Any]:
    """``ask``'s answer: from the warm process unless ``--no-warm`` or ``MINDSCAPE_WARM=0``
    say otherwise, else (or when it cannot answer, after one line saying why) from
    ``ask_here`` in this process."""
    if getattr(args, "no_warm", False) or not enabled():
        return ask_here(args)
    try:
        return ask(args)
    except WarmUnavailable as exc:
        logger.warning("%s; answering in this process", exc)
        return ask_here(args)


def ask(
    args: argparse.Namespace,
    *,
    start: bool = True,
    show: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """The warm process's answer to ``ask``'s options `args` (starting it if need be, unless
    not `start`). What it printed and logged meanwhile goes to `show` (each message:
    ``{"out": text}``, ``{"err": text}`` or ``{"log": [name, level, text]}``), by default
    printed and logged here.

    Raises:
        WarmUnavailable: it cannot answer (the message says why).
        MindscapeError: the question itself is wrong (the same message as in-process).
    """
    request = {
        "op": "ask",
        "version": version(),
        "env": settings_env(),
        "cwd": os.getcwd(),
        "tty": [_isatty(sys.stdout), _isatty(sys.stderr)],
        "args": options(args),
    }
    conn, pid = connect(start=start, llm=getattr(args, "llm", None))
    me = f"the warm process (pid {pid})"
    with conn:
        try:
            send(conn, request)
            lines = Lines(conn)
            conn.settimeout(HELLO_S)
            first = lines.next()
            if first is None:
                raise WarmUnavailable(f"{me} closed the connection")
            if "refused" in first:
                raise WarmUnavailable(first["refused"])
            conn.settimeout(SILENCE_S)
            while (message := lines.next()) is not None:
                if "result" in message:
                    return dict(message["result"])
                if "error" in message:
                    raise MindscapeError(message["error"])
                if "failed" in message:
                    raise WarmUnavailable(f"{me} failed on this question ({message['failed']})")
                (show or _show)(message)
        except TimeoutError:
            raise WarmUnavailable(f"{me} did not answer within {conn.gettimeout():g} s") from None
        except (OSError, ValueError) as exc:
            raise WarmUnavailable(f"{me} broke the connection ({exc})") from None
    raise WarmUnavailable(f"{me} stopped before it answered")


def options(args: argparse.Namespace) -> dict[str, Any]:
    """``ask``'s options as JSON values (the handler function and anything else that is not
    plain data stays behind)."""
    plain = {}
    for key, value in vars(args).items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        plain[key] = value
    return plain


def _show(message: dict[str, Any]) -> None:
    """Print or log here what the warm process printed or logged for this question."""
    if "out" in message:
        sys.stdout.write(message["out"])
        sys.stdout.flush()
    elif "err" in message:
        sys.stderr.write(message["err"])
        sys.stderr.flush()
    elif "log" in message:
        name, level, text = message["log"]
        logging.getLogger(name).log(level, "%s", text)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


# ---- finding or starting the warm process
def connect(*, start: bool, llm: str | None = None) -> tuple[socket.socket, int | str]:
    """A connection to the warm process and its pid; with `start`, one is started when none
    runs (with `llm`, the backend it readies first). WarmUnavailable when there is one that
    cannot be reached (its pid died: its files are removed, so the next ``ask`` starts a
    fresh one)."""
    info = read_info()
    try:
        return _connect(), (info or {}).get("pid", "?")
    except OSError:
        pass
    if info is not None:
        pid = int(info.get("pid", 0))
        if pid and pid_alive(pid):
            raise WarmUnavailable(f"the warm process (pid {pid}) does not accept requests")
        forget()
        raise WarmUnavailable(f"the warm process (pid {pid}) had died; the next ask starts one")
    if not start:
        raise WarmUnavailable("no warm process is running")
    return _start(llm)


def _connect() -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(HELLO_S)
        conn.connect(str(path(SOCKET)))
    except OSError:
        conn.close()
        raise
    return conn


def _start(llm: str | None) -> tuple[socket.socket, int | str]:
    """Start a warm process in the background and connect to it once it listens (or to the
    one another ``ask`` started at the same moment)."""
    with path(LOG).open("ab") as log:
        child = subprocess.Popen(
            # `mindscape serve`, started sooner; --llm: the backend to have ready
            [sys.executable, "-m", "mindscape.commands.serve", *(["--llm", llm] if llm else [])],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # not in the terminal's process group: Ctrl-C spares it
        )
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        try:
            return _connect(), (read_info() or {}).get("pid", child.pid)
        except OSError:
            pass
        if child.poll() is not None and not _lock_held():
            raise WarmUnavailable(f"the warm process did not start ({_last_line(path(LOG))})")
        time.sleep(0.05)
    raise WarmUnavailable(f"the warm process did not start within {START_S:.0f} s")


def _lock_held() -> bool:
    """Whether a warm process holds the lock (it is running or starting)."""
    with path(LOCK).open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
        return False


def _last_line(file: Any) -> str:
    try:
        lines = file.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else f"no output in {file}"


def forget() -> None:
    """Remove the socket and info files of a warm process that died without removing them."""
    if not _lock_held():
        path(SOCKET).unlink(missing_ok=True)
        path(INFO).unlink(missing_ok=True)


# ---- serve --status / --stop
def status() -> dict[str, Any] | None:
    """The warm process's live state (``WarmServer.status``), or None when none runs. One
    that does not answer is reported with ``"answering": false``."""
    info = read_info()
    try:
        conn, _pid = connect(start=False)
    except WarmUnavailable:
        if info is not None and pid_alive(int(info.get("pid", 0))):
            return {**info, "answering": False}
        return None
    with conn:
        try:
            send(conn, {"op": "status"})
            reply = Lines(conn).next()
        except (OSError, ValueError):
            reply = None
    return {**reply, "answering": True} if reply else {**(info or {}), "answering": False}


def stop(timeout_s: float = 30.0) -> int | None:
    """Stop the warm process (questions running finish first; one that does not answer gets
    SIGTERM, then SIGKILL); its pid, or None when none ran."""
    info = read_info()
    pid = int((info or {}).get("pid", 0)) or None
    try:
        conn, _ = connect(start=False)
        with conn:
            send(conn, {"op": "stop"})
            Lines(conn).next()
    except (WarmUnavailable, OSError, ValueError):
        if pid is None or not pid_alive(pid):
            forget()
            return None
        os.kill(pid, signal.SIGTERM)
    if pid is None:
        return None
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
        while pid_alive(pid):
            time.sleep(0.05)
    forget()
    return pid
