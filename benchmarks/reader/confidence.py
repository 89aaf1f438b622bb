"""Does the small reader know when it is wrong? Its token probabilities as an answer's confidence.

    python benchmarks/reader/confidence.py --bench ../shared/bench --dataset fairytaleqa \
        --split dev --sample 60 --seed 7 --out runs/answer-confidence

For each question of a fixed random sample, the real graph and retriever build the `naive`
preset's first focused set (as in reader/windows.py; no model call). The local model then
answers twice with the pipeline's plain prompt, keeping the log-probability of every output
token (the server's ``logprobs``):

* ``top2``: from the two best windows, best first (what the pipeline reads by default);
* ``next2``: from the third and fourth best windows (what reading further would add).

An answer's confidence is its tokens' geometric-mean probability, ``exp(mean log p)``, the
length-normalised sequence probability (FLARE, Jiang et al. 2023, triggers retrieval on low
token probabilities). The script prints, with 95% bootstrap intervals:

* each reading's score (token F1, or accuracy for multiple choice) and their per-question
  maximum (the oracle of choosing between them);
* the AUROC of the ``top2`` confidence for a good answer (score ≥ 0.5);
* the policy "when the ``top2`` answer's confidence is below ``--floor``, read ``next2`` as
  well and keep the more confident answer", paired against ``top2`` alone, with the share of
  questions that make the second call.

Answers go to ``OUT/answers.jsonl`` (a rerun skips what is done). Tune on dev only.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.*

from langchain_core.messages import HumanMessage, SystemMessage
from sklearn.metrics import roc_auc_score

from benchmarks.common import begin_test_run, log, log_test_run, sample_answers, sample_parser
from benchmarks.reader.windows import focused_sets, request
from mindscape.deps import Deps
from mindscape.eval.metrics import bootstrap_ci
from mindscape.eval.runner import read_records, score
from mindscape.llm import LLMSettings
from mindscape.llm.logprobs import mean_probability, reply_logprobs
from mindscape.prompts import answer as answer_prompt
from mindscape.reasoners.focus import best_windows
from mindscape.reasoners.prompting import render_plain
from mindscape.reasoners.replies import grounded_attempt, plain_reply
from mindscape.reasoners.schemas import PLAIN_MAX_TOKENS
from mindscape.state import EvidenceItem

READINGS = {"top2": slice(0, 2), "next2": slice(2, 4)}


def confidence(logprobs: list[float]) -> float:
    """The geometric-mean token probability of an answer (0 for an empty one)."""
    return mean_probability(logprobs) or 0.0


def answer_with_logprobs(chat: Any, q: Any, shown: list[EvidenceItem]) -> dict[str, Any]:
    """The plain answer to `q` from `shown`, its output tokens' log-probabilities and score."""
    req = request(q)
    prompt = render_plain(req, shown)
    msg = chat.invoke([SystemMessage(answer_prompt.PLAIN_SYSTEM), HumanMessage(prompt)])
    content = reply_logprobs(msg)
    reply = plain_reply(str(msg.content), req, shown)  # read as the pipeline reads it
    answer = grounded_attempt(req, shown, reply, reasoner="llm")["answer"]
    metrics = score(q, {"answer": answer}, {})["metrics"]
    return {
        "answer": answer,
        "logprobs": [float(t["logprob"]) for t in content],
        "tokens_in": (msg.usage_metadata or {}).get("input_tokens", 0),
        "score": metrics.get("f1", metrics.get("accuracy", 0.0)),
    }


def policy(rec: dict[str, Any], floor: float) -> tuple[float, bool]:
    """The score of "read ``next2`` when unsure, keep the more confident", and whether the
    second call is made."""
    first, second = rec["top2"], rec.get("next2")
    if second is None or confidence(first["logprobs"]) >= floor:
        return first["score"], False
    better = confidence(second["logprobs"]) > confidence(first["logprobs"])
    return (second if better else first)["score"], True


def report(rows: list[dict[str, Any]], floor: float) -> dict[str, Any]:
    """Print and return the summary over the recorded answers."""
    top2 = [r["top2"]["score"] for r in rows]
    next2 = [r.get("next2", r["top2"])["score"] for r in rows]
    oracle = [max(a, b) for a, b in zip(top2, next2, strict=True)]
    summary: dict[str, Any] = {"n": len(rows)}
    for name, scores in (("top2", top2), ("next2", next2), ("oracle", oracle)):
        summary[name] = bootstrap_ci(scores)
        ci = summary[name]
        print(f"{name:7} score {ci[0]:.3f} [{ci[1]:.3f}, {ci[2]:.3f}]")
    good = [s >= 0.5 for s in top2]
    if 0 < sum(good) < len(good):
        conf = [confidence(r["top2"]["logprobs"]) for r in rows]
        summary["auroc"] = float(roc_auc_score(good, conf))
        print(
            f"AUROC of the top2 confidence for a good answer (score >= 0.5): {summary['auroc']:.3f}"
        )
    picked = [policy(r, floor) for r in rows]
    diff = bootstrap_ci([p - s for (p, _), s in zip(picked, top2, strict=True)])
    second = sum(made for _, made in picked) / len(picked)
    summary["policy"] = {"floor": floor, "score - top2": diff, "second_calls": second}
    print(
        f"read next2 below confidence {floor}: {statistics.mean(p for p, _ in picked):.3f}, "
        f"- top2 {diff[0]:+.3f} [{diff[1]:+.3f}, {diff[2]:+.3f}], second call for {second:.0%}"
    )
    tokens = statistics.mean(r["top2"]["tokens_in"] for r in rows)
    summary["tokens_in_top2"] = tokens
    print(f"input tokens of a top2 answer: {tokens:.0f}")
    return summary


def main() -> None:
    ap = sample_parser(__doc__)
    ap.add_argument("--stores", default=".mindscape/bench-stores")
    ap.add_argument("--floor", type=float, default=0.5, help="confidence below which to read on")
    ap.add_argument("--out", default="runs/answer-confidence")
    args = ap.parse_args()
    begin_test_run(args)
    questions, settings, path = sample_answers(args, "answers.jsonl")
    done = {r["qid"] for r in read_records(path)} if path.exists() else set()
    todo = [q for q in questions if q.qid not in done]
    if todo:
        sets = focused_sets(todo, settings)
        chat = (
            Deps(llm_settings=LLMSettings(backend="local"))
            .get_chat()
            .bind(logprobs=True, top_logprobs=1, max_tokens=PLAIN_MAX_TOKENS, temperature=0)
        )
        for k, q in enumerate(todo, 1):
            ranked = best_windows(sets[q.qid], 4)
            rec: dict[str, Any] = {"qid": q.qid}
            for name, part in READINGS.items():
                if ranked[part]:
                    rec[name] = answer_with_logprobs(chat, q, ranked[part])
            with path.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            log(f"{k}/{len(todo)} {q.qid}: {rec['top2']['answer']!r}")
    wanted = {q.qid for q in questions}
    rows = [r for r in read_records(path) if r["qid"] in wanted and "top2" in r]
    summary = report(rows, args.floor)
    n = len(rows)
    log_test_run(args, {k: ("score", summary[k][0], n) for k in ("top2", "next2")}, llm="local")
    print(json.dumps({"dataset": args.dataset, "split": args.split, **summary}))


if __name__ == "__main__":
    main()
