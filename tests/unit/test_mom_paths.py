"""MoM's multi-path memories: N candidates per section, scored by a fake evaluator with
hand-made probabilities, one chosen by RRF; one path samples once and scores nothing."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from mindscape.cli import main
from mindscape.indexing.indexer import IndexConfig, Indexer
from mindscape.indexing.mom.outline import Section
from mindscape.indexing.mom.paths import (
    BREAK_CHARS,
    SAMPLING,
    CachedEvaluator,
    choose,
    clarity,
    completeness,
)
from mindscape.indexing.mom.select import UNREAD_RULE
from mindscape.indexing.outline import item_regions
from mindscape.llm import LLM, LLMSettings
from mindscape.memory.store import MemoryStore
from mindscape.tokens import default_counter
from tests.conftest import STORY
from tests.fakes import DictCache, HashingEmbedder, ScriptedChatModel

SMALL = IndexConfig(chunk_size=64, chunk_overlap=8, window=20, triples=False)


class FakeEvaluator:
    """Hand-made probabilities: P(break) by a word both chunks shown carry, perplexity by a
    word of the core content; every question is recorded."""

    def __init__(self, breaks: dict[str, float | None], ppl: dict[str, float]) -> None:
        self.breaks, self.ppl = breaks, ppl
        self.questions: list[str] = []
        self.reads: list[tuple[str, str]] = []

    def yes_probability(self, question: str) -> float | None:
        self.questions.append(question)
        return next((p for word, p in self.breaks.items() if word in question), 0.5)

    def perplexity(self, context: str, target: str) -> float:
        self.reads.append((context, target))
        return next(p for word, p in self.ppl.items() if word in context)


class NeverYesOrNo(FakeEvaluator):
    """An evaluator whose first answer token is never yes or no."""

    def yes_probability(self, question: str) -> float | None:
        self.questions.append(question)
        return None


class Unusable:
    """An evaluator that must not be asked."""

    def yes_probability(self, question: str) -> float:
        raise AssertionError("scored with one path")

    def perplexity(self, context: str, target: str) -> float:
        raise AssertionError("scored with one path")


# -- the scores of one candidate, and the choice --------------------------------------------
def test_clarity_asks_about_each_adjacent_pair_with_the_chunks_ends():
    ev = FakeEvaluator({"storm": 0.9, "supper": 0.1}, {})
    long_first = "x" * 2000 + " the storm broke."
    chunks = [(long_first, "c"), ("Morning came.", "c"), ("At supper she sang.", "c")]
    assert clarity(ev, chunks) == pytest.approx((0.9 + 0.1) / 2)
    first = ev.questions[0]
    assert "the storm broke." in first and "Morning came." in first
    assert "x" * (BREAK_CHARS - 20) in first and "x" * BREAK_CHARS not in first  # its end only
    assert clarity(ev, chunks[:1]) == 0.0 and len(ev.questions) == 2  # one chunk: no question


def test_completeness_reads_each_chunk_after_its_core():
    counter = default_counter()
    ev = FakeEvaluator({}, {"ball": 2.0, "slipper": 4.0})
    chunks = [("She danced all night.", "Cinderella goes to the ball"), ("It fit.", "The slipper")]
    got = completeness(ev, chunks, counter)
    n1, n2 = counter.count(chunks[0][1]), counter.count(chunks[1][1])
    assert got == pytest.approx((1 / (2 * math.log(n1)) + 1 / (4 * math.log(n2))) / 2)
    assert [t for _, t in ev.reads] == ["She danced all night.", "It fit."]
    assert "Cinderella goes to the ball" in ev.reads[0][0]


def test_choose_fuses_the_two_rankings():
    # candidate 0 cuts where nothing changes (unclear) but its cores predict well; 1 cuts
    # cleanly with poor cores; 2 cuts cleanly with the best cores: 2 wins on both
    ev = FakeEvaluator({"sails": 0.9, "eats": 0.2}, {"zero": 4.0, "one": 8.0, "two": 2.0})
    candidates = [
        [("Ann wakes.", "core zero"), ("Ann eats.", "core zero")],
        [("Ann wakes. Ann eats.", "core one"), ("Bob sails.", "core one")],
        [("Ann wakes. Ann eats.", "core two"), ("Bob sails.", "core two")],
    ]
    choice = choose(candidates, ev, default_counter())
    assert choice.clarity == pytest.approx([0.2, 0.9, 0.9])
    assert choice.completeness[2] > choice.completeness[0] > choice.completeness[1]
    assert choice.chosen == 2
    assert choice.as_meta()["paths"] == 3 and choice.as_meta()["chosen"] == 2
    # 0 is first on completeness and second on clarity, 1 the reverse: a tie, which goes
    # to the earlier (greedy) path
    assert choose(candidates[:2], ev, default_counter(), k=1).chosen == 0


def test_a_boundary_without_yes_or_no_is_counted_logged_and_left_out(caplog):
    # candidate 0: one boundary read (0.9), one not; candidate 1: its only boundary not read
    ev = FakeEvaluator({"storm": 0.9, "supper": None, "sails": None}, {"core": 2.0})
    candidates = [
        [("The storm broke.", "core"), ("At supper she sang.", "core"), ("End.", "core")],
        [("Ann wakes.", "core"), ("Bob sails.", "core")],
    ]
    with caplog.at_level("WARNING", logger="mindscape.indexing.mom.paths"):
        choice = choose(candidates, ev, default_counter())
    assert choice.clarity == pytest.approx([0.9, 0.0])  # not (0.9 + 0.5) / 2 and 0.5
    assert choice.unread == [1, 1]
    assert choice.as_meta()["unread_breaks"] == [1, 1]
    assert "2 of 3 boundaries got neither yes nor no" in caplog.text
    assert UNREAD_RULE in caplog.text
    # every boundary read: no count in the record, nothing logged
    caplog.clear()
    read = choose(candidates, FakeEvaluator({}, {"core": 2.0}), default_counter())
    assert read.unread == [0, 0] and "unread_breaks" not in read.as_meta()
    assert caplog.text == ""


def test_cached_scores_are_read_back_without_the_evaluator():
    cache = DictCache()
    ev = FakeEvaluator({"x": 0.7}, {"c": 3.0})
    cached = CachedEvaluator(ev, cache)
    assert cached.yes_probability("x?") == 0.7 and cached.perplexity("c", "t") == 3.0
    assert cached.yes_probability("x?") == 0.7 and cached.perplexity("c", "t") == 3.0
    assert len(ev.questions) == 1 and len(ev.reads) == 1 and len(cache.data) == 2
    other = CachedEvaluator(FakeEvaluator({"x": 0.1}, {}), cache)  # another model: own keys
    other.model_id = "another-model"
    assert other.yes_probability("x?") == 0.1
    # an unread answer is cached as unread, not as a number
    unread_ev = NeverYesOrNo({}, {})
    unread_ev.model_id = "third-model"  # type: ignore[attr-defined]
    cached = CachedEvaluator(unread_ev, cache)
    assert cached.yes_probability("y?") is None and cached.yes_probability("y?") is None
    assert len(unread_ev.questions) == 1


# -- through the indexer -------------------------------------------------------------------
def _outline_llm(cache, paths: int, *, bad_path: int | None = None):
    """An LLM whose outline answers depend on the path: path 0 one item for the whole
    section, paths 1 and 2 two items cut at a third and at the half, each core naming its
    path (`bad_path` answers no JSON at all). Paths are told apart by call order."""
    outline_calls = []

    def answer(prompt: str) -> str:
        if "outline items" not in prompt:
            return "A summary written by the model."  # summaries; and a re-ask's reminder
        path = len(outline_calls) % paths
        outline_calls.append(path)
        if path == bad_path:
            return "I cannot do that."
        words = prompt.split("<section>")[1].split("</section>")[0].split()
        cuts = [0, len(words)] if path == 0 else [0, len(words) // (4 - path), len(words)]
        items = [
            {
                "title": f"Part {j}",
                "core": f"What happens, by path {path}.",
                "chunks": [
                    {"head": " ".join(words[a : a + 7]), "tail": " ".join(words[b - 6 : b])}
                ],
            }
            for j, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False))
        ]
        return json.dumps({"items": items})

    chat = ScriptedChatModel(responses=[answer] * 1000)
    llm = LLM(chat, settings=LLMSettings(backend="openai", structured="off"), cache=cache)
    return llm, chat, outline_calls


def _index(tmp_path, config, evaluator, **kw):
    store = MemoryStore(tmp_path / "store")
    llm, chat, outline_calls = _outline_llm(store.cache, config.mom_paths, **kw)
    ix = Indexer(
        store, HashingEmbedder(), llm=llm, config=config, evaluator=evaluator, progress=False
    )
    ix.index("cin", STORY.read_text())
    return store, ix, chat, outline_calls


def test_three_paths_are_sampled_scored_and_the_best_is_kept(tmp_path, capsys):
    ev = FakeEvaluator({}, {"path 0": 4.0, "path 1": 8.0, "path 2": 2.0})
    store, ix, chat, outline_calls = _index(tmp_path, SMALL, ev)
    outline = store.view("outline").units
    sections = len({u.order for u in outline})
    assert outline_calls == [0, 1, 2] * sections
    # the sampled paths decode differently (and are cached apart): temperature, top_p, seed
    sampled = ix.llm.sampled(**SAMPLING, seed=2)
    assert (sampled.chat.temperature, sampled.chat.top_p, sampled.chat.seed) == (0.7, 0.9, 2)
    # path 0 has one chunk (clarity 0), paths 1 and 2 one break each (0.5); 2 completes best
    assert all(u.meta["core"] == "What happens, by path 2." for u in outline)
    meta = outline[0].meta["mom"]
    assert meta["paths"] == 3 and meta["chosen"] == 2
    assert meta["clarity"] == [0.0, 0.5, 0.5]
    assert meta["completeness"][2] > meta["completeness"][0] > meta["completeness"][1]
    assert all(len(u.meta["atomic_spans"]) == 1 for u in outline)
    # the choice is in the manifest, so `mindscape inspect` shows it
    assert store.summary()["docs"][0]["mom_chosen"] == [2] * sections
    assert main(["inspect", "--store", str(store.path)]) == 0
    assert "MoM path chosen per outline section: 2 2" in capsys.readouterr().out
    # a re-index of the same text samples nothing and scores nothing: all cached
    asked, calls = len(ev.questions) + len(ev.reads), len(chat.calls)
    assert asked > 0
    ix.index("cin-copy", STORY.read_text())
    assert len(ev.questions) + len(ev.reads) == asked and len(chat.calls) == calls
    copy = store.view("outline", {"cin-copy"}).units
    assert [u.meta["mom"] for u in copy] == [u.meta["mom"] for u in outline]


def test_unread_boundaries_reach_the_manifest_and_inspect(tmp_path, capsys):
    ev = NeverYesOrNo({}, {"path 0": 4.0, "path 1": 8.0, "path 2": 2.0})
    store, *_ = _index(tmp_path, SMALL, ev)
    outline = store.view("outline").units
    sections = len({u.order for u in outline})
    meta = outline[0].meta["mom"]
    assert meta["clarity"] == [0.0, 0.0, 0.0]  # paths 1 and 2: their one boundary unread
    assert meta["unread_breaks"] == [0, 1, 1]
    assert store.summary()["docs"][0]["mom_unread_breaks"] == 2 * sections
    assert main(["inspect", "--store", str(store.path)]) == 0
    out = capsys.readouterr().out
    assert f"MoM boundaries the evaluator answered neither yes nor no: {2 * sections}" in out
    assert UNREAD_RULE in out


def test_one_path_samples_once_and_scores_nothing(tmp_path):
    store, ix, chat, outline_calls = _index(tmp_path, replace(SMALL, mom_paths=1), Unusable())
    outline = store.view("outline").units
    assert ix.evaluator is None
    assert outline_calls == [0] * len({u.order for u in outline})  # one call per section
    assert all("mom" not in u.meta for u in outline)
    assert all(u.meta["core"] == "What happens, by path 0." for u in outline)
    assert "mom_chosen" not in store.summary()["docs"][0]


def test_a_sampled_path_without_usable_json_is_an_empty_candidate(tmp_path):
    ev = FakeEvaluator({}, {"path 0": 4.0, "path 1": 8.0, "path 2": 2.0})
    store, *_ = _index(tmp_path, SMALL, ev, bad_path=1)
    meta = store.view("outline").units[0].meta["mom"]
    assert meta["clarity"][1] == 0.0 and meta["completeness"][1] == 0.0
    assert meta["chosen"] == 2


def test_offline_stores_stay_current_when_the_path_settings_change():
    base = IndexConfig()
    other = replace(base, mom_paths=5, mom_k=10)
    assert base.fingerprint("e", "offline") == other.fingerprint("e", "offline")
    assert base.fingerprint("", "") == other.fingerprint("", "")  # the benchmarks' store tags
    assert base.fingerprint("e", "gpt") != other.fingerprint("e", "gpt")


# -- what an item covers -------------------------------------------------------------------
def test_items_partition_their_section_from_anchor_to_next_anchor():
    sec = Section("I", 100, 1000)
    # listed out of order; the second quotes two spans, one past the next item's start
    spans = [[(600, 640)], [(300, 340), (650, 700)], [], [(120, 150)]]
    assert item_regions(sec, spans) == [(600, 1000), (300, 700), None, (100, 300)]
    assert item_regions(sec, [[], []]) == [None, None]


def test_items_quoting_one_sentence_each_still_cover_the_whole_section(tmp_path):
    """The local model anchors an item to a sentence or two; the items cover the chunks
    between their anchors, and one whose anchor is not in the text covers everything."""

    def answer(prompt: str) -> str:
        if "outline items" not in prompt:
            return "A summary written by the model."
        section = prompt.split("<section>")[1].split("</section>")[0]
        sents = [s.strip() + "." for s in section.split(".") if len(s.split()) >= 8]
        quoted = [sents[len(sents) * j // 3] for j in (2, 0, 1)]  # out of order
        items = [
            {
                "title": f"Item {j}",
                "core": f"Core {j}.",
                "chunks": [{"head": " ".join(s.split()[:5]), "tail": " ".join(s.split()[-4:])}],
            }
            for j, s in enumerate(quoted)
        ]
        items.append({"title": "Lost", "core": "No anchor.", "chunks": [{"head": "zq xv wk"}]})
        return json.dumps({"items": items})

    store = MemoryStore(tmp_path / "store")
    llm = LLM(
        ScriptedChatModel(responses=[answer] * 100),
        settings=LLMSettings(backend="openai", structured="off"),
        cache=store.cache,
    )
    config = replace(SMALL, mom_paths=1, llm_parts={"outline"})
    Indexer(store, HashingEmbedder(), llm=llm, config=config, progress=False).index(
        "cin", STORY.read_text()
    )
    chunks = [u.id for u in store.view("veridical").units]
    pos = {c: n for n, c in enumerate(chunks)}
    for order in sorted({u.order for u in store.view("outline").units}):
        units = [u for u in store.view("outline").units if u.order == order]
        section = set().union(*(u.chunk_ids for u in units))
        lost = next(u for u in units if u.meta["title"] == "Lost")
        assert set(lost.chunk_ids) == section
        placed = sorted(
            (u for u in units if u is not lost), key=lambda u: min(pos[c] for c in u.chunk_ids)
        )
        if len(section) == 1:  # a one-chunk tail: every item is in it
            assert all(u.chunk_ids == lost.chunk_ids for u in units)
            continue
        assert [u.meta["title"] for u in placed] == ["Item 1", "Item 2", "Item 0"]
        # consecutive runs that meet (a chunk cut by a boundary may be in both) and cover all
        runs = [sorted(pos[c] for c in u.chunk_ids) for u in placed]
        assert all(r == list(range(r[0], r[-1] + 1)) for r in runs)
        assert all(b[0] - a[-1] in (0, 1) for a, b in zip(runs, runs[1:], strict=False))
        assert set().union(*map(set, runs)) == {pos[c] for c in section}
