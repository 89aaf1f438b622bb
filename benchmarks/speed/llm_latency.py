"""Seconds and input tokens per question with the local model, per preset, on a ~100K-token book.

Store: the first narrativeqa_lit dev book of ``common.NQA_LATENCY_BOOKS`` (Anne of the Island,
~100K tokens), built once under ``/tmp/ms_bench`` and reused. Questions: its first N dev
questions (default 6). Each preset answers every question through the full graph with the
local backend (Qwen2.5-Coder-1.5B-Instruct via llama.cpp, temperature 0); the server is
started once and shared, and one untimed warm-up question loads everything first.

    python benchmarks/speed/llm_latency.py --bench ../shared/bench [--n 6] [--preset naive,mia-agent,mindscape]

Targets on a 2-core machine (the local-model issue): ``mindscape`` p50 <= 30 s and <= 8K input
tokens per question at its default budget. The issue measured ~100 prompt tokens/s on two idle
cores; machines here vary (35-100), so the script first times one ~1,000-token prompt
(``prompt_tok_s``) and also reports each p50 scaled to 100 prompt tokens/s (``p50_s_at_100``:
prompt processing dominates every call). Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.common import NQA_LATENCY_BOOKS, latency_stores, log
from mindscape.deps import Deps  # noqa: E402
from mindscape.embeddings import load_embedder  # noqa: E402
from mindscape.eval.bench import load_questions  # noqa: E402
from mindscape.eval.metrics import token_f1  # noqa: E402
from mindscape.graphs.qa import answer_question  # noqa: E402
from mindscape.llm import LLMSettings  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default="../shared/bench")
    ap.add_argument("--n", type=int, default=6, help="questions per preset")
    ap.add_argument("--preset", default="naive,mia-agent,mindscape")
    args = ap.parse_args()

    embedder = load_embedder()
    store, docs = latency_stores(args.bench, embedder, (1,))[1]
    book = NQA_LATENCY_BOOKS[0]
    questions = [
        q for q in load_questions(args.bench, "narrativeqa_lit", "dev") if q.doc_id == book
    ]
    questions = questions[: args.n + 1]
    deps = Deps(store=store, embedder=embedder, llm_settings=LLMSettings(backend="local"))
    warm, timed = questions[0], questions[1:]
    log(f"book {book} ({docs[0].title}); warm-up question, then {len(timed)} per preset")
    answer_question(
        {"question": warm.question, "doc_id": book},
        preset="naive",
        store=str(store.path),
        deps=deps,
    )

    tok_s = prompt_throughput(deps, " ".join(docs[0].text.split()[:800]))
    log(f"prompt throughput: {tok_s:.0f} tokens/s")
    rows = {}
    for preset in [p.strip() for p in args.preset.split(",") if p.strip()]:
        secs, tokens, calls, f1 = [], [], [], []
        for q in timed:
            t0 = time.perf_counter()
            out = answer_question(
                {"question": q.question, "doc_id": book},
                preset=preset,
                store=str(store.path),
                deps=deps,
            )
            secs.append(time.perf_counter() - t0)
            tokens.append(out.get("tokens_in", 0))
            calls.append(out.get("llm_calls", 0))
            f1.append(token_f1(out["answer"], q.answers))
            log(
                f"  {preset:10} {secs[-1]:6.1f}s {tokens[-1]:6d} tok {calls[-1]} calls  {out['answer'][:60]!r}"
            )
        rows[preset] = {
            "p50_s": round(statistics.median(secs), 1),
            "max_s": round(max(secs), 1),
            "p50_s_at_100": round(statistics.median(secs) * tok_s / 100, 1),
            "p50_tokens_in": int(statistics.median(tokens)),
            "max_tokens_in": max(tokens),
            "mean_calls": round(statistics.mean(calls), 2),
            "f1": round(statistics.mean(f1), 3),
            "n": len(timed),
        }
    print(f"prompt throughput here: {tok_s:.0f} tokens/s")
    print(
        f"{'preset':10} {'p50 s':>7} {'@100/s':>7} {'max s':>7} {'p50 tok':>8} {'max tok':>8} "
        f"{'calls':>6} {'F1':>6}"
    )
    for preset, r in rows.items():
        print(
            f"{preset:10} {r['p50_s']:7.1f} {r['p50_s_at_100']:7.1f} {r['max_s']:7.1f} "
            f"{r['p50_tokens_in']:8d} {r['max_tokens_in']:8d} {r['mean_calls']:6.2f} {r['f1']:6.3f}"
        )
    print(
        json.dumps(
            {
                "book": book,
                "questions": len(timed),
                "prompt_tok_s": round(tok_s, 1),
                "presets": rows,
            }
        )
    )


def prompt_throughput(deps: Deps, text: str) -> float:
    """Prompt tokens per second of the local server: one prompt of `text`, one output token."""
    chat = deps.get_chat().bind(max_tokens=1)
    reply = chat.invoke(f"Repeat the first word of this text.\n{text}")  # warms the server too
    t0 = time.perf_counter()
    reply = chat.invoke(f"Say the last word of this text.\n{text}")
    seconds = time.perf_counter() - t0
    tokens = (getattr(reply, "usage_metadata", None) or {}).get("input_tokens", 0)
    return tokens / seconds if seconds > 0 and tokens else float("nan")


if __name__ == "__main__":
    main()
