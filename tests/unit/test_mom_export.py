"""`mindscape mom export`: chat-format CoM records (document, reasoning path, chosen memory),
resumable and cached, from a store indexed with a scripted LLM."""

from __future__ import annotations

import json

import pytest

from mindscape.cli import main
from mindscape.indexing.indexer import IndexConfig, Indexer
from mindscape.indexing.mom.export import export_com
from mindscape.indexing.mom.outline import resolve_anchor
from mindscape.llm import LLM, LLMSettings
from mindscape.memory.store import MemoryStore
from mindscape.prompts.mom import MEMREADER_SYSTEM
from mindscape.tokens import default_counter
from tests.conftest import STORY
from tests.fakes import HashingEmbedder, ScriptedChatModel

CONFIG = IndexConfig(chunk_size=64, chunk_overlap=8, window=20, triples=False, mom_paths=1)
PATH = "It is a fairy tale, so I follow its scenes: the household, the ball, the slipper."


def _index_llm(cache) -> LLM:
    """Outline answers of two items per section, each with one anchored chunk."""

    def answer(prompt: str) -> str:
        if "outline items" not in prompt:
            return "A summary written by the model."
        words = prompt.split("<section>")[1].split("</section>")[0].split()
        half = len(words) // 2
        items = [
            {
                "title": title,
                "core": f"The {title.lower()} of the section.",
                "chunks": [
                    {"head": " ".join(words[a : a + 7]), "tail": " ".join(words[b - 6 : b])}
                ],
            }
            for title, a, b in (("Opening", 0, half), ("Ending", half, len(words)))
        ]
        return json.dumps({"items": items})

    chat = ScriptedChatModel(responses=[answer] * 1000)
    return LLM(chat, settings=LLMSettings(backend="openai", structured="off"), cache=cache)


def _export_llm(cache, *answers: str) -> tuple[LLM, ScriptedChatModel]:
    chat = ScriptedChatModel(responses=list(answers))
    return LLM(chat, settings=LLMSettings(backend="openai", structured="off"), cache=cache), chat


@pytest.fixture()
def store(tmp_path):
    store = MemoryStore(tmp_path / "store")
    llm = _index_llm(store.cache)
    Indexer(store, HashingEmbedder(), llm=llm, config=CONFIG, progress=False).index(
        "cin", STORY.read_text()
    )
    Indexer(store, HashingEmbedder(), config=CONFIG, progress=False).index(
        "plain", "An offline tale. It has no LLM memory. It ends well."
    )
    return store


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _split(record):
    path, memory = record["messages"][2]["content"].rsplit("\n\n", 1)
    return path, json.loads(memory)


def test_a_record_holds_the_document_the_path_and_the_memory(store, tmp_path):
    out = tmp_path / "com.jsonl"
    llm, chat = _export_llm(store.cache, PATH)
    report = export_com(store, llm, out, default_counter())
    assert report.written == ["cin"] and report.no_memory == ["plain"] and not report.truncated
    [record] = _records(out)
    assert record["doc_id"] == "cin"
    assert [m["role"] for m in record["messages"]] == ["system", "user", "assistant"]
    assert record["messages"][0]["content"] == MEMREADER_SYSTEM
    doc = record["messages"][1]["content"]
    assert doc.split() == STORY.read_text().split()  # the document, rebuilt from its chunks
    path, memory = _split(record)
    assert path == PATH
    outline = sorted(store.view("outline", {"cin"}).units, key=lambda u: int(u.id.split(":o")[1]))
    assert len(memory["items"]) == len(outline) and memory["items"][0]["title"] == "Opening"
    spans = [tuple(s) for u in outline for s in u.meta["atomic_spans"]]
    anchors = [c for item in memory["items"] for c in item["chunks"]]
    for (s, e), a in zip(spans, anchors, strict=True):  # each anchor quotes its span
        found = resolve_anchor(doc, a["head"], a["tail"])
        assert found is not None and doc[found[0] : found[1]] == doc[s:e].strip()
    # the guide model was shown the document and the memory
    assert "<memory>" in chat.prompts[0] and "The opening of the section." in chat.prompts[0]


def test_a_rerun_resumes_and_a_new_file_comes_from_the_cache(store, tmp_path):
    out = tmp_path / "com.jsonl"
    llm, chat = _export_llm(store.cache, PATH)
    export_com(store, llm, out, default_counter())
    with out.open("a") as f:
        f.write('{"doc_id": "cut-short", "mess')  # a killed run's last line
    report = export_com(store, llm, out, default_counter())  # nothing left to ask
    assert report.written == [] and report.already == ["cin"] and len(chat.calls) == 1
    assert [r["doc_id"] for r in _records(out)] == ["cin"]  # the torn line is gone
    fresh, chat2 = _export_llm(store.cache)  # no scripted answer: must come from the cache
    export_com(store, fresh, tmp_path / "again.jsonl", default_counter())
    assert chat2.calls == [] and _records(tmp_path / "again.jsonl") == _records(out)


def test_a_long_document_is_cut_with_its_memory(store, tmp_path):
    out = tmp_path / "short.jsonl"
    llm, _ = _export_llm(store.cache, PATH)
    report = export_com(store, llm, out, default_counter(), max_doc_tokens=150)
    assert report.truncated == ["cin"]
    [record] = _records(out)
    doc = record["messages"][1]["content"]
    assert default_counter().count(doc) <= 150 and STORY.read_text().startswith(doc[:100])
    _, memory = _split(record)
    anchors = [c for item in memory["items"] for c in item["chunks"]]
    assert anchors and all(resolve_anchor(doc, a["head"], a["tail"]) for a in anchors)
    full = sum(len(u.meta["atomic_spans"]) for u in store.view("outline", {"cin"}).units)
    assert len(anchors) < full  # the chunks past the cut are left out


def test_the_command_writes_and_reports(store, tmp_path, monkeypatch, capsys):
    import mindscape.commands.mom as mom_cmd

    llm, _ = _export_llm(store.cache, PATH)
    monkeypatch.setattr(mom_cmd, "export_llm", lambda args, cache: llm)
    out = tmp_path / "cli.jsonl"
    argv = ["mom", "export", "--store", str(store.path), "--out", str(out)]
    assert main([*argv, "--json", "--quiet"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["written"] == ["cin"] and got["no_memory"] == ["plain"]
    assert _split(_records(out)[0])[0] == PATH
    monkeypatch.undo()
    assert main([*argv, "--llm", "extractive"]) == 2
    assert "needs an LLM" in capsys.readouterr().err
