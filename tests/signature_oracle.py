"""Reference implementations of the MiA signature, for the tests only.

The production code (:mod:`mindscape.memory.signature.sigma`, :mod:`mindscape.memory.signature.select`,
:mod:`mindscape.memory.signature.conditioning`) computes the signature from arrays the retriever
prepares; these functions compute the same things the slow, literal way (the objective's three
terms, a greedy that evaluates them set by set, a vector-level coverage greedy, member-chunk
match, signature scores), so that the tests can check the fast paths against them and the
greedy against brute force. The greedy here never calls the production greedy: it re-evaluates
``f_query``, ``f_coverage`` and ``f_diversity`` on ``A ∪ {s}`` for every candidate s.

Nothing here is imported from ``mindscape`` (``test_the_oracle_imports_no_production_code``
checks it): the window mask, the match matrix, the rank weights, the max-normalised relevance,
a session's relevance from its chunks and σ's vector are written out below from the paper's
definitions (MiA-Signature, appendix A; docs/retrieval.md), element by element, so that a bug
in production's array helpers shows as a disagreement instead of being shared. The settings
are read from any object with the fields of ``SignatureParams`` (``k``, ``k0``, ``lambda_q``,
``lambda_c``, ``lambda_d``, ``relevance``, ``window_boost``, ``min_gain``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class OracleUnit:
    """A session the oracle chose into σ, with the gains of its pick (the fields production's
    ``SignatureUnit`` has, so the tests compare them one by one)."""

    unit_id: str
    text: str
    chunk_ids: list[str]
    gains: dict[str, float] = field(default_factory=dict)
    rank: int = 0


def _index(A: Sequence[int] | np.ndarray) -> list[int]:
    return [int(a) for a in A]


def unit_rows(x: np.ndarray | Sequence[Any]) -> np.ndarray:
    """Each row divided by its Euclidean length (a zero row stays zero), as float64."""
    rows = np.atleast_2d(np.asarray(x, dtype=np.float64))
    out = np.zeros_like(rows)
    for n, row in enumerate(rows):
        length = math.sqrt(sum(float(v) * float(v) for v in row))
        if length > 0:
            out[n] = row / length
    return out


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """cos(a, b); 0 when either is the zero vector."""
    return float(unit_rows(a)[0] @ unit_rows(b)[0])


def rank_weights(ranks: Sequence[int] | np.ndarray) -> np.ndarray:
    """The paper's coverage weights: ``w_i = 1/(r_i + 1)`` for 0-based ranks r_i."""
    return np.array([1.0 / (int(r) + 1) for r in ranks], dtype=np.float64)


def window_mask(
    session_ids: Sequence[Hashable], cand_session: Sequence[Hashable]
) -> list[list[bool]]:
    """``[c_i in the window of s]`` for every session s and candidate c_i: a session summarises
    one window of consecutive chunks and every chunk lies in exactly one window, so c_i lies in
    the window of s exactly when its window is s."""
    return [[cand_session[i] == s for i in range(len(cand_session))] for s in session_ids]


def match_matrix(
    session_vecs: np.ndarray, cand_vecs: np.ndarray, in_window: list[list[bool]], boost: float
) -> np.ndarray:
    """m(s, c_i), the semantic match of summary s and candidate c_i (DESIGN.md, signature
    step 3): the cosine clipped to [0, 1], raised by ``boost`` when c_i lies in the window of
    s, and at most 1."""
    m = np.zeros((len(session_vecs), len(cand_vecs)))
    for j, s_vec in enumerate(session_vecs):
        for i, c_vec in enumerate(cand_vecs):
            value = min(max(cosine(s_vec, c_vec), 0.0), 1.0)
            if in_window[j][i]:
                value += boost
            m[j, i] = min(1.0, value)
    return m


def max_normalised(rel: Sequence[float] | np.ndarray) -> np.ndarray:
    """f̃Q's terms: ``rel(q, s)`` clipped at 0 (a session never lowers the objective) and
    divided by the largest over S; all 0 when none is positive."""
    clipped = [max(float(r), 0.0) for r in rel]
    top = max(clipped, default=0.0)
    return np.array([r / top if top > 0 else 0.0 for r in clipped], dtype=np.float64)


def relevance_from_chunks(
    scores: Sequence[float] | np.ndarray,
    cand_session: Sequence[Hashable],
    session_ids: Sequence[Hashable],
) -> np.ndarray:
    """rel(q, s) from the session's own candidates: the best activation score among the
    candidates lying in its window, 0 for a session with none."""
    out = []
    for s in session_ids:
        own = [float(scores[i]) for i in range(len(cand_session)) if cand_session[i] == s]
        out.append(max(own) if own else 0.0)
    return np.array(out, dtype=np.float64)


def mean_vector(unit_vecs: np.ndarray) -> np.ndarray:
    """σ's vector in ``mean`` mode: the mean of the units' unit vectors, made unit length."""
    rows = unit_rows(unit_vecs)
    return np.asarray(unit_rows(rows.sum(axis=0) / len(rows))[0])


def f_query(A: Sequence[int] | np.ndarray, rel: np.ndarray) -> float:
    """``fQ(A) = Σ_{s∈A} rel[s]`` (modular). Pass normalised ``rel`` to get f̃Q."""
    return sum(float(rel[s]) for s in _index(A))


def f_coverage(A: Sequence[int] | np.ndarray, match: np.ndarray, weights: np.ndarray) -> float:
    """``fC(A) = Σ_i w_i · max_{s∈A} match[s, i]`` (0 for empty A); monotone submodular."""
    picked = _index(A)
    if not picked:
        return 0.0
    return sum(float(w) * max(float(match[s][i]) for s in picked) for i, w in enumerate(weights))


def f_diversity(s: int, A: Sequence[int] | np.ndarray, sim: np.ndarray) -> float:
    """``fD(s|A) = -max(0, max_{a∈A} sim[s, a])`` (0 for empty A): a penalty for redundancy."""
    picked = _index(A)
    if not picked:
        return 0.0
    return 0.0 - max(0.0, max(float(sim[s][a]) for a in picked))


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
    params: Any,
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
    params: Any,
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
    params: Any,
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
    params: Any,
    *,
    session_rel: Sequence[float] | np.ndarray | None = None,
    cand_scores: Sequence[float] | np.ndarray | None = None,
    match: np.ndarray | None = None,
    session_texts: Sequence[str] | None = None,
    session_chunk_ids: Sequence[list[str]] | None = None,
    method: str = "coverage",
) -> list[OracleUnit]:
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
        params: the settings (the fields of ``SignatureParams``).
        session_rel: (M,) the caller's own rel(q, s); overrides ``params.relevance``.
        cand_scores: (N,) the candidates' activation scores, which ``relevance="chunks"``
            (and ``"mean"``) read; default their dense cosine to the query (a dense E1).
        match: (M, N) the caller's own m(s, c_i) in [0, 1]; overrides the cosine + window match.
        session_texts: (M,) summary texts to put in the units (default "").
        session_chunk_ids: (M,) chunk ids each session covers (default []).
        method: ``"coverage"`` or ``"first-k"``.

    Returns:
        The chosen sessions as :class:`OracleUnit`, in pick order, with their gains.
    """
    p = params
    n_sessions = len(session_ids)
    sv = unit_rows(session_vecs) if n_sessions else np.zeros((0, 1))
    cv = unit_rows(cand_vecs) if len(cand_session) else np.zeros((0, sv.shape[1]))
    ranks = np.asarray(cand_ranks, dtype=np.int64)
    if not (len(cv) == len(ranks) == len(cand_session)):
        raise ValueError("cand_vecs, cand_ranks and cand_session must have the same length")
    if len(sv) != n_sessions:
        raise ValueError("session_vecs and session_ids must have the same length")
    if n_sessions == 0:
        return []

    keep = ranks < p.k0
    q = unit_rows(query_vec)[0]
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
            rel_chunks = relevance_from_chunks(scores, cand_session, session_ids)
            rel = rel_chunks if p.relevance == "chunks" else 0.5 * (rel_summary + rel_chunks)

    if match is None:
        m = match_matrix(sv, cv, window_mask(session_ids, cand_session), p.window_boost)
    else:
        m = np.asarray(match, dtype=np.float64)
        if m.shape != (n_sessions, len(keep)):
            raise ValueError(f"match must be (sessions, candidates); got {m.shape}")
        m = m[:, keep]
    sim = sv @ sv.T  # fD(s|A) is reported whatever λD is; λD only weighs it in the total

    rel_norm, weights = max_normalised(rel), rank_weights(ranks)
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
        OracleUnit(
            unit_id=str(session_ids[j]),
            text=session_texts[j] if session_texts is not None else "",
            chunk_ids=list(session_chunk_ids[j]) if session_chunk_ids is not None else [],
            gains=gains,
            rank=pos,
        )
        for pos, (j, gains) in enumerate(picks)
    ]


def signature_scores(
    sig_vecs: np.ndarray, target_vecs: np.ndarray, mode: str = "mean"
) -> np.ndarray:
    """s(σ, c) for every target c.

    ``"mean"``: cosine with the normalised mean of the rows of ``sig_vecs``.
    ``"max"``: the best cosine over the rows (the units) of ``sig_vecs``.
    ``"joined"``: ``sig_vecs`` is one embedding of the joined signature text; its cosine.
    An empty signature scores 0 everywhere.
    """
    targets = unit_rows(target_vecs)
    sig = np.atleast_2d(np.asarray(sig_vecs, dtype=np.float64))
    if sig.size == 0:
        return np.zeros(len(targets))
    if mode == "mean":
        return np.asarray(targets @ mean_vector(sig))
    if mode == "max":
        return np.asarray((targets @ unit_rows(sig).T).max(axis=1))
    if mode == "joined":
        if sig.shape[0] != 1:
            raise ValueError("'joined' expects a single embedding of the joined signature text")
        return np.asarray(targets @ unit_rows(sig)[0])
    raise ValueError(f"unknown signature mode {mode!r}; use 'mean', 'max' or 'joined'")


def member_match(cand_vecs: np.ndarray, member_vecs: Sequence[np.ndarray]) -> np.ndarray:
    """m(s, c_i) through member chunks: ``clip(max_{c' in s} cos(c', c_i), 0, 1)``.

    ``member_vecs[j]`` holds the chunk vectors of session j's window. A candidate that lies
    in the window matches itself, so in-window match is 1 without a boost; a chunk outside
    gets the similarity of its nearest member. Sessions without members match nothing.
    """
    cv = unit_rows(cand_vecs) if len(cand_vecs) else np.zeros((0, 1))
    out = np.zeros((len(member_vecs), len(cv)))
    if not len(cv):
        return out
    sizes = [len(m) for m in member_vecs]
    if sum(sizes) == 0:
        return out
    stacked = unit_rows(np.vstack([m for m in member_vecs if len(m)]))
    sims = stacked @ cv.T
    start = 0
    for j, n in enumerate(sizes):
        if n:
            out[j] = sims[start : start + n].max(axis=0)
            start += n
    return np.clip(out, 0.0, 1.0)
