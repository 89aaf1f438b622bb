"""What the trace and the map add to a question on a ~100K-token book (issue 48's target:
at most 200 ms, no extra model call).

The store is ``speed/retrieval_latency.py``'s one-book store (Anne of the Island, narrativeqa_lit
dev, ~102K tokens; built once under ``/tmp/ms_bench``). Each dev question of the book is
answered extractively (no model: the trace never calls one) by the QA graph, with the trace's
three functions timed where the graph calls them (``book_strips`` in init_signature,
``trace_fields`` and ``quote_pin`` in refine); then the map is drawn from ``ask``'s result as
SVG and as PNG (``ask --map``). Matplotlib's import, paid once per process, is timed apart.

    python benchmarks/speed/trace_cost.py --bench ../shared/bench

Prints one row per question and, as its last line, one JSON object (milliseconds: p50, p95,
max of the trace, of each map, of trace + SVG map, and of the whole question for scale).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

import mindscape.agents.init_signature as init_node  # noqa: E402
import mindscape.agents.refine as refine_node  # noqa: E402
from benchmarks.common import latency_stores, limit_threads, log, percentiles
from mindscape.commands.ask import result_json  # noqa: E402
from mindscape.context import Context  # noqa: E402
from mindscape.deps import Deps  # noqa: E402
from mindscape.embeddings import load_embedder  # noqa: E402
from mindscape.eval.bench import load_questions  # noqa: E402
from mindscape.graphs.qa import build_qa_graph  # noqa: E402

TARGET_MS = 200.0


def timed(spent: list[float], fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, adding the seconds each call takes to ``spent[0]``."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t0

    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default="../shared/bench")
    ap.add_argument("--questions", type=int, default=10, help="dev questions of the book")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    limit_threads(args.threads)
    embedder = load_embedder()
    store, docs = latency_stores(args.bench, embedder, (1,))[1]
    doc = docs[0]
    questions = [
        q for q in load_questions(args.bench, "narrativeqa_lit", "dev") if q.doc_id == doc.doc_id
    ][: args.questions]
    t0 = time.perf_counter()
    import matplotlib.figure  # noqa: F401  (the one-time import `ask --map` pays)

    import_ms = (time.perf_counter() - t0) * 1000
    from mindscape.trace.reading_map import write_map

    spent = [0.0]
    init_node.book_strips = timed(spent, init_node.book_strips)  # type: ignore[attr-defined]
    refine_node.trace_fields = timed(spent, refine_node.trace_fields)  # type: ignore[attr-defined]
    refine_node.quote_pin = timed(spent, refine_node.quote_pin)  # type: ignore[attr-defined]
    deps = Deps(store=store, embedder=embedder)
    app = build_qa_graph(deps).compile()
    ctx = Context(backend="extractive")
    app.invoke({"question": questions[0].question, "doc_id": doc.doc_id}, context=ctx)  # warm
    rows: dict[str, list[float]] = {k: [] for k in ("trace", "svg", "png", "trace+svg", "question")}
    out_dir = Path(tempfile.mkdtemp())
    print(f"{doc.title} ({doc.doc_id}), {store.view('veridical').__len__()} chunks")
    print("question | rounds | trace ms | svg ms | png ms | question ms | llm calls")
    for n, q in enumerate(questions):
        spent[0] = 0.0
        t0 = time.perf_counter()
        out = dict(app.invoke({"question": q.question, "doc_id": doc.doc_id}, context=ctx))
        question_ms = (time.perf_counter() - t0) * 1000
        trace_ms = spent[0] * 1000
        result = result_json(out)
        t0 = time.perf_counter()
        write_map(result, out_dir / f"{n}.svg")
        svg_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        write_map(result, out_dir / f"{n}.png")
        png_ms = (time.perf_counter() - t0) * 1000
        for key, value in zip(
            rows, (trace_ms, svg_ms, png_ms, trace_ms + svg_ms, question_ms), strict=True
        ):
            rows[key].append(value)
        print(
            f"{q.question[:50]:50} | {out['rounds']} | {trace_ms:7.1f} | {svg_ms:6.1f} | "
            f"{png_ms:6.1f} | {question_ms:8.1f} | {out['llm_calls']}"
        )
    log(f"maps in {out_dir}")
    summary = {
        k: {s: round(v, 1) for s, v in percentiles(vals).items()} for k, vals in rows.items()
    }
    p95 = summary["trace+svg"]["p95"]
    print(
        f"trace + SVG map: p50 {summary['trace+svg']['p50']:.1f} ms, p95 {p95:.1f} ms "
        f"(target <= {TARGET_MS:.0f} ms: {'met' if p95 <= TARGET_MS else 'NOT met'}); "
        f"PNG map p95 {summary['png']['p95']:.1f} ms; matplotlib import {import_ms:.0f} ms once"
    )
    print(json.dumps({"book": doc.doc_id, "ms": summary, "matplotlib_import_ms": round(import_ms)}))


if __name__ == "__main__":
    main()
