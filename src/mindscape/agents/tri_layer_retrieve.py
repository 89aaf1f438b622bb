"""Node `tri_layer_retrieve`: Tri-Retrieve for each probe of the round (or the query).

Reads: query, pending_probes, signature, retrieved, doc scope. Writes: round_hits, retrieved,
rounds (+1). Per enabled layer the retriever ranks units by the signature-conditioned score
`(1-α)·s(q,u) + α·s(σ,u)`, drops what earlier rounds already retrieved (ComoRAG: the pool
is never fed twice), and packs the rest into the layer's token budget, per probe
(`budget_scope="probe"`, ComoRAG) or shared by the round's probes (`"round"`). With
`collapse` (RAPTOR) the layers are ranked together and packed into one budget
(:mod:`mindscape.memory.retrieval.raptor_collapse`).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from mindscape.agents._common import Node, doc_scope, emit, to_item, to_sig_unit
from mindscape.context import Context
from mindscape.deps import Deps
from mindscape.memory.retrieval.raptor_collapse import collapse
from mindscape.state import EvidenceItem, ProbeHits, QAState


def round_budgets(ctx: Context, n_queries: int) -> dict[str, int]:
    """Token budget per layer for one query of a round with `n_queries` queries."""
    share = max(n_queries, 1) if ctx.budget_scope == "round" else 1
    return {layer: int(b) // share for layer, b in (ctx.budgets or {}).items()}


def make_tri_layer_retrieve(deps: Deps) -> Node:
    """The `tri_layer_retrieve` node bound to `deps`."""

    def tri_layer_retrieve(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
        run = deps.run(runtime)
        ctx = run.ctx
        round_ = state.get("rounds", 0) + 1
        queries = list(state.get("pending_probes") or []) or [
            state.get("query") or state["question"]
        ]
        signature = [to_sig_unit(s) for s in state.get("signature") or []]
        settings = run.retrieval_settings(round_budgets(ctx, len(queries)), signed=bool(signature))
        exclude = {i["unit_id"] for i in state.get("retrieved") or []}
        retriever = run.retriever
        groups: list[ProbeHits] = []
        for query in queries:
            hits = retriever.retrieve(
                query,
                signature=signature or None,
                doc_ids=doc_scope(state),
                settings=settings,
                exclude=exclude,
            )
            if ctx.collapse:
                hits = collapse(hits, ctx.collapse_budget)
            for layer, layer_hits in hits.items():
                items: list[EvidenceItem] = [
                    to_item(h, round_=round_, probe=query) for h in layer_hits
                ]
                exclude.update(i["unit_id"] for i in items)
                groups.append(ProbeHits(probe=query, layer=layer, items=items))
        new = [i for g in groups for i in g["items"]]
        counts: dict[str, int] = {}
        for g in groups:
            counts[g["layer"]] = counts.get(g["layer"], 0) + len(g["items"])
        emit(runtime, "retrieve", round=round_, queries=queries, hits=counts)
        return {"round_hits": groups, "retrieved": new, "rounds": 1}

    return tri_layer_retrieve
