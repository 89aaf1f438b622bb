"""The document being indexed, as every layer builder sees it, and the summariser they share.

A :class:`DocText` holds a document's chunks and its sentence bank (each sentence once, with
the vector pooled from its chunk's embedding pass); its chunks are the veridical layer
(:func:`veridical_units`). A :class:`Summarizer` writes a summary of some sentences:
extractive offline (the picked sentences), else one LLM call over the passages.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mindscape import prompts
from mindscape.indexing.chunking import Chunk
from mindscape.indexing.summarize import SentenceBank, extractive_summary
from mindscape.memory.types import Layer, Unit
from mindscape.prompts import summarize as summary_prompt
from mindscape.tokens import TokenCounter

__all__ = [
    "SUMMARY_OUTPUT_FACTOR",
    "SUMMARY_PASSAGE_TOKENS",
    "DocText",
    "Summarizer",
    "doc_text",
    "fit_passages",
    "summary_words",
    "veridical_units",
]


@dataclass
class DocText:
    """One document's text, chunks and sentences."""

    doc_id: str
    text: str
    chunks: list[Chunk]
    chunk_ids: list[str]
    """``<doc_id>:c<n>`` per chunk."""
    chunk_sents: list[list[int]]
    """Per chunk: the ids of its sentences in :attr:`bank`."""
    bank: SentenceBank

    def sents_of(self, chunk_indices: Iterable[int]) -> list[int]:
        """The sentence ids of some chunks, each once, in source order."""
        return sorted({s for i in chunk_indices for s in self.chunk_sents[i]})

    def chunks_in(self, start: int, end: int) -> list[int]:
        """Indices of the chunks overlapping the character range ``[start, end)``.

        Chunks are in source order (starts and ends both increase), so two binary searches
        find the range: a book's thousands of sections stay linear, not quadratic."""
        first = bisect.bisect_right(self.chunks, start, key=lambda c: c.char_end)
        last = bisect.bisect_left(self.chunks, end, key=lambda c: c.char_start)
        return [c.index for c in self.chunks[first:last]]

    def unit(
        self, tag: str, layer: Layer, text: str, chunk_indices: Iterable[int], **fields: Any
    ) -> Unit:
        """A unit of this document over some of its chunks: id ``<doc_id>:<tag>``, and the
        ids of those chunks; `fields` are the rest of the :class:`Unit` (kind, order, ...)."""
        chunk_ids = [self.chunk_ids[i] for i in chunk_indices]
        return Unit(f"{self.doc_id}:{tag}", self.doc_id, layer, text, chunk_ids, **fields)


def doc_text(
    doc_id: str,
    text: str,
    chunks: list[Chunk],
    arrays: Iterable[np.ndarray],
    dim: int,
    counter: TokenCounter,
) -> tuple[DocText, np.ndarray]:
    """The document with its sentence bank (deduplicated across overlapping chunks), and
    the chunk vectors.

    ``arrays`` yields chunk i's embedding pass in order: row 0 the chunk, then its sentences.
    It is read once, so the arrays of a long book need not all be in memory together.
    """
    sid_of: dict[tuple[int, int], int] = {}
    texts: list[str] = []
    most = sum(len(c.sentences) for c in chunks)
    matrix = np.zeros((most, dim), np.float32)
    chunk_vecs = np.zeros((len(chunks), dim), np.float32)
    chunk_sents: list[list[int]] = []
    for c, arr in zip(chunks, arrays, strict=True):
        chunk_vecs[c.index] = arr[0]
        ids = []
        for j, span in enumerate(c.sentences):
            if span not in sid_of:
                sid_of[span] = len(texts)
                matrix[len(texts)] = arr[1 + j]
                texts.append(text[span[0] : span[1]])
            ids.append(sid_of[span])
        chunk_sents.append(ids)
    tokens = np.asarray(counter.count_many(texts) if texts else [], dtype=np.int64)
    chunk_ids = [f"{doc_id}:c{c.index}" for c in chunks]
    bank = SentenceBank(texts, tokens, matrix[: len(texts)])
    return DocText(doc_id, text, chunks, chunk_ids, chunk_sents, bank), chunk_vecs


def veridical_units(
    doc: DocText, window_of: dict[int, str], triples: dict[int, list[list[str]]]
) -> list[Unit]:
    """The chunks as veridical units: their character span, their episodic window and (with
    an LLM) their triples in the metadata."""
    return [
        Unit(
            id=cid,
            doc_id=doc.doc_id,
            layer="veridical",
            text=c.text,
            chunk_ids=[cid],
            kind="chunk",
            order=c.index,
            meta={
                "char_start": c.char_start,
                "char_end": c.char_end,
                **({"window": window_of[c.index]} if c.index in window_of else {}),
                **({"triples": triples[c.index]} if c.index in triples else {}),
            },
        )
        for cid, c in zip(doc.chunk_ids, doc.chunks, strict=True)
    ]


SUMMARY_PASSAGE_TOKENS = 6000
"""Tokens of passages one LLM summary reads at most."""


SUMMARY_OUTPUT_FACTOR = 2
"""An LLM summary may run to this many times its token budget, no further: a small model
that does not stop (it happened on a 66K-token novel with the local model: one request ran
for 40 minutes and timed out four times) is cut off instead."""


def summary_words(budget: int) -> int:
    """The word limit an LLM summary of `budget` tokens is asked for."""
    return int(budget * 0.75)


class Summarizer:
    """Summaries for the index: extractive without an LLM, else one call per summary."""

    def __init__(
        self,
        doc: DocText,
        llm: Any,
        counter: TokenCounter,
        *,
        budget: int,
        input_tokens: int = 0,
    ) -> None:
        self.doc, self.llm, self.counter = doc, llm, counter
        self.budget = budget
        """How long a summary is, in tokens (``IndexConfig.summary_tokens``)."""
        self.input_tokens = input_tokens
        """With an LLM and above 0: what the LLM reads is the passages' most central
        sentences, this many tokens of them, instead of the passages."""

    def __call__(
        self, sent_ids: list[int], passages: list[str], template: str
    ) -> tuple[str, list[int]]:
        """(summary, the sentence ids it stands for): extractive offline (the picked ones),
        else the LLM's summary of `passages` (or of their central sentences) with `template`."""
        if self.llm is None:
            picked = extractive_summary(self.doc.bank, sent_ids, max_tokens=self.budget)
            return self.doc.bank.join(picked), picked
        if self.input_tokens and sent_ids:
            central = extractive_summary(
                self.doc.bank, sent_ids, max_tokens=self.input_tokens, max_sentences=len(sent_ids)
            )
            body = self.doc.bank.join(central)
        else:
            body = fit_passages(passages, self.counter, SUMMARY_PASSAGE_TOKENS)
        prompt = prompts.render(
            template, passages=prompts.as_data(body), max_words=summary_words(self.budget)
        )
        text = self.llm.complete(
            prompt,
            system=summary_prompt.SYSTEM,
            role="index_summary",
            max_tokens=SUMMARY_OUTPUT_FACTOR * self.budget,
        )
        return " ".join(text.split()), sent_ids


def fit_passages(passages: list[str], counter: TokenCounter, budget: int) -> str:
    """Passages joined for a prompt, each trimmed so the whole stays within `budget` tokens."""
    if not passages:
        return ""
    each = max(32, budget // len(passages))
    return "\n\n".join(counter.truncate(p, each) for p in passages)
