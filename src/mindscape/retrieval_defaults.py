"""A default run's retrieval settings, for scripts, benchmarks and tests.

The values are :class:`~mindscape.context.Context`'s (its defaults, resolved under the default
preset); these helpers only build the memory side's settings objects from them with a few
fields replaced. The agent builds them from its own run's Context instead.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

from langchain_core.embeddings import Embeddings

from mindscape.context import Context
from mindscape.memory.retrieval.retriever import Retriever
from mindscape.memory.settings import RetrievalSettings, SignatureParams
from mindscape.memory.store import MemoryStore
from mindscape.run import retrieval_settings, signature_params

__all__ = ["default_params", "default_retriever", "default_settings", "literal_params"]


@cache
def _run_context() -> Context:
    return Context().resolved()


def default_params(**overrides: Any) -> SignatureParams:
    """The signature selection of a default run (chosen on the FairytaleQA dev split, see
    docs/retrieval.md), with `overrides`: ``run.signature_params(Context().resolved())``."""
    return dataclasses.replace(signature_params(_run_context()), **overrides)


def literal_params(**overrides: Any) -> SignatureParams:
    """MiA's literal objective: relevance and match through the session summary, dense
    activation (the defaults differ in these three places)."""
    literal: dict[str, Any] = {"relevance": "summary", "match": "summary", "activation": "dense"}
    return default_params(**(literal | overrides))


def default_settings(**overrides: Any) -> RetrievalSettings:
    """The retrieval settings of a default run
    (``run.retrieval_settings(Context().resolved())``), with `overrides`."""
    return dataclasses.replace(retrieval_settings(_run_context()), **overrides)


def default_retriever(store: MemoryStore, embedder: Embeddings, **kwargs: Any) -> Retriever:
    """A :class:`~mindscape.memory.retrieval.retriever.Retriever` whose calls default to a default
    run's settings (`kwargs` go to its constructor: a counter, cache sizes)."""
    return Retriever(
        store, embedder, params=default_params(), settings=default_settings(), **kwargs
    )
