"""Answer F1 of `mom/recall.py --answer`: questions answered under every method's preset over
its memory, kept in a resumable file, summarised with bootstrap CIs and printed as a table."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import (
    cache_root,
    fmt_ci,
    llm_namespace,
    log,
    mean_ci,
    paired_diffs,
    print_paired,
    spread,
)
from benchmarks.mom.build import PAIRS, Builder, Memory, Method, letters

ANSWERS_FILE = "mom_recall_answers.jsonl"
"""Answered questions, one JSON object a line, in the benchmarks' cache (resumable)."""


def answer_key(
    method: Method, memory: Memory, qid: str, pool: Sequence[str] | None, model: str
) -> str:
    """What an answer depends on: the method, the memory's index fingerprint (N and k
    included), the question, the pool it is asked against and the answering model."""
    from mindscape.memory.cache import content_key

    scope = ",".join(sorted(pool)) if pool is not None else "story"
    return content_key(
        json.dumps([method.name, method.preset, memory.fingerprint, qid, scope, model])
    )


def load_answers(path: Path) -> dict[str, dict[str, Any]]:
    """The answers of earlier runs by key (a line cut short by a killed run is dropped)."""
    from mindscape.eval.runner import read_records

    return {rec["key"]: rec for rec in read_records(path)}


def answer_one(
    m: Method, memory: Memory, q: Any, scope: list[str] | None, deps: Any, key: str
) -> dict[str, Any]:
    """One question answered under `m`'s preset over `memory`, as the record kept."""
    from mindscape.eval.bench import system_view
    from mindscape.eval.metrics import token_f1
    from mindscape.graphs.qa import answer_question

    view = {**system_view(q), "doc_ids": scope or [q.doc_id]}
    t0 = time.perf_counter()
    res = answer_question(view, preset=m.preset, store=str(memory.path), deps=deps)
    answer = str(res.get("answer") or "")
    return {
        "key": key,
        "method": m.name,
        "qid": q.qid,
        "answer": answer,
        "f1": token_f1(answer, q.answers),
        "llm_calls": int(res.get("llm_calls", 0)),
        "tokens_in": int(res.get("tokens_in", 0)),
        "tokens_out": int(res.get("tokens_out", 0)),
        "seconds": round(time.perf_counter() - t0, 2),
    }


def answer_all(
    builder: Builder,
    rows: Sequence[Method],
    questions: Sequence[Any],
    pool: set[str] | None,
    deps: Any,
    model: str,
) -> dict[str, list[dict[str, Any]]]:
    """Every question answered under every method's preset and memory (the ``mom`` preset
    is one answer call over the late-fused chunks); records are appended to
    :data:`ANSWERS_FILE` as they finish and a rerun answers only what is missing."""
    path = cache_root() / ANSWERS_FILE
    done = load_answers(path)
    scope = sorted(pool) if pool is not None else None
    out: dict[str, list[dict[str, Any]]] = {}
    for m in rows:
        memory = builder.memories[m.memory]
        out[m.name] = []
        for n, q in enumerate(questions, 1):
            key = answer_key(m, memory, q.qid, scope, model)
            if key not in done:
                done[key] = answer_one(m, memory, q, scope, deps, key)
                with path.open("a") as f:
                    f.write(json.dumps(done[key]) + "\n")
                log(f"  answered {m.name} {q.qid}: F1 {done[key]['f1']:.2f} [{n}/{len(questions)}]")
            out[m.name].append(done[key])
    return out


def summarize_answers(
    records: Mapping[str, Sequence[Mapping[str, Any]]], n_resamples: int = 2000
) -> dict[str, Any]:
    """Per method the mean answer F1 with its bootstrap 95% CI and the mean LLM calls, input
    tokens and seconds a question; per pair of :data:`PAIRS` the paired F1 difference."""
    f1 = {name: [float(r["f1"]) for r in recs] for name, recs in records.items()}
    rows = {}
    for name, recs in records.items():
        n = max(len(recs), 1)
        rows[name] = {
            **mean_ci(f1[name], n_resamples),
            "n": len(recs),
            "llm_calls": round(sum(r["llm_calls"] for r in recs) / n, 2),
            "tokens_in": round(sum(r["tokens_in"] for r in recs) / n, 1),
            "seconds": round(sum(r["seconds"] for r in recs) / n, 1),
        }
    return {"answer_f1": rows, "paired_answer_f1_points": paired_diffs(f1, PAIRS, n_resamples)}


def answer_deps(settings: Any, emb: Any) -> Any:
    """The graph's dependencies for answering: the benchmark's embedder and a chat model
    built from `settings` (the local model by default)."""
    from mindscape.deps import Deps

    return Deps(embedder=emb, llm_settings=settings)


def answer_report(
    args: argparse.Namespace,
    builder: Builder,
    emb: Any,
    rows: Sequence[Method],
    questions: Sequence[Any],
    pool: set[str] | None,
) -> dict[str, Any]:
    """Answers `args.answer` questions under every method and prints their F1 table; returns
    the figures for the JSON line."""
    from mindscape.commands.common import settings_from_args

    settings = settings_from_args(llm_namespace(args)).resolved()
    model = settings.model_name()
    asked = spread(questions, args.answer)
    deps = answer_deps(settings, emb)
    summary = summarize_answers(answer_all(builder, rows, asked, pool, deps, model))
    print(
        f"\nanswer F1, {len(asked)} questions ({len({q.doc_id for q in asked})} stories), "
        f"answered by {model}; per question: LLM calls, input tokens, seconds"
    )
    print(f"{'method':52s} {'F1':>7s}  95% CI{'':14s} calls  tok_in      s")
    for m in rows:
        r = summary["answer_f1"][m.name]
        print(
            f"{m.label:52s} {fmt_ci(r)} {r['llm_calls']:5.2f} {r['tokens_in']:7.0f} "
            f"{r['seconds']:6.1f}"
        )
    print_paired(summary["paired_answer_f1_points"], "F1", letters(rows))
    return {"answered": len(asked), "answer_model": model, **summary}
