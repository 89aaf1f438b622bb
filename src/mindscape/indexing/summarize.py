"""The offline summariser: extractive, deterministic, on the embedder's sentence vectors.

Sentence centrality + MMR: a sentence's centrality is its mean cosine to all sentences of the
passage (degree centrality, computed as the cosine to the passage centroid, O(n)); sentences
are then picked greedily by maximal marginal relevance (centrality minus similarity to what
is already picked) within a token budget, and returned in source order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "SentenceBank",
    "extractive_summary",
]


@dataclass
class SentenceBank:
    """All sentences of a document: text, token count and embedding, by sentence id."""

    texts: list[str]
    tokens: np.ndarray
    vecs: np.ndarray

    def join(self, ids: list[int]) -> str:
        """The text of some sentences, in the order given."""
        return " ".join(" ".join(self.texts[i].split()) for i in ids)


def extractive_summary(
    bank: SentenceBank,
    ids: list[int],
    *,
    max_tokens: int = 160,
    max_sentences: int = 8,
    mmr_lambda: float = 0.7,
    min_tokens: int = 6,
) -> list[int]:
    """Pick sentence ids of `ids` summarising them; returned sorted (source order)."""
    if not ids:
        return []
    ids_arr = np.asarray(sorted(set(ids)))
    vecs = bank.vecs[ids_arr]
    toks = bank.tokens[ids_arr]
    centroid = vecs.mean(axis=0)
    centrality = vecs @ centroid
    eligible = toks >= min_tokens
    if not eligible.any():
        eligible = np.ones(len(ids_arr), dtype=bool)
    redundancy = np.zeros(len(ids_arr), dtype=np.float32)
    picked: list[int] = []
    budget = max_tokens
    while len(picked) < max_sentences:
        score = mmr_lambda * centrality - (1 - mmr_lambda) * redundancy
        fits = eligible & (toks <= budget)
        if picked:
            fits[picked] = False
        if not fits.any():
            break
        best = int(np.argmax(np.where(fits, score, -np.inf)))
        picked.append(best)
        budget -= int(toks[best])
        redundancy = np.maximum(redundancy, vecs @ vecs[best])
    if not picked:  # every sentence is longer than the budget: take the most central one
        picked = [int(np.argmax(np.where(eligible, centrality, -np.inf)))]
    return sorted(int(ids_arr[i]) for i in picked)
