"""Damaged stores and dead endpoints: one line saying what is wrong and what to run, exit 2,
never an answer from a partial store; `--debug` shows the traceback the line hides."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from mindscape.cli import main
from mindscape.errors import StoreError
from mindscape.models.server import free_port

pytestmark = pytest.mark.integration

Q = "What did the father bring back for Cinderella?"


def ask(store: Path, *extra: str) -> list[str]:
    return ["ask", Q, "--store", str(store), "--preset", "naive", *extra]


def one_line_error(capsys: pytest.CaptureFixture[str], rc: int, *needles: str) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert captured.out == ""  # no answer
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def copy(qa_store: Path, tmp_path: Path) -> Path:
    """A private copy of the story's store, to damage."""
    dst = tmp_path / "store"
    shutil.copytree(qa_store, dst)
    return dst


def test_a_damaged_cache_is_named(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for extra in copy.glob("cache.sqlite3-*"):
        extra.unlink()
    (copy / "cache.sqlite3").write_bytes(b"this is not a database" * 100)
    rc = main(ask(copy, "--llm", "extractive"))
    one_line_error(capsys, rc, "cache", "damaged", "mindscape index")


def test_missing_vectors_are_named_and_reindexing_rebuilds_them(
    copy: Path, qa_embedder: object, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.integration.conftest import QA_DOC, STORY

    shutil.rmtree(copy / "chroma")
    rc = main(ask(copy, "--llm", "extractive"))
    err = one_line_error(capsys, rc, "chroma/", "missing", "mindscape index")
    assert not (copy / "chroma").exists()  # asking does not create an empty index
    # what the line says to run repairs the store, from the cache: nothing is embedded again
    assert "rebuilds them from the cache" in err
    assert main(["index", str(STORY), "--store", str(copy), "--quiet", "--json"]) == 0  # the CLI
    rep = json.loads(capsys.readouterr().out)["reports"][0]
    assert rep["doc_id"] == QA_DOC and not rep["skipped"]
    assert rep["embedded"] == 0 and rep["embed_cached"] > 0
    rc = main(ask(copy, "--llm", "extractive", "--json"))
    assert rc == 0 and '"answer"' in capsys.readouterr().out


def test_lost_units_are_named(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mindscape.memory.store import MemoryStore

    store = MemoryStore(copy)
    col = store.collection("episodic")
    col.delete(ids=col.get(include=[])["ids"][:1])
    store.close()
    rc = main(ask(copy, "--llm", "extractive"))
    one_line_error(capsys, rc, "layer episodic holds", "damaged")


def test_a_half_indexed_document_is_named(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = sqlite3.connect(copy / "cache.sqlite3")
    db.execute("UPDATE docs SET status='indexing'")
    db.commit()
    db.close()
    rc = main(ask(copy, "--llm", "extractive"))
    one_line_error(capsys, rc, "half-indexed", "mindscape index")


def test_inspect_reports_damage_too(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.rmtree(copy / "chroma")
    rc = main(["inspect", "--store", str(copy)])
    one_line_error(capsys, rc, "missing")


def test_an_unreachable_endpoint_is_one_line_naming_it(
    qa_store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINDSCAPE_LLM_MAX_RETRIES", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-NEVER-PRINTED")
    url = f"http://127.0.0.1:{free_port()}/v1"  # free now: nothing listens there
    rc = main(ask(qa_store, "--llm", "openai", "--base-url", url))
    err = one_line_error(capsys, rc, url, "2 times", "--llm extractive")
    assert "NEVER-PRINTED" not in err
    # --debug adds the traceback behind the line
    rc = main(["--debug", *ask(qa_store, "--llm", "openai", "--base-url", url)])
    captured = capsys.readouterr()
    assert rc == 2 and "Traceback" in captured.err and url in captured.err.splitlines()[-1]
    assert "NEVER-PRINTED" not in captured.err


def test_the_api_key_never_leaves_the_request(
    qa_store: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The key reaches the endpoint's Authorization header and nowhere else: not the answer,
    the --json output, the logs or an error line."""
    import logging

    from tests.fake_openai import FakeOpenAIServer
    from tests.fakes import QAScript

    secret = "sk-" + "S3CRET" * 4
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("MINDSCAPE_LLM_MAX_RETRIES", "0")
    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer(QAScript(answer="two white pigeons").request) as server:
        rc = main([*ask(qa_store, "--llm", "openai", "--base-url", server.base_url), "--json"])
        ok = capsys.readouterr()
        assert rc == 0 and "pigeons" in ok.out
        assert server.authorizations and all(secret in a for a in server.authorizations)
    # the server is gone now: the error line names the endpoint, not the key
    rc = main(ask(qa_store, "--llm", "openai", "--base-url", server.base_url))
    failed = capsys.readouterr()
    assert rc == 2 and server.base_url in failed.err
    for text in (ok.out, ok.err, failed.out, failed.err, caplog.text):
        assert secret not in text and "S3CRET" not in text


def test_a_damaged_learned_ranker_is_one_line_naming_make_ranker(
    qa_store: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The answer is not read in the fused order behind a log line: `ask` stops with the error
    where the answer would be shown. A working ranker answers the same question."""
    from mindscape.reasoners.rankers import MODEL_FILE, RANKER_DIR
    from tests.fake_openai import FakeOpenAIServer
    from tests.fakes import QAScript

    damaged = tmp_path / "ranker"
    shutil.copytree(RANKER_DIR, damaged)
    (damaged / MODEL_FILE).write_bytes((damaged / MODEL_FILE).read_bytes()[:-1] + b"!")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("MINDSCAPE_LLM_MAX_RETRIES", "0")
    with FakeOpenAIServer(QAScript(answer="two white pigeons").request) as server:
        argv = ask(qa_store, "--llm", "openai", "--base-url", server.base_url)
        rc = main([*argv, "--evidence-ranker", "learned"])
        assert rc == 0 and "ordered by the learned ranker" in capsys.readouterr().out
        monkeypatch.setattr("mindscape.reasoners.rankers.RANKER_DIR", damaged)
        rc = main([*argv, "--evidence-ranker", "learned"])
        one_line_error(capsys, rc, "the learned evidence ranker", "sha256", "make ranker")


# A child that reads a text file as `mindscape index` does and streams its chunks, counting
# them without keeping them; it prints its resident set after reading and its peak while
# chunking (Linux: the peak is reset through /proc/self/clear_refs).
_CHUNK_CHILD = r"""
import json, sys
from pathlib import Path
from mindscape.indexing.chunking import iter_chunks
from mindscape.indexing.sources import read_text_file
from mindscape.tokens import default_counter

def peak_mb():  # VmHWM: the peak resident set since the last reset
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024

doc = read_text_file(Path(sys.argv[1]))
counter = default_counter()
counter.count("warm up the encoder")
Path("/proc/self/clear_refs").write_text("5")  # reset the peak: reading is not chunking
after_read, seen, chunks = peak_mb(), [], 0
for c in iter_chunks(doc.text, counter, 128, 16, on_progress=seen.append):
    chunks += 1
print(json.dumps({"after_read": after_read, "after_chunk": peak_mb(), "chunks": chunks,
                  "progress": sum(seen), "chars": len(doc.text), "updates": len(seen)}))
"""


def test_a_50mb_book_is_chunked_in_bounded_memory(tmp_path: Path) -> None:
    """The 50 MB row: the chunker streams the book a block at a time, so its working memory
    stays far below the book's size, and reports its progress block by block. (The whole
    index of a 50 MB book, peak RSS included, is measured by benchmarks/speed/index_memory.py.)"""
    import json
    import subprocess
    import sys

    from tests.integration.conftest import STORY

    story = STORY.read_text()
    path = tmp_path / "big.txt"
    with path.open("w") as f:
        for i in range(50_000_000 // len(story) + 1):
            f.write(story.replace("Cinderella", f"Cinderella {i}") + "\n\n")
    assert path.stat().st_size >= 50_000_000
    out = subprocess.run(
        [sys.executable, "-c", _CHUNK_CHILD, str(path)], capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout)
    assert got["progress"] == got["chars"] and got["updates"] >= 40
    assert got["chunks"] > 50_000_000 / 2_000  # chunks of ~128 tokens, not one per block
    grew = got["after_chunk"] - got["after_read"]
    assert grew < 64, f"chunking a 50 MB book took {grew} MB more than reading it"


def test_a_store_answers_only_with_the_embedder_it_was_indexed_with(
    copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another embedder's query vectors would be compared with the store's: refused, at
    ask time and when adding a document, with what to pass instead."""
    from mindscape.indexing.indexer import Indexer
    from mindscape.memory.store import MemoryStore
    from tests.fakes import HashingEmbedder
    from tests.integration.conftest import QA_DOC

    rc = main(ask(copy, "--llm", "extractive", "--embedder", str(tmp_path)))
    one_line_error(capsys, rc, "indexed with the embedder", "--embedder")
    store = MemoryStore(copy)
    before = store.count("veridical", QA_DOC)
    with pytest.raises(StoreError, match="indexed with the embedder"):
        Indexer(store, HashingEmbedder(), progress=False).index("other", "A new tale. It ends.")
    store.cache.set_doc("other", "x", "y", "done", layers={})  # a second book, so a re-index
    with pytest.raises(StoreError, match="indexed with the embedder"):  # of the first is refused
        Indexer(store, HashingEmbedder(), progress=False).index(QA_DOC, "Changed text. The end.")
    assert store.count("veridical", QA_DOC) == before  # refused before anything was deleted
    store.close()
