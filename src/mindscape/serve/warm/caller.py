"""The caller's side of one question in the warm process: its connection, its output streams
and its share of the log, while the question runs (:func:`caller_context`)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import socket
import sys
import threading
from collections.abc import Iterator
from typing import Any

from mindscape.serve.warm.common import send

__all__ = ["BEAT_S", "CallerLogs", "CallerStream", "Reply", "caller_context"]

BEAT_S = 1.0
"""How often a waiting caller hears ``{"wait": 1}``."""


class Reply:
    """The caller's side of the connection: sends are serialised, and the first failure (the
    caller went away) silences the rest."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.gone = False

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            if self.gone:
                return
            try:
                send(self.conn, message)
            except OSError:
                self.gone = True

    def beat(self) -> None:
        while not self.done.wait(BEAT_S):
            self.send({"wait": 1})


class CallerStream(io.TextIOBase):
    """``sys.stdout`` or ``sys.stderr`` of the caller, while its question runs."""

    def __init__(self, reply: Reply, key: str, tty: bool) -> None:
        self.reply, self.key, self.tty = reply, key, bool(tty)

    def write(self, text: str) -> int:
        if text:
            self.reply.send({self.key: text})
        return len(text)

    def isatty(self) -> bool:
        return self.tty

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


class CallerLogs(logging.Handler):
    """Warnings logged while a question runs, sent to the caller, which logs them again (so
    ``--quiet`` silences them there as in-process)."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(logging.WARNING)
        self.reply = reply

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith("mindscape.serve.warm"):
            self.reply.send({"log": [record.name, record.levelno, record.getMessage()]})


@contextlib.contextmanager
def caller_context(reply: Reply, cwd: str, tty: list[Any]) -> Iterator[None]:
    """The caller's working directory and output streams, and its share of the log."""
    home = os.getcwd()
    os.chdir(cwd)  # first: a folder that is gone fails the question before anything changes
    streams = sys.stdout, sys.stderr
    logs = CallerLogs(reply)
    logging.getLogger("mindscape").addHandler(logs)
    sys.stdout, sys.stderr = CallerStream(reply, "out", tty[0]), CallerStream(reply, "err", tty[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = streams
        logging.getLogger("mindscape").removeHandler(logs)
        os.chdir(home)
