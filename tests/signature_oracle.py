"""Reference implementations of the MiA signature, for the tests only.

The production code (:mod:`mindscape.memory.signature.sigma`, :mod:`mindscape.memory.signature.select`,
:mod:`mindscape.memory.signature.conditioning`) computes the signature from arrays the retriever
prepares; these functions compute the same things the slow, literal way (the objective's three
terms, a greedy that evaluates them set by set, a vector-level coverage greedy, member-chunk
match, signature scores), so that the tests can check the fast paths against them and the
greedy against brute force. The greedy here never calls the production greedy: it re-evaluates
``f_query``, ``f_coverage`` and ``f_diversity`` on ``A ∪ {s}`` for every candidate s.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from mindscape.memory.signature.sigma import (  # the small array helpers are shared
    SignatureMode,
    SignatureParams,
    _as_index,
    _unit_rows,
    match_matrix,
    normalise_relevance,
    rank_weights,
    session_relevance_from_chunks,
    signature_vector,
    window_mask,
)
from mindscape.memory.types import SignatureUnit
from mindscape.retrieval_defaults import literal_params


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


def _normalised_weights(match: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The coverage weights divided by ``fC(S)``, so that f̃C = fC / fC(S) (0 when fC(S) is 0)."""
    total_cover = f_coverage(list(range(len(match))), match, weights)
    return weights / total_cover if total_cover > 0 else np.zeros_like(weights)


def marginal_gains(
    s: int,
    picked: list[int],
    rel_norm: np.ndarray,
    match: np.ndarray,
    w_norm: np.ndarray,
    sim: np.ndarray | None,
    params: SignatureParams,
) -> dict[str, float]:
    """Δf̃Q(s|A), Δf̃C(s|A), fD(s|A) and their λ-weighted total, from the set functions."""
    gq = f_query(picked + [s], rel_norm) - f_query(picked, rel_norm)
    gc = f_coverage(picked + [s], match, w_norm) - f_coverage(picked, match, w_norm)
    gd = f_diversity(s, picked, sim) if sim is not None else 0.0
    total = params.lambda_q * gq + params.lambda_c * gc + params.lambda_d * gd
    return {"query": gq, "coverage": gc, "diversity": gd, "total": total}


def literal_greedy(
    rel_norm: np.ndarray,
    match: np.ndarray,
    weights: np.ndarray,
    sim: np.ndarray | None,
    params: SignatureParams,
) -> list[tuple[int, dict[str, float]]]:
    """Greedy maximisation of ``λQ·f̃Q + λC·f̃C + λD·fD``, term by term from the set functions.

    Each step evaluates :func:`marginal_gains` for every session not yet picked and takes the
    largest total (the first session on ties) while that total is above ``params.min_gain``.
    Returns ``(session index, gains)`` in pick order, the gains named as production names them.
    """
    rel_norm = np.asarray(rel_norm, dtype=np.float64)
    match = np.asarray(match, dtype=np.float64)
    w_norm = _normalised_weights(match, np.asarray(weights, dtype=np.float64))
    picked: list[int] = []
    out: list[tuple[int, dict[str, float]]] = []
    while len(picked) < min(params.k, len(rel_norm)):
        best: tuple[int, dict[str, float]] | None = None
        for s in range(len(rel_norm)):
            if s not in picked:
                g = marginal_gains(s, picked, rel_norm, match, w_norm, sim, params)
                if best is None or g["total"] > best[1]["total"]:
                    best = (s, g)
        if best is None or not best[1]["total"] > params.min_gain:
            break
        picked.append(best[0])
        out.append(best)
    return out


def literal_first_k(
    order: list[int],
    rel_norm: np.ndarray,
    match: np.ndarray,
    weights: np.ndarray,
    sim: np.ndarray | None,
    params: SignatureParams,
) -> list[tuple[int, dict[str, float]]]:
    """The gains of a given pick order (First-K), from the set functions."""
    w_norm = _normalised_weights(np.asarray(match, dtype=np.float64), np.asarray(weights))
    return [
        (s, marginal_gains(s, order[:n], rel_norm, match, w_norm, sim, params))
        for n, s in enumerate(order)
    ]


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
    cand_scores: Sequence[float] | np.ndarray | None = None,
    match: np.ndarray | None = None,
    session_texts: Sequence[str] | None = None,
    session_chunk_ids: Sequence[list[str]] | None = None,
    method: str = "coverage",
) -> list[SignatureUnit]:
    """Choose the signature: at most ``params.k`` sessions by coverage-aware greedy selection
    (``method="first-k"``: the sessions of the best-ranked candidates, in rank order, without
    repeats, with the gains that order brings).

    Args:
        query_vec: (d,) query embedding.
        cand_vecs: (N, d) candidate chunk embeddings (normalised here if they are not).
        cand_ranks: (N,) 0-based ranks from the query-only retrieval; rank >= k0 is ignored.
        cand_session: (N,) id of the session window each candidate lies in.
        session_ids: (M,) the candidate sessions S; order breaks ties.
        session_vecs: (M, d) their summary embeddings.
        params: settings; defaults to ``literal_params()``.
        session_rel: (M,) the caller's own rel(q, s); overrides ``params.relevance``.
        cand_scores: (N,) the candidates' activation scores, which ``relevance="chunks"``
            (and ``"mean"``) read; default their dense cosine to the query (a dense E1).
        match: (M, N) the caller's own m(s, c_i) in [0, 1]; overrides the cosine + window match.
        session_texts: (M,) summary texts to put in the units (default "").
        session_chunk_ids: (M,) chunk ids each session covers (default []).
        method: ``"coverage"`` or ``"first-k"``.

    Returns:
        The chosen sessions as :class:`SignatureUnit`, in pick order, with their gains.
    """
    p = params or literal_params()
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
    q = _unit_rows(query_vec)[0]
    scores = cv @ q if cand_scores is None else np.asarray(cand_scores, dtype=np.float64)
    cv, ranks, scores = cv[keep], ranks[keep], scores[keep]
    cand_session = [sid for sid, k in zip(cand_session, keep, strict=True) if k]

    if session_rel is not None:
        rel = np.asarray(session_rel, dtype=np.float64)
        if rel.shape != (n_sessions,):
            raise ValueError("session_rel must have one value per session")
    else:
        rel_summary = sv @ q
        if p.relevance == "summary":
            rel = rel_summary
        else:
            rel_chunks = session_relevance_from_chunks(scores, cand_session, session_ids)
            rel = rel_chunks if p.relevance == "chunks" else 0.5 * (rel_summary + rel_chunks)

    if match is None:
        m = match_matrix(sv, cv, window_mask(session_ids, cand_session), p.window_boost)
    else:
        m = np.asarray(match, dtype=np.float64)
        if m.shape != (n_sessions, len(keep)):
            raise ValueError(f"match must be (sessions, candidates); got {m.shape}")
        m = m[:, keep]
    sim = sv @ sv.T  # fD(s|A) is reported whatever λD is; λD only weighs it in the total

    rel_norm, weights = normalise_relevance(rel), rank_weights(ranks)
    if method == "coverage":
        picks = literal_greedy(rel_norm, m, weights, sim, p)
    elif method == "first-k":
        row = {sid: j for j, sid in enumerate(session_ids)}
        order: list[int] = []
        for i in sorted(range(len(ranks)), key=lambda i: (ranks[i], i)):
            j = row.get(cand_session[i])
            if j is not None and j not in order and len(order) < p.k:
                order.append(j)
        picks = literal_first_k(order, rel_norm, m, weights, sim, p)
    else:
        raise ValueError(f"unknown method {method!r}")
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
