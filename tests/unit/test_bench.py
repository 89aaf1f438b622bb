"""Tests for mindscape.eval.bench.

Two parts:
* loader behaviour and error messages on a tiny bench written to tmp_path (always runs);
* the real bench (counts against manifest.json, split filtering, and the no-leak property
  for every question of every dataset). The real bench is found through $MINDSCAPE_BENCH,
  defaulting to ../shared/bench relative to the repo root; those tests skip if it is absent.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mindscape.eval.bench import (
    ANNOTATOR_META_FIELDS,
    GOLD_FIELDS,
    SYSTEM_VIEW_FIELDS,
    BenchError,
    BenchQuestion,
    gold_spans,
    list_datasets,
    load_documents,
    load_questions,
    resolve_bench_dir,
    system_document_view,
    system_view,
    task_of,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
REAL_BENCH = Path(os.environ.get("MINDSCAPE_BENCH") or REPO_ROOT.parent / "shared" / "bench")

# --------------------------------------------------------------------------- tiny bench


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _question(qid: str, split: str, doc_id: str, **extra: Any) -> dict[str, Any]:
    row = {
        "qid": qid,
        "dataset": "toy",
        "split": split,
        "doc_id": doc_id,
        "task": "open_qa",
        "question": f"Question {qid}?",
        "answers": ["secret answer"],
        "options": None,
        "answer_index": None,
        "label": None,
        "evidence": None,
        "qtype": None,
        "meta": {"alternative_answers": ["another secret"]},
    }
    row.update(extra)
    return row


@pytest.fixture
def tiny_bench(tmp_path: Path) -> Path:
    """A bench with one dataset 'toy': doc d1 (dev, 2 questions), d2 and d3 (test, 1 each)."""
    manifest = {
        "version": "toy",
        "datasets": {
            "toy": {
                "splits": {
                    "dev": {"documents": 1, "questions": 2},
                    "test": {"documents": 2, "questions": 2},
                }
            }
        },
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    docs = [
        {
            "doc_id": d,
            "dataset": "toy",
            "split": s,
            "title": f"T{d}",
            "author": None,
            "text": f"text of {d}",
            "approx_tokens": 3,
            "meta": {"summary": "plot summary"},
        }
        for d, s in [("d1", "dev"), ("d2", "test"), ("d3", "test")]
    ]
    _write_jsonl(tmp_path / "toy" / "documents.jsonl", docs)
    questions = [
        _question("q1", "dev", "d1"),
        _question(
            "q2",
            "dev",
            "d1",
            evidence=[{"section_id": "1", "char_start": 0, "char_end": 4, "text": "text"}],
        ),
        _question("q3", "test", "d2"),
        _question("q4", "test", "d3"),
    ]
    _write_jsonl(tmp_path / "toy" / "questions.jsonl", questions)
    return tmp_path


def test_tiny_bench_loads_and_filters(tiny_bench: Path) -> None:
    assert list_datasets(tiny_bench) == ["toy"]
    assert [d.doc_id for d in load_documents(tiny_bench, "toy")] == ["d1", "d2", "d3"]
    assert [d.doc_id for d in load_documents(tiny_bench, "toy", split="test")] == ["d2", "d3"]
    assert [d.doc_id for d in load_documents(tiny_bench, "toy", doc_ids=["d3"])] == ["d3"]
    assert load_documents(tiny_bench, "toy", split="dev", doc_ids=["d3"]) == []
    assert [q.qid for q in load_questions(tiny_bench, "toy", split="dev")] == ["q1", "q2"]
    assert [q.qid for q in load_questions(tiny_bench, "toy", limit=3)] == ["q1", "q2", "q3"]
    assert [q.qid for q in load_questions(tiny_bench, "toy", split="test", limit=1)] == ["q3"]
    assert [q.qid for q in load_questions(tiny_bench, "toy", doc_ids={"d3"})] == ["q4"]
    assert load_questions(tiny_bench, "toy", limit=0) == []
    # per_doc spreads a limit over the documents instead of taking the first one's questions
    assert [q.qid for q in load_questions(tiny_bench, "toy", per_doc=1)] == ["q1", "q3", "q4"]
    assert [q.qid for q in load_questions(tiny_bench, "toy", per_doc=1, limit=2)] == ["q1", "q3"]


def test_tiny_bench_fields(tiny_bench: Path) -> None:
    doc = load_documents(tiny_bench, "toy", doc_ids=["d1"])[0]
    assert (doc.title, doc.text, doc.split, doc.meta["summary"]) == (
        "Td1",
        "text of d1",
        "dev",
        "plot summary",
    )
    assert system_document_view(doc) == {"doc_id": "d1", "title": "Td1", "text": "text of d1"}
    q2 = load_questions(tiny_bench, "toy", split="dev")[1]
    assert q2.answers == ["secret answer"]
    assert gold_spans(q2) == [(0, 4)]
    assert system_view(q2) == {
        "qid": "q2",
        "doc_id": "d1",
        "task": "open",
        "question": "Question q2?",
        "options": None,
    }


def test_missing_bench_dir(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="bench directory not found"):
        load_questions(tmp_path / "nowhere", "toy")
    with pytest.raises(BenchError, match="manifest.json not found"):
        list_datasets(tmp_path)


def test_resolve_bench_dir_uses_env(tiny_bench: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINDSCAPE_BENCH", str(tiny_bench))
    assert resolve_bench_dir() == tiny_bench
    monkeypatch.delenv("MINDSCAPE_BENCH")
    with pytest.raises(BenchError, match="MINDSCAPE_BENCH"):
        resolve_bench_dir()


def test_unknown_dataset_and_split(tiny_bench: Path) -> None:
    with pytest.raises(BenchError, match=r"unknown dataset 'nope' \(known: toy\)"):
        load_documents(tiny_bench, "nope")
    with pytest.raises(BenchError, match="unknown split 'train'"):
        load_questions(tiny_bench, "toy", split="train")
    with pytest.raises(BenchError, match="unknown split 'validation'"):
        load_documents(tiny_bench, "toy", split="validation")


def test_a_row_of_ones_own_bench_needs_only_the_layouts_required_fields(tiny_bench: Path) -> None:
    """`dataset` defaults to the folder's name; a row without a required field is a one-line
    error naming the file, the line and the field (it was a KeyError traceback)."""
    docs = tiny_bench / "toy" / "documents.jsonl"
    rows = [json.loads(line) for line in docs.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        del row["dataset"]
    _write_jsonl(docs, rows)
    assert {d.dataset for d in load_documents(tiny_bench, "toy")} == {"toy"}
    questions = tiny_bench / "toy" / "questions.jsonl"
    lines = questions.read_text(encoding="utf-8").splitlines()
    broken = json.loads(lines[1])
    del broken["question"]
    questions.write_text("\n".join([lines[0], json.dumps(broken), *lines[2:]]) + "\n")
    with pytest.raises(BenchError, match=r"questions\.jsonl:2: missing question ") as info:
        load_questions(tiny_bench, "toy")
    assert "\n" not in str(info.value)


def test_a_row_without_its_split_is_an_error_under_a_split_filter(tiny_bench: Path) -> None:
    """A split filter must not skip a row that has no split at all (it did, silently)."""
    docs = tiny_bench / "toy" / "documents.jsonl"
    rows = [json.loads(line) for line in docs.read_text(encoding="utf-8").splitlines()]
    del rows[-1]["split"]
    _write_jsonl(docs, rows)
    with pytest.raises(BenchError, match=rf"documents\.jsonl:{len(rows)}: missing split"):
        load_documents(tiny_bench, "toy", split="dev")
    questions = tiny_bench / "toy" / "questions.jsonl"
    rows = [json.loads(line) for line in questions.read_text(encoding="utf-8").splitlines()]
    del rows[0]["split"]
    _write_jsonl(questions, rows)
    with pytest.raises(BenchError, match=r"questions\.jsonl:1: missing split"):
        load_questions(tiny_bench, "toy", split="test")


def test_error_messages_are_one_line(tmp_path: Path, tiny_bench: Path) -> None:
    for call in (
        lambda: load_questions(tmp_path / "x", "toy"),
        lambda: load_questions(tiny_bench, "nope"),
        lambda: load_questions(tiny_bench, "toy", split="train"),
    ):
        with pytest.raises(BenchError) as info:
            call()
        assert "\n" not in str(info.value)


def test_task_of() -> None:
    assert task_of("open_qa") == "open"
    assert task_of({"task": "multiple_choice"}) == "multiple-choice"
    assert task_of("claim_verification") == "claim"
    with pytest.raises(BenchError, match="unknown bench task"):
        task_of("summarisation")


# --------------------------------------------------------------------------- real bench

needs_bench = pytest.mark.skipif(
    not (REAL_BENCH / "manifest.json").is_file(),
    reason=f"bench data not found at {REAL_BENCH} (set MINDSCAPE_BENCH to the bench directory)",
)


def _manifest() -> dict[str, Any]:
    return json.loads((REAL_BENCH / "manifest.json").read_text(encoding="utf-8"))


def _real_datasets() -> list[str]:
    if not (REAL_BENCH / "manifest.json").is_file():
        return []
    return list(_manifest()["datasets"])


@pytest.fixture(scope="module")
def all_questions() -> dict[str, list[BenchQuestion]]:
    return {name: load_questions(REAL_BENCH, name) for name in _real_datasets()}


@needs_bench
def test_list_datasets_matches_manifest() -> None:
    names = list_datasets(REAL_BENCH)
    assert names == list(_manifest()["datasets"])
    assert {
        "narrativeqa_lit",
        "nocha_sample",
        "quality_leval",
        "sfiction_leval",
        "fairytaleqa",
    } <= set(names)


@needs_bench
@pytest.mark.parametrize("dataset", _real_datasets())
def test_counts_match_manifest(dataset: str, all_questions: dict[str, list[BenchQuestion]]) -> None:
    splits = _manifest()["datasets"][dataset]["splits"]
    questions = all_questions[dataset]
    assert Counter(q.split for q in questions) == Counter(
        {s: c["questions"] for s, c in splits.items() if c["questions"]}
    )
    documents = load_documents(REAL_BENCH, dataset)
    assert Counter(d.split for d in documents) == Counter(
        {s: c["documents"] for s, c in splits.items() if c["documents"]}
    )
    # every question points at a document of the same split
    split_of = {d.doc_id: d.split for d in documents}
    assert all(split_of[q.doc_id] == q.split for q in questions)
    assert len({q.qid for q in questions}) == len(questions)


@needs_bench
@pytest.mark.parametrize("dataset", _real_datasets())
def test_split_filtering(dataset: str) -> None:
    splits = _manifest()["datasets"][dataset]["splits"]
    for split, counts in splits.items():
        questions = load_questions(REAL_BENCH, dataset, split=split)
        assert len(questions) == counts["questions"]
        assert {q.split for q in questions} <= {split}
    limited = load_questions(REAL_BENCH, dataset, split="dev", limit=2)
    assert len(limited) == min(2, splits["dev"]["questions"])


@needs_bench
def test_load_documents_by_id_on_the_big_file() -> None:
    dev_ids = [
        q.doc_id for q in load_questions(REAL_BENCH, "narrativeqa_lit", split="dev", limit=1)
    ]
    documents = load_documents(REAL_BENCH, "narrativeqa_lit", doc_ids=dev_ids)
    assert [d.doc_id for d in documents] == dev_ids
    assert documents[0].split == "dev" and len(documents[0].text) > 10_000
    assert "summary" not in system_document_view(documents[0])


def _sensitive_strings(question: BenchQuestion) -> list[str]:
    """Gold and annotator strings of a question that must not appear in its system view."""
    found: list[str] = []
    for value in [*(ev.get("text") for ev in question.evidence or [])] + [
        question.meta.get(name) for name in ANNOTATOR_META_FIELDS
    ]:
        values = value if isinstance(value, list) else [value]
        found += [v for v in values if isinstance(v, str) and len(v) >= 12]
    return found


@needs_bench
@pytest.mark.parametrize("dataset", _real_datasets())
def test_system_view_never_leaks(
    dataset: str, all_questions: dict[str, list[BenchQuestion]]
) -> None:
    questions = all_questions[dataset]
    assert questions
    for q in questions:
        view = system_view(q)
        assert tuple(view) == SYSTEM_VIEW_FIELDS
        assert not GOLD_FIELDS & set(view)
        assert not set(q.meta) & set(view)
        assert "meta" not in view and "qtype" not in view
        assert view["question"] == q.question and view["options"] == q.options
        serialized = json.dumps(view)
        for secret in _sensitive_strings(q):
            assert secret not in serialized, (q.qid, secret[:40])
        if q.task == "open_qa":
            # open-QA references must not be handed over as any field's value
            assert not set(q.answers) & {view["question"], *(view["options"] or [])}
        else:
            # closed tasks: the options are shown, but never which one is gold
            assert q.label is not None and q.answer_index is not None
            assert view["task"] in {"multiple-choice", "claim"}


@needs_bench
def test_sensitive_fields_exist_in_the_data(all_questions: dict[str, list[BenchQuestion]]) -> None:
    """Guards the no-leak test against vacuity: the secrets it checks are really there."""
    nocha = all_questions["nocha_sample"]
    assert any(q.meta.get("false_claim_explanation") for q in nocha)
    assert all(q.pair_index is not None for q in nocha)
    fairytale = all_questions["fairytaleqa"]
    assert all(gold_spans(q) for q in fairytale)
    assert any(_sensitive_strings(q) for q in fairytale)
    assert all("real_world_fact_label" in q.meta for q in all_questions["sfiction_leval"])
    assert all(task_of(q) == "multiple-choice" for q in all_questions["quality_leval"])


def test_documents_key_follows_the_stories_not_their_names():
    from mindscape.eval.bench import BenchDocument, documents_key

    def doc(doc_id: str, text: str) -> BenchDocument:
        return BenchDocument(doc_id=doc_id, dataset="toy", split="dev", title=doc_id, text=text)

    a, b = doc("a", "One story."), doc("b", "Another story.")
    assert documents_key([a, b]) == documents_key([b, a])  # order does not matter
    assert documents_key([a, b]) != documents_key([a, doc("b", "Another story!")])
    assert documents_key([a, b]) != documents_key([a])


def test_the_benchmarks_store_cache_is_keyed_by_content(tmp_path, monkeypatch):
    """Two bench folders whose dataset has the same name but other stories get two stores."""

    from benchmarks import common
    from tests.fakes import HashingEmbedder

    monkeypatch.setenv(common.CACHE_ENV, str(tmp_path / "cache"))
    paths = []
    for n, text in enumerate(["Ann found a red key in the garden.", "Bob sailed to Mora."]):
        root = tmp_path / f"bench{n}"
        (root / "toy").mkdir(parents=True)
        row = {"doc_id": "toy-a", "dataset": "toy", "split": "dev", "title": "A", "text": text}
        (root / "toy" / "documents.jsonl").write_text(json.dumps(row) + "\n")
        (root / "toy" / "questions.jsonl").write_text("")
        manifest = {"datasets": {"toy": {"splits": {"dev": {"documents": 1, "questions": 0}}}}}
        (root / "manifest.json").write_text(json.dumps(manifest))
        store, docs = common.split_store(root, "toy", "dev", HashingEmbedder())
        texts = " ".join(u.text for u in store.view("veridical").units)
        store.close()
        assert texts.strip() == text and [d.doc_id for d in docs] == ["toy-a"]
        paths.append(store.path)
    assert paths[0] != paths[1]


def test_a_store_indexed_by_an_llm_is_its_own_and_holds_its_summaries(tmp_path, monkeypatch):
    """retrieval/recall.py --llm: the LLM-summarised store never replaces the offline one."""

    from benchmarks import common
    from mindscape.indexing.indexer import IndexConfig
    from mindscape.llm import LLM, LLMSettings
    from tests.fakes import HashingEmbedder, ScriptedChatModel

    monkeypatch.setenv(common.CACHE_ENV, str(tmp_path / "cache"))
    root = tmp_path / "bench"
    (root / "toy").mkdir(parents=True)
    text = " ".join(f"Ann walked to the mill on day {n} and met Bob there." for n in range(40))
    row = {"doc_id": "toy-a", "dataset": "toy", "split": "dev", "title": "A", "text": text}
    (root / "toy" / "documents.jsonl").write_text(json.dumps(row) + "\n")
    (root / "toy" / "questions.jsonl").write_text("")
    manifest = {"datasets": {"toy": {"splits": {"dev": {"documents": 1, "questions": 0}}}}}
    (root / "manifest.json").write_text(json.dumps(manifest))

    chat = ScriptedChatModel(responses=["A session the model summed up."] * 100)
    settings = LLMSettings(backend="openai", structured="off")
    config = IndexConfig(llm_parts=("episodic",))
    offline, _ = common.split_store(root, "toy", "dev", HashingEmbedder())
    offline_sessions = [u.text for u in offline.view("episodic").units]
    llm_store, _ = common.split_store(
        root,
        "toy",
        "dev",
        HashingEmbedder(),
        config=config,
        llm=lambda cache: LLM(chat, settings=settings, cache=cache),
        llm_id="scripted",
    )
    assert llm_store.path != offline.path
    sessions = [u.text for u in llm_store.view("episodic").units]
    assert sessions and set(sessions) == {"A session the model summed up."}
    assert chat.calls and all("summar" in p.lower() for p in chat.prompts)
    # the offline store is untouched, and the other layers of the LLM store are its own
    assert [u.text for u in offline.view("episodic").units] == offline_sessions
    assert "A session the model summed up." not in offline_sessions
    assert [u.text for u in llm_store.view("semantic").units] == [
        u.text for u in offline.view("semantic").units
    ]
    offline.close()
    llm_store.close()


@needs_bench
def test_a_sample_is_fixed_by_its_seed_and_kept_in_file_order() -> None:
    everything = load_questions(REAL_BENCH, "fairytaleqa", split="dev")
    one = load_questions(REAL_BENCH, "fairytaleqa", split="dev", sample=20, seed=3)
    again = load_questions(REAL_BENCH, "fairytaleqa", split="dev", sample=20, seed=3)
    other = load_questions(REAL_BENCH, "fairytaleqa", split="dev", sample=20, seed=4)
    assert [q.qid for q in one] == [q.qid for q in again] and len(one) == 20
    assert [q.qid for q in one] != [q.qid for q in other]
    position = {q.qid: n for n, q in enumerate(everything)}
    assert [position[q.qid] for q in one] == sorted(position[q.qid] for q in one)
    assert len({q.doc_id for q in one}) > 3  # spread over the split, not its first story
    assert len(load_questions(REAL_BENCH, "fairytaleqa", split="dev", sample=20, limit=5)) == 5
    with pytest.raises(BenchError):
        load_questions(REAL_BENCH, "fairytaleqa", split="dev", sample=-1)
