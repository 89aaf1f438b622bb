"""Recursive soft clustering for the semantic layer (RAPTOR-style, as ComoRAG builds it).

Per level: reduce the unit embeddings with PCA, fit Gaussian mixtures and keep the component
count with the lowest BIC, and assign each unit to every component whose posterior exceeds a
soft threshold (and always to its most likely one). Clusters still larger than
`max_cluster_size` are clustered again locally (RAPTOR's global → local pass). Each cluster is
summarised; the summaries are clustered again, up to `max_levels` levels or until one remains.

PCA stands in for RAPTOR's UMAP and diagonal covariances for full ones: deterministic, no JIT
warm-up, and about ten times faster, so clustering stays a small fraction of indexing time. Tiny inputs never reach the mixture
model: 1–2 units form one cluster (RAPTOR issue #30 crashed there).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "ClusterParams",
    "best_component_count",
    "reduce_dims",
    "soft_clusters",
]


@dataclass(frozen=True)
class ClusterParams:
    """Knobs of the semantic tree."""

    max_levels: int = 5
    reduction_dim: int = 10
    threshold: float = 0.3
    """Soft assignment: a unit joins every cluster with posterior above this."""
    max_clusters: int = 50
    max_cluster_size: int = 24
    """Clusters above this size are clustered again locally."""
    min_avg_size: int = 4
    """The BIC search never tries more than n / min_avg_size components (no swarm of singletons)."""
    bic_candidates: int = 5
    """How many component counts (geometrically spaced) the BIC search tries."""
    seed: int = 224


def reduce_dims(vecs: np.ndarray, dim: int) -> np.ndarray:
    """PCA projection of the rows onto at most `dim` components."""
    from sklearn.decomposition import PCA

    dim = max(1, min(dim, vecs.shape[0] - 1, vecs.shape[1]))
    return np.asarray(PCA(n_components=dim, random_state=0).fit_transform(vecs))


def best_component_count(x: np.ndarray, min_k: int, max_k: int, params: ClusterParams) -> int:
    """The mixture size in [min_k, max_k] with the lowest BIC (geometrically spaced candidates)."""
    from sklearn.mixture import GaussianMixture

    max_k = max(1, min(max_k, x.shape[0] - 1))
    min_k = max(1, min(min_k, max_k))
    num = min(params.bic_candidates, max_k - min_k + 1)
    grid = np.unique(np.geomspace(min_k, max_k, num=num).round().astype(int))
    bics = [
        GaussianMixture(n_components=int(k), covariance_type="diag", random_state=params.seed)
        .fit(x)
        .bic(x)
        for k in grid
    ]
    return int(grid[int(np.argmin(bics))])


def soft_clusters(vecs: np.ndarray, params: ClusterParams, depth: int = 0) -> list[list[int]]:
    """Soft clusters of the rows of `vecs` as lists of row indices (every row in ≥ 1 cluster).

    The global pass picks the component count by BIC; a cluster still larger than
    `max_cluster_size` is split by a local pass with just enough components (twice at most).
    """
    n = vecs.shape[0]
    if n <= 2 or float(vecs.var(axis=0).sum()) < 1e-9:  # too few, or all the same
        return [list(range(n))] if n else []
    x = reduce_dims(vecs, min(params.reduction_dim, n - 2))
    min_k = -(-n // (2 * params.max_cluster_size))
    if depth == 0:
        k = best_component_count(
            x, min_k, min(params.max_clusters, max(min_k, n // params.min_avg_size)), params
        )
    else:
        k = min(n - 1, -(-n // params.max_cluster_size))
    clusters = _assign(x, k, params)
    if depth >= 2:
        return clusters
    out: list[list[int]] = []
    for c in clusters:
        if len(c) > params.max_cluster_size:
            out.extend([[c[i] for i in sub] for sub in soft_clusters(vecs[c], params, depth + 1)])
        else:
            out.append(c)
    return out


def _assign(x: np.ndarray, k: int, params: ClusterParams) -> list[list[int]]:
    """Fit a k-component mixture; each row joins its best component and any other above threshold."""
    if k <= 1:
        return [list(range(x.shape[0]))]
    from sklearn.mixture import GaussianMixture

    gm = GaussianMixture(n_components=k, covariance_type="diag", random_state=params.seed)
    probs = gm.fit(x).predict_proba(x)
    member = probs > params.threshold
    member[np.arange(x.shape[0]), probs.argmax(axis=1)] = True
    return [list(np.flatnonzero(member[:, j])) for j in range(k) if member[:, j].any()]
