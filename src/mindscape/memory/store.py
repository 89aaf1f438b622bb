"""The persistent memory store: Chroma collections (one per layer) plus the index cache.

A store is a directory: Chroma's files (embedded `PersistentClient`) and `cache.sqlite3`
(embeddings, LLM outputs, the document manifest). With a Chroma server URL the vectors go to
an `HttpClient` and the directory keeps only the cache. Embeddings are always passed
explicitly: Chroma's default embedding function would download a model.

Retrieval reads a layer once into numpy (`LayerView`) and scores it with matrix products;
a book of a million tokens is a few thousand rows, so this is faster than a round trip per query.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mindscape.errors import StoreError
from mindscape.memory.cache import IndexCache, content_key
from mindscape.memory.types import LAYERS, Layer, Unit

COLLECTION_PREFIX = "mindscape_"
EMBEDDER_KEY = "store:embedder"
"""Cache text key holding the id of the embedder that made the store's vectors."""


@dataclass
class LayerView:
    """A layer (optionally restricted to some documents) held in memory."""

    layer: Layer
    units: list[Unit]
    vecs: np.ndarray
    """Unit-normalised float32 rows aligned with `units`."""

    def __post_init__(self) -> None:
        self.row_of = {u.id: i for i, u in enumerate(self.units)}

    def __len__(self) -> int:
        return len(self.units)

    def subset(self, doc_ids: set[str] | None) -> LayerView:
        """The rows of some documents only (all rows for None)."""
        if doc_ids is None:
            return self
        rows = [i for i, u in enumerate(self.units) if u.doc_id in doc_ids]
        return LayerView(self.layer, [self.units[i] for i in rows], self.vecs[rows])


class MemoryStore:
    """Chroma collections per layer + the index cache, under one directory."""

    READ_PAGE = 10_000
    """Units read per Chroma ``get`` when a layer is loaded."""

    def __init__(self, path: str | Path, *, chroma_url: str | None = None, client: Any = None):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.cache = IndexCache(self.path / "cache.sqlite3")
        self._client = client
        self._chroma_url = chroma_url or os.environ.get("MINDSCAPE_CHROMA_URL")
        self._collections: dict[str, Any] = {}
        self._views: dict[Layer, LayerView] = {}

    @classmethod
    def open_existing(cls, path: str | Path, **kw: Any) -> MemoryStore:
        """Open a store that must already hold an index."""
        if not (Path(path) / "cache.sqlite3").is_file():
            raise StoreError(
                f"no mindscape store at {path} (run `mindscape index ... --store {path}`)"
            )
        store = cls(path, **kw)
        try:
            store.verify()
        except StoreError:
            store.close()
            raise
        return store

    def verify(self) -> None:
        """Check that the vectors match the manifest; StoreError saying what to run if not.

        A store whose ``chroma/`` folder is gone, whose layers hold fewer or more units than
        its finished documents list, or that holds a document whose indexing never finished
        must not answer: its retrieval would silently miss or mix in evidence.
        """
        docs = self.cache.docs(status=None)
        unfinished = [d["doc_id"] for d in docs if d["status"] != "done"]
        if unfinished:
            raise StoreError(
                f"the store {self.path} holds a half-indexed document ({unfinished[0]}): run "
                f"`mindscape index` on it again to finish it"
            )
        if not docs:
            return
        if self._client is None and not self._chroma_url and not (self.path / "chroma").is_dir():
            raise StoreError(
                f"the store {self.path} is damaged: its vectors (chroma/) are missing; index "
                f"the book again (`mindscape index BOOK --store {self.path}` rebuilds them "
                f"from the cache)"
            )
        try:
            found = {layer: int(self.collection(layer).count()) for layer in LAYERS}
        except Exception as exc:  # noqa: BLE001 - chroma raises many types for a broken folder
            raise StoreError(
                f"the store {self.path} is damaged: its vectors cannot be read "
                f"({type(exc).__name__}); move chroma/ aside and index the book again "
                f"(`mindscape index BOOK --store {self.path}`)"
            ) from exc
        for layer in LAYERS:
            expected = sum(int((d.get("layers") or {}).get(layer, 0)) for d in docs)
            if found[layer] != expected:
                raise StoreError(
                    f"the store {self.path} is damaged: layer {layer} holds {found[layer]} "
                    f"units where its documents list {expected}; index the book again "
                    f"(`mindscape index BOOK --store {self.path}` rebuilds what is missing)"
                )

    # -- chroma -------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The Chroma client, created on first use."""
        if self._client is None:
            import chromadb
            from chromadb.config import Settings

            settings = Settings(anonymized_telemetry=False)
            if self._chroma_url:
                from urllib.parse import urlparse

                u = urlparse(self._chroma_url)
                self._client = chromadb.HttpClient(
                    host=u.hostname or "localhost",
                    port=u.port or 8000,
                    ssl=u.scheme == "https",
                    settings=settings,
                )
            else:
                self._client = chromadb.PersistentClient(
                    path=str(self.path / "chroma"), settings=settings
                )
        return self._client

    def embedder(self) -> str | None:
        """The id of the embedder the store's vectors come from (None for older stores)."""
        return self.cache.get_text(EMBEDDER_KEY)

    def check_embedder(self, emb_id: str, *, besides: str | None = None) -> bool:
        """StoreError unless `emb_id` made the vectors of the store's documents (`besides`
        one, being re-indexed): another model's vectors would be compared with them,
        meaninglessly (or fail on a different width). True when the store may record
        `emb_id` as its embedder: it has one already, or no other document (an older store
        with documents but no record keeps none: their embedder is unknown)."""
        have = self.embedder()
        others = [d for d in self.cache.docs() if d["doc_id"] != besides]
        if have is not None and have != emb_id and others:
            raise StoreError(
                f"the store {self.path} was indexed with the embedder {have}, not {emb_id}: pass "
                f"the same --embedder (or MINDSCAPE_EMBEDDER), or index into a new store"
            )
        return have is not None or not others

    def claim_embedder(self, emb_id: str, *, doc_id: str) -> None:
        """Before `doc_id` is (re)indexed with `emb_id`: :meth:`check_embedder`, then record
        `emb_id` as the store's embedder where that is known to be true."""
        if self.check_embedder(emb_id, besides=doc_id):
            self.cache.put_text(EMBEDDER_KEY, emb_id)

    def collection_name(self, layer: Layer) -> str:
        """``mindscape_<layer>`` in the store's own Chroma; on a Chroma server, which many
        stores share, ``mindscape_<store id>_<layer>`` (the id: a hash of the store's absolute
        path, so a store moved to another path is re-indexed from its cache)."""
        if not self._chroma_url:
            return COLLECTION_PREFIX + layer
        store_id = content_key(str(self.path.resolve()))[:12]
        return f"{COLLECTION_PREFIX}{store_id}_{layer}"

    def collection(self, layer: Layer) -> Any:
        """The collection of a layer (cosine space, no embedding function)."""
        if layer not in self._collections:
            self._collections[layer] = self.client.get_or_create_collection(
                self.collection_name(layer),
                embedding_function=None,
                metadata={"hnsw:space": "cosine"},
            )
        return self._collections[layer]

    def upsert(self, units: list[Unit], vecs: np.ndarray) -> None:
        """Write units with their embeddings (idempotent: ids are deterministic)."""
        by_layer: dict[Layer, list[int]] = {}
        for i, u in enumerate(units):
            by_layer.setdefault(u.layer, []).append(i)
        for layer, rows in by_layer.items():
            col = self.collection(layer)
            step = min(5000, self._max_batch())
            for s in range(0, len(rows), step):
                part = rows[s : s + step]
                col.upsert(
                    ids=[units[i].id for i in part],
                    embeddings=vecs[part].astype(np.float32),
                    documents=[units[i].text for i in part],
                    metadatas=[_to_meta(units[i]) for i in part],
                )
            self._views.pop(layer, None)

    def _max_batch(self) -> int:
        try:
            return int(self.client.get_max_batch_size())
        except Exception:  # noqa: BLE001 - older clients; 5461 is Chroma's documented cap
            return 5461

    def delete_doc(self, doc_id: str) -> None:
        """Remove every unit of a document from every layer."""
        for layer in LAYERS:
            self.collection(layer).delete(where={"doc_id": doc_id})
            self._views.pop(layer, None)

    def count(self, layer: Layer, doc_id: str | None = None) -> int:
        """Number of units in a layer (of one document, if given)."""
        col = self.collection(layer)
        if doc_id is None:
            return int(col.count())
        return len(col.get(where={"doc_id": doc_id}, include=[])["ids"])

    # -- reading ------------------------------------------------------------------
    def view(self, layer: Layer, doc_ids: set[str] | None = None) -> LayerView:
        """A layer in memory (loaded once, then cached until the layer is written)."""
        if layer not in self._views:
            units, emb = self._read_all(layer)
            order = sorted(
                range(len(units)), key=lambda k: (units[k].doc_id, units[k].level, units[k].order)
            )
            vecs = (
                np.asarray(emb, dtype=np.float32)[order]
                if len(units)
                else np.zeros((0, 0), np.float32)
            )
            self._views[layer] = LayerView(layer, [units[k] for k in order], vecs)
        return self._views[layer].subset(doc_ids)

    def _read_all(self, layer: Layer) -> tuple[list[Unit], list[Any]]:
        """Every unit of a layer and its vector, read a page at a time: one ``get`` of a whole
        library's layer (about 80K chunks at 9M tokens) passes SQLite's variable limit."""
        col = self.collection(layer)
        units: list[Unit] = []
        emb: list[Any] = []
        page = self.READ_PAGE
        for offset in range(0, int(col.count()), page):
            got = col.get(
                include=["embeddings", "documents", "metadatas"], limit=page, offset=offset
            )
            units += [
                _from_meta(i, d, m, layer)
                for i, d, m in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
            ]
            emb += list(got["embeddings"])
        return units, emb

    def documents(self) -> list[dict[str, Any]]:
        """The finished documents of the store, from the manifest."""
        return self.cache.docs()

    def summary(self) -> dict[str, Any]:
        """Counts per layer and the documents: what `mindscape inspect` prints.

        Counts come from the manifest (written when a document's units are stored), so this
        needs neither Chroma nor the model. A document whose outline chose among MoM paths
        also lists the path chosen per section (``mom_chosen``), and how many of the boundaries
        its evaluator judged got neither yes nor no (``mom_unread_breaks``, when any did).
        """
        docs = self.documents()
        return {
            "store": str(self.path),
            "documents": len(docs),
            "layers": {
                layer: sum(int((d.get("layers") or {}).get(layer, 0)) for d in docs)
                for layer in LAYERS
            },
            "docs": [
                {
                    **{k: d.get(k) for k in ("doc_id", "title", "tokens", "layers")},
                    **({"mom_chosen": d["mom_chosen"]} if d.get("mom_chosen") else {}),
                    **(
                        {"mom_unread_breaks": d["mom_unread_breaks"]}
                        if d.get("mom_unread_breaks")
                        else {}
                    ),
                }
                for d in docs
            ],
        }

    def close(self) -> None:
        """Release the cache database."""
        self.cache.close()

    def release(self) -> None:
        """Release the cache database and the Chroma client, so that a store opened again on
        this folder in the same process reads its files afresh (Chroma keeps one client per
        folder per process until the last is closed)."""
        self.close()
        if self._client is not None and hasattr(self._client, "close"):
            self._client.close()
        self._client = None
        self._collections.clear()
        self._views.clear()


def _to_meta(u: Unit) -> dict[str, Any]:
    return {
        "doc_id": u.doc_id,
        "kind": u.kind,
        "order": u.order,
        "level": u.level,
        "chunk_ids": json.dumps(u.chunk_ids),
        "meta": json.dumps(u.meta),
    }


def _from_meta(uid: str, text: str, m: dict[str, Any], layer: Layer) -> Unit:
    return Unit(
        id=uid,
        doc_id=str(m["doc_id"]),
        layer=layer,
        text=text,
        chunk_ids=json.loads(m["chunk_ids"]),
        kind=str(m.get("kind", "")),
        order=int(m.get("order", 0)),
        level=int(m.get("level", 0)),
        meta=json.loads(m.get("meta") or "{}"),
    )
