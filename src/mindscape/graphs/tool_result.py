"""A tool's result for a QA run, and the checks on what a tool is asked: one module for the
tools that hand mindscape's answers to other agents (the ``ask_book`` graph that LangGraph's
``/mcp`` serves, :mod:`mindscape.graphs.ask_book`; ``mindscape mcp``, :mod:`mindscape.serve.mcp`).

The QA graph's own output (every evidence unit with its text, the signature, the trace) is
what Python users, LangGraph Studio and the chat page read, and it stays so. A model that
calls the agent as a tool needs less: :func:`compact_result` keeps the answer, whether the
loop trusted it and its confidence, at most :data:`MAX_QUOTES` quotes each with its place in
the book (book, chapter where the outline has headings, chunk), the rounds and the seconds:
well under 2,000 characters.

Light to import (no graph, no model), so that a tool server answers ``initialize`` at once.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, cast

from pydantic import Field
from typing_extensions import Required, TypedDict

from mindscape.presets import PRESET_NAMES
from mindscape.state import QAInput, answer_step

__all__ = [
    "CHUNK",
    "MAX_QUESTION_CHARS",
    "MAX_QUOTES",
    "AskBookInput",
    "CompactResult",
    "Quote",
    "checked_preset",
    "checked_question",
    "compact_result",
    "one_line",
    "place",
    "qa_input",
    "read_passages",
    "unit_place",
]

MAX_QUOTES = 3
"""Most quotes in a result: the answer's own quote first, then the passages it read."""
MAX_QUESTION_CHARS = 2000
"""Longest question a tool takes, in characters (a question, not a document)."""
CHUNK = re.compile(r":c(\d+)$")


# total=False rather than NotRequired: under postponed annotations only that keeps the
# optional keys out of ``__required_keys__``, which MCP servers read.
class AskBookInput(TypedDict, total=False):
    """A question about the books of the store."""

    question: Required[
        Annotated[
            str, Field(description="The question about the book, in plain words (one question).")
        ]
    ]
    books: Annotated[
        list[str] | None,
        Field(
            description="Ids of the books to search (as list_books names them); "
            "omit to search every book of the store."
        ),
    ]
    preset: Annotated[
        str | None,
        Field(
            description="How to read: mindscape (default, the full loop) or one of "
            f"{', '.join(p for p in PRESET_NAMES if p != 'mindscape')}."
        ),
    ]


class Quote(TypedDict):
    """A passage the answer rests on, cut short, and where it is."""

    text: str
    place: str
    """``book, chapter, chunk N`` (the chapter where the outline has headings)."""


class CompactResult(TypedDict):
    """A QA run as a tool's result."""

    answer: str
    trusted: bool
    """Whether the loop accepted the answer: sufficient evidence, confidence at the run's
    threshold or above. An untrusted answer is the reader's best guess."""
    confidence: float
    quotes: list[Quote]
    """The answer's own quote first, then the passages its round read (at most three)."""
    rounds: int
    seconds: float


def checked_question(text: Any) -> str:
    """The question, stripped; ValueError (one line) when it is empty or too long."""
    question = " ".join(str(text or "").split())
    if not question:
        raise ValueError("The question is empty: ask something about the book.")
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(
            f"The question is {len(question):,} characters long; ask in at most "
            f"{MAX_QUESTION_CHARS:,} (a question, not a passage)."
        )
    return question


def checked_preset(preset: str | None) -> str | None:
    """The preset, or None for the run's own; ValueError naming the presets when unknown."""
    if preset is None or not str(preset).strip():
        return None
    name = str(preset).strip()
    if name not in PRESET_NAMES:
        raise ValueError(f"Unknown preset {name!r}: use one of {', '.join(PRESET_NAMES)}.")
    return name


def qa_input(question: str, books: list[str] | None) -> QAInput:
    """The QA graph's input for a question over `books` (None or empty: every book)."""
    ids = [b for b in books or [] if b]
    payload: dict[str, Any] = {"question": question}
    if len(ids) == 1:
        payload["doc_id"] = ids[0]
    elif ids:
        payload["doc_ids"] = ids
    return cast(QAInput, payload)


def one_line(exc: BaseException) -> str:
    """An error's message on one line."""
    return " ".join(str(exc).split()) or type(exc).__name__


# --------------------------------------------------------------------------- the result


def compact_result(out: dict[str, Any], *, seconds: float, threshold: float = 0.5) -> CompactResult:
    """The QA output `out` as a tool's result: answer, trust, confidence, quotes with their
    places, rounds, seconds."""
    from mindscape.graphs.chat import place_of, quote

    books = {b["doc_id"]: b for b in out.get("books") or [] if isinstance(b, dict)}
    spans = {e["unit_id"]: e.get("chunk_ids") or [] for e in out.get("evidence") or []}
    quotes: list[Quote] = []
    seen: set[str] = set()
    pin = out.get("quote") or {}
    if pin.get("text"):
        chunk = pin.get("chunk")
        where = (
            place(pin["doc_id"], int(chunk), books)
            if chunk is not None
            else place_of(str(pin.get("unit_id", "")))
        )
        quotes.append(Quote(text=quote(pin["text"]), place=where))
        seen.add(str(pin.get("unit_id")))
    for text, unit in read_passages(out):
        if len(quotes) >= MAX_QUOTES:
            break
        if unit in seen:
            continue
        seen.add(unit)
        quotes.append(Quote(text=quote(text), place=unit_place(unit, spans.get(unit), books)))
    confidence = float(out.get("confidence", 0.0))
    answer = str(out.get("answer") or "")
    return CompactResult(
        answer=answer or "I could not find an answer in the book.",
        trusted=bool(answer) and bool(out.get("sufficient", True)) and confidence >= threshold,
        confidence=round(confidence, 3),
        quotes=quotes,
        rounds=int(out.get("rounds") or 0),
        seconds=round(seconds, 1),
    )


def read_passages(out: dict[str, Any]) -> list[tuple[str, str]]:
    """What the answer's round read, as ``(text, unit id)``: its focused passages word for
    word, else (the extractive reader reads whole units) the units themselves."""
    step: dict[str, Any] = dict(answer_step(out) or {})
    ids = [str(u) for u in step.get("read") or []]
    passages = [str(p) for p in step.get("passages") or []]
    if passages:
        return [(p, ids[n] if n < len(ids) else "") for n, p in enumerate(passages)]
    by_id = {e["unit_id"]: e["text"] for e in out.get("evidence") or []}
    return [(by_id[u], u) for u in ids if u in by_id]


def place(doc_id: str, chunk: int, books: dict[str, Any]) -> str:
    """``book, chapter, chunk N``: the chapter is the outline heading the chunk lies under
    (from the run's trace; none for a book without headings)."""
    chapters = (books.get(doc_id) or {}).get("chapters") or []
    under = [c["label"] for c in chapters if int(c.get("chunk", 0)) <= chunk]
    return ", ".join([doc_id, *under[-1:], f"chunk {chunk}"])


def unit_place(unit_id: str, chunk_ids: list[str] | None, books: dict[str, Any]) -> str:
    """Where a unit read lies: a chunk's :func:`place`, else the chunks a summary covers
    (``book, chunks 5-9``)."""
    doc = unit_id.rpartition(":")[0]
    match = CHUNK.search(unit_id)
    if match:
        return place(doc, int(match.group(1)), books)
    numbers = sorted(int(m.group(1)) for c in chunk_ids or [] if (m := CHUNK.search(c)))
    if not numbers:
        return unit_id
    span = (
        f"chunk {numbers[0]}" if numbers[0] == numbers[-1] else f"chunks {numbers[0]}-{numbers[-1]}"
    )
    return f"{doc}, {span} (a summary)"
