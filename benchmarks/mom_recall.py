"""Recall@10 of MoM late fusion over four memories of the same FairytaleQA stories (issue 14).

    python benchmarks/mom_recall.py --split dev --stories 2 --estimate   # cost, nothing run
    python benchmarks/mom_recall.py --split dev                          # local model, N=3
    python benchmarks/mom_recall.py --split dev --all-llm-parts          # LLM summaries too
    python benchmarks/mom_recall.py --split test --llm openai            # an endpoint
    python benchmarks/mom_recall.py --split test --stories 6 --seed 1    # a random sample
    python benchmarks/mom_recall.py --split test --stories 6 --seed 1 --answer 16  # + F1

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
``retrieval_recall.py`` does; ``--scope story`` against its own story only. Prints a table and, as its last line, one JSON object.

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
import dataclasses
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    cache_root,
    chunk_spans,
    limit_threads,
    llm_namespace,
    log,
    paired_points,
)

from mindscape.eval.metrics import bootstrap_ci  # noqa: E402
from mindscape.memory.build.indexer import LLM_PARTS, IndexConfig  # noqa: E402

DATASET = "fairytaleqa"
K = 10
COSTS_FILE = "mom_recall_costs.json"
"""Per-story index costs, kept in each LLM store's directory."""


@dataclasses.dataclass(frozen=True)
class Method:
    """One row of the table: a retrieval preset over one of the memories."""

    name: str
    label: str
    preset: str
    """``naive`` (dense chunks) or ``mom`` (late fusion)."""
    memory: str
    """The store it reads: ``offline``, ``single`` or ``selected``."""


def methods(paths: int = 3, k: int = 60) -> list[Method]:
    """(a)–(d), in table order."""
    return [
        Method("naive", "(a) naive dense chunks", "naive", "offline"),
        Method("mom-offline", "(b) MoM late fusion, offline outline", "mom", "offline"),
        Method("mom-single", "(c) MoM late fusion, single LLM memory (N=1)", "mom", "single"),
        Method(
            "mom-selected",
            f"(d) MoM late fusion, selected memory (N={paths}, k={k})",
            "mom",
            "selected",
        ),
    ]


PAIRS: tuple[tuple[str, str], ...] = (
    ("mom-selected", "mom-single"),
    ("mom-selected", "mom-offline"),
    ("mom-selected", "naive"),
)
"""The paired differences reported: (d − c) and (d − b), the issue's target, and (d − a)."""


def paired(a: Sequence[float], b: Sequence[float], n_resamples: int = 2000) -> dict[str, Any]:
    """Mean of ``a − b`` over the questions, in R@10 points, with its paired bootstrap 95% CI
    and the number of questions each side wins."""
    return dict(paired_points(a, b, n_resamples))


def summarize(
    hits: Mapping[str, Sequence[float]],
    pairs: Sequence[tuple[str, str]] = PAIRS,
    n_resamples: int = 2000,
    k: int = K,
) -> dict[str, Any]:
    """Per method the mean Recall@k with its bootstrap 95% CI; per pair the paired
    difference (pairs naming a method without scores are left out)."""
    recall = {}
    for name, values in hits.items():
        mean, low, high = bootstrap_ci(list(values), n_resamples=n_resamples)
        recall[name] = {
            "mean": round(mean, 4),
            "low": round(low, 4),
            "high": round(high, 4),
            "n": len(values),
        }
    diffs = {
        f"{a} - {b}": paired(hits[a], hits[b], n_resamples)
        for a, b in pairs
        if a in hits and b in hits
    }
    return {f"recall@{k}": recall, f"paired_recall@{k}_points": diffs}


# --------------------------------------------------------------------------- costs


def usage_delta(
    before: Mapping[str, Mapping[str, int]], after: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    """Per role, what a usage ledger (``Usage.by_role``) gained between two snapshots."""
    out: dict[str, dict[str, int]] = {}
    for role, row in after.items():
        prev = before.get(role, {})
        delta = {k: int(v) - int(prev.get(k, 0)) for k, v in row.items()}
        if any(delta.values()):
            out[role] = delta
    return out


def outline_figures(record: Mapping[str, Any] | None) -> dict[str, float] | None:
    """The MoM part of one story's index cost: outline calls and tokens (role
    ``index_outline``), the answers taken from the cache, the evaluator's reads and the
    outline stage's seconds; None when the story's cost was not recorded."""
    if not record:
        return None
    row = (record.get("llm") or {}).get("index_outline", {})
    reads = record.get("score_reads") or {}
    return {
        "calls": row.get("calls", 0),
        "tokens_in": row.get("tokens_in", 0),
        "tokens_out": row.get("tokens_out", 0),
        "cached": sum(r.get("cache_hits", 0) for r in (record.get("llm") or {}).values()),
        "reads": sum(reads.values()),
        "seconds": round(float(record.get("outline_seconds", 0.0)), 1),
        "index_seconds": round(float(record.get("seconds", 0.0)), 1),
    }


def story_costs(
    single: Mapping[str, Any] | None, selected: Mapping[str, Any] | None
) -> dict[str, dict[str, float] | None]:
    """One story's outline figures for (c) and (d). When (d) was built on (c)'s cache
    (``shared_cache`` in its record), its greedy path was (c)'s answer, so (c)'s calls, tokens
    and outline seconds are added to (d)'s."""
    c, d = outline_figures(single), outline_figures(selected)
    if selected and selected.get("shared_cache") and c is not None and d is not None:
        d = {
            **d,
            **{key: d[key] + c[key] for key in ("calls", "tokens_in", "tokens_out")},
            "seconds": round(d["seconds"] + c["seconds"], 1),
        }
    return {"single": c, "selected": d}


def cost_totals(rows: Sequence[Mapping[str, Any] | None]) -> dict[str, float] | None:
    """Sums over the stories with a recorded cost, and how many there were."""
    known = [r for r in rows if r]
    if not known:
        return None
    out: dict[str, float] = {"stories": len(known)}
    for key in ("calls", "tokens_in", "tokens_out", "cached", "reads", "seconds", "index_seconds"):
        out[key] = round(sum(float(r[key]) for r in known), 1)
    return out


# --------------------------------------------------------------------------- stores


class CountingEvaluator:
    """An evaluator that counts the reads it passes on (below the store's score cache, so
    only real model reads count). Its ``model_id`` is the wrapped one's, so cached scores are
    shared with ``mindscape index``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id: str = getattr(inner, "model_id", type(inner).__name__)
        self.reads = {"break": 0, "perplexity": 0}

    def yes_probability(self, question: str) -> float:
        self.reads["break"] += 1
        return self.inner.yes_probability(question)

    def perplexity(self, context: str, target: str) -> float:
        self.reads["perplexity"] += 1
        return self.inner.perplexity(context, target)


@dataclasses.dataclass
class Memory:
    """One store of the benchmark and how its stories are built."""

    kind: str
    """``offline``, ``single`` or ``selected``."""
    config: IndexConfig
    llm_id: str
    """The index LLM's model id ("offline" without one)."""
    path: Path
    emb_id: str
    store: Any = None
    indexer: Any = None
    costs: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        """What the indexer checks a story's record against."""
        return self.config.fingerprint(self.emb_id, self.llm_id)

    def load_costs(self) -> None:
        f = self.path / COSTS_FILE
        self.costs = json.loads(f.read_text()) if f.exists() else {}

    def save_costs(self) -> None:
        f = self.path / COSTS_FILE
        tmp = f.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.costs, indent=1, sort_keys=True))
        tmp.replace(f)


def store_name(split: str, kind: str, config: IndexConfig, llm_id: str) -> str:
    """The cache directory of one memory: by split, kind, index config and LLM (the
    selection's k left out: another k re-indexes in place from the caches)."""
    tag_config = dataclasses.replace(config, mom_k=IndexConfig.mom_k)
    return f"{DATASET}-{split}-mom-{kind}-{tag_config.fingerprint('', llm_id)[:8]}"


def llm_parts(args: argparse.Namespace) -> tuple[str, ...]:
    """The parts the index LLM writes in (c) and (d): the outline (and the triples with
    ``--triples``), or with ``--all-llm-parts`` every part (triples still only with
    ``--triples``)."""
    if args.all_llm_parts:
        return LLM_PARTS
    return ("outline", "triples") if args.triples else ("outline",)


def written_parts(config: IndexConfig) -> list[str]:
    """The parts the LLM writes under `config` (triples only when they are extracted)."""
    return [p for p in config.llm_parts if p != "triples" or config.triples]


def index_configs(args: argparse.Namespace) -> dict[str, IndexConfig]:
    """The index config of each memory."""
    base = IndexConfig(triples=args.triples, llm_parts=llm_parts(args))
    return {
        "offline": IndexConfig(),
        "single": dataclasses.replace(base, mom_paths=1),
        "selected": dataclasses.replace(base, mom_paths=args.mom_paths, mom_k=args.mom_k),
    }


class Builder:
    """Indexes the chosen stories into the three stores, story by story, loading the LLM and
    the evaluator only when some story needs them."""

    def __init__(self, args: argparse.Namespace, embedder: Any) -> None:
        from mindscape.commands.common import settings_from_args
        from mindscape.embeddings import embedder_id

        self.args, self.embedder = args, embedder
        self.emb_id = embedder_id(embedder)
        settings = settings_from_args(llm_namespace(args), index_llm=True).resolved()
        self.llm_id = settings.model_name()
        self.memories: dict[str, Memory] = {}
        for kind, cfg in index_configs(args).items():
            llm_id = "offline" if kind == "offline" else self.llm_id
            path = cache_root() / store_name(args.split, kind, cfg, llm_id)
            self.memories[kind] = Memory(kind, cfg, llm_id, path, self.emb_id)
        self._llm: dict[str, Any] = {}
        self.evaluator: CountingEvaluator | None = None

    def open(self) -> None:
        from mindscape.memory.store import MemoryStore

        for m in self.memories.values():
            m.store = MemoryStore(m.path)
            m.load_costs()

    def llm_for(self, kind: str) -> Any:
        """The index LLM of a memory, its answers cached in its store (with ``--share-cache``
        the selected memory shares the single memory's client and cache)."""
        from mindscape.commands.common import llm_from_args

        key = "single" if self.args.share_cache else kind
        if key not in self._llm:
            cache = self.memories[key].store.cache
            self._llm[key] = llm_from_args(llm_namespace(self.args), cache)
            if self._llm[key] is None:
                raise SystemExit("mom_recall.py needs an index LLM: --llm local or openai")
        return self._llm[key]

    def indexer_for(self, m: Memory) -> Any:
        from mindscape.memory.build.indexer import Indexer

        if m.indexer is None:
            llm = None if m.kind == "offline" else self.llm_for(m.kind)
            evaluator = None
            if m.kind == "selected" and m.config.mom_paths > 1:
                if self.evaluator is None:
                    self.evaluator = CountingEvaluator(self.local_evaluator())
                evaluator = self.evaluator
            m.indexer = Indexer(
                m.store,
                self.embedder,
                llm=llm,
                config=m.config,
                progress=False,
                evaluator=evaluator,
            )
        return m.indexer

    def local_evaluator(self) -> Any:
        from mindscape.memory.mom.paths import default_evaluator

        if self.args.local_model:
            from mindscape.llm.logprobs import LocalScorer

            return LocalScorer(self.args.local_model)
        return default_evaluator()

    def build(self, docs: Sequence[Any]) -> None:
        """Every story into every store (the offline one first; each LLM store skips what it
        holds the same way)."""
        from mindscape.memory.build.writer import is_current, vectors_intact
        from mindscape.memory.cache import content_key

        for n, doc in enumerate(docs, 1):
            for m in self.memories.values():
                row = m.store.cache.doc(doc.doc_id)
                if (
                    row is not None
                    and is_current(m.store, doc.doc_id, doc.text, m.fingerprint)
                    and vectors_intact(m.store, doc.doc_id, row)
                ):
                    continue
                ix = self.indexer_for(m)
                ledger = ix.llm.usage if ix.llm is not None else None
                before = ledger.by_role if ledger is not None else {}
                reads0 = dict(self.evaluator.reads) if self.evaluator else {}
                rep = ix.index(doc.doc_id, doc.text, title=doc.title)
                if rep.skipped:
                    continue
                log(
                    f"  {m.kind}: indexed {doc.doc_id} ({rep.tokens} tokens, "
                    f"{rep.seconds:.1f}s) [{n}/{len(docs)}]"
                )
                if m.kind == "offline":
                    continue
                h = content_key(doc.text)
                old = m.costs.get(doc.doc_id)
                if old and old.get("content_hash") == h:
                    continue  # another k, or a rebuild: the first build's cost stands
                reads = {}
                if m.kind == "selected" and self.evaluator is not None:
                    reads = {k: v - reads0.get(k, 0) for k, v in self.evaluator.reads.items()}
                m.costs[doc.doc_id] = {
                    "content_hash": h,
                    "llm": usage_delta(before, ledger.by_role if ledger is not None else {}),
                    "score_reads": reads,
                    "seconds": round(rep.seconds, 2),
                    "outline_seconds": round(rep.stage_seconds.get("outline", 0.0), 2),
                    "mom_paths": m.config.mom_paths,
                    "mom_k": m.config.mom_k,
                    "shared_cache": bool(self.args.share_cache and m.kind == "selected"),
                    "built": time.strftime("%Y-%m-%dT%H:%M:%S"),
                }
                m.save_costs()


# --------------------------------------------------------------------------- recall


def settings_of(preset: str) -> Any:
    """The retrieval settings of a preset's run without a signature."""
    from mindscape.context import Context

    return Context.from_preset(preset).resolved().retrieval_settings(signed=False)


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
    from mindscape.retrieval_defaults import default_retriever

    retriever = default_retriever(store, embedder)
    spans = chunk_spans(store)
    settings = settings_of(preset)
    if pool is not None:
        retriever.warm(pool)
    out = []
    for q in questions:
        scope = pool if pool is not None else {q.doc_id}
        hits = retriever.rank_chunks(q.question, doc_ids=scope, settings=settings, k=k)
        got = [spans[h.unit_id] if h.doc_id == q.doc_id else (0, 0) for h in hits]
        out.append(recall_at_k(got, gold_spans(q), k))
    return out


# --------------------------------------------------------------------------- answers

ANSWERS_FILE = "mom_recall_answers.jsonl"
"""Answered questions, one JSON object a line, in the benchmarks' cache (resumable)."""


def spread(questions: Sequence[Any], n: int) -> list[Any]:
    """`n` questions spread over the stories: every story's first, then every story's
    second, and so on (stories in split order)."""
    by_doc: dict[str, list[Any]] = {}
    for q in questions:
        by_doc.setdefault(q.doc_id, []).append(q)
    out: list[Any] = []
    depth = 0
    while len(out) < n and any(depth < len(qs) for qs in by_doc.values()):
        out.extend(qs[depth] for qs in by_doc.values() if depth < len(qs))
        depth += 1
    return out[:n]


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
    from mindscape.eval.bench import system_view
    from mindscape.eval.metrics import token_f1
    from mindscape.graphs.qa import answer_question

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
                view = {**system_view(q), "doc_ids": scope or [q.doc_id]}
                t0 = time.perf_counter()
                res = answer_question(view, preset=m.preset, store=str(memory.path), deps=deps)
                answer = str(res.get("answer") or "")
                done[key] = {
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
        mean, low, high = bootstrap_ci(f1[name], n_resamples=n_resamples)
        n = max(len(recs), 1)
        rows[name] = {
            "mean": round(mean, 4),
            "low": round(low, 4),
            "high": round(high, 4),
            "n": len(recs),
            "llm_calls": round(sum(r["llm_calls"] for r in recs) / n, 2),
            "tokens_in": round(sum(r["tokens_in"] for r in recs) / n, 1),
            "seconds": round(sum(r["seconds"] for r in recs) / n, 1),
        }
    diffs = {
        f"{a} - {b}": paired(f1[a], f1[b], n_resamples) for a, b in PAIRS if a in f1 and b in f1
    }
    return {"answer_f1": rows, "paired_answer_f1_points": diffs}


# --------------------------------------------------------------------------- report


def fmt_ci(r: Mapping[str, float]) -> str:
    return f"{r['mean']:.4f}  [{r['low']:.4f}, {r['high']:.4f}]"


def print_pairs(
    rows: Sequence[Method], diffs: Mapping[str, Mapping[str, Any]], metric: str
) -> None:
    """One line per paired difference, the methods named by their table letters."""
    letter = {m.name: m.label.split()[0] for m in rows}
    for name, d in diffs.items():
        a, b = name.split(" - ")
        print(
            f"{letter.get(a, a)} − {letter.get(b, b)} ({name}): {d['mean']:+.2f} {metric} points "
            f"(paired 95% CI {d['low']:+.2f} to {d['high']:+.2f}; better on {d['better']}, "
            f"worse on {d['worse']})"
        )


def print_report(
    head: str,
    rows: Sequence[Method],
    summary: Mapping[str, Any],
    per_story: Mapping[str, Mapping[str, Any]],
    shared: bool,
    also_at: Sequence[int] = (),
) -> None:
    print(f"\n{head}")
    print(f"{'method':52s} {'R@10':>7s}  95% CI")
    for m in rows:
        print(f"{m.label:52s} {fmt_ci(summary['recall@10'][m.name])}")
    print_pairs(rows, summary["paired_recall@10_points"], "R@10")
    for k in also_at:
        print(f"\nR@{k}, a check away from R@10's ceiling (same stores and questions)")
        for m in rows:
            print(f"{m.label:52s} {fmt_ci(summary[f'recall@{k}'][m.name])}")
        print_pairs(rows, summary[f"paired_recall@{k}_points"], f"R@{k}")
    print(
        "\nindex cost per story, outline stage (calls/tokens: role index_outline; cached: "
        "answers from the cache; reads: evaluator reads; s: outline stage, index: whole index)"
        + ("\n(d) built with --share-cache: its figures add (c)'s greedy path" if shared else "")
    )
    cols = ("calls", "tokens_in", "tokens_out", "cached", "reads", "seconds", "index_seconds")
    names = ("calls", "in", "out", "cached", "reads", "s", "index")
    widths = (5, 7, 6, 6, 5, 7, 7)
    head_row = " ".join(f"{n:>{w}s}" for n, w in zip(names, widths, strict=True))
    print(f"{'story':24s} {'mem':8s} {head_row}")

    def line(story: str, mem: str, r: Mapping[str, float] | None) -> str:
        if not r:
            return f"{story:24s} {mem:8s} (not recorded)"
        vals = " ".join(
            f"{r[c]:>{w}.0f}" if c not in ("seconds", "index_seconds") else f"{r[c]:>{w}.1f}"
            for c, w in zip(cols, widths, strict=True)
        )
        return f"{story:24s} {mem:8s} {vals}"

    for story, row in per_story.items():
        for mem in ("single", "selected"):
            print(line(story if mem == "single" else "", mem, row[mem]))
    for mem in ("single", "selected"):
        tot = cost_totals([row[mem] for row in per_story.values()])
        label = f"total ({tot['stories']:.0f} stories)" if tot else "total"
        print(line(label if mem == "single" else "", mem, tot))


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
    print_pairs(rows, summary["paired_answer_f1_points"], "F1")
    return {"answered": len(asked), "answer_model": model, **summary}


def estimate(args: argparse.Namespace, docs: Sequence[Any]) -> int:
    """The LLM cost of building (c) and (d) for `docs`, from :mod:`mindscape.estimate`."""
    from mindscape.estimate import config_cost

    configs = index_configs(args)
    out: dict[str, Any] = {}
    for kind in ("single", "selected"):
        cfg = configs[kind]
        cost, shape = config_cost(((d.doc_id, d.text) for d in docs), cfg)
        out[kind] = cost.as_dict()
        out["index"] = shape
    c, d = out["single"], out["selected"]
    run = (
        d
        if args.share_cache
        else {key: c[key] + d[key] for key in ("calls", "tokens_in", "tokens_out", "seconds_local")}
    )
    out["run"] = {key: run[key] for key in ("calls", "tokens_in", "tokens_out", "seconds_local")}
    parts = written_parts(configs["single"])
    out["llm_parts"] = parts
    shape = out["index"]
    print(
        f"{DATASET} / {args.split}: {shape['documents']} stories, {shape['tokens']} tokens, "
        f"{shape['chunks']} chunks, {shape['sections']} outline sections; the LLM writes: "
        f"{', '.join(parts)}"
        + ("" if args.all_llm_parts else " (--all-llm-parts: the summaries too)")
    )
    for kind, label in (
        ("single", "(c) single LLM memory (N=1)"),
        ("selected", f"(d) selected memory (N={args.mom_paths})"),
        ("run", "the run ((d) alone)" if args.share_cache else "the run ((c) + (d))"),
    ):
        r = out[kind]
        print(
            f"{label:34s} {r['calls']:>6} calls {r['tokens_in']:>9} in {r['tokens_out']:>8} out "
            f"~{r['seconds_local'] / 60:.0f} min"
        )
        for part, p in (r.get("parts") or {}).items():
            print(
                f"    {part:<9} {p['calls']:>6} calls {p['tokens_in']:>9} in {p['tokens_out']:>8} out"
            )
    print(
        "(minutes at the local model's speed, MINDSCAPE_PROMPT_TPS/OUTPUT_TPS; mom_score: the "
        "evaluator's reads in process; (a) and (b) need no LLM; parts the LLM does not write "
        "are built offline at no LLM cost)"
    )
    print(json.dumps({"dataset": DATASET, "split": args.split, "estimate": out}))
    return 0


def choose_stories(docs: Sequence[Any], n: int | None, seed: int | None) -> list[Any]:
    """The stories to build: all, the first `n`, or with `seed` `n` drawn at random (kept in
    the split's order, so a store built from a smaller draw is not reordered)."""
    if not n or n >= len(docs):
        return list(docs)
    if seed is None:
        return list(docs[:n])
    import random

    picked = set(random.Random(seed).sample(range(len(docs)), n))
    return [d for i, d in enumerate(docs) if i in picked]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default="../shared/bench")
    ap.add_argument("--split", default="dev", choices=["dev", "test"])
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


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.mom_paths < 2:
        raise SystemExit("--mom-paths must be at least 2 ((c) is the single memory)")
    from mindscape.eval.bench import load_documents, load_questions

    docs = choose_stories(load_documents(args.bench, DATASET, args.split), args.stories, args.seed)
    if args.estimate:
        return estimate(args, docs)
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
    ids = [d.doc_id for d in docs]
    questions = [
        q
        for q in load_questions(args.bench, DATASET, args.split, doc_ids=ids, per_doc=args.per_doc)
        if q.evidence
    ]
    pool = set(ids) if args.scope == "pool" else None
    rows = methods(args.mom_paths, args.mom_k)
    also_at = sorted(set(args.also_at) - {K})
    summary: dict[str, Any] = {}
    for k in (K, *also_at):
        hits = {
            m.name: recall_hits(builder.memories[m.memory].store, emb, questions, m.preset, pool, k)
            for m in rows
        }
        summary |= summarize(hits, k=k)
    per_story = {
        d: story_costs(
            builder.memories["single"].costs.get(d),
            builder.memories["selected"].costs.get(d),
        )
        for d in ids
    }
    head = (
        f"{DATASET} / {args.split}: {len(docs)} stories, {len(questions)} questions with "
        f"evidence, scope {args.scope}; index LLM {args.llm} ({builder.llm_id}) writing "
        f"{', '.join(written_parts(builder.memories['single'].config))}"
    )
    shared = any((builder.memories["selected"].costs.get(d) or {}).get("shared_cache") for d in ids)
    print_report(head, rows, summary, per_story, shared, also_at)
    answers: dict[str, Any] = {}
    if args.answer:
        answers = answer_report(args, builder, emb, rows, questions, pool)
    print(
        json.dumps(
            {
                "dataset": DATASET,
                "split": args.split,
                "stories": len(docs),
                "questions": len(questions),
                "scope": args.scope,
                "per_doc": args.per_doc,
                "llm": args.llm,
                "llm_model": builder.llm_id,
                "mom_paths": args.mom_paths,
                "mom_k": args.mom_k,
                "share_cache": args.share_cache,
                "llm_parts": written_parts(builder.memories["single"].config),
                **summary,
                "cost_per_story": per_story,
                "cost_total": {
                    mem: cost_totals([row[mem] for row in per_story.values()])
                    for mem in ("single", "selected")
                },
                "stores": {k: str(m.path) for k, m in builder.memories.items()},
                **answers,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
