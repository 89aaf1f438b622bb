"""Choosing the MiA signature σ over an index: coverage-aware greedy or First-K.

The math (the objective, its greedy maximisation, First-K) is :mod:`mindscape.memory.signature.sigma`;
this module runs it over a :class:`~mindscape.memory.scope.Scope`: the candidate sessions are
the sessions of the query's K0 activation chunks, in the order their best chunk ranks, and
relevance, match and redundancy come from the index's vectors (nothing is embedded here).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mindscape.memory.scope import Scope
from mindscape.memory.settings import SignatureParams
from mindscape.memory.signature import sigma as sig
from mindscape.memory.signature.activation import activate
from mindscape.memory.types import SignatureUnit

METHODS = ("coverage", "first-k")


def select_signature(
    scope: Scope,
    query: str,
    embed: Callable[[str], np.ndarray],
    params: SignatureParams,
    method: str = "coverage",
) -> list[SignatureUnit]:
    """The signature for `query`: at most ``params.k`` session summaries.

    `embed` gives the query's unit vector (called only when the scope has sessions). Each
    unit records its gains (``query``, ``coverage``, ``diversity``, ``total``), computed the
    same way for First-K as greedy computes them.
    """
    if method not in METHODS:
        raise ValueError(f"unknown signature method {method!r}; use 'coverage' or 'first-k'")
    if not len(scope.sessions) or not scope.n_chunks:
        return []
    qvec = embed(query)
    act = activate(scope, query, qvec, params)
    rows = act.rows[scope.chunk_session[act.rows] >= 0]
    if not len(rows):
        return []
    cand_session = scope.chunk_session[rows]
    ranks = np.arange(len(rows))
    sess = list(dict.fromkeys(cand_session.tolist()))  # first-appearance order
    session_vecs = scope.sessions.vecs[np.asarray(sess, dtype=np.int64)].astype(np.float64)
    rel = session_relevance(params, session_vecs @ qvec, act.score[rows], cand_session, sess)
    match = coverage_match(scope, params, sess, rows, session_vecs)
    weights = sig.rank_weights(ranks)
    sim = session_vecs @ session_vecs.T

    if method == "coverage":
        # sim even when λD = 0: the units then report fD(s|A) as First-K's do (λD weighs it)
        picks = sig.greedy_select(sig.normalise_relevance(rel), match, weights, sim, params)
    else:
        order = sig.first_k(ranks, cand_session.tolist(), params.k)
        picks = gains_of([sess.index(s) for s in order], rel, match, weights, sim, params)
    return signature_units(scope, sess, picks)


def session_relevance(
    params: SignatureParams,
    summary_rel: np.ndarray,
    cand_scores: np.ndarray,
    cand_session: np.ndarray,
    sess: list[int],
) -> np.ndarray:
    """rel(q, s) of each candidate session (``params.relevance``): its summary's cosine
    (`summary_rel`), its best candidate chunk's activation score, or the mean of the two."""
    if params.relevance == "summary":
        return summary_rel
    rel_chunks = sig.session_relevance_from_chunks(cand_scores, cand_session, sess)
    return rel_chunks if params.relevance == "chunks" else 0.5 * (summary_rel + rel_chunks)


def coverage_match(
    scope: Scope,
    params: SignatureParams,
    sess: list[int],
    cand_rows: np.ndarray,
    session_vecs: np.ndarray,
) -> np.ndarray:
    """m(s, c) of each candidate session and chunk (``params.match``): through the summary
    (with the window boost), the member chunks, or the window alone."""
    in_window = sig.window_mask(sess, scope.chunk_session[cand_rows])
    if params.match == "summary":
        cand_vecs = scope.chunk_vecs[cand_rows].astype(np.float64)
        return sig.match_matrix(session_vecs, cand_vecs, in_window, params.window_boost)
    if params.match == "members":
        return member_match(scope, sess, cand_rows)
    if params.match == "window":
        return in_window.astype(np.float64)
    raise ValueError(f"unknown match {params.match!r}; use 'summary', 'members' or 'window'")


def signature_units(
    scope: Scope, sess: list[int], picks: list[tuple[int, dict[str, float]]]
) -> list[SignatureUnit]:
    """The picked sessions (indices into `sess`, with their gains) as signature units."""
    units = scope.sessions.units
    return [
        SignatureUnit(
            unit_id=units[sess[j]].id,
            text=units[sess[j]].text,
            chunk_ids=list(units[sess[j]].chunk_ids),
            gains=gains,
            rank=pos,
        )
        for pos, (j, gains) in enumerate(picks)
    ]


def member_match(scope: Scope, sess: list[int], cand_rows: np.ndarray) -> np.ndarray:
    """m(s, c) through member chunks, ``clip(max_{c' in s} cos(c', c), 0, 1)``, on the index's
    unit vectors: one float32 product (checked against ``tests/signature_oracle.member_match``)."""
    members = [scope.session_members[j] for j in sess]
    sizes = np.fromiter((len(m) for m in members), dtype=np.int64, count=len(members))
    out = np.zeros((len(sess), len(cand_rows)))
    if not sizes.sum() or not len(cand_rows):
        return out
    sims = scope.chunk_vecs[np.concatenate(members)] @ scope.chunk_vecs[cand_rows].T
    nonempty = sizes > 0
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])[nonempty]
    out[nonempty] = np.maximum.reduceat(sims, starts, axis=0)
    return np.clip(out, 0.0, 1.0)


def gains_of(
    idx: list[int],
    rel: np.ndarray,
    match: np.ndarray,
    weights: np.ndarray,
    sim: np.ndarray,
    p: SignatureParams,
) -> list[tuple[int, dict[str, float]]]:
    """The marginal gain terms of a given pick order (First-K), as greedy reports them."""
    rel_norm = sig.normalise_relevance(rel)
    total_cover = float(match.max(axis=0, initial=0.0) @ weights) if len(match) else 0.0
    w_norm = weights / total_cover if total_cover > 0 else np.zeros_like(weights)
    cover = np.zeros(len(weights))
    out = []
    picked: list[int] = []
    for j in idx:
        gc = float((np.maximum(match[j], cover) - cover) @ w_norm)
        gd = 0.0 - max(0.0, float(sim[j, picked].max())) if picked else 0.0
        total = p.lambda_q * rel_norm[j] + p.lambda_c * gc + p.lambda_d * gd
        gains = {
            "query": float(rel_norm[j]),
            "coverage": gc,
            "diversity": gd,
            "total": float(total),
        }
        out.append((j, gains))
        cover = np.maximum(cover, match[j])
        picked.append(j)
    return out
