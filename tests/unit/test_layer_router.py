"""The layer router and the local reader's session summary (Context.read_summaries): the
router's JSON gives the probabilities of the scikit-learn pipeline it came from, and files
that cannot be loaded are one error line naming `make router`, never a quiet "route nothing"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from mindscape.errors import MindscapeError
from mindscape.llm import Usage
from mindscape.reasoners.base import AnswerRequest
from mindscape.reasoners.layer_router import (
    MODEL_FILE,
    ROUTER_DIR,
    LayerRouter,
    load_router,
)
from mindscape.reasoners.rankers import MANIFEST, ModelFileError
from tests.fakes import ScriptedChatModel
from tests.unit.test_focus import STORY, as_hits, chunk_units, local_reasoner

SNAPSHOT = Path(__file__).resolve().parents[1] / "snapshots" / "router_scores.json"

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


def test_the_shipped_router_gives_the_scikit_learn_pipelines_probabilities() -> None:
    """The fixture holds questions and P(summary) from the pickled scikit-learn pipeline
    (scikit-learn 1.9.1, before the JSON format), accents, capitals and empty text among
    them: the JSON rebuilt as a TfidfVectorizer tokenises them as it did."""
    router = load_router()
    fixture = json.loads(SNAPSHOT.read_text())
    got = [router.summary_share(q) for q in fixture["questions"]]
    np.testing.assert_allclose(got, fixture["summary_share"], rtol=0, atol=1e-12)
    want = np.asarray(fixture["summary_share"])
    assert list(np.argsort(-np.asarray(got), kind="stable")) == list(
        np.argsort(-want, kind="stable")
    )
    assert [router.wants_summary(q) for q in fixture["questions"]] == list(want >= 0.5)


def damaged(tmp_path: Path) -> Path:
    copy = tmp_path / "router"
    shutil.copytree(ROUTER_DIR, copy)
    (copy / MODEL_FILE).write_bytes(b"not a model")
    return copy


def test_a_damaged_router_is_an_error_naming_make_router(tmp_path: Path) -> None:
    for where, problem in (
        (damaged(tmp_path), f"{MODEL_FILE} does not match its sha256"),
        (tmp_path / "nowhere", f"no {MANIFEST}"),
    ):
        with pytest.raises(ModelFileError) as exc:
            load_router(where)
        msg = str(exc.value)
        assert isinstance(exc.value, MindscapeError) and "\n" not in msg
        assert problem in msg and "run `make router`" in msg and "--read-summaries off" in msg


def test_a_router_file_in_another_format_is_not_loaded(tmp_path: Path) -> None:
    import hashlib

    copy = tmp_path / "router"
    shutil.copytree(ROUTER_DIR, copy)
    meta = json.loads((copy / MANIFEST).read_text())
    data = json.loads((copy / MODEL_FILE).read_text())
    for raw, problem in (
        (json.dumps({**data, "idf": data["idf"][:-1]}), "differ in length"),
        (json.dumps([1, 2]), "is not a router"),
    ):
        (copy / MODEL_FILE).write_text(raw)
        digest = hashlib.sha256(raw.encode()).hexdigest()
        (copy / MANIFEST).write_text(json.dumps({**meta, "sha256": {MODEL_FILE: digest}}))
        with pytest.raises(ModelFileError, match="make router") as exc:
            load_router(copy)
        assert problem in str(exc.value)
    shutil.copy(ROUTER_DIR / MODEL_FILE, copy / MODEL_FILE)  # the true file, another format
    (copy / MANIFEST).write_text(json.dumps({**meta, "format": "pickle"}))
    with pytest.raises(ModelFileError, match="not in the format this version reads"):
        load_router(copy)


def test_a_routed_question_with_a_damaged_router_is_an_error_not_windows_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader does not quietly read windows only when the router cannot be loaded."""
    monkeypatch.setattr("mindscape.reasoners.layer_router.ROUTER_DIR", damaged(tmp_path))
    units = chunk_units(STORY)
    r = local_reasoner(ScriptedChatModel(responses=["to be good and pious"] * 2))
    req = AnswerRequest(Q, "open", passages=[*as_hits(units, [1, 4]), session()],
                        focus_tokens=100, focus_windows=2, read_summaries="routed")  # fmt: skip
    with pytest.raises(ModelFileError, match="make router"):
        r.answer(req, usage=Usage())


def test_make_router_writes_json_that_gives_the_pipelines_probabilities(tmp_path: Path) -> None:
    """benchmarks/ranker/train_router.py's `save`: JSON and a manifest the loader accepts."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    from benchmarks.ranker import train_router

    train = ["Why did the fox run away?", "Who is the king?", "Why was the queen sad?",
             "What is the name of the dog?", "Why did the boy lie to his mother?",
             "Where is the castle?"]  # fmt: skip
    y = [1, 0, 1, 0, 1, 0]
    pipe = make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
        LogisticRegression(class_weight="balanced"),
    ).fit(train, y)
    probe = [*train, "Why did the king run?", "WHY? Who... the dog's name!", ""]
    gap = train_router.save(pipe, tmp_path, probe, {"trained_on": "six questions"})
    meta = json.loads((tmp_path / MANIFEST).read_text())
    assert gap < 1e-12 and meta["trained_on"] == "six questions"
    assert list(meta["sha256"]) == [MODEL_FILE] and not list(tmp_path.glob("*.pkl"))
    router = load_router(tmp_path)
    got = [router.summary_share(q) for q in probe]
    np.testing.assert_allclose(got, pipe.predict_proba(probe)[:, 1], rtol=0, atol=1e-12)


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
