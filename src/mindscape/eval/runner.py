"""`mindscape eval`: run the QA graph over a bench split and score it.

The runner builds (or reuses) one store per document — or one pooled store for the whole
split, the series setting — through the same `Indexer` and cache as `mindscape index`; runs
each question with each preset; appends one JSON line per finished (preset, question) to
`results.jsonl` so a killed run resumes where it stopped; and writes the report. A run on a
test split also appends a line to the test-run log (:mod:`mindscape.eval.testlog`).

Only `bench.system_view(question)` reaches the system: no answers, labels, evidence or
annotator metadata. Gold fields are used afterwards, for scoring.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mindscape.eval import metrics
from mindscape.eval.bench import (
    BenchDocument,
    BenchQuestion,
    documents_key,
    gold_spans,
    load_documents,
    load_questions,
    system_view,
)
from mindscape.state import answer_step

if TYPE_CHECKING:
    from mindscape.eval.testlog import TestRun
    from mindscape.llm import LLMSettings

RECALL_KS = (5, 10, 20)
AnswerFn = Callable[[dict[str, Any], str, Path], dict[str, Any]]


@dataclass
class EvalSettings:
    """What to evaluate and where."""

    bench: Path
    dataset: str
    split: str
    presets: list[str]
    out: Path
    stores: Path
    limit: int | None = None
    doc_ids: list[str] | None = None
    """Only these documents' questions (None: every document's)."""
    per_doc: int | None = None
    """At most this many questions per document (before `limit`)."""
    sample: int | None = None
    """A random sample of this many questions, fixed by `seed` (before `limit`)."""
    seed: int = 0
    concurrency: int = 1
    pooled: bool = False
    progress: bool = True
    llm: LLMSettings | None = None
    """The LLM settings the answers use (None: from the environment, when first needed)."""
    context: dict[str, Any] = field(default_factory=dict)
    """Context fields every answer runs with, over the preset's (``--evidence-ranker``)."""
    extra: dict[str, Any] = field(default_factory=dict)
    allow_dirty: bool = False
    """``--allow-dirty``: a test run from a tree with uncommitted code changes (logged so)."""
    pool_key: str = ""
    """``--pooled``: the hash of the pooled documents (:func:`pooled`), part of the store's
    name so that other stories under the same dataset name never share it."""


def store_dir(settings: EvalSettings, doc_id: str) -> Path:
    """Where a document's store lives (the pooled store for `--pooled`)."""
    if settings.pooled:
        if not settings.pool_key:
            raise ValueError("a pooled store needs the documents' key: use pooled(settings, docs)")
        return settings.stores / f"{settings.dataset}-{settings.split}-pooled-{settings.pool_key}"
    return settings.stores / settings.dataset / doc_id


def pooled(settings: EvalSettings, docs: list[BenchDocument]) -> EvalSettings:
    """`settings` with the key of the documents a ``--pooled`` run puts in one store."""
    return replace(settings, pool_key=documents_key(docs)) if settings.pooled else settings


def build_stores(settings: EvalSettings, docs: list[BenchDocument], embedder: Any = None) -> None:
    """Index every document (cached: unchanged documents are skipped)."""
    from mindscape.embeddings import load_embedder
    from mindscape.indexing.indexer import Indexer
    from mindscape.memory.store import MemoryStore

    embedder = embedder or load_embedder()
    for d in _bar(docs, "index", settings.progress):
        store = MemoryStore(store_dir(settings, d.doc_id))
        Indexer(store, embedder, progress=False).index(d.doc_id, d.text, title=d.title)
        store.close()


def score(
    q: BenchQuestion, output: dict[str, Any], chunk_spans: dict[str, tuple[int, int]]
) -> dict[str, Any]:
    """Metrics of one answer against the gold fields (never seen by the system)."""
    rec: dict[str, Any] = {"metrics": answer_metrics(q, output.get("answer"))}
    if q.evidence:
        ranked = _ranked_chunks(output)
        spans = [chunk_spans[c] for c in ranked if c in chunk_spans]
        gold = gold_spans(q)
        rec["recall_at_k"] = {k: metrics.recall_at_k(spans, gold, k) for k in RECALL_KS}
    return rec


def answer_metrics(q: BenchQuestion, answer: str | None) -> dict[str, float]:
    """The answer's scores for its task: token F1, EM and ROUGE-L, or accuracy."""
    text = str(answer or "")
    if q.task == "open_qa":
        return {
            "f1": metrics.token_f1(text, q.answers),
            "em": metrics.exact_match(text, q.answers),
            "rouge_l": metrics.rouge_l(text, q.answers),
        }
    if q.task == "multiple_choice":
        return {"accuracy": metrics.choice_accuracy(text, str(q.label), q.options)}
    return {"accuracy": float(metrics.claim_correct(text, q.label))}


def _ranked_chunks(output: dict[str, Any]) -> list[str]:
    """Chunk ids of the returned evidence, in order, without repeats."""
    seen: dict[str, None] = {}
    for item in output.get("evidence") or []:
        for c in item.get("chunk_ids") or []:
            seen.setdefault(c, None)
    return list(seen)


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records an appending run wrote to a JSONL file, in order (none if there is no
    file); a line torn by a killed run is skipped."""
    records = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def load_done(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Finished records of an earlier run, by (preset, qid); a torn last line is ignored."""
    return {(rec["preset"], rec["qid"]): rec for rec in read_records(path)}


def split_questions(settings: EvalSettings) -> list[BenchQuestion]:
    """The questions a run answers: the split's, at most `per_doc` per document, `limit` in all."""
    return load_questions(
        settings.bench,
        settings.dataset,
        settings.split,
        limit=settings.limit,
        doc_ids=settings.doc_ids,
        per_doc=settings.per_doc,
        sample=settings.sample,
        seed=settings.seed,
    )


def prepare(settings: EvalSettings, embedder: Any = None) -> tuple[list[BenchQuestion], list[str]]:
    """Load the split's questions and build the stores of their documents."""
    _, questions, doc_ids = _prepared(settings, embedder)
    return questions, doc_ids


def _prepared(
    settings: EvalSettings, embedder: Any
) -> tuple[EvalSettings, list[BenchQuestion], list[str]]:
    """:func:`prepare`, with the settings keyed to the pooled documents (``--pooled``)."""
    questions = split_questions(settings)
    doc_ids = sorted({q.doc_id for q in questions})
    docs = load_documents(settings.bench, settings.dataset, settings.split, doc_ids=doc_ids)
    settings = pooled(settings, docs)
    build_stores(settings, docs, embedder)
    return settings, questions, doc_ids


def run_eval(settings: EvalSettings, answer: AnswerFn, embedder: Any = None) -> dict[str, Any]:
    """Evaluate, each question answered by `answer` (its caller's: ``mindscape eval`` answers
    with the QA graph); returns the report dict (also written under `settings.out`). A test split's
    run is started in the test-run log before its rows are read (and refused from a tree with
    uncommitted code changes, unless `settings.allow_dirty`)."""
    from mindscape.eval.report import Provenance, write_report
    from mindscape.eval.testlog import start_test_run

    started = start_test_run(allow_dirty=settings.allow_dirty) if settings.split == "test" else None
    settings, questions, doc_ids = _prepared(settings, embedder)
    spans = _chunk_spans(settings, doc_ids)
    settings.out.mkdir(parents=True, exist_ok=True)
    results = settings.out / "results.jsonl"
    done = load_done(results)
    if results.exists():  # drop a record torn by a kill, so appends start on a clean line
        results.write_text("".join(json.dumps(r) + "\n" for r in done.values()))
    todo = [(p, q) for p in settings.presets for q in questions if (p, q.qid) not in done]
    lock = threading.Lock()

    def work(item: tuple[str, BenchQuestion]) -> None:
        preset, q = item
        t0 = time.perf_counter()
        out = answer(system_view(q), preset, store_dir(settings, q.doc_id))
        rec = record(q, preset, out, spans, latency_s=time.perf_counter() - t0)
        with lock, results.open("a") as f:
            f.write(json.dumps(rec) + "\n")

    with ThreadPoolExecutor(max_workers=max(1, settings.concurrency)) as pool:
        for _ in _bar(pool.map(work, todo), "questions", settings.progress, total=len(todo)):
            pass
    records = list(load_done(results).values())
    provenance = Provenance(
        command=settings.extra.get("command", ""),
        code_version=settings.extra.get("code_version", ""),
        settings=_settings_dict(settings),
    )
    report = write_report(records, settings.out, provenance)["report"]
    if started is not None and records:
        log_test_run(settings, report, started, qids=[q.qid for q in questions])
    return report


def log_test_run(
    settings: EvalSettings,
    report: dict[str, Any],
    started: TestRun,
    qids: Sequence[str] | None = None,
) -> Path | None:
    """Append the run to the test-run log (:mod:`mindscape.eval.testlog`) as it `started`:
    its questions, presets, backend and each preset's headline figure with its n."""
    from mindscape.eval.report import primary_metric
    from mindscape.eval.testlog import append_test_run, figure, log_line

    figures = {}
    for g in report.get("groups", []):
        name = primary_metric(g)
        mean = (g["metrics"].get(name) or {}).get("mean") if name else None
        figures[g["preset"]] = figure(name, mean, g["n"])
    llm = settings.extra.get("llm") or (
        {"backend": settings.llm.backend} if settings.llm is not None else None
    )
    filters = {
        "sample": settings.sample,
        "seed": settings.seed if settings.sample else None,
        "limit": settings.limit,
        "per_doc": settings.per_doc,
        "doc_ids": settings.doc_ids,
        "pooled": settings.pooled or None,
    }
    line = log_line(
        source="mindscape eval",
        dataset=settings.dataset,
        split=settings.split,
        filters=filters,
        presets=settings.presets,
        llm=llm,
        figures=figures,
        out=settings.out,
        run=started,
        command=settings.extra.get("command") or None,
        settings=settings.context,
        qids=qids,
    )
    return append_test_run(line)


def record(
    q: BenchQuestion,
    preset: str,
    out: dict[str, Any],
    spans: dict[str, tuple[int, int]],
    *,
    latency_s: float,
) -> dict[str, Any]:
    """The `results.jsonl` line of one answer: what it cost and read, and its scores."""
    rec = {
        "preset": preset,
        "qid": q.qid,
        "dataset": q.dataset,
        "doc_id": q.doc_id,
        "task": q.task,
        "answer": out.get("answer"),
        "llm_calls": out.get("llm_calls", 0),
        "tokens_in": out.get("tokens_in", 0),
        "tokens_out": out.get("tokens_out", 0),
        "tokens_cached": out.get("tokens_cached", 0),
        "llm_fallbacks": out.get("llm_fallbacks", 0),
        "rounds": out.get("rounds", 0),
        "stop_reason": out.get("stop_reason"),
        "confidence": out.get("confidence"),
        "evidence": [e.get("unit_id") for e in out.get("evidence") or []],
        "answer_round": out.get("answer_round", 0),
        "read": answer_read(out),
        "attempts": round_attempts(q, out),
        "latency_s": round(latency_s, 4),
        **score(q, out, spans),
    }
    if q.pair_index is not None:
        rec["pair_index"] = q.pair_index
    if "is_question_modified" in q.meta:
        rec["is_question_modified"] = bool(q.meta["is_question_modified"])
    return rec


def round_attempts(q: BenchQuestion, output: dict[str, Any]) -> list[dict[str, Any]]:
    """Each round's attempt as the trace holds it (answer, confidence, grounding) with its own
    score, so a rule choosing among the rounds can be measured on a run's records without
    running the model again."""
    return [
        {
            "round": step.get("round"),
            "answer": step.get("answer"),
            "confidence": step.get("confidence"),
            "grounding": step.get("grounding"),
            "decision": step.get("decision"),
            "metrics": answer_metrics(q, step.get("answer")),
        }
        for step in output.get("trace") or []
    ]


def answer_read(output: dict[str, Any]) -> list[str]:
    """Unit ids the answer's own attempt read (from its round of the trace)."""
    step = answer_step(output)
    return list(step.get("read") or []) if step else []


def _chunk_spans(settings: EvalSettings, doc_ids: list[str]) -> dict[str, tuple[int, int]]:
    """Character span of every chunk, for Recall@k against gold evidence."""
    from mindscape.memory.store import MemoryStore

    spans: dict[str, tuple[int, int]] = {}
    for path in {store_dir(settings, d) for d in doc_ids}:
        store = MemoryStore(path)
        for u in store.view("veridical").units:
            spans[u.id] = (u.meta["char_start"], u.meta["char_end"])
        store.close()
    return spans


def _settings_dict(s: EvalSettings) -> dict[str, Any]:
    return {
        "bench": str(s.bench),
        "dataset": s.dataset,
        "split": s.split,
        "presets": s.presets,
        "limit": s.limit,
        "per_doc": s.per_doc,
        **({"doc_ids": s.doc_ids} if s.doc_ids else {}),
        "sample": s.sample,
        "seed": s.seed,
        "concurrency": s.concurrency,
        "pooled": s.pooled,
        **({"context": s.context} if s.context else {}),
        **{k: v for k, v in s.extra.items() if k != "command"},
    }


def _bar(it: Iterable[Any], desc: str, on: bool, total: int | None = None) -> Iterable[Any]:
    if not on:
        return it
    import sys

    from tqdm import tqdm

    return tqdm(it, desc=desc, total=total, file=sys.stderr, leave=False)
