"""The indexer end to end with a hashing fake embedder and a scripted LLM (real Chroma on disk)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from mindscape.indexing.indexer import IndexConfig, Indexer
from mindscape.llm import LLM, LLMSettings
from mindscape.memory.store import MemoryStore
from mindscape.memory.types import LAYERS
from tests.conftest import STORY
from tests.fakes import HashingEmbedder, ScriptedChatModel

SMALL = IndexConfig(chunk_size=64, chunk_overlap=8, window=20)


@pytest.fixture()
def story() -> str:
    return STORY.read_text()


def make(tmp_path, embedder=None, llm=None, config=SMALL):
    store = MemoryStore(tmp_path / "store")
    return store, Indexer(
        store, embedder or HashingEmbedder(), llm=llm, config=config, progress=False
    )


def all_units(store, doc_id=None):
    ids = {doc_id} if doc_id else None
    return {u.id: u for layer in LAYERS for u in store.view(layer, ids).units}


def test_every_unit_maps_to_existing_chunks_and_layers_are_filled(tmp_path, story):
    store, ix = make(tmp_path)
    report = ix.index("cin", story, title="Cinderella")
    assert not report.skipped and all(report.layers[layer] > 0 for layer in LAYERS)
    units = all_units(store)
    chunk_ids = {u.id for u in units.values() if u.layer == "veridical"}
    assert all(set(u.chunk_ids) <= chunk_ids and u.chunk_ids for u in units.values())
    # episodic windows partition the chunks in source order, and each chunk knows its window
    sessions = sorted(store.view("episodic").units, key=lambda u: u.order)
    flat = [c for s in sessions for c in s.chunk_ids]
    assert flat == [f"cin:c{i}" for i in range(len(chunk_ids))]
    chunk = store.view("veridical").units[0]
    assert chunk.meta["window"] == sessions[0].id
    assert story[chunk.meta["char_start"] : chunk.meta["char_end"]] == chunk.text
    # the semantic tree ends in one root covering every chunk
    semantic = store.view("semantic").units
    top = max(u.level for u in semantic)
    roots = [u for u in semantic if u.level == top]
    assert top >= 1 and len(roots) == 1 and set(roots[0].chunk_ids) == chunk_ids
    for level in range(top + 1):  # every level covers every chunk (RAPTOR's soft clusters
        covered = {c for u in semantic if u.level == level for c in u.chunk_ids}  # may overlap)
        assert covered == chunk_ids
    assert store.summary()["documents"] == 1


def test_summaries_are_extractive_sentences_of_the_source(tmp_path, story):
    store, ix = make(tmp_path)
    ix.index("cin", story)
    flat = " ".join(story.split())
    for u in store.view("episodic").units:
        assert u.text
        first_sentence = u.text.split(". ")[0]
        assert first_sentence[:40] in flat


def test_reindex_unchanged_skips_and_changed_text_replaces(tmp_path, story):
    emb = HashingEmbedder()
    store, ix = make(tmp_path, emb)
    ix.index("cin", story)
    before = all_units(store)
    n_embedded = emb.texts_embedded
    again = ix.index("cin", story)
    assert again.skipped and emb.texts_embedded == n_embedded
    changed = story[: len(story) // 2]
    r = ix.index("cin", changed)
    assert not r.skipped and r.embed_cached > 0  # unchanged chunks came from the cache
    after = all_units(store)
    assert len(after) < len(before)
    assert all(u.text in changed or u.layer != "veridical" for u in after.values())


def test_adding_a_document_touches_only_that_document(tmp_path, story):
    store, ix = make(tmp_path)
    ix.index("cin", story)
    first = {k: (u.text, u.chunk_ids) for k, u in all_units(store, "cin").items()}
    row = store.cache.doc("cin")
    ix.index("other", "A fox lived in the wood. It was clever. " * 30)
    assert {k: (u.text, u.chunk_ids) for k, u in all_units(store, "cin").items()} == first
    assert store.cache.doc("cin") == row
    assert store.summary()["documents"] == 2
    assert all(u.doc_id == "other" for u in all_units(store, "other").values())


@pytest.mark.parametrize(
    "text", ["One short sentence.", "First. Second one. Third here.", "A b c. " * 40]
)
def test_tiny_documents_index_without_error(tmp_path, text):
    store, ix = make(tmp_path)
    r = ix.index("tiny", text)
    assert r.layers["veridical"] >= 1 and r.layers["episodic"] >= 1 and r.layers["semantic"] >= 1


def test_store_reloads_from_disk(tmp_path, story):
    store, ix = make(tmp_path)
    ix.index("cin", story)
    units = all_units(store)
    vecs = store.view("veridical").vecs.copy()
    store.close()
    again = MemoryStore(tmp_path / "store")
    assert all_units(again).keys() == units.keys()
    assert (again.view("veridical").vecs == vecs).all()
    # a large library's layer is read a page at a time; the pages add up to the same view
    paged = MemoryStore(tmp_path / "store")
    paged.READ_PAGE = 7
    view = paged.view("veridical")
    assert len(view) > 7 and [u.id for u in view.units] == [
        u.id for u in again.view("veridical").units
    ]
    assert (view.vecs == vecs).all()


def _scripted_llm(cache=None):
    """An LLM whose fake model answers by role, recognising the prompt."""

    def answer(prompt: str) -> str:
        if "subject-relation-object" in prompt:
            return '```json\n{"triples": [["Cinderella", "lives with", "her stepmother"]]}\n```'
        if "outline items" in prompt:
            section = prompt.split("<section>")[1]
            words = section.split()
            head, tail = " ".join(words[:7]), " ".join(words[-6:])
            return json.dumps(
                {
                    "items": [
                        {
                            "title": "The whole part",
                            "core": "Things happen.",
                            "chunks": [{"head": head, "tail": tail}],
                        }
                    ]
                }
            )
        return "A summary written by the model."

    chat = ScriptedChatModel(responses=[answer] * 1000)
    return LLM(chat, settings=LLMSettings(backend="openai", structured="off"), cache=cache), chat


def test_llm_roles_feed_the_layers_and_are_cached(tmp_path, story):
    store = MemoryStore(tmp_path / "store")
    llm, chat = _scripted_llm(store.cache)
    one_path = replace(SMALL, mom_paths=1)  # several paths: tests/unit/test_mom_paths.py
    ix = Indexer(store, HashingEmbedder(), llm=llm, config=one_path, progress=False)
    ix.index("cin", story)
    assert {u.text for u in store.view("episodic").units} == {"A summary written by the model."}
    chunk = store.view("veridical").units[0]
    assert chunk.meta["triples"] == [["Cinderella", "lives with", "her stepmother"]]
    outline = store.view("outline").units
    assert outline and all(u.text.startswith("The whole part") for u in outline)
    assert all(u.meta["atomic_spans"] for u in outline)
    calls = len(chat.calls)
    assert calls > 0
    ix.index("cin-copy", story)  # same text, new id: every LLM output comes from the cache
    assert len(chat.calls) == calls
    assert llm.usage.cache_hits >= calls


# -- the parts an index LLM writes (IndexConfig.llm_parts) -------------------------------------
def test_an_llm_writing_the_outline_only_is_asked_only_outline_prompts(
    tmp_path, story, monkeypatch
):
    import mindscape.indexing.indexer as indexer

    def no_evaluator():
        raise AssertionError("the evaluator is loaded only when the LLM writes the outline")

    monkeypatch.setattr(indexer, "default_evaluator", no_evaluator)
    offline, offline_ix = make(tmp_path / "offline")
    offline_ix.index("cin", story)
    store = MemoryStore(tmp_path / "store")
    llm, chat = _scripted_llm(store.cache)
    outline_only = replace(SMALL, mom_paths=1, llm_parts={"outline"})
    ix = Indexer(store, HashingEmbedder(), llm=llm, config=outline_only, progress=False)
    ix.index("cin", story)
    assert chat.prompts and all("outline items" in p for p in chat.prompts)
    assert set(llm.usage.by_role) == {"index_outline"}
    outline = store.view("outline").units
    assert outline and all(u.text.startswith("The whole part") for u in outline)
    # the summaries are the offline index's extractive ones, and no chunk has triples
    for layer in ("episodic", "semantic"):
        assert [u.text for u in store.view(layer).units] == [
            u.text for u in offline.view(layer).units
        ]
    assert not any("triples" in u.meta for u in store.view("veridical").units)

    # the summaries and triples without the outline: no outline call, no evaluator (N=3)
    store2 = MemoryStore(tmp_path / "store2")
    llm2, chat2 = _scripted_llm(store2.cache)
    no_outline = replace(SMALL, llm_parts=("episodic", "semantic", "triples"))
    ix2 = Indexer(store2, HashingEmbedder(), llm=llm2, config=no_outline, progress=False)
    assert ix2.evaluator is None
    ix2.index("cin", story)
    assert set(llm2.usage.by_role) == {"index_summary", "index_triples"}
    assert [u.text for u in store2.view("outline").units] == [
        u.text for u in offline.view("outline").units
    ]


def test_the_llm_parts_are_in_the_fingerprint_and_the_default_keeps_it():
    from mindscape.indexing.indexer import LLM_PARTS, parse_llm_parts

    base = IndexConfig()
    # pinned: a change re-indexes every store. The LLM one changed once on purpose, when the
    # outline items came to partition their section (index_config.COVERAGE)
    assert base.fingerprint("e", "gpt") == "1f50f308f6a3e16e"
    assert base.fingerprint("e", "offline") == "f88b1b9d40b5ea17"
    assert base.fingerprint("", "") == "adc10655b2244468"
    assert replace(base, llm_parts=list(reversed(LLM_PARTS))) == base
    outline = replace(base, llm_parts={"outline"})
    assert outline.llm_parts == ("outline",)
    assert outline.fingerprint("e", "gpt") != base.fingerprint("e", "gpt")
    assert outline.fingerprint("e", "offline") == base.fingerprint("e", "offline")
    assert outline.fingerprint("", "") == base.fingerprint("", "")  # the benchmarks' store tags
    both = replace(base, llm_parts=["triples", "outline"])
    assert both.llm_parts == ("outline", "triples")
    assert both.fingerprint("e", "gpt") not in (
        outline.fingerprint("e", "gpt"),
        base.fingerprint("e", "gpt"),
    )
    # without the outline, the MoM path settings shape nothing
    summaries = replace(base, llm_parts=("episodic", "semantic"))
    assert summaries.fingerprint("e", "gpt") == replace(summaries, mom_paths=1).fingerprint(
        "e", "gpt"
    )
    assert outline.fingerprint("e", "gpt") != replace(outline, mom_paths=1).fingerprint("e", "gpt")
    with pytest.raises(ValueError, match="episodic, semantic, outline, triples"):
        IndexConfig(llm_parts={"summary"})
    assert parse_llm_parts("triples, Outline") == ("outline", "triples")
    assert parse_llm_parts("summaries") == ("episodic", "semantic")
    assert parse_llm_parts("all") == LLM_PARTS
    with pytest.raises(ValueError, match="valid: episodic, semantic, outline, triples"):
        parse_llm_parts("outline,tree")


def test_index_rejects_an_unknown_llm_part_in_one_line(tmp_path, capsys):
    from mindscape.cli import main

    assert (
        main(["index", str(STORY), "--store", str(tmp_path / "s"), "--index-llm-parts", "x"]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--index-llm-parts" in err and "outline, triples" in err
    assert not (tmp_path / "s").exists()


# -- index --summaries: LLM session summaries added to a plain index ---------------------------
def test_summaries_are_added_resumably_while_the_plain_index_serves(tmp_path, story):
    from mindscape.indexing.config import SUMMARIES_INPUT_TOKENS
    from mindscape.indexing.indexer import IndexWriter
    from mindscape.tokens import default_counter

    plain = replace(SMALL, window=4)
    store, offline = make(tmp_path, config=plain)
    offline.index("cin", story)
    extractive = [u.text for u in store.view("episodic").units]
    assert len(extractive) >= 4
    enriched = replace(plain, llm_parts=("episodic",), summary_input_tokens=SUMMARIES_INPUT_TOKENS)
    emb = offline.emb_id

    class Stopped(BaseException):
        """Ctrl-C in the middle of the summaries."""

    def stop_after(n: int):
        seen: list[str] = []

        def answer(prompt: str) -> str:
            seen.append(prompt)
            if len(seen) > n:
                raise Stopped
            return f"Summary {len(seen)} by the model."

        return answer, seen

    def summarising(answer):
        llm = LLM(
            ScriptedChatModel(responses=[answer] * 100),
            settings=LLMSettings(backend="openai", structured="off"),
            cache=store.cache,
        )
        ix = Indexer(store, HashingEmbedder(), llm=llm, config=enriched, progress=False)
        ix.enriches = IndexWriter(store, plain, emb, "offline").fingerprint
        return ix

    answer, first = stop_after(2)
    with pytest.raises(Stopped):
        summarising(answer).index("cin", story)
    # stopped mid-way: the plain index is whole and still current
    assert [u.text for u in store.view("episodic").units] == extractive
    assert store.cache.doc("cin")["status"] == "done"
    # each summary read its session's central sentences, not the session
    counter = default_counter()
    assert all(counter.count(p) < SUMMARIES_INPUT_TOKENS + 300 for p in first)

    answer, second = stop_after(1000)
    summarising(answer).index("cin", story)
    assert len(second) == len(extractive) - 2  # the two finished summaries came from the cache
    texts = [u.text for u in store.view("episodic").units]
    assert len(texts) == len(extractive) and all(t.endswith("by the model.") for t in texts)
    # the plain config finds the enriched book current: re-indexing keeps its summaries
    assert offline.index("cin", story).skipped
    assert [u.text for u in store.view("episodic").units] == texts
    # the semantic layer stays the offline one
    assert all("by the model" not in u.text for u in store.view("semantic").units)


def test_summaries_need_a_model_and_exclude_index_llm(tmp_path, capsys):
    from mindscape.cli import main

    store = str(tmp_path / "s")
    assert main(["index", str(STORY), "--store", store, "--summaries", "--index-llm", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--summaries" in err
    assert main(["index", str(STORY), "--store", store, "--summaries", "--llm", "extractive",
                 "-q"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "needs a model" in err
    assert not (tmp_path / "s").exists()  # said before any work
