"""Threads on disk (threads.py): a run stopped mid-question resumes from its last finished
node on the same thread, without running the finished nodes again; `mindscape threads`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import mindscape.graphs.qa as qa_module
from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.graphs.threads import ask_on_thread, checkpointer, list_threads
from tests.fakes import FakeRetriever

Q = "Where did Tobin hide the gold?"


class Stopped(BaseException):
    """The process killed in the middle of a node."""


def test_a_stopped_question_resumes_from_its_last_finished_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = qa_module.make_try_answer
    runs: list[str] = []

    def stopping_once(deps: Deps) -> Any:
        node = real(deps)

        def try_answer(state: Any, runtime: Any) -> Any:
            runs.append(state["question"])
            if len(runs) == 1:
                raise Stopped
            return node(state, runtime)

        return try_answer

    monkeypatch.setattr(qa_module, "make_try_answer", stopping_once)
    r = FakeRetriever()
    deps = Deps(retriever=r, embedder=r.embedder)
    ctx = Context(preset="naive", backend="extractive", store=str(tmp_path))
    with checkpointer(tmp_path) as saver:
        app = qa_module.build_qa_graph(deps).compile(checkpointer=saver)
        with pytest.raises(Stopped):
            ask_on_thread(app, {"question": Q}, "t1", ctx)
        retrieved = len(r.calls)
        assert retrieved > 0
    [row] = list_threads(tmp_path)
    assert row["thread"] == "t1" and not row["finished"] and row["question"] == Q

    with checkpointer(tmp_path) as saver:  # a new process: same file, same thread
        app = qa_module.build_qa_graph(deps).compile(checkpointer=saver)
        out = ask_on_thread(app, {"question": Q}, "t1", ctx)
        assert out["answer"] == "in the cave beneath the lighthouse"
        assert len(r.calls) == retrieved  # retrieval finished before the stop: not run again
        assert runs == [Q, Q] and out["rounds"] == 1
        # a new question on the thread is a new run
        other = ask_on_thread(app, {"question": "Who kept the lighthouse?"}, "t1", ctx)
        assert len(r.calls) > retrieved and other["rounds"] == 1
    [row] = list_threads(tmp_path)
    assert row["finished"] and row["question"] == "Who kept the lighthouse?"

    from mindscape.cli import main

    assert main(["threads", "--store", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["thread"] == "t1"
    assert main(["threads", "--store", str(tmp_path / "none")]) == 2
    assert "no store at" in capsys.readouterr().err
