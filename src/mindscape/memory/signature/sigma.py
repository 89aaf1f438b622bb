"""The MiA signature: a few session summaries chosen to stand for what a query activates.

Pure numpy; nothing here touches a store or a model. The caller embeds, this module selects
and scores. It runs once per query, so everything is vectorised over (sessions x candidates).

How the coverage-aware selection works (MiA-Signature, Appendix A):

1. A query-only retrieval gives candidate chunks ``c_1..c_N`` (N <= K0) with 0-based ranks ``r_i``.
2. The candidate sessions ``S`` are the session windows those chunks lie in.
3. Greedy picks at most K sessions, each time the one with the largest marginal gain

       Δ(s|A) = λQ·Δf̃Q(s|A) + λC·Δf̃C(s|A) + λD·fD(s|A)

   * ``fQ(A) = Σ_{s∈A} rel(q,s)``: query relevance, modular. ``f̃Q`` uses
     ``rel⁺(q,s) / max_{s'∈S} rel⁺(q,s')`` with ``rel⁺ = max(rel, 0)``, so every term is in
     [0, 1] (all terms are 0 when no session has positive relevance).
   * ``fC(A) = Σ_i w_i · max_{s∈A} m(s,c_i)`` with ``w_i = 1/(r_i+1)``: a weighted
     max-coverage of the candidates, monotone submodular. ``f̃C = fC / fC(S)``: dividing by a
     constant that does not depend on A keeps monotone submodularity, and since fC is
     monotone, ``fC(S)`` is its maximum, so ``f̃C`` lies in [0, 1].
   * ``fD(s|A) = -max(0, max_{a∈A} cos(s,a))`` (0 when A is empty): a redundancy penalty,
     never a bonus. It breaks monotonicity, so it is meant as a small tie-breaker.

   With ``λD = 0`` the objective ``λQ·f̃Q + λC·f̃C`` is monotone submodular and greedy is
   within ``1-1/e`` of the best set of size <= K.
4. Selection stops early when no remaining session has a total gain above ``min_gain``
   (0 by default): adding it would not improve the objective.

The production path is :func:`greedy_select` over arrays the retriever prepares from the
index; the First-K ablation (:func:`first_k`) takes the sessions of the top-ranked chunks
instead. Scoring under a signature is :func:`signature_vector` and :func:`conditioned_scores`.
Reference implementations that the tests check the fast paths against (the objective's terms
f_query, f_coverage, f_diversity, a vector-level ``coverage_greedy``, ``member_match``,
``signature_scores``) live in ``tests/signature_oracle.py``.

Session representations beyond the summary vector (used by the retriever, see
``docs/retrieval.md``): the retriever matches a session to a chunk through the session's
*member chunks* (max cosine, so a chunk of the window matches itself with 1);
:func:`region_scores` scores a chunk by whether it lies in the signature's windows and how
much of the signature's coverage its document holds; :func:`activation_confidence` is the
share of the query's rank-weighted activation that falls in the signature's main document,
used to scale α.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np

from mindscape.memory.settings import SignatureParams

SignatureMode = Literal["mean", "max", "joined"]

__all__ = [
    "SignatureParams",
    "greedy_select",
    "first_k",
    "rank_weights",
    "window_mask",
    "match_matrix",
    "normalise_relevance",
    "session_relevance_from_chunks",
    "signature_vector",
    "conditioned_scores",
    "region_scores",
    "doc_shares",
    "activation_confidence",
]


# --------------------------------------------------------------------------- helpers


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float64."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.asarray(np.divide(x, norms, out=np.zeros_like(x), where=norms > 0))


def _as_index(A: Sequence[int] | np.ndarray) -> np.ndarray:
    return np.asarray(list(A) if not isinstance(A, np.ndarray) else A, dtype=np.intp)


def rank_weights(ranks: Sequence[int] | np.ndarray) -> np.ndarray:
    """Coverage weights ``w_i = 1/(r_i+1)`` for 0-based ranks (the top chunk weighs 1)."""
    r = np.asarray(ranks, dtype=np.float64)
    if np.any(r < 0):
        raise ValueError("ranks must be 0-based and non-negative")
    return 1.0 / (r + 1.0)


def window_mask(
    session_ids: Sequence[Hashable], cand_session: Sequence[Hashable] | np.ndarray
) -> np.ndarray:
    """Boolean (sessions x candidates) matrix: True where candidate i lies in session s's window."""
    row = {sid: j for j, sid in enumerate(session_ids)}
    mask = np.zeros((len(session_ids), len(cand_session)), dtype=bool)
    for i, sid in enumerate(cand_session):
        j = row.get(sid)
        if j is not None:
            mask[j, i] = True
    return mask


def match_matrix(
    session_vecs: np.ndarray,
    cand_vecs: np.ndarray,
    in_window: np.ndarray | None = None,
    window_boost: float = 0.5,
) -> np.ndarray:
    """Semantic match m(s, c_i) for every session and candidate, in [0, 1].

    ``m = min(1, clip(cos(s, c_i), 0, 1) + window_boost · [c_i in the window of s])``.
    """
    m = np.clip(_unit_rows(session_vecs) @ _unit_rows(cand_vecs).T, 0.0, 1.0)
    if in_window is not None and window_boost:
        m = np.minimum(1.0, m + window_boost * in_window)
    return np.asarray(m)


def normalise_relevance(rel: Sequence[float] | np.ndarray) -> np.ndarray:
    """``rel⁺ / max(rel⁺)`` with ``rel⁺ = max(rel, 0)``; all zeros when no relevance is positive.

    Clipping at 0 keeps f̃Q monotone (a session can never lower the objective by relevance).
    """
    r = np.maximum(np.asarray(rel, dtype=np.float64), 0.0)
    top = r.max(initial=0.0)
    return r / top if top > 0 else np.zeros_like(r)


def session_relevance_from_chunks(
    query_chunk_scores: Sequence[float] | np.ndarray,
    cand_session: Sequence[Hashable] | np.ndarray,
    session_ids: Sequence[Hashable],
    fill: float = 0.0,
) -> np.ndarray:
    """Relevance of each session from its member evidence: the best s(q, c) among its candidates.

    Sessions with no candidate chunk get ``fill``.
    """
    scores = np.asarray(query_chunk_scores, dtype=np.float64)
    mask = window_mask(session_ids, cand_session)
    out = np.where(mask, scores[None, :], -np.inf).max(axis=1, initial=-np.inf)
    return np.where(np.isfinite(out), out, fill)


# --------------------------------------------------------------------------- set functions


# --------------------------------------------------------------------------- greedy


GAINS = ("query", "coverage", "diversity", "total")
"""The gains :func:`greedy_select` reports for each pick."""


def greedy_select(
    rel_norm: np.ndarray,
    match: np.ndarray,
    weights: np.ndarray,
    sim: np.ndarray | None,
    params: SignatureParams,
) -> list[tuple[int, dict[str, float]]]:
    """Greedy maximisation of Δ(s|A) over prepared arrays (the retriever's signature path).

    Args:
        rel_norm: (M,) normalised relevance, the per-session terms of f̃Q.
        match: (M, N) match m(s, c_i) in [0, 1].
        weights: (N,) coverage weights ``w_i``; they are divided by ``fC(S)`` here, so f̃C
            is used.
        sim: (M, M) session-session cosine for fD; may be None when ``params.lambda_d == 0``.
        params: λs, K and ``min_gain``.

    Returns:
        ``(session index, gains)`` in pick order; gains has ``query`` (Δf̃Q), ``coverage``
        (Δf̃C), ``diversity`` (fD) and ``total`` (their λ-weighted sum).
    """
    rel_norm, match, w = _greedy_inputs(rel_norm, match, weights, sim, params)
    n_sessions = rel_norm.shape[0]
    total_cover = float(match.max(axis=0, initial=0.0) @ w) if n_sessions else 0.0
    w_norm = w / total_cover if total_cover > 0 else np.zeros_like(w)

    cover = np.zeros(w.shape[0])  # max_{a∈A} m(a, c_i) so far
    redundancy = np.zeros(n_sessions)  # max(0, max_{a∈A} sim(s, a)) so far
    available = np.ones(n_sessions, dtype=bool)
    picks: list[tuple[int, dict[str, float]]] = []
    for _ in range(min(params.k, n_sessions)):
        gain_c = (np.maximum(match, cover) - cover) @ w_norm
        gain_d = 0.0 - redundancy  # 0.0 - x, not -x: no -0.0 in gains
        total = params.lambda_q * rel_norm + params.lambda_c * gain_c + params.lambda_d * gain_d
        total = np.where(available, total, -np.inf)
        best = int(np.argmax(total))  # ties go to the first session in input order
        if not total[best] > params.min_gain:
            break
        gains = zip(GAINS, (rel_norm, gain_c, gain_d, total), strict=True)
        picks.append((best, {name: float(values[best]) for name, values in gains}))
        available[best] = False
        cover = np.maximum(cover, match[best])
        if sim is not None:
            redundancy = np.maximum(redundancy, np.maximum(sim[:, best], 0.0))
    return picks


def _greedy_inputs(
    rel_norm: np.ndarray,
    match: np.ndarray,
    weights: np.ndarray,
    sim: np.ndarray | None,
    params: SignatureParams,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`greedy_select`'s relevance, match and weights as float64 arrays, shapes checked."""
    rel_norm = np.asarray(rel_norm, dtype=np.float64)
    match = np.asarray(match, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if match.shape != (rel_norm.shape[0], w.shape[0]):
        raise ValueError(f"match must be (sessions, candidates); got {match.shape}")
    if params.lambda_d and sim is None:
        raise ValueError("sim is needed when lambda_d != 0")
    return rel_norm, match, w


def first_k(
    cand_ranks: Sequence[int] | np.ndarray,
    cand_session: Sequence[Hashable | None],
    k: int,
    *,
    per_chunk: bool = False,
) -> list[Hashable]:
    """The First-K ablation: sessions of the top-ranked chunks, in rank order, without repeats.

    By default it walks down the ranking until it has ``k`` distinct sessions (or runs out), so
    it returns K summaries whenever K exist. With ``per_chunk=True`` it takes the sessions of
    exactly the top-``k`` chunks, which can give fewer than ``k`` after removing repeats.
    Candidates whose session is None are skipped. Equal ranks keep input order.
    """
    if k <= 0:
        return []
    order = np.argsort(np.asarray(cand_ranks), kind="stable")
    if per_chunk:
        order = order[:k]
    out: list[Hashable] = []
    seen: set[Hashable] = set()
    for i in order:
        sid = cand_session[int(i)]
        if sid is None or sid in seen:
            continue
        seen.add(sid)
        out.append(sid)
        if len(out) == k:
            break
    return out


# --------------------------------------------------------------------------- scoring


def signature_vector(unit_vecs: np.ndarray, mode: Literal["mean", "max"] = "mean") -> np.ndarray:
    """The signature's vector form for scoring in ``mode``.

    ``"mean"``: the normalised mean of the normalised unit vectors, shape (d,).
    ``"max"``: the normalised unit vectors themselves, shape (k, d); scoring takes the max.
    """
    u = _unit_rows(unit_vecs)
    if mode == "max":
        return u
    if mode == "mean":
        return np.asarray(_unit_rows(u.mean(axis=0))[0])
    raise ValueError(f"unknown signature mode {mode!r}; use 'mean' or 'max'")


def _weighted_pair(
    name: str,
    weight: float,
    first: Sequence[float] | np.ndarray,
    second: Sequence[float] | np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Two score arrays to mix as float64 arrays of one shape, the weight ``name`` in [0, 1]."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"{name} must be in [0, 1]; got {weight}")
    a = np.asarray(first, dtype=np.float64)
    b = np.asarray(second, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"score arrays differ in shape: {a.shape} vs {b.shape}")
    return a, b


def conditioned_scores(
    query_scores: Sequence[float] | np.ndarray,
    signature_scores: Sequence[float] | np.ndarray,
    alpha: float,
) -> np.ndarray:
    """``s(c|q,σ) = (1-α)·s(q,c) + α·s(σ,c)``; α=0 returns the query scores unchanged."""
    q, s = _weighted_pair("alpha", alpha, query_scores, signature_scores)
    if alpha == 0.0:
        return q.copy()
    if alpha == 1.0:
        return s.copy()
    return (1.0 - alpha) * q + alpha * s


# --------------------------------------------------------------------------- session representations


def doc_shares(
    unit_docs: Sequence[Hashable], weights: Sequence[float] | np.ndarray | None = None
) -> dict[Hashable, float]:
    """How the signature's weight splits over documents (shares sum to 1).

    ``weights`` are per-unit (e.g. the coverage gain each unit brought); non-positive or
    missing weights fall back to equal shares.
    """
    n = len(unit_docs)
    if n == 0:
        return {}
    w = np.ones(n) if weights is None else np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    if w.sum() <= 0:
        w = np.ones(n)
    w = w / w.sum()
    out: dict[Hashable, float] = {}
    for d, x in zip(unit_docs, w, strict=True):
        out[d] = out.get(d, 0.0) + float(x)
    return out


def region_scores(
    in_windows: np.ndarray, doc_share: np.ndarray, doc_weight: float = 0.5
) -> np.ndarray:
    """s(σ, c) as the signature's region: ``(1-ρ)·[c in σ's windows] + ρ·share(doc(c))``.

    ``in_windows`` is 0/1 (or a fraction, for units covering several chunks) per target,
    ``doc_share`` the signature's share of the target's document (:func:`doc_shares`), ρ =
    ``doc_weight``. Values lie in [0, 1]. Within one document the doc term is the same for
    every target, so only the window term ranks.
    """
    inw, share = _weighted_pair("doc_weight", doc_weight, in_windows, doc_share)
    return (1.0 - doc_weight) * inw + doc_weight * share


def activation_confidence(
    cand_ranks: Sequence[int] | np.ndarray,
    cand_docs: Sequence[Hashable],
    signature_doc: Hashable | None,
) -> float:
    """Share of the rank-weighted activation (``w_i = 1/(r_i+1)``) in the signature's document.

    1.0 when every candidate lies in ``signature_doc`` (always so with a single document);
    0.0 without candidates or without a signature.
    """
    if signature_doc is None or len(cand_docs) == 0:
        return 0.0
    w = rank_weights(cand_ranks)
    inside = np.fromiter((d == signature_doc for d in cand_docs), dtype=bool, count=len(cand_docs))
    return float(w[inside].sum() / w.sum())
