"""The eval runner on a tiny hand-made bench with a fake answerer: scoring, no leaks, resume."""

from __future__ import annotations

import json

import pytest

from mindscape.eval.runner import EvalSettings, load_done, run_eval
from tests.fakes import HashingEmbedder

STORY_A = "Ann found a red key in the garden. " * 3 + "Later she opened the old chest with it. " * 3
STORY_B = "Bob sailed to the island of Mora. " * 3 + "The storm broke his mast on the way. " * 3


@pytest.fixture()
def bench(tmp_path):
    root = tmp_path / "bench"
    (root / "toy").mkdir(parents=True)
    docs = [
        {
            "doc_id": "toy-a",
            "dataset": "toy",
            "split": "dev",
            "title": "A",
            "text": STORY_A,
            "meta": {},
        },
        {
            "doc_id": "toy-b",
            "dataset": "toy",
            "split": "dev",
            "title": "B",
            "text": STORY_B,
            "meta": {},
        },
    ]
    key_start = STORY_A.index("red key")
    questions = [
        {
            "qid": "q1",
            "dataset": "toy",
            "split": "dev",
            "doc_id": "toy-a",
            "task": "open_qa",
            "question": "What did Ann find?",
            "answers": ["a red key"],
            "options": None,
            "label": None,
            "answer_index": None,
            "qtype": None,
            "meta": {"summary": "SECRET PLOT"},
            "evidence": [
                {
                    "section_id": 0,
                    "char_start": key_start,
                    "char_end": key_start + 7,
                    "text": "red key",
                }
            ],
        },
        {
            "qid": "q2",
            "dataset": "toy",
            "split": "dev",
            "doc_id": "toy-b",
            "task": "multiple_choice",
            "question": "Where did Bob sail?",
            "answers": ["Mora"],
            "options": ["Rome", "Mora", "Oslo", "Nile"],
            "label": "B",
            "answer_index": 1,
            "evidence": None,
            "qtype": None,
            "meta": {},
        },
        {
            "qid": "q3",
            "dataset": "toy",
            "split": "dev",
            "doc_id": "toy-b",
            "task": "claim_verification",
            "question": "Bob's mast broke.",
            "answers": ["TRUE"],
            "options": ["TRUE", "FALSE"],
            "label": True,
            "answer_index": 0,
            "evidence": None,
            "qtype": None,
            "meta": {"false_claim_explanation": "SECRET"},
        },
    ]
    (root / "toy" / "documents.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (root / "toy" / "questions.jsonl").write_text(
        "\n".join(json.dumps(q) for q in questions) + "\n"
    )
    manifest = {"datasets": {"toy": {"splits": {"dev": {"documents": 2, "questions": 3}}}}}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def settings(bench, tmp_path, **kw):
    return EvalSettings(
        **{
            "bench": bench,
            "dataset": "toy",
            "split": "dev",
            "presets": ["p1", "p2"],
            "out": tmp_path / "out",
            "stores": tmp_path / "stores",
            "progress": False,
            **kw,
        }
    )


def fake_answerer(seen):
    answers = {"q1": "a red key", "q2": "B", "q3": "FALSE"}

    def answer(view, preset, store):
        seen.append((view, preset, store))
        evidence = [
            {"unit_id": f"{view['doc_id']}:c0", "chunk_ids": [f"{view['doc_id']}:c0"], "text": "."}
        ]
        return {
            "answer": answers[view["qid"]] if preset == "p1" else "no idea",
            "evidence": evidence,
            "llm_calls": 2,
            "rounds": 2,
            "answer_round": 1,
            "trace": [
                {
                    "round": 1,
                    "read": [f"{view['doc_id']}:c0", f"{view['doc_id']}:c1"],
                    "answer": answers[view["qid"]],
                    "confidence": 0.3,
                },
                {"round": 2, "read": [f"{view['doc_id']}:c5"], "answer": "no idea"},
            ],
        }

    return answer


def test_scores_each_task_and_never_shows_gold_to_the_system(bench, tmp_path):
    seen: list = []
    report = run_eval(settings(bench, tmp_path), fake_answerer(seen), embedder=HashingEmbedder())
    assert len(seen) == 6
    leaked = json.dumps([v for v, _, _ in seen])
    for secret in ("SECRET", "a red key", '"label"', "answer_index", "evidence"):
        assert secret not in leaked
    recs = {
        (r["preset"], r["qid"]): r for r in load_done(tmp_path / "out" / "results.jsonl").values()
    }
    assert recs[("p1", "q1")]["metrics"]["f1"] == 1.0 and recs[("p2", "q1")]["metrics"]["f1"] == 0.0
    assert recs[("p1", "q2")]["metrics"]["accuracy"] == 1.0
    assert recs[("p1", "q3")]["metrics"]["accuracy"] == 0.0
    assert recs[("p1", "q1")]["recall_at_k"]["5"] == 1.0  # chunk 0 covers the gold span
    # what was read is kept, for failure analysis: evidence missing or misread?
    assert recs[("p1", "q1")]["evidence"] == [f"{recs[('p1', 'q1')]['doc_id']}:c0"]
    doc = recs[("p1", "q1")]["doc_id"]
    assert recs[("p1", "q1")]["read"] == [f"{doc}:c0", f"{doc}:c1"]  # the answer's own round
    assert recs[("p1", "q1")]["answer_round"] == 1
    # every round's attempt is scored, so a rule choosing among rounds can be measured offline
    rounds = recs[("p2", "q1")]["attempts"]
    assert [(a["round"], a["answer"], a["confidence"]) for a in rounds] == [
        (1, "a red key", 0.3),
        (2, "no idea", None),
    ]
    assert [a["metrics"]["f1"] for a in rounds] == [1.0, 0.0]
    assert {g["preset"] for g in report["groups"]} == {"p1", "p2"}
    assert (tmp_path / "out" / "report.md").exists() and (tmp_path / "out" / "report.json").exists()


def test_rerun_skips_finished_questions_and_tolerates_a_torn_line(bench, tmp_path):
    s = settings(bench, tmp_path)
    run_eval(s, fake_answerer([]), embedder=HashingEmbedder())
    results = tmp_path / "out" / "results.jsonl"
    lines = results.read_text().splitlines()
    results.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])  # killed mid-write
    seen: list = []
    run_eval(s, fake_answerer(seen), embedder=HashingEmbedder())
    assert len(seen) == 1  # only the torn record is redone
    assert len(load_done(results)) == 6


def test_a_pooled_store_is_keyed_by_the_stories_it_holds(bench, tmp_path):
    """Another bench folder with the same dataset name but other stories must not add them
    into an existing pooled store (the cache used to be keyed by dataset and split only)."""
    from mindscape.memory.store import MemoryStore

    first: list = []
    run_eval(
        settings(bench, tmp_path, pooled=True), fake_answerer(first), embedder=HashingEmbedder()
    )
    docs = bench / "toy" / "documents.jsonl"
    rows = [json.loads(line) for line in docs.read_text().splitlines()]
    rows[1]["text"] = STORY_B.replace("Mora", "Kell")  # same ids, another story
    docs.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    second: list = []
    run_eval(
        settings(bench, tmp_path, pooled=True, out=tmp_path / "out2"),
        fake_answerer(second),
        embedder=HashingEmbedder(),
    )
    (a,), (b,) = {s for _, _, s in first}, {s for _, _, s in second}
    assert a != b and a.parent == b.parent == tmp_path / "stores"
    for path, island in ((a, "Mora"), (b, "Kell")):
        store = MemoryStore(path)
        texts = " ".join(u.text for u in store.view("veridical").units)
        store.close()
        assert island in texts
        assert ("Kell" in texts) == (island == "Kell")  # each store holds only its stories


def test_eval_passes_its_backend_without_touching_the_environment(
    bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    from mindscape.cli import main

    monkeypatch.setenv("MINDSCAPE_LLM_BACKEND", "openai")
    args = ["eval", "--bench", str(bench), "--dataset", "toy", "--split", "dev"]
    assert main([*args, "--llm", "extractive", "--estimate", "--json"]) == 0
    assert os.environ["MINDSCAPE_LLM_BACKEND"] == "openai"
    out = json.loads(capsys.readouterr().out)
    assert out["backend"] == "extractive" and out["questions"] == 3
    assert out["presets"]["naive"]["calls"] == [0, 0]


def test_graph_answers_use_the_run_s_llm_settings(
    bench, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mindscape.graphs.qa as qa
    from mindscape.commands.eval import graph_answer_fn
    from mindscape.llm import LLMSettings

    seen: dict = {}
    monkeypatch.setattr(qa, "answer_question", lambda view, **kw: seen.update(kw) or {})
    llm = LLMSettings(backend="extractive")
    graph_answer_fn(settings(bench, tmp_path, llm=llm))({"question": "q"}, "naive", tmp_path)
    assert seen["deps"].llm_settings is llm and seen["preset"] == "naive"
