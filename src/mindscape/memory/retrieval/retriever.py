"""One retriever for the agent and the benchmarks: the MiA signature and tri-layer retrieval.

This module is the facade; each concept lives in a module named for it:
:mod:`~mindscape.memory.scope` (the cached arrays of a document set),
:mod:`~mindscape.memory.signature.activation` (E1), :mod:`~mindscape.memory.signature.select` (σ over
the index; the math is :mod:`~mindscape.memory.signature.sigma`),
:mod:`~mindscape.memory.signature.conditioning` (s(σ,u), the α gate; ``condition`` scores every
layer a query reads, once, and the retriever never calls back into it) and
:mod:`~mindscape.memory.retrieval.late_fusion` (MoM) and :mod:`~mindscape.memory.retrieval.raptor_collapse`
(RAPTOR's collapsed tree over the hits of every layer). The settings a retriever takes,
:class:`SignatureParams` and :class:`RetrievalSettings`, live in the leaf
:mod:`~mindscape.memory.settings` (re-exported here); the run's
:class:`~mindscape.context.Context` builds them.

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
from collections.abc import Iterable
from typing import Any

import numpy as np
from cachetools import LRUCache
from langchain_core.embeddings import Embeddings

from mindscape.embeddings import embedder_id, encode_query
from mindscape.memory.retrieval.late_fusion import fusion_layers, late_fusion
from mindscape.memory.retrieval.ranking import pack_budget
from mindscape.memory.scope import Scope
from mindscape.memory.scoring import top_rows
from mindscape.memory.settings import (
    CHUNK_MODES,
    SIGNATURE_MODES,
    Activation,
    RetrievalSettings,
    SignatureParams,
)
from mindscape.memory.signature.activation import activate
from mindscape.memory.signature.conditioning import Conditioned, condition
from mindscape.memory.signature.select import select_signature
from mindscape.memory.store import MemoryStore
from mindscape.memory.types import LAYERS, Hit, Layer, SignatureUnit, Unit
from mindscape.tokens import TokenCounter, default_counter

__all__ = [
    "RetrievalSettings",
    "Retriever",
    "SignatureParams",
    "SIGNATURE_MODES",
    "CHUNK_MODES",
]


# --------------------------------------------------------------------------- the retriever


class Retriever:
    """Signature selection and signature-conditioned tri-layer retrieval over a store.

    `params` and `settings` are what a call that passes none uses; a run builds them from its
    :class:`~mindscape.context.Context` (:func:`mindscape.run.signature_params`,
    :func:`mindscape.run.retrieval_settings`), a script from :mod:`mindscape.run`."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embeddings,
        *,
        params: SignatureParams,
        settings: RetrievalSettings,
        counter: TokenCounter | None = None,
        cache_size: int = 8,
        query_cache_size: int = 256,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.params = params
        """Signature selection used when a call passes no params."""
        self.settings = settings
        """Retrieval settings used when a call passes none."""
        self.counter = counter or default_counter()
        self._scopes: LRUCache[frozenset[str] | None, Scope] = LRUCache(maxsize=cache_size)
        self._qvecs: LRUCache[str, np.ndarray] = LRUCache(maxsize=query_cache_size)
        self._tokens: dict[str, int] = {}
        self._emb_id = embedder_id(embedder)

    # -- caches ----------------------------------------------------------------------
    def scope(self, doc_ids: Iterable[str] | None = None) -> Scope:
        """The cached arrays of a document set (None = the whole store)."""
        key = frozenset(doc_ids) if doc_ids is not None else None
        sc = self._scopes.get(key)
        if sc is None or not sc.fresh(self.store):
            sc = self._scopes[key] = Scope(self.store, key, self._emb_id)
        return sc

    def warm(self, doc_ids: Iterable[str] | None = None) -> None:
        """Build the cached arrays, the BM25 index, the chunks' vectors in context and the
        token counts of a document set."""
        sc = self.scope(doc_ids)
        sc.bm25()
        if self.settings.doc_context != "plain":
            sc.context_vecs()
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

    # -- activation (E1) and the signature ----------------------------------------------
    def candidates(
        self,
        query: str,
        *,
        doc_ids: set[str] | None = None,
        k0: int | None = None,
        activation: Activation | None = None,
    ) -> list[Hit]:
        """Query-only top-k0 chunks (the E1 activation view), best first.

        ``k0`` and ``activation`` (``dense`` or ``hybrid``) default to the retriever's params;
        a hit's ``score`` is the activation score, ``score_query`` the dense cosine, and
        ``meta["rank"]`` its 0-based rank.
        """
        sc = self.scope(doc_ids)
        p = dataclasses.replace(
            self.params,
            k0=self.params.k0 if k0 is None else k0,
            activation=activation or self.params.activation,
        )
        act = activate(sc, query, self.embed_query(query), p)
        return [
            self._hit(sc.chunks.units[r], float(act.dense[r]), 0.0, float(act.score[r]), rank=i)
            for i, r in enumerate(act.rows)
        ]

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
        text = f"{query}\n{extra_text}".strip() if extra_text else query
        return select_signature(
            self.scope(doc_ids), text, self.embed_query, params or self.params, method
        )

    # -- σ-conditioned retrieval ------------------------------------------------------------
    def _condition(
        self,
        query: str,
        signature: list[SignatureUnit] | None,
        sc: Scope,
        settings: RetrievalSettings,
        layers: list[Layer],
    ) -> Conditioned:
        """The query conditioned on σ in `sc`, each layer it reads scored once (see
        :func:`~mindscape.memory.signature.conditioning.condition`); late fusion's layers join
        the veridical one when it ranks the chunks."""
        if "veridical" in layers and settings.chunk_mode == "late-fusion":
            layers = layers + [la for la in fusion_layers(settings) if la not in layers]
        qv = self.embed_query(query)
        return condition(sc, query, qv, signature, settings, layers, embed=self.embed_query)

    def _hit(self, u: Unit, s_q: float, s_sig: float, score: float, **meta: Any) -> Hit:
        tokens = self._tokens_of(u.id, u.text)
        extra = {**u.meta, "kind": u.kind, "order": u.order, "level": u.level, **meta}
        return Hit(
            u, score_query=s_q, score_signature=s_sig, score=score, tokens=tokens, meta=extra
        )

    def _ranked(
        self, cond: Conditioned, layer: Layer, n: int, exclude: set[str] | frozenset[str]
    ) -> list[Hit]:
        """The n best units of a layer under the conditioned score, minus `exclude`; each hit
        records its rank and the plan's α in its meta."""
        plan = cond.plan
        view = plan.scope.views[layer]
        if layer == "veridical" and plan.settings.chunk_mode == "late-fusion":
            units = plan.scope.chunks.units
            return [
                self._hit(
                    units[f.row],
                    f.score_query,
                    f.score_signature,
                    f.score,
                    rank=i,
                    fused_from=f.fused_from,
                    alpha=plan.alpha,
                )
                for i, f in enumerate(late_fusion(cond, n, exclude))
            ]
        s_q, s_sig, fused = cond.scores[layer]
        if exclude:
            gone = [view.row_of[i] for i in exclude if i in view.row_of]
            if gone:
                fused = fused.copy()
                fused[gone] = -np.inf
                n = min(n, len(view) - len(gone))
        rows = top_rows(fused, n)
        return [
            self._hit(
                view.units[r],
                float(s_q[r]),
                float(s_sig[r]),
                float(fused[r]),
                rank=i,
                alpha=plan.alpha,
            )
            for i, r in enumerate(rows)
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
        read = [la for la in LAYERS if int(st.budgets.get(la, 0)) > 0 and len(sc.views[la])]
        cond = self._condition(query, signature, sc, st, read)
        out: dict[Layer, list[Hit]] = {}
        for layer in LAYERS:
            if layer not in read:
                out[layer] = []
                continue
            budget = int(st.budgets[layer])
            ranked = self._ranked(cond, layer, st.top_n, exclude)
            packed = pack_budget(ranked, lambda h: h.tokens, budget)
            if st.narrative_order and layer in ("veridical", "episodic"):
                packed.sort(key=lambda h: (h.doc_id, h.meta.get("order", 0)))
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
        sc = self.scope(doc_ids)
        if not sc.n_chunks:
            return []
        cond = self._condition(query, signature, sc, settings or self.settings, ["veridical"])
        return self._ranked(cond, "veridical", k, frozenset())
