"""Evidence rankers (reasoners/rankers.py): the fused ranking, the pool a ranker sees, and
loading the learned ranker: ONNX that scores as the scikit-learn model it came from, and
files that cannot be loaded are one error line naming `make ranker`, never the fused ranking."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from mindscape.commands.common import context_choices
from mindscape.errors import MindscapeError
from mindscape.reasoners import focus
from mindscape.reasoners.rankers import (
    MANIFEST,
    MODEL_FILE,
    RANKER_DIR,
    RANKER_FILES,
    RANKER_NAMES,
    Candidate,
    FusedRanker,
    LearnedRanker,
    ModelFileError,
    TreeEnsemble,
    features,
    load_ranker,
)
from tests.unit.test_focus import STORY, as_hits, chunk_units, view, words

SNAPSHOT = Path(__file__).resolve().parents[1] / "snapshots" / "ranker_scores.json"

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


def one_line_error(exc: pytest.ExceptionInfo[ModelFileError], *needles: str) -> None:
    """A user error (the CLI prints it and exits with 2) on one line naming `make ranker`."""
    msg = str(exc.value)
    assert isinstance(exc.value, MindscapeError) and "\n" not in msg
    for needle in ("the learned evidence ranker", "run `make ranker`", *needles):
        assert needle in msg, msg


def ranker_copy(tmp_path: Path) -> Path:
    where = tmp_path / "ranker"
    shutil.copytree(RANKER_DIR, where)
    return where


def test_a_missing_learned_ranker_is_an_error_not_the_fused_ranking(tmp_path: Path) -> None:
    for _ in range(2):  # a failure is not remembered as a ranker
        with pytest.raises(ModelFileError) as exc:
            load_ranker("learned", tmp_path / "nowhere")
        one_line_error(exc, f"no {MANIFEST}", "--evidence-ranker fused")


def test_a_damaged_ranker_file_is_caught_by_its_sha256(tmp_path: Path) -> None:
    where = ranker_copy(tmp_path)
    RANKER_FILES.check(where)  # the shipped files match their manifest
    victim = where / MODEL_FILE
    victim.write_bytes(victim.read_bytes()[:-1] + b"!")
    with pytest.raises(ModelFileError) as exc:
        load_ranker("learned", where)
    one_line_error(exc, f"{MODEL_FILE} does not match its sha256")


def rewrite(where: Path, name: str, raw: bytes, **meta: object) -> None:
    """Put `raw` in `where/name` with a manifest that lists it by its true sha256."""
    (where / name).write_bytes(raw)
    digest = hashlib.sha256(raw).hexdigest()
    (where / MANIFEST).write_text(json.dumps({**meta, "sha256": {name: digest}}))


def test_a_ranker_in_another_format_is_not_loaded(tmp_path: Path) -> None:
    """A folder from before the ONNX format (a pickle, whatever its scikit-learn), or a file
    onnxruntime cannot run, though each matches its manifest."""
    where = ranker_copy(tmp_path)
    rewrite(where, "model.pkl", b"\x80\x04not today", sklearn="1.9.1")
    with pytest.raises(ModelFileError) as exc:
        load_ranker("learned", where)
    one_line_error(exc, "not in the format this version reads (model.pkl)")
    rewrite(where, MODEL_FILE, b"not a graph", format=RANKER_FILES.format)
    with pytest.raises(ModelFileError) as exc:
        load_ranker("learned", where)
    one_line_error(exc, "onnxruntime cannot run it")
    (where / MANIFEST).write_text("{")
    with pytest.raises(ModelFileError) as exc:
        load_ranker("learned", where)
    one_line_error(exc, f"{MANIFEST} is damaged")


def test_the_shipped_ranker_loads_and_scores_every_candidate() -> None:
    ranker = load_ranker("learned")
    assert isinstance(ranker, LearnedRanker) and ranker.name == "learned"
    units = chunk_units(STORY)
    pool = focus.candidates(Q, as_hits(units, [0, 4]), chunks=view(units))
    got = ranker.scores(Q, pool.candidates)
    assert len(got) == len(pool.candidates) == features(Q, pool.candidates).shape[0]
    assert ranker.scores(Q, []) == []


def order(scores: Sequence[float]) -> list[int]:
    """Candidates best first (scores equal to 1e-12 in their order)."""
    return [int(i) for i in np.argsort(-np.round(scores, 12), kind="stable")]


def test_the_shipped_ranker_scores_as_the_scikit_learn_model_it_came_from() -> None:
    """The fixture holds candidate features and the scores the pickled scikit-learn model
    gave them (scikit-learn 1.9.1, before the ONNX format): the questions' candidates about
    the test story, and rows on the trees' split thresholds or one float64 step away (where
    float32 splits, as skl2onnx writes them, score otherwise: up to 0.077 on these rows)."""
    ranker = load_ranker("learned")
    assert isinstance(ranker, LearnedRanker)
    groups = json.loads(SNAPSHOT.read_text())["groups"]
    assert sum(len(g["scores"]) for g in groups) >= 90
    for g in groups:
        got = ranker.model.predict(np.asarray(g["features"]))
        np.testing.assert_allclose(got, g["scores"], rtol=0, atol=1e-12, err_msg=g["question"])
        assert order(got) == order(g["scores"]), g["question"]


def test_make_ranker_writes_onnx_that_scores_as_the_fitted_trees(tmp_path: Path) -> None:
    """benchmarks/ranker/train.py's export: the fitted trees as ONNX and a manifest that the
    loader accepts, with the provenance it is given."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    from benchmarks.ranker import train as train_ranker

    rng = np.random.default_rng(3)
    x = rng.normal(size=(600, 23))
    x[:, 0] = rng.integers(0, 8, 600)  # an integer column, as chunk ranks are
    y = (x[:, 1] > 0.3) * 0.5 + (x[:, 0] < 2) * 0.5 + rng.normal(0, 0.05, 600)
    model = HistGradientBoostingRegressor(max_iter=20, random_state=0).fit(x, y)
    gap = train_ranker.save_trees(model, tmp_path, x, "a test (2 stories, 3 questions)")
    meta = json.loads((tmp_path / MANIFEST).read_text())
    assert gap < 1e-12 and meta["onnx_check"] == {"rows": 600, "max_abs_diff": gap}
    assert meta["trained_on"] == "a test (2 stories, 3 questions)"
    assert list(meta["sha256"]) == [MODEL_FILE] and not list(tmp_path.glob("*.pkl"))
    loaded = LearnedRanker.load(tmp_path)
    assert isinstance(loaded.model, TreeEnsemble)
    probe = rng.normal(size=(50, 23))
    np.testing.assert_allclose(loaded.model.predict(probe), model.predict(probe), atol=1e-12)


def test_the_provenance_counts_what_the_train_folder_holds(tmp_path: Path) -> None:
    """`trained_on` in the ranker's and the router's manifests: the train folder's version and
    the stories and questions trained on, not figures written into the scripts; cached pools
    of other questions than ``--train`` holds are refused."""
    from types import SimpleNamespace

    from benchmarks.ranker import train as train_ranker
    from benchmarks.ranker import train_router
    from benchmarks.ranker.train_data import trained_on

    train = tmp_path / "train"
    (train / "fairytaleqa").mkdir(parents=True)
    rows = [
        {"qid": f"q{i}", "split": "train", "doc_id": f"story-{i % 2}", "task": "open_qa",
         "question": "Who?"}
        for i in range(5)
    ]  # fmt: skip
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (train / "fairytaleqa" / "questions.jsonl").write_text(text)
    loaded = train_router.load(train / "fairytaleqa" / "questions.jsonl")
    ids = [str(q["doc_id"]) for q in loaded]
    assert trained_on(train, ids) == "FairytaleQA train (2 stories, 5 questions), Apache-2.0"
    manifest = {"version": "train-v9", "datasets": {"fairytaleqa": {"splits": {"train": {}}}}}
    (train / "manifest.json").write_text(json.dumps(manifest))
    assert trained_on(train, ids[:3]) == (
        "FairytaleQA train-v9 (2 stories, 3 questions), Apache-2.0"
    )
    pools = [SimpleNamespace(qid=r["qid"], doc_id=r["doc_id"]) for r in rows]
    train_ranker.check_pools(pools, train, tmp_path / "pools.pkl")  # the same questions
    with pytest.raises(SystemExit, match="other questions than"):
        train_ranker.check_pools(pools[:4], train, tmp_path / "pools.pkl")


def test_novel_misses_names_the_first_place_that_holds_the_answer(monkeypatch) -> None:
    """benchmarks/evidence/novel_misses.py: read windows, then candidates, then the book, else nowhere."""
    from types import SimpleNamespace

    from benchmarks.evidence import novel_misses
    from benchmarks.ranker import evidence_ranking

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
