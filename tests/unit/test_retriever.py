"""Tests of the retriever: signature selection on a real (small) index, conditioned scoring,
budgets, pool exclusion, hybrid and late-fusion modes, caches; plus the signature helpers it uses.

The embedder is a tiny bag-of-words hashing embedder, so similarities mean something and
every result is deterministic. The store is real (Chroma + the real Indexer, offline).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

import mindscape.memory
from mindscape.indexing.indexer import IndexConfig, Indexer
from mindscape.memory.retrieval.retriever import Retriever
from mindscape.memory.signature import sigma as sg
from mindscape.memory.signature.select import member_match
from mindscape.memory.store import LayerView, MemoryStore
from mindscape.memory.types import LAYERS, Unit
from mindscape.run import (
    default_params,
    default_retriever,
    default_settings,
    literal_params,
)
from mindscape.tokens import default_counter
from tests import signature_oracle as oracle
from tests.random_scope import random_case, scope_of

STOP = frozenset(
    "a an the and of to in was he she it his her they them their on at with for as had by that is".split()
)


class BagOfWords(Embeddings):
    """Hashed bag of words (stopwords dropped), unit-normalised: equal words → high cosine."""

    model_id = "bow-test-128"

    def __init__(self, dim: int = 128) -> None:
        self.dim = dim
        self.documents_calls = 0
        self.query_calls = 0

    def _vec(self, text: str) -> list[float]:
        v = np.zeros(self.dim)
        for t in re.findall(r"[a-z]+", text.lower()):
            if t not in STOP:
                v[zlib.crc32(t.encode()) % self.dim] += 1.0
        if not v.any():
            v[0] = 1.0
        return (v / np.linalg.norm(v)).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents_calls += 1
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        return self._vec(text)


def story(name: str, topics: list[str]) -> str:
    """A made-up story: one paragraph per topic, each paragraph a few sentences on that topic."""
    paras = []
    for i, topic in enumerate(topics):
        paras.append(
            f"{name} walked to the {topic} on day {i}. The {topic} was quiet and old. "
            f"Near the {topic} {name} found a {topic} stone. People spoke of the {topic} for years."
        )
    return "\n\n".join(paras)


DOCS = {
    "alpha": story(
        "Mara", ["river", "mill", "forest", "bridge", "tower", "garden", "harbor", "chapel"]
    ),
    "beta": story(
        "Tobin", ["desert", "well", "market", "palace", "caravan", "oasis", "temple", "dune"]
    ),
    "gamma": story(
        "Ilse", ["glacier", "cabin", "lake", "mine", "pass", "village", "river", "summit"]
    ),
}
CONFIG = IndexConfig(chunk_size=40, chunk_overlap=0, window=3, summary_tokens=40, core_tokens=30)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    emb = BagOfWords()
    store = MemoryStore(tmp_path_factory.mktemp("retr") / "store")
    ix = Indexer(store, emb, config=CONFIG, progress=False)
    for doc_id, text in DOCS.items():
        ix.index(doc_id, text, title=doc_id)
    return store, emb


@pytest.fixture
def retriever(built):
    store, emb = built
    return default_retriever(store, emb)


def ids(hits):
    return [h.unit_id for h in hits]


DENSE = default_settings(chunk_mode="dense", gate="none")


# --------------------------------------------------------------------------- the index we test on


def test_fixture_has_every_layer(built):
    store, _ = built
    for layer in LAYERS:
        assert len(store.view(layer)) > 0, layer
    assert len(store.view("episodic")) >= 6  # several sessions per story


# --------------------------------------------------------------------------- candidates


def test_candidates_are_the_dense_ranking(retriever, built):
    store, emb = built
    q = "Where did Tobin find the oasis stone?"
    hits = retriever.candidates(q, k0=10, activation="dense")
    view = store.view("veridical")
    qv = np.asarray(emb._vec(q))
    scores = view.vecs @ qv
    expected = [view.units[i].id for i in np.lexsort((np.arange(len(scores)), -scores))[:10]]
    assert ids(hits) == expected
    assert [h.meta["rank"] for h in hits] == list(range(10))
    assert hits[0].doc_id == "beta" and "oasis" in hits[0].text
    assert hits[0].score_query == pytest.approx(float(scores.max()), abs=1e-5)


def test_hybrid_candidates_use_bm25(retriever):
    hits = retriever.candidates("oasis", k0=5, activation="hybrid")
    assert "oasis" in hits[0].text
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    assert hits[0].score >= hits[-1].score


# --------------------------------------------------------------------------- α = 0


@pytest.mark.parametrize("mode", ["mean", "max", "members", "window", "region", "joined"])
def test_alpha_zero_reproduces_query_only_ranking_exactly(retriever, mode):
    q = "What did Mara find near the mill?"
    sig = retriever.signature(q)
    assert sig
    st = dataclasses.replace(DENSE, alpha=0.0, signature_mode=mode)
    with_sig = retriever.rank_chunks(q, signature=sig, settings=st, k=25)
    plain = retriever.candidates(q, k0=25, activation="dense")
    assert ids(with_sig) == ids(plain)
    assert [h.score for h in with_sig] == [h.score_query for h in plain]
    # hybrid mode at α=0 is the hybrid query-only ranking
    hy = retriever.rank_chunks(
        q, signature=sig, settings=dataclasses.replace(st, chunk_mode="hybrid"), k=25
    )
    assert ids(hy) == ids(retriever.candidates(q, k0=25, activation="hybrid"))


def test_conditioned_score_is_the_interpolation(retriever):
    q = "Who walked to the desert?"
    sig = retriever.signature(q)
    for mode in ("mean", "max", "members", "region"):
        st = dataclasses.replace(DENSE, alpha=0.3, signature_mode=mode)
        for h in retriever.rank_chunks(q, signature=sig, settings=st, k=10):
            assert h.meta["alpha"] == 0.3
            assert h.score == pytest.approx(0.7 * h.score_query + 0.3 * h.score_signature)
    # no signature: the signature score is 0 and the fused score is the query score
    for h in retriever.rank_chunks(q, settings=dataclasses.replace(DENSE, alpha=0.5), k=5):
        assert h.score_signature == 0.0 and h.score == h.score_query


def test_alpha_one_window_mode_ranks_signature_windows_first(retriever, built):
    store, _ = built
    q = "glacier cabin lake"
    sig = retriever.signature(q)
    inside = {c for su in sig for c in su.chunk_ids}
    st = dataclasses.replace(DENSE, alpha=1.0, signature_mode="window")
    hits = retriever.rank_chunks(q, signature=sig, settings=st, k=len(inside))
    assert set(ids(hits)) == inside


# --------------------------------------------------------------------------- signature


def test_signature_units_are_sessions_with_their_gains(retriever, built):
    store, _ = built
    sessions = {u.id: u for u in store.view("episodic").units}
    sig = retriever.signature("Where is the temple of the palace?")
    assert 1 <= len(sig) <= default_params().k
    assert [s.rank for s in sig] == list(range(len(sig)))
    assert len({s.unit_id for s in sig}) == len(sig)
    for s in sig:
        u = sessions[s.unit_id]
        assert s.text == u.text and s.chunk_ids == u.chunk_ids
        assert set(s.gains) == {"query", "coverage", "diversity", "total"}
        p = default_params()
        assert s.gains["total"] == pytest.approx(
            p.lambda_q * s.gains["query"]
            + p.lambda_c * s.gains["coverage"]
            + p.lambda_d * s.gains["diversity"]
        )
    assert sig[0].unit_id.startswith("beta:")


def test_first_k_takes_sessions_of_top_chunks_in_rank_order(retriever, built):
    store, _ = built
    session_of = {c: u.id for u in store.view("episodic").units for c in u.chunk_ids}
    q = "river bridge tower"
    for activation in ("dense", "hybrid"):
        p = default_params(k=3, activation=activation)
        cands = retriever.candidates(q, k0=p.k0, activation=activation)
        expected: list[str] = []
        for h in cands:
            s = session_of[h.unit_id]
            if s not in expected:
                expected.append(s)
        sig = retriever.signature(q, method="first-k", params=p)
        assert [s.unit_id for s in sig] == expected[:3]
        assert sig[0].gains["query"] <= 1.0 and sig[0].gains["diversity"] == 0.0


def test_first_k_hand_case_one_chunk_one_session(retriever):
    # The words of one paragraph only: the top chunk, hence the first session, is that paragraph's.
    sig = retriever.signature("Tobin caravan", method="first-k", params=default_params(k=1))
    assert len(sig) == 1
    top = retriever.candidates("Tobin caravan", k0=1, activation="dense")[0]
    assert "caravan" in top.text
    assert top.unit_id in sig[0].chunk_ids  # the session whose window holds the top chunk


def test_first_k_and_coverage_agree_when_k_is_one_and_coverage_is_off(retriever):
    p = default_params(k=1, lambda_c=0.0, lambda_d=0.0)
    q = "summit pass village"
    assert [s.unit_id for s in retriever.signature(q, params=p)] == [
        s.unit_id for s in retriever.signature(q, method="first-k", params=p)
    ]


def test_signature_uses_index_vectors_not_the_model(built):
    store, emb = built
    r = default_retriever(store, emb)
    r.warm()
    before_docs, before_q = emb.documents_calls, emb.query_calls
    for method in ("coverage", "first-k"):
        for match in ("summary", "members", "window"):
            r.signature(
                "mill river",
                method=method,
                params=default_params(match=match),
            )
    assert emb.documents_calls == before_docs  # summaries are never re-embedded
    assert emb.query_calls == before_q + 1  # the query once (then cached)


def test_member_match_of_the_retriever_equals_the_reference(retriever):
    sc = retriever.scope()
    rows = np.array([0, 3, 7, 11, 20])
    sess = [0, 2, 5]
    fast = member_match(sc, sess, rows)
    ref = oracle.member_match(
        sc.chunk_vecs[rows], [sc.chunk_vecs[sc.session_members[j]] for j in sess]
    )
    assert np.allclose(fast, ref, atol=1e-6)
    for i, j in enumerate(sess):  # a chunk inside a session's window matches it fully
        inside = [k for k, r in enumerate(rows) if sc.chunk_session[r] == j]
        assert np.allclose(fast[i, inside], 1.0, atol=1e-5)


def test_signature_options_and_errors(retriever):
    lit = literal_params()  # the literal objective: summary relevance and match, dense E1
    assert retriever.signature("river", params=lit)
    assert retriever.signature("river", params=dataclasses.replace(lit, relevance="mean"))
    assert retriever.signature("river", extra_text="mill stone")
    with pytest.raises(ValueError):
        retriever.signature("river", method="top")
    with pytest.raises(ValueError):
        retriever.signature("river", params=dataclasses.replace(lit, match="nope"))  # type: ignore[arg-type]
    assert retriever.signature("river", doc_ids={"missing"}) == []


def test_extra_text_moves_the_signature(retriever):
    base = retriever.signature("stone", params=default_params(k=1))
    moved = retriever.signature(
        "stone",
        extra_text="Ilse glacier glacier",
        params=default_params(k=1),
    )
    assert moved[0].unit_id.startswith("gamma:")
    assert base  # the plain query still yields a signature


# --------------------------------------------------------------------------- retrieve: budgets, pool, layers


@pytest.mark.parametrize("chunk_mode", ["dense", "hybrid", "late-fusion"])
@pytest.mark.parametrize("budget", [0, 30, 120, 400])
def test_budgets_are_never_exceeded(retriever, chunk_mode, budget):
    st = default_settings(
        chunk_mode=chunk_mode,
        budgets={
            "veridical": budget,
            "semantic": budget // 2,
            "episodic": budget,
            "outline": budget,
        },
        fusion_layers=("veridical", "outline", "semantic"),
    )
    q = "What did the people say about the harbor?"
    out = retriever.retrieve(q, signature=retriever.signature(q), settings=st)
    assert list(out) == list(LAYERS)
    counter = default_counter()
    for layer, hits in out.items():
        cap = st.budgets[layer]
        assert sum(h.tokens for h in hits) <= cap
        assert all(h.tokens == counter.count(h.text) for h in hits)
        assert all(h.layer == layer for h in hits)
        if cap == 0:
            assert hits == []
    if budget >= 120:
        assert all(out[layer] for layer in LAYERS)


def test_layers_are_switchable(retriever):
    st = default_settings(budgets={"veridical": 500, "semantic": 0, "episodic": 0, "outline": 0})
    out = retriever.retrieve("forest", settings=st)
    assert out["veridical"] and not out["semantic"] and not out["episodic"] and not out["outline"]


@pytest.mark.parametrize("chunk_mode", ["dense", "hybrid", "late-fusion"])
def test_pool_exclusion_holds(retriever, chunk_mode):
    st = default_settings(
        chunk_mode=chunk_mode,
        budgets={"veridical": 200, "semantic": 200, "episodic": 200, "outline": 200},
    )
    q = "Who found a stone near the well?"
    sig = retriever.signature(q)
    first = retriever.retrieve(q, signature=sig, settings=st)
    pool = {h.unit_id for hits in first.values() for h in hits}
    assert pool
    second = retriever.retrieve(q, signature=sig, settings=st, exclude=pool)
    got = {h.unit_id for hits in second.values() for h in hits}
    assert got and not (got & pool)
    # excluding everything leaves nothing
    everything = {u.id for layer in LAYERS for u in retriever.store.view(layer).units}
    empty = retriever.retrieve(q, signature=sig, settings=st, exclude=everything)
    assert all(hits == [] for hits in empty.values())


def test_hits_carry_layer_ids_text_and_scores(retriever, built):
    store, _ = built
    q = "market palace"
    out = retriever.retrieve(
        q,
        signature=retriever.signature(q),
        settings=default_settings(
            budgets={"veridical": 300, "semantic": 300, "episodic": 300, "outline": 300}
        ),
    )
    chunk_ids = {u.id for u in store.view("veridical").units}
    for layer, hits in out.items():
        for h in hits:
            u = store.view(layer).units[store.view(layer).row_of[h.unit_id]]
            assert h.text == u.text and h.doc_id == u.doc_id and h.chunk_ids == u.chunk_ids
            assert set(h.chunk_ids) <= chunk_ids
            assert np.isfinite([h.score, h.score_query, h.score_signature]).all()
    v = out["veridical"]
    assert [h.score for h in v] == sorted((h.score for h in v), reverse=True)
    assert all("char_start" in h.meta and "char_end" in h.meta for h in v)


def test_narrative_order(retriever):
    st = default_settings(
        narrative_order=True,
        budgets={"veridical": 400, "semantic": 0, "episodic": 400, "outline": 0},
    )
    out = retriever.retrieve("river", settings=st)
    for layer in ("veridical", "episodic"):
        keys = [(h.doc_id, h.meta["order"]) for h in out[layer]]
        assert keys == sorted(keys)


def test_doc_scope_restricts_every_layer(retriever):
    st = default_settings(
        budgets={"veridical": 300, "semantic": 300, "episodic": 300, "outline": 300}
    )
    out = retriever.retrieve(
        "river stone",
        doc_ids={"gamma"},
        settings=st,
        signature=retriever.signature("river stone", doc_ids={"gamma"}),
    )
    assert all(h.doc_id == "gamma" for hits in out.values() for h in hits)
    assert all(h.doc_id == "gamma" for h in retriever.rank_chunks("river", doc_ids={"gamma"}, k=50))


# --------------------------------------------------------------------------- modes


def test_late_fusion_maps_outline_hits_to_chunks_and_dedupes(retriever):
    st = default_settings(chunk_mode="late-fusion", alpha=0.0, dedupe_threshold=0.999)
    hits = retriever.rank_chunks("caravan oasis", settings=st, k=15)
    assert all(h.layer == "veridical" for h in hits)
    assert len(set(ids(hits))) == len(hits)
    sources = [set(h.meta["fused_from"]) for h in hits]
    assert any("outline" in s for s in sources)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # a strict threshold removes near-duplicates (identical bag-of-words chunks would collapse)
    loose = retriever.rank_chunks(
        "caravan oasis", settings=dataclasses.replace(st, dedupe_threshold=0.5), k=15
    )
    assert len(loose) <= len(hits)


def test_hybrid_weight_zero_is_dense_order(retriever):
    q = "Ilse walked to the mine"
    st = default_settings(chunk_mode="hybrid", hybrid_weight=0.0, alpha=0.0)
    assert ids(retriever.rank_chunks(q, settings=st, k=10)) == ids(
        retriever.candidates(q, k0=10, activation="dense")
    )


def test_gate_scales_alpha_by_activation_confidence(retriever):
    q = "Tobin desert caravan"
    sig = retriever.signature(q)
    gated = retriever.rank_chunks(
        q, signature=sig, settings=default_settings(alpha=0.5, gate="doc"), k=3
    )
    a = gated[0].meta["alpha"]
    assert 0.0 < a <= 0.5
    assert (
        retriever.rank_chunks(
            q, signature=sig, settings=default_settings(alpha=0.5, gate="none"), k=3
        )[0].meta["alpha"]
        == 0.5
    )
    # a single document: nothing competes, the gate leaves α alone
    one = retriever.rank_chunks(
        q,
        signature=retriever.signature(q, doc_ids={"beta"}),
        doc_ids={"beta"},
        settings=default_settings(alpha=0.5, gate="doc"),
        k=3,
    )
    assert one[0].meta["alpha"] == 0.5


def test_the_gate_reads_the_runs_activation_not_the_retrievers(retriever):
    """The α gate's confidence comes from the activation the run chose σ with (its K0 and
    E1 in ``settings.signature_params``), not from the retriever's own defaults."""
    from mindscape.memory.signature.conditioning import resolve_signature

    q = "river stone"  # two stories have a river
    sig = retriever.signature(q)
    sc = retriever.scope()
    main = resolve_signature(sc, sig, embed=None, graded=False).main_doc

    def alpha(k0: int) -> tuple[float, float]:
        run = default_params(k0=k0, activation="dense")
        st = default_settings(alpha=0.5, gate="doc", signature_params=run)
        got = retriever.rank_chunks(q, signature=sig, settings=st, k=3)[0].meta["alpha"]
        rows = [
            sc.chunks.row_of[h.unit_id]
            for h in retriever.candidates(q, **{"k0": k0, "activation": "dense"})
        ]
        conf = sg.activation_confidence(np.arange(len(rows)), sc.chunk_doc[rows].tolist(), main)
        return got, 0.5 * conf**2

    narrow, wide = alpha(1), alpha(40)
    assert narrow[0] == pytest.approx(narrow[1]) and wide[0] == pytest.approx(wide[1])
    assert narrow[0] != pytest.approx(wide[0])  # K0 reaches the gate
    assert retriever.params.k0 == 50  # the retriever's own default is neither


def test_signature_units_from_other_layers_are_accepted(retriever, built):
    store, _ = built
    outline = store.view("outline").units[0]
    from mindscape.memory.types import SignatureUnit

    su = [SignatureUnit(unit_id=outline.id, text=outline.text, chunk_ids=outline.chunk_ids)]
    hits = retriever.rank_chunks(
        "stone",
        signature=su,
        settings=default_settings(alpha=1.0, signature_mode="window", gate="none"),
        k=3,
    )
    assert set(ids(hits)) <= set(outline.chunk_ids)
    # unknown ids are ignored: the ranking is query-only
    ghost = [SignatureUnit(unit_id="nowhere:e0", text="", chunk_ids=[])]
    assert ids(retriever.rank_chunks("stone", signature=ghost, k=5)) == ids(
        retriever.rank_chunks("stone", k=5)
    )


def test_invalid_settings_raise():
    for bad in (
        {"alpha": 1.5},
        {"signature_mode": "sum"},
        {"chunk_mode": "sparse"},
        {"gate": "soft"},
        {"budgets": {"nope": 1}},
        {"window_weights": "steep"},
    ):
        with pytest.raises(ValueError):
            default_settings(**bad)


def test_scope_cache_sees_new_documents(tmp_path):
    emb = BagOfWords()
    store = MemoryStore(tmp_path / "s")
    ix = Indexer(store, emb, config=CONFIG, progress=False)
    ix.index("alpha", DOCS["alpha"])
    r = default_retriever(store, emb)
    assert {h.doc_id for h in r.rank_chunks("desert oasis", k=50)} == {"alpha"}
    ix.index("beta", DOCS["beta"])
    top = r.rank_chunks("desert oasis", k=3)
    assert top[0].doc_id == "beta"
    store.close()


def test_empty_store(tmp_path):
    store = MemoryStore(tmp_path / "empty")
    r = default_retriever(store, BagOfWords())
    assert r.signature("anything") == []
    assert r.rank_chunks("anything") == []
    assert r.candidates("anything") == []
    assert all(v == [] for v in r.retrieve("anything").values())
    store.close()


# --------------------------------------------------------------------------- signature helpers


def test_member_match_is_one_inside_the_window():
    """Production's member_match on a hand-built scope: three sessions over six chunks, the
    third with no member chunk (it matches nothing)."""
    rng = np.random.default_rng(0)
    chunks = rng.normal(size=(6, 8))
    unit = chunks / np.linalg.norm(chunks, axis=1, keepdims=True)
    ids_ = [f"c{i}" for i in range(6)]
    sc = scope_of(
        {
            "veridical": LayerView(
                "veridical",
                [Unit(c, "d", "veridical", c, [c]) for c in ids_],
                unit.astype(np.float32),
            ),
            "episodic": LayerView(
                "episodic",
                [
                    Unit("s0", "d", "episodic", "s0", ids_[:3]),
                    Unit("s1", "d", "episodic", "s1", ids_[3:5]),
                    Unit("s2", "d", "episodic", "s2", []),
                ],
                np.eye(3, 8, dtype=np.float32),
            ),
        }
    )
    m = member_match(sc, [0, 1, 2], np.arange(6))
    assert m.shape == (3, 6)
    assert np.allclose(m[0, :3], 1.0, atol=1e-6) and np.allclose(m[1, 3:5], 1.0, atol=1e-6)
    assert np.all(m[2] == 0.0)
    assert np.all((m >= 0) & (m <= 1))
    assert m[0, 5] == pytest.approx(max(0.0, float((unit[:3] @ unit[5]).max())), abs=1e-6)
    ref = oracle.member_match(chunks, [chunks[:3], chunks[3:5], np.zeros((0, 8))])
    assert np.allclose(m, ref, atol=1e-6)


def test_member_match_agrees_with_the_oracle_on_random_scopes():
    """200 seeded random scopes, random candidate rows and session subsets (any order)."""
    for seed in range(200):
        rng = np.random.default_rng(seed)
        sc = random_case(rng).scope
        rows = rng.choice(sc.n_chunks, size=int(rng.integers(1, sc.n_chunks + 1)), replace=False)
        n_sess = len(sc.sessions)
        sess = [int(j) for j in rng.permutation(n_sess)[: int(rng.integers(1, n_sess + 1))]]
        fast = member_match(sc, sess, rows)
        ref = oracle.member_match(
            sc.chunk_vecs[rows], [sc.chunk_vecs[sc.session_members[j]] for j in sess]
        )
        assert np.allclose(fast, ref, atol=1e-6), seed


def test_region_scores_doc_shares_and_confidence():
    shares = sg.doc_shares(["a", "a", "b"], [0.5, 0.3, 0.2])
    assert shares == pytest.approx({"a": 0.8, "b": 0.2})
    assert sg.doc_shares(["a", "b"], [0.0, 0.0]) == pytest.approx({"a": 0.5, "b": 0.5})
    assert sg.doc_shares([]) == {}
    r = sg.region_scores(np.array([1.0, 0.0, 0.0]), np.array([0.8, 0.8, 0.2]), 0.5)
    assert r == pytest.approx([0.9, 0.4, 0.1])
    with pytest.raises(ValueError):
        sg.region_scores(np.zeros(2), np.zeros(2), 1.5)
    with pytest.raises(ValueError):
        sg.region_scores(np.zeros(2), np.zeros(3), 0.5)
    assert sg.activation_confidence([0, 1, 2], ["a", "a", "a"], "a") == 1.0
    assert sg.activation_confidence([0, 1], ["a", "b"], "a") == pytest.approx(1.0 / 1.5)
    assert sg.activation_confidence([0], ["a"], None) == 0.0
    assert sg.activation_confidence([], [], "a") == 0.0


def test_memory_never_imports_the_run_context():
    """memory/ sits below the Context: settings come in as arguments (memory.settings), so no
    module of it imports mindscape.context, not even inside a function."""
    importers = []
    for path in Path(mindscape.memory.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{a.name}" for a in node.names] + [str(node.module)]
            else:
                continue
            if any(n == "mindscape.context" or n.startswith("mindscape.context.") for n in names):
                importers.append(path.name)
    assert importers == []


def test_retriever_calls_default_to_its_own_settings(built):
    """A retriever's params and settings are what calls that pass none use (k0 included)."""
    store, emb = built
    r = default_retriever(store, emb)
    assert r.params == default_params() and r.settings == default_settings()
    q = "Where is the temple of the palace?"
    assert ids(r.candidates(q)) == ids(r.candidates(q, k0=r.params.k0))
    with pytest.raises(TypeError):
        Retriever(store, emb)  # type: ignore[call-arg]


def test_auto_chunk_mode_ranks_hybrid_across_documents_and_dense_within_one(retriever):
    q = "Ilse walked to the mine"

    def scored(mode: str, doc_ids: set[str] | None = None) -> list[tuple[str, float]]:
        st = default_settings(chunk_mode=mode, alpha=0.0)
        hits = retriever.rank_chunks(q, settings=st, doc_ids=doc_ids, k=10)
        return [(h.unit_id, round(h.score_query, 6)) for h in hits]

    assert scored("hybrid") != scored("dense")  # BM25 moves the scores
    assert scored("auto") == scored("hybrid")
    for doc in DOCS:
        assert scored("hybrid", {doc}) != scored("dense", {doc})
        assert scored("auto", {doc}) == scored("dense", {doc})
