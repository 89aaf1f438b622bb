"""Focused reading: the few sentences a small reader needs, with their neighbours, in story order.

The 1.5B local model answers 7 of 9 Cinderella questions from one focused passage of 330–600
tokens, and 0 of 4 from 1.2–3K tokens of packed chunks: for a small reader, more evidence is
worse evidence. So an LLM answerer does not read whole retrieved chunks; it reads a focused
set built here from them:

1. **candidates**: the sentences of the retrieved source chunks (veridical hits), each with
   the retrieval rank of its chunk; sentences the question's earlier attempts already read
   are left out, so a refining round reads new evidence, not a longer prompt;
2. **ranking**: a ranker (:mod:`mindscape.reasoners.rankers`) scores the candidates: the
   learned ranker by default, or the fused ranking (cosine to the question from the
   index's sentence vectors, BM25 over the candidates and the chunk's retrieval rank, which
   carries the signature and the hybrid score, fused by reciprocal rank fusion);
3. **windows**: best first, a sentence brings ``window`` sentences either side (across a
   chunk boundary when the neighbouring chunk is in the store); overlapping windows merge;
   a window that does not fit the token budget shrinks, down to the sentence alone;
4. **order**: the merged windows are shown in story order (document, then position), so the
   reader meets events in the order they happen.

Positions come from the chunks' character spans in the store (``meta["char_start"]``); a chunk
without one (a test fake, an old store) is read on its own, without neighbours.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from mindscape.memory.sentence_split import split_sentences
from mindscape.reasoners.rankers import Candidate, FusedRanker, Ranker
from mindscape.state import EvidenceItem

FOCUS_TOKENS = 600
"""Default budget of the focused set, in cl100k tokens (the measured sweet spot: 330–600)."""
FOCUS_WINDOW = 2
"""Default neighbours read either side of a chosen sentence."""


class ChunkSource(Protocol):
    """Where the source chunks live: by id, and their neighbours in the document."""

    def chunk(self, chunk_id: str) -> Any | None:
        """The chunk unit (``text``, ``doc_id``, ``order``, ``meta``) or None."""
        ...

    def neighbours(self, chunk_id: str) -> list[Any]:
        """The chunks just before and after it in its document (zero to two)."""
        ...


class ViewChunks:
    """A :class:`ChunkSource` over the store's veridical layer (sorted by document, order)."""

    def __init__(self, view: Any) -> None:
        self.units = view.units
        self.row_of: dict[str, int] = view.row_of

    def chunk(self, chunk_id: str) -> Any | None:
        row = self.row_of.get(chunk_id)
        return None if row is None else self.units[row]

    def neighbours(self, chunk_id: str) -> list[Any]:
        row = self.row_of.get(chunk_id)
        if row is None:
            return []
        doc = self.units[row].doc_id
        near = [self.units[r] for r in (row - 1, row + 1) if 0 <= r < len(self.units)]
        return [u for u in near if u.doc_id == doc]


@dataclass
class _Sentence:
    key: tuple[str, int]
    """(document key, absolute start): its place in the story."""
    end: int
    text: str
    chunk_id: str
    order: int
    """Its chunk's position in the document (adjacent sentences are at most one chunk apart)."""
    rank: int | None = None
    """Retrieval rank of its chunk among the hits; None for a neighbour-only chunk."""
    item: EvidenceItem | None = None


def _sentences_of(chunk_id: str, text: str, doc_id: str, order: int, start: Any) -> list[_Sentence]:
    """The chunk's sentences with absolute positions (chunk-local without a char span)."""
    doc_key, base = (doc_id, int(start)) if isinstance(start, int) else (chunk_id, 0)
    return [
        _Sentence((doc_key, base + s), base + e, " ".join(text[s:e].split()), chunk_id, order)
        for s, e in split_sentences(text)
        if text[s:e].strip()
    ]


def _table(
    hits: list[EvidenceItem], chunks: ChunkSource | None
) -> tuple[list[_Sentence], list[int]]:
    """Every sentence of the hit chunks and their neighbours, in story order, and the
    positions of the candidates (sentences of hit chunks) in that order."""
    by_key: dict[tuple[str, int], _Sentence] = {}
    for rank, item in enumerate(hits):
        cid = item["unit_id"]
        unit = chunks.chunk(cid) if chunks is not None else None
        if unit is None:
            sents = _sentences_of(cid, item["text"], item["doc_id"], 0, None)
            near: list[Any] = []
        else:
            start = unit.meta.get("char_start")
            sents = _sentences_of(cid, unit.text, unit.doc_id, unit.order, start)
            near = chunks.neighbours(cid) if chunks is not None and start is not None else []
        for s in sents:
            have = by_key.get(s.key)
            if have is None or have.rank is None:
                s.rank, s.item = rank, item
                by_key[s.key] = s
        for u in near:
            for s in _sentences_of(u.id, u.text, u.doc_id, u.order, u.meta.get("char_start")):
                by_key.setdefault(s.key, s)
    table: list[_Sentence] = []
    kept: dict[tuple[str, str], _Sentence] = {}
    for k in sorted(by_key):  # one copy of a sentence split twice (chunk overlaps)
        s = by_key[k]
        twin = kept.get((k[0], s.text))
        if twin is None or k[1] - twin.key[1] > len(s.text) + 8:  # a refrain, not a twin
            kept[(k[0], s.text)] = s
            table.append(s)
        elif twin.rank is None and s.rank is not None:
            twin.rank, twin.item = s.rank, s.item
    return table, [n for n, s in enumerate(table) if s.rank is not None]


def _adjacent(a: _Sentence, b: _Sentence) -> bool:
    """Whether ``b`` directly follows ``a`` in the story (same document, near chunks)."""
    return a.key[0] == b.key[0] and abs(a.order - b.order) <= 1


def _candidate(table: list[_Sentence], n: int, cosine: float | None) -> Candidate:
    """The candidate at position ``n`` with its story neighbours (up to two either side)."""
    s = table[n]
    before = [table[p].text for p in _grow(table, n, 2, 0) if p != n]
    after = [table[p].text for p in _grow(table, n, 0, 2) if p != n]
    return Candidate(
        text=s.text,
        chunk_rank=s.rank or 0,
        before=tuple(before),
        after=tuple(after),
        cosine=cosine,
        doc_id=s.key[0],
        start=s.key[1],
        end=s.end,
    )


@dataclass
class Pool:
    """The focus candidates of one attempt: the sentence table (candidates and their
    neighbours, in story order) and the candidates' positions in it."""

    table: list[_Sentence]
    positions: list[int]
    candidates: list[Candidate]


def candidates(
    question: str,
    hits: Sequence[EvidenceItem],
    *,
    chunks: ChunkSource | None = None,
    embed: Callable[[str, list[str]], np.ndarray] | None = None,
    seen: Sequence[str] = (),
) -> Pool:
    """The focus candidates for ``question``: the sentences of the veridical ``hits`` that
    earlier attempts did not read (``seen``), with their cosines when ``embed`` is given."""
    chunk_hits = [h for h in hits if h["layer"] == "veridical"]
    table, cands = _table(chunk_hits, chunks)
    read = " ".join(" ".join(t.split()) for t in seen)
    cands = [n for n in cands if table[n].text not in read]
    cos: list[float | None] = [None] * len(cands)
    if embed is not None and cands:
        cos = [float(x) for x in np.asarray(embed(question, [table[n].text for n in cands]))]
    return Pool(table, cands, [_candidate(table, n, c) for n, c in zip(cands, cos, strict=True)])


def _grow(table: list[_Sentence], n: int, before: int, after: int) -> list[int]:
    """Positions from ``before`` sentences before ``n`` to ``after`` after it, stopping at
    a gap in the story."""
    lo = hi = n
    while lo > 0 and n - lo < before and _adjacent(table[lo - 1], table[lo]):
        lo -= 1
    while hi + 1 < len(table) and hi - n < after and _adjacent(table[hi], table[hi + 1]):
        hi += 1
    return list(range(lo, hi + 1))


def _shrinking(window: int) -> list[tuple[int, int]]:
    """Windows to try, widest first; the sentences before go first, since in a story what
    answers a question tends to follow the sentence that matches it."""
    return [(b, window) for b in range(window, -1, -1)] + [
        (0, a) for a in range(window - 1, -1, -1)
    ]


def focus(
    question: str,
    hits: Sequence[EvidenceItem],
    *,
    budget: int = FOCUS_TOKENS,
    window: int = FOCUS_WINDOW,
    chunks: ChunkSource | None = None,
    embed: Callable[[str, list[str]], np.ndarray] | None = None,
    count: Callable[[str], int],
    seen: Sequence[str] = (),
    ranker: Ranker | None = None,
) -> list[EvidenceItem]:
    """The focused passages for ``question`` from the retrieved ``hits``, in story order.

    Args:
        hits: evidence items in retrieval order; only veridical ones (source chunks) are read.
        budget: most tokens of the whole set.
        window: neighbours read either side of a chosen sentence.
        chunks: the store's chunks (positions and neighbours); None reads each hit alone.
        embed: ``(question, sentences) -> cosines``; None ranks by BM25 and chunk rank only.
        count: tokens of a text.
        seen: texts read by earlier attempts; their sentences are not candidates again.
        ranker: orders the candidates (:mod:`mindscape.reasoners.rankers`); default fused.

    Returns:
        One evidence item per merged window: ``unit_id`` and ``chunk_ids`` name the source
        chunks it comes from, ``score`` is its best sentence's score.
    """
    pool = candidates(question, hits, chunks=chunks, embed=embed, seen=seen)
    return select(pool, rank(pool, question, ranker), budget=budget, window=window, count=count)


def rank(pool: Pool, question: str, ranker: Ranker | None = None) -> list[tuple[int, float]]:
    """The pool's table positions with their scores, best first (ties: story order)."""
    scores = (ranker or FusedRanker()).scores(question, pool.candidates)
    return sorted(zip(pool.positions, scores, strict=True), key=lambda kv: (-kv[1], kv[0]))


def select(
    pool: Pool,
    ranked: list[tuple[int, float]],
    *,
    budget: int = FOCUS_TOKENS,
    window: int = FOCUS_WINDOW,
    count: Callable[[str], int],
) -> list[EvidenceItem]:
    """Windows around the ranked sentences, best first, while they fit ``budget``; merged
    and returned in story order."""
    table = pool.table
    if not ranked:
        return []
    tokens = [count(s.text) + 1 for s in table]
    score = dict(ranked)
    chosen: set[int] = set()
    used = 0
    for n, _ in ranked:
        if n in chosen:
            continue
        for before, after in _shrinking(window):
            new = [p for p in _grow(table, n, before, after) if p not in chosen]
            cost = sum(tokens[p] for p in new)
            if used + cost <= budget:
                chosen.update(new)
                used += cost
                break
    return _passages(table, sorted(chosen), score, tokens)


def best_windows(passages: list[EvidenceItem], n: int) -> list[EvidenceItem]:
    """The ``n`` focused windows with the best scores, the best first (all of them, in their
    story order, when ``n`` is 0). The 1.5B reader answers as well from the two best windows
    as from all of them, for a quarter to a half fewer input tokens (docs/agent.md)."""
    return sorted(passages, key=lambda p: -p["score"])[:n] if n else passages


def _passages(
    table: list[_Sentence], chosen: list[int], score: dict[int, float], tokens: list[int]
) -> list[EvidenceItem]:
    """Runs of consecutive chosen sentences as evidence items."""
    runs: list[list[int]] = []
    for p in chosen:
        if runs and runs[-1][-1] == p - 1 and _adjacent(table[p - 1], table[p]):
            runs[-1].append(p)
        else:
            runs.append([p])
    out: list[EvidenceItem] = []
    for run in runs:
        sents = [table[p] for p in run]
        best = max(run, key=lambda p: score.get(p, 0.0))
        ref = table[best].item or next((s.item for s in sents if s.item), None)
        chunk_ids = list(dict.fromkeys(s.chunk_id for s in sents))
        text = " ".join(s.text for s in sents)
        out.append(
            EvidenceItem(
                unit_id=chunk_ids[0],
                layer="veridical",
                doc_id=ref["doc_id"] if ref else sents[0].key[0],
                chunk_ids=chunk_ids,
                text=text,
                score=score.get(best, 0.0),
                score_query=ref["score_query"] if ref else 0.0,
                score_signature=ref["score_signature"] if ref else 0.0,
                tokens=sum(tokens[p] for p in run),
                round=ref["round"] if ref else 0,
                probe=ref["probe"] if ref else "",
            )
        )
    return out
