"""Scoring primitives a query's walk shares: the best rows of a score array, BM25, and the
min-max hybrid of dense and BM25 scores.

Used by the signature's activation and conditioning (:mod:`mindscape.memory.signature`), the
scope's lexical index (:mod:`mindscape.memory.scope`) and the retriever; pure Python/numpy plus
the `bm25s` library, no store, no model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import numpy as np

__all__ = ["BM25Index", "hybrid_scores", "minmax", "tokenize", "top_rows"]

_TOKEN = re.compile(r"(?u)\b\w\w+\b")


def top_rows(scores: np.ndarray, n: int) -> np.ndarray:
    """Indices of the n best scores, best first; ties go to the lower index (deterministic)."""
    total = len(scores)
    if n <= 0 or total == 0:
        return np.zeros(0, dtype=np.int64)
    if n < total:
        kth = np.partition(scores, total - n)[total - n]
        idx = np.flatnonzero(scores >= kth)
    else:
        idx = np.arange(total)
    order = np.lexsort((idx, -scores[idx]))
    return np.asarray(idx[order][:n])


# --------------------------------------------------------------------------- BM25


def _stopwords(name: Literal["en", "en_plus", "none"]) -> frozenset[str]:
    """bm25s's English stopword lists: Lucene's 33 words ("en") or a longer list ("en_plus")."""
    if name == "none":
        return frozenset()
    from bm25s.stopwords import STOPWORDS_EN, STOPWORDS_EN_PLUS

    return frozenset(STOPWORDS_EN if name == "en" else STOPWORDS_EN_PLUS)


def tokenize(text: str, stopwords: frozenset[str] | Sequence[str] = ()) -> list[str]:
    """Lowercased word tokens of two or more characters, minus ``stopwords``."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in stopwords]


class BM25Index:
    """BM25 over a fixed list of texts, backed by `bm25s`.

    Tokenisation is lowercase words of 2+ characters without English stopwords (from bm25s).
    Document positions are the indices of ``texts``.
    """

    def __init__(
        self,
        texts: Sequence[str],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        stopwords: Literal["en", "en_plus", "none"] = "en",
    ) -> None:
        """Index ``texts``; ``k1``/``b`` are the usual BM25 parameters (bm25s defaults)."""
        import bm25s

        self.n_docs = len(texts)
        self._stop = _stopwords(stopwords)
        self._bm25 = bm25s.BM25(k1=k1, b=b)
        if self.n_docs:
            corpus = [tokenize(t, self._stop) for t in texts]
            self._bm25.index(corpus, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (zeros when no query term is known)."""
        tokens = tokenize(query, self._stop)
        if not self.n_docs or not tokens:
            return np.zeros(self.n_docs)
        known = [t for t in tokens if t in self._bm25.vocab_dict]
        if not known:
            return np.zeros(self.n_docs)
        return np.asarray(self._bm25.get_scores(known), dtype=np.float64)

    def top(self, query: str, n: int = 10) -> list[tuple[int, float]]:
        """The ``n`` best ``(doc index, score)`` pairs, best first; zero scores are left out."""
        s = self.scores(query)
        order = np.argsort(-s, kind="stable")[: max(n, 0)]
        return [(int(i), float(s[i])) for i in order if s[i] > 0]


# --------------------------------------------------------------------------- hybrid


def minmax(x: Sequence[float] | np.ndarray) -> np.ndarray:
    """Scale to [0, 1] by ``(x - min) / (max - min)``; a constant array becomes all zeros."""
    a = np.asarray(x, dtype=np.float64)
    if a.size == 0:
        return a.copy()
    lo, hi = a.min(), a.max()
    return (a - lo) / (hi - lo) if hi > lo else np.zeros_like(a)


def hybrid_scores(
    dense: Sequence[float] | np.ndarray,
    bm25: Sequence[float] | np.ndarray,
    weight: float,
) -> np.ndarray:
    """``(1-weight)·minmax(dense) + weight·minmax(bm25)`` over the same documents.

    Min-max rather than z-scores: both parts land in [0, 1] whatever their scales (cosines
    near 0.3-0.8, BM25 unbounded and skewed), the result stays bounded, and it behaves on the
    small candidate sets it is used on, where a standard deviation is noisy. ``weight=0``
    keeps the dense order; ``weight=1`` is BM25 alone.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be in [0, 1]; got {weight}")
    d, s = np.asarray(dense, dtype=np.float64), np.asarray(bm25, dtype=np.float64)
    if d.shape != s.shape:
        raise ValueError(f"score arrays differ in shape: {d.shape} vs {s.shape}")
    return (1.0 - weight) * minmax(d) + weight * minmax(s)
