"""The reader's ceiling: the local model given the gold evidence, against the pipeline.

    python benchmarks/reader/ceiling.py --bench ../shared/bench --dataset fairytaleqa \
        --split test --sample 60 --seed 24 --out docs/results/local/fairytaleqa-test-sample60

answers the same fixed random sample of questions that

    mindscape eval --bench ../shared/bench --dataset fairytaleqa --split test --sample 60 \
        --seed 24 --preset naive,mindscape --llm local --out docs/results/local/fairytaleqa-test-sample60

answered, with the same reader and the same prompt (the default Context's ``reader``), but reading the question's gold
evidence (FairytaleQA's annotated sections) instead of what retrieval found. Its answers go to
``OUT/ceiling.jsonl`` (a rerun skips what is done). Then it prints, per preset of
``OUT/results.jsonl`` and for the ceiling: token F1 with a 95% bootstrap interval, the share
of the ceiling, LLM calls, input tokens per question (median and mean) and seconds. The last
line is one JSON object. A run on a test split is logged in docs/results/test-runs.jsonl.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.common import begin_test_run, log, log_test_run, sample_parser
from mindscape.eval.bench import load_questions
from mindscape.eval.metrics import bootstrap_ci, token_f1
from mindscape.eval.runner import read_records
from mindscape.llm import LLMSettings, Usage
from mindscape.reasoners.base import AnswerRequest
from mindscape.state import EvidenceItem


def as_passages(q: Any, texts: list[str], tag: str) -> list[EvidenceItem]:
    """Texts of `q`'s story as evidence items for the reader (ids ``doc:TAGn``)."""
    return [
        EvidenceItem(
            unit_id=f"{q.doc_id}:{tag}{n}",
            layer="veridical",
            doc_id=q.doc_id,
            chunk_ids=[],
            text=text,
            score=1.0,
            score_query=0.0,
            score_signature=0.0,
            tokens=0,
            round=1,
            probe=q.question,
        )
        for n, text in enumerate(texts)
    ]


def gold_passages(q: Any) -> list[EvidenceItem]:
    """The question's gold evidence as evidence items, in story order."""
    spans = sorted(q.evidence or [], key=lambda e: e["char_start"])
    return as_passages(q, [e["text"] for e in spans], "gold")


def reader() -> Any:
    """The local model as the plain-prompt answerer."""
    from mindscape.context import Context
    from mindscape.deps import Deps
    from mindscape.embeddings import load_embedder
    from mindscape.reasoners.llm import LLMReasoner
    from mindscape.reasoners.sentence_vectors import SentenceVectors
    from mindscape.run import offline_reasoner

    deps = Deps(llm_settings=LLMSettings(backend="local"))
    run = Context().resolved()
    fallback = offline_reasoner(run, SentenceVectors(load_embedder()))
    return LLMReasoner(
        deps.get_chat(),
        fallback,
        settings=deps.settings(),
        passage_tokens=int(run.llm_passage_tokens or 0),
        roles=["answer"],
        reader=run.reader,
    )


def run_ceiling(questions: list[Any], path: Path) -> None:
    """Answer each question from its gold evidence, appending to `path` (resumable)."""
    done = {r["qid"] for r in read_records(path)} if path.exists() else set()
    todo = [q for q in questions if q.qid not in done and q.evidence]
    if not todo:
        return
    model = reader()
    for n, q in enumerate(todo, 1):
        usage, t0 = Usage(), time.perf_counter()
        passages = gold_passages(q)
        attempt = model.plain_answer(AnswerRequest(q.question, "open"), passages, usage)
        rec = {
            "preset": "ceiling",
            "qid": q.qid,
            "answer": attempt["answer"],
            "metrics": {"f1": token_f1(attempt["answer"], q.answers)},
            "llm_calls": usage.calls,
            "tokens_in": usage.tokens_in,
            "latency_s": round(time.perf_counter() - t0, 3),
        }
        with path.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        log(f"ceiling {n}/{len(todo)} {q.qid}: {rec['answer']!r} f1={rec['metrics']['f1']:.2f}")


def summarise(records: list[dict[str, Any]], wanted: set[str]) -> dict[str, dict[str, Any]]:
    """Per preset: F1 with its interval, calls, input tokens and seconds per question."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r["qid"] in wanted:
            by.setdefault(r["preset"], []).append(r)
    out = {}
    for preset, rows in by.items():
        f1 = bootstrap_ci([float(r["metrics"]["f1"]) for r in rows])
        tokens = [int(r.get("tokens_in", 0)) for r in rows]
        out[preset] = {
            "n": len(rows),
            "f1": f1,
            "llm_calls": statistics.mean(r.get("llm_calls", 0) for r in rows),
            "tokens_in_p50": statistics.median(tokens),
            "tokens_in_mean": statistics.mean(tokens),
            "seconds_p50": statistics.median(float(r.get("latency_s", 0)) for r in rows),
        }
    return out


def paired_differences(
    records: list[dict[str, Any]], wanted: set[str]
) -> dict[str, dict[str, Any]]:
    """F1 of each reader minus naive's, over the questions both answered, with a 95%
    bootstrap interval."""
    f1 = {(r["preset"], r["qid"]): float(r["metrics"]["f1"]) for r in records if r["qid"] in wanted}
    naive = {q: v for (p, q), v in f1.items() if p == "naive"}
    out = {}
    for preset in sorted({p for p, _ in f1} - {"naive"}):
        common = [q for (p, q) in f1 if p == preset and q in naive]
        if common:
            mean, low, high = bootstrap_ci([f1[(preset, q)] - naive[q] for q in common])
            out[f"{preset} - naive"] = {"mean": mean, "low": low, "high": high, "n": len(common)}
    return out


def main() -> None:
    ap = sample_parser(__doc__, split="test", seed=24)
    ap.add_argument("--out", required=True)
    ap.add_argument("--report-only", action="store_true", help="answer nothing, only report")
    args = ap.parse_args()
    begin_test_run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    qs = load_questions(args.bench, args.dataset, args.split, sample=args.sample, seed=args.seed)
    if not args.report_only:
        run_ceiling(qs, out / "ceiling.jsonl")
    records = [*read_records(out / "results.jsonl")] if (out / "results.jsonl").exists() else []
    records += [*read_records(out / "ceiling.jsonl")] if (out / "ceiling.jsonl").exists() else []
    table = summarise(records, {q.qid for q in qs})
    ceiling = table.get("ceiling", {}).get("f1", [0.0])[0]
    print(f"{'reader':10} {'n':>3} {'F1':>6} {'95% CI':>15} {'/ceil':>6} {'calls':>5} "
          f"{'in p50':>7} {'in mean':>7} {'s p50':>6}")  # fmt: skip
    for name, row in table.items():
        f1 = row["f1"]
        share = f1[0] / ceiling if ceiling else float("nan")
        row["share_of_ceiling"] = share
        print(
            f"{name:10} {row['n']:3d} {f1[0]:6.3f} [{f1[1]:.3f}, {f1[2]:.3f}] {share:6.2f} "
            f"{row['llm_calls']:5.2f} {row['tokens_in_p50']:7.0f} {row['tokens_in_mean']:7.0f} "
            f"{row['seconds_p50']:6.1f}"
        )
    log_test_run(args, {k: ("f1", v["f1"][0], v["n"]) for k, v in table.items()}, llm="local")
    paired = paired_differences(records, {q.qid for q in qs})
    for name, row in paired.items():
        print(
            f"{name}: {row['mean']:+.3f} F1 [{row['low']:+.3f}, {row['high']:+.3f}] on {row['n']}"
        )
    print(
        json.dumps(
            {
                "dataset": args.dataset,
                "split": args.split,
                "seed": args.seed,
                **table,
                "paired": paired,
            }
        )
    )


if __name__ == "__main__":
    main()
