"""Where does each ranker put the answering sentence among the focus candidates? Model-free.

    python benchmarks/ranker/evidence_ranking.py --bench ../shared/bench --dataset fairytaleqa \
        --split dev --sample 0 --rankers fused learned
    python benchmarks/ranker/evidence_ranking.py --demo --rankers fused learned

For every question of a bench-layout folder (``--bench DIR``; ``--demo`` writes the bundled
story and its four questions as one), the real graph retrieves its first round (preset
``--preset``, default naive) with a stand-in reader, and the focus candidates it would rank
(the sentences of the retrieved chunks) are captured. Each ranker then orders the same
candidates, and the focused reader's windows are chosen from that order exactly as the
local model's are (the two best windows of a 600-token focused set). Per ranker:

* **hit@1**, **MRR**: the rank of the first candidate that lies in the gold evidence (a
  gold span; where a question has none, a sentence that holds a reference answer: at least
  60% of its content words). A question with no such candidate counts as a miss.
* **in 2 windows**: a gold sentence is in the two windows the reader reads.
* **holds**: the two windows hold a reference answer (as ``evidence/focus_recall.py`` counts it).
* **ms/q**: ranking time per question (candidates' cosines come from the index cache).

Each later ranker is compared with the first, paired over the questions (points, 95%
bootstrap CI). ``--out DIR`` writes ``summary.json`` and one line per question
(``questions.jsonl``). The last line printed is the summary as one JSON object.
"""

from __future__ import annotations

import json
import pickle
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.common import (
    begin_test_run,
    bench_questions,
    limit_threads,
    log,
    log_test_run,
    mean_ci,
    paired_points,
    sample_parser,
)
from benchmarks.evidence.focus_recall import NotStatedChat, holds_answer, targets
from mindscape.deps import Deps
from mindscape.eval.bench import system_view
from mindscape.eval.runner import store_dir
from mindscape.graphs.qa import answer_question
from mindscape.llm import LLMSettings
from mindscape.reasoners import focus
from mindscape.reasoners.rankers import FusedRanker, Ranker, load_ranker
from mindscape.tokens import default_counter

READ_WINDOWS = 2
"""Windows the local model reads (Context.focus_windows)."""


@dataclass
class Captured:
    """One question's first-round focus pool, as the graph built it."""

    question: str
    pool: focus.Pool
    gold: list[int] = field(default_factory=list)
    """Positions (in ``pool.candidates``) of the gold candidates."""


def capture_pools(questions: Sequence[Any], settings: Any, preset: str) -> list[Captured | None]:
    """Run each question's first round through the graph and keep its focus pool (None when
    the graph built none: no veridical hit)."""
    got: list[Captured] = []
    real = focus.candidates

    def recording(question: str, *args: Any, **kw: Any) -> focus.Pool:
        pool = real(question, *args, **kw)
        got.append(Captured(question, pool))
        return pool

    deps = Deps(
        chat=NotStatedChat(), llm_settings=LLMSettings(backend="local"), ranker=FusedRanker()
    )
    out: list[Captured | None] = []
    focus.candidates = recording  # type: ignore[assignment]
    try:
        for n, q in enumerate(questions, 1):
            got.clear()
            answer_question(
                system_view(q), preset=preset, store=str(store_dir(settings, q.doc_id)),
                deps=deps, max_rounds=1,
            )  # fmt: skip
            out.append(got[0] if got else None)
            if n % 100 == 0:
                log(f"  captured {n}/{len(questions)}")
    finally:
        focus.candidates = real  # type: ignore[assignment]
    for q, cap in zip(questions, out, strict=True):
        if cap is not None:
            cap.gold = gold_positions(q, cap.pool)
    return out


def gold_positions(q: Any, pool: focus.Pool) -> list[int]:
    """Candidates inside a gold evidence span, or (no spans) holding a reference answer."""
    if q.evidence:
        spans = [(e["char_start"], e["char_end"]) for e in q.evidence]
        return [
            i
            for i, c in enumerate(pool.candidates)
            if c.doc_id == q.doc_id and any(c.start < ge and c.end > gs for gs, ge in spans)
        ]
    return [i for i, c in enumerate(pool.candidates) if holds_answer(c.text, targets(q))]


def read_windows(cap: Captured, ranked: list[tuple[int, float]]) -> list[str]:
    """The texts of the windows the local reader reads, given a ranking."""
    passages = focus.select(cap.pool, ranked, count=default_counter().count)
    return [p["text"] for p in focus.best_windows(passages, READ_WINDOWS)]


def measure(q: Any, cap: Captured | None, ranker: Ranker) -> dict[str, Any]:
    """One question under one ranker."""
    if cap is None or not cap.pool.candidates:
        return {"rank": None, "hit1": 0.0, "rr": 0.0, "win": 0.0, "holds": 0.0, "ms": 0.0}
    t0 = time.perf_counter()
    ranked = focus.rank(cap.pool, cap.question, ranker)
    ms = 1000 * (time.perf_counter() - t0)
    where = {pos: r for r, (pos, _) in enumerate(ranked, 1)}
    pos_of = cap.pool.positions
    ranks = sorted(where[pos_of[i]] for i in cap.gold)
    windows = read_windows(cap, ranked)
    text = " ".join(windows)
    gold_texts = [cap.pool.candidates[i].text for i in cap.gold]
    win = any(len(t) >= 12 and t in text for t in gold_texts)
    rank = ranks[0] if ranks else None
    return {
        "rank": rank,
        "hit1": float(rank == 1),
        "rr": 1.0 / rank if rank else 0.0,
        "win": float(win),
        "holds": float(holds_answer(text, targets(q))),
        "ms": ms,
        "candidates": len(cap.pool.candidates),
    }


def demo_bench(root: Path) -> Path:
    """The bundled demo story and its questions written as a bench-layout folder (answers:
    the reference answers; no gold spans)."""
    from importlib import resources

    data = resources.files("mindscape") / "data"
    spec = json.loads((data / "demo.json").read_text())
    bench = root / "demo-bench"
    (bench / "demo").mkdir(parents=True, exist_ok=True)
    doc = {
        "doc_id": spec["doc_id"], "dataset": "demo", "split": "dev", "title": spec["title"],
        "text": (data / spec["file"]).read_text(), "meta": {},
    }  # fmt: skip
    qs = [
        {
            "qid": f"demo-{n}",
            "dataset": "demo",
            "split": "dev",
            "doc_id": spec["doc_id"],
            "task": "open_qa",
            "question": item["question"],
            "answers": [item["reference"]],
        }  # fmt: skip
        for n, item in enumerate(spec["questions"], 1)
    ]
    (bench / "demo" / "documents.jsonl").write_text(json.dumps(doc) + "\n")
    (bench / "demo" / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    (bench / "manifest.json").write_text(
        json.dumps({"datasets": {"demo": {"splits": {"dev": {}}}}})
    )
    return bench


def summarise(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means with 95% bootstrap CIs of one ranker's per-question rows."""
    out: dict[str, Any] = {"ranker": name}
    for key in ("hit1", "rr", "win", "holds"):
        out[key] = mean_ci([r[key] for r in rows], n_resamples=1000)
    ms = sorted(r["ms"] for r in rows if r.get("candidates"))
    out["ms_p50"] = round(ms[len(ms) // 2], 1) if ms else 0.0
    out["ms_mean"] = round(sum(ms) / len(ms), 1) if ms else 0.0
    return out


def main() -> None:
    ap = sample_parser(__doc__, sample=0)
    ap.add_argument("--stores", default=".mindscape/bench-stores")
    ap.add_argument("--preset", default="naive")
    ap.add_argument("--rankers", nargs="+", default=["fused", "learned"])
    ap.add_argument("--per-doc", type=int, default=None, help="each document's first K questions")
    ap.add_argument("--limit", type=int, default=None, help="the first N questions")
    ap.add_argument("--demo", action="store_true", help="rank the bundled demo's questions")
    ap.add_argument(
        "--ranker-dir", default="", help="the learned ranker's folder (default: shipped)"
    )
    ap.add_argument("--threads", type=int, default=2, help="torch threads for the learned ranker")
    ap.add_argument("--out", default="", help="folder for summary.json and questions.jsonl")
    ap.add_argument(
        "--pools", default="", help="pickle of the captured pools (reused when present)"
    )
    args = ap.parse_args()
    begin_test_run(args)
    tmp = tempfile.TemporaryDirectory()
    if args.demo:
        args.bench, args.dataset, args.split = str(demo_bench(Path(tmp.name))), "demo", "dev"
    questions, settings = bench_questions(
        args, sample=args.sample or None, seed=args.seed, per_doc=args.per_doc, limit=args.limit
    )
    questions = [q for q in questions if q.task in ("open_qa", "multiple_choice")]
    log(f"{len(questions)} questions of {args.dataset} {args.split}; capturing focus pools")
    cache = Path(args.pools) if args.pools else None
    if cache is not None and cache.is_file():
        with cache.open("rb") as f:
            caps = pickle.load(f)[1]
    else:
        caps = capture_pools(questions, settings, args.preset)
        if cache is not None:
            with cache.open("wb") as f:
                pickle.dump((questions, caps), f)
    rows: dict[str, list[dict[str, Any]]] = {}
    limit_threads(args.threads)
    for name in args.rankers:
        ranker = load_ranker(name, Path(args.ranker_dir) if args.ranker_dir else None)
        rows[name] = [measure(q, cap, ranker) for q, cap in zip(questions, caps, strict=True)]
    with_gold = sum(1 for c in caps if c is not None and c.gold) / max(1, len(caps))
    summary: dict[str, Any] = {
        "bench": args.bench if not args.demo else "demo", "dataset": args.dataset,
        "split": args.split, "preset": args.preset, "n": len(questions),
        "gold_among_candidates": round(with_gold, 4),
        "candidates_mean": round(
            sum(len(c.pool.candidates) for c in caps if c) / max(1, sum(1 for c in caps if c)), 1
        ),
        "rankers": [summarise(name, r) for name, r in rows.items()],
    }  # fmt: skip
    first = args.rankers[0]
    print(f"{args.dataset} {args.split}: {len(questions)} questions, gold among candidates "
          f"{with_gold:.3f}")  # fmt: skip
    print(f"{'ranker':10} {'hit@1':>22} {'MRR':>22} {'in 2 windows':>22} {'holds':>22} {'ms/q':>6}")
    for s in summary["rankers"]:
        cells = [f"{s[k]['mean']:.3f} [{s[k]['low']:.3f}, {s[k]['high']:.3f}]" for k in
                 ("hit1", "rr", "win", "holds")]  # fmt: skip
        print(f"{s['ranker']:10} " + " ".join(f"{c:>22}" for c in cells) + f" {s['ms_p50']:6.0f}")
    for name in args.rankers[1:]:
        diffs = {k: paired_points([r[k] for r in rows[name]], [r[k] for r in rows[first]])
                 for k in ("hit1", "rr", "win", "holds")}  # fmt: skip
        summary[f"{name} - {first}"] = diffs
        print(f"{name} - {first} (points): " + ", ".join(
            f"{k} {d['mean']:+.1f} [{d['low']:+.1f}, {d['high']:+.1f}]" for k, d in diffs.items()
        ))  # fmt: skip
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        with (out / "questions.jsonl").open("w") as f:
            for n, q in enumerate(questions):
                rec = {"qid": q.qid, **{name: rows[name][n] for name in args.rankers}}
                f.write(json.dumps(rec) + "\n")
    n = len(questions)
    log_test_run(args, {s["ranker"]: ("holds", s["holds"]["mean"], n) for s in summary["rankers"]})
    print(json.dumps(summary))


if __name__ == "__main__":  # run through the module, so pickled pools name it, not __main__
    from benchmarks.ranker import evidence_ranking

    evidence_ranking.main()
