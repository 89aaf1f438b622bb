"""Warm per-query latency of signature selection + tri-layer retrieval at ~100K and ~1M tokens.

Stores: the first narrativeqa_lit dev book of ``common.NQA_LATENCY_BOOKS`` (~100K tokens) and
all ten (~1M tokens) in one store, built once under ``/tmp/ms_bench`` and reused. Questions:
the dev questions of the ten books, for both stores (distinct texts, so nothing is served from
the query cache).

Per query it times: embedding the query, the coverage-aware signature, and `retrieve` with
the default settings (all enabled layers, budgets packed). ``total`` is their sum — what one
agent step costs before any LLM call. The retriever is warmed first (cached arrays, BM25,
token counts) and a few queries are run untimed.

    python benchmarks/speed/retrieval_latency.py --bench ../shared/bench

Prints a table and, as its last line, one JSON object with p50/p95 per store size.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.common import NQA_LATENCY_BOOKS, latency_stores, limit_threads, log, percentiles
from mindscape.embeddings import load_embedder  # noqa: E402
from mindscape.eval.bench import load_questions  # noqa: E402
from mindscape.memory.retrieval.retriever import RetrievalSettings  # noqa: E402
from mindscape.run import default_retriever, default_settings  # noqa: E402

TARGETS_MS = {1: 50.0, 10: 150.0}


def run(
    store, docs, questions, *, n_queries: int, warmup: int, settings: RetrievalSettings
) -> dict:
    retriever = default_retriever(store, load_embedder())
    t0 = time.perf_counter()
    retriever.warm()
    warm_s = time.perf_counter() - t0
    texts = list(dict.fromkeys(q.question for q in questions))
    for q in texts[:warmup]:
        retriever.retrieve(q, signature=retriever.signature(q), settings=settings)
    timed = texts[warmup : warmup + n_queries]
    parts: dict[str, list[float]] = {
        "embed": [],
        "signature": [],
        "retrieve": [],
        "total": [],
        "sig+retrieve": [],
    }
    for q in timed:
        t0 = time.perf_counter()
        retriever.embed_query(q)
        t1 = time.perf_counter()
        sig = retriever.signature(q)
        t2 = time.perf_counter()
        retriever.retrieve(q, signature=sig, settings=settings)
        t3 = time.perf_counter()
        parts["embed"].append((t1 - t0) * 1e3)
        parts["signature"].append((t2 - t1) * 1e3)
        parts["retrieve"].append((t3 - t2) * 1e3)
        parts["sig+retrieve"].append((t3 - t1) * 1e3)
        parts["total"].append((t3 - t0) * 1e3)
    sc = retriever.scope()
    return {
        "tokens": sum(int(d.approx_tokens or 0) for d in docs),
        "chunks": sc.n_chunks,
        "units": {layer: len(v) for layer, v in sc.views.items()},
        "queries": len(timed),
        "warm_seconds": warm_s,
        "ms": {k: percentiles(v) for k, v in parts.items()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default="../shared/bench")
    ap.add_argument("--queries", type=int, default=100, help="timed queries per store")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument(
        "--books", default="1,10", help="store sizes, in books (1 ≈ 100K tokens, 10 ≈ 1M)"
    )
    ap.add_argument(
        "--threads", type=int, default=1, help="torch/BLAS threads (0 = library default)"
    )
    args = ap.parse_args(argv)
    limit_threads(args.threads)

    sizes = sorted({int(x) for x in args.books.split(",")})
    emb = load_embedder()
    stores = latency_stores(args.bench, emb, sizes)
    # three layers at 2000 tokens each (docs/retrieval.md measured these), not the mindscape
    # preset's four layers
    settings = default_settings(
        budgets={"veridical": 2000, "semantic": 2000, "episodic": 2000, "outline": 0}
    )
    results = {}
    # Questions of all the latency books, for every store: only their number and variety matter here.
    questions = load_questions(
        args.bench, "narrativeqa_lit", "dev", doc_ids=NQA_LATENCY_BOOKS[: max(sizes)]
    )
    for n in sizes:
        store, docs = stores[n]
        log(f"{n} book(s): {len(docs)} docs, {len(questions)} questions")
        results[n] = run(
            store, docs, questions, n_queries=args.queries, warmup=args.warmup, settings=settings
        )

    print(
        "\nwarm per-query latency (ms), default settings: coverage signature (hybrid E1), "
        "retrieve on veridical+semantic+episodic, budgets 2000 each"
    )
    print(f"{'store':>22s} {'part':>13s} {'p50':>8s} {'p95':>8s} {'mean':>8s} {'max':>8s}")
    for n, r in results.items():
        label = f"{n} book(s) ~{r['tokens'] / 1e3:.0f}K tok"
        for part in ("embed", "signature", "retrieve", "sig+retrieve", "total"):
            m = r["ms"][part]
            print(
                f"{label:>22s} {part:>13s} {m['p50']:8.1f} {m['p95']:8.1f} {m['mean']:8.1f} {m['max']:8.1f}"
            )
            label = ""
        print(
            f"{'':>22s} ({r['chunks']} chunks, {r['queries']} queries, warm-up {r['warm_seconds']:.1f}s; "
            f"target p50 <= {TARGETS_MS.get(n, float('nan')):.0f} ms: "
            f"{'met' if r['ms']['total']['p50'] <= TARGETS_MS.get(n, float('inf')) else 'MISSED'})"
        )
    summary = {
        "benchmark": "retrieval_latency",
        "books": list(NQA_LATENCY_BOOKS[: max(sizes)]),
        **{
            f"{n}book": {
                "tokens": r["tokens"],
                "chunks": r["chunks"],
                "p50_ms": round(r["ms"]["total"]["p50"], 2),
                "p95_ms": round(r["ms"]["total"]["p95"], 2),
                "p50_ms_without_embed": round(r["ms"]["sig+retrieve"]["p50"], 2),
                "p95_ms_without_embed": round(r["ms"]["sig+retrieve"]["p95"], 2),
                "target_p50_ms": TARGETS_MS.get(n),
            }
            for n, r in results.items()
        },
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
