"""Combining ranked lists and fitting evidence into a budget.

* :func:`reciprocal_rank_fusion` merges rankings from several retrievers or layers.
* :func:`pack_budget` keeps items, in order, while they fit a token budget.
* :func:`dedupe_near` drops near-duplicates before late fusion (MoM).
* :class:`BM25Index` and :func:`hybrid_scores` add a lexical signal to dense scores.

Pure Python/numpy plus the `bm25s` library; no store, no model.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import Literal, TypeVar

import numpy as np

__all__ = [
    "reciprocal_rank_fusion",
    "pack_budget",
    "dedupe_near",
    "BM25Index",
    "tokenize",
    "minmax",
    "hybrid_scores",
]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

_TOKEN = re.compile(r"(?u)\b\w\w+\b")


# --------------------------------------------------------------------------- rank fusion


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[K]],
    k: int = 60,
    weights: Sequence[float] | None = None,
) -> list[tuple[K, float]]:
    """Reciprocal rank fusion: ``score(d) = Σ_lists weight · 1/(k + rank)``, rank from 1.

    An id repeated within one list counts once, at its first position, and the repeat does
    not push later ids down (ranks are over the list's distinct ids). Ties are broken by the
    best rank the id reached in any list, then by where it was first seen (list order, then
    position), so the result is deterministic for a given input.

    Returns:
        ``(id, score)`` pairs, best first.
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError("weights must have one entry per ranking")
    score: dict[K, float] = {}
    best_rank: dict[K, int] = {}
    first_seen: dict[K, int] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        seen_here: set[K] = set()
        for item in ranking:
            if item in seen_here:
                continue
            seen_here.add(item)
            pos = len(seen_here)  # rank among the list's distinct ids
            score[item] = score.get(item, 0.0) + weight / (k + pos)
            best_rank[item] = min(best_rank.get(item, pos), pos)
            first_seen.setdefault(item, len(first_seen))
    order = sorted(score, key=lambda d: (-score[d], best_rank[d], first_seen[d]))
    return [(d, score[d]) for d in order]


# --------------------------------------------------------------------------- budgets


def pack_budget(items: Sequence[T], tokens_of: Callable[[T], int], budget: int) -> list[T]:
    """Keep items in their order while they fit; an item that does not fit is skipped.

    Later, smaller items can still fill the room left, and the total never exceeds
    ``budget``.
    """
    packed: list[T] = []
    used = 0
    for item in items:
        cost = tokens_of(item)
        if cost < 0:
            raise ValueError(f"negative token count {cost}")
        if used + cost <= budget:
            packed.append(item)
            used += cost
    return packed


# --------------------------------------------------------------------------- near duplicates


def _bag_of_words(texts: Sequence[str]) -> np.ndarray:
    """Term-count vectors (lowercased word tokens) over the texts' joint vocabulary."""
    counts = [Counter(tokenize(t, stopwords=())) for t in texts]
    vocab = {w: j for j, w in enumerate(sorted({w for c in counts for w in c}))}
    mat = np.zeros((len(texts), max(len(vocab), 1)))
    for i, c in enumerate(counts):
        for w, n in c.items():
            mat[i, vocab[w]] = n
    return mat


def dedupe_near(items: Sequence[str] | np.ndarray, threshold: float = 0.95) -> list[int]:
    """Indices of the items to keep: each is dropped if its cosine to a kept one is >= threshold.

    ``items`` is either an (n, d) array of embeddings, or a list of texts compared by the
    cosine of their word-count vectors. The first of a group of near-duplicates is kept, so
    pass items best first.
    """
    if len(items) == 0:
        return []
    if isinstance(items, np.ndarray):
        vecs = np.atleast_2d(np.asarray(items, dtype=np.float64))
    else:
        vecs = _bag_of_words(list(items))
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = np.divide(vecs, norms, out=np.zeros_like(vecs), where=norms > 0)
    sims = vecs @ vecs.T
    kept: list[int] = []
    for i in range(len(vecs)):
        if not kept or sims[i, kept].max() < threshold:
            kept.append(i)
    return kept


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
