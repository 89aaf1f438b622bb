"""LLM fallbacks (model replies that stayed unusable, answered by the extractive reasoner) are
shown beside calls and tokens: in report.json, report.md and `mindscape ask`'s output."""

from __future__ import annotations

from mindscape.commands.ask import render_text, result_json
from mindscape.eval.report import Provenance, build_report, render_markdown


def record(qid: str, fallbacks: int | None) -> dict:
    rec = {
        "preset": "mindscape",
        "qid": qid,
        "dataset": "toy",
        "task": "open_qa",
        "metrics": {"f1": 0.5},
        "llm_calls": 2,
        "tokens_in": 800,
        "tokens_out": 20,
        "latency_s": 1.0,
    }
    if fallbacks is not None:
        rec["llm_fallbacks"] = fallbacks
    return rec


def test_the_report_counts_fallbacks_beside_calls_and_tokens() -> None:
    report = build_report([record("a", 1), record("b", 0)], Provenance("cmd", "v"))
    cost = report["groups"][0]["cost"]
    assert cost["llm_fallbacks"]["total"] == 1 and cost["llm_fallbacks"]["mean"] == 0.5
    text = render_markdown(report)
    header = next(line for line in text.splitlines() if line.startswith("| preset | dataset"))
    assert "LLM calls / q | LLM fallbacks / q | tokens in / q" in header
    assert "LLM fallbacks total" in header
    assert "LLM fallbacks: " in text and "mindscape on toy: 1" in text


def test_no_fallback_no_note_and_old_records_say_n_a() -> None:
    text = render_markdown(build_report([record("a", 0)], Provenance("cmd", "v")))
    assert "LLM fallbacks / q" in text and "LLM fallbacks: " not in text
    old = render_markdown(build_report([record("a", None)], Provenance("cmd", "v")))
    row = next(line for line in old.splitlines() if line.startswith("| mindscape | toy"))
    assert "n/a" in row  # a record from before the field: not counted as 0


def test_ask_shows_its_fallbacks() -> None:
    out = {"answer": "x", "rounds": 1, "llm_calls": 2, "llm_fallbacks": 1, "stop_reason": "answer"}
    assert "2 LLM call(s) (1 LLM fallback: the extractive reasoner stood in)" in render_text(out)
    assert result_json(out)["llm_fallbacks"] == 1
    assert "fallback" not in render_text({**out, "llm_fallbacks": 0})
