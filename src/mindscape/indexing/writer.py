"""The store side of indexing: whether a document is current, and writing a built one.

:class:`IndexWriter` decides from the store's manifest whether a document is already indexed
this way (same text, same fingerprint, every layer's vectors intact), claims the store before
a rebuild and writes a built document's units and vectors with its manifest row. The
:class:`~mindscape.indexing.indexer.Indexer` builds on it; a library run keeps a writer in
the driver while its workers build (:mod:`mindscape.indexing.library`).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mindscape.indexing.config import IndexConfig
from mindscape.indexing.embed_cache import EmbedStats
from mindscape.memory.cache import content_key
from mindscape.memory.store import MemoryStore
from mindscape.memory.types import LAYERS, Unit

__all__ = [
    "BuiltDoc",
    "IndexReport",
    "IndexWriter",
    "StageTimer",
    "doc_context",
    "is_current",
    "peak_rss_mb",
    "same_index",
    "vectors_intact",
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
    A library run keeps one in the driver while its workers build (:mod:`mindscape.indexing.library`)."""

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
        :meth:`Indexer.index <mindscape.indexing.indexer.Indexer.index>`.)"""
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
        with self.stage(report, "write"):
            self.store.upsert(units, built.vecs)
        report.layers = {layer: sum(u.layer == layer for u in units) for layer in LAYERS}
        if started is not None:
            report.seconds = time.perf_counter() - started
        report.peak_rss_mb = max(report.peak_rss_mb, peak_rss_mb())
        chosen = {u.order: u.meta["mom"]["chosen"] for u in units if "mom" in u.meta}
        unread = {
            u.order: sum(u.meta["mom"].get("unread_breaks", [])) for u in units if "mom" in u.meta
        }
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
            **({"mom_unread_breaks": sum(unread.values())} if any(unread.values()) else {}),
        )
        return report

    def stage(self, report: IndexReport, name: str) -> StageTimer:
        return StageTimer(report.stage_seconds, name)


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


class StageTimer:
    """Adds the seconds spent inside a ``with`` block to ``sink[name]``."""

    def __init__(self, sink: dict[str, float], name: str) -> None:
        self.sink, self.name = sink, name

    def __enter__(self) -> StageTimer:
        self.t = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sink[self.name] = self.sink.get(self.name, 0.0) + time.perf_counter() - self.t
