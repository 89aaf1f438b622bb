"""σ-conditioned scoring: ``s(u|q,σ) = (1-α)·s(q,u) + α·s(σ,u)`` with MiA's α gate.

* :func:`resolve_signature` turns a signature (unit ids) into arrays of a scope: the units'
  vectors, their member chunks, per-chunk window flags, each document's share of the
  signature's coverage and the joined-text vector.
* :func:`signature_scores` is s(σ,u) for every unit of a layer, in one of the
  ``RetrievalSettings.signature_mode`` modes (mean, max, joined, members, window, region).
* :func:`gated_alpha` is the **α gate**: ``α·conf^p``, conf being the share of the query's
  rank-weighted activation that lies in the signature's main document (1 in a single book).
* :func:`layer_scores` gives (query, signature, fused) scores of a layer for a
  :class:`QueryPlan`: everything one query needs, resolved once per query.
* :func:`condition` is the one call a query's retrieval makes here: it resolves the plan and
  scores every layer asked for, once; the retriever and MoM's late fusion read the result
  (:class:`Conditioned`) and never call back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from mindscape.memory.scope import Scope
from mindscape.memory.scoring import hybrid_scores
from mindscape.memory.settings import RetrievalSettings, chunk_ranking
from mindscape.memory.signature import sigma as sig
from mindscape.memory.signature.activation import activate
from mindscape.memory.types import Layer, SignatureUnit


@dataclass
class SignatureArrays:
    """A signature resolved against a scope."""

    unit_vecs: np.ndarray
    """The signature units' vectors (float64)."""
    member_rows: np.ndarray
    """Chunk rows inside the signature's units."""
    in_windows: np.ndarray
    """Per chunk: 1 inside a signature unit's window (or the unit's relative gain), else 0."""
    doc_share: np.ndarray
    """Per document of the scope: its share of the signature's coverage."""
    main_doc: int | None
    """The document holding the largest share."""
    joined_vec: np.ndarray | None
    """The embedding of the joined signature text (``joined`` mode only)."""


@dataclass
class QueryPlan:
    """One query's retrieval, resolved once: the scope, the query and its vector, the
    signature's arrays, the gated α and the settings. Every layer is scored from it."""

    scope: Scope
    query: str
    qvec: np.ndarray
    sig: SignatureArrays | None
    alpha: float
    settings: RetrievalSettings


LayerScores = tuple[np.ndarray, np.ndarray, np.ndarray]
"""(query score, signature score, fused score) of every unit of a layer."""


@dataclass
class Conditioned:
    """One query conditioned on σ, scored once: its plan and the scores of each layer asked for."""

    plan: QueryPlan
    scores: dict[Layer, LayerScores]
    """Per layer, :func:`layer_scores` of the plan (the veridical layer hybrid where the
    settings' chunk ranking is)."""


def condition(
    scope: Scope,
    query: str,
    qvec: np.ndarray,
    signature: Sequence[SignatureUnit] | None,
    settings: RetrievalSettings,
    layers: Iterable[Layer],
    *,
    embed: Callable[[str], np.ndarray],
) -> Conditioned:
    """Resolve one query's plan (σ's arrays, the gated α) and score each of `layers` once.

    `embed` embeds the joined signature text (called in the ``joined`` mode only)."""
    sa = (
        resolve_signature(
            scope,
            signature,
            embed=embed if settings.signature_mode == "joined" else None,
            graded=settings.window_weights == "gain",
        )
        if signature
        else None
    )
    plan = QueryPlan(
        scope, query, qvec, sa, gated_alpha(scope, query, qvec, sa, settings), settings
    )
    hybrid = chunk_ranking(settings.chunk_mode, len(scope.docs)) == "hybrid"
    return Conditioned(plan, {layer: layer_scores(plan, layer, hybrid=hybrid) for layer in layers})


def resolve_signature(
    scope: Scope,
    signature: Sequence[SignatureUnit],
    *,
    embed: Callable[[str], np.ndarray] | None = None,
    graded: bool = False,
) -> SignatureArrays | None:
    """Vectors, member chunks, window flags and document shares of a signature in a scope.

    `embed` (given for the ``joined`` mode) embeds the joined signature text; `graded` weighs
    each unit's window by its coverage gain relative to the largest instead of 1.
    """
    vecs, members, docs, weights = [], [], [], []
    for su in signature:
        for layer in ("episodic", "semantic", "outline", "veridical"):
            view = scope.views[layer]
            row = view.row_of.get(su.unit_id)
            if row is not None:
                vecs.append(view.vecs[row])
                members.append(scope.rows_of_chunks(view.units[row].chunk_ids))
                docs.append(view.units[row].doc_id)
                weights.append(su.gains.get("coverage", 0.0) + su.gains.get("query", 0.0) * 1e-6)
                break
    if not vecs:
        return None
    member_rows = np.unique(np.concatenate(members)) if members else np.zeros(0, np.int64)
    in_windows = np.zeros(scope.n_chunks)
    if graded:
        w = np.maximum(np.asarray(weights), 0.0)
        w = w / w.max() if w.max() > 0 else np.ones(len(w))
        for rows, x in zip(members, w, strict=True):
            in_windows[rows] = np.maximum(in_windows[rows], x)
    else:
        in_windows[member_rows] = 1.0
    shares = sig.doc_shares(docs, weights)
    doc_share = np.zeros(len(scope.docs))
    for d, s in shares.items():
        if d in scope.doc_index:
            doc_share[scope.doc_index[d]] = s
    main_doc = int(np.argmax(doc_share)) if doc_share.sum() > 0 else None
    joined = None
    if embed is not None:
        text = "\n".join(su.text for su in signature)
        joined = embed(text) if text else None
    return SignatureArrays(
        np.vstack(vecs).astype(np.float64), member_rows, in_windows, doc_share, main_doc, joined
    )


def signature_scores(plan: QueryPlan, layer: Layer) -> np.ndarray:
    """s(σ, u) for every unit of a layer, in the plan's ``signature_mode``."""
    sc, sa, st = plan.scope, plan.sig, plan.settings
    # Index vectors are unit-normalised float32 (LayerView), so cosines are plain products.
    vecs = sc.views[layer].vecs
    if sa is None:
        return np.zeros(len(vecs))
    mode = st.signature_mode
    if mode == "mean":
        mean = sig.signature_vector(sa.unit_vecs, "mean").astype(np.float32)
        return np.asarray((vecs @ mean).astype(np.float64))
    if mode == "max":
        units = sig.signature_vector(sa.unit_vecs, "max").astype(np.float32)
        return np.asarray((vecs @ units.T).max(axis=1).astype(np.float64))
    if mode == "joined":
        jv = sa.joined_vec if sa.joined_vec is not None else np.zeros(vecs.shape[1], np.float32)
        return np.asarray((vecs @ jv).astype(np.float64))
    if mode == "members":
        if not len(sa.member_rows):
            return np.zeros(len(vecs))
        return np.asarray((vecs @ sc.chunk_vecs[sa.member_rows].T).max(axis=1).astype(np.float64))
    chunk_scores = (
        sa.in_windows
        if mode == "window"
        else sig.region_scores(sa.in_windows, sa.doc_share[sc.chunk_doc], st.region_doc_weight)
    )
    return sc.per_unit_mean(layer, chunk_scores)


def gated_alpha(
    scope: Scope,
    query: str,
    qvec: np.ndarray,
    sa: SignatureArrays | None,
    settings: RetrievalSettings,
) -> float:
    """α after the confidence gate: ``α·conf^gate_power`` (``gate="doc"``, several documents),
    conf from the activation under the run's ``settings.signature_params``; α itself
    otherwise; 0 without a signature."""
    if sa is None or settings.alpha == 0.0:
        return 0.0
    if settings.gate == "none" or len(scope.docs) <= 1:
        return settings.alpha
    act = activate(scope, query, qvec, settings.signature_params)
    conf = sig.activation_confidence(
        np.arange(len(act.rows)), scope.chunk_doc[act.rows].tolist(), sa.main_doc
    )
    return float(settings.alpha * conf**settings.gate_power)


def layer_scores(plan: QueryPlan, layer: Layer, *, hybrid: bool) -> LayerScores:
    """(query score, signature score, fused score) of every unit of a layer.

    The query score is the dense cosine, or in hybrid mode on the veridical layer the min-max
    fusion of dense and BM25; the fused score is ``(1-α)·query + α·signature``. A chunk's
    dense cosine reads its document's context as ``settings.doc_context`` says
    (:meth:`~mindscape.memory.scope.Scope.chunk_dense`).
    """
    view = plan.scope.views[layer]
    if not len(view):
        z = np.zeros(0)
        return z, z, z
    if layer == "veridical":
        s_q = plan.scope.chunk_dense(plan.qvec, plan.settings.doc_context)
    else:
        s_q = (view.vecs @ plan.qvec).astype(np.float64)
    if hybrid and layer == "veridical":
        s_q = hybrid_scores(s_q, plan.scope.bm25_scores(plan.query), plan.settings.hybrid_weight)
    s_sig = signature_scores(plan, layer)
    fused = sig.conditioned_scores(s_q, s_sig, plan.alpha) if plan.sig is not None else s_q.copy()
    return s_q, s_sig, fused
