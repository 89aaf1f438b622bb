"""Build the layered memory of a document into a store.

Stages, each with its own progress bar: chunk → embed chunks (and their sentences) →
episodic sessions → semantic tree → MoM outline (with an LLM, N candidate memories per
section and one chosen by an evaluator model) → (triples, with an LLM) → embed units →
write. The indexer orchestrates; each layer has its builder, a function from the document's
chunks to its units: :mod:`~mindscape.indexing.episodic`,
:mod:`~mindscape.indexing.raptor`, :mod:`~mindscape.indexing.outline`,
:mod:`~mindscape.indexing.triples`, over :mod:`~mindscape.indexing.document` (the
document, its chunks as veridical units, and its summariser) and
:mod:`~mindscape.indexing.embed_cache`; :mod:`~mindscape.indexing.writer` is the store
side (is a document current, write a built one). With an LLM, :attr:`IndexConfig.llm_parts`
says which parts it writes (episodic, semantic, outline, triples; default all); the others are built as
without one. Every embedding and LLM output is cached by content hash in the store's cache as
it is produced, so an unchanged document is skipped, an interrupted run resumes where it
stopped, and adding a document touches only that document.

Each chunk also gets a second embedding in its document's context (the title, or the doc id
where there is none, before the chunk: :func:`~mindscape.memory.cache.in_context`).
It is not a layer: it stays in the cache, and the manifest's ``doc_context`` names the
context it was made with, from which retrieval finds it (:mod:`~mindscape.memory.scope`).
A document indexed before there were such vectors, or whose title changed, is not rebuilt:
the next ``index`` of it embeds only these vectors (see :meth:`Indexer.index`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from mindscape.embeddings import embedder_id
from mindscape.indexing.chunking import BLOCK_CHARS, Chunk, iter_chunks
from mindscape.indexing.config import (
    LLM_PARTS,
    PART_GROUPS,
    IndexConfig,
    ordered_parts,
    parse_llm_parts,
)
from mindscape.indexing.document import DocText, Summarizer, doc_text, veridical_units
from mindscape.indexing.embed_cache import EmbedCache, EmbedStats
from mindscape.indexing.episodic import episodic_units
from mindscape.indexing.mom.paths import CachedEvaluator, Evaluator, default_evaluator
from mindscape.indexing.outline import outline_units
from mindscape.indexing.raptor import raptor_units
from mindscape.indexing.triples import chunk_triples
from mindscape.indexing.writer import (
    BuiltDoc,
    IndexReport,
    IndexWriter,
    doc_context,
    peak_rss_mb,
)
from mindscape.memory.cache import in_context
from mindscape.memory.store import MemoryStore
from mindscape.memory.types import Unit
from mindscape.tokens import TokenCounter, default_counter

__all__ = [
    "LLM_PARTS",
    "PART_GROUPS",
    "BuiltDoc",
    "IndexConfig",
    "IndexReport",
    "IndexWriter",
    "Indexer",
    "ordered_parts",
    "parse_llm_parts",
]


class Indexer(IndexWriter):
    """Indexes documents into a `MemoryStore` with an embedder and an optional LLM."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embeddings,
        *,
        llm: Any = None,
        config: IndexConfig | None = None,
        counter: TokenCounter | None = None,
        progress: bool = True,
        evaluator: Evaluator | None = None,
    ) -> None:
        llm_id = getattr(llm, "model_id", "offline") if llm is not None else "offline"
        super().__init__(store, config or IndexConfig(), embedder_id(embedder), llm_id)
        self.embedder = embedder
        self.llm = llm
        self.evaluator: Evaluator | None = None
        """What chooses among MoM paths, its scores cached in the store (only with an LLM that
        writes the outline and more than one path; default: the local model in process,
        loaded here, before any document is touched)."""
        if llm is not None and self.config.llm_writes("outline") and self.config.mom_paths > 1:
            self.evaluator = CachedEvaluator(evaluator or default_evaluator(), store.cache)
        self.counter = counter or default_counter()
        self.progress = progress

    def index(self, doc_id: str, text: str, *, title: str | None = None) -> IndexReport:
        """Index one document (skipped when the same text was already indexed the same way).

        The store keeps the document's previous index, readable, until the new one is built:
        a run stopped while building leaves it as it was (and the cache keeps what was built).

        A skipped document whose chunks have no vectors in this context yet (indexed before
        there were any, or under another title) gets them now, and nothing else."""
        t0 = time.perf_counter()
        report = self.skip_report(doc_id, text)
        if report is not None:
            if self.needs_context(doc_id, title):
                row = self.store.cache.doc(doc_id) or {}
                self._add_context(row, doc_context(doc_id, title), title, report)
            report.seconds = time.perf_counter() - t0
            return report
        self.store.check_embedder(self.emb_id, besides=doc_id)  # before any work
        built = self.build(doc_id, text, title=title)  # the old index serves until it is built
        self.begin(doc_id, text, title)
        return self.commit(built, started=t0)

    def build(self, doc_id: str, text: str, *, title: str | None = None) -> BuiltDoc:
        """Every unit of the document and its vectors, through the store's cache; nothing is
        written to the vector store (:meth:`commit` does that)."""
        report = IndexReport(doc_id=doc_id)
        t0 = time.perf_counter()
        run = _DocRun(self, doc_id, text, report, doc_context(doc_id, title))
        units, vecs = run.build()
        report.tokens = self.counter.count_long(text)
        report.seconds = time.perf_counter() - t0
        report.peak_rss_mb = peak_rss_mb()
        return BuiltDoc(doc_id, text, title, units, vecs, report)

    def _add_context(
        self, row: dict[str, Any], context: str, title: str | None, report: IndexReport
    ) -> None:
        """Embed the chunks of an indexed document in `context` (through the cache) and
        record it, with `title`, in its manifest row; nothing else is touched."""
        t0 = time.perf_counter()
        doc_id = row["doc_id"]
        stats = EmbedStats()
        embed = EmbedCache(self.store, self.embedder, self.emb_id, stats, self._bar)
        chunks = self.store.view("veridical", {doc_id}).units
        embed.texts([in_context(context, u.text) for u in chunks], f"{doc_id} · embed context")
        report.add_embedding(stats)
        info = {k: v for k, v in row.items() if k not in _ROW_KEYS}
        info.update(title=title, doc_context=context)
        self.store.cache.set_doc(
            doc_id, row["content_hash"], row["config_hash"], row["status"], **info
        )
        report.stage_seconds["embed_context"] = time.perf_counter() - t0

    def _bar(
        self, iterable: Iterable[Any] | None, desc: str, total: int | None = None, unit: str = "it"
    ) -> Any:
        """A progress bar over `iterable` (or a manual one for None); the iterable itself when quiet."""
        if not self.progress:
            return iterable
        from tqdm import tqdm

        return tqdm(
            iterable,
            desc=desc,
            total=total,
            file=sys.stderr,
            leave=False,
            unit=unit,
            unit_scale=unit != "it",
        )


_ROW_KEYS = ("doc_id", "content_hash", "config_hash", "status")
"""The manifest row's own columns (the rest of a row is its info)."""


class _DocRun:
    """The work of indexing one document: the layer builders, in order, over its chunks."""

    def __init__(
        self, ix: Indexer, doc_id: str, text: str, report: IndexReport, context: str
    ) -> None:
        self.ix, self.doc_id, self.text, self.report = ix, doc_id, text, report
        self.context = context
        self.cfg = ix.config
        self.stats = EmbedStats()
        self.embed = EmbedCache(ix.store, ix.embedder, ix.emb_id, self.stats, ix._bar)

    def llm_for(self, part: str) -> Any:
        """The index LLM when it writes `part`, else None (the part is built offline)."""
        return self.ix.llm if self.cfg.llm_writes(part) else None

    def summarizer(self, doc: DocText, part: str) -> Summarizer:
        """What writes `part`'s summaries (episodic or semantic): the LLM or extractive."""
        cfg = self.cfg
        return Summarizer(
            doc,
            self.llm_for(part),
            self.ix.counter,
            budget=cfg.summary_tokens,
            input_tokens=cfg.summary_input_tokens,
        )

    def chunks(self) -> list[Chunk]:
        """The document's chunks, streamed block by block (a progress bar for long texts)."""
        cfg, text = self.cfg, self.text
        long_text = len(text) > 4 * BLOCK_CHARS
        bar = self.ix._bar(None, f"{self.doc_id} · chunk", len(text), "char") if long_text else None
        tick = bar.update if bar is not None else None
        chunks = list(
            iter_chunks(text, self.ix.counter, cfg.chunk_size, cfg.chunk_overlap, on_progress=tick)
        )
        if bar is not None:
            bar.close()
        return chunks

    def build(self) -> tuple[list[Unit], np.ndarray]:
        """Every unit of the document (chunks first) and their vectors, row-aligned."""
        ix = self.ix
        with ix.stage(self.report, "chunk"):
            chunks = self.chunks()
        with ix.stage(self.report, "embed_chunks"):
            arrays = self.embed.chunks(chunks, f"{self.doc_id} · embed chunks")
            doc, chunk_vecs = doc_text(
                self.doc_id, self.text, chunks, arrays, self.embed.dim, ix.counter
            )
        with ix.stage(self.report, "embed_context"):
            # cached only: retrieval reads them back by content (memory/scope.py)
            self.embed.texts(
                [in_context(self.context, c.text) for c in chunks],
                f"{self.doc_id} · embed chunks in context",
            )
        window_of, units = self.layers(doc, chunk_vecs)
        triples: dict[int, list[list[str]]] = {}
        llm = self.llm_for("triples")
        if llm is not None and self.cfg.triples:
            with ix.stage(self.report, "triples"):
                triples = chunk_triples(doc, llm, bar=ix._bar)
        chunk_units = veridical_units(doc, window_of, triples)
        with ix.stage(self.report, "embed_units"):
            unit_vecs = self.embed.texts([u.text for u in units], "embed summaries")
        self.report.add_embedding(self.stats)
        dim = chunk_vecs.shape[1] if len(chunk_vecs) else unit_vecs.shape[1]
        all_vecs = np.vstack([chunk_vecs.reshape(-1, dim), unit_vecs.reshape(-1, dim)])
        return chunk_units + units, all_vecs

    def layers(self, doc: DocText, chunk_vecs: np.ndarray) -> tuple[dict[int, str], list[Unit]]:
        """The episodic sessions, the semantic tree and the outline: (each chunk's session
        id, the units in that order)."""
        ix, cfg, bar = self.ix, self.cfg, self.ix._bar
        with ix.stage(self.report, "episodic"):
            episodic, window_of = episodic_units(
                doc, self.summarizer(doc, "episodic"), window=cfg.window, bar=bar
            )
        with ix.stage(self.report, "semantic"):
            semantic = raptor_units(
                doc,
                chunk_vecs,
                self.summarizer(doc, "semantic"),
                self.embed.texts,
                params=cfg.cluster,
                bar=bar,
            )
        with ix.stage(self.report, "outline"):
            outline = outline_units(
                doc,
                self.llm_for("outline"),
                ix.counter,
                window=cfg.window,
                max_section_chunks=cfg.max_section_chunks,
                core_tokens=cfg.core_tokens,
                bar=bar,
                paths=cfg.mom_paths,
                evaluator=ix.evaluator,
                k=cfg.mom_k,
            )
        return window_of, [*episodic, *semantic, *outline]
