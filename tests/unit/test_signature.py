"""Tests of the MiA signature: set-function properties, greedy quality, First-K and scoring.

The production code (``sigma``, ``select.select_signature``, ``conditioning``) is checked
against the literal reference in ``tests/signature_oracle.py`` on seeded random scopes
(``tests/random_scope.py``), and on hand-made cases."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from mindscape.memory.settings import RetrievalSettings, SignatureParams
from mindscape.memory.signature.conditioning import (
    QueryPlan,
    gated_alpha,
    layer_scores,
    resolve_signature,
)
from mindscape.memory.signature.conditioning import signature_scores as prod_signature_scores
from mindscape.memory.signature.select import gains_of, select_signature
from mindscape.memory.signature.sigma import (
    _unit_rows,
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
from mindscape.memory.store import LayerView
from mindscape.memory.types import SignatureUnit, Unit
from mindscape.run import default_params, default_settings, literal_params
from tests.random_scope import random_case, scope_of
from tests.signature_oracle import (
    coverage_greedy,
    f_coverage,
    f_diversity,
    f_query,
    literal_greedy,
    signature_scores,
)
from tests.signature_oracle import member_match as oracle_member_match


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


def test_query_gain_is_modular():
    """Production's Δf̃Q of a session is its normalised relevance whatever was picked before,
    and the query gains of a pick order add up to the oracle's f_query of the set."""
    rng = np.random.default_rng(0)
    params = literal_params(k=10)
    for _ in range(200):
        rel, match, w, sim = prepared(rng, n_sessions=int(rng.integers(2, 10)))
        order = [int(j) for j in rng.permutation(len(rel))]
        gains = gains_of(order, rel, match, w, sim, params)
        assert [g["query"] for _, g in gains] == pytest.approx([rel[j] for j in order])
        cut = int(rng.integers(0, len(order) + 1))
        head = sum(g["query"] for _, g in gains[:cut])
        assert head == pytest.approx(f_query(order[:cut], normalise_relevance(rel)))
    assert f_query([], rel) == 0.0


def test_coverage_gain_is_monotone_and_submodular():
    """Production's marginal coverage (``gains_of``, the arithmetic greedy uses too) equals the
    oracle's fC difference, is never negative, and shrinks as the set grows (A ⊆ B)."""
    rng = np.random.default_rng(1)
    params = literal_params(k=10)
    for _ in range(300):
        n_s, n_c = int(rng.integers(2, 9)), int(rng.integers(1, 25))
        match = rng.random((n_s, n_c)) * (rng.random((n_s, n_c)) < 0.7)
        w = rank_weights(rng.permutation(n_c))
        rel, sim = rng.random(n_s), np.zeros((n_s, n_s))
        w_norm = w / (match.max(axis=0) @ w) if (match.max(axis=0) @ w) > 0 else 0 * w
        s = int(rng.integers(0, n_s))
        B = [j for j in random_subset(rng, n_s) if j != s]
        A = [j for j in B if rng.random() < 0.5]  # A ⊆ B
        gain_a = gains_of(A + [s], rel, match, w, sim, params)[-1][1]["coverage"]
        gain_b = gains_of(B + [s], rel, match, w, sim, params)[-1][1]["coverage"]
        assert gain_a == pytest.approx(
            f_coverage(A + [s], match, w_norm) - f_coverage(A, match, w_norm)
        )
        assert gain_a >= -1e-12  # monotone
        assert gain_a >= gain_b - 1e-12  # diminishing returns


def test_diversity_is_a_penalty():
    sim = np.array([[1.0, 0.9, -0.5], [0.9, 1.0, 0.2], [-0.5, 0.2, 1.0]])
    rel, match, w = np.ones(3), np.zeros((3, 1)), np.ones(1)
    params = literal_params(k=3, lambda_d=0.1)

    def diversity(order: list[int]) -> list[float]:
        return [g["diversity"] for _, g in gains_of(order, rel, match, w, sim, params)]

    assert diversity([0, 1]) == pytest.approx([0.0, -0.9])
    assert diversity([2, 0]) == [0.0, 0.0]  # a dissimilar unit is not a bonus
    assert diversity([0, 1, 2]) == pytest.approx([0.0, -0.9, -0.2])
    # greedy reports the same penalty, and the oracle's fD agrees
    picks = greedy_select(rel, match, w, sim, params)
    assert [j for j, _ in picks] == [0, 2, 1]
    assert [g["diversity"] for _, g in picks] == pytest.approx([0.0, 0.0, -0.9])
    assert f_diversity(0, [1], sim) == pytest.approx(-0.9) and f_diversity(0, [2], sim) == 0.0


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
    """select_signature's units: at most K, distinct, ranked in pick order, each total the
    λ-weighted sum of its terms and positive (the term values themselves are checked against
    the oracle in test_select_signature_agrees_with_the_oracle)."""
    rng = np.random.default_rng(3)
    params = default_params(k=5, lambda_q=0.7, lambda_c=1.3, lambda_d=0.25)
    for _ in range(50):
        case = random_case(rng)
        units = select_signature(case.scope, case.query, case.embed, params)
        assert 1 <= len(units) <= params.k
        assert [u.rank for u in units] == list(range(len(units)))
        assert len({u.unit_id for u in units}) == len(units)
        for u in units:
            g = u.gains
            assert set(g) == {"query", "coverage", "diversity", "total"}
            assert g["total"] == pytest.approx(
                params.lambda_q * g["query"]
                + params.lambda_c * g["coverage"]
                + params.lambda_d * g["diversity"]
            )
            assert g["total"] > 0


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


def greedy_ids(q, cv, ranks, cs, sids, sv, params: SignatureParams):
    """Production's greedy over arrays prepared with production's helpers (summary relevance,
    summary match with the window boost): the picked session ids and their gains."""
    rel = normalise_relevance(unit(sv) @ unit(q))
    m = match_matrix(sv, cv, window_mask(sids, cs), params.window_boost)
    picks = greedy_select(rel, m, rank_weights(ranks), unit(sv) @ unit(sv).T, params)
    return [(sids[j], g) for j, g in picks]


def test_coverage_prefers_a_session_covering_many_candidates():
    # Session "wide" holds the top-ranked chunks; "narrow" is slightly more query-similar.
    q = unit(np.array([1.0, 0.2, 0.0, 0.0]))
    sv = unit(np.array([[1.0, 0.25, 0.0, 0.0], [0.9, 0.0, 0.4, 0.0]]))
    sids = ["narrow", "wide"]
    cv = unit(np.array([[0.0, 0.0, 1.0, 0.1]] * 6 + [[0.0, 1.0, 0.0, 0.0]]))
    cs = ["wide"] * 6 + ["narrow"]
    ranks = np.arange(7)
    rel_only = greedy_ids(q, cv, ranks, cs, sids, sv, literal_params(k=1, lambda_c=0.0))
    covering = greedy_ids(q, cv, ranks, cs, sids, sv, literal_params(k=1, lambda_c=1.0))
    assert rel_only[0][0] == "narrow"
    assert covering[0][0] == "wide"
    # the choice is made by the coverage term: wide covers the six best-ranked candidates
    assert covering[0][1]["coverage"] > 2 * rel_only[0][1]["coverage"] > 0
    assert rel_only[0][1]["query"] > covering[0][1]["query"]
    # the oracle chooses the same
    for params, want in (
        (literal_params(k=1, lambda_c=0.0), "narrow"),
        (literal_params(k=1), "wide"),
    ):
        assert [u.unit_id for u in coverage_greedy(q, cv, ranks, cs, sids, sv, params)] == [want]


def test_select_signature_options():
    rng = np.random.default_rng(4)
    case = random_case(rng, max_docs=1)
    sc, embed = case.scope, case.embed
    sessions = {u.id: u for u in sc.sessions.units}
    for u in select_signature(sc, case.query, embed, default_params(k=3)):
        assert u.text == sessions[u.unit_id].text
        assert u.chunk_ids == sessions[u.unit_id].chunk_ids
    # K0 = 1: the only candidate session is the top chunk's, and nothing is left to cover
    top = int(np.argmax(sc.chunk_vecs @ case.qvec))
    only = select_signature(sc, case.query, embed, literal_params(k=3, k0=1, lambda_q=0.0))
    assert [u.unit_id for u in only] == [sc.sessions.units[sc.chunk_session[top]].id]
    for relevance in ("summary", "chunks", "mean"):
        assert select_signature(sc, case.query, embed, default_params(relevance=relevance))
    with pytest.raises(ValueError):
        select_signature(sc, case.query, embed, default_params(), method="top")
    with pytest.raises(ValueError):
        select_signature(sc, case.query, embed, default_params(match="nope"))  # type: ignore[arg-type]
    assert select_signature(scope_of({}), case.query, embed, default_params()) == []


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


# --------------------------------------------------------------------------- production against the oracle


def random_params(rng: np.random.Generator) -> SignatureParams:
    """Signature settings drawn over every option (λs sometimes 0, K0 sometimes tiny)."""

    def weight(*fixed: float) -> float:
        return float(rng.choice(fixed)) if rng.random() < 0.5 else float(rng.random() * 1.5)

    return default_params(
        k=int(rng.integers(1, 7)),
        k0=int(rng.choice([1, 3, 10, 50])),
        lambda_q=weight(0.0, 1.0),
        lambda_c=weight(0.0, 1.0),
        lambda_d=weight(0.0, 0.1),
        relevance=str(rng.choice(["summary", "chunks", "mean"])),
        match=str(rng.choice(["summary", "members", "window"])),
        activation=str(rng.choice(["dense", "hybrid"])),
        hybrid_weight=float(rng.random()),
        window_boost=float(rng.choice([0.0, 0.5, rng.random()])),
        min_gain=float(rng.choice([0.0, 0.0, 0.05])),
    )


def literal_minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def literal_activation(case, params: SignatureParams) -> tuple[list[int], np.ndarray]:
    """E1 written out: the K0 best chunk rows (ties to the lower row) and every chunk's score,
    the dense cosine or ``(1-w)·minmax(dense) + w·minmax(BM25)``."""
    sc = case.scope
    dense = sc.chunk_vecs.astype(np.float64) @ case.qvec.astype(np.float64)
    score = dense
    if params.activation == "hybrid":
        bm25 = np.asarray(sc.bm25_scores(case.query), dtype=np.float64)
        w = params.hybrid_weight
        score = (1 - w) * literal_minmax(dense) + w * literal_minmax(bm25)
    top = sorted(range(sc.n_chunks), key=lambda i: (-score[i], i))[: params.k0]
    return top, score


def oracle_signature(case, params: SignatureParams, method: str):
    """The oracle's signature of a random case, from the scope's units and vectors only."""
    sc = case.scope
    chunks, cvecs = sc.chunks.units, sc.chunk_vecs.astype(np.float64)
    top, score = literal_activation(case, params)
    session_of = {c: u for u in sc.sessions.units for c in u.chunk_ids}
    cand_session = [session_of[chunks[i].id].id for i in top]
    session_ids = list(dict.fromkeys(cand_session))  # ordered by their best candidate
    by_id = {u.id: (u, v) for u, v in zip(sc.sessions.units, sc.sessions.vecs, strict=True)}
    vec_of = {u.id: v for u, v in zip(chunks, cvecs, strict=True)}
    members = [np.array([vec_of[c] for c in by_id[s][0].chunk_ids]) for s in session_ids]
    match = None  # the oracle's summary cosine with the window boost
    if params.match == "members":
        match = oracle_member_match(cvecs[top], members)
    elif params.match == "window":
        match = np.array([[float(c == s) for c in cand_session] for s in session_ids])
    return coverage_greedy(
        case.qvec,
        cvecs[top],
        range(len(top)),
        cand_session,
        session_ids,
        np.array([by_id[s][1] for s in session_ids]),
        params,
        cand_scores=score[top],
        match=match,
        session_texts=[by_id[s][0].text for s in session_ids],
        session_chunk_ids=[by_id[s][0].chunk_ids for s in session_ids],
        method=method,
    )


@pytest.mark.parametrize("method", ["coverage", "first-k"])
def test_select_signature_agrees_with_the_oracle(method):
    """200 seeded random scopes and settings: select_signature (index arrays, vectorised greedy)
    picks the oracle's sessions in the oracle's order with the oracle's gains."""
    for seed in range(200):
        rng = np.random.default_rng(seed)
        case, params = random_case(rng), random_params(rng)
        got = select_signature(case.scope, case.query, case.embed, params, method)
        want = oracle_signature(case, params, method)
        assert [u.unit_id for u in got] == [u.unit_id for u in want], (seed, params)
        for g, w in zip(got, want, strict=True):
            assert g.gains == pytest.approx(w.gains, abs=1e-6), (seed, params)
            assert (g.text, g.chunk_ids, g.rank) == (w.text, w.chunk_ids, w.rank)


def test_the_oracle_imports_no_production_code():
    """The oracle writes σ, the match matrix, the window mask and their helpers out from the
    paper's definitions: it imports nothing from mindscape, so a bug there cannot be shared."""
    import ast
    from pathlib import Path

    import tests.signature_oracle as oracle_module

    tree = ast.parse(Path(oracle_module.__file__).read_text())
    imported = [
        name
        for node in ast.walk(tree)
        for name in (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
    ]
    assert imported and not [m for m in imported if m.split(".")[0] == "mindscape"], imported


def _no_window_boost(session_vecs, cand_vecs, in_window=None, window_boost=0.5):
    """A bug to plant in production's match_matrix: the window boost forgotten."""
    return np.asarray(np.clip(_unit_rows(session_vecs) @ _unit_rows(cand_vecs).T, 0.0, 1.0))


def test_a_bug_in_productions_match_matrix_shows_against_the_oracle(monkeypatch):
    """The oracle does not share production's helpers: with a bug planted in the code of
    sigma.match_matrix itself (every caller of the function sees it), select_signature
    disagrees with the oracle on some of the 200 seeded scopes."""
    from mindscape.memory.signature import sigma

    monkeypatch.setattr(sigma.match_matrix, "__code__", _no_window_boost.__code__)
    differ = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        case, params = random_case(rng), random_params(rng)
        got = select_signature(case.scope, case.query, case.embed, params, "coverage")
        want = oracle_signature(case, params, "coverage")
        ids = ([u.unit_id for u in got], [u.unit_id for u in want])
        gains = [(g.gains, w.gains) for g, w in zip(got, want, strict=False)]
        differ += ids[0] != ids[1] or any(g != pytest.approx(w, abs=1e-6) for g, w in gains)
    assert differ > 0


def test_greedy_select_agrees_with_the_literal_greedy():
    """greedy_select against the oracle's greedy, which re-evaluates the set functions for
    every candidate at every step, on 200 random prepared cases (λD on and off)."""
    rng = np.random.default_rng(6)
    for _ in range(200):
        rel, match, w, sim = prepared(
            rng, n_sessions=int(rng.integers(1, 10)), n_cands=int(rng.integers(1, 30))
        )
        params = random_params(rng)
        got = greedy_select(rel, match, w, sim, params)
        want = literal_greedy(rel, match, w, sim, params)
        assert [j for j, _ in got] == [j for j, _ in want]
        for (_, g), (_, o) in zip(got, want, strict=True):
            assert g == pytest.approx(o, abs=1e-9)


# --------------------------------------------------------------------------- scoring


def hand_plan(mode: str, alpha: float = 0.5) -> QueryPlan:
    """A one-document scope of three chunks (t0, t1, t2) and two sessions (a = {t0},
    b = {t1}) whose summary vectors point along the two axes; the signature is both sessions,
    the joined text embeds along the second axis."""
    targets = unit(np.array([[1.0, 0.0], [0.0, 3.0], [1.0, 1.0]]))
    chunks = [Unit(f"t{i}", "doc", "veridical", f"chunk {i}", [f"t{i}"]) for i in range(3)]
    sessions = [
        Unit("a", "doc", "episodic", "session a", ["t0"]),
        Unit("b", "doc", "episodic", "session b", ["t1"]),
    ]
    sc = scope_of(
        {
            "veridical": LayerView("veridical", chunks, targets.astype(np.float32)),
            "episodic": LayerView("episodic", sessions, np.eye(2, dtype=np.float32)),
        }
    )
    sig = [SignatureUnit(u.id, u.text, u.chunk_ids, gains={"coverage": 0.5}) for u in sessions]
    axis = np.array([0.0, 1.0], np.float32)
    sa = resolve_signature(sc, sig, embed=(lambda _: axis) if mode == "joined" else None)
    settings = default_settings(signature_mode=mode, alpha=alpha, doc_context="plain")
    return QueryPlan(sc, "q", unit(np.array([1.0, 0.0])).astype(np.float32), sa, alpha, settings)


def test_signature_vector_and_scores():
    units = np.array([[2.0, 0.0], [0.0, 1.0]])
    mean = signature_vector(units, "mean")
    assert np.allclose(mean, unit(np.array([1.0, 1.0])))
    assert signature_vector(units, "max").shape == (2, 2)
    r = 1 / np.sqrt(2)
    want = {
        "max": [1.0, 1.0, r],
        "mean": [r, r, 1.0],
        "joined": [0.0, 1.0, r],
        "members": [1.0, 1.0, r],  # t2's nearest member chunk is t0 (or t1)
        "window": [1.0, 1.0, 0.0],  # t2 lies in no signature window
        "region": [1.0, 1.0, 1.0],  # ρ = 1 and one document: the document term only
    }
    for mode, scores in want.items():
        plan = hand_plan(mode)
        assert prod_signature_scores(plan, "veridical") == pytest.approx(scores, abs=1e-6), mode
        # the session layer: a unit scores the mean over its chunks (window-based modes) or its
        # own vector (vector modes); session a is t0's window, b is t1's
        assert len(prod_signature_scores(plan, "episodic")) == 2
    # the oracle's vector-level scores agree on the vector modes
    targets = np.array([[1.0, 0.0], [0.0, 3.0], [1.0, 1.0]])
    for mode in ("max", "mean"):
        assert np.allclose(signature_scores(units, targets, mode), want[mode])
    assert np.allclose(signature_scores(np.array([0.0, 1.0]), targets, "joined"), want["joined"])
    assert np.array_equal(signature_scores(np.zeros((0, 2)), targets, "max"), np.zeros(3))
    with pytest.raises(ValueError):
        signature_scores(units, targets, "joined")
    # no signature: 0 everywhere, and the fused score is the query score
    plan = dataclasses.replace(hand_plan("mean"), sig=None)
    assert np.array_equal(prod_signature_scores(plan, "veridical"), np.zeros(3))
    s_q, s_sig, fused = layer_scores(plan, "veridical", hybrid=False)
    assert np.array_equal(fused, s_q) and np.array_equal(s_sig, np.zeros(3))


def literal_signature_scores(
    plan: QueryPlan, sig: list[SignatureUnit], layer: str, *, graded: bool
):
    """s(σ, u) for every unit of a layer, written out from the units (the modes of
    docs/retrieval.md, step 5), with the oracle's vector-level scores for mean, max, joined."""
    sc, st, mode = plan.scope, plan.settings, plan.settings.signature_mode
    view = sc.views[layer]
    targets = view.vecs.astype(np.float64)
    found = [(su, sc.views["episodic"].row_of[su.unit_id]) for su in sig]
    sig_vecs = np.array([sc.views["episodic"].vecs[row] for _, row in found], dtype=np.float64)
    if mode in ("mean", "max"):
        return signature_scores(sig_vecs, targets, mode)
    if mode == "joined":
        return signature_scores(plan.sig.joined_vec[None, :], targets, "joined")
    chunk_vec = {u.id: v for u, v in zip(sc.chunks.units, sc.chunk_vecs, strict=True)}
    if mode == "members":
        member_ids = {c for su, _ in found for c in su.chunk_ids}
        members = _unit_rows(np.array([chunk_vec[c] for c in member_ids], dtype=np.float64))
        return (_unit_rows(targets) @ members.T).max(axis=1)
    # window and region: a value per chunk, then each unit's mean over its chunks
    weight = {su.unit_id: max(su.gains["coverage"] + 1e-6 * su.gains["query"], 0.0) for su in sig}
    top = max(weight.values())
    in_win = {c: 0.0 for c in chunk_vec}
    for su in sig:
        for c in su.chunk_ids:
            x = (weight[su.unit_id] / top if top > 0 else 1.0) if graded else 1.0
            in_win[c] = max(in_win[c], x)
    doc_of_unit = {u.id: u.doc_id for u in sc.views["episodic"].units}
    total = sum(weight.values())
    share: dict[str, float] = {}
    for su in sig:
        w = weight[su.unit_id] / total if total > 0 else 1.0 / len(sig)
        share[doc_of_unit[su.unit_id]] = share.get(doc_of_unit[su.unit_id], 0.0) + w
    doc_of_chunk = {u.id: u.doc_id for u in sc.chunks.units}
    rho = st.region_doc_weight
    value = {
        c: in_win[c]
        if mode == "window"
        else (1 - rho) * in_win[c] + rho * share.get(doc_of_chunk[c], 0.0)
        for c in chunk_vec
    }
    return np.array(
        [np.mean([value[c] for c in u.chunk_ids]) if u.chunk_ids else 0.0 for u in view.units]
    )


def literal_alpha(case, sig: list[SignatureUnit], settings: RetrievalSettings) -> float:
    """α after the gate, written out: α·conf^p with conf the rank-weighted share of the K0
    activation in the document holding the largest share of the signature (the first on ties)."""
    sc = case.scope
    if not sig or settings.alpha == 0.0:
        return 0.0
    if settings.gate == "none" or len(sc.docs) <= 1:
        return settings.alpha
    doc_of_unit = {u.id: u.doc_id for u in sc.views["episodic"].units}
    weight = [max(su.gains["coverage"] + 1e-6 * su.gains["query"], 0.0) for su in sig]
    weight = weight if sum(weight) > 0 else [1.0] * len(sig)
    share = {
        d: sum(w for su, w in zip(sig, weight, strict=True) if doc_of_unit[su.unit_id] == d)
        for d in sc.docs
    }
    main = max(sc.docs, key=lambda d: (share[d], -sc.docs.index(d)))
    top, _ = literal_activation(case, settings.signature_params)
    w = [1 / (r + 1) for r in range(len(top))]
    inside = sum(wi for wi, i in zip(w, top, strict=True) if sc.chunks.units[i].doc_id == main)
    return settings.alpha * (inside / sum(w)) ** settings.gate_power


def test_conditioned_scoring_agrees_with_the_literal_definitions():
    """200 seeded random scopes, each with a signature select_signature chose: every mode's
    s(σ, u) on every layer, the gated α and the fused score match the written-out definitions."""
    modes = ["mean", "max", "joined", "members", "window", "region"]
    for seed in range(200):
        rng = np.random.default_rng(seed)
        case = random_case(rng)
        params = random_params(rng)
        sig = select_signature(case.scope, case.query, case.embed, params)
        if not sig:
            continue
        graded = bool(rng.random() < 0.5)
        joined = unit(rng.normal(size=case.qvec.shape)).astype(np.float32)
        settings = default_settings(
            signature_mode=str(rng.choice(modes)),
            alpha=float(rng.choice([0.0, 0.5, 1.0, rng.random()])),
            gate=str(rng.choice(["none", "doc"])),
            gate_power=float(rng.choice([1.0, 2.0])),
            region_doc_weight=float(rng.random()),
            doc_context="plain",
            signature_params=params,
        )
        sa = resolve_signature(
            case.scope,
            sig,
            embed=(lambda _, v=joined: v) if settings.signature_mode == "joined" else None,
            graded=graded,
        )
        alpha = gated_alpha(case.scope, case.query, case.qvec, sa, settings)
        assert alpha == pytest.approx(literal_alpha(case, sig, settings), abs=1e-9), seed
        plan = QueryPlan(case.scope, case.query, case.qvec, sa, alpha, settings)
        for layer in ("veridical", "episodic", "semantic"):
            if not len(case.scope.views[layer]):
                continue  # layer_scores returns before scoring an empty layer
            got = prod_signature_scores(plan, layer)
            want = literal_signature_scores(plan, sig, layer, graded=graded)
            assert got == pytest.approx(want, abs=1e-5), (seed, layer, settings.signature_mode)
            s_q, s_sig, fused = layer_scores(plan, layer, hybrid=False)
            vecs = case.scope.views[layer].vecs.astype(np.float64)
            assert s_q == pytest.approx(vecs @ case.qvec.astype(np.float64), abs=1e-5)
            assert fused == pytest.approx((1 - alpha) * s_q + alpha * s_sig, abs=1e-9)


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
