"""benchmarks/mom/recall.py (and the modules it is split into: mom/build.py, mom/costs.py,
mom/answers.py, with the shared helpers of common) without a model: the methods, the Recall@10
summary with paired differences on hand-made per-question hits, the per-story costs, and one
run end to end over a toy bench with a scripted LLM, a fake evaluator and a hashing embedder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import common
from benchmarks.mom import answers as mom_answers
from benchmarks.mom import build as mom_build
from benchmarks.mom import costs as mom_costs
from benchmarks.mom import recall as mom_recall
from mindscape.llm import LLM, LLMSettings  # noqa: E402
from tests.fakes import HashingEmbedder, ScriptedChatModel  # noqa: E402


def test_the_methods_are_a_to_d_over_their_memories():
    rows = mom_build.methods(paths=5, k=10)
    assert [m.name for m in rows] == ["naive", "mom-offline", "mom-single", "mom-selected"]
    assert [m.preset for m in rows] == ["naive", "mom", "mom", "mom"]
    assert [m.memory for m in rows] == ["offline", "offline", "single", "selected"]
    assert "N=5, k=10" in rows[3].label
    assert mom_recall.settings_of("naive").chunk_mode == "dense"
    assert mom_recall.settings_of("mom").chunk_mode == "late-fusion"
    assert mom_recall.settings_of("mom").alpha == 0.0


def test_summary_means_and_paired_differences():
    hits = {
        "naive": [0.0, 0.5, 1.0, 0.0],
        "mom-offline": [0.0, 0.5, 1.0, 1.0],
        "mom-single": [0.5, 0.5, 1.0, 0.0],
        "mom-selected": [1.0, 0.5, 1.0, 1.0],
    }
    s = mom_recall.summarize(hits, n_resamples=500)
    assert s["recall@10"]["naive"]["mean"] == 0.375
    assert s["recall@10"]["mom-selected"]["mean"] == 0.875
    assert s["recall@10"]["mom-selected"]["n"] == 4
    r = s["recall@10"]["mom-single"]
    assert r["low"] <= r["mean"] <= r["high"]
    d = s["paired_recall@10_points"]
    assert list(d) == [
        "mom-selected - mom-single",
        "mom-selected - mom-offline",
        "mom-selected - naive",
    ]
    # (d) − (c): +0.5, 0, 0, +1 → +37.5 points, better on 2, worse on none
    assert d["mom-selected - mom-single"]["mean"] == 37.5
    assert (d["mom-selected - mom-single"]["better"], d["mom-selected - mom-single"]["worse"]) == (
        2,
        0,
    )
    assert d["mom-selected - mom-offline"]["mean"] == 25.0
    assert d["mom-selected - mom-offline"]["better"] == 1
    low, high = d["mom-selected - mom-single"]["low"], d["mom-selected - mom-single"]["high"]
    assert 0.0 <= low <= 37.5 <= high <= 100.0  # never negative: no question is worse
    # a pair without scores is left out; unequal lengths are an error
    only = mom_recall.summarize({"naive": [1.0], "mom-selected": [0.0]}, n_resamples=10)
    assert list(only["paired_recall@10_points"]) == ["mom-selected - naive"]
    with pytest.raises(ValueError):
        common.paired_points([1.0, 0.0], [1.0])


def test_story_costs_take_the_outline_role_and_add_the_shared_greedy_path():
    single = {
        "llm": {
            "index_outline": {"calls": 6, "tokens_in": 4000, "tokens_out": 400, "cache_hits": 0},
            "index_summary": {"calls": 9, "tokens_in": 9000, "tokens_out": 900, "cache_hits": 1},
        },
        "outline_seconds": 100.0,
        "seconds": 400.0,
    }
    selected = {
        "llm": {
            "index_outline": {"calls": 12, "tokens_in": 8000, "tokens_out": 800, "cache_hits": 6}
        },
        "score_reads": {"break": 10, "perplexity": 20},
        "outline_seconds": 300.0,
        "seconds": 320.0,
    }
    own = mom_costs.story_costs(single, selected)
    assert own["single"] == {
        "calls": 6,
        "tokens_in": 4000,
        "tokens_out": 400,
        "cached": 1,
        "reads": 0,
        "seconds": 100.0,
        "index_seconds": 400.0,
    }
    assert own["selected"]["calls"] == 12 and own["selected"]["reads"] == 30
    shared = mom_costs.story_costs(single, {**selected, "shared_cache": True})["selected"]
    assert (shared["calls"], shared["tokens_in"], shared["tokens_out"]) == (18, 12000, 1200)
    assert shared["seconds"] == 400.0 and shared["cached"] == 6
    assert mom_costs.story_costs(None, {**selected, "shared_cache": True})["single"] is None
    tot = mom_costs.cost_totals([own["single"], None, own["single"]])
    assert tot["stories"] == 2 and tot["calls"] == 12 and tot["seconds"] == 200.0
    assert mom_costs.cost_totals([None]) is None


def test_usage_delta_keeps_what_a_story_added():
    before = {"index_outline": {"calls": 2, "tokens_in": 10}}
    after = {"index_outline": {"calls": 5, "tokens_in": 40}, "index_summary": {"calls": 1}}
    assert mom_build.usage_delta(before, after) == {
        "index_outline": {"calls": 3, "tokens_in": 30},
        "index_summary": {"calls": 1},
    }
    assert mom_build.usage_delta(after, after) == {}


# -- one run over a toy bench --------------------------------------------------------------
STORIES = {
    "toy-a": (
        "Ann lived by the sea with her grandmother in a small white house. " * 6
        + "One morning a storm broke the mast of her father's boat far from the shore. " * 6
        + "Ann rowed out alone, found the boat and towed it home before night fell. " * 6
    ),
    "toy-b": (
        "Bob kept goats on the mountain and sang to them every evening. " * 6
        + "A wolf came down in winter and took the smallest goat from the fold. " * 6
        + "Bob followed its tracks through the snow and carried the goat back. " * 6
    ),
}


def _bench(root: Path) -> Path:
    (root / "fairytaleqa").mkdir(parents=True)
    docs, questions = [], []
    for doc_id, text in STORIES.items():
        docs.append(
            {
                "doc_id": doc_id,
                "dataset": "fairytaleqa",
                "split": "dev",
                "title": doc_id,
                "text": text,
            }
        )
        third = len(text) // 3
        for n, (q, span) in enumerate(
            [
                ("Who lived by the sea?" if doc_id == "toy-a" else "Who kept goats?", (0, third)),
                ("What happened in the storm or winter?", (third, 2 * third)),
            ]
        ):
            questions.append(
                {
                    "qid": f"{doc_id}-q{n}",
                    "dataset": "fairytaleqa",
                    "split": "dev",
                    "doc_id": doc_id,
                    "task": "open_qa",
                    "question": q,
                    "answers": ["x"],
                    "evidence": [{"char_start": span[0], "char_end": span[1]}],
                }
            )
    (root / "fairytaleqa" / "documents.jsonl").write_text("\n".join(map(json.dumps, docs)) + "\n")
    (root / "fairytaleqa" / "questions.jsonl").write_text(
        "\n".join(map(json.dumps, questions)) + "\n"
    )
    manifest = {"datasets": {"fairytaleqa": {"splits": {"dev": {"documents": 2, "questions": 4}}}}}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


class FakeEvaluator:
    model_id = "fake-evaluator"

    def yes_probability(self, question: str) -> float:
        return 0.5

    def perplexity(self, context: str, target: str) -> float:
        return 3.0 if "path" in context else 5.0


def _outline_answer(prompt: str) -> str:
    if "outline items" not in prompt:
        return "A summary written by the model."
    words = prompt.split("<section>")[1].split("</section>")[0].split()
    head, tail = " ".join(words[:7]), " ".join(words[-6:])
    return json.dumps(
        {
            "items": [
                {
                    "title": "All",
                    "core": "What happens, path.",
                    "chunks": [{"head": head, "tail": tail}],
                }
            ]
        }
    )


def _fake_models(monkeypatch) -> list[ScriptedChatModel]:
    """Scripted index LLMs (one per client the builder makes), the fake evaluator and the
    hashing embedder in place of the models; returns the chat models made."""
    monkeypatch.setattr("mindscape.embeddings.load_embedder", lambda *a, **k: HashingEmbedder())
    chats: list[ScriptedChatModel] = []

    def llm_for(self, kind):
        key = "single" if self.args.share_cache else kind
        if key not in self._llm:
            chat = ScriptedChatModel(responses=[_outline_answer] * 500, model_name=self.llm_id)
            chats.append(chat)
            settings = LLMSettings(backend="openai", structured="off")
            self._llm[key] = LLM(chat, settings=settings, cache=self.memories[key].store.cache)
        return self._llm[key]

    monkeypatch.setattr(mom_build.Builder, "llm_for", llm_for)
    monkeypatch.setattr(mom_build.Builder, "local_evaluator", lambda self: FakeEvaluator())
    return chats


def test_a_run_builds_reports_and_resumes_from_the_cache(tmp_path, monkeypatch, capsys):
    bench = _bench(tmp_path / "bench")
    monkeypatch.setenv("MINDSCAPE_BENCH_CACHE", str(tmp_path / "cache"))
    chats = _fake_models(monkeypatch)
    argv = ["--bench", str(bench), "--split", "dev", "--llm", "openai", "--model", "toy-model"]

    assert mom_recall.main(argv) == 0
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    assert (
        result["stories"] == 2 and result["questions"] == 4 and result["llm_model"] == "toy-model"
    )
    assert set(result["recall@10"]) == {"naive", "mom-offline", "mom-single", "mom-selected"}
    assert "mom-selected - mom-single" in result["paired_recall@10_points"]
    cost = result["cost_per_story"]["toy-a"]
    assert cost["single"]["calls"] >= 1 and cost["single"]["reads"] == 0
    assert cost["selected"]["calls"] == 3 * cost["single"]["calls"]  # N=3 paths a section
    # the fake's paths answer alike, so the score cache reads each section's candidate once
    assert cost["selected"]["reads"] >= 1
    assert result["cost_total"]["selected"]["stories"] == 2
    assert "(d) MoM late fusion, selected memory (N=3, k=60)" in out
    stores = {k: Path(v) for k, v in result["stores"].items()}
    assert stores["selected"] != stores["single"] != stores["offline"]
    asked = sum(len(c.calls) for c in chats)
    # the LLM writes the outline only: every prompt it got asks for outline items
    assert result["llm_parts"] == ["outline"] and "writing outline" in out
    assert all("outline items" in p for c in chats for p in c.prompts)

    # a second run asks nothing and reports the costs recorded by the first (and, asked,
    # Recall at smaller k from the same stores)
    chats.clear()
    assert mom_recall.main([*argv, "--also-at", "3,1"]) == 0
    out = capsys.readouterr().out
    again = json.loads(out.strip().splitlines()[-1])
    assert asked > 0 and not chats
    assert again["cost_per_story"] == result["cost_per_story"]
    assert again["recall@10"] == result["recall@10"]
    assert "R@3, a check away" in out and "R@1, a check away" in out
    assert "mom-selected - mom-single" in again["paired_recall@1_points"]
    naive = [again[f"recall@{k}"]["naive"]["mean"] for k in (1, 3, 10)]
    assert naive == sorted(naive) and naive[0] < naive[-1]  # dense chunks: a prefix each

    # another k re-indexes the selected store in place from its caches: no model call
    assert mom_recall.main([*argv, "--mom-k", "10"]) == 0
    moved = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert Path(moved["stores"]["selected"]) == stores["selected"]
    assert sum(len(c.prompts) for c in chats) == 0
    assert moved["cost_per_story"] == result["cost_per_story"]  # the first build's cost stands

    # --all-llm-parts: the LLM writes the summaries too, into stores of their own
    assert mom_recall.main([*argv, "--all-llm-parts"]) == 0
    every = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert every["llm_parts"] == ["episodic", "semantic", "outline"]
    assert Path(every["stores"]["offline"]) == stores["offline"]
    assert Path(every["stores"]["single"]) != stores["single"]
    assert any("outline items" not in p for c in chats for p in c.prompts)  # summaries


def test_a_shared_cache_asks_the_greedy_path_once_and_reports_it_in_d(
    tmp_path, monkeypatch, capsys
):
    bench = _bench(tmp_path / "bench")
    argv = ["--bench", str(bench), "--llm", "openai", "--model", "toy-model"]
    results, asked = [], []
    for n, extra in enumerate(([], ["--share-cache"])):
        monkeypatch.setenv("MINDSCAPE_BENCH_CACHE", str(tmp_path / f"cache{n}"))
        chats = _fake_models(monkeypatch)
        assert mom_recall.main([*argv, *extra]) == 0
        results.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))
        asked.append(sum(len(c.calls) for c in chats))
    own, shared = results
    keys = ("calls", "tokens_in", "tokens_out", "reads")
    for story, row in own["cost_per_story"].items():
        other = shared["cost_per_story"][story]
        assert [other["single"][k] for k in keys] == [row["single"][k] for k in keys]
        # (d) built on (c)'s cache reports what it would have cost alone
        assert [other["selected"][k] for k in keys] == [row["selected"][k] for k in keys]
    sections = own["cost_per_story"]["toy-a"]["single"]["calls"]
    assert shared["cost_per_story"]["toy-a"]["selected"]["cached"] >= sections
    assert asked[1] < asked[0]  # greedy paths asked once
    assert shared["recall@10"] == own["recall@10"]


def test_stories_are_the_head_or_a_seeded_sample_in_split_order():
    docs = [f"story-{n}" for n in range(10)]
    assert common.choose_stories(docs, None, None) == docs
    assert common.choose_stories(docs, 3, None) == docs[:3]
    sample = common.choose_stories(docs, 4, 1)
    assert len(sample) == 4 and sample == sorted(sample, key=docs.index)
    assert sample == common.choose_stories(docs, 4, 1)  # the same seed, the same stories
    assert sample != docs[:4]  # a sample, not the head
    assert common.choose_stories(docs, 20, 1) == docs


def test_answers_spread_over_the_stories():
    class Q:
        def __init__(self, doc_id, n):
            self.doc_id, self.qid = doc_id, f"{doc_id}-{n}"

    qs = [Q("a", 0), Q("a", 1), Q("a", 2), Q("b", 0), Q("c", 0), Q("c", 1)]
    assert [q.qid for q in common.spread(qs, 4)] == ["a-0", "b-0", "c-0", "a-1"]
    assert [q.qid for q in common.spread(qs, 99)] == [
        "a-0", "b-0", "c-0", "a-1", "c-1", "a-2",
    ]  # fmt: skip


def test_answer_f1_is_reported_per_method_and_resumes(tmp_path, monkeypatch, capsys):
    from mindscape.deps import Deps

    bench = _bench(tmp_path / "bench")
    monkeypatch.setenv("MINDSCAPE_BENCH_CACHE", str(tmp_path / "cache"))
    _fake_models(monkeypatch)
    answers: list[ScriptedChatModel] = []

    def answer_deps(settings, emb):
        # names Ann when the passages it was shown tell her story: F1 follows retrieval
        def reply(prompt: str) -> str:
            said = "Ann" if "Ann lived" in prompt else "nobody"
            return json.dumps({"quote": "", "answer": said, "sufficient": True})

        chat = ScriptedChatModel(responses=[reply] * 100)
        answers.append(chat)
        return Deps(
            embedder=emb, chat=chat, llm_settings=LLMSettings(backend="openai", structured="off")
        )

    monkeypatch.setattr(mom_answers, "answer_deps", answer_deps)
    qfile = bench / "fairytaleqa" / "questions.jsonl"
    rows = [{**json.loads(line), "answers": ["Ann"]} for line in qfile.read_text().splitlines()]
    qfile.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["--bench", str(bench), "--llm", "openai", "--model", "toy-model", "--answer", "3"]
    argv += ["--scope", "story"]  # each question sees its own story only

    assert mom_recall.main(argv) == 0
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["answered"] == 3 and result["answer_model"] == "toy-model"
    f1 = result["answer_f1"]
    assert set(f1) == {"naive", "mom-offline", "mom-single", "mom-selected"}
    # asked: toy-a's first, toy-b's first, toy-a's second; only toy-a's passages name Ann
    for row in f1.values():
        assert row["n"] == 3 and row["llm_calls"] == 1.0 and row["tokens_in"] > 0
        assert row["mean"] == round(2 / 3, 4)
    assert "mom-selected - mom-single" in result["paired_answer_f1_points"]
    assert "answer F1, 3 questions (2 stories)" in out
    assert sum(len(c.calls) for c in answers) == 4 * 3

    # a rerun takes every answer from the file
    answers.clear()
    assert mom_recall.main(argv) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert again["answer_f1"] == f1
    assert sum(len(c.calls) for c in answers) == 0
