"""Build the layered memory of a document into a store.

Stages, each with its own progress bar: chunk → embed chunks (and their sentences) →
episodic sessions → semantic tree → MoM outline (with an LLM, N candidate memories per
section and one chosen by an evaluator model) → (triples, with an LLM) → embed units →
write. The indexer orchestrates; each layer has its builder, a function from the document's
chunks to its units: :mod:`~mindscape.memory.build.episodic`,
:mod:`~mindscape.memory.build.raptor`, :mod:`~mindscape.memory.build.outline`,
:mod:`~mindscape.memory.build.triples`, over :mod:`~mindscape.memory.build.document` (the
document, its chunks as veridical units, and its summariser) and
:mod:`~mindscape.memory.embed_cache`. With an LLM, :attr:`IndexConfig.llm_parts` says which
parts it writes (episodic, semantic, outline, triples; default all); the others are built as
without one. Every embedding and LLM output is cached by content hash in the store's cache as
it is produced, so an unchanged document is skipped, an interrupted run resumes where it
stopped, and adding a document touches only that document.

Each chunk also gets a second embedding in its document's context (the title, or the doc id
where there is none, before the chunk: :func:`~mindscape.memory.embed_cache.in_context`).
It is not a layer: it stays in the cache, and the manifest's ``doc_context`` names the
context it was made with, from which retrieval finds it (:mod:`~mindscape.memory.retrieval.scope`).
A document indexed before there were such vectors, or whose title changed, is not rebuilt:
the next ``index`` of it embeds only these vectors (see :meth:`Indexer.index`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from mindscape.embeddings import embedder_id
from mindscape.memory.cache import content_key
from mindscape.memory.build.chunking import BLOCK_CHARS, Chunk, iter_chunks
from mindscape.memory.embed_cache import EmbedCache, EmbedStats, in_context
from mindscape.memory.build.config import (
    LLM_PARTS,
    PART_GROUPS,
    IndexConfig,
    ordered_parts,
    parse_llm_parts,
)
from mindscape.memory.build.document import DocText, Summarizer, doc_text, veridical_units
from mindscape.memory.build.episodic import episodic_units
from mindscape.memory.build.outline import outline_units
from mindscape.memory.build.raptor import raptor_units
from mindscape.memory.build.triples import chunk_triples
from mindscape.memory.mom.paths import CachedEvaluator, Evaluator, default_evaluator
from mindscape.memory.store import MemoryStore
from mindscape.memory.types import LAYERS, Unit
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


@dataclass
class IndexReport:
    """What indexing one document did."""

    doc_id: str
    skipped: bool = False
    tokens: int = 0
    layers: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    embedded: int = 0
    """Texts embedded by the model in this run."""
    embed_cached: int = 0
    """Texts whose embedding came from the cache."""
    embed_seconds: float = 0.0
    """Time spent inside the embedding model."""
    peak_rss_mb: int = 0
    """The process's peak resident memory so far, in MB (0 where the OS does not say)."""

    def add_embedding(self, stats: EmbedStats) -> None:
        """Count what an embedding pass did (texts embedded, from the cache, model seconds)."""
        self.embedded += stats.embedded
        self.embed_cached += stats.cached
        self.embed_seconds += stats.seconds


@dataclass
class BuiltDoc:
    """A document's units and vectors, built but not yet written (:meth:`Indexer.commit`)."""

    doc_id: str
    text: str
    title: str | None
    units: list[Unit]
    vecs: np.ndarray
    report: IndexReport


class IndexWriter:
    """The store side of indexing: whether a document is current, and writing a built one.
    A library run keeps one in the driver while its workers build (:mod:`mindscape.library`)."""

    def __init__(self, store: MemoryStore, config: IndexConfig, emb_id: str, llm_id: str) -> None:
        self.store, self.config, self.emb_id, self.llm_id = store, config, emb_id, llm_id
        self.enriches: str | None = None
        """The fingerprint of the plain index this one adds LLM summaries to (``index
        --summaries``): recorded with each document, so that plain config still finds the
        document current and does not rebuild it without its summaries."""

    @property
    def fingerprint(self) -> str:
        """The index fingerprint of this configuration, embedder and LLM."""
        return self.config.fingerprint(self.emb_id, self.llm_id)

    def is_current(self, doc_id: str, text: str) -> bool:
        """True when `doc_id` holds exactly this text, indexed with this configuration."""
        return is_current(self.store, doc_id, text, self.fingerprint)

    def skip_report(self, doc_id: str, text: str) -> IndexReport | None:
        """The report of a document the store already holds this way, intact; None when it
        needs building. (Its chunks may still need vectors in a new context: see
        :meth:`index`.)"""
        row = self.store.cache.doc(doc_id)
        if row is None or not (
            same_index(row, text, self.fingerprint) and vectors_intact(self.store, doc_id, row)
        ):
            return None
        return IndexReport(
            doc_id, skipped=True, tokens=row.get("tokens", 0), layers=row.get("layers", {})
        )

    def needs_context(self, doc_id: str, title: str | None) -> bool:
        """Whether the document's chunks have no vectors in this title's context yet (indexed
        before there were any, or under another title)."""
        row = self.store.cache.doc(doc_id) or {}
        return row.get("doc_context") != doc_context(doc_id, title)

    def begin(self, doc_id: str, text: str, title: str | None) -> None:
        """Claim the store for this embedder, drop the document's old units and mark it
        ``indexing`` in the manifest (a run killed before :meth:`commit` redoes it)."""
        self.store.claim_embedder(self.emb_id, doc_id=doc_id)  # before anything is deleted
        if self.store.cache.doc(doc_id) is not None:
            self.store.delete_doc(doc_id)
        self.store.cache.set_doc(
            doc_id, content_key(text), self.fingerprint, "indexing", title=title
        )

    def commit(self, built: BuiltDoc, *, started: float | None = None) -> IndexReport:
        """Write a built document's units and vectors and mark it done in the manifest.
        `started` (a ``perf_counter`` time) makes the report's seconds the whole run's."""
        report, units = built.report, built.units
        with self._stage(report, "write"):
            self.store.upsert(units, built.vecs)
        report.layers = {layer: sum(u.layer == layer for u in units) for layer in LAYERS}
        if started is not None:
            report.seconds = time.perf_counter() - started
        report.peak_rss_mb = max(report.peak_rss_mb, peak_rss_mb())
        chosen = {u.order: u.meta["mom"]["chosen"] for u in units if "mom" in u.meta}
        self.store.cache.set_doc(
            built.doc_id,
            content_key(built.text),
            self.fingerprint,
            "done",
            title=built.title,
            tokens=report.tokens,
            layers=report.layers,
            doc_context=doc_context(built.doc_id, built.title),
            **({"enriches": self.enriches} if self.enriches else {}),
            **({"mom_chosen": [chosen[o] for o in sorted(chosen)]} if chosen else {}),
        )
        return report

    def _stage(self, report: IndexReport, name: str) -> _Timer:
        return _Timer(report.stage_seconds, name)


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


def doc_context(doc_id: str, title: str | None) -> str:
    """What a document's chunks are embedded in context with: its title, else its doc id."""
    return title.strip() if title and title.strip() else doc_id


def vectors_intact(store: MemoryStore, doc_id: str, row: dict[str, Any]) -> bool:
    """Whether every layer holds the units the manifest lists for `doc_id` (a store whose
    vectors were lost is rebuilt from the cache instead of skipped)."""
    listed = row.get("layers") or {}
    try:
        return all(store.count(layer, doc_id) == int(listed.get(layer, 0)) for layer in LAYERS)
    except Exception:  # noqa: BLE001 - an unreadable collection counts as lost
        return False


def peak_rss_mb() -> int:
    """This process's peak resident set size in MB (0 where `resource` is missing)."""
    try:
        import resource
    except ImportError:  # Windows
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak // (1 << 20) if sys.platform == "darwin" else peak // 1024)


def is_current(store: MemoryStore, doc_id: str, text: str, fingerprint: str) -> bool:
    """Whether the store's manifest says `doc_id` is done with this text and fingerprint, its
    chunks embedded in context too (a document indexed before there were such vectors is
    not: :meth:`Indexer.index` adds them, and nothing else)."""
    row = store.cache.doc(doc_id)
    return bool(same_index(row, text, fingerprint) and row and row.get("doc_context"))


def same_index(row: dict[str, Any] | None, text: str, fingerprint: str) -> bool:
    """Whether a manifest row is done with this text and fingerprint (or with LLM summaries
    added to an index of that fingerprint: :attr:`IndexWriter.enriches`)."""
    return bool(
        row
        and row["status"] == "done"
        and row["content_hash"] == content_key(text)
        and fingerprint in (row["config_hash"], row.get("enriches"))
    )


class _Timer:
    def __init__(self, sink: dict[str, float], name: str) -> None:
        self.sink, self.name = sink, name

    def __enter__(self) -> _Timer:
        self.t = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sink[self.name] = self.sink.get(self.name, 0.0) + time.perf_counter() - self.t


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
        with ix._stage(self.report, "chunk"):
            chunks = self.chunks()
        with ix._stage(self.report, "embed_chunks"):
            arrays = self.embed.chunks(chunks, f"{self.doc_id} · embed chunks")
            doc, chunk_vecs = doc_text(
                self.doc_id, self.text, chunks, arrays, self.embed.dim, ix.counter
            )
        with ix._stage(self.report, "embed_context"):
            # cached only: retrieval reads them back by content (memory/retrieval/scope.py)
            self.embed.texts(
                [in_context(self.context, c.text) for c in chunks],
                f"{self.doc_id} · embed chunks in context",
            )
        window_of, units = self.layers(doc, chunk_vecs)
        triples: dict[int, list[list[str]]] = {}
        llm = self.llm_for("triples")
        if llm is not None and self.cfg.triples:
            with ix._stage(self.report, "triples"):
                triples = chunk_triples(doc, llm, bar=ix._bar)
        chunk_units = veridical_units(doc, window_of, triples)
        with ix._stage(self.report, "embed_units"):
            unit_vecs = self.embed.texts([u.text for u in units], "embed summaries")
        self.report.add_embedding(self.stats)
        dim = chunk_vecs.shape[1] if len(chunk_vecs) else unit_vecs.shape[1]
        all_vecs = np.vstack([chunk_vecs.reshape(-1, dim), unit_vecs.reshape(-1, dim)])
        return chunk_units + units, all_vecs

    def layers(self, doc: DocText, chunk_vecs: np.ndarray) -> tuple[dict[int, str], list[Unit]]:
        """The episodic sessions, the semantic tree and the outline: (each chunk's session
        id, the units in that order)."""
        ix, cfg, bar = self.ix, self.cfg, self.ix._bar
        with ix._stage(self.report, "episodic"):
            episodic, window_of = episodic_units(
                doc,
                Summarizer(
                    doc,
                    self.llm_for("episodic"),
                    ix.counter,
                    input_tokens=cfg.summary_input_tokens,
                ),
                window=cfg.window,
                summary_tokens=cfg.summary_tokens,
                bar=bar,
            )
        with ix._stage(self.report, "semantic"):
            semantic = raptor_units(
                doc,
                chunk_vecs,
                Summarizer(
                    doc,
                    self.llm_for("semantic"),
                    ix.counter,
                    input_tokens=cfg.summary_input_tokens,
                ),
                self.embed.texts,
                params=cfg.cluster,
                summary_tokens=cfg.summary_tokens,
                bar=bar,
            )
        with ix._stage(self.report, "outline"):
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
