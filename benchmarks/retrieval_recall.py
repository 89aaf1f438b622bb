"""Recall@k of gold evidence under query-only, hybrid and signature-conditioned retrieval.

All documents of a split go into one store (the series setting: the signature has to find the
right story among many), and every question is asked against the whole store. A retrieved
chunk is a hit when it is from the question's document and overlaps a gold
``[char_start, char_end)`` span (``mindscape.eval.metrics.recall_at_k``).

    python benchmarks/retrieval_recall.py --bench ../shared/bench --dataset fairytaleqa --split test
    python benchmarks/retrieval_recall.py ... --split dev --grid     # the design sweep of docs/retrieval.md
    python benchmarks/retrieval_recall.py ... --llm local            # LLM session summaries
    python benchmarks/retrieval_recall.py ... --split dev --doc-context  # chunk vectors in context

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
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from common import (  # noqa: E402
    CACHE_ENV,
    cache_root,
    chunk_spans,
    limit_threads,
    llm_namespace,
    log,
    paired_points,
    split_store,
)

from mindscape.embeddings import DEFAULT_MODEL, load_embedder, spec_model_id  # noqa: E402
from mindscape.estimate import config_cost  # noqa: E402
from mindscape.eval.bench import gold_spans, load_documents, load_questions  # noqa: E402
from mindscape.eval.metrics import (
    recall_at_k,  # noqa: E402
)
from mindscape.memory.build.indexer import IndexConfig, parse_llm_parts  # noqa: E402
from mindscape.memory.cache import IndexCache, content_key  # noqa: E402
from mindscape.memory.retrieval.retriever import RetrievalSettings, Retriever  # noqa: E402
from mindscape.memory.retrieval.scope import DOC_CONTEXTS, top_rows  # noqa: E402
from mindscape.memory.signature.activation import activate  # noqa: E402
from mindscape.memory.signature.sigma import SignatureParams  # noqa: E402
from mindscape.retrieval_defaults import (  # noqa: E402
    default_params,
    default_retriever,
    default_settings,
    literal_params,
)

KS = (1, 3, 5, 10, 20)
DOC_CONTEXT_ROWS = ("naive", "hybrid", "mia-rag")
"""The rows ``--doc-context`` repeats with each chunk-vector context (plain, prefixed, max)."""
ACTIVATION_ROUTER = "activation-router"


@dataclasses.dataclass
class Variant:
    """One row of the table: how the signature is chosen and how chunks are scored."""

    name: str
    settings: RetrievalSettings
    method: str | None = None
    """None: no signature; else 'coverage' or 'first-k'."""
    params: SignatureParams | None = None
    group: str = "main"


def variants(grid: bool, doc_context: bool = False) -> list[Variant]:
    """The main rows, the α sweep, the rows the session summaries decide, (with
    ``doc_context``) the main rows with each chunk-vector context and (with ``grid``) the
    design sweep."""
    base = default_settings()
    dense = dataclasses.replace(base, chunk_mode="dense")
    p = default_params()
    out = [
        Variant("naive", dataclasses.replace(dense, alpha=0.0)),
        Variant("hybrid", dataclasses.replace(base, alpha=0.0)),
        Variant("first-k", base, "first-k", p),
        Variant("mia-rag", base, "coverage", p),
    ]
    if doc_context:
        main = {v.name: v for v in out}
        out += [
            Variant(
                f"{name} ctx={mode}",
                dataclasses.replace(main[name].settings, doc_context=mode),
                main[name].method,
                main[name].params,
                "doc-context",
            )
            for name in DOC_CONTEXT_ROWS
            for mode in DOC_CONTEXTS
        ]
    out += [
        # Is it the signature, or routing? ρ = 0.75 was the default before the pooled figures;
        # the activation router boosts documents by the query's own activation share, no σ.
        Variant(
            "mia-rag ρ=0.75",
            dataclasses.replace(base, region_doc_weight=0.75),
            "coverage",
            p,
            "router",
        ),
        Variant("activation router (no σ)", base, ACTIVATION_ROUTER, p, "router"),
    ]
    for a in (0.25, 0.5, 0.75):
        out.append(
            Variant(f"mia-rag α={a}", dataclasses.replace(base, alpha=a), "coverage", p, "alpha")
        )
    for a in (0.25, 0.5, 0.75):
        out.append(
            Variant(f"first-k α={a}", dataclasses.replace(base, alpha=a), "first-k", p, "alpha")
        )
    # The rows the session summaries decide (the default selection reads them only in its
    # redundancy term): what LLM-written summaries (--llm) change.
    literal = literal_params()
    summ = "summaries"
    out += [
        Variant("rel=summary", base, "coverage", dataclasses.replace(p, relevance="summary"), summ),
        Variant(
            "rel+match=summary",
            base,
            "coverage",
            dataclasses.replace(p, relevance="summary", match="summary"),
            summ,
        ),
        Variant(
            "s(σ,c)=mean", dataclasses.replace(base, signature_mode="mean"), "coverage", p, summ
        ),
        # The paper-literal objective: summary relevance, summary-cosine match, dense E1, dense s(q,c).
        Variant(
            "literal: summary rel+match, dense, mean",
            dataclasses.replace(dense, signature_mode="mean", gate="none"),
            "coverage",
            literal,
            summ,
        ),
    ]
    if not grid:
        return out
    g = "grid"
    out += [
        Variant(
            "literal + members/region scoring",
            dataclasses.replace(dense, gate="none"),
            "coverage",
            literal,
            g,
        ),
        # Dense-only activation with the chosen selection.
        Variant(
            "dense E1, dense s(q,c), region",
            dense,
            "coverage",
            dataclasses.replace(p, activation="dense"),
            g,
        ),
        Variant(
            "dense E1, dense s(q,c), members",
            dataclasses.replace(dense, signature_mode="members"),
            "coverage",
            dataclasses.replace(p, activation="dense"),
            g,
        ),
        Variant(
            "first-k dense E1, dense s(q,c)",
            dense,
            "first-k",
            dataclasses.replace(p, activation="dense"),
            g,
        ),
        # Hybrid activation, dense s(q,c).
        Variant("hybrid E1, dense s(q,c), region", dense, "coverage", p, g),
        Variant(
            "hybrid E1, dense s(q,c), window",
            dataclasses.replace(dense, signature_mode="window", gate="none"),
            "coverage",
            p,
            g,
        ),
        Variant(
            "hybrid E1, dense s(q,c), members",
            dataclasses.replace(dense, signature_mode="members", gate="none"),
            "coverage",
            p,
            g,
        ),
        Variant("first-k hybrid E1, dense s(q,c)", dense, "first-k", p, g),
        # Selection ablations (hybrid E1, hybrid s(q,c), region, gate).
        Variant(
            "match=summary+boost", base, "coverage", dataclasses.replace(p, match="summary"), g
        ),
        Variant("match=window", base, "coverage", dataclasses.replace(p, match="window"), g),
        Variant("λQ=0.5", base, "coverage", dataclasses.replace(p, lambda_q=0.5), g),
        Variant("λC=0.5", base, "coverage", dataclasses.replace(p, lambda_c=0.5), g),
        Variant("λC=2", base, "coverage", dataclasses.replace(p, lambda_c=2.0), g),
        Variant("λD=0", base, "coverage", dataclasses.replace(p, lambda_d=0.0), g),
        Variant("K=3", base, "coverage", dataclasses.replace(p, k=3), g),
        Variant("K=8", base, "coverage", dataclasses.replace(p, k=8), g),
        Variant("K0=20", base, "coverage", dataclasses.replace(p, k0=20), g),
        # Scoring ablations.
        Variant("s(σ,c)=max", dataclasses.replace(base, signature_mode="max"), "coverage", p, g),
        Variant(
            "s(σ,c)=members", dataclasses.replace(base, signature_mode="members"), "coverage", p, g
        ),
        Variant(
            "s(σ,c)=window", dataclasses.replace(base, signature_mode="window"), "coverage", p, g
        ),
        Variant(
            "region ρ=0.25", dataclasses.replace(base, region_doc_weight=0.25), "coverage", p, g
        ),
        Variant("region ρ=0.5", dataclasses.replace(base, region_doc_weight=0.5), "coverage", p, g),
        Variant(
            "region ρ=1 (document share only)",
            dataclasses.replace(base, region_doc_weight=1.0),
            "coverage",
            p,
            g,
        ),
        Variant(
            "region, windows weighted by gain",
            dataclasses.replace(base, window_weights="gain"),
            "coverage",
            p,
            g,
        ),
        Variant("gate=none", dataclasses.replace(base, gate="none"), "coverage", p, g),
        Variant("gate power=1", dataclasses.replace(base, gate_power=1.0), "coverage", p, g),
        Variant("gate power=3", dataclasses.replace(base, gate_power=3.0), "coverage", p, g),
        Variant(
            "late-fusion (chunks+outline)",
            dataclasses.replace(base, chunk_mode="late-fusion", alpha=0.0),
            None,
            None,
            g,
        ),
        Variant(
            "late-fusion + signature",
            dataclasses.replace(base, chunk_mode="late-fusion"),
            "coverage",
            p,
            g,
        ),
    ]
    return out


@dataclasses.dataclass
class Scores:
    """Per-question Recall@k of every variant (in question order) and story accuracy."""

    recall: dict[str, dict[int, list[float]]]
    story: dict[str, list[float]]

    def mean(self, name: str, k: int) -> float:
        return float(np.mean(self.recall[name][k]))

    def extend(self, other: Scores) -> None:
        for name, ks in other.recall.items():
            for k, vals in ks.items():
                self.recall.setdefault(name, {}).setdefault(k, []).extend(vals)
        for name, vals in other.story.items():
            self.story.setdefault(name, []).extend(vals)


def evaluate(
    retriever: Retriever,
    questions: list,
    spans: dict,
    rows: list[Variant],
    k_max: int,
    doc_ids: set[str] | None = None,
) -> Scores:
    """Recall@k per question and variant, with retrieval restricted to `doc_ids` (a pool;
    None = the whole store), plus story accuracy of the signatures' first unit."""
    per: dict[str, dict[int, list[float]]] = {v.name: {k: [] for k in KS} for v in rows}
    story: dict[str, list[float]] = {}
    sig_cache: dict[tuple, list] = {}
    t0 = time.perf_counter()
    for n, q in enumerate(questions, 1):
        gold = gold_spans(q)
        for v in rows:
            signature = None
            if v.method == ACTIVATION_ROUTER:
                top = activation_router(retriever, q.question, doc_ids, v, k_max)
                got = [spans[u] if d == q.doc_id else (0, 0) for u, d in top]
                for k in KS:
                    per[v.name][k].append(recall_at_k(got, gold, k))
                continue
            if v.method is not None:
                key = (v.method, repr(v.params))
                signature = sig_cache.get(key)
                if signature is None:
                    signature = retriever.signature(
                        q.question, method=v.method, params=v.params, doc_ids=doc_ids
                    )
                    sig_cache[key] = signature
                    # Under the first row that selects this signature.
                    story.setdefault(v.name, []).append(
                        float(bool(signature) and signature[0].unit_id.split(":")[0] == q.doc_id)
                    )
            hits = retriever.rank_chunks(
                q.question, signature=signature, doc_ids=doc_ids, settings=v.settings, k=k_max
            )
            got = [spans[h.unit_id] if h.doc_id == q.doc_id else (0, 0) for h in hits]
            for k in KS:
                per[v.name][k].append(recall_at_k(got, gold, k))
        sig_cache.clear()
        if n % 200 == 0:
            log(f"  {n}/{len(questions)} questions ({time.perf_counter() - t0:.0f}s)")
    return Scores(per, story)


def activation_router(
    retriever: Retriever, query: str, doc_ids: set[str] | None, v: Variant, k: int
) -> list[tuple[str, str]]:
    """A signature-free control: the query's hybrid score plus α·(its document's share of the
    rank-weighted K0 activation), α gated like the signature's (α·conf², conf the main
    document's share). (chunk id, doc id) of the top k."""
    sc = retriever.scope(doc_ids)
    act = activate(sc, query, retriever.embed_query(query), v.params or default_params())
    share = np.zeros(len(sc.docs))
    np.add.at(share, sc.chunk_doc[act.rows], 1.0 / (np.arange(len(act.rows)) + 1.0))
    share /= max(share.sum(), 1e-12)
    alpha = v.settings.alpha * float(share.max()) ** v.settings.gate_power
    fused = (1 - alpha) * act.score + alpha * share[sc.chunk_doc]
    units = sc.chunks.units
    return [(units[i].id, units[i].doc_id) for i in top_rows(fused, k)]


def draw_pools(doc_ids: list[str], n_pools: int, size: int, seed: int) -> list[list[str]]:
    """`n_pools` random pools of `size` stories: disjoint blocks of one shuffle while the
    stories last, then blocks of a fresh shuffle (so pools overlap only when they must)."""
    if not 1 <= size <= len(doc_ids):
        raise SystemExit(f"--pool-size must be in 1..{len(doc_ids)} (stories available)")
    rng = np.random.default_rng(seed)
    pools: list[list[str]] = []
    order: list[str] = []
    while len(pools) < n_pools:
        if len(order) < size:
            order = [str(d) for d in rng.permutation(sorted(doc_ids))]
        pools.append(sorted(order[:size]))
        order = order[size:]
    return pools


def paired(scores: Scores, a: str, b: str, k: int = 10) -> dict[str, float]:
    """Mean of `a − b` Recall@k over the questions, in points, with its paired bootstrap CI
    and the counts of questions each side wins."""
    return paired_points(scores.recall[a][k], scores.recall[b][k])


MAIN = ("naive", "hybrid", "first-k", "mia-rag")


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
                print(
                    f"  {name} {mode} - plain: {d['mean']:+.2f} R@{k} points (paired 95% CI "
                    f"{d['low']:+.2f} to {d['high']:+.2f}; better on {d['better']}, worse on "
                    f"{d['worse']})"
                )
    return out


def index_setup(args: argparse.Namespace) -> tuple[IndexConfig, Any, str]:
    """(index config, a factory of the index LLM from a store's cache or None, its id)."""
    if args.llm is None:
        return IndexConfig(), None, ""
    from mindscape.commands.common import llm_from_args, settings_from_args

    try:
        parts = parse_llm_parts(args.index_llm_parts)
    except ValueError as e:
        raise SystemExit(f"retrieval_recall.py: {e}") from None
    ns = llm_namespace(args)
    llm_id = settings_from_args(ns, index_llm=True).resolved().model_name()
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default="../shared/bench")
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
    args = ap.parse_args(argv)
    limit_threads(args.threads)

    splits = args.split.split("+")
    config, make_llm, llm_id = index_setup(args)
    if args.estimate:
        return print_estimate(args, splits, config)
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
    ]
    if args.limit:
        questions = questions[: args.limit]
    retriever = default_retriever(store, emb)
    rows = variants(args.grid, args.doc_context)
    pools = (
        draw_pools([d.doc_id for d in docs], args.pools, args.pool_size, args.seed)
        if args.pools
        else [sorted(d.doc_id for d in docs)]
    )
    log(
        f"{args.dataset}/{args.split}: {len(docs)} documents, {len(spans)} chunks, "
        f"{len(questions)} questions, {len(rows)} variants, {len(pools)} pool(s)"
    )
    total = Scores({}, {})
    per_pool: list[Scores] = []
    for n, pool in enumerate(pools, 1):
        members = set(pool)
        asked = [q for q in questions if q.doc_id in members]
        scope = None if len(pools) == 1 and not args.pools else members
        retriever.warm(scope)
        res = evaluate(retriever, asked, spans, rows, max(KS), doc_ids=scope)
        per_pool.append(res)
        total.extend(res)
        if len(pools) > 1:
            log(
                f"  pool {n}/{len(pools)}: {len(pool)} stories, {len(asked)} questions, R@10 "
                + ", ".join(f"{m} {res.mean(m, 10):.3f}" for m in MAIN)
            )

    naive10 = total.mean("naive", 10)
    print(
        f"\n{args.dataset} / {args.split}: {len(docs)} stories, {len(spans)} chunks, "
        f"{len(total.recall['naive'][10])} question(s) over {len(pools)} pool(s) of "
        f"{len(pools[0])} stories"
    )
    print(
        f"{'variant':44s} {'R@5':>7s} {'R@10':>7s} {'R@20':>7s} {'R@10/naive':>11s} {'sd pools':>9s}"
    )
    group = None
    for v in rows:
        if v.group != group:
            group = v.group
            print(f"-- {group}")
        r = {k: total.mean(v.name, k) for k in KS}
        sd = (
            float(np.std([p.mean(v.name, 10) for p in per_pool], ddof=1))
            if len(per_pool) > 1
            else 0.0
        )
        print(
            f"{v.name:44s} {r[5]:7.4f} {r[10]:7.4f} {r[20]:7.4f} {r[10] / naive10:11.3f} {sd:9.4f}"
        )
    print(
        "signature's first unit in the gold story: "
        + ", ".join(f"{k}: {np.mean(v):.3f}" for k, v in total.story.items())
    )
    diffs = {
        "mia-rag - hybrid": paired(total, "mia-rag", "hybrid"),
        "mia-rag - naive": paired(total, "mia-rag", "naive"),
        "hybrid - naive": paired(total, "hybrid", "naive"),
    }
    for name, d in diffs.items():
        print(
            f"{name}: {d['mean']:+.2f} R@10 points (paired 95% CI {d['low']:+.2f} to "
            f"{d['high']:+.2f}; better on {d['better']}, worse on {d['worse']})"
        )
    mia = total.mean("mia-rag", 10)
    print(f"mia-rag / naive = {mia / naive10:.3f}")
    context = doc_context_report(total) if args.doc_context else {}
    summary = {
        "dataset": args.dataset,
        "split": args.split,
        "pools": len(pools),
        "pool_size": len(pools[0]),
        "seed": args.seed,
        **{f"recall@{k}": {name: round(total.mean(name, k), 4) for name in MAIN} for k in KS},
        "recall@10_sd_over_pools": {
            name: round(float(np.std([p.mean(name, 10) for p in per_pool], ddof=1)), 4)
            if len(per_pool) > 1
            else 0.0
            for name in MAIN
        },
        "paired_recall@10_points": diffs,
        "alpha_sweep_recall@10": {
            str(a): round(total.mean(f"mia-rag α={a}", 10), 4) for a in (0.25, 0.5, 0.75)
        },
        "summaries_recall@10": {
            v.name: round(total.mean(v.name, 10), 4) for v in rows if v.group == "summaries"
        },
        **({"doc_context": context} if context else {}),
        "index_llm": llm_id or "offline",
        "questions": len(total.recall["naive"][10]),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
