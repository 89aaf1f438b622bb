"""A content-hash cache inside the store: every embedding and LLM output used at index time.

One SQLite file (`cache.sqlite3`) with two tables: `kv` (namespace, key → bytes) for
embeddings (namespace :data:`EMB_NS`, keys :func:`text_key`; the builders write them, retrieval
reads them back), sentence embeddings and LLM outputs, and `docs`, the manifest of indexed
documents. Writes are committed in small batches, so a killed index loses at most the batch
in flight and a rerun recomputes nothing that finished.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from mindscape.errors import StoreError


def content_key(*parts: str) -> str:
    """A sha256 over the parts (joined with NUL), as hex."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


EMB_NS = "emb"
"""The cache namespace of every embedding."""


def text_key(emb_id: str, text: str) -> str:
    """The cache key of one text's embedding by the embedder `emb_id`."""
    return content_key(emb_id, "text", text)


def in_context(context: str, chunk_text: str) -> str:
    """A chunk as embedded in its document's context: ``"{title}\n\n{chunk}"``. The opening
    of a story rarely names it, and its title tells the embedder whose story it is."""
    return f"{context}\n\n{chunk_text}"


class IndexCache:
    """Key-value cache and document manifest in one SQLite file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fallback: IndexCache | None = None
        """Another cache read where this one misses, never written (a library worker's scratch
        cache reads the store's: :mod:`mindscape.indexing.library`)."""
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS kv (ns TEXT, key TEXT, value BLOB,"
                " PRIMARY KEY (ns, key))"
            )
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS docs (doc_id TEXT PRIMARY KEY, content_hash TEXT,"
                " config_hash TEXT, status TEXT, info TEXT, updated REAL)"
            )
            self._db.execute("SELECT count(*) FROM docs").fetchone()
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(
                f"the store's cache {self.path} is damaged ({exc}); index the book again "
                f"into a new folder (`mindscape index BOOK --store NEW_DIR`)"
            ) from exc

    # -- generic bytes ------------------------------------------------------------
    def get_many(self, ns: str, keys: list[str]) -> dict[str, bytes]:
        """The cached values of those keys that are present (here, else in `fallback`)."""
        found: dict[str, bytes] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                part = keys[i : i + 500]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT key, value FROM kv WHERE ns=? AND key IN ({marks})", [ns, *part]
                )
                found.update(dict(rows.fetchall()))
        if self.fallback is not None and len(found) < len(keys):
            found.update(self.fallback.get_many(ns, [k for k in keys if k not in found]))
        return found

    def put_many(self, ns: str, items: dict[str, bytes]) -> None:
        """Store values and commit."""
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO kv VALUES (?, ?, ?)",
                [(ns, k, v) for k, v in items.items()],
            )
            self._db.commit()

    def namespaces(self) -> dict[str, dict[str, bytes]]:
        """Every cached value, by namespace (how a library worker's scratch cache is handed
        to the store: :mod:`mindscape.indexing.library`)."""
        out: dict[str, dict[str, bytes]] = {}
        with self._lock:
            for ns, key, value in self._db.execute("SELECT ns, key, value FROM kv"):
                out.setdefault(ns, {})[key] = value
        return out

    # -- text (LLM outputs) -----------------------------------------------------
    def get_text(self, key: str) -> str | None:
        """A cached LLM output."""
        got = self.get_many("llm", [key])
        return got[key].decode("utf-8") if key in got else None

    def put_text(self, key: str, value: str) -> None:
        """Cache an LLM output."""
        self.put_many("llm", {key: value.encode("utf-8")})

    # -- arrays (embeddings) -----------------------------------------------------
    def get_arrays(self, ns: str, keys: list[str], dim: int) -> dict[str, np.ndarray]:
        """Cached float32 arrays, reshaped to `(-1, dim)` rows."""
        return {
            k: np.frombuffer(v, dtype=np.float32).reshape(-1, dim)
            for k, v in self.get_many(ns, keys).items()
        }

    def put_arrays(self, ns: str, items: dict[str, np.ndarray]) -> None:
        """Cache float32 arrays."""
        self.put_many(
            ns, {k: np.ascontiguousarray(v, np.float32).tobytes() for k, v in items.items()}
        )

    # -- manifest -----------------------------------------------------------------
    def doc(self, doc_id: str) -> dict[str, Any] | None:
        """The manifest row of a document, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT doc_id, content_hash, config_hash, status, info FROM docs WHERE doc_id=?",
                [doc_id],
            ).fetchone()
        if row is None:
            return None
        return {
            "doc_id": row[0],
            "content_hash": row[1],
            "config_hash": row[2],
            "status": row[3],
            **json.loads(row[4] or "{}"),
        }

    def set_doc(
        self, doc_id: str, content_hash: str, config_hash: str, status: str, **info: Any
    ) -> None:
        """Write a document's manifest row."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO docs VALUES (?, ?, ?, ?, ?, ?)",
                [doc_id, content_hash, config_hash, status, json.dumps(info), time.time()],
            )
            self._db.commit()

    def docs(self, status: str | None = "done") -> list[dict[str, Any]]:
        """Manifest rows, by doc id (only finished ones by default)."""
        with self._lock:
            ids = [r[0] for r in self._db.execute("SELECT doc_id FROM docs ORDER BY doc_id")]
        rows = [self.doc(i) for i in ids]
        return [r for r in rows if r and (status is None or r["status"] == status)]

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
