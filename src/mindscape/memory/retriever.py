"""One retriever for the agent and the benchmarks: the MiA signature and tri-layer retrieval.

* :meth:`Retriever.candidates` — the query-only activation view (E1): the top-K0 chunks by
  dense cosine, or by dense fused with BM25 (``SignatureParams.activation``).
* :meth:`Retriever.signature` — coverage-aware greedy (MiA Appendix A) or First-K over the
  session summaries of those candidates. Summary and chunk vectors come from the index.
* :meth:`Retriever.retrieve` — per layer (veridical, semantic, episodic, MoM outline): the
  units ranked by ``s(u|q,σ) = (1-α)·s(q,u) + α·s(σ,u)``, minus a memory pool, packed into a
  token budget per layer (ComoRAG's Tri-Retrieve). The veridical layer can be dense, hybrid
  (BM25 + dense) or MoM late fusion (outline/semantic hits mapped to their chunks,
  near-duplicates removed, reciprocal rank fusion).
* :meth:`Retriever.rank_chunks` — the conditioned chunk ranking without packing (Recall@k).

Layers are read once per document set as numpy arrays (``store.view``) and the derived arrays
(chunk→session rows, member lists, BM25, token counts) are cached on the retriever, so a warm
query costs a few matrix-vector products. See ``docs/retrieval.md`` for the method and the
dev-split sweep behind the defaults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from cachetools import LRUCache
from langchain_core.embeddings import Embeddings

from mindscape.embeddings import encode_query
from mindscape.memory import signature as sig
from mindscape.memory.ranking import BM25Index, dedupe_near, hybrid_scores, pack_budget
from mindscape.memory.signature import Activation, SignatureParams
from mindscape.memory.store import LayerView, MemoryStore
from mindscape.memory.types import LAYERS, Hit, Layer, SignatureUnit
from mindscape.tokens import TokenCounter, default_counter

__all__ = [
    "RetrievalSettings",
    "Retriever",
    "DEFAULT_SIGNATURE_PARAMS",
    "SIGNATURE_MODES",
    "CHUNK_MODES",
]

SIGNATURE_MODES = ("mean", "max", "joined", "members", "window", "region")
CHUNK_MODES = ("dense", "hybrid", "late-fusion")
GATES = ("none", "doc")

DEFAULT_SIGNATURE_PARAMS = SignatureParams(
    k=5,
    k0=50,
    lambda_q=1.0,
    lambda_c=1.0,
    lambda_d=0.1,
    relevance="chunks",
    match="members",
    activation="hybrid",
    hybrid_weight=0.3,
)
"""The retriever's signature selection (chosen on the FairytaleQA dev split, see docs/retrieval.md).

It differs from the literal ``SignatureParams()`` in three places: relevance of a session is
the best activation score among its candidate chunks (not the cosine of the query and an
extractive summary), the match m(s, c) goes through the session's member chunks, and the
activation view is hybrid (BM25 + dense)."""


@dataclass
class RetrievalSettings:
    """How `Retriever.retrieve` works; every field is a knob the agent's Context exposes."""

    alpha: float = 0.5
    """Weight of the signature score: s = (1-α)·s(q,c) + α·s(σ,c)."""
    signature_mode: str = "region"
    """How the signature scores a unit, s(σ,u):
    ``mean`` — cosine with the normalised mean of the signature's summary vectors;
    ``max`` — best cosine with one of the summary vectors;
    ``joined`` — cosine with one embedding of the joined signature text (embedded per query);
    ``members`` — best cosine with a member chunk of the signature's sessions (1 inside them);
    ``window`` — 1 for chunks inside the signature's windows, else 0;
    ``region`` — ``(1-ρ)·window + ρ·(the signature's coverage share of the unit's document)``,
    ρ = ``region_doc_weight``. Units above chunk level take the mean over their chunks for
    ``window``/``region``."""
    budgets: dict[str, int] = field(
        default_factory=lambda: {
            "veridical": 2000,
            "semantic": 2000,
            "episodic": 2000,
            "outline": 0,
        }
    )
    """Token budget per layer; 0 switches a layer off."""
    top_n: int = 50
    """Candidates per layer considered before budget packing."""
    chunk_mode: str = "hybrid"
    """Veridical layer: dense | hybrid (BM25 + dense) | late-fusion (MoM: outline/core hits mapped to chunks, RRF)."""
    hybrid_weight: float = 0.3
    """BM25 weight in hybrid mode: ``(1-w)·minmax(dense) + w·minmax(bm25)`` over the scope's chunks."""
    region_doc_weight: float = 0.75
    """ρ of the ``region`` signature mode: the weight of the document share against the window term."""
    gate: str = "doc"
    """Confidence gate on α: ``none``, or ``doc`` = α·conf^gate_power with conf the share of the
    query's rank-weighted activation (its K0 candidates) lying in the signature's main document.
    Within a single document conf = 1, so the gate only acts when several documents compete."""
    gate_power: float = 2.0
    """Exponent of the confidence in the gate."""
    fusion_layers: tuple[str, ...] = ("veridical", "outline")
    """Late-fusion mode: the layers whose rankings are mapped to chunks and fused."""
    rrf_k: int = 60
    """Reciprocal-rank-fusion constant."""
    dedupe_threshold: float = 0.95
    """Late fusion: a chunk whose embedding cosine to a better one is at least this is dropped."""
    window_weights: str = "flat"
    """``window``/``region`` modes: ``flat`` = every signature window counts 1; ``gain`` = a
    window counts its unit's coverage gain relative to the largest one."""
    narrative_order: bool = False
    """Return packed veridical/episodic hits in source order (ComoRAG re-sorts them so) instead of by score."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1]; got {self.alpha}")
        if self.window_weights not in ("flat", "gain"):
            raise ValueError(
                f"unknown window_weights {self.window_weights!r}; use 'flat' or 'gain'"
            )
        if self.signature_mode not in SIGNATURE_MODES:
            raise ValueError(
                f"unknown signature_mode {self.signature_mode!r}; use one of {SIGNATURE_MODES}"
            )
        if self.chunk_mode not in CHUNK_MODES:
            raise ValueError(f"unknown chunk_mode {self.chunk_mode!r}; use one of {CHUNK_MODES}")
        if self.gate not in GATES:
            raise ValueError(f"unknown gate {self.gate!r}; use one of {GATES}")
        unknown = set(self.budgets) - set(LAYERS)
        if unknown:
            raise ValueError(f"unknown layers in budgets: {sorted(unknown)}")


# --------------------------------------------------------------------------- cached arrays


class _Scope:
    """Everything derived from the store for one set of documents; built once, reused per query."""

    def __init__(self, store: MemoryStore, doc_ids: frozenset[str] | None) -> None:
        self.doc_ids = doc_ids
        wanted = set(doc_ids) if doc_ids is not None else None
        self.sources = {layer: store.view(layer) for layer in LAYERS}
        self.views: dict[Layer, LayerView] = {
            layer: self.sources[layer].subset(wanted) for layer in LAYERS
        }
        chunks = self.views["veridical"]
        self.chunks = chunks
        self.chunk_vecs = chunks.vecs if len(chunks) else np.zeros((0, 1), np.float32)
        self.n_chunks = len(chunks)
        docs = sorted({u.doc_id for u in chunks.units})
        self.doc_index = {d: i for i, d in enumerate(docs)}
        self.docs = docs
        self.chunk_doc = np.fromiter(
            (self.doc_index[u.doc_id] for u in chunks.units), dtype=np.int64, count=self.n_chunks
        )
        sessions = self.views["episodic"]
        self.sessions = sessions
        self.chunk_session = np.full(self.n_chunks, -1, dtype=np.int64)
        self.session_members: list[np.ndarray] = []
        for j, u in enumerate(sessions.units):
            rows = self.rows_of_chunks(u.chunk_ids)
            self.session_members.append(rows)
            self.chunk_session[rows] = j
        self._unit_chunks: dict[Layer, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._bm25: BM25Index | None = None
        self._bm25_cache: LRUCache[str, np.ndarray] = LRUCache(maxsize=32)

    def fresh(self, store: MemoryStore) -> bool:
        """True while the store still serves the views this scope was built from."""
        return all(store.view(layer) is self.sources[layer] for layer in LAYERS)

    def rows_of_chunks(self, chunk_ids: Iterable[str]) -> np.ndarray:
        row_of = self.chunks.row_of
        return np.fromiter((row_of[c] for c in chunk_ids if c in row_of), dtype=np.int64)

    def bm25(self) -> BM25Index:
        if self._bm25 is None:
            self._bm25 = BM25Index([u.text for u in self.chunks.units])
        return self._bm25

    def bm25_scores(self, query: str) -> np.ndarray:
        """BM25 scores of every chunk for a query (the last few queries are cached)."""
        got = self._bm25_cache.get(query)
        if got is None:
            got = self._bm25_cache[query] = self.bm25().scores(query)
        return got

    def unit_chunks(self, layer: Layer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(unit index per pair, chunk row per pair, chunk count per unit) for a layer."""
        if layer not in self._unit_chunks:
            units, rows = [], []
            for i, u in enumerate(self.views[layer].units):
                r = self.rows_of_chunks(u.chunk_ids)
                units.append(np.full(len(r), i, dtype=np.int64))
                rows.append(r)
            uidx = np.concatenate(units) if units else np.zeros(0, np.int64)
            ridx = np.concatenate(rows) if rows else np.zeros(0, np.int64)
            counts = np.bincount(uidx, minlength=len(self.views[layer])).astype(np.float64)
            self._unit_chunks[layer] = (uidx, ridx, counts)
        return self._unit_chunks[layer]

    def per_unit_mean(self, layer: Layer, chunk_values: np.ndarray) -> np.ndarray:
        """For each unit of a layer, the mean of a per-chunk value over its chunks (0 if none)."""
        if layer == "veridical":
            return chunk_values
        uidx, ridx, counts = self.unit_chunks(layer)
        sums = np.bincount(uidx, weights=chunk_values[ridx], minlength=len(counts))
        return np.asarray(np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0))


@dataclass
class _Activation:
    """The query-only view of one query: scores over all chunks and the top-K0 rows."""

    dense: np.ndarray
    score: np.ndarray
    rows: np.ndarray


@dataclass
class _SigArrays:
    """A signature resolved against a scope."""

    unit_vecs: np.ndarray
    member_rows: np.ndarray
    in_windows: np.ndarray
    doc_share: np.ndarray
    main_doc: int | None
    text: str


def _top(scores: np.ndarray, n: int) -> np.ndarray:
    """Indices of the n best scores, best first; ties go to the lower index (deterministic)."""
    total = len(scores)
    if n <= 0 or total == 0:
        return np.zeros(0, dtype=np.int64)
    if n < total:
        kth = np.partition(scores, total - n)[total - n]
        idx = np.flatnonzero(scores >= kth)
    else:
        idx = np.arange(total)
    order = np.lexsort((idx, -scores[idx]))
    return idx[order][:n]


# --------------------------------------------------------------------------- the retriever


class Retriever:
    """Signature selection and signature-conditioned tri-layer retrieval over a store."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embeddings,
        *,
        params: SignatureParams | None = None,
        settings: RetrievalSettings | None = None,
        counter: TokenCounter | None = None,
        cache_size: int = 8,
        query_cache_size: int = 256,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.params = params or DEFAULT_SIGNATURE_PARAMS
        """Signature selection used when a call passes no params."""
        self.settings = settings or RetrievalSettings()
        """Retrieval settings used when a call passes none."""
        self.counter = counter or default_counter()
        self._scopes: LRUCache[frozenset[str] | None, _Scope] = LRUCache(maxsize=cache_size)
        self._qvecs: LRUCache[str, np.ndarray] = LRUCache(maxsize=query_cache_size)
        self._tokens: dict[str, int] = {}

    # -- caches ----------------------------------------------------------------------
    def scope(self, doc_ids: Iterable[str] | None = None) -> _Scope:
        """The cached arrays of a document set (None = the whole store)."""
        key = frozenset(doc_ids) if doc_ids is not None else None
        sc = self._scopes.get(key)
        if sc is None or not sc.fresh(self.store):
            sc = self._scopes[key] = _Scope(self.store, key)
        return sc

    def warm(self, doc_ids: Iterable[str] | None = None) -> None:
        """Build the cached arrays, the BM25 index and the token counts of a document set."""
        sc = self.scope(doc_ids)
        sc.bm25()
        for layer in LAYERS:
            units = [u for u in sc.views[layer].units if u.id not in self._tokens]
            if units:
                counts = self.counter.count_many([u.text for u in units])
                self._tokens.update({u.id: int(n) for u, n in zip(units, counts, strict=True)})

    def embed_query(self, text: str) -> np.ndarray:
        """Unit vector of a query (the last few are cached)."""
        v = self._qvecs.get(text)
        if v is None:
            v = self._qvecs[text] = encode_query(self.embedder, text).astype(np.float32)
        return v

    def _tokens_of(self, unit_id: str, text: str) -> int:
        n = self._tokens.get(unit_id)
        if n is None:
            n = self.counter.count(text)
            self._tokens[unit_id] = n
        return n

    # -- activation (E1) -------------------------------------------------------------
    def _activation(
        self, sc: _Scope, query: str, qv: np.ndarray, p: SignatureParams
    ) -> _Activation:
        dense = sc.chunk_vecs @ qv if sc.n_chunks else np.zeros(0, np.float32)
        dense = dense.astype(np.float64)
        if p.activation == "hybrid" and sc.n_chunks:
            score = hybrid_scores(dense, sc.bm25_scores(query), p.hybrid_weight)
        elif p.activation in ("dense", "hybrid"):
            score = dense
        else:
            raise ValueError(f"unknown activation {p.activation!r}; use 'dense' or 'hybrid'")
        return _Activation(dense, score, _top(score, p.k0))

    def candidates(
        self,
        query: str,
        *,
        doc_ids: set[str] | None = None,
        k0: int = 50,
        activation: Activation | None = None,
    ) -> list[Hit]:
        """Query-only top-k0 chunks (the E1 activation view), best first.

        ``activation`` (default: the retriever's params) is ``dense`` or ``hybrid``; a hit's
        ``score`` is the activation score, ``score_query`` the dense cosine, and
        ``meta["rank"]`` its 0-based rank.
        """
        sc = self.scope(doc_ids)
        p = dataclasses.replace(self.params, k0=k0, activation=activation or self.params.activation)
        act = self._activation(sc, query, self.embed_query(query), p)
        hits = []
        for rank, r in enumerate(act.rows):
            u = sc.chunks.units[r]
            hits.append(self._hit(u, float(act.dense[r]), 0.0, float(act.score[r]), rank=rank))
        return hits

    # -- signature --------------------------------------------------------------------
    def signature(
        self,
        query: str,
        *,
        doc_ids: set[str] | None = None,
        method: str = "coverage",
        params: SignatureParams | None = None,
        extra_text: str = "",
    ) -> list[SignatureUnit]:
        """The signature: coverage-aware greedy (`coverage`) or `first-k` over session summaries.

        The candidate sessions are the sessions of the top-K0 activation chunks, in the order
        their best chunk ranks. ``extra_text`` (e.g. evidence notes) is appended to the query
        for the activation: the offline signature update. Each unit records its gains
        (``query``, ``coverage``, ``diversity``, ``total``, computed the same way for First-K).
        """
        if method not in ("coverage", "first-k"):
            raise ValueError(f"unknown signature method {method!r}; use 'coverage' or 'first-k'")
        p = params or self.params
        text = f"{query}\n{extra_text}".strip() if extra_text else query
        sc = self.scope(doc_ids)
        if not len(sc.sessions) or not sc.n_chunks:
            return []
        qv = self.embed_query(text)
        act = self._activation(sc, text, qv, p)
        rows = act.rows[sc.chunk_session[act.rows] >= 0]
        if not len(rows):
            return []
        cand_session = sc.chunk_session[rows]
        ranks = np.arange(len(rows))
        sess = list(dict.fromkeys(cand_session.tolist()))  # first-appearance order
        sess_arr = np.asarray(sess, dtype=np.int64)
        session_vecs = sc.sessions.vecs[sess_arr].astype(np.float64)
        cand_vecs = sc.chunk_vecs[rows].astype(np.float64)

        if p.relevance == "summary":
            rel = session_vecs @ qv
        else:
            rel_chunks = sig.session_relevance_from_chunks(act.score[rows], cand_session, sess)
            rel = rel_chunks if p.relevance == "chunks" else 0.5 * (session_vecs @ qv + rel_chunks)
        in_window = sig.window_mask(sess, cand_session)
        if p.match == "summary":
            match = sig.match_matrix(session_vecs, cand_vecs, in_window, p.window_boost)
        elif p.match == "members":
            match = self._member_match(sc, sess, rows)
        elif p.match == "window":
            match = in_window.astype(np.float64)
        else:
            raise ValueError(f"unknown match {p.match!r}; use 'summary', 'members' or 'window'")
        weights = sig.rank_weights(ranks)
        sim = session_vecs @ session_vecs.T

        if method == "coverage":
            picks = sig.greedy_select(
                sig.normalise_relevance(rel), match, weights, sim if p.lambda_d else None, p
            )
        else:
            order = sig.first_k(ranks, cand_session.tolist(), p.k)
            picks = self._gains_of([sess.index(s) for s in order], rel, match, weights, sim, p)
        units = sc.sessions.units
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

    @staticmethod
    def _member_match(sc: _Scope, sess: list[int], cand_rows: np.ndarray) -> np.ndarray:
        """m(s, c) through member chunks, ``clip(max_{c' in s} cos(c', c), 0, 1)``, on the
        index's unit vectors: one float32 product (checked against
        ``tests/signature_oracle.member_match``)."""
        members = [sc.session_members[j] for j in sess]
        sizes = np.fromiter((len(m) for m in members), dtype=np.int64, count=len(members))
        out = np.zeros((len(sess), len(cand_rows)))
        if not sizes.sum() or not len(cand_rows):
            return out
        sims = sc.chunk_vecs[np.concatenate(members)] @ sc.chunk_vecs[cand_rows].T
        nonempty = sizes > 0
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])[nonempty]
        out[nonempty] = np.maximum.reduceat(sims, starts, axis=0)
        return np.clip(out, 0.0, 1.0)

    @staticmethod
    def _gains_of(
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
            out.append(
                (
                    j,
                    {
                        "query": float(rel_norm[j]),
                        "coverage": gc,
                        "diversity": gd,
                        "total": float(total),
                    },
                )
            )
            cover = np.maximum(cover, match[j])
            picked.append(j)
        return out

    def _resolve(
        self, sc: _Scope, signature: Sequence[SignatureUnit], need_text: bool, graded: bool = False
    ) -> _SigArrays | None:
        """Vectors, member chunks, window flags and document shares of a signature in a scope."""
        vecs, members, docs, weights = [], [], [], []
        for su in signature:
            for layer in ("episodic", "semantic", "outline", "veridical"):
                view = sc.views[layer]
                row = view.row_of.get(su.unit_id)
                if row is not None:
                    vecs.append(view.vecs[row])
                    members.append(sc.rows_of_chunks(view.units[row].chunk_ids))
                    docs.append(view.units[row].doc_id)
                    weights.append(
                        su.gains.get("coverage", 0.0) + su.gains.get("query", 0.0) * 1e-6
                    )
                    break
        if not vecs:
            return None
        member_rows = np.unique(np.concatenate(members)) if members else np.zeros(0, np.int64)
        in_windows = np.zeros(sc.n_chunks)
        if graded:
            w = np.maximum(np.asarray(weights), 0.0)
            w = w / w.max() if w.max() > 0 else np.ones(len(w))
            for rows, x in zip(members, w, strict=True):
                in_windows[rows] = np.maximum(in_windows[rows], x)
        else:
            in_windows[member_rows] = 1.0
        shares = sig.doc_shares(docs, weights)
        doc_share = np.zeros(len(sc.docs))
        for d, s in shares.items():
            if d in sc.doc_index:
                doc_share[sc.doc_index[d]] = s
        main_doc = int(np.argmax(doc_share)) if doc_share.sum() > 0 else None
        text = "\n".join(su.text for su in signature) if need_text else ""
        return _SigArrays(
            np.vstack(vecs).astype(np.float64), member_rows, in_windows, doc_share, main_doc, text
        )

    # -- scoring ---------------------------------------------------------------------------
    def _sig_scores(
        self, sc: _Scope, layer: Layer, sa: _SigArrays, mode: str, st: RetrievalSettings
    ) -> np.ndarray:
        """s(σ, u) for every unit of a layer."""
        # Index vectors are unit-normalised float32 (LayerView), so cosines are plain products.
        vecs = sc.views[layer].vecs
        if mode == "mean":
            return (vecs @ sig.signature_vector(sa.unit_vecs, "mean").astype(np.float32)).astype(
                np.float64
            )
        if mode == "max":
            return np.asarray(
                (vecs @ sig.signature_vector(sa.unit_vecs, "max").astype(np.float32).T)
                .max(axis=1)
                .astype(np.float64)
            )
        if mode == "joined":
            jv = self.embed_query(sa.text) if sa.text else np.zeros(vecs.shape[1], np.float32)
            return np.asarray((vecs @ jv).astype(np.float64))
        if mode == "members":
            if not len(sa.member_rows):
                return np.zeros(len(vecs))
            return np.asarray(
                (vecs @ sc.chunk_vecs[sa.member_rows].T).max(axis=1).astype(np.float64)
            )
        chunk_scores = (
            sa.in_windows
            if mode == "window"
            else sig.region_scores(sa.in_windows, sa.doc_share[sc.chunk_doc], st.region_doc_weight)
        )
        return sc.per_unit_mean(layer, chunk_scores)

    def _alpha(
        self, sc: _Scope, query: str, qv: np.ndarray, sa: _SigArrays | None, st: RetrievalSettings
    ) -> float:
        """α after the confidence gate."""
        if sa is None or st.alpha == 0.0:
            return 0.0
        if st.gate == "none" or len(sc.docs) <= 1:
            return st.alpha
        act = self._activation(sc, query, qv, self.params)
        conf = sig.activation_confidence(
            np.arange(len(act.rows)), sc.chunk_doc[act.rows].tolist(), sa.main_doc
        )
        return float(st.alpha * conf**st.gate_power)

    def _layer_scores(
        self,
        sc: _Scope,
        layer: Layer,
        query: str,
        qv: np.ndarray,
        sa: _SigArrays | None,
        alpha: float,
        st: RetrievalSettings,
        hybrid: bool,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query score, signature score, fused score) of every unit of a layer.

        The query score is the dense cosine, or in hybrid mode on the veridical layer the
        min-max fusion of dense and BM25; the fused score is ``(1-α)·query + α·signature``.
        """
        view = sc.views[layer]
        if not len(view):
            z = np.zeros(0)
            return z, z, z
        s_q = (view.vecs @ qv).astype(np.float64)
        if hybrid and layer == "veridical":
            s_q = hybrid_scores(s_q, sc.bm25_scores(query), st.hybrid_weight)
        s_sig = (
            self._sig_scores(sc, layer, sa, st.signature_mode, st)
            if sa is not None
            else np.zeros(len(view))
        )
        fused = sig.conditioned_scores(s_q, s_sig, alpha) if sa is not None else s_q.copy()
        return s_q, s_sig, fused

    def _hit(self, u: Any, s_q: float, s_sig: float, score: float, **meta: Any) -> Hit:
        return Hit(
            layer=u.layer,
            unit_id=u.id,
            doc_id=u.doc_id,
            chunk_ids=list(u.chunk_ids),
            text=u.text,
            score_query=s_q,
            score_signature=s_sig,
            score=score,
            tokens=self._tokens_of(u.id, u.text),
            meta={**u.meta, "kind": u.kind, "order": u.order, "level": u.level, **meta},
        )

    def _ranked(
        self,
        sc: _Scope,
        layer: Layer,
        query: str,
        qv: np.ndarray,
        sa: _SigArrays | None,
        alpha: float,
        st: RetrievalSettings,
        n: int,
        exclude: set[str] | frozenset[str],
    ) -> list[Hit]:
        """The n best units of a layer under the conditioned score, minus `exclude`."""
        view = sc.views[layer]
        if layer == "veridical" and st.chunk_mode == "late-fusion":
            return self._late_fusion(sc, query, qv, sa, alpha, st, n, exclude)
        s_q, s_sig, fused = self._layer_scores(
            sc, layer, query, qv, sa, alpha, st, hybrid=st.chunk_mode == "hybrid"
        )
        if exclude:
            gone = [view.row_of[i] for i in exclude if i in view.row_of]
            if gone:
                fused = fused.copy()
                fused[gone] = -np.inf
                n = min(n, len(view) - len(gone))
        rows = _top(fused, n)
        return [
            self._hit(view.units[r], float(s_q[r]), float(s_sig[r]), float(fused[r]), rank=i)
            for i, r in enumerate(rows)
        ]

    def _late_fusion(
        self,
        sc: _Scope,
        query: str,
        qv: np.ndarray,
        sa: _SigArrays | None,
        alpha: float,
        st: RetrievalSettings,
        n: int,
        exclude: set[str] | frozenset[str],
    ) -> list[Hit]:
        """MoM late fusion: rank each layer, map unit hits to their chunks, fuse by RRF, dedupe.

        The veridical layer ranks chunks directly. A unit of another layer at rank r (from 1)
        is evidence for every chunk it covers, so each of them gets ``1/(rrf_k + r)`` from that
        layer (its best unit counts). Fused score = the sum over layers; ties go to the better
        conditioned chunk score. Near-duplicates (embedding cosine >= ``dedupe_threshold`` to
        a better chunk) are then dropped.
        """
        c_q, c_sig, c_fused = self._layer_scores(
            sc, "veridical", query, qv, sa, alpha, st, hybrid=False
        )
        depth = max(n, st.top_n)
        total = np.zeros(sc.n_chunks)
        sources: dict[int, list[str]] = {}
        for layer in st.fusion_layers:
            if layer not in LAYERS or not len(sc.views[layer]):
                continue
            best_rank = np.full(sc.n_chunks, np.inf)
            if layer == "veridical":
                top = _top(c_fused, depth)
                best_rank[top] = np.arange(1, len(top) + 1)
            else:
                _, _, fused = self._layer_scores(sc, layer, query, qv, sa, alpha, st, hybrid=False)
                uidx, ridx, _ = sc.unit_chunks(layer)
                unit_rank = np.full(len(fused), np.inf)
                top = _top(fused, depth)
                unit_rank[top] = np.arange(1, len(top) + 1)
                np.minimum.at(best_rank, ridx, unit_rank[uidx])
            hit = np.isfinite(best_rank)
            total[hit] += 1.0 / (st.rrf_k + best_rank[hit])
            for row in np.flatnonzero(hit):
                sources.setdefault(int(row), []).append(layer)
        if exclude:
            for c in list(sources):
                if sc.chunks.units[c].id in exclude:
                    del sources[c]
        pool = np.fromiter(sources, dtype=np.int64, count=len(sources))
        if not len(pool):
            return []
        order = pool[np.lexsort((pool, -c_fused[pool], -total[pool]))]
        if st.dedupe_threshold < 1.0:
            head = order[: max(4 * n, n + 20)]
            keep = dedupe_near(sc.chunk_vecs[head].astype(np.float64), st.dedupe_threshold)
            order = head[keep]
        ids = sc.chunks.units
        return [
            self._hit(
                ids[c],
                float(c_q[c]),
                float(c_sig[c]),
                float(total[c]),
                rank=i,
                fused_from=sources[int(c)],
            )
            for i, c in enumerate(order[:n])
        ]

    # -- public retrieval --------------------------------------------------------------------
    def retrieve(
        self,
        query: str,
        *,
        signature: list[SignatureUnit] | None = None,
        doc_ids: set[str] | None = None,
        settings: RetrievalSettings | None = None,
        exclude: set[str] | frozenset[str] = frozenset(),
    ) -> dict[Layer, list[Hit]]:
        """Per enabled layer: hits ranked by the conditioned score, minus `exclude`, packed into the budget.

        Every layer of ``LAYERS`` is a key; a layer with budget 0 (switched off) or without
        units maps to ``[]``. ``exclude`` holds unit ids already in the memory pool. Within a
        layer, the top ``top_n`` remaining units are packed best first while they fit the
        layer's budget (a unit too large is skipped, a later smaller one may still fit).
        """
        st = settings or self.settings
        sc = self.scope(doc_ids)
        qv = self.embed_query(query)
        sa = (
            self._resolve(sc, signature, st.signature_mode == "joined", st.window_weights == "gain")
            if signature
            else None
        )
        alpha = self._alpha(sc, query, qv, sa, st)
        out: dict[Layer, list[Hit]] = {}
        for layer in LAYERS:
            budget = int(st.budgets.get(layer, 0))
            if budget <= 0 or not len(sc.views[layer]):
                out[layer] = []
                continue
            ranked = self._ranked(sc, layer, query, qv, sa, alpha, st, st.top_n, exclude)
            packed = pack_budget(ranked, lambda h: h.tokens, budget)
            if st.narrative_order and layer in ("veridical", "episodic"):
                packed.sort(key=lambda h: (h.doc_id, h.meta.get("order", 0)))
            for h in packed:
                h.meta["alpha"] = alpha
            out[layer] = packed
        return out

    def rank_chunks(
        self,
        query: str,
        *,
        signature: list[SignatureUnit] | None = None,
        doc_ids: set[str] | None = None,
        settings: RetrievalSettings | None = None,
        k: int = 20,
    ) -> list[Hit]:
        """The top-k chunks under the conditioned score, unpacked (for Recall@k benchmarks)."""
        st = settings or self.settings
        sc = self.scope(doc_ids)
        if not sc.n_chunks:
            return []
        qv = self.embed_query(query)
        sa = (
            self._resolve(sc, signature, st.signature_mode == "joined", st.window_weights == "gain")
            if signature
            else None
        )
        alpha = self._alpha(sc, query, qv, sa, st)
        hits = self._ranked(sc, "veridical", query, qv, sa, alpha, st, k, frozenset())
        for h in hits:
            h.meta["alpha"] = alpha
        return hits
