"""`--estimate`: the cost printed before a run is within 20% of what the run then counts,
and printing it calls no model and writes no store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mindscape.cli import main
from mindscape.tokens import default_counter
from tests.conftest import STORY
from tests.fake_openai import FakeOpenAIServer, all_text

pytestmark = pytest.mark.integration


def _reply(request: dict) -> str:
    text = all_text(request)
    if "subject-relation-object" in text:
        return '{"triples": [["Cinderella", "lost", "a slipper"]]}'
    if '"items"' in text:
        return (
            '{"items": [{"title": "Part", "core": "Cinderella goes to the ball.", "chunks": []}]}'
        )
    return "Cinderella, helped by the birds, goes to the ball and the prince finds her."


def _endpoint(monkeypatch: pytest.MonkeyPatch, base_url: str) -> None:
    monkeypatch.setenv("MINDSCAPE_LLM_BACKEND", "openai")
    monkeypatch.setenv("MINDSCAPE_LLM_MODEL", "fake-model")
    monkeypatch.setenv("MINDSCAPE_LLM_BASE_URL", base_url)


def _within(estimated: int, counted: int, tolerance: float = 0.2) -> bool:
    return abs(estimated - counted) <= tolerance * counted


def test_index_estimate_matches_an_llm_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    with FakeOpenAIServer(_reply) as server:
        _endpoint(monkeypatch, server.base_url)
        one = ["--mom-paths", "1"]  # several paths: the test below
        assert main(["index", str(STORY), "--store", str(store), "--estimate", "--json", *one]) == 0
        estimate = json.loads(capsys.readouterr().out)
        assert server.requests == [] and not store.exists()  # no call, no store
        assert main(["index", str(STORY), "--store", str(store), "--quiet", *one]) == 0
    counter = default_counter()
    calls = len(server.requests)
    tokens_in = sum(counter.count(all_text(r)) for r in server.requests)
    llm = estimate["llm"]
    assert estimate["index_llm"] and _within(llm["calls"], calls), (llm["calls"], calls)
    assert _within(llm["tokens_in"], tokens_in), (llm["tokens_in"], tokens_in)
    triples = sum("subject-relation-object" in all_text(r) for r in server.requests)
    assert llm["parts"]["triples"]["calls"] == triples == estimate["index"]["chunks"]


def _paths_reply(request: dict) -> str:
    """Outline answers with as many items as asked, one anchored chunk each, cut a little
    differently per path (the request's seed), so every path's chunks are scored."""
    text = all_text(request)
    if '"items"' not in text:
        return _reply(request)
    n = int(re.search(r"between 1 and (\d+) items", text).group(1))
    words = text.split("<section>")[1].split("</section>")[0].split()
    seed = int(request.get("seed") or 0)
    cuts = [0, *(len(words) * j // n + seed for j in range(1, n)), len(words)]
    items = [
        {
            "title": f"Part {j}",
            "core": f"What happens in part {j}, as path {seed} reads it.",
            "chunks": [{"head": " ".join(words[a : a + 7]), "tail": " ".join(words[b - 6 : b])}],
        }
        for j, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False))
    ]
    return json.dumps({"items": items})


class _CountingEvaluator:
    """Counts the evaluator's reads and the tokens they read."""

    def __init__(self) -> None:
        self.calls, self.tokens = 0, 0

    def yes_probability(self, question: str) -> float:
        self.calls += 1
        self.tokens += default_counter().count(question)
        return 0.5

    def perplexity(self, context: str, target: str) -> float:
        self.calls += 1
        self.tokens += default_counter().count(context + target)
        return 2.0


def test_index_estimate_counts_the_mom_paths_and_their_scoring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three paths (the default): three outline calls per section, and the evaluator's reads
    that choose among them as `mom_score`, within 20% of what the index then does."""
    import mindscape.indexing.indexer as indexer
    import mindscape.indexing.outline as indexer_outline

    evaluator = _CountingEvaluator()
    monkeypatch.setattr(indexer, "default_evaluator", lambda: evaluator)
    store = tmp_path / "store"
    small = ["--chunk-size", "32"]  # sections of 8+ chunks: two items, so breaks are asked
    with FakeOpenAIServer(_paths_reply) as server:
        _endpoint(monkeypatch, server.base_url)
        assert (
            main(["index", str(STORY), "--store", str(store), "--estimate", "--json", *small]) == 0
        )
        estimate = json.loads(capsys.readouterr().out)
        assert main(["index", str(STORY), "--store", str(store), "--quiet", *small]) == 0
    parts = estimate["llm"]["parts"]
    assert parts["mom_score"]["tokens_out"] > 0  # break questions were counted
    outline = [r for r in server.requests if '"items"' in all_text(r)]
    assert parts["outline"]["calls"] == len(outline) == 3 * estimate["index"]["sections"]
    assert sorted({r.get("seed") for r in outline}, key=str) == [1, 2, None]
    sampled = [(r["temperature"], r["top_p"]) for r in outline if r.get("seed")]
    assert set(sampled) == {(0.7, 0.9)}  # the sampled paths reach the endpoint as sampled
    # every path's output is capped, so a rambling sampled path cannot run to the context's end
    assert {r.get("max_completion_tokens") for r in outline} == {indexer_outline.OUTLINE_MAX_TOKENS}
    assert _within(parts["mom_score"]["calls"], evaluator.calls), (parts, evaluator.calls)
    assert _within(parts["mom_score"]["tokens_in"], evaluator.tokens), (parts, evaluator.tokens)
    assert main(["index", str(STORY), "--estimate", "--mom-paths", "2"]) == 0
    assert "mom_score" in capsys.readouterr().out


def test_index_estimate_offline_says_no_llm_calls(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["index", str(STORY), "--estimate", "--llm", "extractive"]) == 0
    out = capsys.readouterr().out
    assert "no LLM calls" in out and "with an index LLM" in out


def test_index_estimate_counts_only_the_parts_the_llm_writes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _endpoint(monkeypatch, "http://127.0.0.1:9/v1")  # never called
    assert main(["index", str(STORY), "--estimate", "--json"]) == 0
    every = json.loads(capsys.readouterr().out)["llm"]["parts"]
    assert set(every) == {"episodic", "semantic", "outline", "mom_score", "triples"}
    argv = ["index", str(STORY), "--estimate", "--json", "--index-llm-parts", "outline"]
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["llm_parts"] == ["outline"]
    assert got["llm"]["parts"] == {k: every[k] for k in ("outline", "mom_score")}
    assert got["llm"]["calls"] == every["outline"]["calls"] + every["mom_score"]["calls"]
    assert main([*argv[:-1], "summaries"]) == 0
    text = capsys.readouterr().out
    assert set(json.loads(text)["llm"]["parts"]) == {"episodic", "semantic"}
    assert main(["index", str(STORY), "--estimate", "--index-llm-parts", "triples"]) == 0
    assert "(built without the LLM, --index-llm-parts: episodic, semantic, outline)" in (
        capsys.readouterr().out
    )


def _mini_bench(root: Path) -> Path:
    """A bench of one dataset, 'tale': the bundled story and the demo's questions (test)."""
    spec = json.loads((STORY.parent / "demo.json").read_text())["questions"]
    questions = [q["question"] for q in spec]
    bench = root / "bench"
    (bench / "tale").mkdir(parents=True)
    splits = {"test": {"documents": 1, "questions": len(questions)}}
    (bench / "manifest.json").write_text(json.dumps({"datasets": {"tale": {"splits": splits}}}))
    doc = {"doc_id": "tale-1", "dataset": "tale", "split": "test", "text": STORY.read_text()}
    (bench / "tale" / "documents.jsonl").write_text(json.dumps(doc) + "\n")
    rows = [
        {
            "qid": f"tale-q{i}",
            "dataset": "tale",
            "split": "test",
            "doc_id": "tale-1",
            "task": "open_qa",
            "question": q,
            "answers": ["x"],
        }
        for i, q in enumerate(questions)
    ]
    (bench / "tale" / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return bench


def test_eval_estimate_matches_a_naive_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _mini_bench(tmp_path)
    answer = '{"quote": "", "answer": "the prince", "sufficient": true}'
    common = ["eval", "--bench", str(bench), "--dataset", "tale", "--split", "test"]
    common += ["--preset", "naive", "--quiet", "--stores", str(tmp_path / "stores")]
    with FakeOpenAIServer(lambda request: answer) as server:
        _endpoint(monkeypatch, server.base_url)
        assert main([*common, "--estimate", "--json"]) == 0
        estimate = json.loads(capsys.readouterr().out)["presets"]["naive"]
        assert server.requests == [] and not (tmp_path / "stores").exists()
        assert main([*common, "--out", str(tmp_path / "out")]) == 0
    summary = capsys.readouterr().out
    assert "report.md" in summary and "naive" in summary and "tale: n 4," in summary
    counter = default_counter()
    tokens_in = sum(counter.count(all_text(r)) for r in server.requests)
    assert estimate["calls"] == [len(server.requests)] * 2
    assert _within(estimate["tokens_in"][0], tokens_in), (estimate["tokens_in"], tokens_in)


def test_loop_presets_are_estimated_by_their_calls_per_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an endpoint playing every role, ComoRAG's rounds cost far more than mindscape's,
    and a loop's most is several rounds; the text output gives the range in minutes."""
    from mindscape.indexing.estimate import eval_cost

    asked = [("Who helped Cinderella?", None)]
    rows = {p: eval_cost(asked, p, local=False) for p in ("naive", "mindscape", "comorag")}
    assert rows["naive"][0].calls == rows["naive"][1].calls == 1
    assert rows["mindscape"][1].calls >= 2 * rows["mindscape"][0].calls
    assert rows["comorag"][0].calls >= 5  # 3 encodes, the answer, the probe
    assert rows["comorag"][1].calls >= 4 * rows["mindscape"][1].calls // 2
    local = eval_cost(asked, "mindscape", local=True)[1]
    assert local.tokens_in <= 3000  # the local token cap holds the loop to about two rounds
    bench = _mini_bench(tmp_path)
    common = ["eval", "--bench", str(bench), "--dataset", "tale", "--split", "test"]
    monkeypatch.setenv("MINDSCAPE_LLM_BACKEND", "extractive")  # restored after: --llm sets it
    assert main([*common, "--preset", "naive,comorag", "--llm", "openai", "--estimate"]) == 0
    out = capsys.readouterr().out
    assert "4 questions" in out and "min at the local speed" in out and "comorag" in out


def test_index_summaries_estimate_matches_its_second_pass_and_a_plain_reindex_keeps_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`index --summaries`: the plain index first, then only session-summary calls, each
    reading the session's central sentences; estimated within 20%; kept by a plain index."""
    from mindscape.indexing.config import SUMMARIES_INPUT_TOKENS
    from mindscape.memory.store import MemoryStore

    store = tmp_path / "store"
    argv = ["index", str(STORY), "--store", str(store), "--summaries"]
    with FakeOpenAIServer(_reply) as server:
        _endpoint(monkeypatch, server.base_url)
        assert main([*argv, "--estimate", "--json"]) == 0
        estimate = json.loads(capsys.readouterr().out)
        assert set(estimate["llm"]["parts"]) == {"episodic"} and not store.exists()
        assert main(argv) == 0
        assert "summaries (episodic) for 1 book(s)" in capsys.readouterr().err
        calls = list(server.requests)
        counter = default_counter()
        assert calls
        assert _within(estimate["llm"]["calls"], len(calls))
        tokens_in = sum(counter.count(all_text(r)) for r in calls)
        assert _within(estimate["llm"]["tokens_in"], tokens_in), (estimate, tokens_in)
        assert all(counter.count(all_text(r)) < SUMMARIES_INPUT_TOKENS + 300 for r in calls)
        sessions = MemoryStore(store).view("episodic").units
        assert sessions and all(u.text == _reply({"messages": []}) for u in sessions)
        # a plain index of the same book: current, no call, the summaries kept
        assert (
            main(["index", str(STORY), "--store", str(store), "--quiet", "--llm", "extractive"])
            == 0
        )
        assert len(server.requests) == len(calls)
        assert [u.text for u in MemoryStore(store).view("episodic").units] == [
            u.text for u in sessions
        ]
