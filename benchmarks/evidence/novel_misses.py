"""Where is the answer of a question about a novel? A model-free map of what each lever can fix.

    python benchmarks/evidence/novel_misses.py --bench ../shared/bench --dataset narrativeqa_lit \
        --split dev --per-doc 12 --limit 60 --results runs/novels/dev-naive/results.jsonl \
        --out docs/results/novels/dev-misses

Each question's first round runs through the real graph (preset ``--preset``, default naive,
with a stand-in reader, as ``ranker/evidence_ranking.py`` captures it), and the first place that
holds a reference answer (at least 60% of its content words, as ``evidence/focus_recall.py`` counts
it) names the question's bucket:

* **a. read**: the two windows the local reader reads (the default evidence ranker's order);
* **b. retrieved**: a focus candidate with its two neighbours either side, not read;
* **c. in the book**: some chunk of the book that also shares a content word with the
  question (a short answer alone is found somewhere in any novel), not retrieved;
* **d. nowhere verbatim**: no chunk; a paraphrase, or a fact only the plot as a whole states.

Apart from the buckets, **summary** says whether one of the :data:`SESSIONS` session summaries
nearest the question (the episodic layer, as the store was built; MiniLM cosine) holds it. ``--results`` (an ``eval``
results file of the same questions) adds each question's F1 and splits the table into all
questions and the missed ones (F1 < 0.5). The last line is the summary as one JSON object.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

import numpy as np

from benchmarks.common import begin_test_run, bench_questions, log, log_test_run, sample_parser
from benchmarks.evidence.focus_recall import holds_answer, targets
from benchmarks.ranker.evidence_ranking import Captured, capture_pools, read_windows
from mindscape.embeddings import load_embedder
from mindscape.eval.metrics import bootstrap_ci
from mindscape.eval.runner import store_dir
from mindscape.memory.store import MemoryStore
from mindscape.reasoners import focus
from mindscape.reasoners.rankers import load_ranker
from mindscape.reasoners.text import content_words

SESSIONS = 3
"""Session summaries a question would read (the nearest by cosine)."""
BUCKETS = ("a. read", "b. retrieved", "c. in the book", "d. nowhere verbatim")
MISSED_F1 = 0.5


def bucket(q: Any, cap: Captured | None, chunks: list[str]) -> str:
    """The first of :data:`BUCKETS` whose text holds a reference answer."""
    answers = targets(q)
    if cap is not None and cap.pool.candidates:
        ranked = focus.rank(cap.pool, cap.question, load_ranker("learned"))
        if holds_answer(" ".join(read_windows(cap, ranked)), answers):
            return BUCKETS[0]
        for c in cap.pool.candidates:
            if holds_answer(" ".join([*c.before, c.text, *c.after]), answers):
                return BUCKETS[1]
    asked = content_words(q.question)
    if any(holds_answer(t, answers) and asked & content_words(t) for t in chunks):
        return BUCKETS[2]
    return BUCKETS[3]


def nearest(question: str, units: Any, embed: Any, k: int = SESSIONS) -> list[str]:
    """The texts of the `k` units (a store view) nearest the question by cosine."""
    if not len(units.units):
        return []
    sims = units.vecs @ np.asarray(embed(question), dtype=np.float32)
    return [units.units[i].text for i in np.argsort(-sims)[:k]]


def table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Shares of each bucket and of ``summary`` with 95% bootstrap CIs."""
    out: dict[str, Any] = {"n": len(rows)}
    for name in (*BUCKETS, "summary"):
        hits = [float(r["bucket"] == name if name in BUCKETS else r["summary"]) for r in rows]
        mean, low, high = bootstrap_ci(hits) if hits else (0.0, 0.0, 0.0)
        out[name] = {"count": int(sum(hits)), "share": round(mean, 3),
                     "low": round(low, 3), "high": round(high, 3)}  # fmt: skip
    return out


def main() -> None:
    ap = sample_parser(__doc__, sample=0)
    ap.add_argument("--stores", default=".mindscape/bench-stores")
    ap.add_argument("--preset", default="naive")
    ap.add_argument("--per-doc", type=int, default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--results", default="", help="an eval results.jsonl of these questions")
    ap.add_argument("--out", default="", help="folder for summary.json and questions.jsonl")
    args = ap.parse_args()
    begin_test_run(args)
    questions, settings = bench_questions(
        args, sample=args.sample or None, seed=args.seed, per_doc=args.per_doc, limit=args.limit
    )
    questions = [q for q in questions if q.task == "open_qa"]
    log(f"{len(questions)} questions of {args.dataset} {args.split}; capturing first rounds")
    caps = capture_pools(questions, settings, args.preset)
    f1: dict[str, float] = {}
    if args.results:
        for line in Path(args.results).read_text().splitlines():
            r = json.loads(line)
            if r.get("preset", args.preset) == args.preset:
                f1[r["qid"]] = float(r["metrics"]["f1"])
    embed = load_embedder().embed_query
    books: dict[str, tuple[list[str], Any]] = {}
    rows = []
    for q, cap in zip(questions, caps, strict=True):
        if q.doc_id not in books:
            store = MemoryStore(store_dir(settings, q.doc_id))
            chunks = [u.text for u in store.view("veridical", {q.doc_id}).units]
            books[q.doc_id] = (chunks, store.view("episodic", {q.doc_id}))
        chunks, sessions = books[q.doc_id]
        rows.append({
            "qid": q.qid, "doc_id": q.doc_id, "question": q.question, "answers": list(q.answers),
            "bucket": bucket(q, cap, chunks),
            "summary": any(
                holds_answer(t, targets(q)) for t in nearest(q.question, sessions, embed)
            ),
            **({"f1": f1[q.qid]} if q.qid in f1 else {}),
        })  # fmt: skip
    summary: dict[str, Any] = {
        "dataset": args.dataset, "split": args.split, "preset": args.preset,
        "books": len(books), "all": table(rows),
    }  # fmt: skip
    missed = [r for r in rows if "f1" in r and r["f1"] < MISSED_F1]
    if f1:
        summary["missed"] = table(missed)
        summary["missed_rule"] = f"F1 < {MISSED_F1} in {args.results}"
    print(f"{args.dataset} {args.split}: {len(rows)} questions of {len(books)} books")
    print(f"{'where the answer is':24} {'all':>22}" + (f" {'missed':>22}" if f1 else ""))
    for name in (*BUCKETS, "summary"):
        cells = [summary[k][name] for k in ("all", "missed") if k in summary]
        print(f"{name:24} " + " ".join(
            f"{c['count']:>4} {c['share']:.2f} [{c['low']:.2f}, {c['high']:.2f}]" for c in cells
        ))  # fmt: skip
    print(f"by bucket: {dict(Counter(r['bucket'] for r in rows))}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        (out / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    log_test_run(args, None, presets=[args.preset])
    print(json.dumps(summary))


if __name__ == "__main__":  # through the module, as ranker/evidence_ranking.py is run
    from benchmarks.evidence import novel_misses

    novel_misses.main()
