"""Why did a preset fail a question: the evidence was missing (retrieval) or read wrong (reasoning)?

    python benchmarks/evidence/failure_analysis.py --run runs/local/fairytaleqa-test --bench ../shared/bench \
        --dataset fairytaleqa --split test --preset mindscape [--limit 30]

Reads the run's `results.jsonl` (records keep the ids of the passages the answer read, `read`;
older records only the evidence returned with it, `evidence`, used instead), takes
the failed questions (headline metric below 0.5), and for each one asks whether the evidence
held the answer:

* FairytaleQA has gold evidence spans: *present* when an evidence chunk, or a summary covering
  one, overlaps a gold span (exact);
* elsewhere the gold answer's words stand in for it: *present* when at least 60% of the content
  words of a reference answer (open QA) or of the gold option (multiple choice) occur in the
  evidence text (a heuristic; claims are left *unknown*).

Prints one line per failed question and the counts; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.common import allow_dirty_option, begin_test_run, chunk_spans, log_test_run
from mindscape.eval.bench import load_questions
from mindscape.eval.report import PRIMARY_METRICS
from mindscape.eval.runner import EvalSettings, store_dir
from mindscape.memory.store import MemoryStore
from mindscape.memory.types import LAYERS
from mindscape.reasoners.text import content_words


@cache
def store_at(path: str) -> tuple[MemoryStore, dict[str, tuple[int, int]]]:
    """A bench store, opened once, with its chunks' character spans."""
    store = MemoryStore(path)
    return store, chunk_spans(store)


def evidence_units(store: MemoryStore, ids: list[str]) -> list:
    """The units behind evidence ids, from any layer."""
    wanted, found = set(ids), []
    for layer in LAYERS:
        found += [u for u in store.view(layer).units if u.id in wanted]
    return found


def verdict(q, units, spans: dict[str, tuple[int, int]]) -> str:  # noqa: ANN001
    """present / missing / unknown for one failed question."""
    if q.evidence:
        chunks = {c for u in units for c in u.chunk_ids}
        gold = [(e["char_start"], e["char_end"]) for e in q.evidence]
        hit = any(
            s < ge and e > gs
            for c in chunks
            if c in spans
            for s, e in [spans[c]]
            for gs, ge in gold
        )
        return "present" if hit else "missing"
    if q.task == "claim_verification" or not units:
        return "unknown" if q.task == "claim_verification" else "missing"
    text = content_words(" ".join(u.text for u in units))
    targets = q.answers if q.task == "open_qa" else [q.options[q.answer_index]]
    for target in targets:
        words = content_words(target)
        if words and len(words & text) >= 0.6 * len(words):
            return "present"
    return "missing"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--run", required=True, help="the eval's output folder (holds results.jsonl)")
    ap.add_argument("--bench", default="../shared/bench")
    allow_dirty_option(ap)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--split", required=True)
    ap.add_argument("--preset", default="mindscape")
    ap.add_argument("--stores", default=".mindscape/bench-stores")
    ap.add_argument("--limit", type=int, default=30, help="failed questions to read")
    args = ap.parse_args()
    begin_test_run(args)
    records = [json.loads(x) for x in (Path(args.run) / "results.jsonl").read_text().splitlines()]
    mine = [r for r in records if r["preset"] == args.preset and "evidence" in r]
    questions = {q.qid: q for q in load_questions(args.bench, args.dataset, args.split)}
    settings = EvalSettings(
        bench=Path(args.bench),
        dataset=args.dataset,
        split=args.split,
        presets=[args.preset],
        out=Path(args.run),
        stores=Path(args.stores),
    )
    counts: dict[str, int] = {}
    failed = []
    for r in mine:
        metric = next((m for m in PRIMARY_METRICS if m in r["metrics"]), None)
        if metric is not None and r["metrics"][metric] < 0.5:
            failed.append(r)
    for r in failed[: args.limit]:
        q = questions[r["qid"]]
        store, spans = store_at(str(store_dir(settings, q.doc_id)))
        why = verdict(q, evidence_units(store, r.get("read") or r["evidence"]), spans)
        counts[why] = counts.get(why, 0) + 1
        gold = q.answers[0] if q.answers else q.label
        print(
            f"{why:8} {r['qid']}: {q.question[:70]!r} gold {str(gold)[:40]!r} got {r['answer']!r}"
        )
    summary = {"preset": args.preset, "failed": len(failed), "read": min(len(failed), args.limit)}
    log_test_run(args, None, presets=[args.preset])  # it reads test rows: the log says so
    print(json.dumps({**summary, **counts}))


if __name__ == "__main__":
    main()
