"""Worked examples for the local reader: a few (passage, question, answer) triples from the
FairytaleQA train split, shown in the plain prompt's system message.

A 1.5B reader given one passage often names the wrong character or restates the question;
shown three worked examples of short answers taken from the passage, it answers in the same
style. The examples sit in the system message, so the prompt's prefix is the same for every
question and llama.cpp reuses its cached state: they cost input tokens, not seconds.

``benchmarks/reader/demos.py`` writes ``data/reader/demos.json`` by a fixed rule (one example
per commonest question type, drawn with a fixed seed); the dev figures that chose this
reader are in docs/results.md ("The reader").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mindscape import prompts
from mindscape.errors import MindscapeError
from mindscape.prompts import answer as answer_prompt

DEMOS_FILE = Path(__file__).resolve().parent.parent / "data" / "reader" / "demos.json"


@dataclass(frozen=True)
class Demo:
    """One worked example."""

    passage: str
    question: str
    answer: str
    qtype: str = ""


@cache
def load_demos(path: Path = DEMOS_FILE) -> tuple[Demo, ...]:
    """The shipped worked examples (a missing or damaged file is an error naming the script
    that writes it)."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
        return tuple(
            Demo(r["passage"], r["question"], r["answer"], r.get("qtype", "")) for r in rows
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MindscapeError(
            f"the reader's worked examples cannot be read from {path} ({exc}); "
            "run `python benchmarks/reader/demos.py` to write them"
        ) from exc


def demo_system(demos: tuple[Demo, ...] | list[Demo]) -> str:
    """The plain prompt's system message with the worked examples after it."""
    if not demos:
        return answer_prompt.PLAIN_SYSTEM
    shown = "\n\n".join(
        prompts.render(
            answer_prompt.DEMO,
            passage=prompts.as_data(d.passage),
            question=d.question,
            answer=d.answer,
        )
        for d in demos
    )
    return prompts.render(answer_prompt.DEMO_SYSTEM, system=answer_prompt.PLAIN_SYSTEM, demos=shown)
