"""Sentence-aware chunking by cl100k tokens, streamed over the text.

Chunks are exact slices of the source (`text[char_start:char_end]`), built from whole
sentences up to `size` tokens; consecutive chunks share up to `overlap` tokens of whole
trailing sentences. A sentence longer than `size` is cut at word boundaries.

:func:`iter_chunks` reads the text one block at a time: it splits a block into sentences, keeps
the last (perhaps unfinished) sentence for the next block, and emits a chunk as soon as the
sentences after it decide where it ends. Its working memory (sentence spans, counts, pending
sentences) is bounded by a few blocks, not by the book, and the chunks are the same whatever the
block size (a unit test checks this). The one exception: text with no sentence end for
:data:`MAX_SENTENCE_BLOCKS` blocks is cut at a block boundary there, where whole-text chunking
would have cut it a few tokens elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from mindscape.memory.sentence_split import Span, split_sentences
from mindscape.tokens import TokenCounter

__all__ = [
    "BLOCK_CHARS",
    "MAX_SENTENCE_BLOCKS",
    "Chunk",
    "chunk_text",
    "iter_chunks",
]

BLOCK_CHARS = 1 << 20
"""Characters read per block."""
MAX_SENTENCE_BLOCKS = 4
"""A sentence still open after this many blocks' worth of characters is closed there."""


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
    return list(iter_chunks(text, counter, size, overlap))


def iter_chunks(
    text: str,
    counter: TokenCounter,
    size: int = 128,
    overlap: int = 16,
    *,
    block_chars: int = BLOCK_CHARS,
    on_progress: Callable[[int], None] | None = None,
) -> Iterator[Chunk]:
    """The chunks of `text`, in order, produced block by block (see the module docstring).

    `on_progress(n)` is told how many more characters have been read after each block.
    """
    if size <= 0:
        raise ValueError("chunk size must be positive")
    if not 0 <= overlap < size:
        raise ValueError("overlap must be in [0, size)")
    if block_chars <= 0:
        raise ValueError("block_chars must be positive")
    packer = _Packer(text, counter, size, overlap)
    start, reach = 0, block_chars
    while start < len(text):
        end = min(len(text), start + reach)
        spans = split_sentences(text, start, end)
        last = end == len(text)
        if not last and len(spans) > 1:  # the last sentence may go on in the next block
            spans, end = spans[:-1], spans[-1][0]
        elif not last and len(spans) == 1 and reach < MAX_SENTENCE_BLOCKS * block_chars:
            reach *= 2  # one sentence so far: read further before deciding where it ends
            continue
        reach = block_chars
        yield from packer.add(*_fit_sentences(text, spans, counter, size), final=last)
        if on_progress is not None:
            on_progress(end - start)
        start = end


class _Packer:
    """Packs sentences into chunks greedily; a chunk is emitted once its end is decided."""

    def __init__(self, text: str, counter: TokenCounter, size: int, overlap: int) -> None:
        self.text, self.counter, self.size, self.overlap = text, counter, size, overlap
        self.sents: list[Span] = []
        self.counts: list[int] = []
        self.emitted = 0

    def add(self, spans: list[Span], counts: list[int], *, final: bool) -> Iterator[Chunk]:
        """The chunks whose end these sentences decide (all that remain when `final`)."""
        text = self.text
        self.sents += spans
        self.counts += counts
        sents, counts = self.sents, self.counts
        i = 0
        while i < len(sents):
            j, total = i, 0
            while j < len(sents) and (j == i or total + counts[j] <= self.size):
                total += counts[j]
                j += 1
            if j >= len(sents) and not final:
                break  # more sentences may still fit: wait for the next block
            s = sents[i][0]
            n = self.counter.count(text[s : sents[j - 1][1]])
            while n > self.size and j - 1 > i:  # joined text tokenises a little differently
                j -= 1
                n = self.counter.count(text[s : sents[j - 1][1]])
            e = sents[j - 1][1]
            yield Chunk(self.emitted, text[s:e], s, e, n, list(sents[i:j]))
            self.emitted += 1
            if j >= len(sents):
                i = len(sents)
                break
            i = _overlap_start(i, j, counts, self.overlap)
        del self.sents[:i], self.counts[:i]


def _overlap_start(i: int, j: int, counts: list[int], overlap: int) -> int:
    """First sentence of the next chunk: back off from `j` while the overlap stays in budget."""
    k, kept = j, 0
    while k - 1 > i and kept + counts[k - 1] <= overlap:
        kept += counts[k - 1]
        k -= 1
    return k


def _fit_sentences(
    text: str, spans: list[Span], counter: TokenCounter, size: int
) -> tuple[list[Span], list[int]]:
    """The sentences with their token counts, those longer than `size` tokens cut into
    pieces of at most `size` tokens."""
    out: list[Span] = []
    out_counts: list[int] = []
    counts = counter.count_many([text[s:e] for s, e in spans])
    for (s, e), n in zip(spans, counts, strict=True):
        if n <= size:
            out.append((s, e))
            out_counts.append(n)
            continue
        starts = counter.token_starts(text[s:e])
        cuts = [s + starts[k] for k in range(size, len(starts), size)]
        pieces = [(a, b) for a, b in zip([s, *cuts], [*cuts, e], strict=True) if text[a:b].strip()]
        out += pieces
        out_counts += counter.count_many([text[a:b] for a, b in pieces])
    return out, out_counts
