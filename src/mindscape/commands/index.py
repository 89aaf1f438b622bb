"""`mindscape index`."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from mindscape.commands.common import (
    add_command,
    add_model_options,
    add_quiet_option,
    add_store_option,
    llm_from_args,
    say,
    settings_from_args,
    warn,
)
from mindscape.commands.inspect import print_summary
from mindscape.errors import InputError
from mindscape.indexing.config import IndexConfig

if TYPE_CHECKING:
    from mindscape.indexing.indexer import IndexReport
    from mindscape.memory.store import MemoryStore


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `index`."""
    p = add_command(sub, "index", run_index)
    p.add_argument("files", nargs="+", metavar="FILE", help=".txt, .md or documents.jsonl")
    add_store_option(p)
    _add_index_options(p)
    _add_output_options(p)
    add_model_options(p)
    _add_llm_index_options(p)
    _add_ray_options(p)


def _add_index_options(p: argparse.ArgumentParser) -> None:
    """What to index and how: `--doc-id`, the chunking, the sessions and the MoM paths."""
    p.add_argument(
        "--doc-id",
        action="append",
        default=None,
        metavar="ID",
        help="only these documents of a .jsonl input (repeatable)",
    )
    for option, field, metavar, what in INDEX_OPTIONS:
        default = getattr(IndexConfig(), field)
        p.add_argument(
            option,
            type=int,
            default=None,
            dest=field,
            metavar=metavar,
            help=f"{what} (default {default})",
        )


INDEX_OPTIONS: tuple[tuple[str, str, str, str], ...] = (
    ("--chunk-size", "chunk_size", "N", "tokens per chunk"),
    ("--overlap", "chunk_overlap", "N", "overlap tokens between chunks"),
    ("--window", "window", "W", "chunks per episodic session, W"),
    (
        "--mom-paths",
        "mom_paths",
        "N",
        "when an index LLM writes the outline: candidate MoM memories per outline section, one "
        "chosen by the local model's token probabilities (1: one greedy memory, no scoring)",
    ),
    ("--mom-k", "mom_k", "K", "k of the rank fusion that chooses among the MoM paths"),
)
"""The options that set an IndexConfig field: (option, field, metavar, help). Each defaults to
None, so IndexConfig alone holds the default (the help shows it)."""


def _add_ray_options(p: argparse.ArgumentParser) -> None:
    """How a library is built: `--ray-address`, `--workers`, `--no-ray`."""
    p.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="build the books on this Ray cluster ('auto', or ray://HOST:10001; mindscape "
        "must be installed on its workers) instead of a local Ray started for the run",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="books built at once, each by a one-thread worker (default: one per CPU)",
    )
    p.add_argument(
        "--no-ray",
        action="store_true",
        help="build every book in this process, one after another (an index LLM always does)",
    )


def _add_output_options(p: argparse.ArgumentParser) -> None:
    """What `index` prints: `--quiet`, `--json`, `--estimate`."""
    add_quiet_option(p)
    p.add_argument(
        "--json",
        action="store_true",
        help="print the per-document reports and store summary as JSON",
    )
    p.add_argument(
        "--estimate",
        action="store_true",
        help="print the LLM calls, tokens and seconds indexing would take with the configured "
        "backend, then stop (no model is called, nothing is written)",
    )


def _add_llm_index_options(p: argparse.ArgumentParser) -> None:
    """The index-time LLM: `--index-llm`, `--index-llm-parts` and `--summaries` (LLM session
    summaries added after the plain index)."""
    p.add_argument(
        "--index-llm",
        action="store_true",
        default=None,
        help="with the local model, also use it at index time, for the parts "
        "--index-llm-parts names (default: summaries, outline and triples) "
        "($MINDSCAPE_INDEX_LLM; off by default: hours of LLM time for a long book)",
    )
    p.add_argument(
        "--index-llm-parts",
        default=None,
        metavar="PARTS",
        help="with an index LLM (--index-llm or an endpoint): the parts it writes, "
        "comma-separated among episodic, semantic, outline, triples (summaries: episodic and "
        "semantic; all: every part, the default); the others are built as without an LLM (extractive "
        "summaries, the offline outline, no triples)",
    )
    p.add_argument(
        "--summaries",
        action="store_true",
        help="index as usual (offline), then add session summaries written by the local model "
        "(or the endpoint) in a second pass, each reading its session's most central "
        "sentences: the estimate is printed first, `ask` reads the plain index meanwhile, and "
        "a stopped run resumes where it stopped (--index-llm-parts: other parts instead)",
    )


def run_index(args: argparse.Namespace) -> int:
    """Build the layered memory of documents into a store.

    Index .txt/.md files, folders of them and bench documents.jsonl files into a store.
    Unchanged documents are skipped; an interrupted run resumes (a library keeps every book
    it finished). Several books are built in parallel on Ray (local by default,
    --ray-address for a cluster); a bad book is reported and the others indexed (exit 1).

    Examples:
        mindscape index book.txt --store runs/book
        mindscape index library/ --store runs/library   # every .txt/.md/.jsonl below, on Ray
        mindscape index book.txt --estimate            # LLM calls and tokens, nothing run
        mindscape index book.txt --summaries           # then LLM session summaries, resumable
        mindscape index docs.jsonl --doc-id d1 --doc-id d2 --store runs/series --json
        mindscape index book.txt --llm openai --mom-paths 1   # one MoM memory per section
        mindscape index book.txt --llm openai --index-llm-parts outline  # outline only
    """
    from mindscape.indexing.sources import SourceProblem, load_sources

    _check_options(args)
    args.llm_parts = _llm_parts(args)
    problems: list[SourceProblem] = []
    docs = load_sources(args.files, args.doc_id, problems)  # raises before the store is touched
    for d in docs:
        for w in d.warnings:
            warn(w)
    if args.estimate:
        return _estimate(args, docs)

    from mindscape.memory.store import MemoryStore

    config = _config(args)
    store = MemoryStore(args.store)
    llm = None if args.summaries else llm_from_args(args, store.cache)
    reports, failed = _index_all(args, docs, store, config, llm)
    if args.summaries:
        ok = {r.doc_id for r in reports}
        reports, more = _add_summaries(args, [d for d in docs if d.doc_id in ok], store, config)
        failed += more
    failed = [{"doc_id": None, "origin": p.origin, "error": p.message} for p in problems] + failed
    _print_outcome(args, store, reports, failed)
    return 1 if failed else 0


def _check_options(args: argparse.Namespace) -> None:
    """InputError, before any work, for options that cannot run as given."""
    if args.mom_paths is not None and args.mom_paths < 1:
        raise InputError(f"--mom-paths must be at least 1 (got {args.mom_paths})")
    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers must be at least 1 (got {args.workers})")
    if args.summaries:
        _check_summaries(args)


def _print_outcome(
    args: argparse.Namespace, store: MemoryStore, reports: list[IndexReport], failed: list[dict]
) -> None:
    """The store's summary (or JSON with every report), then a line per book not indexed."""
    from dataclasses import asdict

    summary = store.summary()
    if args.json:
        out = {"reports": [asdict(r) for r in reports], "failed": failed, **summary}
        print(json.dumps(out, indent=2))
    else:
        print_summary(summary)
    for f in failed:
        # a source problem's message starts with its file; a build failure's is the book's
        warn(f"not indexed: {f['doc_id'] + ': ' if f['doc_id'] else ''}{f['error']}")


def _index_all(
    args: argparse.Namespace,
    docs: list,
    store: MemoryStore,
    config: IndexConfig,
    llm: Any,
    *,
    enriches: str | None = None,
) -> tuple[list[IndexReport], list[dict]]:
    """Index each document the store does not hold the same way, a line per document: on Ray
    offline, in this process with an index LLM (`llm`, None offline). `enriches`: the
    fingerprint of the plain index an LLM pass adds to. (The reports, the failed books.)"""
    from mindscape.embeddings import load_embedder, resolve_spec, spec_model_id
    from mindscape.indexing.indexer import Indexer
    from mindscape.indexing.library import BookFailure, index_library

    if llm is None and args.index_llm_parts is not None and not args.summaries:
        warn("--index-llm-parts has no effect without an index LLM (--index-llm or an endpoint)")

    def load() -> Indexer:  # the embedding model loads only if some document needs work here
        embedder = load_embedder(args.embedder)
        ix = Indexer(store, embedder, llm=llm, config=config, progress=not args.quiet)
        ix.enriches = enriches
        return ix

    def progress(n: int, total: int, outcome: IndexReport | BookFailure) -> None:
        if args.json:
            return
        if isinstance(outcome, BookFailure):
            say(args, f"[{n}/{total}] {outcome.doc_id}: FAILED: {outcome.error}")
        else:
            say(args, f"[{n}/{total}] {outcome.doc_id}: {_report_line(outcome)}")

    run = index_library(
        store,
        docs,
        embedder=resolve_spec(args.embedder),
        config=config,
        emb_id=spec_model_id(args.embedder),
        llm_id=llm.model_id if llm else "offline",
        ray_address=args.ray_address,
        workers=args.workers,
        use_ray=not args.no_ray,  # an index LLM keeps the in-process path (llm_id)
        progress=progress,
        load=load,
        on_start=lambda n, w: say(args, f"building {n} book(s) on Ray with {w} worker(s)"),
    )
    failed = [{"doc_id": f.doc_id, "origin": f.origin, "error": f.error} for f in run.failures]
    return run.reports, failed


def _add_summaries(
    args: argparse.Namespace, docs: list, store: MemoryStore, config: IndexConfig
) -> tuple[list[IndexReport], list[dict]]:
    """`index --summaries`, the second pass: the books indexed again with the LLM writing
    their session summaries (or `--index-llm-parts`), each from its session's most central
    sentences. The plain index serves `ask` until a book's pass is done; every LLM output is
    cached as it comes, so a stopped run resumes where it stopped."""
    from mindscape.embeddings import spec_model_id
    from mindscape.indexing.estimate import config_cost
    from mindscape.indexing.indexer import IndexWriter

    llm = llm_from_args(args, store.cache, index_llm=True)
    enriched = _summaries_config(args, config)
    parts = enriched.llm_parts
    emb_id = spec_model_id(args.embedder)
    plain = IndexWriter(store, config, emb_id, "offline").fingerprint
    writer = IndexWriter(store, enriched, emb_id, llm.model_id)
    todo = [d for d in docs if writer.skip_report(d.doc_id, d.text) is None]
    if todo:
        cost, _ = config_cost(((d.doc_id, d.text) for d in todo), enriched)
        say(
            args,
            f"summaries ({', '.join(parts)}) for {len(todo)} book(s): {cost.calls} LLM calls, "
            f"{cost.tokens_in} input + {cost.tokens_out} output tokens, ~{cost.seconds() / 60:.0f} "
            "min at the local model's speed; `ask` reads the plain index meanwhile, and a "
            "stopped run resumes where it stopped",
        )
    return _index_all(args, docs, store, enriched, llm, enriches=plain)


def _check_summaries(args: argparse.Namespace) -> None:
    """InputError, before any work, when ``--summaries`` cannot run as asked."""
    if args.index_llm:
        raise InputError(
            "--summaries and --index-llm: choose one (--summaries adds the LLM parts after "
            "the plain index)"
        )
    if settings_from_args(args, index_llm=True).resolved().backend == "extractive":
        raise InputError(
            "--summaries needs a model: install the local one (`mindscape model install`) "
            "or pass --llm openai with an endpoint"
        )


def _summaries_config(args: argparse.Namespace, config: IndexConfig) -> IndexConfig:
    """The config of ``--summaries``' second pass: the LLM writes the session summaries (or
    the `--index-llm-parts`), each from its passages' most central sentences."""
    from dataclasses import replace

    from mindscape.indexing.config import SUMMARIES_INPUT_TOKENS

    parts = args.llm_parts if args.index_llm_parts is not None else ("episodic",)
    return replace(config, llm_parts=parts, summary_input_tokens=SUMMARIES_INPUT_TOKENS)


def _report_line(r: IndexReport) -> str:
    """What one document's indexing gave: tokens, units per layer, time or skipped."""
    what = (
        "unchanged, skipped" if r.skipped else f"{r.seconds:.1f}s, peak memory {r.peak_rss_mb} MB"
    )
    layers = ", ".join(f"{k} {v}" for k, v in r.layers.items())
    return f"{r.tokens} tokens; {layers} ({what})"


def _llm_parts(args: argparse.Namespace) -> tuple[str, ...]:
    """The parts `--index-llm-parts` names (all of them when it is not given)."""
    from mindscape.indexing.indexer import LLM_PARTS, parse_llm_parts

    if args.index_llm_parts is None:
        return LLM_PARTS
    try:
        return parse_llm_parts(args.index_llm_parts)
    except ValueError as exc:
        raise InputError(f"--index-llm-parts: {exc}") from None


def _config(args: argparse.Namespace) -> IndexConfig:
    """The index config the options ask for (the rest at its defaults)."""
    given = {field: getattr(args, field) for _, field, _, _ in INDEX_OPTIONS}
    given = {k: v for k, v in given.items() if v is not None}
    return IndexConfig(**given, llm_parts=args.llm_parts)


def _estimate(args: argparse.Namespace, docs: list) -> int:
    """`index --estimate`: the cost of indexing `docs`, with and without an index LLM."""
    from mindscape.indexing.estimate import config_cost
    from mindscape.indexing.indexer import LLM_PARTS

    settings = settings_from_args(
        args, index_llm=getattr(args, "index_llm", None) or args.summaries or None
    )
    settings = settings.resolved()
    uses_llm = settings.backend == "openai" or (settings.backend == "local" and settings.index_llm)
    config = _summaries_config(args, _config(args)) if args.summaries else _config(args)
    args.llm_parts = config.llm_parts
    cost, shape = config_cost(((d.doc_id, d.text) for d in docs), config)
    out = {
        "backend": settings.backend,
        "index_llm": uses_llm,
        "llm_parts": list(args.llm_parts),
        "index": shape,
        "llm": cost.as_dict() if uses_llm else {"calls": 0, "tokens_in": 0, "tokens_out": 0},
        "llm_if_enabled": cost.as_dict(),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"{shape['documents']} document(s), {shape['tokens']} tokens → {shape['chunks']} chunks, "
        f"{shape['sessions']} sessions, {shape['sections']} outline sections"
    )
    what = f"{cost.calls} LLM calls, {cost.tokens_in} input + {cost.tokens_out} output tokens, "
    what += f"~{cost.seconds() / 60:.0f} min at the local model's speed"
    if uses_llm:
        print(f"with the {settings.backend} backend: {what}")
        for part, row in cost.parts.items():
            print(f"  {part:<9} {row['calls']:>7} calls {row['tokens_in']:>10} tokens in")
        if "mom_score" in cost.parts:
            print(
                f"  (mom_score: the local model's reads that choose among {_config(args).mom_paths} MoM "
                "paths per section, in process)"
            )
    else:
        print(f"with the {settings.backend} backend: no LLM calls (extractive summaries)")
        print(f"with an index LLM (--index-llm or an endpoint) it would be: {what}")
    offline = [p for p in LLM_PARTS if p not in args.llm_parts]
    if offline:
        print(f"(built without the LLM, --index-llm-parts: {', '.join(offline)})")
    print("(counts every document; those the store already holds the same way cost nothing)")
    return 0
