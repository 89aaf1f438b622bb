"""Activation (MiA's E1): what a query alone lights up, before any signature.

The K0 best chunks for the query, by dense cosine or by dense fused with BM25
(``SignatureParams.activation``). Their ranks weigh the signature's coverage term, their
sessions are the signature's candidates, and their documents give the α gate its confidence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mindscape.memory.scope import Scope
from mindscape.memory.scoring import hybrid_scores, top_rows
from mindscape.memory.settings import SignatureParams


@dataclass
class ActivationView:
    """The query-only view of one query: scores over all chunks and the top-K0 rows."""

    dense: np.ndarray
    """Dense cosine of every chunk of the scope."""
    score: np.ndarray
    """The activation score of every chunk (dense, or dense fused with BM25)."""
    rows: np.ndarray
    """The K0 best chunk rows, best first."""


def activate(scope: Scope, query: str, qvec: np.ndarray, params: SignatureParams) -> ActivationView:
    """The activation view of `query` (embedded as `qvec`) in `scope`."""
    dense = scope.chunk_vecs @ qvec if scope.n_chunks else np.zeros(0, np.float32)
    dense = dense.astype(np.float64)
    if params.activation == "hybrid" and scope.n_chunks:
        score = hybrid_scores(dense, scope.bm25_scores(query), params.hybrid_weight)
    elif params.activation in ("dense", "hybrid"):
        score = dense
    else:
        raise ValueError(f"unknown activation {params.activation!r}; use 'dense' or 'hybrid'")
    return ActivationView(dense, score, top_rows(score, params.k0))
