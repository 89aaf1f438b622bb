"""Build the layered memory of a document into a store.

Stages, each with its own progress bar: chunk → embed chunks (and their sentences) →
episodic sessions → semantic tree → MoM outline → (triples, with an LLM) → embed units →
write. Every embedding and LLM output is cached by content hash in the store's cache as it is
produced, so an unchanged document is skipped, an interrupted run resumes where it stopped,
and adding a document touches only that document.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from mindscape import prompts
from mindscape.embeddings import FlagEmbedder, embedder_id, encode
from mindscape.memory.cache import content_key
from mindscape.memory.chunking import Chunk, chunk_text
from mindscape.memory.cluster import ClusterParams, soft_clusters
from mindscape.memory.outline import Section, detect_sections, resolve_anchor
from mindscape.memory.store import MemoryStore
from mindscape.memory.summarize import SentenceBank, extractive_summary
from mindscape.memory.types import LAYERS, Unit
from mindscape.memory.windows import windows
from mindscape.prompts import outline as outline_prompt
from mindscape.prompts import summarize as summary_prompt
from mindscape.prompts import triples as triples_prompt
from mindscape.tokens import TokenCounter, default_counter


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

    def fingerprint(self, embedder: str, llm: str) -> str:
        """A hash of everything that shapes the index."""
        return content_key(repr(asdict(self)), embedder, llm)[:16]


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
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.llm = llm
        self.config = config or IndexConfig()
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
        """Index one document (skipped when the same text was already indexed the same way)."""
        t0 = time.perf_counter()
        report = IndexReport(doc_id=doc_id)
        content_hash = content_key(text)
        fingerprint = self.config.fingerprint(self.emb_id, self.llm_id)
        row = self.store.cache.doc(doc_id)
        if row is not None and is_current(self.store, doc_id, text, fingerprint):
            report.skipped = True
            report.layers = row.get("layers", {})
            report.tokens = row.get("tokens", 0)
            report.seconds = time.perf_counter() - t0
            return report
        if row is not None:
            self.store.delete_doc(doc_id)
        self.store.cache.set_doc(doc_id, content_hash, fingerprint, "indexing", title=title)
        run = _DocRun(self, doc_id, text, report)
        units, vecs = run.build()
        with self._stage(report, "write"):
            self.store.upsert(units, vecs)
        report.layers = {layer: sum(u.layer == layer for u in units) for layer in LAYERS}
        report.tokens = self.counter.count(text)
        report.seconds = time.perf_counter() - t0
        self.store.cache.set_doc(
            doc_id,
            content_hash,
            fingerprint,
            "done",
            title=title,
            tokens=report.tokens,
            layers=report.layers,
        )
        return report

    # -- helpers used by _DocRun -------------------------------------------------------------
    def _stage(self, report: IndexReport, name: str) -> _Timer:
        return _Timer(report.stage_seconds, name)

    def _bar(self, iterable: Iterable[Any] | None, desc: str, total: int | None = None) -> Any:
        """A progress bar over `iterable` (or a manual one for None); the iterable itself when quiet."""
        if not self.progress:
            return iterable
        from tqdm import tqdm

        return tqdm(iterable, desc=desc, total=total, file=sys.stderr, leave=False, unit="it")


def is_current(store: MemoryStore, doc_id: str, text: str, fingerprint: str) -> bool:
    """Whether the store's manifest says `doc_id` is done with this text and fingerprint."""
    row = store.cache.doc(doc_id)
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
    """The work of indexing one document; holds its chunks, sentences and units."""

    def __init__(self, ix: Indexer, doc_id: str, text: str, report: IndexReport) -> None:
        self.ix, self.doc_id, self.text, self.report = ix, doc_id, text, report
        self.cfg = ix.config
        self.llm = ix.llm
        self.units: list[Unit] = []
        self.vecs: list[np.ndarray] = []

    def build(self) -> tuple[list[Unit], np.ndarray]:
        with self.ix._stage(self.report, "chunk"):
            self.chunks = chunk_text(
                self.text, self.ix.counter, self.cfg.chunk_size, self.cfg.chunk_overlap
            )
        self.chunk_ids = [f"{self.doc_id}:c{c.index}" for c in self.chunks]
        with self.ix._stage(self.report, "embed_chunks"):
            chunk_vecs = self._embed_chunks()
        with self.ix._stage(self.report, "episodic"):
            self._episodic()
        with self.ix._stage(self.report, "semantic"):
            self._semantic(chunk_vecs)
        with self.ix._stage(self.report, "outline"):
            self._outline()
        if self.llm is not None and self.cfg.triples:
            with self.ix._stage(self.report, "triples"):
                self._triples()
        chunk_units = [
            Unit(
                id=cid,
                doc_id=self.doc_id,
                layer="veridical",
                text=c.text,
                chunk_ids=[cid],
                kind="chunk",
                order=c.index,
                meta={
                    "char_start": c.char_start,
                    "char_end": c.char_end,
                    **self.chunk_meta.get(c.index, {}),
                },
            )
            for cid, c in zip(self.chunk_ids, self.chunks, strict=True)
        ]
        with self.ix._stage(self.report, "embed_units"):
            unit_vecs = self._embed_texts([u.text for u in self.units], "embed summaries")
        units = chunk_units + self.units
        dim = chunk_vecs.shape[1] if len(chunk_vecs) else unit_vecs.shape[1]
        all_vecs = np.vstack([chunk_vecs.reshape(-1, dim), unit_vecs.reshape(-1, dim)])
        return units, all_vecs

    # -- embeddings ----------------------------------------------------------------------------
    def _embed_chunks(self) -> np.ndarray:
        """Chunk embeddings, plus sentence embeddings pooled from the same pass (cached)."""
        cache = self.ix.store.cache
        keys = [content_key(self.ix.emb_id, "chunk+sentences", c.text) for c in self.chunks]
        emb = self.ix.embedder
        dim = emb.dimension if isinstance(emb, FlagEmbedder) else len(emb.embed_query("x"))
        got = cache.get_arrays("emb", keys, dim) if keys else {}
        todo = [i for i, k in enumerate(keys) if k not in got]
        self.report.embed_cached += len(self.chunks) - len(todo)
        if todo:
            bar = self.ix._bar(None, f"{self.doc_id} · embed chunks", total=len(todo))

            def save(rows: list[int], vecs: np.ndarray, sent_vecs: list[np.ndarray]) -> None:
                fresh = {
                    keys[todo[r]]: np.vstack([vecs[j : j + 1], sent_vecs[j]])
                    for j, r in enumerate(rows)
                }
                cache.put_arrays("emb", fresh)  # committed now: a killed run keeps this batch
                got.update(fresh)
                self.report.embedded += len(rows)
                if bar is not None:
                    bar.update(len(rows))

            self._encode_with_sentences([self.chunks[i] for i in todo], save)
            if bar is not None:
                bar.close()
        self._bank([got[k] for k in keys], dim)
        if not self.chunks:
            return np.zeros((0, dim), np.float32)
        return np.vstack([got[k][0] for k in keys]).astype(np.float32)

    def _encode_with_sentences(self, chunks: list[Chunk], on_batch: Any) -> None:
        t = time.perf_counter()
        emb = self.ix.embedder
        if isinstance(emb, FlagEmbedder):
            emb.encode_with_spans(
                [c.text for c in chunks], [c.local_spans() for c in chunks], on_batch
            )
        else:  # any other Embeddings: embed the sentences as texts of their own, 64 chunks at a time
            for s in range(0, len(chunks), 64):
                part = chunks[s : s + 64]
                chunk_v = encode(emb, [c.text for c in part])
                sents = [[c.text[a:b] for a, b in c.local_spans()] for c in part]
                flat = encode(emb, [x for ss in sents for x in ss])
                sizes = np.cumsum([0] + [len(ss) for ss in sents])
                on_batch(
                    list(range(s, s + len(part))),
                    chunk_v,
                    [flat[sizes[i] : sizes[i + 1]] for i in range(len(part))],
                )
        self.report.embed_seconds += time.perf_counter() - t

    def _embed_texts(self, texts: list[str], desc: str) -> np.ndarray:
        """Embeddings of unit texts, through the cache."""
        if not texts:
            return np.zeros((0, 0), np.float32)
        cache = self.ix.store.cache
        keys = [content_key(self.ix.emb_id, "text", t) for t in texts]
        dim = self._dim
        got = {k: v[0] for k, v in cache.get_arrays("emb", list(set(keys)), dim).items()}
        todo = sorted({k: i for i, k in enumerate(keys) if k not in got}.values())
        self.report.embed_cached += len(texts) - len(todo)
        batches = range(0, len(todo), 64)
        for s in self.ix._bar(batches, f"{self.doc_id} · {desc}") if len(batches) > 1 else batches:
            part = todo[s : s + 64]
            t = time.perf_counter()
            vecs = encode(self.ix.embedder, [texts[i] for i in part])
            self.report.embed_seconds += time.perf_counter() - t
            cache.put_arrays("emb", {keys[i]: vecs[j] for j, i in enumerate(part)})
            got.update({keys[i]: vecs[j] for j, i in enumerate(part)})
            self.report.embedded += len(part)
        return np.vstack([got[k] for k in keys]).astype(np.float32)

    def _bank(self, arrays: list[np.ndarray], dim: int) -> None:
        """The document's sentences, deduplicated across overlapping chunks."""
        self._dim = dim
        sid_of: dict[tuple[int, int], int] = {}
        texts: list[str] = []
        vecs: list[np.ndarray] = []
        self.chunk_sents: list[list[int]] = []
        for c, arr in zip(self.chunks, arrays, strict=True):
            ids = []
            for j, span in enumerate(c.sentences):
                if span not in sid_of:
                    sid_of[span] = len(texts)
                    texts.append(self.text[span[0] : span[1]])
                    vecs.append(arr[1 + j])
                ids.append(sid_of[span])
            self.chunk_sents.append(ids)
        tokens = np.asarray(self.ix.counter.count_many(texts) if texts else [], dtype=np.int64)
        matrix = np.vstack(vecs).astype(np.float32) if vecs else np.zeros((0, dim), np.float32)
        self.bank = SentenceBank(texts, tokens, matrix)
        self.chunk_meta: dict[int, dict[str, Any]] = {}

    def _sents_of(self, chunk_indices: Iterable[int]) -> list[int]:
        return sorted({s for i in chunk_indices for s in self.chunk_sents[i]})

    # -- summaries ---------------------------------------------------------------------------------
    def _summary(
        self, sent_ids: list[int], passages: list[str], template: str, budget: int
    ) -> tuple[str, list[int]]:
        """A summary: extractive offline (returns the picked sentence ids), else by the LLM."""
        if self.llm is None:
            picked = extractive_summary(self.bank, sent_ids, max_tokens=budget)
            return self.bank.join(picked), picked
        body = _fit_passages(passages, self.ix.counter, 6000)
        prompt = prompts.render(template, passages=body, max_words=int(budget * 0.75))
        text = self.llm.complete(prompt, system=summary_prompt.SYSTEM, role="index_summary")
        return " ".join(text.split()), sent_ids

    def _episodic(self) -> None:
        wins = windows(len(self.chunks), self.cfg.window)
        for w, rng in enumerate(self.ix._bar(wins, f"{self.doc_id} · episodic")):
            idx = list(rng)
            text, _ = self._summary(
                self._sents_of(idx),
                [self.chunks[i].text for i in idx],
                summary_prompt.SESSION,
                self.cfg.summary_tokens,
            )
            uid = f"{self.doc_id}:e{w}"
            for i in idx:
                self.chunk_meta.setdefault(i, {})["window"] = uid
            self.units.append(
                Unit(
                    uid,
                    self.doc_id,
                    "episodic",
                    text,
                    [self.chunk_ids[i] for i in idx],
                    kind="session",
                    order=w,
                    meta={"chunk_range": [idx[0], idx[-1]]},
                )
            )

    def _semantic(self, chunk_vecs: np.ndarray) -> None:
        """Recursive soft clustering: level 0 clusters chunks, each next level clusters summaries."""
        members: list[list[int]] = [[i] for i in range(len(self.chunks))]  # chunk indices per node
        sents: list[list[int]] = [self.chunk_sents[i] for i in range(len(self.chunks))]
        texts: list[str] = [c.text for c in self.chunks]
        vecs = chunk_vecs
        bar = self.ix._bar(range(self.cfg.cluster.max_levels), f"{self.doc_id} · semantic levels")
        for level in bar:
            if len(members) == 0 or (level > 0 and len(members) <= 1):
                break
            clusters = soft_clusters(vecs, self.cfg.cluster)
            new_members, new_sents, new_texts = [], [], []
            for c in clusters:
                text, picked = self._summary(
                    sorted({s for i in c for s in sents[i]}),
                    [texts[i] for i in c],
                    summary_prompt.CLUSTER,
                    self.cfg.summary_tokens,
                )
                new_members.append(sorted({m for i in c for m in members[i]}))
                new_sents.append(picked)
                new_texts.append(text)
            for n, (m, text) in enumerate(zip(new_members, new_texts, strict=True)):
                self.units.append(
                    Unit(
                        f"{self.doc_id}:s{level}.{n}",
                        self.doc_id,
                        "semantic",
                        text,
                        [self.chunk_ids[i] for i in m],
                        kind="cluster",
                        order=n,
                        level=level,
                    )
                )
            if len(clusters) >= len(members):  # no reduction: the next level would repeat this one
                break
            members, sents, texts = new_members, new_sents, new_texts
            vecs = self._embed_texts(new_texts, "embed summaries")

    def _outline(self) -> None:
        for n, sec in enumerate(self.ix._bar(self._sections(), f"{self.doc_id} · outline")):
            idx = [
                c.index for c in self.chunks if c.char_start < sec.end and c.char_end > sec.start
            ]
            if not idx:
                continue
            if self.llm is None:
                core = self.bank.join(
                    extractive_summary(
                        self.bank, self._sents_of(idx), max_tokens=self.cfg.core_tokens
                    )
                )
                self._add_outline(sec.title, core, idx, order=n)
            else:
                self._outline_llm(sec, idx, n)

    def _add_outline(
        self,
        title: str,
        core: str,
        idx: list[int],
        *,
        order: int,
        meta: dict[str, Any] | None = None,
    ) -> None:
        n = sum(u.layer == "outline" for u in self.units)
        self.units.append(
            Unit(
                f"{self.doc_id}:o{n}",
                self.doc_id,
                "outline",
                f"{title}: {core}" if title else core,
                [self.chunk_ids[i] for i in idx],
                kind="section",
                order=order,
                meta={"title": title, "core": core, **(meta or {})},
            )
        )

    def _sections(self) -> list[Section]:
        """Heading sections (split when long), else one section per episodic window."""
        secs = detect_sections(self.text)
        if not secs:
            return [
                Section(f"Part {w + 1}", self.chunks[r[0]].char_start, self.chunks[r[-1]].char_end)
                for w, r in enumerate(windows(len(self.chunks), self.cfg.window))
            ]
        out: list[Section] = []
        for sec in secs:
            idx = [
                c.index for c in self.chunks if c.char_start < sec.end and c.char_end > sec.start
            ]
            size = self.cfg.max_section_chunks
            if len(idx) <= size:
                out.append(sec)
                continue
            parts = -(-len(idx) // size)
            step = -(-len(idx) // parts)
            for p in range(parts):
                part = idx[p * step : (p + 1) * step]
                start = sec.start if p == 0 else self.chunks[part[0]].char_start
                end = sec.end if p == parts - 1 else self.chunks[part[-1]].char_end
                out.append(Section(f"{sec.title} (part {p + 1})", start, end))
        return out

    def _outline_llm(self, sec: Section, idx: list[int], order: int) -> None:
        """MoM extraction: outline items with core content and anchored atomic chunks."""
        section_text = self.text[sec.start : sec.end]
        prompt = prompts.render(
            outline_prompt.USER,
            title=sec.title,
            section=self.ix.counter.truncate(section_text, 8000),
            max_items=max(1, min(8, len(idx) // 4 or 1)),
        )
        data = self.llm.complete_json(prompt, system=outline_prompt.SYSTEM, role="index_outline")
        items = data.get("items", []) if isinstance(data, dict) else data
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            spans = []
            for anchor in item.get("chunks") or []:
                if isinstance(anchor, dict):
                    span = resolve_anchor(
                        section_text, str(anchor.get("head", "")), str(anchor.get("tail", ""))
                    )
                    if span:
                        spans.append((span[0] + sec.start, span[1] + sec.start))
            covered = [
                i
                for i in idx
                if any(
                    self.chunks[i].char_start < e and self.chunks[i].char_end > s for s, e in spans
                )
            ]
            self._add_outline(
                str(item.get("title", sec.title)),
                str(item.get("core", "")),
                covered or idx,
                order=order,
                meta={"atomic_spans": spans},
            )

    def _triples(self) -> None:
        for i in self.ix._bar(range(len(self.chunks)), f"{self.doc_id} · triples"):
            prompt = prompts.render(
                triples_prompt.USER, passage=self.chunks[i].text, max_triples=12
            )
            data = self.llm.complete_json(
                prompt, system=triples_prompt.SYSTEM, role="index_triples"
            )
            raw = data.get("triples", []) if isinstance(data, dict) else data
            triples = [
                [str(x) for x in t[:3]] for t in raw or [] if isinstance(t, list) and len(t) >= 3
            ]
            self.chunk_meta.setdefault(i, {})["triples"] = triples


def _fit_passages(passages: list[str], counter: TokenCounter, budget: int) -> str:
    """Passages joined for a prompt, each trimmed so the whole stays within `budget` tokens."""
    if not passages:
        return ""
    each = max(32, budget // len(passages))
    return "\n\n".join(counter.truncate(p, each) for p in passages)
