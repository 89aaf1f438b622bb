"""The layer router and the local reader's session summary (Context.read_summaries)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from mindscape.llm import Usage
from mindscape.reasoners.base import AnswerRequest
from mindscape.reasoners.layer_router import ROUTER_DIR, LayerRouter, load_router
from tests.fakes import ScriptedChatModel
from tests.unit.test_focus import STORY, as_hits, chunk_units, local_reasoner

Q = "What did the mother tell her daughter before she died?"
PLOT = (
    "The story tells how a girl whose mother died was mistreated by her stepsisters, "
    "and how a prince found her by a golden slipper."
)


def session(score: float = 0.9, text: str = PLOT) -> dict:
    return {
        "unit_id": "tale:e0", "layer": "episodic", "doc_id": "tale", "chunk_ids": ["tale:c0"],
        "text": text, "score": score, "score_query": 0.0, "score_signature": 0.0,
        "tokens": len(text.split()), "round": 1, "probe": "q",
    }  # fmt: skip


def test_the_shipped_router_loads_and_sends_why_questions_to_summaries() -> None:
    router = load_router()
    assert isinstance(router, LayerRouter)
    why = "Why did the king decide to forgive his son after everything that had happened?"
    name = "What was the name of the sprite?"
    assert router.summary_share(why) > router.summary_share(name)
    assert not router.wants_summary(name)


def test_a_damaged_router_routes_nothing_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    copy = tmp_path / "router"
    shutil.copytree(ROUTER_DIR, copy)
    (copy / "model.pkl").write_bytes(b"not a model")
    with caplog.at_level(logging.WARNING):
        assert load_router(copy) is None
    assert "does not match its sha256 (run `make router`)" in caplog.text


class Always:
    def __init__(self, answer: bool) -> None:
        self.answer = answer

    def wants_summary(self, question: str) -> bool:
        return self.answer


def test_the_local_reader_reads_a_summary_then_its_best_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    units = chunk_units(STORY)
    hits = [*as_hits(units, [1, 4, 2, 3, 0]), session(0.5), session(0.7, "Another session.")]
    chat = ScriptedChatModel(responses=["to be good and pious"] * 6)
    r = local_reasoner(chat)

    def ask(mode: str, **kw: object) -> dict:
        req = AnswerRequest(Q, "open", passages=hits, focus_tokens=100, focus_windows=2,
                            read_summaries=mode, **kw)  # type: ignore[arg-type]  # fmt: skip
        return dict(r.answer(req, usage=Usage()))

    off = ask("off")
    assert "summary" not in off and len(off["passages"]) == 2
    always = ask("always")  # the best scored session first, then the best window only
    assert always["summary"] == "tale:e0" and always["passages"][0] == "Another session."
    assert len(always["passages"]) == 2 and always["passages"][1] == off["passages"][0]
    assert "Another session." in chat.prompts[-1]
    assert "summary" not in ask("always", seen=["Another session.", PLOT])  # read before
    monkeypatch.setattr("mindscape.reasoners.llm.load_router", lambda: Always(False))
    assert "summary" not in ask("routed")
    monkeypatch.setattr("mindscape.reasoners.llm.load_router", lambda: Always(True))
    assert ask("routed")["summary"] == "tale:e0"
    choice = AnswerRequest(Q, "multiple-choice", options=["pious", "rich"], passages=hits,
                           focus_tokens=100, focus_windows=2, read_summaries="always")  # fmt: skip
    assert r.session_for(choice) is None  # options are read from windows
