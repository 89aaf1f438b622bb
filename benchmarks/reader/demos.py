"""The reader's worked examples: a few (passage, question, answer) triples from the train split.

    python benchmarks/reader/demos.py --train ../shared/train --out src/mindscape/data/reader

writes ``demos.json``: one worked example for each of the train questions' three commonest
question types (action, causal relationship, character), chosen by a fixed rule before any
dev figure was seen. For each type, the eligible questions are those whose first reference
answer has 2 to 10 words, all of whose content words are in one sentence of a gold section,
and whose question has at most 25 words; one is drawn with ``random.Random(0)``. Its passage
is that sentence with the sentences either side of it (at most 110 tokens). The local reader
shows them in its system prompt (:mod:`mindscape.reasoners.demos`).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from mindscape.eval.bench import load_questions
from mindscape.memory.sentence_split import split_sentences
from mindscape.reasoners.text import content_words
from mindscape.tokens import default_counter

TYPES = ("action", "causal relationship", "character")
MAX_TOKENS = 110


def demo_for(q: Any) -> dict[str, Any] | None:
    """The question as a worked example, or None when it is not eligible (see the docstring)."""
    answer = q.answers[0].strip()
    words = content_words(answer)
    if not 2 <= len(answer.split()) <= 10 or not words or len(q.question.split()) > 25:
        return None
    count = default_counter().count
    for ev in q.evidence or []:
        text = ev["text"]
        spans = split_sentences(text)
        for n, (a, b) in enumerate(spans):
            if not words <= content_words(text[a:b]):
                continue
            lo, hi = max(0, n - 1), min(len(spans), n + 2)
            passage = " ".join(text[spans[lo][0] : spans[hi - 1][1]].split())
            if count(passage) <= MAX_TOKENS:
                return {
                    "qid": q.qid,
                    "qtype": q.qtype,
                    "passage": passage,
                    "question": q.question,
                    "answer": answer,
                }
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", default="../shared/train")
    ap.add_argument("--out", default="src/mindscape/data/reader")
    args = ap.parse_args()
    questions = load_questions(args.train, "fairytaleqa", "train")
    demos = []
    for qtype in TYPES:
        eligible = [d for q in questions if q.qtype == qtype and (d := demo_for(q))]
        demos.append(random.Random(0).choice(eligible))
        print(f"{qtype}: {len(eligible)} eligible, chose {demos[-1]['qid']}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "demos.json").write_text(json.dumps(demos, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
