"""Does the answerer get to read the evidence? A model-free check of what each preset shows it.

    python benchmarks/evidence/answer_evidence.py --bench ../shared/bench --dataset fairytaleqa \
        --split dev --per-doc 10 --variants naive,mindscape,"mindscape:answer_with_signature=false"

With the local model most failures of `mindscape` had the evidence missing from what the
answer read (benchmarks/evidence/failure_analysis.py), so this measures that directly, with no model:
every question runs through the real graph, retriever and budgets, with a stand-in chat model
that plays the local model's roles (answer, update) and always says the passages are not
enough. The loop therefore refines until its token budget stops it, as it mostly does with
the 1.5B model, and every attempt records the passages it read (`Attempt.read`). Per
variant the script prints the share of questions whose evidence was *present* in what round 1
read and in what the final answer read, judged as in evidence/failure_analysis.py (FairytaleQA's gold
spans exactly; the gold answer's words elsewhere), with the rounds and input tokens.

A variant is a preset, optionally with Context fields: `preset:field=value;field=value`
(values parsed as JSON, else kept as text). The last line is one JSON object. With
`--out FILE`, one JSON line per (variant, question) is written to FILE as well: `variant`,
`qid`, `doc_id`, `present_first`, `present_final` (the verdicts above), `present_last` (the
verdict on what the last round's answer read: the final answer can be an earlier round's, as
on a tie, which an always-unsure stand-in makes of every round), `rounds`, `answer_round` and
`tokens_in`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from benchmarks.common import allow_dirty_option, begin_test_run, bench_questions, log, log_test_run
from benchmarks.evidence.failure_analysis import evidence_units, store_at, verdict
from mindscape.deps import Deps
from mindscape.eval.bench import system_view
from mindscape.eval.metrics import bootstrap_ci
from mindscape.eval.runner import store_dir
from mindscape.graphs.qa import answer_question
from mindscape.llm import LLMSettings
from mindscape.tokens import TokenCounter

UNSURE = json.dumps({"quote": "", "answer": "unknown", "sufficient": False})


class UnsureChat(BaseChatModel):
    """Answers every prompt with "not enough evidence"; usage counted with cl100k."""

    @property
    def _llm_type(self) -> str:
        return "unsure"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        counter = TokenCounter()
        tokens_in = sum(counter.count(str(m.content)) for m in messages)
        tokens_out = counter.count(UNSURE)
        message = AIMessage(
            content=UNSURE,
            usage_metadata={
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """`preset:field=value;field=value` as (preset, Context fields)."""
    preset, _, rest = text.partition(":")
    fields: dict[str, Any] = {}
    for part in filter(None, rest.split(";")):
        key, _, raw = part.partition("=")
        try:
            fields[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            fields[key.strip()] = raw
    return preset.strip(), fields


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--bench", default="../shared/bench")
    allow_dirty_option(ap)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--split", default="dev")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--per-doc", type=int, default=None)
    ap.add_argument("--stores", default=".mindscape/bench-stores")
    ap.add_argument("--variants", default="naive,mindscape", help="comma-separated variants")
    ap.add_argument("--out", default=None, help="write one JSON line per (variant, question)")
    args = ap.parse_args()
    begin_test_run(args)
    questions, settings = bench_questions(args, limit=args.limit, per_doc=args.per_doc)
    deps = Deps(chat=UnsureChat(), llm_settings=LLMSettings(backend="local", structured="off"))
    summary: dict[str, Any] = {"dataset": args.dataset, "split": args.split, "n": len(questions)}
    per_question: list[dict[str, Any]] = []
    print(f"{'variant':58} {'first':>6} {'final':>6} {'rounds':>6} {'tok_in':>7}")
    for variant in args.variants.split(","):
        preset, fields = parse_variant(variant)
        first, final, rounds, tokens = [], [], [], []
        for q in questions:
            path = store_dir(settings, q.doc_id)
            store, spans = store_at(str(path))
            out = answer_question(
                system_view(q), preset=preset, store=str(path), deps=deps, **fields
            )
            trace = out.get("trace") or []
            by_round = {s["round"]: s.get("read") or [] for s in trace}
            read_first = by_round.get(1, [])
            read_final = by_round.get(out.get("answer_round", 0), read_first)
            first.append(verdict(q, evidence_units(store, read_first), spans) == "present")
            final.append(verdict(q, evidence_units(store, read_final), spans) == "present")
            rounds.append(out.get("rounds", 0))
            tokens.append(out.get("tokens_in", 0))
            per_question.append(
                {
                    "variant": variant,
                    "qid": q.qid,
                    "doc_id": q.doc_id,
                    "present_first": first[-1],
                    "present_final": final[-1],
                    "present_last": verdict(
                        q, evidence_units(store, by_round.get(max(by_round, default=0), [])), spans
                    )
                    == "present",
                    "rounds": rounds[-1],
                    "answer_round": out.get("answer_round", 0),
                    "tokens_in": tokens[-1],
                }
            )
        row = {
            "first": sum(first) / len(first),
            "final": sum(final) / len(final),
            "final_ci": bootstrap_ci([float(x) for x in final]),
            "rounds": sum(rounds) / len(rounds),
            "tokens_in": sum(tokens) / len(tokens),
        }
        summary[variant] = row
        log(f"done {variant}")
        print(
            f"{variant:58} {row['first']:6.3f} {row['final']:6.3f} {row['rounds']:6.2f} "
            f"{row['tokens_in']:7.0f}"
        )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(
            "".join(json.dumps(r) + "\n" for r in per_question), encoding="utf-8"
        )
    n = len(questions)
    log_test_run(args, {v: ("final", summary[v]["final"], n) for v in args.variants.split(",")})
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
