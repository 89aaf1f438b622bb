"""Recall@k of gold evidence under query-only, hybrid and signature-conditioned retrieval.

All documents of a split go into one store (the series setting: the signature has to find the
right story among many), and every question is asked against the whole store. A retrieved
chunk is a hit when it is from the question's document and overlaps a gold
``[char_start, char_end)`` span (``mindscape.eval.metrics.recall_at_k``).

    python benchmarks/retrieval/recall.py --bench ../shared/bench --dataset fairytaleqa --split test
    python benchmarks/retrieval/recall.py ... --split dev --grid     # the design sweep of docs/retrieval.md
    python benchmarks/retrieval/recall.py ... --llm local            # LLM session summaries
    python benchmarks/retrieval/recall.py ... --split dev --doc-context  # chunk vectors in context

With ``--llm`` the store's session summaries (the signature's units) are written by that model
(``--index-llm-parts``, default ``episodic``: the other parts stay as offline) instead of
extracted, as MiA builds them; ``--estimate`` prints that indexing's cost and stops. The
model's answers are cached by content in one file per LLM under the benchmarks' cache
(``llm-<id>.sqlite3``) that every split's store reads, so a rerun, or the dev+test pool after
dev and test, costs nothing.

Prints a table and, as its last line, one JSON object:
``{"dataset", "split", "recall@10": {"naive", "hybrid", "first-k", "mia-rag"}, ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

import numpy as np  # noqa: E402

from benchmarks.common import (
    CACHE_ENV,
    allow_dirty_option,
    begin_test_run,
    cache_root,
    chunk_spans,
    draw_pools,
    index_llm_id,
    limit_threads,
    llm_namespace,
    log,
    log_test_run,
    paired_diffs,
    paired_line,
    print_paired,
    split_store,
)
from benchmarks.retrieval.variants import (
    DOC_CONTEXT_ROWS,
    KS,
    MAIN,
    Scores,
    Variant,
    evaluate,
    paired,
    variants,
)
from mindscape.embeddings import DEFAULT_MODEL, load_embedder, spec_model_id  # noqa: E402
from mindscape.eval.bench import load_documents, load_questions  # noqa: E402
from mindscape.indexing.estimate import config_cost  # noqa: E402
from mindscape.indexing.indexer import IndexConfig, parse_llm_parts  # noqa: E402
from mindscape.memory.cache import IndexCache, content_key  # noqa: E402
from mindscape.memory.retrieval.retriever import Retriever  # noqa: E402
from mindscape.memory.scope import DOC_CONTEXTS  # noqa: E402
from mindscape.run import default_retriever  # noqa: E402

PAIRS = (("mia-rag", "hybrid"), ("mia-rag", "naive"), ("hybrid", "naive"))
"""The paired R@10 differences the table and the JSON line report."""


def doc_context_report(total: Scores) -> dict[str, Any]:
    """Print R@1/3/10 of the ``--doc-context`` rows and the paired differences of prefixed
    and max against plain at R@1 and R@10; return them for the JSON line."""
    print(f"\n{'chunk vectors in context':44s} {'R@1':>7s} {'R@3':>7s} {'R@10':>7s}")
    out: dict[str, Any] = {}
    for name in DOC_CONTEXT_ROWS:
        for mode in DOC_CONTEXTS:
            row = f"{name} ctx={mode}"
            r = {k: round(total.mean(row, k), 4) for k in (1, 3, 10)}
            print(f"{row:44s} {r[1]:7.4f} {r[3]:7.4f} {r[10]:7.4f}")
            out[row] = {f"recall@{k}": v for k, v in r.items()}
        for mode in ("prefixed", "max"):
            for k in (1, 10):
                d = paired(total, f"{name} ctx={mode}", f"{name} ctx=plain", k)
                out[f"{name} {mode} - plain @{k}"] = d
                print(paired_line(f"  {name} {mode} - plain", d, f"R@{k}"))
    return out


def index_setup(args: argparse.Namespace) -> tuple[IndexConfig, Any, str]:
    """(index config, a factory of the index LLM from a store's cache or None, its id)."""
    if args.llm is None:
        return IndexConfig(), None, ""
    from mindscape.commands.common import llm_from_args

    try:
        parts = parse_llm_parts(args.index_llm_parts)
    except ValueError as e:
        raise SystemExit(f"retrieval/recall.py: {e}") from None
    ns = llm_namespace(args)
    llm_id = index_llm_id(args)
    # One answer cache for every store this LLM indexes, so a dev+test pool reuses the
    # summaries the dev and the test store already paid for.
    shared = IndexCache(cache_root() / f"llm-{content_key(llm_id)[:12]}.sqlite3")
    return IndexConfig(llm_parts=parts), lambda _cache: llm_from_args(ns, shared), llm_id


def print_estimate(args: argparse.Namespace, splits: list[str], config: IndexConfig) -> int:
    """The LLM cost of indexing the split(s) with `config` (no model is loaded)."""
    docs = [d for s in splits for d in load_documents(args.bench, args.dataset, s)]
    cost, shape = config_cost([(d.doc_id, d.text) for d in docs], config)
    print(f"{args.dataset}/{args.split}: {shape}")
    print(
        f"LLM ({', '.join(config.llm_parts)}): {cost.calls} calls, {cost.tokens_in:,} input "
        f"tokens, {cost.tokens_out:,} output tokens"
    )
    for part, row in cost.parts.items():
        print(f"  {part}: {row}")
    return 0


def parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default="../shared/bench")
    allow_dirty_option(ap)
    ap.add_argument("--dataset", default="fairytaleqa")
    ap.add_argument(
        "--split",
        default="test",
        choices=["dev", "test", "dev+test"],
        help="stories to draw from (dev+test: both, for cross-validation)",
    )
    ap.add_argument(
        "--limit", type=int, default=None, help="only the first N questions with evidence"
    )
    ap.add_argument("--grid", action="store_true", help="also run the design sweep (use on dev)")
    ap.add_argument(
        "--doc-context",
        action="store_true",
        help="also run naive, hybrid and mia-rag with plain, title-prefixed and max chunk vectors",
    )
    ap.add_argument(
        "--pools",
        type=int,
        default=0,
        help="evaluate on N random story pools (0: one pool, the whole split)",
    )
    ap.add_argument("--pool-size", type=int, default=23, help="stories per pool")
    ap.add_argument("--seed", type=int, default=0, help="seed of the pool draw")
    ap.add_argument(
        "--threads", type=int, default=1, help="torch/BLAS threads (0 = library default)"
    )
    ap.add_argument(
        "--embedder",
        default=None,
        help="minilm (default), gemma (EmbeddingGemma-300M) or a local BGE directory "
        "($MINDSCAPE_EMBEDDER); another than MiniLM keeps its stores in a subfolder",
    )
    index_options(ap)
    return ap


def index_options(ap: argparse.ArgumentParser) -> None:
    """The options of an LLM-indexed store, and ``--estimate`` of its cost."""
    ap.add_argument(
        "--llm",
        choices=["local", "openai"],
        default=None,
        help="index the store with this LLM writing --index-llm-parts (default: offline)",
    )
    ap.add_argument("--model", default=None, help="the endpoint's model (--llm openai)")
    ap.add_argument("--base-url", default=None, help="the endpoint's URL (--llm openai)")
    ap.add_argument("--local-model", default=None, help="a GGUF file for --llm local")
    ap.add_argument(
        "--index-llm-parts",
        default="episodic",
        help="the index parts the LLM writes (default: episodic, the session summaries)",
    )
    ap.add_argument("--estimate", action="store_true", help="print the LLM indexing cost and stop")


def run_pools(
    retriever: Retriever,
    questions: Sequence[Any],
    spans: dict,
    rows: list[Variant],
    pools: list[list[str]],
    whole: bool,
) -> tuple[Scores, list[Scores]]:
    """`evaluate` on each pool's questions (retrieval within the pool, or with `whole` within
    the whole store); returns the scores of all pools together and of each."""
    total = Scores({}, {})
    per_pool: list[Scores] = []
    for n, pool in enumerate(pools, 1):
        members = set(pool)
        asked = [q for q in questions if q.doc_id in members]
        scope = None if whole else members
        retriever.warm(scope)
        res = evaluate(retriever, asked, spans, rows, max(KS), doc_ids=scope)
        per_pool.append(res)
        total.extend(res)
        if len(pools) > 1:
            log(
                f"  pool {n}/{len(pools)}: {len(pool)} stories, {len(asked)} questions, R@10 "
                + ", ".join(f"{m} {res.mean(m, 10):.3f}" for m in MAIN)
            )
    return total, per_pool


def pool_sd(per_pool: Sequence[Scores], name: str) -> float:
    """The standard deviation of a row's R@10 over the pools (0 with one pool)."""
    if len(per_pool) < 2:
        return 0.0
    return float(np.std([p.mean(name, 10) for p in per_pool], ddof=1))


def print_table(rows: list[Variant], total: Scores, per_pool: Sequence[Scores]) -> None:
    """R@5/10/20 of every row by group, its R@10 against naive's and its sd over the pools;
    then how often each signature's first unit is from the question's story."""
    naive10 = total.mean("naive", 10)
    print(
        f"{'variant':44s} {'R@5':>7s} {'R@10':>7s} {'R@20':>7s} {'R@10/naive':>11s} {'sd pools':>9s}"
    )
    group = None
    for v in rows:
        if v.group != group:
            group = v.group
            print(f"-- {group}")
        r = {k: total.mean(v.name, k) for k in KS}
        sd = pool_sd(per_pool, v.name)
        print(
            f"{v.name:44s} {r[5]:7.4f} {r[10]:7.4f} {r[20]:7.4f} {r[10] / naive10:11.3f} {sd:9.4f}"
        )
    print(
        "signature's first unit in the gold story: "
        + ", ".join(f"{k}: {np.mean(v):.3f}" for k, v in total.story.items())
    )


def recall_fields(
    rows: list[Variant], total: Scores, per_pool: Sequence[Scores], diffs: dict[str, Any]
) -> dict[str, Any]:
    """The JSON line's Recall@k of the main rows, their sd over the pools, `diffs`, the α
    sweep and the summaries' rows."""
    return {
        **{f"recall@{k}": {name: round(total.mean(name, k), 4) for name in MAIN} for k in KS},
        "recall@10_sd_over_pools": {name: round(pool_sd(per_pool, name), 4) for name in MAIN},
        "paired_recall@10_points": diffs,
        "alpha_sweep_recall@10": {
            str(a): round(total.mean(f"mia-rag α={a}", 10), 4) for a in (0.25, 0.5, 0.75)
        },
        "summaries_recall@10": {
            v.name: round(total.mean(v.name, 10), 4) for v in rows if v.group == "summaries"
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    limit_threads(args.threads)
    splits = args.split.split("+")
    config, make_llm, llm_id = index_setup(args)
    if args.estimate:
        return print_estimate(args, splits, config)
    begin_test_run(args)  # before a test row is read
    emb = load_embedder(args.embedder)
    if spec_model_id(args.embedder) != DEFAULT_MODEL:
        # Stores are keyed by content and index config, not by embedder: keep them apart.
        os.environ[CACHE_ENV] = str(cache_root() / f"emb-{spec_model_id(args.embedder)}")
    store, docs = split_store(
        args.bench, args.dataset, splits, emb, config=config, llm=make_llm, llm_id=llm_id
    )
    spans = chunk_spans(store)
    questions = [
        q for split in splits for q in load_questions(args.bench, args.dataset, split) if q.evidence
    ][: args.limit or None]
    rows = variants(args.grid, args.doc_context)
    ids = [d.doc_id for d in docs]
    pools = draw_pools(ids, args.pools, args.pool_size, args.seed) if args.pools else [sorted(ids)]
    log(
        f"{args.dataset}/{args.split}: {len(docs)} documents, {len(spans)} chunks, "
        f"{len(questions)} questions, {len(rows)} variants, {len(pools)} pool(s)"
    )
    retriever = default_retriever(store, emb)
    total, per_pool = run_pools(retriever, questions, spans, rows, pools, not args.pools)
    n_asked = len(total.recall["naive"][10])
    print(
        f"\n{args.dataset} / {args.split}: {len(docs)} stories, {len(spans)} chunks, "
        f"{n_asked} question(s) over {len(pools)} pool(s) of {len(pools[0])} stories"
    )
    print_table(rows, total, per_pool)
    diffs = paired_diffs({name: total.recall[name][10] for name in MAIN}, PAIRS)
    print_paired(diffs, "R@10")
    print(f"mia-rag / naive = {total.mean('mia-rag', 10) / total.mean('naive', 10):.3f}")
    context = doc_context_report(total) if args.doc_context else {}
    summary = {
        "dataset": args.dataset,
        "split": args.split,
        "pools": len(pools),
        "pool_size": len(pools[0]),
        "seed": args.seed,
        **recall_fields(rows, total, per_pool, diffs),
        **({"doc_context": context} if context else {}),
        "index_llm": llm_id or "offline",
        "questions": n_asked,
    }
    print(json.dumps(summary))
    figures = {name: ("R@10", total.mean(name, 10), n_asked) for name in MAIN}
    test_qids = [q.qid for q in questions if q.split == "test"]
    log_test_run(args, figures, llm=llm_id or None, qids=test_qids)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
