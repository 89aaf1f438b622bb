"""mindscape: question answering over very long narratives.

A layered memory of a book (veridical chunks, episodic session summaries, a semantic
cluster tree and a MoM outline) and a LangGraph agent that answers questions over it.
Nothing heavy is imported here: the names below load on first use.

    from mindscape import Context, Deps, build_qa_graph, answer_question
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Context": "mindscape.context",
    "Deps": "mindscape.deps",
    "build_qa_graph": "mindscape.graphs.qa",
    "answer_question": "mindscape.graphs.qa",
    "qa_subgraph": "mindscape.graphs.embed",
    "make_qa_node": "mindscape.graphs.embed",
    "make_qa_tool": "mindscape.graphs.tool",
    "PRESETS": "mindscape.presets",
    "PRESET_NAMES": "mindscape.presets",
    "LLM": "mindscape.llm",
    "LLMSettings": "mindscape.llm",
    "Usage": "mindscape.llm",
    "Indexer": "mindscape.indexing.indexer",
    "IndexConfig": "mindscape.indexing.config",
    "MemoryStore": "mindscape.memory.store",
    "Retriever": "mindscape.memory.retrieval.retriever",
    "load_embedder": "mindscape.embeddings",
    "MindscapeError": "mindscape.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import an exported name on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mindscape' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, "__version__"])
