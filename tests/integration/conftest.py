"""Shared fixtures for the integration tests.

# ---- QA agent fixtures (graphs/qa.py, the CLI's `ask`, Studio, subgraphs, LLM presets) ----
One small indexed store (the bundled Cinderella story, ~3.5K tokens, offline index) and the
real MiniLM embedder, both built once per session.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import STORY

QA_DOC = "cinderella"
LOOPBACK = {"127.0.0.1", "::1", "localhost"}


@pytest.fixture(scope="session")
def qa_embedder() -> Any:
    """The real embedder (packaged MiniLM), loaded once."""
    from mindscape.embeddings import load_embedder

    return load_embedder()


@pytest.fixture(scope="session")
def qa_store(tmp_path_factory: pytest.TempPathFactory, qa_embedder: Any) -> Path:
    """A store with the bundled story indexed offline; returns its directory."""
    from mindscape.memory.indexer import Indexer
    from mindscape.memory.store import MemoryStore

    path = tmp_path_factory.mktemp("qa") / "store"
    store = MemoryStore(path)
    Indexer(store, qa_embedder, progress=False).index(QA_DOC, STORY.read_text(), title="Cinderella")
    store.close()
    return path


@pytest.fixture(scope="session")
def qa_deps(qa_store: Path, qa_embedder: Any) -> Any:
    """Offline Deps over the story store (real retriever, real embedder)."""
    from mindscape.deps import Deps, open_store

    return Deps(store=open_store(qa_store), embedder=qa_embedder)


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail any connection that is not to loopback; ignore proxy settings."""
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and address[0] not in LOOPBACK:
            raise AssertionError(f"test tried to reach {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield
