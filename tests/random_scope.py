"""Random retrieval scopes for property tests: a :class:`Scope` over random vectors, no store.

:func:`random_scope` lays out one to three documents of chunks, cuts each into consecutive
session windows (as the indexer does: every chunk lies in exactly one window), gives each
session a topic vector, its chunks vectors near that topic and its summary a vector near the
mean of its chunks, and adds semantic clusters (random runs of chunks). Chunk texts draw a
few words from a small vocabulary, so BM25 (the hybrid activation) has something to score.
The production code reads the scope exactly as it reads one derived from a real store.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mindscape.memory.scope import Scope
from mindscape.memory.store import LayerView
from mindscape.memory.types import LAYERS, Layer, Unit

WORDS = "river mill forest bridge tower garden harbor chapel desert well market palace".split()


class ArrayStore:
    """Just what :class:`Scope` reads from a store: a view per layer."""

    def __init__(self, views: dict[Layer, LayerView]) -> None:
        self.views = views

    def view(self, layer: Layer) -> LayerView:
        return self.views[layer]


@dataclass
class RandomCase:
    """A scope and a query: its text (for BM25) and its unit vector (for the dense cosine)."""

    scope: Scope
    query: str
    qvec: np.ndarray

    def embed(self, text: str) -> np.ndarray:
        """The embedder select_signature is given: the query's vector, whatever the text."""
        return self.qvec


def _unit(x: np.ndarray) -> np.ndarray:
    return np.asarray(x / np.linalg.norm(x, axis=-1, keepdims=True), dtype=np.float32)


def _view(layer: Layer, units: list[Unit], vecs: list[np.ndarray], dim: int) -> LayerView:
    arr = np.vstack(vecs).astype(np.float32) if vecs else np.zeros((0, dim), np.float32)
    return LayerView(layer, units, arr)


def empty_view(layer: Layer, dim: int = 16) -> LayerView:
    """A layer without units."""
    return _view(layer, [], [], dim)


def scope_of(views: dict[Layer, LayerView]) -> Scope:
    """A scope over the views given (layers not given are empty)."""
    dim = next(iter(views.values())).vecs.shape[1] if views else 16
    full = {layer: views.get(layer) or empty_view(layer, dim) for layer in LAYERS}
    return Scope(ArrayStore(full), None)  # type: ignore[arg-type]


def random_case(rng: np.random.Generator, *, dim: int = 16, max_docs: int = 3) -> RandomCase:
    """A random scope of 1..`max_docs` documents and a query near one of its chunks."""
    units: dict[Layer, list[Unit]] = {layer: [] for layer in LAYERS}
    vecs: dict[Layer, list[np.ndarray]] = {layer: [] for layer in LAYERS}
    for d in range(int(rng.integers(1, max_docs + 1))):
        doc = f"d{d}"
        n_chunks = int(rng.integers(2, 25))
        window = int(rng.integers(1, 7))
        chunk_ids = [f"{doc}:c{i}" for i in range(n_chunks)]
        for w, start in enumerate(range(0, n_chunks, window)):
            members = chunk_ids[start : start + window]
            topic = rng.normal(size=dim)
            member_vecs = [_unit(topic + rng.normal(size=dim)) for _ in members]
            for cid, v in zip(members, member_vecs, strict=True):
                text = " ".join(rng.choice(WORDS, size=int(rng.integers(3, 8))))
                units["veridical"].append(Unit(cid, doc, "veridical", text, [cid]))
                vecs["veridical"].append(v)
            summary = _unit(np.mean(member_vecs, axis=0) + 0.5 * rng.normal(size=dim))
            units["episodic"].append(
                Unit(f"{doc}:e{w}", doc, "episodic", f"session {doc} {w}", members, order=w)
            )
            vecs["episodic"].append(summary)
        for c in range(int(rng.integers(0, 4))):
            a = int(rng.integers(0, n_chunks))
            run = chunk_ids[a : a + int(rng.integers(1, 5))]
            units["semantic"].append(Unit(f"{doc}:s{c}", doc, "semantic", f"cluster {c}", run))
            vecs["semantic"].append(_unit(rng.normal(size=dim)))
    views = {layer: _view(layer, units[layer], vecs[layer], dim) for layer in LAYERS}
    scope = scope_of(views)
    near = views["veridical"].vecs[int(rng.integers(0, scope.n_chunks))]
    qvec = _unit(near + rng.normal(size=dim))
    query = " ".join(rng.choice(WORDS, size=3))
    return RandomCase(scope, query, qvec)
