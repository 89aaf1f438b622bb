"""The demo's judge (``commands.demo.is_right`` with each question's key words, references and
answering sentences) is consistent: every reference answer of every demo question scores
right, wrong answers score wrong, near misses (the right words, the wrong meaning) score
wrong, and the references are the bench's own."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from mindscape.commands.demo import is_right
from tests.conftest import BENCH, FIXTURE_BENCH

SPEC = json.loads((resources.files("mindscape") / "data" / "demo.json").read_text())
QUESTIONS = {q["question"]: q for q in SPEC["questions"]}


def references(item: dict) -> list[str]:
    """The demo's own reference and the bench's reference answers of a question."""
    return [item["reference"], *item.get("answers", [])]


@pytest.mark.parametrize("question", list(QUESTIONS))
def test_every_reference_answer_is_judged_right(question: str) -> None:
    item = QUESTIONS[question]
    assert references(item)
    for ref in references(item):
        assert is_right(ref, item), (question, ref)


WRONG = {
    "What did Cinderella's mother tell her before she died?": [
        "to plant a hazel twig on her grave",
        "She told her to go to the ball",
        "never to trust her step-sisters",
    ],
    "How did the prince find Cinderella?": [
        "He followed the pigeons to her house",
        "He danced with her at the festival",
        "by her beautiful dress of gold and silver",
    ],
    "What happens when the snow covers Cinderella's mother's grave?": [
        "Cinderella weeps on the grave three times a day",
        "A hazel tree grows on it",
        "The birds throw down a golden dress",
    ],
    "Who helped Cinderella sort the lentils from the ashes?": [
        "her step-sisters",
        "the prince and his father",
        "Her fairy godmother",
    ],
}


def test_wrong_answers_are_judged_wrong() -> None:
    assert set(WRONG) == set(QUESTIONS)
    for question, answers in WRONG.items():
        for answer in answers:
            assert not is_right(answer, QUESTIONS[question]), (question, answer)


NEAR_MISSES = {
    "What did Cinderella's mother tell her before she died?": [
        "to protect the hazel tree on her grave",
        "that her sisters were not good and pious",
    ],
    "How did the prince find Cinderella?": [
        "The slipper did not fit her",
        "The eldest sister's foot fitted the golden slipper",
        "The pigeons cried that there was blood in the shoe",
    ],
    "What happens when the snow covers Cinderella's mother's grave?": [
        "The prince married Cinderella",
        "Her stepmother was buried in the grave",
        "The father married the king's daughter",
    ],
    "Who helped Cinderella sort the lentils from the ashes?": [
        "The pigeons pecked out the sisters' eyes",
        "The birds ate all the lentils",
        "No bird helped her",
    ],
}
"""Answers that name a key word of the reference but mean something else: another character
does the act, the act is another, or it is denied. The key-word rule alone judged every one
of them right."""


def test_near_misses_are_judged_wrong() -> None:
    assert set(NEAR_MISSES) == set(QUESTIONS) and sum(map(len, NEAR_MISSES.values())) >= 10
    for question, answers in NEAR_MISSES.items():
        item = QUESTIONS[question]
        for answer in answers:
            low = answer.lower()
            assert any(w in low for w in item["accept"]), answer  # the right words
            assert not is_right(answer, item), (question, answer)


def test_right_answers_in_the_storys_words_are_judged_right() -> None:
    right = {
        "What did Cinderella's mother tell her before she died?": [
            "She told her to be good and pious",
        ],
        "How did the prince find Cinderella?": ["The slipper fitted her foot"],
        "What happens when the snow covers Cinderella's mother's grave?": [
            "Her father married again",
            "The man had taken another wife",
        ],
        "Who helped Cinderella sort the lentils from the ashes?": [
            "Two white pigeons",
            "the Turtle-doves and the birds",
        ],
    }
    for question, answers in right.items():
        for answer in answers:
            assert is_right(answer, QUESTIONS[question]), (question, answer)
    # the story's evidence is the story's own words
    story = " ".join((resources.files("mindscape") / "data" / SPEC["file"]).read_text().split())
    for item in SPEC["questions"]:
        assert item["evidence"] and all(e in story for e in item["evidence"]), item["question"]


@pytest.mark.parametrize("bench", [FIXTURE_BENCH, BENCH], ids=["fixture", "bench"])
def test_the_answers_are_the_benchs_references(bench: Path) -> None:
    """Each demo question that the bench's comorag_cinderella set asks carries the bench's
    reference answers, and every bench question is a demo question: on the fixture bench
    (tests/bench, the bench's rows, so CI checks it) and on the real bench where it is here."""
    path = bench / "comorag_cinderella" / "questions.jsonl"
    if not path.is_file():
        pytest.skip(f"no bench at {path.parent}")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert rows and all(r["split"] == "dev" for r in rows)
    for row in rows:
        assert row["question"] in QUESTIONS, row["question"]
        assert QUESTIONS[row["question"]]["answers"] == row["answers"]
