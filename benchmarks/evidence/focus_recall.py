"""Does the focused set hold the answer? A model-free check of what an LLM answerer reads.

    python benchmarks/evidence/focus_recall.py --bench ../shared/bench --dataset fairytaleqa \
        --split dev --sample 200 --seed 7 --variants "naive" "naive:focus_tokens=0;llm_passage_tokens=600"

``--sample 0`` with ``--doc-id`` and ``--per-doc`` takes each named book's first questions
instead of a random sample (novels, whose stores take minutes each to build).

Every question runs through the real graph, retriever and focused reader with a stand-in
local model that answers "not stated", so each variant's first-round reading is recorded
(the trace's ``passages``, or the chunks its ``read`` names when focus is off). Per variant
the script prints the share of questions whose reading holds a reference answer (at least
60% of its content words, as in evidence/failure_analysis.py), with a 95% bootstrap interval, and the
tokens read. With ``--answer`` the local model answers too (the full loop) and the script adds
token F1 (open questions) or accuracy (multiple choice) and input tokens per question. Each
later variant is compared with the first, paired over the questions: on "holds", or with
``--answer`` on the score. Tune on dev only.

A variant is a preset with optional Context fields: ``preset:field=value;field=value``
(values parsed as JSON, else kept as text). The last line is one JSON object.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from benchmarks.common import begin_test_run, bench_questions, log, log_test_run, sample_parser
from benchmarks.evidence.answer_evidence import parse_variant
from benchmarks.evidence.failure_analysis import evidence_units, store_at
from mindscape.deps import Deps
from mindscape.eval.bench import system_view
from mindscape.eval.metrics import bootstrap_ci
from mindscape.eval.runner import score, store_dir
from mindscape.graphs.qa import answer_question
from mindscape.llm import LLMSettings
from mindscape.reasoners.text import content_words
from mindscape.tokens import default_counter


class NotStatedChat(BaseChatModel):
    """Replies "not stated" to every prompt (the plain prompt's no-evidence reply)."""

    @property
    def _llm_type(self) -> str:
        return "not-stated"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="not stated"))])


def holds_answer(text: str, answers: list[str]) -> bool:
    """Whether ``text`` holds at least 60% of some answer's content words."""
    have = content_words(text)
    return any((w := content_words(a)) and len(w & have) >= 0.6 * len(w) for a in answers)


def targets(q: Any) -> list[str]:
    """What the reading should hold: the reference answers, or the right option's text."""
    return list(q.answers) if q.task == "open_qa" else [q.options[q.answer_index]]


def quality(q: Any, out: dict[str, Any]) -> float:
    """Token F1 of an open answer, accuracy of a multiple-choice one."""
    m = score(q, out, {})["metrics"]
    return float(m["f1"] if "f1" in m else m["accuracy"])


def first_reading(out: dict[str, Any], store: Any) -> str:
    """The text the first answer attempt read."""
    step = (out.get("trace") or [{}])[0]
    if step.get("passages"):
        return " ".join(step["passages"])
    return " ".join(u.text for u in evidence_units(store, step.get("read") or []))


def main() -> None:
    ap = sample_parser(__doc__, sample=200)
    ap.add_argument("--stores", default=".mindscape/bench-stores")
    ap.add_argument("--variants", nargs="+", default=["naive", "mindscape"])
    ap.add_argument("--doc-id", action="append", default=None, help="only this book (repeat)")
    ap.add_argument("--per-doc", type=int, default=None, help="each book's first K questions")
    ap.add_argument(
        "--answer",
        action="store_true",
        help="answer with the local model too (full loop) and report token F1",
    )
    args = ap.parse_args()
    begin_test_run(args)
    questions, settings = bench_questions(
        args, sample=args.sample or None, seed=args.seed, doc_ids=args.doc_id, per_doc=args.per_doc
    )
    questions = [q for q in questions if q.task in ("open_qa", "multiple_choice")]
    deps = (
        Deps(llm_settings=LLMSettings(backend="local"))
        if args.answer
        else Deps(chat=NotStatedChat(), llm_settings=LLMSettings(backend="local"))
    )
    rounds = {} if args.answer else {"max_rounds": 1}
    count = default_counter().count
    stores: dict[str, Any] = {}
    scores: dict[str, list[float]] = {}
    summary: dict[str, Any] = {"dataset": args.dataset, "split": args.split, "n": len(questions)}
    print(f"{'variant':60} {'holds':>6} {'95% CI':>15} {'tokens':>7} {'score':>6} {'in/q':>6}")
    for variant in args.variants:
        preset, fields = parse_variant(variant)
        held, tokens, f1, tokens_in = [], [], [], []
        for q in questions:
            path = store_dir(settings, q.doc_id)
            if str(path) not in stores:
                stores[str(path)] = store_at(str(path))[0]
            store = stores[str(path)]
            out = answer_question(
                system_view(q), preset=preset, store=str(path), deps=deps, **rounds, **fields
            )
            f1.append(quality(q, out))
            tokens_in.append(out.get("tokens_in", 0))
            if args.answer:
                log(f"{q.qid}: {out.get('answer')!r} vs {targets(q)[0]!r} -> {f1[-1]:.2f}")
            text = first_reading(out, store)
            held.append(float(holds_answer(text, targets(q))))
            tokens.append(count(text))
        ci = bootstrap_ci(held)
        row = {
            "holds": sum(held) / len(held),
            "ci": ci,
            "tokens": sum(tokens) / len(tokens),
            "f1": bootstrap_ci(f1),
            "tokens_in": sum(tokens_in) / len(tokens_in),
        }
        summary[variant] = row
        scores[variant] = f1 if args.answer else held  # what the paired difference compares
        log(f"done {variant}")
        print(
            f"{variant:60} {row['holds']:6.3f} [{ci[1]:.3f}, {ci[2]:.3f}] {row['tokens']:7.0f} "
            f"{row['f1'][0]:6.3f} {row['tokens_in']:6.0f}"
        )
    if len(scores) > 1:  # the later variants against the first, paired over the questions
        first = scores[args.variants[0]]
        measure = "score" if args.answer else "holds"
        for variant in args.variants[1:]:
            diff = bootstrap_ci([b - a for a, b in zip(first, scores[variant], strict=True)])
            summary[f"{variant} - {args.variants[0]}"] = diff
            print(
                f"{variant} - {args.variants[0]} ({measure}): "
                f"{diff[0]:+.3f} [{diff[1]:+.3f}, {diff[2]:+.3f}]"
            )
    metric = "score" if args.answer else "holds"
    n = len(questions)
    figures = {
        v: (metric, summary[v]["f1"][0] if args.answer else summary[v]["holds"], n)
        for v in args.variants
    }
    log_test_run(args, figures, llm="local" if args.answer else None)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
