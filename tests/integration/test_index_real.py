"""The index with the real MiniLM embedder and real Chroma on real text; the CLI as a user runs it."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from mindscape.embeddings import encode, encode_query, load_embedder
from mindscape.indexing.indexer import Indexer
from mindscape.memory.store import MemoryStore
from mindscape.memory.types import LAYERS
from tests.conftest import FIXTURE_BENCH, REPO, STORY, stopped_or_exited

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def embedder():
    return load_embedder()


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, embedder):
    path = tmp_path_factory.mktemp("real") / "store"
    store = MemoryStore(path)
    Indexer(store, embedder, progress=False).index(
        "cinderella", STORY.read_text(), title="Cinderella"
    )
    return path


def cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mindscape", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def test_real_index_retrieves_the_right_passage_after_reload(indexed, embedder):
    store = MemoryStore(indexed)  # a fresh handle: everything comes from disk
    view = store.view("veridical")
    q = encode_query(embedder, "What happens when the snow covers the grave?")
    top = [view.units[i].text for i in np.argsort(-(view.vecs @ q))[:3]]
    assert any("snow" in t and "grave" in t for t in top)
    # stored vectors are the model's embeddings of the stored text
    fresh = encode(embedder, [view.units[0].text])[0]
    assert float(fresh @ view.vecs[0]) > 0.999
    assert all(store.count(layer) > 0 for layer in LAYERS)


def test_adding_a_document_keeps_the_first(indexed, embedder, tmp_path):
    store = MemoryStore(indexed)
    before = {u.id: u.text for layer in LAYERS for u in store.view(layer, {"cinderella"}).units}
    second = STORY.read_text()[7000:]
    r = Indexer(store, embedder, progress=False).index("cinderella-part2", second)
    assert not r.skipped
    after = {u.id: u.text for layer in LAYERS for u in store.view(layer, {"cinderella"}).units}
    assert after == before
    assert store.summary()["documents"] == 2


def test_cli_index_and_inspect(tmp_path):
    store = tmp_path / "s"
    done = cli("index", str(STORY), "--store", str(store), "--quiet")
    assert done.returncode == 0, done.stderr
    out = cli("inspect", "--store", str(store), "--json")
    summary = json.loads(out.stdout)
    assert summary["documents"] == 1
    assert set(summary["layers"]) == {"veridical", "episodic", "semantic", "outline"}
    assert all(n > 0 for n in summary["layers"].values())
    again = cli("index", str(STORY), "--store", str(store))
    assert "unchanged, skipped" in again.stderr
    quiet = cli("index", str(STORY), "--store", str(store), "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == ""  # --quiet: no per-document lines


def test_cli_bad_input_alone_is_one_line_exit_2_and_store_untouched(tmp_path, indexed):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "binary.txt").write_bytes(bytes(range(256)) * 20)
    before = cli("inspect", "--store", str(indexed), "--json").stdout
    for bad in ["empty.txt", "binary.txt", "missing.txt"]:
        done = cli("index", str(tmp_path / bad), "--store", str(indexed), "--quiet")
        assert done.returncode == 2
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("mindscape: error:")
        assert "Traceback" not in done.stderr
    assert cli("inspect", "--store", str(indexed), "--json").stdout == before
    fresh = tmp_path / "never-created"
    assert cli("index", str(tmp_path / "empty.txt"), "--store", str(fresh)).returncode == 2
    assert not fresh.exists()
    assert cli("inspect", "--store", str(fresh)).returncode == 2


def test_cli_bad_book_beside_good_ones_is_reported_and_the_rest_indexed(tmp_path):
    (tmp_path / "binary.txt").write_bytes(bytes(range(256)) * 20)
    store = tmp_path / "s"
    done = cli("index", str(STORY), str(tmp_path / "binary.txt"), "--store", str(store), "--quiet")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"mindscape: warning: not indexed: {tmp_path / 'binary.txt'}: "
        "looks like a binary file, not text"
    ]
    summary = json.loads(cli("inspect", "--store", str(store), "--json").stdout)
    assert [d["doc_id"] for d in summary["docs"]] == [STORY.stem.lower()]


def test_cli_decodes_latin1_with_a_warning(tmp_path):
    f = tmp_path / "latin.txt"
    f.write_bytes("Le caf\xe9 \xe9tait ferm\xe9. Il pleuvait sur la ville.".encode("latin-1"))
    done = cli("index", str(f), "--store", str(tmp_path / "s"), "--quiet")
    assert done.returncode == 0 and "cp1252" in done.stderr


# `python -c PAUSED index ...` is `python -m mindscape index ...` with one seam: once the cache
# has committed its first embeddings, the process stops itself (SIGSTOP). The test then kills
# it there, mid-index, however fast the rest would go.
PAUSED = """
import os, runpy, signal, sys
from mindscape.memory.cache import IndexCache

made = IndexCache.put_arrays

def put_arrays(self, ns, items):
    made(self, ns, items)
    if ns == "emb" and items:
        os.kill(os.getpid(), signal.SIGSTOP)

IndexCache.put_arrays = put_arrays
sys.argv[0] = "mindscape"
runpy.run_module("mindscape", run_name="__main__")
"""


def test_killed_index_resumes_without_losing_finished_work(tmp_path, embedder):
    """The fixture bench's story (tests/bench, there in CI too), killed after its first
    committed embeddings, resumes to the same store as an index never killed."""
    doc_id = "comorag-cinderella"
    src = str(FIXTURE_BENCH / "comorag_cinderella" / "documents.jsonl")
    store = tmp_path / "killed"
    args = ["index", src, "--doc-id", doc_id, "--store", str(store), "--quiet"]
    proc = subprocess.Popen(
        [sys.executable, "-c", PAUSED, *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        status = stopped_or_exited(proc.pid, timeout=300)
        assert status is not None and os.WIFSTOPPED(status), "the index did not stop mid-run"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL  # it died of the kill, not of its own accord
    cached = _cached_rows(store / "cache.sqlite3")
    assert cached > 0, "nothing was committed before the kill"
    resumed = cli("index", src, "--doc-id", doc_id, "--store", str(store), "--quiet", "--json")
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)["reports"][0]
    assert report["embed_cached"] >= cached  # nothing finished was recomputed
    clean = tmp_path / "clean"
    assert cli("index", src, "--doc-id", doc_id, "--store", str(clean), "--quiet").returncode == 0
    a, b = MemoryStore(store), MemoryStore(clean)
    for layer in LAYERS:
        assert {u.id: u.text for u in a.view(layer).units} == {
            u.id: u.text for u in b.view(layer).units
        }


def _cached_rows(db) -> int:
    with sqlite3.connect(db) as con:
        return int(con.execute("SELECT COUNT(*) FROM kv WHERE ns='emb'").fetchone()[0])
