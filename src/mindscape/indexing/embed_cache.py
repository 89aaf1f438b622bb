"""Embeddings through the store's content-hash cache, for the index builders.

Chunks are embedded together with their sentences (one forward pass, token states pooled per
sentence span) and cached as one array per chunk: row 0 the chunk, then its sentences. Unit
texts (summaries, outline items) are embedded and cached one vector per text, under
:func:`text_key`. So are the chunks in their document's context (:func:`in_context`: the
title, a blank line, the chunk), which retrieval reads back from the cache by the same key
(:mod:`~mindscape.memory.scope`). Every batch is committed as it is produced, so an
interrupted run keeps what it embedded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from mindscape.embeddings import FlagEmbedder, encode
from mindscape.indexing.chunking import Chunk
from mindscape.memory.cache import EMB_NS, content_key, text_key
from mindscape.memory.store import MemoryStore

__all__ = [
    "Bar",
    "EmbedCache",
    "EmbedStats",
]

Bar = Callable[..., Any]
"""``bar(iterable, desc, total=None)``: a progress bar (or the iterable itself when quiet)."""


@dataclass
class EmbedStats:
    """What embedding did: texts embedded by the model, texts from the cache, model seconds."""

    embedded: int = 0
    cached: int = 0
    seconds: float = 0.0


class EmbedCache:
    """An embedder behind the store's cache (see the module docstring)."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embeddings,
        emb_id: str,
        stats: EmbedStats,
        bar: Bar,
    ) -> None:
        self.store, self.embedder, self.emb_id, self.stats, self.bar = (
            store,
            embedder,
            emb_id,
            stats,
            bar,
        )
        emb = embedder
        self.dim = emb.dimension if isinstance(emb, FlagEmbedder) else len(emb.embed_query("x"))

    def chunks(self, chunks: list[Chunk], desc: str, window: int = 4096) -> Iterator[np.ndarray]:
        """Per chunk, in order: an array whose row 0 is the chunk's vector and the rest its
        sentences'. Produced `window` chunks at a time, so a long book never holds every
        chunk's array at once."""
        bar = None
        for w in range(0, len(chunks), window):
            part = chunks[w : w + window]
            keys = [content_key(self.emb_id, "chunk+sentences", c.text) for c in part]
            got = self.store.cache.get_arrays(EMB_NS, keys, self.dim)
            todo = [i for i, k in enumerate(keys) if k not in got]
            self.stats.cached += len(part) - len(todo)
            if todo and bar is None:
                bar = self.bar(None, desc, total=len(chunks) - w)
            if todo:
                self._embed_missing([part[i] for i in todo], [keys[i] for i in todo], got, bar)
            if bar is not None:
                bar.update(len(part) - len(todo))
            yield from (got[k] for k in keys)
        if bar is not None:
            bar.close()

    def _embed_missing(
        self, chunks: list[Chunk], keys: list[str], got: dict[str, np.ndarray], bar: Any
    ) -> None:
        """Embed `chunks` with their sentences into `got`, committing each batch to the cache."""

        def save(rows: list[int], vecs: np.ndarray, sent_vecs: list[np.ndarray]) -> None:
            fresh = {
                keys[r]: np.vstack([vecs[j : j + 1], sent_vecs[j]]) for j, r in enumerate(rows)
            }
            # committed now: a killed run keeps this batch
            self.store.cache.put_arrays(EMB_NS, fresh)
            got.update(fresh)
            self.stats.embedded += len(rows)
            if bar is not None:
                bar.update(len(rows))

        self._encode_with_sentences(chunks, save)

    def _encode_with_sentences(self, chunks: list[Chunk], on_batch: Any) -> None:
        t = time.perf_counter()
        emb = self.embedder
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
        self.stats.seconds += time.perf_counter() - t

    def texts(self, texts: list[str], desc: str) -> np.ndarray:
        """Embeddings of unit texts, through the cache (float32, one row per text)."""
        if not texts:
            return np.zeros((0, 0), np.float32)
        cache = self.store.cache
        keys = [text_key(self.emb_id, t) for t in texts]
        got = {k: v[0] for k, v in cache.get_arrays(EMB_NS, list(set(keys)), self.dim).items()}
        todo = sorted({k: i for i, k in enumerate(keys) if k not in got}.values())
        self.stats.cached += len(texts) - len(todo)
        batches: Iterable[int] = range(0, len(todo), 64)
        if len(range(0, len(todo), 64)) > 1:
            batches = self.bar(batches, desc)
        for s in batches:
            part = todo[s : s + 64]
            t = time.perf_counter()
            vecs = encode(self.embedder, [texts[i] for i in part])
            self.stats.seconds += time.perf_counter() - t
            cache.put_arrays(EMB_NS, {keys[i]: vecs[j] for j, i in enumerate(part)})
            got.update({keys[i]: vecs[j] for j, i in enumerate(part)})
            self.stats.embedded += len(part)
        return np.vstack([got[k] for k in keys]).astype(np.float32)
