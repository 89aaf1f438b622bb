"""The semantic layer: a RAPTOR tree (Sarthi et al., 2024) of cluster summaries.

Level 0 soft-clusters the chunks (PCA → Gaussian mixture, count by BIC; see
:mod:`mindscape.indexing.cluster`) and summarises each cluster; every next level clusters the
summaries of the level below, until one root remains, a level no longer reduces, or
``max_levels`` is reached. Every node keeps the chunks it covers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mindscape.indexing.cluster import ClusterParams, soft_clusters
from mindscape.indexing.document import DocText, Summarizer
from mindscape.indexing.embed_cache import Bar
from mindscape.memory.types import Unit
from mindscape.prompts import summarize as summary_prompt

__all__ = [
    "raptor_units",
]


def raptor_units(
    doc: DocText,
    chunk_vecs: np.ndarray,
    summarize: Summarizer,
    embed_texts: Callable[[list[str], str], np.ndarray],
    *,
    params: ClusterParams,
    bar: Bar,
) -> list[Unit]:
    """The tree's cluster units, level by level (`embed_texts` embeds a level's summaries)."""
    units: list[Unit] = []
    members: list[list[int]] = [[i] for i in range(len(doc.chunks))]  # chunk indices per node
    sents: list[list[int]] = [doc.chunk_sents[i] for i in range(len(doc.chunks))]
    texts: list[str] = [c.text for c in doc.chunks]
    vecs = chunk_vecs
    for level in bar(range(params.max_levels), f"{doc.doc_id} · semantic levels"):
        if len(members) == 0 or (level > 0 and len(members) <= 1):
            break
        clusters = soft_clusters(vecs, params)
        new_members, new_sents, new_texts = [], [], []
        for c in clusters:
            text, picked = summarize(
                sorted({s for i in c for s in sents[i]}),
                [texts[i] for i in c],
                summary_prompt.CLUSTER,
            )
            new_members.append(sorted({m for i in c for m in members[i]}))
            new_sents.append(picked)
            new_texts.append(text)
        for n, (m, text) in enumerate(zip(new_members, new_texts, strict=True)):
            units.append(
                doc.unit(f"s{level}.{n}", "semantic", text, m, kind="cluster", order=n, level=level)
            )
        if len(clusters) >= len(members):  # no reduction: the next level would repeat this one
            break
        members, sents, texts = new_members, new_sents, new_texts
        vecs = embed_texts(new_texts, "embed summaries")
    return units
