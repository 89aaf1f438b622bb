"""Tests of rank fusion, budget packing, near-duplicate removal, BM25 and hybrid scores."""

from __future__ import annotations

import numpy as np
import pytest

from mindscape.memory.retrieval.ranking import dedupe_near, pack_budget, reciprocal_rank_fusion
from mindscape.memory.scoring import BM25Index, hybrid_scores, minmax, tokenize

# --------------------------------------------------------------------------- RRF


def test_rrf_hand_built():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "a", "d"]], k=60)
    ids = [d for d, _ in fused]
    # a and b tie (1/61 + 1/62 each); a reached rank 1 first (list order), then c vs d tie.
    assert ids == ["a", "b", "c", "d"]
    scores = dict(fused)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63)


def test_rrf_agreement_wins_and_weights_count():
    fused = reciprocal_rank_fusion([["x", "y"], ["z", "y"], ["w", "y"]], k=1)
    assert fused[0][0] == "y"  # second everywhere beats first once
    weighted = reciprocal_rank_fusion([["p", "q"], ["q", "p"]], k=60, weights=[1.0, 3.0])
    assert [d for d, _ in weighted] == ["q", "p"]
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["p"]], weights=[1.0, 2.0])


def test_rrf_repeats_within_a_list_count_once_and_is_deterministic():
    fused = reciprocal_rank_fusion([["a", "a", "b"]], k=0)
    assert dict(fused) == {"a": 1.0, "b": 0.5}
    rankings = [["d", "c", "b", "a"], ["a", "b", "c", "d"]]
    assert reciprocal_rank_fusion(rankings) == reciprocal_rank_fusion(rankings)
    assert [d for d, _ in reciprocal_rank_fusion(rankings)] == ["d", "a", "c", "b"]
    assert reciprocal_rank_fusion([]) == []


# --------------------------------------------------------------------------- budgets


def test_pack_budget_never_exceeds_and_keeps_order():
    rng = np.random.default_rng(0)
    for _ in range(200):
        sizes = list(rng.integers(0, 400, size=int(rng.integers(0, 20))))
        budget = int(rng.integers(0, 1500))
        items = list(enumerate(sizes))
        packed = pack_budget(items, lambda it: int(it[1]), budget)
        assert sum(s for _, s in packed) <= budget
        assert [i for i, _ in packed] == sorted(i for i, _ in packed)
        # Greedy: every skipped item would not have fitted when it was reached.
        used = 0
        for i, s in items:
            if (i, s) in packed:
                used += s
            else:
                assert used + s > budget


def test_pack_budget_skips_what_does_not_fit():
    items = ["aaaa", "bbbbbbbbbb", "cc", "d"]
    assert pack_budget(items, len, 7) == ["aaaa", "cc", "d"]
    assert pack_budget(items, len, 0) == []
    with pytest.raises(ValueError):
        pack_budget(["x"], lambda _: -1, 10)


# --------------------------------------------------------------------------- near duplicates


def test_dedupe_near_vectors_keeps_first():
    v = np.array([[1.0, 0.0], [0.999, 0.01], [0.0, 1.0], [0.0, 2.0], [0.7, 0.7]])
    assert dedupe_near(v, threshold=0.95) == [0, 2, 4]
    assert dedupe_near(v, threshold=1.01) == [0, 1, 2, 3, 4]
    assert dedupe_near(np.zeros((0, 3))) == []


def test_dedupe_near_texts():
    texts = [
        "Miss Marple found the poisoned pills.",
        "miss marple found the poisoned pills",
        "The vicar walked to the church.",
    ]
    assert dedupe_near(texts, threshold=0.95) == [0, 2]


# --------------------------------------------------------------------------- BM25


def test_tokenize():
    assert tokenize("The Cat, the HAT!") == ["the", "cat", "the", "hat"]
    assert tokenize("The Cat, the HAT!", frozenset({"the"})) == ["cat", "hat"]


def test_bm25_ranks_exact_term_document_first():
    docs = [
        "The vicar walked to the church on Sunday morning.",
        "Dora Bunner took the aspirin tablets before bed.",
        "Letitia Blacklock hosted the party at Little Paddocks.",
        "The colonel read the newspaper by the fire.",
    ]
    index = BM25Index(docs)
    scores = index.scores("Which tablets did she take?")
    assert scores.shape == (4,)
    assert int(np.argmax(scores)) == 1
    top = index.top("Blacklock party", n=2)
    assert top[0][0] == 2
    assert all(s > 0 for _, s in top)
    assert np.array_equal(index.scores("unknown words only"), np.zeros(4))
    assert index.top("the", n=3) == []  # stopwords only
    assert BM25Index([]).scores("anything").shape == (0,)


# --------------------------------------------------------------------------- hybrid


def test_minmax_and_hybrid():
    assert np.allclose(minmax([2.0, 4.0, 3.0]), [0.0, 1.0, 0.5])
    assert np.array_equal(minmax([5.0, 5.0]), [0.0, 0.0])
    dense = np.array([0.8, 0.5, 0.6])
    bm25 = np.array([0.0, 12.0, 3.0])
    assert np.array_equal(np.argsort(-hybrid_scores(dense, bm25, 0.0)), np.argsort(-dense))
    assert np.array_equal(np.argsort(-hybrid_scores(dense, bm25, 1.0)), np.argsort(-bm25))
    mixed = hybrid_scores(dense, bm25, 0.5)
    assert np.allclose(mixed, [0.5, 0.5, 0.5 * (1 / 3) + 0.5 * 0.25])
    with pytest.raises(ValueError):
        hybrid_scores(dense, bm25[:2], 0.5)
