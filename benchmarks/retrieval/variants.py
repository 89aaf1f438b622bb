"""The rows of `retrieval/recall.py`'s table and their Recall@k (`library.py` routes with the
main ones). Each row is a way to choose the signature and to score chunks, grouped as the
table prints them (main, doc-context, router, alpha, summaries and, with ``--grid``, the
design sweep of docs/retrieval.md); `evaluate` scores them per question against gold spans."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from benchmarks.common import log, paired_points, retrieved_spans
from mindscape.eval.bench import gold_spans
from mindscape.eval.metrics import recall_at_k
from mindscape.memory.retrieval.retriever import RetrievalSettings, Retriever
from mindscape.memory.scope import DOC_CONTEXTS
from mindscape.memory.scoring import top_rows
from mindscape.memory.signature.activation import activate
from mindscape.memory.signature.sigma import SignatureParams
from mindscape.run import default_params, default_settings, literal_params

KS = (1, 3, 5, 10, 20)
"""The k of Recall@k."""
MAIN = ("naive", "hybrid", "first-k", "mia-rag")
"""The rows the summary reports first (and the library benchmark's routing)."""
DOC_CONTEXT_ROWS = ("naive", "hybrid", "mia-rag")
"""The rows ``--doc-context`` repeats with each chunk-vector context (plain, prefixed, max)."""
ACTIVATION_ROUTER = "activation-router"


@dataclasses.dataclass
class Variant:
    """One row of the table: how the signature is chosen and how chunks are scored."""

    name: str
    settings: RetrievalSettings
    method: str | None = None
    """None: no signature; else 'coverage' or 'first-k'."""
    params: SignatureParams | None = None
    group: str = "main"


def variants(grid: bool, doc_context: bool = False) -> list[Variant]:
    """The main rows, (with ``doc_context``) the main rows with each chunk-vector context, the
    router rows, the α sweep, the rows the session summaries decide and (with ``grid``) the
    design sweep."""
    base = default_settings()
    dense = dataclasses.replace(base, chunk_mode="dense")
    p = default_params()
    out = [
        Variant("naive", dataclasses.replace(dense, alpha=0.0)),
        Variant("hybrid", dataclasses.replace(base, chunk_mode="hybrid", alpha=0.0)),
        Variant("first-k", base, "first-k", p),
        Variant("mia-rag", base, "coverage", p),
    ]
    if doc_context:
        out += doc_context_rows(out)
    out += router_rows(base, p) + alpha_rows(base, p) + summary_rows(base, dense, p)
    if grid:
        out += activation_rows(base, dense, p) + selection_rows(base, p) + scoring_rows(base, p)
    return out


def doc_context_rows(main: list[Variant]) -> list[Variant]:
    """:data:`DOC_CONTEXT_ROWS` of `main` with each chunk-vector context."""
    by_name = {v.name: v for v in main}
    return [
        Variant(
            f"{name} ctx={mode}",
            dataclasses.replace(by_name[name].settings, doc_context=mode),
            by_name[name].method,
            by_name[name].params,
            "doc-context",
        )
        for name in DOC_CONTEXT_ROWS
        for mode in DOC_CONTEXTS
    ]


def router_rows(base: RetrievalSettings, p: SignatureParams) -> list[Variant]:
    """Is it the signature, or routing? ρ = 0.75 was the default before the pooled figures;
    the activation router boosts documents by the query's own activation share, no σ."""
    return [
        Variant(
            "mia-rag ρ=0.75",
            dataclasses.replace(base, region_doc_weight=0.75),
            "coverage",
            p,
            "router",
        ),
        Variant("activation router (no σ)", base, ACTIVATION_ROUTER, p, "router"),
    ]


def alpha_rows(base: RetrievalSettings, p: SignatureParams) -> list[Variant]:
    """The α sweep of mia-rag, then of first-k."""
    return [
        Variant(f"{method} α={a}", dataclasses.replace(base, alpha=a), selection, p, "alpha")
        for method, selection in (("mia-rag", "coverage"), ("first-k", "first-k"))
        for a in (0.25, 0.5, 0.75)
    ]


def summary_rows(
    base: RetrievalSettings, dense: RetrievalSettings, p: SignatureParams
) -> list[Variant]:
    """The rows the session summaries decide (the default selection reads them only in its
    redundancy term): what LLM-written summaries (--llm) change."""
    summ = "summaries"
    return [
        Variant("rel=summary", base, "coverage", dataclasses.replace(p, relevance="summary"), summ),
        Variant(
            "rel+match=summary",
            base,
            "coverage",
            dataclasses.replace(p, relevance="summary", match="summary"),
            summ,
        ),
        Variant(
            "s(σ,c)=mean", dataclasses.replace(base, signature_mode="mean"), "coverage", p, summ
        ),
        # The paper-literal objective: summary relevance, summary-cosine match, dense E1, dense s(q,c).
        Variant(
            "literal: summary rel+match, dense, mean",
            dataclasses.replace(dense, signature_mode="mean", gate="none"),
            "coverage",
            literal_params(),
            summ,
        ),
    ]


def activation_rows(
    base: RetrievalSettings, dense: RetrievalSettings, p: SignatureParams
) -> list[Variant]:
    """The sweep's activation rows: dense or hybrid E1 and s(q,c), by region, window or
    members."""
    g = "grid"
    dense_p = dataclasses.replace(p, activation="dense")
    return [
        Variant(
            "literal + members/region scoring",
            dataclasses.replace(dense, gate="none"),
            "coverage",
            literal_params(),
            g,
        ),
        # Dense-only activation with the chosen selection.
        Variant("dense E1, dense s(q,c), region", dense, "coverage", dense_p, g),
        Variant(
            "dense E1, dense s(q,c), members",
            dataclasses.replace(dense, signature_mode="members"),
            "coverage",
            dense_p,
            g,
        ),
        Variant("first-k dense E1, dense s(q,c)", dense, "first-k", dense_p, g),
        # Hybrid activation, dense s(q,c).
        Variant("hybrid E1, dense s(q,c), region", dense, "coverage", p, g),
        Variant(
            "hybrid E1, dense s(q,c), window",
            dataclasses.replace(dense, signature_mode="window", gate="none"),
            "coverage",
            p,
            g,
        ),
        Variant(
            "hybrid E1, dense s(q,c), members",
            dataclasses.replace(dense, signature_mode="members", gate="none"),
            "coverage",
            p,
            g,
        ),
        Variant("first-k hybrid E1, dense s(q,c)", dense, "first-k", p, g),
    ]


def selection_rows(base: RetrievalSettings, p: SignatureParams) -> list[Variant]:
    """The sweep's selection ablations (hybrid E1, hybrid s(q,c), region, gate)."""
    changes: list[tuple[str, dict[str, Any]]] = [
        ("match=summary+boost", {"match": "summary"}),
        ("match=window", {"match": "window"}),
        ("λQ=0.5", {"lambda_q": 0.5}),
        ("λC=0.5", {"lambda_c": 0.5}),
        ("λC=2", {"lambda_c": 2.0}),
        ("λD=0", {"lambda_d": 0.0}),
        ("K=3", {"k": 3}),
        ("K=8", {"k": 8}),
        ("K0=20", {"k0": 20}),
    ]
    return [
        Variant(name, base, "coverage", dataclasses.replace(p, **change), "grid")
        for name, change in changes
    ]


def scoring_rows(base: RetrievalSettings, p: SignatureParams) -> list[Variant]:
    """The sweep's scoring ablations, then late fusion with and without the signature."""
    changes: list[tuple[str, dict[str, Any]]] = [
        ("s(σ,c)=max", {"signature_mode": "max"}),
        ("s(σ,c)=members", {"signature_mode": "members"}),
        ("s(σ,c)=window", {"signature_mode": "window"}),
        ("region ρ=0.25", {"region_doc_weight": 0.25}),
        ("region ρ=0.5", {"region_doc_weight": 0.5}),
        ("region ρ=1 (document share only)", {"region_doc_weight": 1.0}),
        ("region, windows weighted by gain", {"window_weights": "gain"}),
        ("gate=none", {"gate": "none"}),
        ("gate power=1", {"gate_power": 1.0}),
        ("gate power=3", {"gate_power": 3.0}),
    ]
    out = [
        Variant(name, dataclasses.replace(base, **change), "coverage", p, "grid")
        for name, change in changes
    ]
    late = dataclasses.replace(base, chunk_mode="late-fusion")
    fusion = [
        Variant("late-fusion (chunks+outline)", dataclasses.replace(late, alpha=0.0), group="grid"),
        Variant("late-fusion + signature", late, "coverage", p, "grid"),
    ]
    return out + fusion


@dataclasses.dataclass
class Scores:
    """Per-question Recall@k of every variant (in question order) and story accuracy."""

    recall: dict[str, dict[int, list[float]]]
    story: dict[str, list[float]]

    def mean(self, name: str, k: int) -> float:
        return float(np.mean(self.recall[name][k]))

    def extend(self, other: Scores) -> None:
        for name, ks in other.recall.items():
            for k, vals in ks.items():
                self.recall.setdefault(name, {}).setdefault(k, []).extend(vals)
        for name, vals in other.story.items():
            self.story.setdefault(name, []).extend(vals)


def evaluate(
    retriever: Retriever,
    questions: list,
    spans: dict,
    rows: list[Variant],
    k_max: int,
    doc_ids: set[str] | None = None,
) -> Scores:
    """Recall@k per question and variant, with retrieval restricted to `doc_ids` (a pool;
    None = the whole store), plus story accuracy of the signatures' first unit."""
    per: dict[str, dict[int, list[float]]] = {v.name: {k: [] for k in KS} for v in rows}
    story: dict[str, list[float]] = {}
    sig_cache: dict[tuple, list] = {}
    t0 = time.perf_counter()
    for n, q in enumerate(questions, 1):
        gold = gold_spans(q)
        for v in rows:
            got = retrieved_spans(
                q, ranked(retriever, q, v, doc_ids, k_max, sig_cache, story), spans
            )
            for k in KS:
                per[v.name][k].append(recall_at_k(got, gold, k))
        sig_cache.clear()
        if n % 200 == 0:
            log(f"  {n}/{len(questions)} questions ({time.perf_counter() - t0:.0f}s)")
    return Scores(per, story)


def ranked(
    retriever: Retriever,
    q: Any,
    v: Variant,
    doc_ids: set[str] | None,
    k: int,
    signatures: dict[tuple, list],
    story: dict[str, list[float]],
) -> list[tuple[str, str]]:
    """(chunk id, doc id) of `v`'s top `k` for question `q`. The signature `v` selects is
    kept in `signatures` for the question's other rows, and its story accuracy is added to
    `story` under the first row that selects it."""
    if v.method == ACTIVATION_ROUTER:
        return activation_router(retriever, q.question, doc_ids, v, k)
    signature = None
    if v.method is not None:
        key = (v.method, repr(v.params))
        signature = signatures.get(key)
        if signature is None:
            signature = retriever.signature(
                q.question, method=v.method, params=v.params, doc_ids=doc_ids
            )
            signatures[key] = signature
            story.setdefault(v.name, []).append(
                float(bool(signature) and signature[0].unit_id.split(":")[0] == q.doc_id)
            )
    hits = retriever.rank_chunks(
        q.question, signature=signature, doc_ids=doc_ids, settings=v.settings, k=k
    )
    return [(h.unit_id, h.doc_id) for h in hits]


def activation_router(
    retriever: Retriever, query: str, doc_ids: set[str] | None, v: Variant, k: int
) -> list[tuple[str, str]]:
    """A signature-free control: the query's hybrid score plus α·(its document's share of the
    rank-weighted K0 activation), α gated like the signature's (α·conf², conf the main
    document's share). (chunk id, doc id) of the top k."""
    sc = retriever.scope(doc_ids)
    act = activate(sc, query, retriever.embed_query(query), v.params or default_params())
    share = np.zeros(len(sc.docs))
    np.add.at(share, sc.chunk_doc[act.rows], 1.0 / (np.arange(len(act.rows)) + 1.0))
    share /= max(share.sum(), 1e-12)
    alpha = v.settings.alpha * float(share.max()) ** v.settings.gate_power
    fused = (1 - alpha) * act.score + alpha * share[sc.chunk_doc]
    units = sc.chunks.units
    return [(units[i].id, units[i].doc_id) for i in top_rows(fused, k)]


def paired(scores: Scores, a: str, b: str, k: int = 10) -> dict[str, float]:
    """Mean of `a − b` Recall@k over the questions, in points, with its paired bootstrap CI
    and the counts of questions each side wins."""
    return paired_points(scores.recall[a][k], scores.recall[b][k])
