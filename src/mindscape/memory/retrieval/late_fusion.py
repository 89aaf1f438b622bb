"""MoM late fusion: rank each layer separately, map unit hits to their chunks, fuse by rank.

MoM (Zhao et al., 2025) retrieves from the outline, the core content and the atomic chunks
separately and fuses late. Here the veridical layer ranks chunks directly; a unit of another
layer (``RetrievalSettings.fusion_layers``) at rank r (from 1) is evidence for every chunk it
covers, so each of them gets ``1/(rrf_k + r)`` from that layer (its best unit counts). The
fused score is the sum over layers; ties go to the better σ-conditioned chunk score.
Near-duplicates (embedding cosine ≥ ``dedupe_threshold`` to a better chunk) are then dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mindscape.memory.retrieval.ranking import dedupe_near
from mindscape.memory.scoring import top_rows
from mindscape.memory.settings import RetrievalSettings
from mindscape.memory.signature.conditioning import Conditioned
from mindscape.memory.types import LAYERS, Layer


@dataclass
class FusedChunk:
    """One chunk of the fused ranking."""

    row: int
    """The chunk's row in the scope."""
    score_query: float
    score_signature: float
    score: float
    """The fused (reciprocal-rank) score."""
    fused_from: list[str]
    """The layers that ranked it."""


def fusion_layers(settings: RetrievalSettings) -> list[Layer]:
    """The layers late fusion reads the scores of: the veridical one and the other
    ``settings.fusion_layers``."""
    return [
        "veridical",
        *(la for la in LAYERS if la != "veridical" and la in settings.fusion_layers),
    ]


def late_fusion(
    cond: Conditioned, n: int, exclude: set[str] | frozenset[str] = frozenset()
) -> list[FusedChunk]:
    """The n best chunks by MoM late fusion, minus the unit ids in `exclude`; the layers'
    scores are the query's, computed once (`cond` holds every layer :func:`fusion_layers` names)."""
    sc, st = cond.plan.scope, cond.plan.settings
    c_q, c_sig, c_fused = cond.scores["veridical"]
    depth = max(n, st.top_n)
    total = np.zeros(sc.n_chunks)
    sources: dict[int, list[str]] = {}
    for layer in st.fusion_layers:
        if layer not in LAYERS or not len(sc.views[layer]):
            continue
        best_rank = np.full(sc.n_chunks, np.inf)
        if layer == "veridical":
            top = top_rows(c_fused, depth)
            best_rank[top] = np.arange(1, len(top) + 1)
        else:
            _, _, fused = cond.scores[layer]
            uidx, ridx, _ = sc.unit_chunks(layer)
            unit_rank = np.full(len(fused), np.inf)
            top = top_rows(fused, depth)
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
    return [
        FusedChunk(int(c), float(c_q[c]), float(c_sig[c]), float(total[c]), sources[int(c)])
        for c in order[:n]
    ]
