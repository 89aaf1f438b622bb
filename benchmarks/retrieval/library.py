"""A library of books: index throughput on Ray, query latency, `ask`'s memory, routing recall.

    python benchmarks/retrieval/library.py --bench ../shared/bench            # 100 books
    python benchmarks/retrieval/library.py ... --books 20                     # a quick run
    python benchmarks/retrieval/library.py ... --skip-index                   # reuse the store as it is

1. **Index.** ``--books`` bench documents (default 100: every FairytaleQA, QuALITY, SFiction,
   NoCha and ComoRAG document, 73 in all, and the 27 shortest NarrativeQA-Lit books; about
   2.5M tokens. 133 is every bench document, about 8.7M tokens) go into one store through
   `mindscape.indexing.library.index_library`, on a local Ray with one worker per CPU, offline. The
   store lives under the benchmarks' cache and is built from scratch (``--skip-index`` reuses
   it). Throughput is tokens per second of wall time, Ray's start-up included.
2. **Embedding only.** The same machine embeds exactly the texts indexing embedded (every
   unit of every layer, and the chunks in their book's context), in this process with every
   core, for a sample of the books (every ``--sample-every``-th by size, so long and short ones
   are both in). Its throughput is the sample's tokens per second; the ratio embedding-only /
   index throughput is the figure (target ≤ 1.2). Both are measured in this one run.
3. **Latency.** Over the whole library (no ``--doc``): the query embedding, the signature
   and the tri-layer retrieval of the default run, per question, for ``--questions`` random
   questions of every open-QA dataset. p50 and p95, with and without the query embedding
   (targets: p50 ≤ 100 ms, p95 ≤ 250 ms).
4. **Memory.** ``mindscape ask`` over the whole library with the extractive backend, in a child
   process: its peak RSS (target ≤ 3 GB) and wall time.
5. **Routing.** FairytaleQA's dev+test questions with gold evidence, R@10 of naive, hybrid and
   mia-rag, (a) within the 46 FairytaleQA stories and (b) within a pool of 100: those 46 plus 54
   distractor books drawn (``--seed``) from the library's other documents. Paired bootstrap 95%
   CIs of mia-rag − hybrid.

The last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.common import cache_root, chunk_spans, limit_threads, log, percentiles
from benchmarks.retrieval.variants import KS, MAIN, evaluate, paired, variants
from mindscape.embeddings import encode, load_embedder, resolve_spec, spec_model_id  # noqa: E402
from mindscape.eval.bench import load_documents, load_questions  # noqa: E402
from mindscape.indexing.indexer import IndexConfig  # noqa: E402
from mindscape.indexing.library import index_library  # noqa: E402
from mindscape.indexing.sources import SourceDoc  # noqa: E402
from mindscape.indexing.writer import doc_context  # noqa: E402
from mindscape.memory.cache import in_context  # noqa: E402
from mindscape.memory.store import MemoryStore  # noqa: E402
from mindscape.memory.types import LAYERS  # noqa: E402
from mindscape.run import default_retriever  # noqa: E402

DATASETS = (
    "fairytaleqa",
    "narrativeqa_lit",
    "quality_leval",
    "sfiction_leval",
    "nocha_sample",
    "comorag_cinderella",
)
OPEN_QA = ("fairytaleqa", "narrativeqa_lit", "comorag_cinderella")


def library_docs(bench: str, books: int) -> list[SourceDoc]:
    """`books` bench documents: every story and book of the other datasets, then the shortest
    NarrativeQA-Lit books up to that count (133: every bench document)."""
    docs = [
        SourceDoc(d.doc_id, d.text, d.title, f"{ds}/{d.split}")
        for ds in DATASETS
        if ds != "narrativeqa_lit"
        for d in load_documents(bench, ds)
    ]
    nqa = sorted(load_documents(bench, "narrativeqa_lit"), key=lambda d: len(d.text))
    docs += [SourceDoc(d.doc_id, d.text, d.title, "narrativeqa_lit") for d in nqa]
    return docs[:books]


def index_phase(store: MemoryStore, docs: list[SourceDoc], workers: int | None) -> dict:
    """Index the library on Ray; wall time and tokens."""
    t0 = time.perf_counter()

    def progress(n: int, total: int, outcome: Any) -> None:
        if n % 10 == 0 or n == total:
            log(f"  {n}/{total} books ({time.perf_counter() - t0:.0f}s)")

    run = index_library(
        store,
        docs,
        embedder=resolve_spec(None),
        config=IndexConfig(),
        emb_id=spec_model_id(None),
        workers=workers,
        progress=progress,
    )
    built = [r for r in run.reports if not r.skipped]
    tokens = sum(r.tokens for r in built)
    return {
        "books": len(run.reports),
        "failed": [f.doc_id for f in run.failures],
        "built": len(built),
        "tokens_built": tokens,
        "tokens_library": sum(r.tokens for r in run.reports),
        "workers": run.workers,
        "index_s": round(run.seconds, 1),
        "index_tokens_per_s": round(tokens / run.seconds, 1) if built else None,
        "worker_embed_s": round(sum(r.embed_seconds for r in built), 1),
        "worker_build_s": round(sum(r.seconds for r in built), 1),
    }


def embed_only_phase(store: MemoryStore, docs: list[SourceDoc], every: int) -> dict:
    """Embed the texts indexing embedded, for every `every`-th book by size, in process."""
    by_size = sorted(docs, key=lambda d: -len(d.text))
    sample = by_size[::every]
    emb = load_embedder()
    encode(emb, ["warm up the model"] * 8)
    texts: list[str] = []
    tokens = 0
    for d in sample:
        ids = {d.doc_id}
        for layer in LAYERS:
            texts += [u.text for u in store.view(layer, ids).units]
        context = doc_context(d.doc_id, d.title)
        texts += [in_context(context, u.text) for u in store.view("veridical", ids).units]
        tokens += (store.cache.doc(d.doc_id) or {}).get("tokens", 0)
    t0 = time.perf_counter()
    for i in range(0, len(texts), 256):
        encode(emb, texts[i : i + 256])
    secs = time.perf_counter() - t0
    return {
        "sample_books": [d.doc_id for d in sample],
        "sample_tokens": tokens,
        "sample_texts": len(texts),
        "embed_only_s": round(secs, 1),
        "embed_only_tokens_per_s": round(tokens / secs, 1),
    }


def latency_phase(store: MemoryStore, bench: str, n: int, seed: int) -> dict:
    """Query embedding + signature + retrieval over the whole library, per question."""
    emb = load_embedder()
    retriever = default_retriever(store, emb)
    t0 = time.perf_counter()
    retriever.warm(None)
    warm_s = time.perf_counter() - t0
    held = {d["doc_id"] for d in store.documents()}
    pool = [
        q.question
        for ds in OPEN_QA
        for q in load_questions(bench, ds)
        if q.doc_id in held and q.task == "open_qa"
    ]
    questions = random.Random(seed).sample(pool, min(n, len(pool)))
    total, search = [], []
    for q in questions:
        t = time.perf_counter()
        qvec = encode(emb, [q])
        t_emb = time.perf_counter()
        sig = retriever.signature(q)
        retriever.retrieve(q, signature=sig)
        done = time.perf_counter()
        total.append((done - t) * 1000)
        search.append((done - t_emb) * 1000)
        del qvec
    return {
        "questions": len(questions),
        "warm_s": round(warm_s, 1),
        "chunks": store.count("veridical"),
        "units": sum(store.count(layer) for layer in LAYERS),
        "total_ms": {k: round(v, 1) for k, v in percentiles(total).items()},
        "without_query_embedding_ms": {k: round(v, 1) for k, v in percentiles(search).items()},
    }


def ask_memory_phase(store_path: Path) -> dict:
    """Peak RSS and wall time of `mindscape ask` over the whole library, extractive backend."""
    cmd = [
        sys.executable,
        "-m",
        "mindscape",
        "ask",
        "What did the bird throw down to Cinderella?",
        "--store",
        str(store_path),
        "--llm",
        "extractive",
        "--json",
        "--no-warm",  # this process's own memory and time, not a warm process's
    ]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    secs = time.perf_counter() - t0
    peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 / 1024
    out = json.loads(done.stdout)
    books = sorted({e["doc_id"] for e in out["evidence"]})
    return {"ask_s": round(secs, 1), "ask_peak_rss_gb": round(peak_gb, 3), "ask_books": books}


def routing_phase(store: MemoryStore, bench: str, seed: int) -> dict:
    """R@10 of naive, hybrid and mia-rag within the 46 FairytaleQA stories and a pool of 100."""
    emb = load_embedder()
    retriever = default_retriever(store, emb)
    spans = chunk_spans(store)
    held = sorted(d["doc_id"] for d in store.documents())
    stories = [d for d in held if d.startswith("ftqa-")]
    others = [d for d in held if not d.startswith("ftqa-")]
    distractors = random.Random(seed).sample(others, min(100 - len(stories), len(others)))
    questions = [
        q for s in ("dev", "test") for q in load_questions(bench, "fairytaleqa", s) if q.evidence
    ]
    rows = [v for v in variants(False) if v.name in MAIN]
    out: dict[str, Any] = {}
    for name, scope in (("pool46", set(stories)), ("pool100", set(stories) | set(distractors))):
        retriever.warm(scope)
        t0 = time.perf_counter()
        scores = evaluate(retriever, questions, spans, rows, max(KS), doc_ids=scope)
        log(f"  routing {name}: {len(questions)} questions ({time.perf_counter() - t0:.0f}s)")
        out[name] = {
            "stories": len(scope),
            "questions": len(questions),
            "recall@10": {m: round(scores.mean(m, 10), 4) for m in MAIN},
            "mia-rag - hybrid": paired(scores, "mia-rag", "hybrid"),
            "mia-rag - naive": paired(scores, "mia-rag", "naive"),
        }
    out["distractors"] = sorted(distractors)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default="../shared/bench")
    ap.add_argument(
        "--books",
        type=int,
        default=100,
        help="library size: the 73 documents of the other datasets, then the shortest "
        "NarrativeQA-Lit books (default 100; 133: every bench document)",
    )
    ap.add_argument("--workers", type=int, default=None, help="Ray workers (default: every CPU)")
    ap.add_argument("--skip-index", action="store_true", help="reuse the store as it is")
    ap.add_argument(
        "--keep",
        action="store_true",
        help="keep the books the store already holds (index only the others; the throughput "
        "is then the new books')",
    )
    ap.add_argument("--sample-every", type=int, default=10, help="embedding-only sample stride")
    ap.add_argument(
        "--new-from",
        type=int,
        default=0,
        help="draw the embedding-only sample from the books after the first N only (the ones "
        "a --keep run built)",
    )
    ap.add_argument("--questions", type=int, default=300, help="questions for the latency")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-routing", action="store_true")
    ap.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads for the latency phase (0: torch's default, as `ask` runs; "
        "benchmarks/speed/retrieval_latency.py uses 1)",
    )
    args = ap.parse_args(argv)

    docs = library_docs(args.bench, args.books)
    path = cache_root() / "library"
    if not (args.skip_index or args.keep) and path.exists():
        import shutil

        shutil.rmtree(path)
    store = MemoryStore(path)
    log(f"library: {len(docs)} books → {path}")
    out: dict[str, Any] = {"store": str(path), "cpus": os.cpu_count()}
    if not args.skip_index:
        out["index"] = index_phase(store, docs, args.workers)
        log(f"index: {out['index']}")
    out["embed_only"] = embed_only_phase(store, docs[args.new_from :], args.sample_every)
    if "index" in out:
        ratio = out["embed_only"]["embed_only_tokens_per_s"] / out["index"]["index_tokens_per_s"]
        out["throughput_ratio"] = round(ratio, 3)
    log(f"embedding only: {out['embed_only']}")
    limit_threads(args.threads)
    out["latency"] = latency_phase(store, args.bench, args.questions, args.seed)
    out["latency"]["threads"] = args.threads
    log(f"latency: {out['latency']}")
    store.close()
    out["memory"] = ask_memory_phase(path)
    log(f"memory: {out['memory']}")
    if not args.skip_routing:
        store = MemoryStore(path)
        out["routing"] = routing_phase(store, args.bench, args.seed)
        store.close()
    print_table(out)
    print(json.dumps(out))
    return 0


def print_table(out: dict[str, Any]) -> None:
    ix, eo, lat, mem = out.get("index"), out["embed_only"], out["latency"], out["memory"]
    if ix:
        print(
            f"index           {ix['built']} of {ix['books']} books, {ix['tokens_built']} tokens in {ix['index_s']} s on "
            f"{ix['workers']} Ray workers: {ix['index_tokens_per_s']} tokens/s"
        )
        print(
            f"embedding only  {eo['embed_only_tokens_per_s']} tokens/s on a sample of "
            f"{len(eo['sample_books'])} books; ratio {out['throughput_ratio']} (target <= 1.2)"
        )
    t, s = lat["total_ms"], lat["without_query_embedding_ms"]
    print(
        f"latency         p50 {t['p50']} ms, p95 {t['p95']} ms ({lat['questions']} questions; "
        f"without the query embedding p50 {s['p50']}, p95 {s['p95']}); targets 100 / 250"
    )
    print(f"ask             peak RSS {mem['ask_peak_rss_gb']} GB (target <= 3), {mem['ask_s']} s")
    for name in ("pool46", "pool100"):
        r = out.get("routing", {}).get(name)
        if r:
            d = r["mia-rag - hybrid"]
            print(
                f"routing {name:7s} R@10 "
                + ", ".join(f"{m} {v:.3f}" for m, v in r["recall@10"].items())
                + f"; mia-rag - hybrid {d['mean']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}] points"
            )


if __name__ == "__main__":
    raise SystemExit(main())
