"""Node `tri_layer_retrieve`: Tri-Retrieve for each probe of the round (or the query).

Reads: query, pending_probes, signature, retrieved, doc scope. Writes: round_hits, retrieved,
rounds (+1). Per enabled layer the retriever ranks units by the signature-conditioned score
`(1-α)·s(q,u) + α·s(σ,u)`, drops what earlier rounds already retrieved (ComoRAG: the pool
is never fed twice), and packs the rest into the layer's token budget, per probe
(`budget_scope="probe"`, ComoRAG) or shared by the round's probes (`"round"`). With
`collapse` (RAPTOR) the layers are ranked together and packed into one budget.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from mindscape.agents._common import Node, doc_scope, emit, retrieval_settings, to_item, to_sig_unit
from mindscape.context import Context, ctx_of
from mindscape.deps import Deps
from mindscape.memory.ranking import pack_budget
from mindscape.state import EvidenceItem, ProbeHits, QAState


def round_budgets(ctx: Context, n_queries: int) -> dict[str, int]:
    """Token budget per layer for one query of a round with `n_queries` queries."""
    share = max(n_queries, 1) if ctx.budget_scope == "round" else 1
    return {layer: int(b) // share for layer, b in (ctx.budgets or {}).items()}


def collapse_hits(groups: list[ProbeHits], budget: int) -> list[ProbeHits]:
    """RAPTOR's collapsed tree: all layers ranked together by score, packed into `budget`."""
    out: list[ProbeHits] = []
    for probe in dict.fromkeys(g["probe"] for g in groups):
        items = [i for g in groups if g["probe"] == probe for i in g["items"]]
        items.sort(key=lambda i: -i["score"])
        kept = {i["unit_id"] for i in pack_budget(items, lambda i: i["tokens"], budget)}
        for g in groups:
            if g["probe"] == probe:
                out.append(
                    ProbeHits(
                        probe=probe,
                        layer=g["layer"],
                        items=[i for i in g["items"] if i["unit_id"] in kept],
                    )
                )
    return out


def make_tri_layer_retrieve(deps: Deps) -> Node:
    """The `tri_layer_retrieve` node bound to `deps`."""

    def tri_layer_retrieve(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
        ctx = ctx_of(runtime)
        round_ = state.get("rounds", 0) + 1
        queries = list(state.get("pending_probes") or []) or [
            state.get("query") or state["question"]
        ]
        signature = [to_sig_unit(s) for s in state.get("signature") or []]
        settings = retrieval_settings(ctx, round_budgets(ctx, len(queries)), signed=bool(signature))
        exclude = {i["unit_id"] for i in state.get("retrieved") or []}
        retriever = deps.get_retriever(ctx)
        groups: list[ProbeHits] = []
        for query in queries:
            hits = retriever.retrieve(
                query,
                signature=signature or None,
                doc_ids=doc_scope(state),
                settings=settings,
                exclude=exclude,
            )
            for layer, layer_hits in hits.items():
                items: list[EvidenceItem] = [
                    to_item(h, round_=round_, probe=query) for h in layer_hits
                ]
                exclude.update(i["unit_id"] for i in items)
                groups.append(ProbeHits(probe=query, layer=layer, items=items))
        if ctx.collapse:
            groups = collapse_hits(groups, ctx.collapse_budget)
        new = [i for g in groups for i in g["items"]]
        counts: dict[str, int] = {}
        for g in groups:
            counts[g["layer"]] = counts.get(g["layer"], 0) + len(g["items"])
        emit(runtime, "retrieve", round=round_, queries=queries, hits=counts)
        return {"round_hits": groups, "retrieved": new, "rounds": 1}

    return tri_layer_retrieve
