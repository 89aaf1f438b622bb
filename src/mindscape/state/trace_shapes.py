"""The trace's shapes: what one round of a run records and what the map is drawn from.

:class:`TraceStep` is one round of the decision trace (``QAOutput.trace``); :class:`BookStrip`
and :class:`QuotePin` are the books the question touched and the answer's quote
(``QAOutput.books``, ``QAOutput.quote``); the rest are their parts. :data:`Decision` and
:data:`Grounding` are the words a round ends with and ties its answer by, which the trace
records and the loop reads. :mod:`mindscape.trace` fills these from a run's state; the graph
state (:mod:`mindscape.state`) carries them. Plain JSON data, as the rest of the state.
"""

from __future__ import annotations

from typing import Literal

from typing_extensions import NotRequired, TypedDict

__all__ = [
    "BookStrip",
    "Decision",
    "Grounding",
    "QuotePin",
    "StripChapter",
    "StripSession",
    "TracePassage",
    "TraceSession",
    "TraceStep",
    "TraceUnit",
]

Decision = Literal["ANSWER", "REFINE", "STOP"]
"""What a round ends with (see docs/glossary.md): `refine` writes it, the router reads it.
Self-Probe and MiA's UPDATE propose ANSWER or REFINE; only `refine` STOPs."""

Grounding = Literal[
    "grounded",
    "quoted",
    "ungrounded",
    "insufficient",
    "extractive",
    "verified",
    "lexical",
    "margin",
]
"""How an answer attempt is tied to the passages it read. An LLM answer's level comes from
the checks of :mod:`mindscape.reasoners.grounding`: grounded (the quote is in a passage and
carries the answer), quoted (the quote is in a passage, the answer is not tied to it or the
quote is not about the question), ungrounded (the quote is not in the passages),
insufficient (the model says the passages do not settle it). An extractive answer is a
passage's own words: extractive. A small local reader's plain answer copies no quote of its
own, so the quote check cannot fail for it: its confidence is the answer verifier's
P(right) (verified) or, without a verifier, the level of the checks that can fail (the
answer's words in the sentence nearest it, that sentence's passage about the question),
capped at the reader's token probability (lexical). Its closed answer (an option letter,
TRUE or FALSE) is checked by no words at all, so its confidence is the reader's margin
between the options at the reply's first token, 0 for an even choice (margin)."""


class TraceStep(TypedDict):
    """One round of the decision trace."""

    round: int
    queries: list[str]
    hits: dict[str, int]
    """Units retrieved per layer this round."""
    signature: list[str]
    answer: str
    sufficient: bool
    confidence: float
    decision: Decision
    reason: str
    probes: list[str]
    """Probes proposed for the next round."""
    llm_calls: int
    """LLM calls so far (cumulative)."""
    read: NotRequired[list[str]]
    """Unit ids of the passages this round's answer read."""
    passages: NotRequired[list[str]]
    """The focused passages this round's answer read, word for word (LLM answerers)."""
    ranker: NotRequired[str]
    """Which evidence ranker ordered those passages (``learned`` or ``fused``)."""
    sessions: NotRequired[list[TraceSession]]
    """The round's signature σ: its sessions, in pick order, with their activation weights."""
    retrieved: NotRequired[dict[str, list[TraceUnit]]]
    """The units this round retrieved, per layer, with the chunk spans they cover."""
    read_passages: NotRequired[list[TracePassage]]
    """The passages this round's answer actually read, with their place (the map's marks)."""
    grounding: NotRequired[Grounding]
    """How this round's attempt is tied to what it read (its confidence is ``confidence``)."""


class TraceSession(TypedDict):
    """One session of a round's signature, as the trace records it."""

    unit_id: str
    doc_id: str
    rank: int
    """Position in σ (0 = picked first)."""
    weight: float
    """The question's activation of the session, 0..1 (its heat in :class:`BookStrip`)."""
    gain: float
    """Its total marginal gain when it was picked (the selection's own weight)."""


class TraceUnit(TypedDict):
    """One retrieved unit: its id, document and the chunk spans it covers."""

    unit_id: str
    doc_id: str
    spans: list[list[int]]
    """Runs of chunk indices ``[first, last]`` (inclusive) in the book's order."""


class TracePassage(TraceUnit):
    """One passage the reader read: a :class:`TraceUnit` with its layer and words."""

    layer: str
    text: str


class StripSession(TypedDict):
    """One session of a book's strip, in story order."""

    unit_id: str
    chunks: list[int]
    """Its chunk span ``[first, last]`` (inclusive)."""
    heat: float
    """The question's activation of it, 0..1 (rank-weighted share of MiA's E1 chunks,
    divided by the hottest session's)."""


class StripChapter(TypedDict):
    """A chapter label of the strip, from the outline's heading sections."""

    label: str
    chunk: int
    """The chunk index where it starts."""


class BookStrip(TypedDict):
    """One book the question touched, drawn as a strip of its sessions."""

    doc_id: str
    title: str
    chunks: int
    """Chunks in the book."""
    share: float
    """Its share of the question's activation (1.0 for a single book)."""
    sessions: list[StripSession]
    chapters: list[StripChapter]


class QuotePin(TypedDict):
    """Where the answer's quote is: the map's pin."""

    text: str
    doc_id: str
    unit_id: str
    """The passage read that holds it."""
    chunk: int | None
    """The chunk index it lies in (None when its place is unknown)."""
    session: str | None
    """The session it lies in."""
    round: int
