"""A QA run as a tool's short result (mindscape.graphs.tool_result): what it keeps, where its quotes
are, and the checks on a tool's question, books and preset."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mindscape.graphs.tool_result import (
    MAX_QUESTION_CHARS,
    checked_preset,
    checked_question,
    compact_result,
    qa_input,
    unit_place,
)

LONG = "The prince rode to the house. " * 20


def output(**over: Any) -> dict[str, Any]:
    """A QA output as the graph returns it: a quote pin in chunk 12 of a book with chapters,
    the answer's round having read four passages (one of them the pin's)."""
    out = {
        "answer": "the golden slipper",
        "confidence": 0.81,
        "sufficient": True,
        "rounds": 2,
        "answer_round": 2,
        "evidence": [
            {"unit_id": "tale:c12", "text": LONG, "chunk_ids": ["tale:c12"]},
            {"unit_id": "tale:e1", "text": "A summary.", "chunk_ids": ["tale:c5", "tale:c9"]},
        ],
        "trace": [
            {"round": 1, "read": ["tale:c1"], "passages": ["first round"]},
            {
                "round": 2,
                "read": ["tale:c12", "tale:c3", "tale:e1", "tale:c30"],
                "passages": [LONG, "She sat in the ashes.", "A summary.", "Another passage."],
            },
        ],
        "books": [
            {
                "doc_id": "tale",
                "chapters": [{"label": "CHAPTER I", "chunk": 0}, {"label": "CHAPTER II", "chunk": 10}],
            }
        ],
        "quote": {"text": "he found the golden slipper", "doc_id": "tale", "unit_id": "tale:c12",
                  "chunk": 12},
        "signature": [{"unit_id": "tale:e1", "text": LONG}],
    }  # fmt: skip
    return {**out, **over}


def test_the_result_keeps_the_answer_trust_quotes_rounds_and_seconds() -> None:
    result = compact_result(output(), seconds=3.14159)
    assert set(result) == {"answer", "trusted", "confidence", "quotes", "rounds", "seconds"}
    assert result["answer"] == "the golden slipper" and result["trusted"] is True
    assert result["confidence"] == 0.81 and result["rounds"] == 2 and result["seconds"] == 3.1
    assert [q["place"] for q in result["quotes"]] == [
        "tale, CHAPTER II, chunk 12",  # the answer's own quote first
        "tale, CHAPTER I, chunk 3",  # then what its round read, the pin's passage skipped
        "tale, chunks 5-9 (a summary)",
    ]
    assert result["quotes"][0]["text"] == "he found the golden slipper"
    assert len(json.dumps(result)) < 2000


def test_long_passages_are_quoted_short() -> None:
    result = compact_result(output(quote=None), seconds=1)
    assert result["quotes"][0]["place"] == "tale, CHAPTER II, chunk 12"
    assert len(result["quotes"][0]["text"]) <= 222 and result["quotes"][0]["text"].startswith("…")


@pytest.mark.parametrize(
    ("over", "trusted"),
    [
        ({}, True),
        ({"sufficient": False}, False),
        ({"confidence": 0.2}, False),
        ({"answer": ""}, False),
    ],
)
def test_trusted_is_the_loops_acceptance(over: dict[str, Any], trusted: bool) -> None:
    assert compact_result(output(**over), seconds=1, threshold=0.5)["trusted"] is trusted


def test_an_extractive_run_quotes_the_units_it_read() -> None:
    trace = [{"round": 1, "read": ["tale:c12", "tale:e1"]}]  # no focused passages
    result = compact_result(output(trace=trace, answer_round=1, quote=None), seconds=1)
    assert [q["place"] for q in result["quotes"]] == [
        "tale, CHAPTER II, chunk 12",
        "tale, chunks 5-9 (a summary)",
    ]


def test_a_unit_without_chunks_is_named_by_its_id() -> None:
    assert unit_place("tale:o3", [], {}) == "tale:o3"
    assert unit_place("tale:c7", None, {}) == "tale, chunk 7"


def test_questions_presets_and_books_are_checked() -> None:
    assert checked_question("  Who   wins? ") == "Who wins?"
    with pytest.raises(ValueError, match="empty"):
        checked_question(" \n ")
    with pytest.raises(ValueError, match="10,000 characters"):
        checked_question("w" * 10_000)
    assert checked_question("w" * MAX_QUESTION_CHARS)
    assert checked_preset(None) is None and checked_preset(" naive ") == "naive"
    with pytest.raises(ValueError, match="Unknown preset 'fast'"):
        checked_preset("fast")
    assert qa_input("q", None) == {"question": "q"}
    assert qa_input("q", ["a"]) == {"question": "q", "doc_id": "a"}
    assert qa_input("q", ["a", "b"]) == {"question": "q", "doc_ids": ["a", "b"]}
