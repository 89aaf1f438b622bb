"""Sentence vectors of evidence, mostly without running the embedder.

The indexer embeds every chunk together with its sentences (one forward pass, token states
pooled per sentence span) and caches them in the store under
``content_key(embedder id, "chunk+sentences", chunk text)``. The offline reasoner reads those
rows instead of re-embedding evidence each round: a veridical hit's sentences come straight
from the cache, and a summary's sentences (offline summaries are picked source sentences)
are matched by text against the cached sentences of the chunks it covers. Only what is left
(LLM-written summaries, queries, options) runs through the embedder, memoised by text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from cachetools import LRUCache
from langchain_core.embeddings import Embeddings

from mindscape.embeddings import embedder_id, encode, encode_query
from mindscape.memory.cache import content_key
from mindscape.memory.sentence_split import split_sentences
from mindscape.state import EvidenceItem

#: Summaries covering more chunks than this are matched against the first ones only.
MAX_COVER_LOOKUP = 64


@dataclass
class Sentence:
    """One sentence of one evidence item."""

    text: str
    item: int
    """Index of the evidence item it comes from."""
    unit_id: str
    layer: str


def _norm(text: str) -> str:
    return " ".join(text.split())


class SentenceVectors:
    """Unit vectors for evidence sentences, queries and options.

    Args:
        embedder: the store's embedder (any langchain ``Embeddings``).
        store: a :class:`~mindscape.memory.store.MemoryStore` whose cache holds the
            indexer's sentence vectors; None embeds everything (tests with fake embedders).
        query_fn: a shared, cached query embedder (the retriever's), used for queries.
    """

    def __init__(
        self,
        embedder: Embeddings,
        store: Any = None,
        *,
        memo_size: int = 50_000,
        query_fn: Callable[[str], np.ndarray] | None = None,
    ) -> None:
        self.embedder = embedder
        self.store = store
        self.query_fn = query_fn
        """Optional shared query embedder (the retriever's cached `embed_query`): a probe the
        retriever already embedded costs nothing here."""
        self._emb_id = embedder_id(embedder)
        self._memo: LRUCache[str, np.ndarray] = LRUCache(maxsize=memo_size)
        self._queries: LRUCache[str, np.ndarray] = LRUCache(maxsize=2_000)
        self._dim: int | None = None
        self.embedded = 0
        """Texts that went through the embedder (for tests and benchmarks)."""

    # ---- plain embedding, memoised
    def query(self, text: str) -> np.ndarray:
        """A query's unit vector."""
        hit = self._queries.get(text)
        if hit is None:
            if self.query_fn is not None:
                hit = np.asarray(self.query_fn(text), dtype=np.float32)
            else:
                hit = encode_query(self.embedder, text)
                self.embedded += 1
            self._queries[text] = hit
            self._dim = hit.shape[0]
        return hit

    def texts(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of passages/sentences (memoised by normalised text)."""
        keys = [_norm(t) for t in texts]
        todo = sorted({k for k in keys if self._memo.get(k) is None})
        if todo:
            vecs = encode(self.embedder, todo)
            self.embedded += len(todo)
            for k, v in zip(todo, vecs, strict=True):
                self._memo[k] = v
        if not keys:
            return np.zeros((0, self.dim), np.float32)
        return np.vstack([self._memo.get(k) for k in keys]).astype(np.float32)  # type: ignore[misc]

    def pooled(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of passages, as the mean of their sentences' vectors when all of them
        are known (extractive cues are evidence sentences), else embedded (memoised)."""
        out = []
        todo: dict[int, str] = {}
        for n, text in enumerate(texts):
            parts = [self._memo.get(_norm(text[a:b])) for a, b in split_sentences(text)]
            if parts and all(p is not None for p in parts):
                v = np.mean(np.vstack(parts), axis=0)  # type: ignore[arg-type]
                out.append(v / (np.linalg.norm(v) or 1.0))
            else:
                out.append(None)
                todo[n] = text
        if todo:
            for n, v in zip(todo, self.texts(list(todo.values())), strict=True):
                out[n] = v
        if not out:
            return np.zeros((0, self.dim), np.float32)
        return np.vstack(out).astype(np.float32)

    @property
    def dim(self) -> int:
        """Embedding size (embeds a probe text once when unknown)."""
        if self._dim is None:
            d = getattr(self.embedder, "dimension", None)
            self._dim = (
                int(d) if isinstance(d, int) else int(self.query("dimension probe").shape[0])
            )
        return self._dim

    # ---- evidence sentences
    def of_items(self, items: list[EvidenceItem]) -> tuple[list[Sentence], np.ndarray]:
        """Every sentence of the items (deduplicated by text) and its unit vector."""
        self.prefetch(items)
        sents: list[Sentence] = []
        seen: set[str] = set()
        for n, item in enumerate(items):
            text = item["text"]
            for s, e in split_sentences(text):
                key = _norm(text[s:e])
                if len(key) < 3 or key in seen:
                    continue
                seen.add(key)
                sents.append(Sentence(key, n, item["unit_id"], item["layer"]))
        if not sents:
            return [], np.zeros((0, self.dim), np.float32)
        return sents, self.texts([s.text for s in sents])

    def prefetch(self, items: list[EvidenceItem]) -> None:
        """Put cached sentence vectors of the items' chunks into the memo."""
        if self.store is None:
            return
        chunk_texts: dict[str, str] = {}
        for item in items:
            if item["layer"] == "veridical":
                chunk_texts[item["unit_id"]] = item["text"]
        wanted = [
            cid
            for item in items
            if item["layer"] != "veridical"
            for cid in item["chunk_ids"][:MAX_COVER_LOOKUP]
            if cid not in chunk_texts
        ]
        if wanted:
            view = self.store.view("veridical")
            for cid in wanted:
                row = view.row_of.get(cid)
                if row is not None:
                    chunk_texts[cid] = view.units[row].text
        todo = [t for t in chunk_texts.values() if not self._known(t)]
        if not todo:
            return
        keys = {content_key(self._emb_id, "chunk+sentences", t): t for t in todo}
        got = self.store.cache.get_arrays("emb", list(keys), self.dim)
        for key, arr in got.items():
            text = keys[key]
            spans = split_sentences(text)
            if len(spans) != arr.shape[0] - 1:
                continue  # the indexer cut a long sentence: let the embedder handle it
            self._memo[_norm(text)] = arr[0]
            for (s, e), vec in zip(spans, arr[1:], strict=True):
                key_s = _norm(text[s:e])
                if self._memo.get(key_s) is None:
                    self._memo[key_s] = vec

    def _known(self, chunk_text: str) -> bool:
        return self._memo.get(_norm(chunk_text)) is not None
