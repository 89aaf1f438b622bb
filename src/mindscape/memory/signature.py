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

The First-K ablation (:func:`first_k`) takes the sessions of the top-ranked chunks instead.
Scoring under a signature is :func:`signature_scores` and :func:`conditioned_scores`.

Session representations beyond the summary vector (used by the retriever, see
``docs/retrieval.md``): :func:`member_match` matches a session to a chunk through the
session's *member chunks* (max cosine, so a chunk of the window matches itself with 1);
:func:`region_scores` scores a chunk by whether it lies in the signature's windows and how
much of the signature's coverage its document holds; :func:`activation_confidence` is the
share of the query's rank-weighted activation that falls in the signature's main document,
used to scale α.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from mindscape.memory.types import SignatureUnit

RelevanceSource = Literal["summary", "chunks", "mean"]
SignatureMode = Literal["mean", "max", "joined"]
MatchSource = Literal["summary", "members", "window"]
Activation = Literal["dense", "hybrid"]

__all__ = [
    "SignatureParams",
    "coverage_greedy",
    "greedy_select",
    "first_k",
    "f_query",
    "f_coverage",
    "f_diversity",
    "rank_weights",
    "window_mask",
    "match_matrix",
    "normalise_relevance",
    "session_relevance_from_chunks",
    "signature_vector",
    "signature_scores",
    "conditioned_scores",
    "member_match",
    "region_scores",
    "doc_shares",
    "activation_confidence",
]


@dataclass
class SignatureParams:
    """Settings of the coverage-aware signature selection. The paper does not publish its λs."""

    k: int = 5
    """Most sessions in a signature (the paper's K=5)."""
    k0: int = 50
    """Size of the query-only candidate pool; candidates with rank >= k0 are ignored."""
    lambda_q: float = 1.0
    """Weight of query relevance. Each pick adds at most 1 to f̃Q."""
    lambda_c: float = 1.0
    """Weight of candidate coverage. All picks together add at most 1 to f̃C, so coverage
    mostly decides the first picks and separates sessions of similar relevance later."""
    lambda_d: float = 0.1
    """Weight of the redundancy penalty. Small, so it only breaks near-ties (a near-duplicate
    of a picked session loses about 0.1); 0 restores the 1-1/e guarantee."""
    window_boost: float = 0.5
    """Added to the match m(s,c) when chunk c lies in the window of session s (capped at 1).
    A summary compresses ~20 chunks, so its cosine to any one of them is modest; the boost
    makes "this chunk is in my window" count as coverage while a semantic match to chunks
    of other windows still counts partly."""
    relevance: RelevanceSource = "summary"
    """Where rel(q,s) comes from when the caller passes no ``session_rel``: ``"summary"``
    = cosine of query and summary; ``"chunks"`` = best query-chunk cosine among the session's
    candidate chunks (0 for sessions with none); ``"mean"`` = the average of the two."""
    min_gain: float = 0.0
    """A session is picked only if its total gain is strictly above this; otherwise stop."""
    match: MatchSource = "summary"
    """How m(s, c_i) is computed by the retriever: ``"summary"`` = cosine of summary and
    chunk plus ``window_boost`` in the window (:func:`match_matrix`); ``"members"`` = the best
    cosine between the chunk and the session's member chunks (:func:`member_match`; 1 in
    the window); ``"window"`` = 1 in the window, else 0 (pure rank-weighted mass).
    :func:`coverage_greedy` itself only computes ``"summary"``; the others are passed in
    as ``match``."""
    activation: Activation = "dense"
    """The query-only retriever (E1) that gives the K0 candidates and their ranks:
    ``"dense"`` cosine, or ``"hybrid"`` = dense fused with BM25 (``hybrid_weight``)."""
    hybrid_weight: float = 0.3
    """BM25 weight of the hybrid activation (min-max fusion, see ``fusion.hybrid_scores``)."""


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


def window_mask(session_ids: Sequence[Hashable], cand_session: Sequence[Hashable]) -> np.ndarray:
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
    cand_session: Sequence[Hashable],
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


def f_query(A: Sequence[int] | np.ndarray, rel: np.ndarray) -> float:
    """``fQ(A) = Σ_{s∈A} rel[s]`` (modular). Pass normalised ``rel`` to get f̃Q."""
    idx = _as_index(A)
    return float(np.asarray(rel, dtype=np.float64)[idx].sum()) if idx.size else 0.0


def f_coverage(A: Sequence[int] | np.ndarray, match: np.ndarray, weights: np.ndarray) -> float:
    """``fC(A) = Σ_i w_i · max_{s∈A} match[s, i]`` (0 for empty A); monotone submodular."""
    idx = _as_index(A)
    if idx.size == 0:
        return 0.0
    return float(np.asarray(match, dtype=np.float64)[idx].max(axis=0) @ np.asarray(weights))


def f_diversity(s: int, A: Sequence[int] | np.ndarray, sim: np.ndarray) -> float:
    """``fD(s|A) = -max(0, max_{a∈A} sim[s, a])`` (0 for empty A): a penalty for redundancy."""
    idx = _as_index(A)
    if idx.size == 0:
        return 0.0
    return 0.0 - max(0.0, float(np.asarray(sim)[s, idx].max()))


# --------------------------------------------------------------------------- greedy


def greedy_select(
    rel_norm: np.ndarray,
    match: np.ndarray,
    weights: np.ndarray,
    sim: np.ndarray | None,
    params: SignatureParams,
) -> list[tuple[int, dict[str, float]]]:
    """Greedy maximisation of Δ(s|A) over prepared arrays; the core of :func:`coverage_greedy`.

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
    rel_norm = np.asarray(rel_norm, dtype=np.float64)
    match = np.asarray(match, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    n_sessions = rel_norm.shape[0]
    if match.shape != (n_sessions, w.shape[0]):
        raise ValueError(f"match must be (sessions, candidates); got {match.shape}")
    if params.lambda_d and sim is None:
        raise ValueError("sim is needed when lambda_d != 0")

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
        picks.append(
            (
                best,
                {
                    "query": float(rel_norm[best]),
                    "coverage": float(gain_c[best]),
                    "diversity": float(gain_d[best]),
                    "total": float(total[best]),
                },
            )
        )
        available[best] = False
        cover = np.maximum(cover, match[best])
        if sim is not None:
            redundancy = np.maximum(redundancy, np.maximum(sim[:, best], 0.0))
    return picks


def coverage_greedy(
    query_vec: np.ndarray,
    cand_vecs: np.ndarray,
    cand_ranks: Sequence[int] | np.ndarray,
    cand_session: Sequence[Hashable],
    session_ids: Sequence[str],
    session_vecs: np.ndarray,
    params: SignatureParams | None = None,
    *,
    session_rel: Sequence[float] | np.ndarray | None = None,
    match: np.ndarray | None = None,
    session_texts: Sequence[str] | None = None,
    session_chunk_ids: Sequence[list[str]] | None = None,
) -> list[SignatureUnit]:
    """Choose the signature: at most ``params.k`` sessions by coverage-aware greedy selection.

    Args:
        query_vec: (d,) query embedding.
        cand_vecs: (N, d) candidate chunk embeddings (normalised here if they are not).
        cand_ranks: (N,) 0-based ranks from the query-only retrieval; rank >= k0 is ignored.
        cand_session: (N,) id of the session window each candidate lies in.
        session_ids: (M,) the candidate sessions S; order breaks ties.
        session_vecs: (M, d) their summary embeddings.
        params: settings; defaults to ``SignatureParams()``.
        session_rel: (M,) the caller's own rel(q, s); overrides ``params.relevance``.
        match: (M, N) the caller's own m(s, c_i) in [0, 1]; overrides the cosine + window match.
        session_texts: (M,) summary texts to put in the units (default "").
        session_chunk_ids: (M,) chunk ids each session covers (default []).

    Returns:
        The chosen sessions as :class:`SignatureUnit`, in pick order, with their gains.
    """
    p = params or SignatureParams()
    n_sessions = len(session_ids)
    sv = _unit_rows(session_vecs) if n_sessions else np.zeros((0, 1))
    cv = _unit_rows(cand_vecs) if len(cand_session) else np.zeros((0, sv.shape[1]))
    ranks = np.asarray(cand_ranks, dtype=np.int64)
    if not (len(cv) == len(ranks) == len(cand_session)):
        raise ValueError("cand_vecs, cand_ranks and cand_session must have the same length")
    if len(sv) != n_sessions:
        raise ValueError("session_vecs and session_ids must have the same length")
    if n_sessions == 0:
        return []

    keep = ranks < p.k0
    cv, ranks = cv[keep], ranks[keep]
    cand_session = [sid for sid, k in zip(cand_session, keep, strict=True) if k]

    if session_rel is not None:
        rel = np.asarray(session_rel, dtype=np.float64)
        if rel.shape != (n_sessions,):
            raise ValueError("session_rel must have one value per session")
    else:
        q = _unit_rows(query_vec)[0]
        rel_summary = sv @ q
        if p.relevance == "summary":
            rel = rel_summary
        else:
            rel_chunks = session_relevance_from_chunks(cv @ q, cand_session, session_ids)
            rel = rel_chunks if p.relevance == "chunks" else 0.5 * (rel_summary + rel_chunks)

    if match is None:
        m = match_matrix(sv, cv, window_mask(session_ids, cand_session), p.window_boost)
    else:
        m = np.asarray(match, dtype=np.float64)
        if m.shape != (n_sessions, len(keep)):
            raise ValueError(f"match must be (sessions, candidates); got {m.shape}")
        m = m[:, keep]
    sim = sv @ sv.T if p.lambda_d else None

    picks = greedy_select(normalise_relevance(rel), m, rank_weights(ranks), sim, p)
    return [
        SignatureUnit(
            unit_id=str(session_ids[j]),
            text=session_texts[j] if session_texts is not None else "",
            chunk_ids=list(session_chunk_ids[j]) if session_chunk_ids is not None else [],
            gains=gains,
            rank=pos,
        )
        for pos, (j, gains) in enumerate(picks)
    ]


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
    """The signature's vector form, as :func:`signature_scores` wants it for ``mode``.

    ``"mean"``: the normalised mean of the normalised unit vectors, shape (d,).
    ``"max"``: the normalised unit vectors themselves, shape (k, d); scoring takes the max.
    """
    u = _unit_rows(unit_vecs)
    if mode == "max":
        return u
    if mode == "mean":
        return np.asarray(_unit_rows(u.mean(axis=0))[0])
    raise ValueError(f"unknown signature mode {mode!r}; use 'mean' or 'max'")


def signature_scores(
    sig_vecs: np.ndarray, target_vecs: np.ndarray, mode: SignatureMode = "mean"
) -> np.ndarray:
    """s(σ, c) for every target c.

    ``"mean"``: cosine with the normalised mean of the rows of ``sig_vecs``.
    ``"max"``: the best cosine over the rows (the units) of ``sig_vecs``.
    ``"joined"``: ``sig_vecs`` is one embedding of the joined signature text; its cosine.
    An empty signature scores 0 everywhere.
    """
    targets = _unit_rows(target_vecs)
    sig = np.atleast_2d(np.asarray(sig_vecs, dtype=np.float64))
    if sig.size == 0:
        return np.zeros(len(targets))
    if mode == "mean":
        return np.asarray(targets @ signature_vector(sig, "mean"))
    if mode == "max":
        return np.asarray((targets @ _unit_rows(sig).T).max(axis=1))
    if mode == "joined":
        if sig.shape[0] != 1:
            raise ValueError("'joined' expects a single embedding of the joined signature text")
        return np.asarray(targets @ _unit_rows(sig)[0])
    raise ValueError(f"unknown signature mode {mode!r}; use 'mean', 'max' or 'joined'")


def conditioned_scores(
    query_scores: Sequence[float] | np.ndarray,
    signature_scores: Sequence[float] | np.ndarray,
    alpha: float = 0.5,
) -> np.ndarray:
    """``s(c|q,σ) = (1-α)·s(q,c) + α·s(σ,c)``; α=0 returns the query scores unchanged."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1]; got {alpha}")
    q = np.asarray(query_scores, dtype=np.float64)
    s = np.asarray(signature_scores, dtype=np.float64)
    if q.shape != s.shape:
        raise ValueError(f"score arrays differ in shape: {q.shape} vs {s.shape}")
    if alpha == 0.0:
        return q.copy()
    if alpha == 1.0:
        return s.copy()
    return (1.0 - alpha) * q + alpha * s


# --------------------------------------------------------------------------- session representations


def member_match(cand_vecs: np.ndarray, member_vecs: Sequence[np.ndarray]) -> np.ndarray:
    """m(s, c_i) through member chunks: ``clip(max_{c' in s} cos(c', c_i), 0, 1)``.

    ``member_vecs[j]`` holds the chunk vectors of session j's window. A candidate that lies
    in the window matches itself, so in-window match is 1 without a boost; a chunk outside
    gets the similarity of its nearest member. Sessions without members match nothing.
    """
    cv = _unit_rows(cand_vecs) if len(cand_vecs) else np.zeros((0, 1))
    out = np.zeros((len(member_vecs), len(cv)))
    if not len(cv):
        return out
    sizes = [len(m) for m in member_vecs]
    if sum(sizes) == 0:
        return out
    stacked = _unit_rows(np.vstack([m for m in member_vecs if len(m)]))
    sims = stacked @ cv.T
    start = 0
    for j, n in enumerate(sizes):
        if n:
            out[j] = sims[start : start + n].max(axis=0)
            start += n
    return np.clip(out, 0.0, 1.0)


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
    if not 0.0 <= doc_weight <= 1.0:
        raise ValueError(f"doc_weight must be in [0, 1]; got {doc_weight}")
    inw = np.asarray(in_windows, dtype=np.float64)
    share = np.asarray(doc_share, dtype=np.float64)
    if inw.shape != share.shape:
        raise ValueError(f"score arrays differ in shape: {inw.shape} vs {share.shape}")
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
