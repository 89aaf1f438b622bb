"""`mindscape index` and `mindscape inspect`."""

from __future__ import annotations

import argparse
import json
import sys

from mindscape.commands.common import add_model_options, add_store_option, llm_from_args, warn


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `index` and `inspect`."""
    p = sub.add_parser(
        "index",
        help="build the layered memory of documents into a store",
        description="Index .txt/.md files and bench documents.jsonl files into a store. "
        "Unchanged documents are skipped; an interrupted run resumes from its cache.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help=".txt, .md or documents.jsonl")
    add_store_option(p)
    p.add_argument(
        "--doc-id",
        action="append",
        default=None,
        metavar="ID",
        help="only these documents of a .jsonl input (repeatable)",
    )
    p.add_argument(
        "--chunk-size", type=int, default=128, help="tokens per chunk (default %(default)s)"
    )
    p.add_argument(
        "--overlap",
        type=int,
        default=16,
        help="overlap tokens between chunks (default %(default)s)",
    )
    p.add_argument(
        "--window",
        type=int,
        default=20,
        help="chunks per episodic session, W (default %(default)s)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the per-document reports and store summary as JSON",
    )
    add_model_options(p)
    p.add_argument(
        "--index-llm",
        action="store_true",
        default=None,
        help="with the local model, also use it for summaries, outline and triples "
        "($MINDSCAPE_INDEX_LLM; off by default: hours of LLM time for a long book)",
    )
    p.set_defaults(func=run_index)

    q = sub.add_parser("inspect", help="print what a store holds")
    add_store_option(q)
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=run_inspect)


def run_index(args: argparse.Namespace) -> int:
    """Validate every input, then index each document."""
    from dataclasses import asdict

    from mindscape.sources import load_sources

    docs = load_sources(args.files, args.doc_id)  # raises before the store is touched
    for d in docs:
        for w in d.warnings:
            warn(w)

    from mindscape.embeddings import load_embedder, spec_model_id
    from mindscape.memory.indexer import IndexConfig, Indexer, IndexReport, is_current
    from mindscape.memory.store import MemoryStore

    config = IndexConfig(chunk_size=args.chunk_size, chunk_overlap=args.overlap, window=args.window)
    store = MemoryStore(args.store)
    llm = llm_from_args(args, store.cache)
    fingerprint = config.fingerprint(
        spec_model_id(args.embedder), llm.model_id if llm else "offline"
    )
    indexer = None  # the embedding model loads only if some document needs work
    reports = []
    for n, d in enumerate(docs, 1):
        if is_current(store, d.doc_id, d.text, fingerprint):
            row = store.cache.doc(d.doc_id) or {}
            r = IndexReport(
                d.doc_id, skipped=True, tokens=row.get("tokens", 0), layers=row.get("layers", {})
            )
        else:
            if indexer is None:
                indexer = Indexer(
                    store,
                    load_embedder(args.embedder),
                    llm=llm,
                    config=config,
                    progress=not args.quiet,
                )
            r = indexer.index(d.doc_id, d.text, title=d.title)
        reports.append(r)
        if not args.json:
            what = (
                "unchanged, skipped"
                if r.skipped
                else f"{r.seconds:.1f}s, peak memory {r.peak_rss_mb} MB"
            )
            layers = ", ".join(f"{k} {v}" for k, v in r.layers.items())
            print(
                f"[{n}/{len(docs)}] {d.doc_id}: {r.tokens} tokens; {layers} ({what})",
                file=sys.stderr,
            )
    summary = store.summary()
    if args.json:
        print(json.dumps({"reports": [asdict(r) for r in reports], **summary}, indent=2))
    else:
        _print_summary(summary)
    return 0


def run_inspect(args: argparse.Namespace) -> int:
    """Print the store summary."""
    from mindscape.memory.store import MemoryStore

    store = MemoryStore.open_existing(args.store)
    summary = store.summary()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_summary(summary)
    return 0


def _print_summary(s: dict) -> None:
    print(f"store {s['store']}: {s['documents']} document(s)")
    for layer, n in s["layers"].items():
        print(f"  {layer:<10} {n:>7} units")
    for d in s["docs"]:
        print(f"  - {d['doc_id']}: {d.get('title') or ''} ({d.get('tokens') or '?'} tokens)")
