"""Build the layered memory of a document into a store.

Stages, each with its own progress bar: chunk → embed chunks (and their sentences) →
episodic sessions → semantic tree → MoM outline (with an LLM, N candidate memories per
section and one chosen by an evaluator model) → (triples, with an LLM) → embed units →
write. The indexer orchestrates; each layer has its builder, a function from the document's
chunks to its units: :mod:`~mindscape.memory.index_episodic`,
:mod:`~mindscape.memory.index_raptor`, :mod:`~mindscape.memory.index_outline`,
:mod:`~mindscape.memory.index_triples`, over :mod:`~mindscape.memory.index_doc` (the
document and its summariser) and :mod:`~mindscape.memory.embed_cache`. With an LLM,
:attr:`IndexConfig.llm_parts` says which parts it writes (episodic, semantic, outline,
triples; default all); the others are built as without one. Every embedding and LLM output is
cached by content hash in the store's cache as it is produced, so an unchanged document is
skipped, an interrupted run resumes where it stopped, and adding a document touches only that
document.

Each chunk also gets a second embedding in its document's context (the title, or the doc id
where there is none, before the chunk: :func:`~mindscape.memory.embed_cache.in_context`).
It is not a layer: it stays in the cache, and the manifest's ``doc_context`` names the
context it was made with, from which retrieval finds it (:mod:`~mindscape.memory.scope`).
A document indexed before there were such vectors, or whose title changed, is not rebuilt:
the next ``index`` of it embeds only these vectors (see :meth:`Indexer.index`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from mindscape.embeddings import embedder_id
from mindscape.memory.cache import content_key
from mindscape.memory.chunking import BLOCK_CHARS, Chunk, iter_chunks
from mindscape.memory.cluster import ClusterParams
from mindscape.memory.embed_cache import EmbedCache, EmbedStats, in_context
from mindscape.memory.index_doc import DocText, Summarizer, doc_text
from mindscape.memory.index_episodic import episodic_units
from mindscape.memory.index_outline import COVERAGE, outline_units
from mindscape.memory.index_raptor import raptor_units
from mindscape.memory.index_triples import chunk_triples
from mindscape.memory.mom_paths import CachedEvaluator, Evaluator, default_evaluator
from mindscape.memory.store import MemoryStore
from mindscape.memory.types import LAYERS, Unit
from mindscape.tokens import TokenCounter, default_counter

LLM_PARTS: tuple[str, ...] = ("episodic", "semantic", "outline", "triples")
"""The index parts an LLM can write (the indexer's stages, the estimate's parts): the session
summaries, the semantic tree's summaries, the MoM outline (its N paths and their scoring) and
the chunks' triples."""
PART_GROUPS: dict[str, tuple[str, ...]] = {
    "summaries": ("episodic", "semantic"),
    "all": LLM_PARTS,
}
"""Names that stand for several parts in :func:`parse_llm_parts`."""


def parse_llm_parts(spec: str) -> tuple[str, ...]:
    """The parts a comma-separated list names (``outline,triples``; ``summaries`` is episodic
    and semantic, ``all`` every part), in :data:`LLM_PARTS` order. Raises ValueError naming
    the valid names on an unknown or empty one."""
    names = [n.strip().lower() for n in spec.split(",")]
    parts: set[str] = set()
    for name in names:
        if name in PART_GROUPS:
            parts.update(PART_GROUPS[name])
        elif name in LLM_PARTS:
            parts.add(name)
        else:
            valid = ", ".join([*LLM_PARTS, *PART_GROUPS])
            raise ValueError(f"unknown index LLM part {name!r} in {spec!r}; valid: {valid}")
    return tuple(p for p in LLM_PARTS if p in parts)


def ordered_parts(parts: Collection[str]) -> tuple[str, ...]:
    """`parts` in :data:`LLM_PARTS` order; ValueError naming the parts on an unknown one."""
    if isinstance(parts, str) or set(parts) - set(LLM_PARTS):
        raise ValueError(
            f"unknown index LLM part(s) {parts!r}; the parts are {', '.join(LLM_PARTS)}"
        )
    return tuple(p for p in LLM_PARTS if p in set(parts))


@dataclass(frozen=True)
class IndexConfig:
    """How a document is cut and summarised. Changing any field re-indexes a document."""

    chunk_size: int = 128
    chunk_overlap: int = 16
    window: int = 20
    """W: chunks per episodic session for long documents (shorter windows for short ones)."""
    summary_tokens: int = 160
    """Length of session and cluster summaries."""
    core_tokens: int = 120
    """Length of an outline item's core content (offline)."""
    max_section_chunks: int = 40
    """Longer heading sections are split into parts of at most this many chunks."""
    cluster: ClusterParams = field(default_factory=ClusterParams)
    triples: bool = True
    """Extract triples per chunk (LLM backend only)."""
    mom_paths: int = 3
    """N: candidate MoM memories per outline section (LLM backend only); an evaluator model
    chooses one by clarity and completeness. 1: the single greedy memory, nothing scored."""
    mom_k: int = 60
    """k of the reciprocal-rank fusion that chooses among the MoM paths."""
    llm_parts: Collection[str] = LLM_PARTS
    """The parts an index LLM writes (names from :data:`LLM_PARTS`, any collection; kept as a
    tuple in that order). The others are built as without an LLM: extractive summaries, the
    offline outline (headings or windows, extractive cores), no triples. Default: all."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "llm_parts", ordered_parts(self.llm_parts))

    def llm_writes(self, part: str) -> bool:
        """Whether an index LLM (when there is one) writes `part`."""
        return part in self.llm_parts

    def fingerprint(self, embedder: str, llm: str) -> str:
        """A hash of everything that shapes the index. Without an LLM (`llm` "offline" or "")
        the MoM path settings and the LLM parts shape nothing and are left out, so such a
        store stays current when they change; with one, the parts are in only when they are
        not all of them (an index of every part keeps the fingerprint it had before parts
        could be chosen), and the path settings and the rule mapping items to chunks
        (:data:`~mindscape.memory.index_outline.COVERAGE`) only when the LLM writes the
        outline."""
        fields: dict[str, Any] = asdict(self)
        offline = llm in ("offline", "")
        if offline or not self.llm_writes("outline"):
            del fields["mom_paths"], fields["mom_k"]
        else:
            fields["outline_coverage"] = COVERAGE
        if offline or self.llm_parts == LLM_PARTS:
            del fields["llm_parts"]
        return content_key(repr(fields), embedder, llm)[:16]


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


class Indexer:
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
        self.store = store
        self.embedder = embedder
        self.llm = llm
        self.config = config or IndexConfig()
        self.evaluator: Evaluator | None = None
        """What chooses among MoM paths, its scores cached in the store (only with an LLM that
        writes the outline and more than one path; default: the local model in process,
        loaded here, before any document is touched)."""
        if llm is not None and self.config.llm_writes("outline") and self.config.mom_paths > 1:
            self.evaluator = CachedEvaluator(evaluator or default_evaluator(), store.cache)
        self.counter = counter or default_counter()
        self.progress = progress
        self.emb_id = embedder_id(embedder)
        self.llm_id = getattr(llm, "model_id", "offline") if llm is not None else "offline"

    # -- public ------------------------------------------------------------------------
    def is_current(self, doc_id: str, text: str) -> bool:
        """True when `doc_id` holds exactly this text, indexed with this configuration."""
        return is_current(
            self.store, doc_id, text, self.config.fingerprint(self.emb_id, self.llm_id)
        )

    def index(self, doc_id: str, text: str, *, title: str | None = None) -> IndexReport:
        """Index one document (skipped when the same text was already indexed the same way).

        A skipped document whose chunks have no vectors in this context yet (indexed before
        there were any, or under another title) gets them now, and nothing else."""
        t0 = time.perf_counter()
        report = IndexReport(doc_id=doc_id)
        content_hash = content_key(text)
        fingerprint = self.config.fingerprint(self.emb_id, self.llm_id)
        context = doc_context(doc_id, title)
        row = self.store.cache.doc(doc_id)
        if (
            row is not None
            and same_index(row, text, fingerprint)
            and vectors_intact(self.store, doc_id, row)
        ):
            if row.get("doc_context") != context:
                self._add_context(row, context, title, report)
            report.skipped = True
            report.layers = row.get("layers", {})
            report.tokens = row.get("tokens", 0)
            report.seconds = time.perf_counter() - t0
            return report
        self.store.claim_embedder(self.emb_id, doc_id=doc_id)  # before anything is deleted
        if row is not None:
            self.store.delete_doc(doc_id)
        self.store.cache.set_doc(doc_id, content_hash, fingerprint, "indexing", title=title)
        run = _DocRun(self, doc_id, text, report, context)
        units, vecs = run.build()
        with self._stage(report, "write"):
            self.store.upsert(units, vecs)
        report.layers = {layer: sum(u.layer == layer for u in units) for layer in LAYERS}
        report.tokens = self.counter.count_long(text)
        report.seconds = time.perf_counter() - t0
        report.peak_rss_mb = peak_rss_mb()
        chosen = {u.order: u.meta["mom"]["chosen"] for u in units if "mom" in u.meta}
        self.store.cache.set_doc(
            doc_id,
            content_hash,
            fingerprint,
            "done",
            title=title,
            tokens=report.tokens,
            layers=report.layers,
            doc_context=context,
            **({"mom_chosen": [chosen[o] for o in sorted(chosen)]} if chosen else {}),
        )
        return report

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
        report.embedded += stats.embedded
        report.embed_cached += stats.cached
        report.embed_seconds += stats.seconds
        info = {k: v for k, v in row.items() if k not in _ROW_KEYS}
        info.update(title=title, doc_context=context)
        self.store.cache.set_doc(
            doc_id, row["content_hash"], row["config_hash"], row["status"], **info
        )
        report.stage_seconds["embed_context"] = time.perf_counter() - t0

    # -- helpers used by _DocRun -------------------------------------------------------------
    def _stage(self, report: IndexReport, name: str) -> _Timer:
        return _Timer(report.stage_seconds, name)

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


def veridical_units(
    doc: DocText,
    chunks: list[Chunk],
    window_of: dict[int, str],
    triples: dict[int, list[list[str]]],
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
        for cid, c in zip(doc.chunk_ids, chunks, strict=True)
    ]


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
    """Whether a manifest row is done with this text and fingerprint."""
    return bool(
        row
        and row["status"] == "done"
        and row["content_hash"] == content_key(text)
        and row["config_hash"] == fingerprint
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
        ix, cfg, bar = self.ix, self.cfg, self.ix._bar
        with ix._stage(self.report, "chunk"):
            chunks = self.chunks()
        with ix._stage(self.report, "embed_chunks"):
            arrays = self.embed.chunks(chunks, f"{self.doc_id} · embed chunks")
            doc, chunk_vecs = doc_text(
                self.doc_id, self.text, chunks, arrays, self.embed.dim, ix.counter
            )
        with ix._stage(self.report, "embed_context"):
            # cached only: retrieval reads them back by content (memory/scope.py)
            self.embed.texts(
                [in_context(self.context, c.text) for c in chunks],
                f"{self.doc_id} · embed chunks in context",
            )
        with ix._stage(self.report, "episodic"):
            episodic, window_of = episodic_units(
                doc,
                Summarizer(doc, self.llm_for("episodic"), ix.counter),
                window=cfg.window,
                summary_tokens=cfg.summary_tokens,
                bar=bar,
            )
        with ix._stage(self.report, "semantic"):
            semantic = raptor_units(
                doc,
                chunk_vecs,
                Summarizer(doc, self.llm_for("semantic"), ix.counter),
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
        triples: dict[int, list[list[str]]] = {}
        llm = self.llm_for("triples")
        if llm is not None and cfg.triples:
            with ix._stage(self.report, "triples"):
                triples = chunk_triples(doc, llm, bar=bar)
        chunk_units = veridical_units(doc, chunks, window_of, triples)
        units = [*episodic, *semantic, *outline]
        with ix._stage(self.report, "embed_units"):
            unit_vecs = self.embed.texts([u.text for u in units], "embed summaries")
        self.report.embedded += self.stats.embedded
        self.report.embed_cached += self.stats.cached
        self.report.embed_seconds += self.stats.seconds
        dim = chunk_vecs.shape[1] if len(chunk_vecs) else unit_vecs.shape[1]
        all_vecs = np.vstack([chunk_vecs.reshape(-1, dim), unit_vecs.reshape(-1, dim)])
        return chunk_units + units, all_vecs
