"""The retrieval side's settings: how σ is selected (:class:`SignatureParams`) and how one query
is retrieved (:class:`RetrievalSettings`).

A leaf: it imports nothing from mindscape but :mod:`mindscape.memory.types`. The fields a run
sets have no defaults here: the run's :class:`~mindscape.context.Context` holds them, and
:func:`mindscape.run.signature_params` and :func:`mindscape.run.retrieval_settings` build
these objects from it; :mod:`mindscape.run`
gives a default run's values to scripts and tests. Only the algorithm constants, which no run
sets, have defaults here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mindscape.memory.types import LAYERS

__all__ = [
    "Activation",
    "CHUNK_MODES",
    "DOC_CONTEXT",
    "DOC_CONTEXTS",
    "GATES",
    "MatchSource",
    "RelevanceSource",
    "RetrievalSettings",
    "SIGNATURE_MODES",
    "SignatureParams",
    "chunk_ranking",
]

RelevanceSource = Literal["summary", "chunks", "mean"]
MatchSource = Literal["summary", "members", "window"]
Activation = Literal["dense", "hybrid"]

SIGNATURE_MODES = ("mean", "max", "joined", "members", "window", "region")
CHUNK_MODES = ("auto", "dense", "hybrid", "late-fusion")
GATES = ("none", "doc")
DOC_CONTEXTS = ("plain", "prefixed", "max")
"""How a chunk's dense score uses its document's context: ``plain`` its own vector only,
``prefixed`` its vector in context only, ``max`` the higher cosine of the two."""
DOC_CONTEXT = "max"
"""The default (chosen on the FairytaleQA dev split, docs/retrieval.md)."""


@dataclass(kw_only=True)
class SignatureParams:
    """Settings of the coverage-aware signature selection. The paper does not publish its λs.

    The fields a run sets have no defaults here: they come from the run's
    :class:`~mindscape.context.Context` through :meth:`~mindscape.context.Context.signature_params`
    (``mindscape.run.default_params()`` gives the defaults). Only the two
    algorithm constants below have their own."""

    k: int
    """Most sessions in a signature (the paper's K=5)."""
    k0: int
    """Size of the query-only candidate pool; candidates with rank >= k0 are ignored."""
    lambda_q: float
    """Weight of query relevance. Each pick adds at most 1 to f̃Q."""
    lambda_c: float
    """Weight of candidate coverage. All picks together add at most 1 to f̃C, so coverage
    mostly decides the first picks and separates sessions of similar relevance later."""
    lambda_d: float
    """Weight of the redundancy penalty. Small, so it only breaks near-ties (a near-duplicate
    of a picked session loses about 0.1); 0 restores the 1-1/e guarantee."""
    relevance: RelevanceSource
    """Where rel(q,s) comes from when the caller passes no ``session_rel``: ``"summary"``
    = cosine of query and summary; ``"chunks"`` = best activation score (the dense cosine, or
    its hybrid fusion with BM25 under ``activation="hybrid"``) among the session's candidate
    chunks; ``"mean"`` = the average of the two."""
    match: MatchSource
    """How m(s, c_i) is computed by the retriever: ``"summary"`` = cosine of summary and
    chunk plus ``window_boost`` in the window (:func:`~mindscape.memory.signature.sigma.match_matrix`);
    ``"members"`` = the best cosine between the chunk and the session's member chunks (1 in the
    window); ``"window"`` = 1 in the window, else 0 (pure rank-weighted mass)."""
    activation: Activation
    """The query-only retriever (E1) that gives the K0 candidates and their ranks:
    ``"dense"`` cosine, or ``"hybrid"`` = dense fused with BM25 (``hybrid_weight``)."""
    hybrid_weight: float
    """BM25 weight of the hybrid activation (min-max fusion, see ``ranking.hybrid_scores``)."""
    window_boost: float = 0.5
    """Added to the match m(s,c) when chunk c lies in the window of session s (capped at 1).
    A summary compresses ~20 chunks, so its cosine to any one of them is modest; the boost
    makes "this chunk is in my window" count as coverage while a semantic match to chunks
    of other windows still counts partly."""
    min_gain: float = 0.0
    """A session is picked only if its total gain is strictly above this; otherwise stop."""


@dataclass(kw_only=True)
class RetrievalSettings:
    """How `Retriever.retrieve` works.

    The fields a run sets have no defaults here: they come from the run's
    :class:`~mindscape.context.Context` through :func:`mindscape.run.retrieval_settings`, and
    ``mindscape.run.default_settings()`` gives the defaults. The algorithm
    constants after ``signature_params`` have their own."""

    alpha: float
    """Weight of the signature score: s = (1-α)·s(q,c) + α·s(σ,c)."""
    signature_mode: str
    """How the signature scores a unit, s(σ,u):
    ``mean`` — cosine with the normalised mean of the signature's summary vectors;
    ``max`` — best cosine with one of the summary vectors;
    ``joined`` — cosine with one embedding of the joined signature text (embedded per query);
    ``members`` — best cosine with a member chunk of the signature's sessions (1 inside them);
    ``window`` — 1 for chunks inside the signature's windows, else 0;
    ``region`` — ``(1-ρ)·window + ρ·(the signature's coverage share of the unit's document)``,
    ρ = ``region_doc_weight``. Units above chunk level take the mean over their chunks for
    ``window``/``region``."""
    budgets: dict[str, int]
    """Token budget per layer; 0 switches a layer off."""
    top_n: int
    """Candidates per layer considered before budget packing."""
    chunk_mode: str
    """Veridical layer: dense | hybrid (BM25 + dense) | late-fusion (MoM: outline/core hits
    mapped to chunks, RRF) | auto (hybrid when the query's scope spans several documents,
    dense within one: :func:`chunk_ranking`)."""
    hybrid_weight: float
    """BM25 weight in hybrid mode: ``(1-w)·minmax(dense) + w·minmax(bm25)`` over the scope's chunks."""
    gate: str
    """Confidence gate on α: ``none``, or ``doc`` = α·conf^gate_power with conf the share of the
    query's rank-weighted activation (its K0 candidates) lying in the signature's main document.
    Within a single document conf = 1, so the gate only acts when several documents compete."""
    narrative_order: bool
    """Return packed veridical/episodic hits in source order (ComoRAG re-sorts them so) instead of by score."""
    region_doc_weight: float
    """ρ of the ``region`` signature mode: the weight of the document share against the
    window term (see ``Context.region_doc_weight``)."""
    signature_params: SignatureParams
    """The run's signature selection; the α gate reads its activation view (K0, dense or
    hybrid) from it, so the gate sees what chose σ."""
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
    doc_context: str = DOC_CONTEXT
    """A chunk's dense cosine: ``plain`` (its own vector), ``prefixed`` (its vector with the
    document's title before it) or ``max`` (the higher of the two; see
    :meth:`~mindscape.memory.scope.Scope.chunk_dense`)."""

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
        if self.doc_context not in DOC_CONTEXTS:
            raise ValueError(f"unknown doc_context {self.doc_context!r}; use one of {DOC_CONTEXTS}")
        if self.gate not in GATES:
            raise ValueError(f"unknown gate {self.gate!r}; use one of {GATES}")
        unknown = set(self.budgets) - set(LAYERS)
        if unknown:
            raise ValueError(f"unknown layers in budgets: {sorted(unknown)}")


def chunk_ranking(chunk_mode: str, n_docs: int) -> str:
    """The veridical ranking a query gets: ``auto`` is ``hybrid`` when its scope spans several
    documents and ``dense`` within one; the other modes are themselves.

    Why: on pools of FairytaleQA stories, BM25 finds the right story by its names (chunk R@10
    +11 points over dense); inside one novel the main names are on every page, and the local
    model answered 8.7 F1 points better from dense-ranked chunks (narrativeqa_lit dev, 60
    questions), and no worse on single FairytaleQA stories (docs/retrieval.md)."""
    if chunk_mode != "auto":
        return chunk_mode
    return "hybrid" if n_docs > 1 else "dense"
