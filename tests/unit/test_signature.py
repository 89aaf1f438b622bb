"""Tests of the MiA signature: set-function properties, greedy quality, First-K and scoring."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mindscape.memory.settings import SignatureParams
from mindscape.memory.signature.sigma import (
    conditioned_scores,
    first_k,
    greedy_select,
    match_matrix,
    normalise_relevance,
    rank_weights,
    session_relevance_from_chunks,
    signature_vector,
    window_mask,
)
from mindscape.retrieval_defaults import literal_params
from tests.signature_oracle import (
    coverage_greedy,
    f_coverage,
    f_diversity,
    f_query,
    signature_scores,
)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def random_instance(
    rng: np.random.Generator, n_sessions: int = 8, n_cands: int = 30, dim: int = 16
):
    """Sessions with summary vectors; candidates lying near their own session's summary."""
    session_ids = [f"s{j}" for j in range(n_sessions)]
    session_vecs = unit(rng.normal(size=(n_sessions, dim)))
    owner = rng.integers(0, n_sessions, size=n_cands)
    cand_vecs = unit(session_vecs[owner] + 0.8 * rng.normal(size=(n_cands, dim)))
    cand_session = [session_ids[j] for j in owner]
    query = unit(rng.normal(size=dim) + session_vecs[owner[0]])
    ranks = np.argsort(np.argsort(-(cand_vecs @ query), kind="stable"), kind="stable")
    return query, cand_vecs, ranks, cand_session, session_ids, session_vecs


def prepared(rng: np.random.Generator, **kw):
    q, cv, ranks, cs, sids, sv = random_instance(rng, **kw)
    m = match_matrix(sv, cv, window_mask(sids, cs), window_boost=0.5)
    rel = normalise_relevance(sv @ q)
    return rel, m, rank_weights(ranks), sv @ sv.T


def random_subset(rng: np.random.Generator, n: int) -> list[int]:
    return [i for i in range(n) if rng.random() < 0.5]


# --------------------------------------------------------------------------- set functions


def test_f_query_is_modular():
    rng = np.random.default_rng(0)
    for _ in range(200):
        rel = rng.normal(size=10)
        perm = rng.permutation(10)
        cut1, cut2 = sorted(rng.integers(0, 11, size=2))
        A, B = list(perm[:cut1]), list(perm[cut1:cut2])
        assert f_query(A + B, rel) == pytest.approx(f_query(A, rel) + f_query(B, rel))
    assert f_query([], rel) == 0.0


def test_f_coverage_is_monotone_and_submodular():
    rng = np.random.default_rng(1)
    for _ in range(300):
        n_s, n_c = int(rng.integers(2, 9)), int(rng.integers(1, 25))
        match = rng.random((n_s, n_c)) * (rng.random((n_s, n_c)) < 0.7)
        w = rank_weights(rng.permutation(n_c))
        B = random_subset(rng, n_s)
        A = [s for s in B if rng.random() < 0.5]  # A ⊆ B
        for s in range(n_s):
            gain_a = f_coverage(A + [s], match, w) - f_coverage(A, match, w)
            gain_b = f_coverage(B + [s], match, w) - f_coverage(B, match, w)
            assert gain_a >= -1e-12  # monotone
            assert gain_a >= gain_b - 1e-12  # diminishing returns


def test_f_diversity_is_a_penalty():
    sim = np.array([[1.0, 0.9, -0.5], [0.9, 1.0, 0.2], [-0.5, 0.2, 1.0]])
    assert f_diversity(0, [], sim) == 0.0
    assert f_diversity(0, [1], sim) == pytest.approx(-0.9)
    assert f_diversity(0, [2], sim) == 0.0  # a dissimilar unit is not a bonus
    assert f_diversity(2, [0, 1], sim) == pytest.approx(-0.2)


def test_normalise_relevance_handles_non_positive_max():
    assert np.allclose(normalise_relevance([0.2, 0.4, -0.1]), [0.5, 1.0, 0.0])
    assert np.array_equal(normalise_relevance([-0.3, -0.1]), [0.0, 0.0])
    assert np.array_equal(normalise_relevance([0.0, 0.0]), [0.0, 0.0])


def test_rank_weights():
    assert np.allclose(rank_weights([0, 1, 3]), [1.0, 0.5, 0.25])
    with pytest.raises(ValueError):
        rank_weights([-1])


def test_match_matrix_window_boost_and_clip():
    s = np.array([[1.0, 0.0], [0.0, 1.0]])
    c = np.array([[1.0, 0.0], [-1.0, 0.0], [0.6, 0.8]])
    in_win = window_mask(["a", "b"], ["a", "b", "zz"])
    m = match_matrix(s, c, in_win, window_boost=0.5)
    assert np.allclose(m, [[1.0, 0.0, 0.6], [0.0, 0.5, 0.8]])
    assert (m >= 0).all() and (m <= 1).all()


# --------------------------------------------------------------------------- greedy


def brute_force_best(rel, match, w, params: SignatureParams) -> float:
    total_cover = match.max(axis=0) @ w
    w_norm = w / total_cover
    best = 0.0
    for size in range(1, params.k + 1):
        for A in itertools.combinations(range(len(rel)), size):
            value = params.lambda_q * f_query(A, rel) + params.lambda_c * f_coverage(
                A, match, w_norm
            )
            best = max(best, value)
    return best


@pytest.mark.parametrize(("lambda_q", "lambda_c"), [(1.0, 1.0), (0.0, 1.0), (0.2, 1.0)])
def test_greedy_reaches_one_minus_one_over_e_of_brute_force(lambda_q, lambda_c):
    rng = np.random.default_rng(2)
    params = literal_params(k=3, lambda_q=lambda_q, lambda_c=lambda_c, lambda_d=0.0)
    worst = math.inf
    for _ in range(30):
        rel, match, w, _ = prepared(rng, n_sessions=8, n_cands=30)
        picks = greedy_select(rel, match, w, None, params)
        A = [j for j, _ in picks]
        w_norm = w / (match.max(axis=0) @ w)
        value = lambda_q * f_query(A, rel) + lambda_c * f_coverage(A, match, w_norm)
        optimum = brute_force_best(rel, match, w, params)
        assert value >= (1 - 1 / math.e) * optimum - 1e-9
        worst = min(worst, value / optimum)
    assert worst > 0.632


def test_gains_are_consistent_and_match_the_objective():
    rng = np.random.default_rng(3)
    params = literal_params(k=5, lambda_q=0.7, lambda_c=1.3, lambda_d=0.25)
    for _ in range(20):
        q, cv, ranks, cs, sids, sv = random_instance(rng, n_sessions=10, n_cands=40)
        units = coverage_greedy(q, cv, ranks, cs, sids, sv, params)
        assert 1 <= len(units) <= params.k
        assert [u.rank for u in units] == list(range(len(units)))
        assert len({u.unit_id for u in units}) == len(units)
        m = match_matrix(sv, cv, window_mask(sids, cs), params.window_boost)
        w = rank_weights(ranks)
        w_norm = w / (m.max(axis=0) @ w)
        rel = normalise_relevance(sv @ q)
        picked: list[int] = []
        for u in units:
            g = u.gains
            assert set(g) == {"query", "coverage", "diversity", "total"}
            assert g["total"] == pytest.approx(
                params.lambda_q * g["query"]
                + params.lambda_c * g["coverage"]
                + params.lambda_d * g["diversity"]
            )
            j = sids.index(u.unit_id)
            assert g["query"] == pytest.approx(rel[j])
            assert g["coverage"] == pytest.approx(
                f_coverage(picked + [j], m, w_norm) - f_coverage(picked, m, w_norm)
            )
            assert g["diversity"] == pytest.approx(f_diversity(j, picked, sv @ sv.T))
            assert g["total"] > 0
            picked.append(j)


def test_greedy_stops_when_no_positive_gain():
    # Two sessions; the second has no relevance and covers nothing new.
    rel = np.array([1.0, 0.0])
    match = np.array([[1.0, 1.0], [0.5, 0.0]])
    w = np.array([1.0, 0.5])
    picks = greedy_select(rel, match, w, None, literal_params(k=5, lambda_d=0.0))
    assert [j for j, _ in picks] == [0]
    # With a redundancy penalty the zero-gain session would even lose value.
    sim = np.array([[1.0, 0.8], [0.8, 1.0]])
    picks = greedy_select(rel, match, w, sim, literal_params(k=5, lambda_d=0.1))
    assert [j for j, _ in picks] == [0]


def test_diversity_breaks_a_tie_against_a_duplicate():
    # Sessions 0 and 1 are identical; 2 is different but equally relevant and covering.
    sv = unit(np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    rel = np.array([1.0, 1.0, 1.0])
    match = np.zeros((3, 1))
    w = np.ones(1)
    no_div = greedy_select(rel, match, w, None, literal_params(k=2, lambda_d=0.0))
    with_div = greedy_select(rel, match, w, sv @ sv.T, literal_params(k=2, lambda_d=0.1))
    assert [j for j, _ in no_div] == [0, 1]
    assert [j for j, _ in with_div] == [0, 2]


def test_coverage_prefers_a_session_covering_many_candidates():
    # Session "wide" holds the top-ranked chunks; "narrow" is slightly more query-similar.
    q = unit(np.array([1.0, 0.2, 0.0, 0.0]))
    sv = unit(np.array([[1.0, 0.25, 0.0, 0.0], [0.9, 0.0, 0.4, 0.0]]))
    sids = ["narrow", "wide"]
    cv = unit(np.array([[0.0, 0.0, 1.0, 0.1]] * 6 + [[0.0, 1.0, 0.0, 0.0]]))
    cs = ["wide"] * 6 + ["narrow"]
    ranks = np.arange(7)
    rel_only = coverage_greedy(q, cv, ranks, cs, sids, sv, literal_params(k=1, lambda_c=0.0))
    covering = coverage_greedy(q, cv, ranks, cs, sids, sv, literal_params(k=1, lambda_c=1.0))
    assert rel_only[0].unit_id == "narrow"
    assert covering[0].unit_id == "wide"
    # the choice is made by the coverage term: wide covers the six best-ranked candidates
    assert covering[0].gains["coverage"] > 2 * rel_only[0].gains["coverage"] > 0
    assert rel_only[0].gains["query"] > covering[0].gains["query"]


def test_coverage_greedy_options():
    rng = np.random.default_rng(4)
    q, cv, ranks, cs, sids, sv = random_instance(rng, n_sessions=6, n_cands=20)
    texts = [f"summary {s}" for s in sids]
    chunks = [[f"{s}:c{i}" for i in range(2)] for s in sids]
    units = coverage_greedy(
        q,
        cv,
        ranks,
        cs,
        sids,
        sv,
        literal_params(k=3),
        session_texts=texts,
        session_chunk_ids=chunks,
    )
    for u in units:
        j = sids.index(u.unit_id)
        assert u.text == texts[j] and u.chunk_ids == chunks[j]
    # A caller's relevance and match replace the computed ones.
    rel = np.zeros(len(sids))
    rel[4] = 1.0
    units = coverage_greedy(
        q,
        cv,
        ranks,
        cs,
        sids,
        sv,
        literal_params(k=1, lambda_d=0.0),
        session_rel=rel,
        match=np.zeros((len(sids), len(cs))),
    )
    assert [u.unit_id for u in units] == ["s4"]
    # k0 drops low-ranked candidates from coverage.
    units_small = coverage_greedy(
        q, cv, ranks, cs, sids, sv, literal_params(k=2, k0=1, lambda_q=0.0)
    )
    assert units_small[0].unit_id == cs[int(np.argmin(ranks))]
    assert len(units_small) == 1  # its best match is picked; nothing is left to cover
    # Relevance from member chunks.
    units_chunks = coverage_greedy(q, cv, ranks, cs, sids, sv, literal_params(relevance="chunks"))
    assert units_chunks
    assert coverage_greedy(q, cv, ranks, cs, [], np.zeros((0, cv.shape[1]))) == []


def test_session_relevance_from_chunks():
    rel = session_relevance_from_chunks(
        [0.3, 0.9, 0.5], ["a", "b", "a"], ["a", "b", "c"], fill=-1.0
    )
    assert np.allclose(rel, [0.5, 0.9, -1.0])


# --------------------------------------------------------------------------- First-K


def test_first_k_hand_built():
    sessions = ["s1", "s1", "s2", "s3", "s2", "s4"]
    ranks = [0, 1, 2, 3, 4, 5]
    assert first_k(ranks, sessions, 3) == ["s1", "s2", "s3"]
    assert first_k(ranks, sessions, 3, per_chunk=True) == ["s1", "s2"]
    assert first_k(ranks, sessions, 10) == ["s1", "s2", "s3", "s4"]  # fewer than K exist
    assert first_k(ranks, sessions, 0) == []
    # Ranks out of input order: rank order wins; equal ranks keep input order.
    assert first_k([3, 0, 1, 1], ["d", "a", "b", "c"], 4) == ["a", "b", "c", "d"]
    assert first_k([0, 1, 2], [None, "x", "x"], 2) == ["x"]


# --------------------------------------------------------------------------- scoring


def test_signature_vector_and_scores():
    units = np.array([[2.0, 0.0], [0.0, 1.0]])
    mean = signature_vector(units, "mean")
    assert np.allclose(mean, unit(np.array([1.0, 1.0])))
    assert signature_vector(units, "max").shape == (2, 2)
    targets = np.array([[1.0, 0.0], [0.0, 3.0], [1.0, 1.0]])
    assert np.allclose(signature_scores(units, targets, "max"), [1.0, 1.0, 1 / np.sqrt(2)])
    assert np.allclose(
        signature_scores(units, targets, "mean"), [1 / np.sqrt(2), 1 / np.sqrt(2), 1.0]
    )
    assert np.allclose(
        signature_scores(np.array([0.0, 1.0]), targets, "joined"), [0.0, 1.0, 1 / np.sqrt(2)]
    )
    assert np.array_equal(signature_scores(np.zeros((0, 2)), targets, "max"), np.zeros(3))
    with pytest.raises(ValueError):
        signature_scores(units, targets, "joined")


def test_conditioned_scores_alpha_extremes():
    rng = np.random.default_rng(5)
    for _ in range(50):
        q = rng.normal(size=40)
        s = rng.normal(size=40)
        q[rng.integers(0, 40, size=5)] = q[0]  # ties must keep their order too
        by_query = np.argsort(-q, kind="stable")
        assert np.array_equal(np.argsort(-conditioned_scores(q, s, 0.0), kind="stable"), by_query)
        assert np.array_equal(conditioned_scores(q, s, 0.0), q)
        assert np.array_equal(
            np.argsort(-conditioned_scores(q, s, 1.0), kind="stable"), np.argsort(-s, kind="stable")
        )
        assert np.allclose(conditioned_scores(q, s, 0.5), (q + s) / 2)
    with pytest.raises(ValueError):
        conditioned_scores(q, s, 1.5)
