"""Recall@10 of MoM late fusion over four memories of the same FairytaleQA stories (issue 14).

    python benchmarks/mom/recall.py --split dev --stories 2 --estimate   # cost, nothing run
    python benchmarks/mom/recall.py --split dev                          # local model, N=3
    python benchmarks/mom/recall.py --split dev --all-llm-parts          # LLM summaries too
    python benchmarks/mom/recall.py --split test --llm openai            # an endpoint
    python benchmarks/mom/recall.py --split test --stories 6 --seed 1    # a random sample
    python benchmarks/mom/recall.py --split test --stories 6 --seed 1 --answer 16  # + F1

The same stories are indexed three ways, and every question with gold evidence is asked
(retrieval only, no answer) under four methods:

* (a) ``naive``: dense chunks, query only (the ``naive`` preset's retrieval);
* (b) ``mom-offline``: MoM late fusion (the ``mom`` preset: chunks and outline units ranked
  apart, outline hits mapped to their chunks, fused by rank) over the offline outline
  (sections from headings or episodic windows, extractive cores; no LLM);
* (c) ``mom-single``: the same over the LLM memory with one greedy candidate per section
  (``mom_paths=1``);
* (d) ``mom-selected``: the same over the memory chosen among N candidates per section by
  clarity and completeness (``mom_paths=N``, ``--mom-k``).

(a) and (b) read the offline store (its chunks are those of every store). The index LLM is
built the way ``mindscape index --index-llm`` builds it (``--llm local``: the local model,
``--llm openai``: an endpoint from ``--base-url``/``--model`` or the environment); the
evaluator that chooses among paths is the local model in process either way.

In (c) and (d) the LLM writes the outline only (``IndexConfig.llm_parts={"outline"}``,
``mindscape index --index-llm-parts outline``); their episodic and semantic summaries are
extractive, as in the offline store. Late fusion reads only chunks and outline units, and the
summaries cost more than the outline: on the 23 dev stories ``--estimate`` gives the single
memory ~123 min at the local model's speed instead of ~297 min, the run ((c) + (d)) ~751 min
instead of ~1099. ``--all-llm-parts`` has the LLM write the summaries too,
as before, into stores of their own. Triples are not extracted either way (late fusion does
not read them; ``--triples`` to include them).

Stores live in the benchmarks' cache (``$MINDSCAPE_BENCH_CACHE``, see ``common.py``), one per
(split, memory, index config with the parts the LLM writes, LLM), not per story set: a larger
``--stories`` reuses the stories already built, and a killed run continues with the story it
stopped in (every LLM answer and evaluator score is cached). The selected store's name leaves
out k, so another ``--mom-k`` re-indexes in place from the cache (no model call). Each story's
index cost (LLM calls and tokens per role from the client's usage ledger, the evaluator's
reads, the outline stage's and the whole index's seconds) is kept beside its store
(``mom_recall_costs.json``) when the story is built, and reported per story: a story built by
a resumed run shows the answers it took from the cache. With ``--share-cache`` the selected
memory's LLM reads the single memory's cache, so the greedy path (with ``--all-llm-parts``,
the summaries too) is asked once (the run costs about what (d) alone costs); its reported
outline figures then add (c)'s. Rerun with the same ``--share-cache`` choice: the selected
memory's answers are in the cache it was built with.

Recall@10: a retrieved chunk is a hit when it is from the question's story and overlaps a gold
span (``mindscape.eval.metrics.recall_at_k``); ``--also-at 5,3`` adds Recall@5 and @3 on the
same stores and questions, a check where R@10 is near its ceiling (a few short stories).
``--scope pool`` (default) asks each question against all the chosen stories, as
``retrieval/recall.py`` does; ``--scope story`` against its own story only. Prints a table and, as its last line, one JSON object.

Answer F1 (``--answer Q``): Q questions, spread over the stories (each story's first, then
each one's second, ...), are answered under every method's preset over its memory with the
model ``--llm`` names (the local model by default; the ``mom`` preset makes one answer call
over the late-fused chunks, ``naive`` one over the dense chunks), scoped as the recall is.
Every answer is appended to ``mom_recall_answers.jsonl`` in the benchmarks' cache as it
finishes, keyed by method, memory fingerprint (N and k included), question, pool and model,
so a killed run resumes and a larger Q answers only the new questions. The table gives F1
with its bootstrap CI, the paired differences of ``PAIRS`` and, per question, the LLM calls,
input tokens and seconds (a cached answer keeps the seconds it took when it was made).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.common import (
    allow_dirty_option,
    begin_test_run,
    choose_stories,
    chunk_spans,
    fmt_ci,
    limit_threads,
    log,
    log_test_run,
    mean_ci,
    paired_diffs,
    print_paired,
    retrieved_spans,
)
from benchmarks.mom.answers import answer_report
from benchmarks.mom.build import (
    DATASET,
    PAIRS,
    Builder,
    Method,
    letters,
    methods,
    written_parts,
)
from benchmarks.mom.costs import cost_fields, costs_by_story, estimate, print_costs, shared_cache

K = 10


def summarize(
    hits: Mapping[str, Sequence[float]],
    pairs: Sequence[tuple[str, str]] = PAIRS,
    n_resamples: int = 2000,
    k: int = K,
) -> dict[str, Any]:
    """Per method the mean Recall@k with its bootstrap 95% CI; per pair the paired
    difference (pairs naming a method without scores are left out)."""
    recall = {
        name: {**mean_ci(values, n_resamples), "n": len(values)} for name, values in hits.items()
    }
    return {
        f"recall@{k}": recall,
        f"paired_recall@{k}_points": paired_diffs(hits, pairs, n_resamples),
    }


def settings_of(preset: str) -> Any:
    """The retrieval settings of a preset's run without a signature."""
    from mindscape.context import Context
    from mindscape.run import retrieval_settings

    return retrieval_settings(Context.from_preset(preset).resolved(), signed=False)


def recall_hits(
    store: Any,
    embedder: Any,
    questions: Sequence[Any],
    preset: str,
    pool: set[str] | None,
    k: int = K,
) -> list[float]:
    """Recall@k per question under a preset's retrieval, each question asked against
    `pool` (None: its own story)."""
    from mindscape.eval.bench import gold_spans
    from mindscape.eval.metrics import recall_at_k
    from mindscape.run import default_retriever

    retriever = default_retriever(store, embedder)
    spans = chunk_spans(store)
    settings = settings_of(preset)
    if pool is not None:
        retriever.warm(pool)
    out = []
    for q in questions:
        scope = pool if pool is not None else {q.doc_id}
        hits = retriever.rank_chunks(q.question, doc_ids=scope, settings=settings, k=k)
        got = retrieved_spans(q, ((h.unit_id, h.doc_id) for h in hits), spans)
        out.append(recall_at_k(got, gold_spans(q), k))
    return out


def recall_summary(
    builder: Builder,
    emb: Any,
    questions: Sequence[Any],
    rows: Sequence[Method],
    pool: set[str] | None,
    also_at: Sequence[int],
) -> dict[str, Any]:
    """`summarize` of every method's Recall@K, then of Recall@k for each k of `also_at`."""
    summary: dict[str, Any] = {}
    for k in (K, *also_at):
        hits = {
            m.name: recall_hits(builder.memories[m.memory].store, emb, questions, m.preset, pool, k)
            for m in rows
        }
        summary |= summarize(hits, k=k)
    return summary


def print_report(
    head: str,
    rows: Sequence[Method],
    summary: Mapping[str, Any],
    per_story: Mapping[str, Mapping[str, Any]],
    shared: bool,
    also_at: Sequence[int] = (),
) -> None:
    """The Recall@10 table with its paired differences (and Recall@k of `also_at`), then
    the outline stage's cost per story."""
    print(f"\n{head}")
    print(f"{'method':52s} {'R@10':>7s}  95% CI")
    for m in rows:
        print(f"{m.label:52s} {fmt_ci(summary['recall@10'][m.name])}")
    print_paired(summary["paired_recall@10_points"], "R@10", letters(rows))
    for k in also_at:
        print(f"\nR@{k}, a check away from R@10's ceiling (same stores and questions)")
        for m in rows:
            print(f"{m.label:52s} {fmt_ci(summary[f'recall@{k}'][m.name])}")
        print_paired(summary[f"paired_recall@{k}_points"], f"R@{k}", letters(rows))
    print_costs(per_story, shared)


def parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default="../shared/bench")
    ap.add_argument("--split", default="dev", choices=["dev", "test"])
    allow_dirty_option(ap)
    ap.add_argument(
        "--stories",
        type=int,
        default=None,
        help="the first N stories of the split (with --seed: N stories drawn at random)",
    )
    ap.add_argument(
        "--seed",
        type=int,
        default=None,
        help="draw --stories at random with this seed (a sample of the split, not its head)",
    )
    ap.add_argument(
        "--per-doc", type=int, default=None, metavar="K", help="at most K questions per story"
    )
    ap.add_argument(
        "--scope",
        default="pool",
        choices=["pool", "story"],
        help="ask each question against all chosen stories (pool) or its own story",
    )
    memory_options(ap)
    ap.add_argument(
        "--estimate", action="store_true", help="print the expected LLM cost, run nothing"
    )
    ap.add_argument(
        "--answer",
        type=int,
        default=0,
        metavar="Q",
        help="also answer Q questions (spread over the stories) under every method with the "
        "model --llm names, and report answer F1 (default 0: retrieval only)",
    )
    ap.add_argument(
        "--also-at",
        type=lambda v: [int(k) for k in v.split(",") if k.strip()],
        default=[],
        metavar="K,...",
        help="also report Recall@K for these K (e.g. 5,3): a check below R@10's ceiling",
    )
    ap.add_argument("--threads", type=int, default=1, help="torch/BLAS threads (0 = default)")
    return ap


def memory_options(ap: argparse.ArgumentParser) -> None:
    """The options that say how (c) and (d) are built, and by which index LLM."""
    ap.add_argument(
        "--mom-paths", type=int, default=3, metavar="N", help="candidates per section for (d)"
    )
    ap.add_argument("--mom-k", type=int, default=60, metavar="K", help="RRF k of the selection")
    ap.add_argument("--triples", action="store_true", help="also extract triples (unused here)")
    ap.add_argument(
        "--all-llm-parts",
        action="store_true",
        help="the LLM also writes the episodic and semantic summaries in (c) and (d) "
        "(default: the outline only; the summaries are extractive)",
    )
    ap.add_argument(
        "--share-cache",
        action="store_true",
        help="(d)'s LLM reads (c)'s cache: the greedy path (and LLM summaries) asked once",
    )
    ap.add_argument("--llm", default="local", choices=["local", "openai"], help="the index LLM")
    ap.add_argument("--model", default=None, help="chat model id ($MINDSCAPE_LLM_MODEL)")
    ap.add_argument("--base-url", default=None, help="OpenAI-compatible base URL")
    ap.add_argument("--local-model", default=None, metavar="GGUF", help="a GGUF for --llm local")


def build(args: argparse.Namespace, docs: Sequence[Any]) -> tuple[Builder, Any]:
    """The three memories of `docs`, built (or reused) with the embedder; returns both."""
    limit_threads(args.threads)
    from mindscape.embeddings import load_embedder

    emb = load_embedder()
    builder = Builder(args, emb)
    builder.open()
    t0 = time.perf_counter()
    builder.build(docs)
    log(
        f"stores ready in {time.perf_counter() - t0:.0f}s: "
        + ", ".join(str(m.path) for m in builder.memories.values())
    )
    return builder, emb


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.mom_paths < 2:
        raise SystemExit("--mom-paths must be at least 2 ((c) is the single memory)")
    from mindscape.eval.bench import load_documents, load_questions

    if not args.estimate:
        begin_test_run(args)  # before a test row is read
    docs = choose_stories(load_documents(args.bench, DATASET, args.split), args.stories, args.seed)
    if args.estimate:
        return estimate(args, docs)
    builder, emb = build(args, docs)
    ids = [d.doc_id for d in docs]
    questions = [
        q
        for q in load_questions(args.bench, DATASET, args.split, doc_ids=ids, per_doc=args.per_doc)
        if q.evidence
    ]
    pool = set(ids) if args.scope == "pool" else None
    rows = methods(args.mom_paths, args.mom_k)
    also_at = sorted(set(args.also_at) - {K})
    summary = recall_summary(builder, emb, questions, rows, pool, also_at)
    per_story = costs_by_story(builder, ids)
    head = (
        f"{DATASET} / {args.split}: {len(docs)} stories, {len(questions)} questions with "
        f"evidence, scope {args.scope}; index LLM {args.llm} ({builder.llm_id}) writing "
        f"{', '.join(written_parts(builder.memories['single'].config))}"
    )
    print_report(head, rows, summary, per_story, shared_cache(builder, ids), also_at)
    answers = answer_report(args, builder, emb, rows, questions, pool) if args.answer else {}
    line = {**run_fields(args, builder, len(docs), len(questions)), **summary}
    print(json.dumps({**line, **cost_fields(builder, per_story), **answers}))
    args.dataset, n = DATASET, len(questions)
    recall = {m.name: ("R@10", summary[f"recall@{K}"][m.name]["mean"], n) for m in rows}
    log_test_run(args, recall, llm=args.llm, qids=[q.qid for q in questions])
    return 0


def run_fields(
    args: argparse.Namespace, builder: Builder, stories: int, questions: int
) -> dict[str, Any]:
    """The JSON line's first fields: what was run, on how many stories and questions."""
    return {
        "dataset": DATASET,
        "split": args.split,
        "stories": stories,
        "questions": questions,
        "scope": args.scope,
        "per_doc": args.per_doc,
        "llm": args.llm,
        "llm_model": builder.llm_id,
        "mom_paths": args.mom_paths,
        "mom_k": args.mom_k,
        "share_cache": args.share_cache,
        "llm_parts": written_parts(builder.memories["single"].config),
    }


if __name__ == "__main__":
    raise SystemExit(main())
