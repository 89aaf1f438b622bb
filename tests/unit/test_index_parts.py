"""Unit tests of the index's parts: sentences, chunker, windows, clustering, outline, cache, sources."""

from __future__ import annotations

import numpy as np
import pytest

from mindscape.errors import InputError
from mindscape.indexing.chunking import chunk_text, iter_chunks
from mindscape.indexing.cluster import ClusterParams, soft_clusters
from mindscape.indexing.mom.outline import detect_sections, resolve_anchor
from mindscape.indexing.sources import decode_text, load_sources
from mindscape.indexing.summarize import SentenceBank, extractive_summary
from mindscape.indexing.windows import window_size, windows
from mindscape.memory.cache import IndexCache, content_key
from mindscape.memory.sentence_split import split_sentences
from mindscape.tokens import default_counter

from ..conftest import STORY


# -- sentences ------------------------------------------------------------------------------
def test_sentences_keep_abbreviations_initials_and_quotes_together():
    text = 'Mr. Smith met Dr. Watson. "Is it true?" she asked. J. R. Tolkien wrote it!\n\nThe end'
    got = [text[s:e] for s, e in split_sentences(text)]
    assert got == [
        "Mr. Smith met Dr. Watson.",
        '"Is it true?" she asked.',
        "J. R. Tolkien wrote it!",
        "The end",
    ]


def test_sentences_split_at_blank_lines_and_trim_whitespace():
    text = "  CHAPTER I  \n\n  It was night. It rained.  "
    assert [text[s:e] for s, e in split_sentences(text)] == [
        "CHAPTER I",
        "It was night.",
        "It rained.",
    ]


# -- chunker --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def story() -> str:
    return STORY.read_text()


@pytest.mark.parametrize("size,overlap", [(128, 16), (64, 0), (200, 40)])
def test_chunks_are_exact_slices_within_size(story, size, overlap):
    counter = default_counter()
    chunks = chunk_text(story, counter, size, overlap)
    assert chunks and all(story[c.char_start : c.char_end] == c.text for c in chunks)
    assert all(c.tokens == counter.count(c.text) <= size for c in chunks)
    assert [c.index for c in chunks] == list(range(len(chunks)))


def test_chunks_cover_every_sentence_and_overlap_whole_sentences(story):
    counter = default_counter()
    chunks = chunk_text(story, counter, 128, 16)
    covered = {s for c in chunks for s in c.sentences}
    assert covered == set(split_sentences(story))
    for a, b in zip(chunks, chunks[1:], strict=False):
        shared = set(a.sentences) & set(b.sentences)
        assert b.char_start <= a.char_end or not shared
        assert sum(counter.count(story[s:e]) for s, e in shared) <= 16
        assert b.sentences[0] in a.sentences or b.sentences[0][0] >= a.char_end


def test_a_sentence_longer_than_the_chunk_is_cut():
    text = " ".join(["word"] * 500) + "."
    chunks = chunk_text(text, default_counter(), 50, 0)
    assert len(chunks) >= 10
    assert all(c.tokens <= 50 for c in chunks)
    assert "".join(c.text.replace(" ", "") for c in chunks) == text.replace(" ", "")


def _shape(chunks):
    return [(c.index, c.char_start, c.char_end, c.tokens, c.sentences) for c in chunks]


@pytest.mark.parametrize("block", [700, 1500, 4096])
def test_streamed_chunks_do_not_depend_on_the_block_size(story, block):
    """Blocks cut sentences, words and blank lines anywhere; the chunks stay the whole-text ones."""
    text = story + "\n\n" + " ".join(["word"] * 400) + ".\n\n\n  Mr. Quill left. The end!"
    counter = default_counter()
    whole = chunk_text(text, counter, 64, 12)  # one block: the text's own sentences
    read = []
    streamed = list(iter_chunks(text, counter, 64, 12, block_chars=block, on_progress=read.append))
    assert _shape(streamed) == _shape(whole)
    assert sum(read) == len(text)  # progress accounts for every character once


def test_a_text_without_sentence_ends_is_cut_within_bounded_blocks():
    """No sentence end for 4 blocks: the text is cut there (memory stays bounded), and the
    chunks still cover it exactly, each within the size."""
    text = " ".join(f"w{i}" for i in range(3000))
    counter = default_counter()
    read: list[int] = []
    chunks = list(iter_chunks(text, counter, 50, 0, block_chars=256, on_progress=read.append))
    assert max(read) <= 4 * 256 and sum(read) == len(text)
    assert all(c.tokens <= 50 for c in chunks)
    assert "".join(c.text for c in chunks).replace(" ", "") == text.replace(" ", "")
    short = " ".join(f"w{i}" for i in range(100))  # within 4 blocks: identical to one block
    assert _shape(iter_chunks(short, counter, 50, 0, block_chars=256)) == _shape(
        chunk_text(short, counter, 50, 0)
    )


def test_long_texts_are_counted_in_blocks_to_the_same_total(story):
    counter = default_counter()
    assert counter.count_long(story * 3, block=1000) == counter.count(story * 3)


def test_chunker_rejects_bad_parameters():
    with pytest.raises(ValueError):
        chunk_text("A b.", default_counter(), 0, 0)
    with pytest.raises(ValueError):
        chunk_text("A b.", default_counter(), 10, 10)


# -- windows ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "n,size", [(1, 2), (5, 2), (6, 3), (20, 3), (50, 5), (100, 8), (200, 10), (201, 20), (5000, 20)]
)
def test_window_rule(n, size):
    assert window_size(n) == size


def test_windows_cover_each_chunk_once_and_respect_w():
    for n in (1, 7, 33, 250):
        ws = windows(n, 20)
        assert [i for w in ws for i in w] == list(range(n))
        assert max(len(w) for w in ws) <= 20
    assert window_size(1000, 12) == 12


# -- clustering -------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 40])
def test_soft_clusters_never_crash_and_cover_every_row(n):
    rng = np.random.default_rng(n)
    vecs = rng.normal(size=(n, 16)).astype(np.float32)
    clusters = soft_clusters(vecs, ClusterParams())
    assert {i for c in clusters for i in c} == set(range(n))
    assert soft_clusters(vecs, ClusterParams()) == clusters  # deterministic


def test_soft_clusters_find_separated_groups_and_cap_size():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(4, 32)) * 10
    vecs = np.vstack([c + rng.normal(size=(30, 32)) for c in centers]).astype(np.float32)
    clusters = soft_clusters(vecs, ClusterParams(max_cluster_size=24))
    assert all(len(c) <= 2 * 24 for c in clusters)
    # no cluster mixes two well-separated groups
    assert all(len({i // 30 for i in c}) == 1 for c in clusters)


# -- extractive summary -----------------------------------------------------------------------------
def test_extractive_summary_prefers_central_sentences_in_source_order():
    vecs = np.array([[1, 0, 0], [0.9, 0.1, 0], [0.95, 0.05, 0], [0, 0, 1]], dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    bank = SentenceBank(
        ["a " * 8, "b " * 8, "c " * 8, "outlier " * 8], np.array([8, 8, 8, 8]), vecs
    )
    picked = extractive_summary(bank, [0, 1, 2, 3], max_tokens=16)
    assert picked == sorted(picked) and 3 not in picked and len(picked) == 2
    assert extractive_summary(bank, [3, 2, 1, 0], max_tokens=16) == picked
    assert extractive_summary(bank, [], max_tokens=16) == []


# -- outline ---------------------------------------------------------------------------------------
def test_detect_sections_uses_headings_and_skips_contents_and_prose():
    body = "Some prose line that goes on.\nI have no idea what this is about.\n" * 20
    text = (
        "CONTENTS\n\nCHAPTER I\n\nCHAPTER II\n\n"
        f"CHAPTER I\n\n{body}\n\nCHAPTER II. The Storm\n\n{body}\n\nIII.\n\n{body}"
    )
    secs = detect_sections(text)
    assert [s.title for s in secs] == ["CHAPTER I", "CHAPTER II. The Storm", "III."]
    assert secs[0].start == 0 and secs[-1].end == len(text)
    assert all(a.end == b.start for a, b in zip(secs, secs[1:], strict=False))
    assert detect_sections(body) == []


def test_resolve_anchor_exact_whitespace_fuzzy_and_missing():
    src = "The cat sat on the mat.\nThen the dog   barked loudly\nat the moon. The end."
    s, e = resolve_anchor(src, "Then the dog barked", "at the moon.")
    assert src[s:e] == "Then the dog   barked loudly\nat the moon."
    fs, fe = resolve_anchor(src, "Then teh dog barkd", "at the mon.")
    assert fs == s and abs(fe - e) <= 2
    assert resolve_anchor(src, "A sentence that is not there at all", "nor this") is None
    assert resolve_anchor(src, "", "moon") is None


# -- cache ------------------------------------------------------------------------------------------
def test_content_key_separates_parts_and_is_stable():
    assert content_key("ab", "c") != content_key("a", "bc")
    assert content_key("x") == content_key("x") and len(content_key("x")) == 64


def test_cache_round_trips_arrays_text_and_manifest(tmp_path):
    cache = IndexCache(tmp_path / "c.sqlite3")
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    cache.put_arrays("emb", {"k": arr})
    assert np.array_equal(cache.get_arrays("emb", ["k", "missing"], 3)["k"], arr)
    cache.put_text("p", "answer")
    assert cache.get_text("p") == "answer" and cache.get_text("q") is None
    cache.set_doc("d1", "h", "f", "indexing")
    assert cache.docs() == []
    cache.set_doc("d1", "h", "f", "done", tokens=5)
    cache.close()
    again = IndexCache(tmp_path / "c.sqlite3")
    assert again.doc("d1")["tokens"] == 5 and [d["doc_id"] for d in again.docs()] == ["d1"]


# -- sources -----------------------------------------------------------------------------------------
def test_sources_reject_bad_files_with_one_line_messages(tmp_path):
    (tmp_path / "empty.txt").write_text("  \n")
    (tmp_path / "bin.txt").write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    for name, msg in [("empty.txt", "empty"), ("bin.txt", "binary"), ("nope.txt", "no such file")]:
        with pytest.raises(InputError, match=msg) as exc:
            load_sources([tmp_path / name])
        assert "\n" not in str(exc.value)


def test_sources_decode_cp1252_with_a_warning():
    text, warnings = decode_text("Caf\xe9 na\xefve \u2019".encode("cp1252"), "f.txt")
    assert text == "Café naïve \u2019" and warnings and "cp1252" in warnings[0]
    assert decode_text("Café".encode(), "f.txt") == ("Café", [])


def test_sources_jsonl_filters_and_checks(tmp_path):
    p = tmp_path / "documents.jsonl"
    p.write_text(
        '{"doc_id": "a", "text": "A story.", "title": "A"}\n{"doc_id": "b", "text": "B."}\n'
    )
    assert [d.doc_id for d in load_sources([p])] == ["a", "b"]
    assert [d.doc_id for d in load_sources([p], ["b"])] == ["b"]
    with pytest.raises(InputError, match="not found"):
        load_sources([p], ["zzz"])
    with pytest.raises(InputError, match="share the doc id"):
        load_sources([p, p])


def test_chunks_in_a_range_are_found_by_binary_search(story):
    """`DocText.chunks_in` (two bisections) equals the plain scan on overlapping chunks."""
    import random

    from mindscape.indexing.document import DocText

    chunks = chunk_text(story, default_counter(), 64, 12)
    doc = DocText("tale", story, chunks, [], [], SentenceBank([], np.zeros(0), np.zeros((0, 1))))
    rng = random.Random(7)
    for _ in range(500):
        a = rng.randrange(len(story))
        b = rng.randrange(a, len(story) + 5)
        assert doc.chunks_in(a, b) == [
            c.index for c in chunks if c.char_start < b and c.char_end > a
        ]
