"""The store against a real Chroma server on 127.0.0.1 (`HttpClient`), started by the test."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from mindscape.indexing.indexer import IndexConfig, Indexer
from mindscape.memory.store import MemoryStore
from mindscape.models.server import free_port
from tests.conftest import STORY, require
from tests.fakes import HashingEmbedder

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory):
    exe = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    # chromadb, a dependency, ships the CLI: without it the install is broken
    require(Path(exe).exists(), f"no chroma server CLI at {exe} (chromadb's)", "install")
    port = free_port()
    proc = subprocess.Popen(
        [
            exe,
            "run",
            "--path",
            str(tmp_path_factory.mktemp("chroma-server")),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1)
            break
        except OSError:
            time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("chroma server did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=20)


def test_index_into_a_chroma_server(tmp_path, chroma_url):
    store = MemoryStore(tmp_path / "cache-only", chroma_url=chroma_url)
    report = Indexer(
        store, HashingEmbedder(), config=IndexConfig(chunk_size=64), progress=False
    ).index("cin", STORY.read_text())
    assert not (tmp_path / "cache-only" / "chroma").exists()  # vectors went to the server
    again = MemoryStore(tmp_path / "cache-only", chroma_url=chroma_url)
    assert {layer: again.count(layer) for layer in report.layers} == report.layers
    assert len(again.view("veridical").units) == report.layers["veridical"]


def test_two_stores_on_one_chroma_server_keep_their_own_vectors(tmp_path, chroma_url):
    """Stores share a server, not collections: each is named by its store."""
    text = STORY.read_text()
    halves = {"a": text[: len(text) // 2], "b": text[len(text) // 2 :]}
    stores = {k: MemoryStore(tmp_path / k, chroma_url=chroma_url) for k in halves}
    for k, store in stores.items():
        Indexer(store, HashingEmbedder(), progress=False).index(f"doc-{k}", halves[k])
    for k, store in stores.items():
        docs = {u.doc_id for u in store.view("veridical").units}
        assert docs == {f"doc-{k}"}, (k, docs)
    assert stores["a"].collection_name("veridical") != stores["b"].collection_name("veridical")
