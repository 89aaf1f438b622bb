"""Sentence-aware chunking by cl100k tokens.

Chunks are exact slices of the source (`text[char_start:char_end]`), built from whole
sentences up to `size` tokens; consecutive chunks share up to `overlap` tokens of whole
trailing sentences. A sentence longer than `size` is cut at word boundaries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mindscape.memory.sentence_split import Span, split_sentences
from mindscape.tokens import TokenCounter


@dataclass
class Chunk:
    """A source chunk with its sentences."""

    index: int
    text: str
    char_start: int
    char_end: int
    tokens: int
    sentences: list[Span] = field(default_factory=list)
    """Absolute character spans of the chunk's sentences."""

    def local_spans(self) -> list[Span]:
        """Sentence spans relative to the chunk text."""
        return [(s - self.char_start, e - self.char_start) for s, e in self.sentences]


def chunk_text(text: str, counter: TokenCounter, size: int = 128, overlap: int = 16) -> list[Chunk]:
    """Split `text` into sentence-aligned chunks of at most `size` tokens."""
    if size <= 0:
        raise ValueError("chunk size must be positive")
    if not 0 <= overlap < size:
        raise ValueError("overlap must be in [0, size)")
    sents = _fit_sentences(text, split_sentences(text), counter, size)
    counts = counter.count_many([text[s:e] for s, e in sents])
    chunks: list[Chunk] = []
    i = 0
    while i < len(sents):
        j, total = i, 0
        while j < len(sents) and (j == i or total + counts[j] <= size):
            total += counts[j]
            j += 1
        s = sents[i][0]
        n = counter.count(text[s : sents[j - 1][1]])
        while n > size and j - 1 > i:  # joined text tokenises a little differently
            j -= 1
            n = counter.count(text[s : sents[j - 1][1]])
        e = sents[j - 1][1]
        chunks.append(Chunk(len(chunks), text[s:e], s, e, n, list(sents[i:j])))
        if j >= len(sents):
            break
        i = _overlap_start(i, j, counts, overlap)
    return chunks


def _overlap_start(i: int, j: int, counts: list[int], overlap: int) -> int:
    """First sentence of the next chunk: back off from `j` while the overlap stays in budget."""
    k, kept = j, 0
    while k - 1 > i and kept + counts[k - 1] <= overlap:
        kept += counts[k - 1]
        k -= 1
    return k


def _fit_sentences(text: str, spans: list[Span], counter: TokenCounter, size: int) -> list[Span]:
    """Cut sentences longer than `size` tokens into pieces of at most `size` tokens."""
    out: list[Span] = []
    counts = counter.count_many([text[s:e] for s, e in spans])
    for (s, e), n in zip(spans, counts, strict=True):
        if n <= size:
            out.append((s, e))
            continue
        starts = counter.token_starts(text[s:e])
        cuts = [s + starts[k] for k in range(size, len(starts), size)]
        for a, b in zip([s, *cuts], [*cuts, e], strict=True):
            if text[a:b].strip():
                out.append((a, b))
    return out
