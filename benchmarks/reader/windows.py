"""How many focused windows should the small reader read? The same reader over fewer windows.

    python benchmarks/reader/windows.py --bench ../shared/bench --dataset fairytaleqa \
        --split dev --sample 60 --seed 7 --out runs/reading-windows

For each question of a fixed random sample, the real graph and retriever build the `naive`
preset's first focused set (a stand-in model answering "not stated" records it; no model
call). Then the local model answers with the pipeline's own plain prompt and grounding
(``LLMReasoner.plain_answer``) from:

* ``all``: the whole focused set in story order (``focus_windows`` 0, what an endpoint reads);
* ``top1``, ``top2``: only the one or two windows with the best fused score, best first
  (``focus_windows`` 1 or 2; the pipeline's default is 2);
* ``gold``: the question's gold evidence (FairytaleQA's annotated sections), the ceiling;
  questions without any are left out of it.

So retrieval is the same for every reading and only what the reader sees changes. Answers go
to ``OUT/readings.jsonl`` (a rerun skips what is done). Per reading it prints the score
(token F1 of an open answer, accuracy of a multiple-choice one) with a 95% bootstrap interval,
the input tokens and the share of readings that hold a reference answer (as in
evidence/focus_recall.py); and each reading minus ``all``, paired over the questions. The last line is
one JSON object. Tune on dev only.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.common import begin_test_run, log, log_test_run, sample_answers, sample_parser
from benchmarks.evidence.focus_recall import NotStatedChat, holds_answer, targets
from benchmarks.reader.ceiling import gold_passages, reader
from mindscape.deps import Deps
from mindscape.eval.bench import system_view
from mindscape.eval.metrics import bootstrap_ci
from mindscape.eval.runner import read_records, score, store_dir
from mindscape.graphs.qa import answer_question
from mindscape.llm import LLMSettings, Usage
from mindscape.reasoners import llm as llm_module
from mindscape.reasoners.base import AnswerRequest
from mindscape.reasoners.focus import best_windows
from mindscape.state import EvidenceItem

READINGS = ("all", "top1", "top2", "gold")


def focused_sets(questions: list[Any], settings: Any) -> dict[str, list[EvidenceItem]]:
    """Each question's first focused set (story order), as the `naive` preset builds it."""
    seen: list[list[EvidenceItem]] = []
    plain = llm_module.LLMReasoner.plain_answer

    def record(self: Any, req: AnswerRequest, shown: list[EvidenceItem], usage: Usage) -> Any:
        seen.append(list(shown))
        return plain(self, req, shown, usage)

    deps = Deps(chat=NotStatedChat(), llm_settings=LLMSettings(backend="local"))
    out: dict[str, list[EvidenceItem]] = {}
    llm_module.LLMReasoner.plain_answer = record  # type: ignore[method-assign]
    try:
        for q in questions:
            seen.clear()
            path = str(store_dir(settings, q.doc_id))
            answer_question(
                system_view(q),
                preset="naive",
                store=path,
                deps=deps,
                max_rounds=1,
                focus_windows=0,  # the whole set: the readings below choose from it
            )
            out[q.qid] = seen[0] if seen else []
    finally:
        llm_module.LLMReasoner.plain_answer = plain  # type: ignore[method-assign]
    return out


def reading(name: str, shown: list[EvidenceItem], q: Any) -> list[EvidenceItem]:
    """What the reader reads under `name`."""
    if name == "gold":
        return gold_passages(q)
    return best_windows(shown, {"all": 0, "top1": 1, "top2": 2}[name])


def request(q: Any) -> AnswerRequest:
    """The answer request for a bench question (open, or multiple choice with its options)."""
    if q.task == "multiple_choice":
        return AnswerRequest(q.question, "multiple-choice", options=list(q.options))
    return AnswerRequest(q.question, "open")


def main() -> None:
    ap = sample_parser(__doc__)
    ap.add_argument("--stores", default=".mindscape/bench-stores")
    ap.add_argument("--readings", nargs="+", default=list(READINGS), choices=READINGS)
    ap.add_argument("--out", default="runs/reading-windows")
    args = ap.parse_args()
    begin_test_run(args)
    questions, settings, path = sample_answers(args, "readings.jsonl")
    done = {(r["reading"], r["qid"]) for r in read_records(path)} if path.exists() else set()
    todo = [
        (n, q)
        for n in args.readings
        for q in questions
        if (n, q.qid) not in done and (n != "gold" or q.evidence)
    ]
    if todo:
        sets = focused_sets(questions, settings)
        model = reader()
        for k, (name, q) in enumerate(todo, 1):
            usage = Usage()
            shown = reading(name, sets[q.qid], q)
            attempt = model.plain_answer(request(q), shown, usage)
            metrics = score(q, {"answer": attempt["answer"]}, {})["metrics"]
            rec = {
                "reading": name,
                "qid": q.qid,
                "answer": attempt["answer"],
                "score": metrics.get("f1", metrics.get("accuracy", 0.0)),
                "holds": holds_answer(" ".join(p["text"] for p in shown), targets(q)),
                "tokens_in": usage.tokens_in,
            }
            with path.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            log(f"{name} {k}/{len(todo)} {q.qid}: {rec['answer']!r} score={rec['score']:.2f}")
    wanted = {q.qid for q in questions}
    rows = [r for r in read_records(path) if r["qid"] in wanted]
    got = {(r["reading"], r["qid"]): r["score"] for r in rows}
    summary: dict[str, Any] = {"dataset": args.dataset, "split": args.split, "n": len(wanted)}
    for name in args.readings:
        mine = [r for r in rows if r["reading"] == name]
        if not mine:
            continue
        ci = bootstrap_ci([r["score"] for r in mine])
        tokens = statistics.mean(r["tokens_in"] for r in mine)
        holds = statistics.mean(float(r.get("holds", 0)) for r in mine)
        summary[name] = {"score": ci, "tokens_in": tokens, "holds": holds}
        print(
            f"{name:5} score {ci[0]:.3f} [{ci[1]:.3f}, {ci[2]:.3f}]  input tokens {tokens:.0f}  "
            f"holds an answer {holds:.3f}"
        )
        if name != "all" and all(("all", r["qid"]) in got for r in mine):
            diff = bootstrap_ci([got[(name, r["qid"])] - got[("all", r["qid"])] for r in mine])
            summary[f"{name} - all"] = diff
            print(f"      {name} - all: {diff[0]:+.3f} [{diff[1]:+.3f}, {diff[2]:+.3f}]")
    figures = {
        k: ("score", summary[k]["score"][0], len(wanted)) for k in args.readings if k in summary
    }
    log_test_run(args, figures, llm="local")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
