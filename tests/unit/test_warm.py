"""The warm process's protocol and faults, with a server in a thread of the test and a fake
question (the real `ask` through a real warm process: tests/integration/test_warm_ask.py).

Each test has a runtime folder of its own (``MINDSCAPE_RUNTIME_DIR``), so none touches the
user's socket; every server started here is stopped by the `warm` fixture."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mindscape.errors import MindscapeError, StoreError
from mindscape.serve.warm import caller, client, common, server
from mindscape.serve.warm.server import WarmServer


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private runtime folder (short: a socket path has at most 107 bytes), warm on."""
    folder = Path(tempfile.mkdtemp(prefix="mw-")) / "run"
    monkeypatch.setenv(common.ENV_RUNTIME_DIR, str(folder))
    monkeypatch.setenv(common.ENV_WARM, "1")
    monkeypatch.setattr(server, "CHECK_S", 0.05)
    yield folder
    shutil.rmtree(folder.parent, ignore_errors=True)


Answer = Callable[[argparse.Namespace], dict[str, Any]]


def echo(args: argparse.Namespace) -> dict[str, Any]:
    return {"answer": f"you asked {args.question}", "cwd": os.getcwd()}


@pytest.fixture
def warm(runtime: Path) -> Iterator[Callable[..., WarmServer]]:
    """Start a WarmServer in a thread (`answer` is the fake question); stopped afterwards."""
    started: list[tuple[WarmServer, threading.Thread]] = []

    def start(answer: Answer = echo, idle_minutes: float = 5.0) -> WarmServer:
        warm = WarmServer(idle_minutes=idle_minutes, answer=answer, preload=False)
        thread = threading.Thread(target=warm.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not (runtime / common.SOCKET).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        started.append((warm, thread))
        return warm

    yield start
    for warm, thread in started:
        warm.stop("test over")
        thread.join(10)
        assert not thread.is_alive()


def args(question: str = "who?", **extra: Any) -> argparse.Namespace:
    return argparse.Namespace(question=question, store=None, func=print, **extra)


def here(ns: argparse.Namespace) -> dict[str, Any]:
    return {"answer": "answered here"}


def warm_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name.startswith("mindscape.serve.warm.client")
    ]


def test_the_answer_comes_from_the_warm_process_in_the_callers_directory(
    warm: Callable[..., WarmServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = warm()
    monkeypatch.chdir(tmp_path)
    out = client.answer(args("who wins?"), here)
    assert out == {"answer": "you asked who wins?", "cwd": str(tmp_path)}
    assert served.requests == 1 and os.getcwd() == str(tmp_path)


def test_no_warm_and_the_setting_answer_here_without_a_process(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert client.answer(args(no_warm=True), here) == {"answer": "answered here"}
    monkeypatch.setenv(common.ENV_WARM, "0")
    assert client.answer(args(), here) == {"answer": "answered here"}
    assert not (runtime / common.SOCKET).exists() and not (runtime / common.INFO).exists()


def test_socket_and_folder_are_private_and_other_users_are_refused(
    warm: Callable[..., WarmServer], runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warm()
    assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
    assert stat.S_IMODE((runtime / common.SOCKET).stat().st_mode) == 0o600
    assert stat.S_IMODE((runtime / common.INFO).stat().st_mode) == 0o600
    with socket.socket(socket.AF_UNIX) as conn:  # SO_PEERCRED names this process
        conn.connect(str(runtime / common.SOCKET))
        assert server.peer(conn) == (os.getpid(), os.getuid())
    monkeypatch.setattr(server, "peer", lambda conn: (1, os.getuid() + 1))
    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(str(runtime / common.SOCKET))
        assert "only its own user" in common.Lines(conn).next()["refused"]  # type: ignore[index]


def test_what_the_question_prints_and_logs_reaches_the_caller(
    warm: Callable[..., WarmServer],
    runtime: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The server sends the question's output and warnings in order (read here off the
    socket: a client in this same process would print into the server's swapped streams),
    and the client prints and logs them again."""

    def noisy(ns: argparse.Namespace) -> dict[str, Any]:
        print("progress 1")
        sys.stderr.write("· retrieve round=1\n")
        logging.getLogger("mindscape.deps").warning("no local model installed")
        logging.getLogger("mindscape.deps").info("not sent: below a warning")
        return {"answer": "yes"}

    warm(noisy)
    request = {"op": "ask", "version": common.version(), "env": common.settings_env()}
    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(str(runtime / common.SOCKET))
        common.send(conn, {**request, "cwd": "/", "tty": [0, 0], "args": {"question": "q"}})
        lines = common.Lines(conn)
        got = [m for m in iter(lines.next, None) if "wait" not in m]
    assert got == [
        {"accepted": {"pid": os.getpid()}},
        {"out": "progress 1"},
        {"out": "\n"},
        {"err": "· retrieve round=1\n"},
        {"log": ["mindscape.deps", logging.WARNING, "no local model installed"]},
        {"result": {"answer": "yes"}},
    ]
    caplog.clear()
    for message in got[1:-1]:
        client._show(message)
    captured = capsys.readouterr()
    assert captured.out == "progress 1\n" and captured.err == "· retrieve round=1\n"
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("mindscape.deps", logging.WARNING, "no local model installed")
    ]


def test_a_user_error_is_the_same_error_not_a_fallback(
    warm: Callable[..., WarmServer], caplog: pytest.LogCaptureFixture
) -> None:
    def wrong(ns: argparse.Namespace) -> dict[str, Any]:
        raise StoreError("no mindscape store at nowhere (run `mindscape index ...`)")

    warm(wrong)
    with pytest.raises(MindscapeError, match="no mindscape store at nowhere"):
        client.answer(args(), here)
    assert warm_lines(caplog) == []


def test_two_asks_at_once_both_answer(warm: Callable[..., WarmServer]) -> None:
    running: list[int] = []

    def slow(ns: argparse.Namespace) -> dict[str, Any]:
        running.append(1)
        assert len(running) == 1  # one question at a time
        time.sleep(0.3)
        running.pop()
        return {"answer": ns.question}

    served = warm(slow)
    results: dict[str, Any] = {}

    def ask(q: str) -> None:
        results[q] = client.answer(args(q), here)

    threads = [threading.Thread(target=ask, args=(q,)) for q in ("first?", "second?")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert results == {"first?": {"answer": "first?"}, "second?": {"answer": "second?"}}
    assert served.requests == 2


def test_a_dead_warm_process_is_found_and_this_process_answers(
    runtime: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runtime.mkdir(parents=True, exist_ok=True)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (runtime / common.INFO).write_text(json.dumps({"pid": gone.pid}))
    with socket.socket(socket.AF_UNIX) as left:  # a socket file nobody listens on
        left.bind(str(runtime / common.SOCKET))
    assert client.answer(args(), here) == {"answer": "answered here"}
    assert warm_lines(caplog) == [
        f"the warm process (pid {gone.pid}) had died; the next ask starts one; "
        "answering in this process"
    ]
    assert not (runtime / common.SOCKET).exists() and not (runtime / common.INFO).exists()


def test_a_hung_warm_process_is_found_and_this_process_answers(
    runtime: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "HELLO_S", 0.3)
    runtime.mkdir(parents=True, exist_ok=True)
    (runtime / common.INFO).write_text(json.dumps({"pid": os.getpid()}))
    with socket.socket(socket.AF_UNIX) as hung:  # listens, never answers
        hung.bind(str(runtime / common.SOCKET))
        hung.listen(4)
        started = time.monotonic()
        assert client.answer(args(), here) == {"answer": "answered here"}
        assert time.monotonic() - started < 5
    assert warm_lines(caplog) == [
        f"the warm process (pid {os.getpid()}) did not answer within 0.3 s; answering in "
        "this process"
    ]


def test_a_warm_process_silent_mid_answer_counts_as_hung(
    warm: Callable[..., WarmServer],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client, "SILENCE_S", 0.3)
    monkeypatch.setattr(caller, "BEAT_S", 30)  # no beats: as if the process had frozen
    release = threading.Event()
    warm(lambda ns: release.wait(10) and {"answer": "late"})
    try:
        assert client.answer(args(), here) == {"answer": "answered here"}
    finally:
        release.set()
    assert "did not answer within 0.3 s" in warm_lines(caplog)[0]


def test_a_warm_process_of_another_version_is_refused_and_stops(
    warm: Callable[..., WarmServer],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served = warm()
    newer = {**common.version(), "sources": common.version()["sources"] + 10**9}
    monkeypatch.setattr(client, "version", lambda: newer)
    assert client.answer(args(), here) == {"answer": "answered here"}
    (line,) = warm_lines(caplog)
    assert line.startswith(f"the warm process (pid {os.getpid()}) runs another version")
    assert line.endswith("; answering in this process")
    assert served.stopped.wait(10) and served.requests == 0


def test_a_warm_process_with_other_settings_is_refused_and_stops(
    warm: Callable[..., WarmServer],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served = warm()
    monkeypatch.setenv("MINDSCAPE_LLM_MODEL", "another-model")
    assert client.answer(args(), here) == {"answer": "answered here"}
    assert "started with other settings (MINDSCAPE_LLM_MODEL)" in warm_lines(caplog)[0]
    assert served.stopped.wait(10)


def test_a_question_that_crashes_the_warm_side_is_answered_here(
    warm: Callable[..., WarmServer], caplog: pytest.LogCaptureFixture
) -> None:
    def broken(ns: argparse.Namespace) -> dict[str, Any]:
        raise RuntimeError("boom")

    warm(broken)
    assert client.answer(args(), here) == {"answer": "answered here"}
    assert "failed on this question (RuntimeError: boom)" in warm_lines(caplog)[0]


def test_it_stops_after_the_idle_time_and_removes_its_files(
    warm: Callable[..., WarmServer], runtime: Path
) -> None:
    served = warm(idle_minutes=0.5 / 60)
    assert served.stopped.wait(10)
    assert served.stopping and served.stopping.startswith("no request for")
    assert not (runtime / common.SOCKET).exists() and not (runtime / common.INFO).exists()


def test_it_stops_when_its_sources_or_its_model_file_change(
    warm: Callable[..., WarmServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = warm()
    monkeypatch.setattr(server, "version", lambda: {"version": "0.0.0"})
    assert served.stopped.wait(10) and served.stopping == "the mindscape sources changed"
    monkeypatch.setattr(server, "version", common.version)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF v1")
    monkeypatch.setenv("MINDSCAPE_LOCAL_MODEL", str(model))
    again = warm()
    model.write_bytes(b"GGUF v2, another model")
    assert again.stopped.wait(10) and again.stopping == f"the model file {model} changed"


def test_status_lists_it_and_a_second_server_is_refused(
    warm: Callable[..., WarmServer], runtime: Path
) -> None:
    served = warm()
    client.answer(args(), here)
    found = client.status()
    assert found is not None and found["answering"] and found["pid"] == os.getpid()
    assert found["requests"] == 1 and found["socket"] == str(runtime / common.SOCKET)
    with pytest.raises(MindscapeError, match=f"already running \\(pid {os.getpid()}\\)"):
        WarmServer(idle_minutes=1, answer=echo, preload=False).run()
    assert not served.stopped.is_set() and client.status() is not None


def test_status_says_none_runs(runtime: Path) -> None:
    assert client.status() is None


def test_the_runtime_folder_must_be_this_users(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime.mkdir(parents=True)
    monkeypatch.setattr(os, "getuid", lambda: runtime.stat().st_uid + 1)
    with pytest.raises(common.WarmUnavailable, match="belongs to another user"):
        common.runtime_dir()


def test_a_caller_whose_folder_is_gone_fails_alone(
    warm: Callable[..., WarmServer], runtime: Path, tmp_path: Path
) -> None:
    """A question from a folder that no longer exists fails (its caller answers in its own
    process); the warm process is back in its own folder for the next one."""
    warm()
    home = os.getcwd()

    def raw(cwd: Path) -> dict[str, Any]:
        request = {"op": "ask", "version": common.version(), "env": common.settings_env()}
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(str(runtime / common.SOCKET))
            common.send(conn, {**request, "cwd": str(cwd), "args": {"question": "q"}})
            got = list(iter(common.Lines(conn).next, None))
        return got[-1]

    assert raw(tmp_path / "gone")["failed"].startswith("FileNotFoundError")
    assert os.getcwd() == home
    assert raw(tmp_path) == {"result": {"answer": "you asked q", "cwd": str(tmp_path)}}
    assert os.getcwd() == home
