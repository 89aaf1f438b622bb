"""A closed answer's confidence (multiple choice, claims) with the local reader's plain prompt:
the reader's margin between the options at its reply's first token, not the grounding checks,
which a plain closed answer passes by construction (its quote is the passage sentence nearest
the option or claim, and closed answers skip the answer-word checks)."""

from __future__ import annotations

import math

import pytest
from langchain_core.messages import AIMessage

from mindscape.llm import LLMSettings, Usage
from mindscape.reasoners.base import AnswerRequest
from mindscape.reasoners.llm import LLMReasoner
from mindscape.reasoners.replies import letter_masses, option_margin, verdict_masses
from mindscape.reasoners.sentence_vectors import SentenceVectors
from mindscape.state import EvidenceItem
from tests.fakes import HashingEmbedder, ScriptedChatModel, offline_reasoner

PASSAGE = (
    "Then two white pigeons came in by the kitchen window, and they picked the lentils out "
    "of the ashes. The step-mother laughed at Cinderella."
)
QUESTION = "Who helped Cinderella pick the lentils out of the ashes?"
OPTIONS = ["her step-mother", "two white pigeons", "a kind fairy"]
"""Option A shares "step-mother" with a passage sentence; the passage does not support it."""


def reply(text: str, first: dict[str, float]) -> AIMessage:
    """A reply, `text`, with its first token's likeliest alternatives."""
    token = text.split()[0]
    top = [{"token": t, "logprob": lp} for t, lp in first.items()]
    content = [{"token": token, "logprob": first.get(token, -5.0), "top_logprobs": top}]
    return AIMessage(content=text, response_metadata={"logprobs": {"content": content}})


def reasoner(chat: ScriptedChatModel, **kw: object) -> LLMReasoner:
    settings = LLMSettings(backend="local", retry_base_delay_s=0.0)
    fallback = offline_reasoner(SentenceVectors(HashingEmbedder(256)))
    return LLMReasoner(chat, fallback, settings=settings, passage_tokens=1000, **kw)  # type: ignore[arg-type]


def shown() -> list[EvidenceItem]:
    return [
        EvidenceItem(
            unit_id="tale:c1", layer="veridical", doc_id="tale", chunk_ids=[], text=PASSAGE,
            score=1.0, score_query=0.0, score_signature=0.0, tokens=40, round=1, probe=QUESTION,
        )
    ]  # fmt: skip


def choose(first: dict[str, float], text: str, **kw: object) -> dict:
    chat = ScriptedChatModel(responses=[reply(text, first)])
    req = AnswerRequest(QUESTION, "multiple-choice", options=OPTIONS)
    return dict(reasoner(chat, **kw).plain_answer(req, shown(), Usage()))


def test_an_unsupported_option_sharing_a_word_with_the_passage_gets_a_low_confidence() -> None:
    """The reader picks A ("her step-mother", whose word is in a passage sentence) at nearly
    even odds with B: the grounding checks called it grounded (0.9); its confidence is now the
    margin, far below the acceptance threshold, and labelled as such."""
    a = choose({"A": -0.75, "B": -0.85, "C": -3.0}, "A")
    assert a["answer"] == "A" and a["sufficient"]
    assert "step-mother" in a["quote"]  # the nearest sentence, found by construction
    assert a["grounding"] == "margin" and a["confidence"] < 0.1
    sure = choose({"B": -0.01, "A": -5.0, "C": -6.0}, "B")
    assert sure["grounding"] == "margin" and sure["confidence"] > 0.95


def test_option_scoring_reads_the_same_margin() -> None:
    a = choose({"A": -0.75, "B": -0.85, "C": -3.0}, "A", option_scoring=True)
    assert a["answer"] == "A" and a["grounding"] == "margin" and a["confidence"] < 0.1


def test_a_reply_that_opens_with_no_option_has_no_margin() -> None:
    a = choose({"The": -0.1, "Answer": -2.0}, "The answer is A")
    assert a["answer"] == "A" and a["grounding"] == "margin" and a["confidence"] == 0.0


def test_a_claim_read_at_even_odds_gets_a_low_confidence() -> None:
    claim = "The step-mother helped Cinderella pick the lentils out of the ashes."
    for first, text, low in (
        ({"TRUE": -0.6, "FALSE": -0.8}, "TRUE", True),
        ({"FALSE": -0.01, "TRUE": -5.0}, "FALSE", False),
    ):
        chat = ScriptedChatModel(responses=[reply(text, first)])
        a = reasoner(chat).plain_answer(AnswerRequest(claim, "claim"), shown(), Usage())
        assert a["answer"] == text and a["grounding"] == "margin"
        assert (a["confidence"] < 0.15) == low, a["confidence"]


def test_the_margin_is_the_chosen_share_minus_the_best_other() -> None:
    masses = letter_masses({"B": -0.4, " A": -1.6, "B.": -2.5, "The": -3.0}, 3)
    total = sum(masses)
    want = (masses[1] - masses[0]) / total
    assert option_margin(masses, 1) == pytest.approx(want) and option_margin(masses, 0) == 0.0
    assert option_margin(masses, None) == 0.0 and option_margin([0.0, 0.0], 0) == 0.0
    # two options: 2·sigmoid(log-probability margin) − 1
    t, f = verdict_masses({"TRUE": -0.2, " False": -1.2, "F": -3.0, "The": -1.0})
    assert t == pytest.approx(math.exp(-0.2))
    assert f == pytest.approx(math.exp(-1.2) + math.exp(-3.0))
    lp_margin = math.log(t) - math.log(f)
    assert option_margin([t, f], 0) == pytest.approx(2 / (1 + math.exp(-lp_margin)) - 1)


# ------------------------------------------------- the JSON prompt (OpenAI-compatible models)


def json_reasoner(*responses: object) -> tuple[LLMReasoner, ScriptedChatModel]:
    chat = ScriptedChatModel(responses=list(responses))
    settings = LLMSettings(backend="openai", structured="off", retry_base_delay_s=0.0)
    fallback = offline_reasoner(SentenceVectors(HashingEmbedder(256)))
    return LLMReasoner(chat, fallback, settings=settings, passage_tokens=1000), chat  # type: ignore[arg-type]


ANSWER_A = (
    '{"quote": "The step-mother laughed at Cinderella.", "answer": "A", '
    '"sufficient": true, "confidence": 0.95}'
)
"""The JSON reader picks A and quotes a real passage sentence that names the step-mother:
the grounding checks pass it (closed answers skip the answer-word checks)."""


def json_choose(*responses: object) -> tuple[dict, ScriptedChatModel]:
    r, chat = json_reasoner(*responses)
    req = AnswerRequest(QUESTION, "multiple-choice", options=OPTIONS, passages=shown())
    return dict(r.answer(req, usage=Usage())), chat


def test_a_json_closed_answer_gets_the_plain_readings_margin() -> None:
    """An option sharing a word with the passages, unsupported: with the JSON prompt it was
    grounded (0.9); one more one-token call over the plain prompt reads the options' margin,
    which is even here, so its confidence is low and labelled margin."""
    a, chat = json_choose(ANSWER_A, reply("A", {"A": -0.75, "B": -0.85, "C": -3.0}))
    assert a["answer"] == "A" and a["sufficient"] and "step-mother" in a["quote"]
    assert a["grounding"] == "margin" and a["confidence"] < 0.1
    assert len(chat.prompts) == 2 and "<passages>" in chat.prompts[1]  # the plain prompt


def test_a_json_choice_the_plain_reading_does_not_favour_scores_nothing() -> None:
    a, _ = json_choose(ANSWER_A, reply("B", {"B": -0.05, "A": -4.0, "C": -5.0}))
    assert a["answer"] == "A" and a["grounding"] == "margin" and a["confidence"] == 0.0


def test_without_log_probabilities_a_json_closed_answer_keeps_the_checks() -> None:
    """An endpoint that returns none: no margin can be read, and the attempt says so by
    keeping the grounding checks' label."""
    a, _ = json_choose(ANSWER_A, AIMessage(content="A"))
    assert a["answer"] == "A" and a.get("grounding") != "margin" and a["confidence"] == 0.9
