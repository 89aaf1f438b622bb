"""Shared fixtures for the integration tests.

# ---- QA agent fixtures (graphs/qa.py, the CLI's `ask`, Studio, subgraphs, LLM presets) ----
One small indexed store (the bundled Cinderella story, ~3.5K tokens, offline index) and the
real MiniLM embedder, both built once per session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import STORY

QA_DOC = "cinderella"


@pytest.fixture(scope="session")
def qa_embedder() -> Any:
    """The real embedder (packaged MiniLM), loaded once."""
    from mindscape.embeddings import load_embedder

    return load_embedder()


@pytest.fixture(scope="session")
def qa_store(tmp_path_factory: pytest.TempPathFactory, qa_embedder: Any) -> Path:
    """A store with the bundled story indexed offline; returns its directory."""
    from mindscape.indexing.indexer import Indexer
    from mindscape.memory.store import MemoryStore

    path = tmp_path_factory.mktemp("qa") / "store"
    store = MemoryStore(path)
    # titled as `mindscape index` titles the file (its stem), so the CLI finds it current
    Indexer(store, qa_embedder, progress=False).index(QA_DOC, STORY.read_text(), title=STORY.stem)
    store.close()
    return path


@pytest.fixture(scope="session")
def qa_deps(qa_store: Path, qa_embedder: Any) -> Any:
    """Offline Deps over the story store (real retriever, real embedder)."""
    from mindscape.deps import Deps, open_store

    return Deps(store=open_store(qa_store), embedder=qa_embedder)
