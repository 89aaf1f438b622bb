"""The retrieval scope: the arrays of one document set, derived from the store once per set.

A query never touches the store: it reads a :class:`Scope` (the layers' views restricted to
the documents asked about, chunk → document and chunk → session rows, session member lists,
a BM25 index, unit → chunk maps). The retriever keeps a few scopes cached and rebuilds one
when the store's views change (a document was indexed).

Each chunk has two vectors: the plain one (the veridical layer's) and one of the chunk in its
document's context (title + chunk, made by the indexer and kept in the store's cache; see
:func:`~mindscape.memory.cache.in_context`). :meth:`Scope.chunk_dense` scores a query
against either, or by the higher of the two (:data:`~mindscape.memory.settings.DOC_CONTEXT`, the default): the title
finds a chunk that never names what the story is about, and the max never scores a chunk
below its plain cosine. A chunk without a context vector (a store indexed before they
existed, until ``mindscape index`` is run on it again) scores by its plain vector.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from cachetools import LRUCache

from mindscape.memory.cache import EMB_NS, in_context, text_key
from mindscape.memory.scoring import BM25Index
from mindscape.memory.settings import DOC_CONTEXT, DOC_CONTEXTS
from mindscape.memory.store import LayerView, MemoryStore
from mindscape.memory.types import LAYERS, Layer

__all__ = ["DOC_CONTEXT", "DOC_CONTEXTS", "Scope"]


class Scope:
    """Everything derived from the store for one set of documents; built once, reused per query."""

    def __init__(
        self, store: MemoryStore, doc_ids: frozenset[str] | None, emb_id: str | None = None
    ) -> None:
        """`emb_id`: the embedder the queries are embedded with (default: the store's
        record); the chunks' context vectors are read from the cache under its id."""
        self.doc_ids = doc_ids
        self._store = store
        self._emb_id = emb_id
        wanted = set(doc_ids) if doc_ids is not None else None
        self.sources = {layer: store.view(layer) for layer in LAYERS}
        self.views: dict[Layer, LayerView] = {
            layer: self.sources[layer].subset(wanted) for layer in LAYERS
        }
        chunks = self.views["veridical"]
        self.chunks = chunks
        self.chunk_vecs = chunks.vecs if len(chunks) else np.zeros((0, 1), np.float32)
        self.n_chunks = len(chunks)
        docs = sorted({u.doc_id for u in chunks.units})
        self.doc_index = {d: i for i, d in enumerate(docs)}
        self.docs = docs
        self.chunk_doc = np.fromiter(
            (self.doc_index[u.doc_id] for u in chunks.units), dtype=np.int64, count=self.n_chunks
        )
        sessions = self.views["episodic"]
        self.sessions = sessions
        self.chunk_session = np.full(self.n_chunks, -1, dtype=np.int64)
        self.session_members: list[np.ndarray] = []
        for j, u in enumerate(sessions.units):
            rows = self.rows_of_chunks(u.chunk_ids)
            self.session_members.append(rows)
            self.chunk_session[rows] = j
        self._unit_chunks: dict[Layer, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._bm25: BM25Index | None = None
        self._bm25_cache: LRUCache[str, np.ndarray] = LRUCache(maxsize=32)
        self._context_vecs: np.ndarray | None = None
        self.n_in_context = 0
        """Chunks that have a vector in context (known once :meth:`context_vecs` ran)."""

    def fresh(self, store: MemoryStore) -> bool:
        """True while the store still serves the views this scope was built from."""
        return all(store.view(layer) is self.sources[layer] for layer in LAYERS)

    def context_vecs(self) -> np.ndarray:
        """Per chunk row, its vector in its document's context; its plain vector where the
        store's cache has none (read from the cache on first use)."""
        if self._context_vecs is None:
            self._context_vecs, self.n_in_context = _context_vecs(
                self._store, self.chunks, self.chunk_vecs, self._emb_id
            )
        return self._context_vecs

    def chunk_dense(self, qvec: np.ndarray, doc_context: str = DOC_CONTEXT) -> np.ndarray:
        """The dense score of every chunk for a unit query vector (float64): the cosine to
        its plain vector, to its vector in context, or the higher of the two
        (`doc_context`, one of :data:`DOC_CONTEXTS`)."""
        if doc_context not in DOC_CONTEXTS:
            raise ValueError(f"unknown doc_context {doc_context!r}; use one of {DOC_CONTEXTS}")
        if not self.n_chunks:
            return np.zeros(0)
        plain = np.asarray(self.chunk_vecs @ qvec, dtype=np.float64)
        if doc_context == "plain":
            return plain
        in_doc = np.asarray(self.context_vecs() @ qvec, dtype=np.float64)
        return in_doc if doc_context == "prefixed" else np.maximum(plain, in_doc)

    def rows_of_chunks(self, chunk_ids: Iterable[str]) -> np.ndarray:
        """Row numbers (in this scope) of the chunks named, skipping those outside it."""
        row_of = self.chunks.row_of
        return np.fromiter((row_of[c] for c in chunk_ids if c in row_of), dtype=np.int64)

    def bm25(self) -> BM25Index:
        """The BM25 index over this scope's chunks (built on first use)."""
        if self._bm25 is None:
            self._bm25 = BM25Index([u.text for u in self.chunks.units])
        return self._bm25

    def bm25_scores(self, query: str) -> np.ndarray:
        """BM25 scores of every chunk for a query (the last few queries are cached)."""
        got = self._bm25_cache.get(query)
        if got is None:
            got = self._bm25_cache[query] = self.bm25().scores(query)
        return got

    def unit_chunks(self, layer: Layer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(unit index per pair, chunk row per pair, chunk count per unit) for a layer."""
        if layer not in self._unit_chunks:
            units, rows = [], []
            for i, u in enumerate(self.views[layer].units):
                r = self.rows_of_chunks(u.chunk_ids)
                units.append(np.full(len(r), i, dtype=np.int64))
                rows.append(r)
            uidx = np.concatenate(units) if units else np.zeros(0, np.int64)
            ridx = np.concatenate(rows) if rows else np.zeros(0, np.int64)
            counts = np.bincount(uidx, minlength=len(self.views[layer])).astype(np.float64)
            self._unit_chunks[layer] = (uidx, ridx, counts)
        return self._unit_chunks[layer]

    def per_unit_mean(self, layer: Layer, chunk_values: np.ndarray) -> np.ndarray:
        """For each unit of a layer, the mean of a per-chunk value over its chunks (0 if none)."""
        if layer == "veridical":
            return chunk_values
        uidx, ridx, counts = self.unit_chunks(layer)
        sums = np.bincount(uidx, weights=chunk_values[ridx], minlength=len(counts))
        return np.asarray(np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0))


def _context_vecs(
    store: MemoryStore, chunks: LayerView, plain: np.ndarray, emb_id: str | None
) -> tuple[np.ndarray, int]:
    """The chunks' vectors in context from the store's cache (the plain row where there is
    none), and how many were found. A document's context is the one its manifest records
    (``doc_context``, written by the indexer); a document without one has none."""
    out = np.array(plain, dtype=np.float32, copy=True)
    emb_id = emb_id or store.embedder()
    if not len(chunks) or emb_id is None:
        return out, 0
    context = {d["doc_id"]: d["doc_context"] for d in store.cache.docs() if d.get("doc_context")}
    keys: dict[int, str] = {
        i: text_key(emb_id, in_context(context[u.doc_id], u.text))
        for i, u in enumerate(chunks.units)
        if u.doc_id in context
    }
    got = store.cache.get_arrays(EMB_NS, sorted(set(keys.values())), out.shape[1])
    found = [(i, got[k][0]) for i, k in keys.items() if k in got]
    for i, v in found:
        out[i] = v
    return out, len(found)
