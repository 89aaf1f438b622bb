"""The reader alone: each reader variant given the same evidence, answer by answer.

    python benchmarks/reader/bench.py --bench ../shared/bench --dataset fairytaleqa \
        --split dev --sample 60 --seed 7 --variants plain,demos,typed --samples 4 \
        --out docs/results/reader/fairytaleqa-dev60

answers a fixed random sample of questions with the local model's plain prompt, reading the
question's gold evidence (``--evidence gold``; FairytaleQA's annotated sections) or a section
of the same story that is not gold (``--evidence other``: what a wrong reading looks like, for
the verifier's training rows). The pipeline's own windows are measured by ``mindscape eval``,
whose ``--reader`` option takes the same variants. Variants:

* ``plain``: today's prompt;
* ``demos``: three fixed worked examples from the train split in the system message
  (``mindscape/data/reader/demos.json``, written by ``reader/demos.py``);
* ``typed``: three worked examples of the question's own type, drawn from the train split
  with a fixed seed (the gold ``qtype``: an upper bound for a type classifier);
* ``adapter``: the plain prompt, read by the model with its LoRA adapter (``--adapter``:
  ``shipped`` or an adapter GGUF; ``make reader-adapter``), on a server of its own.

Each answer is the greedy reply with its tokens' log-probabilities; ``--samples N`` adds N
replies sampled at temperature 0.8 over the same prompt (llama.cpp reuses the cached prompt,
so a sample costs its output tokens; input tokens are the answer's prompt, counted once). Rows go to ``OUT/readings.jsonl`` (a rerun skips what
is done); then it prints, per variant and evidence: token F1 with a 95% bootstrap interval,
the paired difference against ``plain``, the F1 of the samples' consensus answer, the AUROC
of the mean token probability for a good answer (F1 >= 0.5), and input tokens, output tokens
and seconds a question. The last line is one JSON object.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from benchmarks.common import begin_test_run, log, log_test_run, sample_parser
from benchmarks.reader.ceiling import as_passages, gold_passages
from benchmarks.reader.demos import demo_for
from mindscape.eval.bench import load_questions
from mindscape.eval.metrics import bootstrap_ci, token_f1
from mindscape.eval.runner import read_records
from mindscape.llm import LLM, LLMSettings, Usage
from mindscape.prompts import answer as answer_prompt
from mindscape.reasoners.base import AnswerRequest
from mindscape.reasoners.demos import Demo, demo_system, load_demos
from mindscape.reasoners.llm import sample_replies
from mindscape.reasoners.prompting import render_plain
from mindscape.reasoners.schemas import PLAIN_MAX_TOKENS
from mindscape.state import EvidenceItem

GOOD = 0.5
"""An answer with at least this token F1 counts as good (the verifier's label)."""


def main_type(qtype: str | None) -> str:
    return (qtype or "").split("+")[0]


def typed_demos(train: str, k: int = 3) -> dict[str, list[Demo]]:
    """Per question type, `k` eligible train examples drawn with a fixed seed."""
    by: dict[str, list[dict[str, Any]]] = {}
    for q in load_questions(train, "fairytaleqa", "train"):
        d = demo_for(q)
        if d and "+" not in (q.qtype or ""):
            by.setdefault(q.qtype or "", []).append(d)
    return {
        t: [
            Demo(r["passage"], r["question"], r["answer"], t)
            for r in random.Random(0).sample(rs, k)
        ]
        for t, rs in by.items()
        if len(rs) >= k
    }


def passages_for(q: Any, evidence: str, docs: dict[str, Any]) -> list[EvidenceItem]:
    """The gold sections of `q`, or one section of its story that holds none of them."""
    if evidence == "gold":
        return gold_passages(q)
    gold = {e["section_id"] for e in q.evidence or []}
    doc = docs[q.doc_id]
    others = [s for s in doc.meta.get("sections", []) if str(s["section_id"]) not in gold]
    if not others:
        return []
    s = random.Random(q.qid).choice(others)
    return as_passages(q, [doc.text[s["char_start"] : s["char_end"]]], "other")


def read_one(llm: LLM, system: str, prompt: str, samples: int) -> dict[str, Any]:
    """The greedy reply with its log-probabilities, and `samples` sampled replies."""
    usage, t0 = llm.usage, time.perf_counter()
    text, logprobs = llm.complete_logprobs(
        prompt, system=system, role="answer", max_tokens=PLAIN_MAX_TOKENS
    )
    greedy_s = time.perf_counter() - t0
    greedy_in, greedy_out = usage.tokens_in, usage.tokens_out
    drawn = sample_replies(llm, prompt, system, samples)
    return {
        "reply": text,
        "logprobs": [round(x, 4) for x in logprobs],
        "samples": drawn,
        "tokens_in": greedy_in,
        "tokens_out": greedy_out,
        "sample_tokens_out": usage.tokens_out - greedy_out,
        "seconds": round(time.perf_counter() - t0, 3),
        "greedy_seconds": round(greedy_s, 3),
    }


def consensus(answers: list[str]) -> str:
    """The answer that agrees most with the others (highest summed token F1; the first of
    equals, so the greedy answer when it is listed first)."""
    if not answers:
        return ""
    return max(answers, key=lambda a: sum(token_f1(a, [b]) for b in answers if b is not a))


def run(args: Any, questions: list[Any], path: Path) -> None:
    from mindscape.deps import Deps
    from mindscape.eval.bench import load_documents
    from mindscape.reasoners.replies import parse_plain

    done = (
        {(r["variant"], r["evidence"], r["qid"]) for r in read_records(path)}
        if path.exists()
        else set()
    )
    variants = args.variants.split(",")
    todo = [  # variant by variant, so that a variant's cached prompt prefix is reused
        (v, e, q)
        for v in variants
        for q in questions
        for e in args.evidence.split(",")
        if (v, e, q.qid) not in done
    ]
    if not todo:
        return
    docs = {d.doc_id: d for d in load_documents(args.bench, args.dataset, args.split)}
    typed = typed_demos(args.train) if "typed" in variants else {}
    chats: dict[str, Any] = {}
    for n, (variant, evidence, q) in enumerate(todo, 1):
        adapter = args.adapter if variant == "adapter" else "none"
        settings = LLMSettings(backend="local", reader_adapter=adapter)
        if adapter not in chats:
            chats[adapter] = Deps(llm_settings=settings).get_chat()
        chat = chats[adapter]
        shown = passages_for(q, evidence, docs)
        if not shown:
            continue
        demos: Any = {"plain": [], "adapter": [], "demos": load_demos()}.get(variant)
        if demos is None:
            demos = typed.get(main_type(q.qtype), load_demos())
        system = demo_system(demos) if demos else answer_prompt.PLAIN_SYSTEM
        prompt = render_plain(AnswerRequest(q.question, "open"), shown)
        llm = LLM(chat, settings=settings, usage=Usage())
        rec = read_one(llm, system, prompt, args.samples)
        answer, _ = parse_plain(rec["reply"])
        sampled = [parse_plain(s)[0] for s in rec["samples"]]
        rec = {
            "variant": variant, "evidence": evidence, "qid": q.qid, "qtype": q.qtype,
            "question": q.question, "answers": q.answers, "answer": answer,
            "f1": token_f1(answer, q.answers), "passage": " ".join(p["text"] for p in shown),
            "sampled": sampled, "consensus_f1": token_f1(consensus([answer, *sampled]), q.answers),
            **rec,
        }  # fmt: skip
        with path.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        log(
            f"{n}/{len(todo)} {variant}/{evidence} {q.qid}: {answer!r} f1={rec['f1']:.2f} {rec['seconds']}s"
        )


def auroc(scores: list[float], labels: list[bool]) -> float | None:
    """Area under the ROC curve (scikit-learn's); None without both classes."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, scores)) if 0 < sum(labels) < len(labels) else None


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    from mindscape.llm.logprobs import mean_probability

    out: dict[str, Any] = {}
    by: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["variant"], r["evidence"]), {})[r["qid"]] = r
    for (variant, evidence), recs in sorted(by.items()):
        rs = list(recs.values())
        f1 = [r["f1"] for r in rs]
        certainty = [mean_probability(r["logprobs"]) or 0.0 for r in rs]
        row: dict[str, Any] = {
            "n": len(rs),
            "f1": bootstrap_ci(f1),
            "consensus_f1": bootstrap_ci([r["consensus_f1"] for r in rs])
            if rs[0]["samples"]
            else None,
            "certainty_auroc": auroc(certainty, [x >= GOOD for x in f1]),
            "tokens_in_p50": statistics.median(r["tokens_in"] for r in rs),
            "tokens_out_p50": statistics.median(r["tokens_out"] for r in rs),
            "seconds_p50": statistics.median(r["seconds"] for r in rs),
            "greedy_seconds_p50": statistics.median(r["greedy_seconds"] for r in rs),
        }
        base = by.get(("plain", evidence), {})
        common = [q for q in recs if q in base]
        if variant != "plain" and common:
            diffs = [recs[q]["f1"] - base[q]["f1"] for q in common]
            row["minus_plain"] = bootstrap_ci(diffs)
            row["better_worse"] = [sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)]
        out[f"{variant}/{evidence}"] = row
    return out


def main() -> None:
    ap = sample_parser(__doc__, split="dev", seed=7)
    ap.add_argument("--variants", default="plain,demos")
    ap.add_argument("--evidence", default="gold", help="gold, other, or both: gold,other")
    ap.add_argument("--samples", type=int, default=0)
    ap.add_argument("--train", default="../shared/train")
    ap.add_argument("--adapter", default="shipped", help="the adapter variant's LoRA adapter")
    ap.add_argument("--out", required=True)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--shuffle", action="store_true", help="answer in a random order")
    args = ap.parse_args()
    begin_test_run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sample = args.sample or None
    qs = [
        q
        for q in load_questions(args.bench, args.dataset, args.split, sample=sample, seed=args.seed)
        if q.evidence and q.task == "open_qa"
    ]
    if args.shuffle:  # any prefix of a long run is then a random subset
        random.Random(args.seed).shuffle(qs)
    path = out / "readings.jsonl"
    if not args.report_only:
        run(args, qs, path)
    wanted = {q.qid for q in qs}
    table = summarise([r for r in read_records(path) if r["qid"] in wanted])
    for name, row in table.items():
        f1, diff = row["f1"], row.get("minus_plain")
        print(
            f"{name:16} n={row['n']:3d} F1 {f1[0]:.3f} [{f1[1]:.3f}, {f1[2]:.3f}]"
            + (
                f"  -plain {diff[0]:+.3f} [{diff[1]:+.3f}, {diff[2]:+.3f}] {row['better_worse']}"
                if diff
                else ""
            )
            + (f"  consensus {row['consensus_f1'][0]:.3f}" if row["consensus_f1"] else "")
            + f"  AUROC {row['certainty_auroc'] or float('nan'):.3f}"
            f"  in {row['tokens_in_p50']:.0f} out {row['tokens_out_p50']:.0f}"
            f"  s {row['seconds_p50']:.1f} (greedy {row['greedy_seconds_p50']:.1f})"
        )
    print(json.dumps({"dataset": args.dataset, "split": args.split, "seed": args.seed, **table}))
    if not args.report_only:
        log_test_run(args, {k: ("f1", v["f1"][0], v["n"]) for k, v in table.items()}, llm="local")


if __name__ == "__main__":
    main()
