"""Combining ranked lists and fitting evidence into a budget.

* :func:`reciprocal_rank_fusion` merges rankings from several retrievers or layers.
* :func:`pack_budget` keeps items, in order, while they fit a token budget.
* :func:`dedupe_near` drops near-duplicates before late fusion (MoM).

Pure Python/numpy; no store, no model. The scores a query's walk shares (BM25, the hybrid of
dense and BM25, the best rows) are one level down, in :mod:`mindscape.memory.scoring`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

import numpy as np

from mindscape.memory.scoring import tokenize

__all__ = ["reciprocal_rank_fusion", "pack_budget", "dedupe_near"]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


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
