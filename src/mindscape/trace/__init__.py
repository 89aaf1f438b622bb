"""The run's trace as data: where in the book the question went, round by round.

The one place that turns what a run already holds into the trace the map is drawn from
(``ask --json``, ``ask --map``, the chat page):

* :func:`book_strips` (at ``init_signature``, whose ``signature`` event carries them): the
  books the question touched, each as the strip of its sessions in story order, with chapter
  labels where the outline has headings, and the question's activation as heat: MiA's E1
  view (the K0 chunks a query alone lights up, rank-weighted ``1/(r+1)``, summed per
  session). E1 is recomputed from the retriever's cached query vector and arrays: one
  matrix-vector product, no embedding, no model call;
* :func:`trace_fields` (at ``refine``, each round): the round's signature with activation
  weights, the units retrieved per layer with their chunk spans, the passages the answer
  actually read, and the attempt's grounding;
* :func:`quote_pin` (at ``refine``): the answer's quote and where it is.

``refine``'s ``decision`` event carries the round's step and the quote, so a page fills the
map round by round as the run goes (:func:`step_of` names the step a run is in).

Everything here observes: nothing feeds back into retrieval, answers or confidence. A
retriever without the arrays (a test's fake) gives no strip; the trace keeps the rest.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from mindscape.memory.settings import SignatureParams
from mindscape.memory.signature.activation import activate
from mindscape.state import (
    Attempt,
    BookStrip,
    EvidenceItem,
    QAState,
    QuotePin,
    StripChapter,
    StripSession,
    TracePassage,
    TraceSession,
    TraceUnit,
)

__all__ = [
    "CHUNK_ID",
    "MAX_BOOKS",
    "NO_QUOTE",
    "SHOWN_CHARS",
    "SPLIT_TITLE",
    "STEPS",
    "SYNTHETIC_TITLE",
    "book_strips",
    "chapters",
    "chunk_index",
    "quote_pin",
    "quote_text",
    "read_passages",
    "session_heat",
    "shown_step",
    "spans",
    "step_of",
    "trace_fields",
    "trace_unit",
]

MAX_BOOKS = 8
"""Most books of a library the trace draws (the most activated)."""
SYNTHETIC_TITLE = re.compile(r"^Part \d+$")
"""An outline section the indexer named itself (one per window, no heading): no chapter."""
SPLIT_TITLE = re.compile(r"\s+\(part \d+\)$")
"""The suffix of a long chapter's later parts: one label per chapter."""
CHUNK_ID = re.compile(r":c(\d+)$")
SHOWN_CHARS = 600
"""Longest passage text a front end is sent (:func:`shown_step`); the map shows less."""
NO_QUOTE = {"", "no evidence"}

STEPS = {
    "start": "activating the signature",
    "signature": "retrieving (round {next})",
    "retrieve": "reading round {round}",
    "answer": "refining after round {round}",
    "REFINE": "retrieving (round {next})",
    "ANSWER": "answering",
    "STOP": "answering",
}
"""The step a run is in after each progress event (the page keeps its own copy in
ui/src/ReadingMap.tsx, ``stepOf``)."""


def step_of(event: dict[str, Any]) -> str | None:
    """The step a run is in once `event` (a custom stream event) has happened, or None for
    an event that does not move it (a round's signature update)."""
    name = event.get("event")
    round_ = int(event.get("round") or 0)
    if name == "signature" and round_:
        return None  # the round's signature update: still reading
    key = str(event.get("decision")) if name == "decision" else str(name)
    if key not in STEPS:
        return None
    return STEPS[key].format(round=round_, next=round_ + 1)


# --------------------------------------------------------------------------- chunk spans


def chunk_index(chunk_id: str) -> int | None:
    """The chunk's index in its book (``doc:c12`` -> 12), None for another id."""
    m = CHUNK_ID.search(chunk_id)
    return int(m.group(1)) if m else None


def spans(chunk_ids: Iterable[str]) -> list[list[int]]:
    """The chunks as runs ``[first, last]`` of consecutive indices, in order."""
    idx = sorted({i for i in (chunk_index(c) for c in chunk_ids) if i is not None})
    out: list[list[int]] = []
    for i in idx:
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def trace_unit(item: EvidenceItem) -> TraceUnit:
    """A retrieved unit as the trace records it."""
    return TraceUnit(unit_id=item["unit_id"], doc_id=item["doc_id"], spans=spans(item["chunk_ids"]))


# --------------------------------------------------------------------------- the book strips


def book_strips(
    retriever: Any, question: str, doc_ids: set[str] | None, params: SignatureParams
) -> list[BookStrip]:
    """The books `question` touched (at most :data:`MAX_BOOKS`, most activated first), each
    with its sessions' heat; [] for a retriever without the arrays."""
    if not (hasattr(retriever, "embed_query") and hasattr(retriever, "scope")):
        return []
    scope = retriever.scope(doc_ids)
    if not scope.n_chunks:
        return []
    rows = activate(scope, question, retriever.embed_query(question), params).rows
    weights = 1.0 / (np.arange(len(rows)) + 1.0)
    doc_weight = np.bincount(scope.chunk_doc[rows], weights=weights, minlength=len(scope.docs))
    sess = scope.chunk_session[rows]
    inside = sess >= 0
    heat = np.bincount(sess[inside], weights=weights[inside], minlength=len(scope.sessions))
    hottest = float(heat.max(initial=0.0)) or 1.0
    total = float(doc_weight.sum()) or 1.0
    order = [int(i) for i in np.argsort(-doc_weight, kind="stable") if doc_weight[i] > 0]
    docs = [scope.docs[i] for i in order[:MAX_BOOKS]]
    share = {scope.docs[i]: float(doc_weight[i]) / total for i in order}
    row_of = {u.id: j for j, u in enumerate(scope.sessions.units)}
    titles = _titles(retriever)
    sessions = _per_doc(scope.sessions.units, docs)
    outline = _per_doc(scope.views["outline"].units, docs)
    counts = Counter(u.doc_id for u in scope.chunks.units)
    return [
        BookStrip(
            doc_id=d,
            title=titles.get(d, d),
            chunks=counts[d],
            share=round(share[d], 4),
            sessions=[
                StripSession(
                    unit_id=u.id,
                    chunks=_bounds(u.chunk_ids),
                    heat=round(float(heat[row_of[u.id]]) / hottest, 4),
                )
                for u in sessions.get(d, [])
            ],
            chapters=chapters(outline.get(d, [])),
        )
        for d in docs
    ]


def _titles(retriever: Any) -> dict[str, str]:
    """The books' titles from the store's manifest ({} without a store)."""
    store = getattr(retriever, "store", None)
    if store is None or not hasattr(store, "documents"):
        return {}
    return {d["doc_id"]: d.get("title") or d["doc_id"] for d in store.documents()}


def _per_doc(units: Iterable[Any], docs: list[str]) -> dict[str, list[Any]]:
    wanted = set(docs)
    out: dict[str, list[Any]] = {}
    for u in units:
        if u.doc_id in wanted:
            out.setdefault(u.doc_id, []).append(u)
    return {d: sorted(us, key=lambda u: u.order) for d, us in out.items()}


def _bounds(chunk_ids: Iterable[str]) -> list[int]:
    runs = spans(chunk_ids)
    return [runs[0][0], runs[-1][1]] if runs else [0, 0]


def chapters(outline: list[Any]) -> list[StripChapter]:
    """Chapter labels from the outline's heading sections (a long chapter's parts give one
    label; the indexer's own "Part N" sections and model-written items give none)."""
    out: list[StripChapter] = []
    for u in outline:
        title = str(u.meta.get("title") or "")
        if not title or SYNTHETIC_TITLE.match(title) or "atomic_spans" in u.meta:
            continue
        label = SPLIT_TITLE.sub("", title)
        if out and out[-1]["label"] == label:
            continue
        first = _bounds(u.chunk_ids)[0]
        out.append(StripChapter(label=label, chunk=first))
    return out


def session_heat(books: list[BookStrip]) -> dict[str, float]:
    """Each strip session's heat, by unit id."""
    return {s["unit_id"]: s["heat"] for b in books for s in b["sessions"]}


# --------------------------------------------------------------------------- one round


def trace_fields(state: QAState, latest: Attempt | None) -> dict[str, Any]:
    """What the trace adds to a round's step: σ with weights, the units retrieved per layer,
    the passages read, the attempt's grounding."""
    heat = session_heat(state.get("books") or [])
    sessions = [
        TraceSession(
            unit_id=s["unit_id"],
            doc_id=_doc_of(s["unit_id"]),
            rank=int(s.get("rank", n)),
            weight=heat.get(s["unit_id"], 0.0),
            gain=round(float((s.get("gains") or {}).get("total", 0.0)), 4),
        )
        for n, s in enumerate(state.get("signature") or [])
    ]
    retrieved: dict[str, list[TraceUnit]] = {}
    for g in state.get("round_hits") or []:
        retrieved.setdefault(g["layer"], []).extend(trace_unit(i) for i in g["items"])
    out: dict[str, Any] = {
        "sessions": sessions,
        "retrieved": retrieved,
        "read_passages": read_passages(state, latest),
    }
    if latest and latest.get("grounding"):
        out["grounding"] = latest["grounding"]
    return out


def _doc_of(unit_id: str) -> str:
    return unit_id.rsplit(":", 1)[0]


def read_passages(state: QAState, attempt: Attempt | None) -> list[TracePassage]:
    """The passages `attempt` read, in reading order: its own words for each (a focused
    window's text where the reader recorded it), its layer and chunk spans."""
    if attempt is None:
        return []
    ids = list(attempt.get("read") or [])
    texts = list(attempt.get("passages") or [])
    aligned = len(texts) == len(ids)
    by_id = {i["unit_id"]: i for i in state.get("retrieved") or []}
    by_id.update({i["unit_id"]: i for g in state.get("round_hits") or [] for i in g["items"]})
    out: list[TracePassage] = []
    for n, uid in enumerate(ids):
        item = by_id.get(uid)
        chunk_ids = item["chunk_ids"] if item else [uid]
        layer = item["layer"] if item else "veridical"
        text = texts[n] if aligned else (item["text"] if item else "")
        out.append(
            TracePassage(
                unit_id=uid,
                doc_id=item["doc_id"] if item else _doc_of(uid),
                spans=spans(chunk_ids),
                layer=layer,
                text=text,
            )
        )
    return out


def shown_step(step: dict[str, Any], chars: int = SHOWN_CHARS) -> dict[str, Any]:
    """A trace step as a front end is sent it: each passage read cut to `chars` characters
    (the extractive reader reads whole chunks and summaries, a hundred a question; a chat
    thread keeps every reply's trace)."""
    passages = step.get("read_passages")
    if not isinstance(passages, list):
        return step
    cut = [
        {**p, "text": _cut(str(p.get("text", "")), chars)} if isinstance(p, dict) else p
        for p in passages
    ]
    return {**step, "read_passages": cut}


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


# --------------------------------------------------------------------------- the quote


def quote_text(attempt: Attempt | None) -> str:
    """The words the attempt rests on: its quote, else the extractive answer's sentence."""
    if attempt is None:
        return ""
    text = attempt.get("quote") or attempt.get("rationale") or ""
    text = " ".join(str(text).split())
    return "" if text in NO_QUOTE else text


def quote_pin(state: QAState, attempt: Attempt | None, books: list[BookStrip]) -> QuotePin | None:
    """The answer's quote and where it is: the passage read that holds it (the best fuzzy
    match), its chunk and session; None without a quote."""
    text = quote_text(attempt)
    if not text or attempt is None:
        return None
    from mindscape.reasoners import grounding

    passages = read_passages(state, attempt)
    support = list(attempt.get("support") or [])
    if passages:
        scores = [grounding.quote_match(text, [p["text"]]) for p in passages]
        best = max(range(len(passages)), key=lambda n: scores[n])
        if scores[best] < grounding.QUOTE_MATCH and support:
            best = next((n for n, p in enumerate(passages) if p["unit_id"] == support[0]), best)
        where = passages[best]
    else:
        return None
    chunk = _chunk_of(text, where, state)
    return QuotePin(
        text=text,
        doc_id=where["doc_id"],
        unit_id=where["unit_id"],
        chunk=chunk,
        session=_session_at(books, where["doc_id"], chunk),
        round=int(attempt["round"]),
    )


def _chunk_of(text: str, passage: TracePassage, state: QAState) -> int | None:
    """The chunk of `passage` that holds the quote: the only one, else the retrieved chunk
    whose words match it best, else the passage's first."""
    first = passage["spans"][0][0] if passage["spans"] else None
    if not passage["spans"] or passage["spans"] == [[first, first]]:
        return first
    from mindscape.reasoners import grounding

    covered = {i for a, b in passage["spans"] for i in range(a, b + 1)}
    chunks = [
        (chunk_index(i["unit_id"]), i["text"])
        for i in state.get("retrieved") or []
        if i["layer"] == "veridical" and i["doc_id"] == passage["doc_id"]
    ]
    scored = [(grounding.quote_match(text, [t]), n) for n, t in chunks if n in covered]
    return max(scored)[1] if scored and max(scored)[0] >= grounding.QUOTE_MATCH else first


def _session_at(books: list[BookStrip], doc_id: str, chunk: int | None) -> str | None:
    if chunk is None:
        return None
    for b in books:
        if b["doc_id"] == doc_id:
            for s in b["sessions"]:
                if s["chunks"][0] <= chunk <= s["chunks"][1]:
                    return s["unit_id"]
    return None
