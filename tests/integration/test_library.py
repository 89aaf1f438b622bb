"""A library of books indexed on Ray (local mode, two workers) with the real embedder and Chroma.

Three small books (the bundled story cut in three, each titled) plus two bad files in one
folder: the good books are built by Ray workers and written by the driver, exactly as this
process would build them; the bad ones are reported; a rerun skips everything; a run stopped
after its first book resumes with the others (in the caller's own Ray, which it leaves
running); `ask` without `--doc` answers from the library and names the book.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import STORY
from tests.integration.test_index_real import cli

pytestmark = pytest.mark.integration

BOOKS = ("the-hazel-tree", "the-ball", "the-slipper")


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of three books (thirds of the story, by lines) and two bad files."""
    folder = tmp_path_factory.mktemp("library")
    lines = STORY.read_text().splitlines()
    third = len(lines) // 3
    for i, name in enumerate(BOOKS):
        part = lines[i * third : (i + 1) * third if i < 2 else None]
        (folder / f"{name}.txt").write_text("\n".join(part))
    (folder / "scanned.txt").write_bytes(bytes(range(256)) * 40)
    (folder / "notes.md").write_text("   \n")
    return folder


@pytest.fixture(scope="module")
def ray_store(library: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    store = tmp_path_factory.mktemp("ray") / "store"
    done = cli("index", str(library), "--store", str(store), "--workers", "2", timeout=600)
    return store, done


def test_library_is_built_on_ray_and_bad_books_are_reported(ray_store):
    store, done = ray_store
    assert done.returncode == 1, done.stderr  # some book was not indexed
    assert "building 3 book(s) on Ray with 2 worker(s)" in done.stderr
    assert "Traceback" not in done.stderr
    not_indexed = [ln for ln in done.stderr.splitlines() if "not indexed" in ln]
    assert len(not_indexed) == 2
    assert any("scanned.txt: looks like a binary file" in ln for ln in not_indexed)
    assert any("notes.md: empty file" in ln for ln in not_indexed)
    summary = json.loads(cli("inspect", "--store", str(store), "--json").stdout)
    assert sorted(d["doc_id"] for d in summary["docs"]) == sorted(BOOKS)


def test_ray_built_books_equal_books_built_in_process(ray_store, library, tmp_path):
    from mindscape.embeddings import load_embedder
    from mindscape.indexing.indexer import Indexer
    from mindscape.memory.store import MemoryStore

    here = MemoryStore(tmp_path / "here")
    indexer = Indexer(here, load_embedder(), progress=False)
    for name in BOOKS:
        indexer.index(name, (library / f"{name}.txt").read_text(), title=name)
    ray = MemoryStore.open_existing(ray_store[0])
    for layer in ("veridical", "episodic", "semantic", "outline"):
        a, b = ray.view(layer), here.view(layer)
        assert sorted(a.row_of) == sorted(b.row_of) and len(a) > 0
        ids = sorted(a.row_of)
        assert [a.units[a.row_of[i]].text for i in ids] == [b.units[b.row_of[i]].text for i in ids]
        rows_a = a.vecs[[a.row_of[i] for i in ids]]
        np.testing.assert_allclose(rows_a, b.vecs[[b.row_of[i] for i in ids]], atol=1e-5)
    # the sentence vectors the focused reader uses came back from the workers too
    ns_ray, ns_here = ray.cache.namespaces()["emb"], here.cache.namespaces()["emb"]
    assert set(ns_here) <= set(ns_ray)
    ray.close()
    here.close()


def test_rerun_skips_every_book_without_starting_ray(ray_store, library):
    store, _ = ray_store
    again = cli("index", str(library), "--store", str(store), "--json")
    assert again.returncode == 1  # the bad files are still there
    out = json.loads(again.stdout)
    assert [r["skipped"] for r in out["reports"]] == [True, True, True]
    assert len(out["failed"]) == 2 and "on Ray" not in again.stderr


@pytest.fixture
def own_ray():
    """This process's own Ray, as an application on Ray has: `index_library` uses it and
    leaves it running (and the test starts Ray once instead of once per run)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1")
    yield ray
    ray.shutdown()


def test_a_stopped_run_keeps_its_finished_books_and_resumes(library, tmp_path, own_ray):
    from mindscape.embeddings import spec_model_id
    from mindscape.indexing.indexer import IndexConfig
    from mindscape.indexing.library import index_library
    from mindscape.indexing.sources import load_sources
    from mindscape.memory.store import MemoryStore

    docs = load_sources([library / f"{name}.txt" for name in BOOKS])
    store = MemoryStore(tmp_path / "s")
    kw = dict(embedder="minilm", config=IndexConfig(), emb_id=spec_model_id("minilm"), workers=2)

    def stop_after_first(done: int, total: int, outcome: object) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        index_library(store, docs, progress=stop_after_first, **kw)
    finished = [d["doc_id"] for d in store.cache.docs()]
    assert len(finished) == 1
    run = index_library(store, docs, **kw)
    assert sorted(r.doc_id for r in run.reports) == sorted(BOOKS) and not run.failures
    skipped = [r.doc_id for r in run.reports if r.skipped]
    assert skipped == finished
    # a worker reads the store's cache first: a copy of a book under another id and title
    # embeds only its chunks in the new context, and a second copy alongside runs on Ray too
    copies = [dataclasses.replace(docs[0], doc_id=f"copy-{i}", title=f"Copy {i}") for i in (1, 2)]
    run = index_library(store, copies, **kw)
    assert run.workers == 2 and not run.failures
    for r in run.reports:
        assert r.embedded == r.layers["veridical"] and r.embed_cached > r.embedded
    assert own_ray.is_initialized()  # the caller's Ray, left running
    store.close()


def test_ask_without_doc_answers_from_the_library_and_names_the_book(ray_store):
    store, _ = ray_store
    done = cli(
        "ask",
        "What did the bird throw down to Cinderella?",
        "--store",
        str(store),
        "--llm",
        "extractive",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    books = {e["doc_id"] for e in out["evidence"]}
    assert books and books <= set(BOOKS)
    text = cli(
        "ask", "What did the bird throw down?", "--store", str(store), "--llm", "extractive"
    ).stdout
    assert "Books:" in text and any(b in text.split("Books:")[1] for b in BOOKS)
