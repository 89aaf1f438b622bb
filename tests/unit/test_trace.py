"""The run's trace (mindscape.trace) on a small real store, and the map drawn from it.

The store is real (the Indexer, Chroma, the Retriever) with the hashing embedder: the
bundled Cinderella story (no headings: the outline's sections are the indexer's own) and a
short tale with CHAPTER headings, so a question without a document touches a library.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from mindscape.commands.ask import result_json
from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.graphs.qa import build_qa_graph
from mindscape.reasoners import grounding
from mindscape.trace import chapters, shown_step, spans, step_of
from mindscape.trace.reading_map import MapError, map_view, write_map
from tests.conftest import STORY
from tests.fakes import HashingEmbedder

Q = "Who helped Cinderella sort the lentils from the ashes?"
TALE = "\n\n".join(
    f"CHAPTER {n}\n\n"
    + " ".join(
        f"Tobin the miller walked to the {place} and counted the sacks of {thing} there."
        for place, thing in [("mill", "flour"), ("river", "grain"), ("tower", "gold")] * 6
    )
    for n in ("I", "II", "III")
)


@pytest.fixture(scope="module")
def deps(tmp_path_factory: pytest.TempPathFactory) -> Deps:
    from mindscape.indexing.indexer import Indexer
    from mindscape.memory.store import MemoryStore

    emb = HashingEmbedder()
    store = MemoryStore(tmp_path_factory.mktemp("trace") / "store")
    ix = Indexer(store, emb, progress=False)
    ix.index("cinderella", STORY.read_text(), title="Cinderella")
    ix.index("tale", TALE, title="The miller's tale")
    return Deps(store=store, embedder=emb)


def ask(
    deps: Deps, question: str = Q, doc_id: str | None = "cinderella", **settings: Any
) -> dict[str, Any]:
    """The QA graph's output, answered extractively in at most two rounds."""
    app = build_qa_graph(deps).compile(checkpointer=InMemorySaver())
    payload: dict[str, Any] = {"question": question, **({"doc_id": doc_id} if doc_id else {})}
    ctx = Context(**{"backend": "extractive", "max_rounds": 2, **settings})
    return dict(app.invoke(payload, {"configurable": {"thread_id": "t"}}, context=ctx))


@pytest.fixture(scope="module")
def out(deps: Deps) -> dict[str, Any]:
    return ask(deps)


def test_each_round_holds_sigma_with_weights_the_units_per_layer_and_the_passages_read(
    out: dict[str, Any],
) -> None:
    assert out["trace"] and len(out["trace"]) == out["rounds"]
    for step in out["trace"]:
        assert [s["unit_id"] for s in step["sessions"]] == step["signature"]
        assert all(0.0 <= s["weight"] <= 1.0 and s["gain"] >= 0 for s in step["sessions"])
        assert {k: len(v) for k, v in step["retrieved"].items() if v} == {
            k: n for k, n in step["hits"].items() if n
        }
        for units in step["retrieved"].values():
            for u in units:
                assert u["spans"] and all(0 <= a <= b < 34 for a, b in u["spans"])
        assert [p["unit_id"] for p in step["read_passages"]] == step["read"]
        assert all(p["text"] and p["spans"] and p["layer"] for p in step["read_passages"])
        assert step["grounding"] == "extractive"  # the attempt: answer, confidence, grounding
        assert isinstance(step["confidence"], float) and "answer" in step


def test_a_chunk_units_span_is_itself_and_a_summarys_the_runs_it_covers() -> None:
    assert spans(["d:c3"]) == [[3, 3]]
    assert spans(["d:c5", "d:c3", "d:c4", "d:c9", "d:x"]) == [[3, 5], [9, 9]]


def test_the_strip_is_the_book_in_story_order_with_the_activation_as_heat(
    out: dict[str, Any],
) -> None:
    [book] = out["books"]  # one document asked about
    assert (book["doc_id"], book["title"], book["share"]) == ("cinderella", "Cinderella", 1.0)
    sessions = book["sessions"]
    assert sessions[0]["chunks"][0] == 0 and sessions[-1]["chunks"][1] == book["chunks"] - 1
    assert all(
        a["chunks"][1] + 1 == b["chunks"][0] for a, b in zip(sessions, sessions[1:], strict=False)
    )
    heat = [s["heat"] for s in sessions]
    assert max(heat) == 1.0 and min(heat) >= 0.0
    assert book["chapters"] == []  # the story has no headings: "Part N" is no chapter
    weights = {s["unit_id"]: s["weight"] for s in out["trace"][0]["sessions"]}
    assert all(weights[u] == s["heat"] for s in sessions for u in [s["unit_id"]] if u in weights)


def test_chapters_come_from_the_headings_one_label_per_chapter(deps: Deps) -> None:
    outline = [u for u in deps.get_retriever(Context()).scope({"tale"}).views["outline"].units]
    labels = chapters(sorted(outline, key=lambda u: u.order))
    assert [c["label"] for c in labels] == ["CHAPTER I", "CHAPTER II", "CHAPTER III"]
    assert labels[0]["chunk"] == 0 and labels[1]["chunk"] > 0


def test_a_library_question_lists_the_books_it_touched_most_activated_first(deps: Deps) -> None:
    got = ask(deps, "Where did Tobin the miller count the sacks of gold?", doc_id=None)
    books = got["books"]
    assert books[0]["doc_id"] == "tale" and {b["doc_id"] for b in books} <= {"tale", "cinderella"}
    shares = [b["share"] for b in books]
    assert shares == sorted(shares, reverse=True) and sum(shares) <= 1.0001


def test_the_quote_is_in_a_passage_the_answer_read_and_placed_in_its_chunk_and_session(
    out: dict[str, Any],
) -> None:
    quote = out["quote"]
    step = next(s for s in out["trace"] if s["round"] == out["answer_round"])
    where = next(p for p in step["read_passages"] if p["unit_id"] == quote["unit_id"])
    assert grounding.quote_match(quote["text"], [where["text"]]) >= grounding.QUOTE_MATCH
    assert any(a <= quote["chunk"] <= b for a, b in where["spans"])
    session = next(s for s in out["books"][0]["sessions"] if s["unit_id"] == quote["session"])
    assert session["chunks"][0] <= quote["chunk"] <= session["chunks"][1]
    assert quote["round"] == out["answer_round"]


def test_the_trace_only_observes_same_answer_no_extra_retrieval_or_model_call(
    deps: Deps, out: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    retriever = deps.get_retriever(Context())
    calls: list[str] = []
    for name in ("retrieve", "signature", "candidates"):
        real = getattr(retriever, name)
        monkeypatch.setattr(
            retriever, name, lambda *a, _r=real, _n=name, **k: (calls.append(_n), _r(*a, **k))[1]
        )
    traced = ask(deps)
    with_trace = list(calls)
    calls.clear()
    import mindscape.agents.init_signature as init_mod
    import mindscape.agents.refine as refine_mod

    monkeypatch.setattr(init_mod, "book_strips", lambda *a, **k: [])
    monkeypatch.setattr(refine_mod, "trace_fields", lambda *a, **k: {})
    monkeypatch.setattr(refine_mod, "quote_pin", lambda *a, **k: None)
    bare = ask(deps)
    assert with_trace == calls and "candidates" not in calls
    for key in ("answer", "confidence", "sufficient", "evidence", "signature", "rounds"):
        assert traced[key] == bare[key]
    assert traced["llm_calls"] == bare["llm_calls"] == 0


def test_a_front_end_is_sent_each_passage_cut_short(out: dict[str, Any]) -> None:
    step = out["trace"][0]
    shown = shown_step(step, chars=50)
    assert all(len(p["text"]) <= 50 for p in shown["read_passages"])
    assert [p["unit_id"] for p in shown["read_passages"]] == step["read"]
    assert shown_step({"round": 1}) == {"round": 1}  # a step without passages: as it is


def test_steps_name_where_the_run_is() -> None:
    assert step_of({"event": "start"}) == "activating the signature"
    assert step_of({"event": "signature", "round": 0}) == "retrieving (round 1)"
    assert step_of({"event": "signature", "round": 1}) is None  # σ's update: still reading
    assert step_of({"event": "retrieve", "round": 2}) == "reading round 2"
    assert step_of({"event": "answer", "round": 2}) == "refining after round 2"
    assert step_of({"event": "decision", "round": 1, "decision": "REFINE"}) == (
        "retrieving (round 2)"
    )
    assert step_of({"event": "decision", "round": 2, "decision": "ANSWER"}) == "answering"


def test_the_events_carry_the_strip_and_each_rounds_step(deps: Deps) -> None:
    app = build_qa_graph(deps).compile()
    events = [
        e
        for _, e in app.stream(
            {"question": Q, "doc_id": "cinderella"},
            context=Context(backend="extractive", max_rounds=2),
            stream_mode=["custom"],
        )
    ]
    assert events[0]["event"] == "signature" and events[0]["books"][0]["doc_id"] == "cinderella"
    decisions = [e for e in events if e["event"] == "decision"]
    assert [e["step"]["round"] for e in decisions] == list(range(1, len(decisions) + 1))
    assert all(e["step"]["read_passages"] for e in decisions)


# --------------------------------------------------------------------------- the map


def test_the_svg_map_has_a_mark_per_passage_read_and_one_pin(
    out: dict[str, Any], tmp_path: Path
) -> None:
    result = result_json(out)
    path = write_map(result, tmp_path / "map.svg")
    svg = path.read_text()
    ET.fromstring(svg)  # well-formed
    read = sum(len(s["read_passages"]) for s in out["trace"])
    assert len(re.findall(r'<g id="mark-\d+">', svg)) == read
    assert svg.count('<g id="pin">') == 1
    assert svg.count("<title>") == read + 1  # hovering shows each passage and the quote


def test_png_and_html_maps(out: dict[str, Any], tmp_path: Path) -> None:
    from matplotlib.image import imread

    png = imread(write_map(result_json(out), tmp_path / "map.png"))
    assert png.shape[0] > 100 and png.shape[1] > 1000
    html = write_map(result_json(out), tmp_path / "map.html").read_text()
    assert html.startswith("<!doctype html>") and "<svg" in html
    assert out["quote"]["text"].split()[0] in html


def test_a_missing_or_damaged_trace_gives_no_map_and_one_clear_error(
    out: dict[str, Any], tmp_path: Path
) -> None:
    result = result_json(out)
    assert map_view({**result, "books": []}) is None
    assert map_view({**result, "books": [{"doc_id": "x"}]}) is None
    damaged = [{"doc_id": "cinderella", "spans": "x"}, {"doc_id": "cinderella", "unit_id": "u"}]
    view = map_view({**result, "trace": [{"round": 1, "read_passages": damaged}]})
    assert view is not None and view.marks == []  # damaged passages are left out
    assert map_view({**result, "quote": None}) is not None  # no pin, still a map
    with pytest.raises(MapError, match="no map"):
        write_map({"answer": "old run"}, tmp_path / "old.svg")
    with pytest.raises(MapError, match=r"\.svg, \.png, \.html"):
        write_map(result, tmp_path / "map.pdf")


def test_a_library_map_shows_the_books_touched_then_the_chosen_books_strip(
    deps: Deps, tmp_path: Path
) -> None:
    result = result_json(ask(deps, "Where did Tobin the miller count the sacks of gold?", None))
    view = map_view(result)
    assert view is not None and [b["doc_id"] for b in view.books] == ["tale", "cinderella"]
    assert result["quote"]["doc_id"] == view.book["doc_id"] == "tale"  # the quote's book
    marked = {m.unit_id for m in view.marks}
    read = [p for s in result["trace"] for p in s["read_passages"]]
    assert marked == {p["unit_id"] for p in read if p["doc_id"] == "tale"}
    svg = write_map(result, tmp_path / "library.svg").read_text()
    assert "books the question touched" in svg and "CHAPTER II" in svg
