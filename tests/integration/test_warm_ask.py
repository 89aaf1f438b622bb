"""`mindscape ask` through a real warm process (`python -m mindscape serve`, started by the
first ask) against the same ask in the test's process (`--no-warm`): the same output on a fixed
set of questions, extractive and through a scripted OpenAI-compatible server (token counts);
two asks at once; a store indexed again; a warm process killed; nothing left running.

The module's runtime folder is its own (``MINDSCAPE_RUNTIME_DIR``); the fixture stops the
warm process and checks that it is gone."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mindscape.cli import main
from mindscape.serve.warm import client, common
from tests.conftest import STORY
from tests.integration.conftest import QA_DOC

pytestmark = pytest.mark.integration

Q = "What did the father bring back for Cinderella?"
QUESTIONS = [
    [Q, "--preset", "naive"],
    [Q, "--preset", "mindscape", "--max-rounds", "2"],
    ["Who helped Cinderella?", "--option", "the pigeons", "--option", "the prince"],
    ["Cinderella's sisters were kind to her.", "--task", "claim", "--preset", "mia-rag"],
]


@pytest.fixture(scope="module")
def runtime() -> Iterator[Path]:
    """Warm asks on, in a runtime folder of this module; the warm process is stopped after."""
    folder = Path(tempfile.mkdtemp(prefix="mw-")) / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(common.ENV_RUNTIME_DIR, str(folder))
        mp.setenv(common.ENV_WARM, "1")
        mp.setenv(common.ENV_IDLE, "5")  # should a test leave it, it goes by itself
        yield folder
        left = client.status()
        client.stop()
        assert left is None or not common.pid_alive(int(left["pid"]))
    shutil.rmtree(folder.parent, ignore_errors=True)


def ask(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, str]:
    """`mindscape ask ARGV` in this process (the client side, when warm): stdout, stderr.

    An ask that found the warm process stale because a source file changed while the test
    ran (someone edits the work tree) is asked again, once: the warm process stepped aside
    and the next ask starts a fresh one."""
    for _ in range(2):
        capsys.readouterr()
        with _watch_versions() as stale:
            rc = main(["ask", *argv])
        captured = capsys.readouterr()
        assert rc == 0, captured.err
        if not stale:
            break
        deadline = time.monotonic() + 60
        while client.status() is not None and time.monotonic() < deadline:
            time.sleep(0.1)
    return captured.out, captured.err


@contextmanager
def _watch_versions() -> Iterator[list[str]]:
    """The client's "runs another version" lines while the block runs (and only those: a
    test's own assertions see every other line)."""
    stale: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "runs another version" in record.getMessage():
                stale.append(record.getMessage())

    log = logging.getLogger("mindscape.serve.warm.client")
    handler = Catch()
    log.addHandler(handler)
    try:
        yield stale
    finally:
        log.removeHandler(handler)


def warm_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("mindscape.serve.warm")
        and "runs another version" not in r.getMessage()
    ]


def served() -> tuple[int, int]:
    """The warm process's pid and the questions it answered ((0, 0) when none runs)."""
    found = client.status()
    return (int(found["pid"]), int(found["requests"])) if found else (0, 0)


def one_more(before: tuple[int, int]) -> bool:
    """Whether the warm process answered one question since `before` (a fresh one: its
    first)."""
    pid, requests = served()
    return requests == (before[1] + 1 if pid == before[0] else 1)


@pytest.mark.parametrize("argv", QUESTIONS, ids=["naive", "mindscape", "choice", "claim"])
@pytest.mark.parametrize("shape", [["--json"], [], ["--json", "--stream"]], ids=str)
def test_warm_and_in_process_answers_are_the_same(
    runtime: Path,
    qa_store: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    argv: list[str],
    shape: list[str],
) -> None:
    full = [*argv, "--store", str(qa_store), "--llm", "extractive", *shape]
    before = served()
    warm_out, warm_err = ask(capsys, *full)
    here_out, here_err = ask(capsys, *full, "--no-warm")
    assert warm_out == here_out and warm_err == here_err
    assert warm_lines(caplog) == [] and one_more(before)
    if "--json" in shape:
        final = json.loads(warm_out.splitlines()[-1])
        assert final["answer"] and final["evidence"] and final["trace"]


def test_a_scripted_llm_gives_the_same_answers_and_token_counts(
    runtime: Path,
    qa_store: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through an OpenAI-compatible server (scripted, on loopback): a refused round, then
    an answer; the warm process started with the old settings steps aside first."""
    from tests.fake_openai import FakeOpenAIServer
    from tests.fakes import QAScript

    script = {"now": QAScript(answer="two white pigeons", refuse=1)}
    with FakeOpenAIServer(lambda request: script["now"].request(request)) as llm:
        for key, value in {
            "MINDSCAPE_LLM_BACKEND": "openai",
            "MINDSCAPE_LLM_BASE_URL": llm.base_url,
            "MINDSCAPE_LLM_MODEL": "fake-model",
            "OPENAI_API_KEY": "sk-test",
        }.items():
            monkeypatch.setenv(key, value)
        full = [Q, "--store", str(qa_store), "--json", "--preset", "mindscape"]
        if client.status() is not None:  # started with the extractive settings: refused
            ask(capsys, *full)
            assert "started with other settings" in warm_lines(caplog)[0]
            deadline = time.monotonic() + 60
            while client.status() is not None and time.monotonic() < deadline:
                time.sleep(0.1)
        try:
            caplog.clear()
            script["now"] = QAScript(answer="two white pigeons", refuse=1)
            start = len(llm.requests)
            warm_out, _ = ask(capsys, *full)
            calls = len(llm.requests) - start
            script["now"] = QAScript(answer="two white pigeons", refuse=1)
            here_out, _ = ask(capsys, *full, "--no-warm")
        finally:
            client.stop()
    warm, here = json.loads(warm_out), json.loads(here_out)
    assert warm_lines(caplog) == [] and warm == here
    assert warm["answer"] == "two white pigeons"
    assert warm["llm_calls"] == calls > 0 and warm["tokens_in"] > 0 and warm["tokens_out"] > 0


def cli(*argv: str) -> subprocess.Popen[str]:
    """`mindscape ARGV` in a child process (with this module's runtime folder)."""
    return subprocess.Popen(
        [sys.executable, "-m", "mindscape", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )


def test_two_asks_at_once_both_answer(
    runtime: Path, qa_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full = [Q, "--store", str(qa_store), "--llm", "extractive", "--json", "--preset", "naive"]
    ask(capsys, *full)  # a warm process runs
    pid, before = served()
    children = [cli("ask", *full), cli("ask", *full)]
    done = [child.communicate(timeout=300) for child in children]
    here, _ = ask(capsys, *full, "--no-warm")
    for child, (out, err) in zip(children, done, strict=True):
        assert child.returncode == 0 and err == "" and out == here
    assert served() == (pid, before + 2)
    held = client.status() or {}
    assert held["embedders"] == 1 and held["model_servers"] == []  # one of each, however many


def test_two_first_asks_at_once_share_one_warm_process(
    runtime: Path, qa_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """None runs; two asks start at once: each may start one, one of those serves both."""
    client.stop()
    full = [Q, "--store", str(qa_store), "--llm", "extractive", "--json", "--preset", "naive"]
    children = [cli("ask", *full), cli("ask", *full)]
    done = [child.communicate(timeout=300) for child in children]
    here, _ = ask(capsys, *full, "--no-warm")
    for child, (out, err) in zip(children, done, strict=True):
        assert child.returncode == 0 and err == "" and out == here
    assert served()[1] == 2


def test_a_store_indexed_again_is_read_afresh(
    runtime: Path,
    qa_store: Path,
    qa_embedder: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from mindscape.indexing.indexer import Indexer
    from mindscape.memory.store import MemoryStore

    store = tmp_path / "store"
    shutil.copytree(qa_store, store)
    base = ["--store", str(store), "--llm", "extractive", "--json", "--preset", "naive"]
    ask(capsys, Q, *base, "--doc", QA_DOC)  # the warm process holds the store open
    opening = "\n".join(STORY.read_text().splitlines()[:40])
    writer = MemoryStore(store)
    Indexer(writer, qa_embedder, progress=False).index("opening", opening, title="opening")
    writer.close()
    warm_out, _ = ask(capsys, Q, *base, "--doc", "opening")
    here_out, _ = ask(capsys, Q, *base, "--doc", "opening", "--no-warm")
    assert warm_lines(caplog) == [] and warm_out == here_out
    assert {e["doc_id"] for e in json.loads(warm_out)["evidence"]} == {"opening"}


def test_a_killed_warm_process_costs_one_line_and_the_next_ask_starts_one(
    runtime: Path, qa_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full = [Q, "--store", str(qa_store), "--llm", "extractive", "--json", "--preset", "naive"]
    ask(capsys, *full)
    pid = int(client.status()["pid"])  # type: ignore[index]
    os.kill(pid, signal.SIGKILL)
    while common.pid_alive(pid):
        time.sleep(0.05)
    out, err = cli("ask", *full).communicate(timeout=300)
    here, _ = ask(capsys, *full, "--no-warm")
    assert out == here
    assert err.splitlines() == [
        f"the warm process (pid {pid}) had died; the next ask starts one; answering in this process"
    ]
    ask(capsys, *full)
    assert int(client.status()["pid"]) != pid  # type: ignore[index]


def test_serve_stop_leaves_nothing_running(
    runtime: Path, qa_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ask(capsys, Q, "--store", str(qa_store), "--llm", "extractive", "--preset", "naive")
    pid = int(client.status()["pid"])  # type: ignore[index]
    assert main(["serve", "--status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pid"] == pid
    assert main(["serve", "--stop"]) == 0
    assert not common.pid_alive(pid) and client.status() is None
    assert not (runtime / common.SOCKET).exists() and not (runtime / common.INFO).exists()
    assert main(["serve", "--status"]) == 0
    assert capsys.readouterr().out.startswith("no warm process runs")
