"""Evidence rankers (reasoners/rankers.py): the fused ranking, the pool a ranker sees, and
loading the learned ranker (missing or damaged files: one warning line, the fused ranking)."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from mindscape.commands.common import context_choices
from mindscape.reasoners import focus
from mindscape.reasoners.rankers import (
    RANKER_DIR,
    RANKER_NAMES,
    Candidate,
    FusedRanker,
    LearnedRanker,
    check_files,
    features,
    load_ranker,
)
from tests.unit.test_focus import STORY, as_hits, chunk_units, view, words

Q = "What did the mother tell her daughter before she died?"


class Reversed:
    """Scores the candidates in the reverse of their retrieval order (a stand-in ranker)."""

    name = "reversed"

    def scores(self, question: str, cands: Sequence[Candidate]) -> list[float]:
        return [float(c.chunk_rank * 100 + i) for i, c in enumerate(cands)]


def test_the_pool_holds_each_candidate_with_its_story_neighbours() -> None:
    units = chunk_units(STORY)
    pool = focus.candidates(Q, as_hits(units, [0]), chunks=view(units))
    texts = [c.text for c in pool.candidates]
    pious = texts.index("She said, be good and pious, and God will protect you.")
    cand = pool.candidates[pious]
    assert cand.before == ("A rich man's wife fell sick.", "She called her daughter to her bed.")
    assert cand.after[0] == "Then she closed her eyes and died."  # from the next chunk
    assert STORY[cand.start : cand.end] == cand.text and cand.doc_id == "tale"
    assert cand.cosine is None  # no embedder given


def test_fused_ranking_votes_chunk_rank_bm25_and_cosine() -> None:
    cands = [
        Candidate("snow covered her grave", chunk_rank=1, cosine=0.2),
        Candidate("a white bird sat in a tree", chunk_rank=0, cosine=0.9),
        Candidate("she went to market", chunk_rank=2, cosine=0.1),
    ]
    s = FusedRanker().scores("snow grave", cands)
    k = 60
    # chunk rank 2nd, BM25 1st (the only one sharing a term), cosine 2nd
    assert s[0] == pytest.approx(1 / (k + 2) + 1 / (k + 1) + 1 / (k + 2))
    assert s[1] == pytest.approx(1 / (k + 1) + 1 / (k + 1))  # no shared term: no BM25 vote
    assert s[2] == pytest.approx(1 / (k + 3) + 1 / (k + 3))
    # without cosines only chunk rank and BM25 vote
    plain = [Candidate(c.text, c.chunk_rank) for c in cands]
    assert FusedRanker().scores("snow grave", plain)[1] == pytest.approx(1 / (k + 1))


def test_the_ranker_decides_what_the_reader_reads() -> None:
    units = chunk_units(STORY)
    hits = as_hits(units, [0, 4])
    args = dict(budget=14, window=0, chunks=view(units), count=words)
    fused = focus.focus(Q, hits, **args)  # type: ignore[arg-type]
    other = focus.focus(Q, hits, ranker=Reversed(), **args)  # type: ignore[arg-type]
    assert [p["text"] for p in fused] == ["She called her daughter to her bed."]  # BM25's pick
    read = " ".join(p["text"] for p in other)
    assert "She planted it on the grave." in read  # the last hit's last sentence comes first
    assert "called her daughter" not in read


def test_unknown_ranker_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown evidence ranker 'bm42'"):
        load_ranker("bm42")
    # the CLI's --evidence-ranker choices come from the Context field: every name loads
    assert sorted(context_choices("evidence_ranker") or []) == sorted(RANKER_NAMES)


def test_a_missing_learned_ranker_warns_once_and_ranks_fused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        ranker = load_ranker("learned", tmp_path / "nowhere")
        again = load_ranker("learned", tmp_path / "nowhere")
    assert isinstance(ranker, FusedRanker) and ranker.name == "fused" and again is ranker
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "make ranker" in lines[0] and "using fused" in lines[0]


def test_a_damaged_ranker_file_is_caught_by_its_sha256(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    where = tmp_path / "ranker"
    shutil.copytree(RANKER_DIR, where)
    check_files(where)  # the shipped files match their manifest
    meta = json.loads((where / "manifest.json").read_text())
    victim = where / sorted(meta["sha256"])[0]
    victim.write_bytes(victim.read_bytes()[:-1] + b"!")
    with caplog.at_level(logging.WARNING):
        ranker = load_ranker("learned", where)
    assert ranker.name == "fused"
    assert "does not match its sha256 (run `make ranker`)" in caplog.text


def test_the_shipped_ranker_loads_and_scores_every_candidate() -> None:
    ranker = load_ranker("learned")
    assert isinstance(ranker, LearnedRanker) and ranker.name == "learned"
    units = chunk_units(STORY)
    pool = focus.candidates(Q, as_hits(units, [0, 4]), chunks=view(units))
    got = ranker.scores(Q, pool.candidates)
    assert len(got) == len(pool.candidates) == features(Q, pool.candidates).shape[0]
    assert ranker.scores(Q, []) == []


def test_a_ranker_saved_by_another_scikit_learn_is_not_loaded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    where = tmp_path / "ranker"
    shutil.copytree(RANKER_DIR, where)
    meta = json.loads((where / "manifest.json").read_text())
    (where / "manifest.json").write_text(json.dumps({**meta, "sklearn": "0.1"}))
    with caplog.at_level(logging.WARNING):
        assert load_ranker("learned", where).name == "fused"
    assert "saved with scikit-learn 0.1" in caplog.text and "make ranker" in caplog.text


def test_novel_misses_names_the_first_place_that_holds_the_answer(monkeypatch) -> None:
    """benchmarks/novel_misses.py: read windows, then candidates, then the book, else nowhere."""
    import sys
    from types import SimpleNamespace

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import evidence_ranking
    import novel_misses

    units = chunk_units(STORY)
    pool = focus.candidates(Q, as_hits(units, [0, 1]), chunks=view(units))
    cap = evidence_ranking.Captured(Q, pool)
    book = [u.text for u in units]

    def question(answer: str, text: str = Q) -> SimpleNamespace:
        return SimpleNamespace(task="open_qa", answers=[answer], question=text)

    assert novel_misses.bucket(question("be good and pious"), cap, book) == "a. read"
    fair = "What did the father bring back from the fair?"
    assert novel_misses.bucket(question("a hazel twig", fair), cap, book) == "c. in the book"
    # the answer's words alone, in a chunk about something else, do not count
    assert novel_misses.bucket(question("a hazel twig"), cap, book) == "d. nowhere verbatim"
    assert novel_misses.bucket(question("a glass slipper"), cap, book) == "d. nowhere verbatim"
    assert novel_misses.bucket(question("a glass slipper"), None, book) == "d. nowhere verbatim"
    monkeypatch.setattr(novel_misses, "read_windows", lambda cap, ranked: [])  # nothing read
    assert novel_misses.bucket(question("be good and pious"), cap, book) == "b. retrieved"


def test_the_learned_ranker_orders_open_questions_and_fused_the_rest() -> None:
    """Multiple choice and claims are read in the fused order: the learned ranker was trained
    on open questions and, on QuALITY dev, picks windows that hold the right option less often."""
    from mindscape.llm import Usage
    from mindscape.reasoners.base import AnswerRequest
    from tests.fakes import ScriptedChatModel
    from tests.unit.test_focus import local_reasoner

    units = chunk_units(STORY)
    r = local_reasoner(ScriptedChatModel(responses=["A"] * 3), ranker=Reversed())  # type: ignore[arg-type]
    hits = as_hits(units, [1, 4, 2, 3, 0])
    open_q = AnswerRequest(Q, "open", passages=hits, focus_tokens=100)
    choice = AnswerRequest(Q, "multiple-choice", options=["pious", "rich"], passages=hits,
                           focus_tokens=100)  # fmt: skip
    assert r.ranker_for(open_q).name == "reversed"
    assert r.ranker_for(choice).name == "fused"
    assert r.answer(open_q, usage=Usage())["ranker"] == "reversed"
    assert r.answer(choice, usage=Usage())["ranker"] == "fused"
