"""The retriever with the real MiniLM embedder and real Chroma on real FairytaleQA stories.

Three short stories go into one store (a tiny series setting); the questions of one of them
are asked against the whole store. Runs in well under a minute.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from mindscape.eval.bench import gold_spans, load_documents, load_questions
from mindscape.eval.metrics import recall_at_k
from mindscape.indexing.indexer import Indexer
from mindscape.memory.retrieval.retriever import RetrievalSettings, Retriever
from mindscape.memory.store import MemoryStore
from mindscape.memory.types import LAYERS
from mindscape.run import default_params, default_retriever, default_settings
from tests.conftest import BENCH

pytestmark = pytest.mark.integration

STORIES = (
    "ftqa-the-king-of-the-ants",
    "ftqa-the-lady-of-the-moon",
    "ftqa-why-dog-and-cat-are-enemies",
)
ASKED = "ftqa-the-king-of-the-ants"


@pytest.fixture(scope="module")
def one_thread():
    """Single-query MiniLM passes are much faster with one torch thread on a busy small machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def setup(tmp_path_factory, one_thread):
    if not (BENCH / "fairytaleqa" / "documents.jsonl").is_file():
        pytest.skip("bench data not available")
    from mindscape.embeddings import load_embedder

    emb = load_embedder()
    path = tmp_path_factory.mktemp("retr_real") / "store"
    store = MemoryStore(path)
    ix = Indexer(store, emb, progress=False)
    docs = load_documents(BENCH, "fairytaleqa", doc_ids=STORIES)
    assert len(docs) == len(STORIES)
    for d in docs:
        ix.index(d.doc_id, d.text, title=d.title)
    questions = [q for q in load_questions(BENCH, "fairytaleqa", doc_ids=[ASKED]) if q.evidence]
    assert len(questions) >= 10
    return store, emb, questions, path


def recall10(
    retriever: Retriever, questions, *, method: str | None, settings: RetrievalSettings
) -> float:
    spans = {
        u.id: (u.meta["char_start"], u.meta["char_end"])
        for u in retriever.store.view("veridical").units
    }
    vals = []
    for q in questions:
        sig = retriever.signature(q.question, method=method) if method else None
        hits = retriever.rank_chunks(q.question, signature=sig, settings=settings, k=10)
        vals.append(
            recall_at_k(
                [spans[h.unit_id] if h.doc_id == q.doc_id else (0, 0) for h in hits],
                gold_spans(q),
                10,
            )
        )
    return sum(vals) / len(vals)


def test_signature_finds_the_story_and_conditioned_retrieval_recalls_evidence(setup):
    store, emb, questions, _ = setup
    r = default_retriever(store, emb)
    in_story = [r.signature(q.question)[0].unit_id.startswith(ASKED + ":") for q in questions]
    assert sum(in_story) / len(in_story) >= 0.8
    naive = recall10(
        r, questions, method=None, settings=default_settings(chunk_mode="dense", alpha=0.0)
    )
    mia = recall10(r, questions, method="coverage", settings=default_settings())
    assert naive >= 0.6
    assert mia >= naive - 0.02
    assert mia >= 0.8


def test_tri_layer_retrieve_packs_real_token_budgets(setup):
    store, emb, questions, _ = setup
    r = default_retriever(store, emb)
    q = questions[0].question
    sig = r.signature(q)
    assert 1 <= len(sig) <= default_params().k
    st = default_settings(
        budgets={"veridical": 600, "semantic": 300, "episodic": 300, "outline": 300}
    )
    out = r.retrieve(q, signature=sig, settings=st)
    for layer in LAYERS:
        assert out[layer], layer
        assert sum(h.tokens for h in out[layer]) <= st.budgets[layer]
    pool = {h.unit_id for hits in out.values() for h in hits}
    again = r.retrieve(q, signature=sig, settings=st, exclude=pool)
    assert not ({h.unit_id for hits in again.values() for h in hits} & pool)
    fused = r.rank_chunks(q, settings=dataclasses.replace(st, chunk_mode="late-fusion"), k=10)
    assert len({h.unit_id for h in fused}) == len(fused) == 10


def test_reopened_store_gives_the_same_ranking_and_warm_queries_are_fast(setup):
    store, emb, questions, path = setup
    q = questions[1].question
    first = default_retriever(store, emb)
    expected = [h.unit_id for h in first.rank_chunks(q, signature=first.signature(q), k=10)]
    again = default_retriever(MemoryStore(path), emb)
    again.warm()
    assert [h.unit_id for h in again.rank_chunks(q, signature=again.signature(q), k=10)] == expected
    times = []
    for qq in questions[2:12]:
        t = time.perf_counter()
        again.retrieve(qq.question, signature=again.signature(qq.question))
        times.append(time.perf_counter() - t)
    assert sorted(times)[len(times) // 2] < 0.5  # generous: a shared 2-core machine
