"""RAPTOR's collapsed tree (Sarthi et al., 2024): every level of the tree ranked together.

RAPTOR answers from a flat ranking of the chunks and all the cluster summaries above them,
best query score first, until a token budget is full. Here the "levels" are the retriever's
layers: :func:`collapse` takes one query's hits per layer (each already ranked by the
conditioned score), merges them into one ranking and packs it into a single budget, so a
summary that beats a chunk takes its place. The ``raptor`` preset turns it on
(``Context.collapse``, ``collapse_budget``: 3500 tokens, the paper's setting).
"""

from __future__ import annotations

from mindscape.memory.retrieval.ranking import pack_budget
from mindscape.memory.types import Hit, Layer


def collapse(hits: dict[Layer, list[Hit]], budget: int) -> dict[Layer, list[Hit]]:
    """The hits of every layer ranked together by score and packed into `budget` tokens;
    each layer keeps its surviving hits in their order."""
    ranked = sorted((h for layer_hits in hits.values() for h in layer_hits), key=lambda h: -h.score)
    kept = {h.unit_id for h in pack_budget(ranked, lambda h: h.tokens, budget)}
    return {
        layer: [h for h in layer_hits if h.unit_id in kept] for layer, layer_hits in hits.items()
    }
