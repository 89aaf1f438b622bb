"""Grounding checks: a quote must be in the passages and carry the answer before an attempt
may end the loop."""

from __future__ import annotations

from mindscape.reasoners import grounding as g

PASSAGES = [
    "Then two white pigeons came in by the kitchen window, and afterwards the turtle-doves.",
    "The king's son had caused the whole staircase to be smeared with pitch.",
]


def test_quote_match_is_fuzzy_but_needs_a_real_quote() -> None:
    assert g.quote_match("two white pigeons came in by the kitchen window", PASSAGES) == 1.0
    assert g.quote_match("Two white pigeons came in by the kitchen-window!", PASSAGES) >= 0.95
    assert g.quote_match("the sisters helped her pick the lentils", PASSAGES) < g.QUOTE_MATCH
    assert g.quote_match("pigeons", PASSAGES) == 0.0  # too short to count as a quote


def test_answer_support_prefers_the_quote() -> None:
    quote = "two white pigeons came in by the kitchen window"
    assert g.answer_support("the pigeons", quote, PASSAGES) == 1.0
    assert g.answer_support("pigeon", quote, PASSAGES) == 1.0  # shared 5-letter prefix
    assert g.answer_support("pitch", quote, PASSAGES) == 0.5  # only elsewhere in the passages
    assert g.answer_support("the step-sisters", quote, PASSAGES) == 0.0
    assert g.answer_support("the", quote, PASSAGES) == 0.0  # no content word


def test_confidence_levels() -> None:
    quote = "two white pigeons came in by the kitchen window"
    kw = {"passages": PASSAGES, "open_task": True}
    assert g.grounded_confidence(sufficient=True, quote=quote, answer="pigeons", **kw) == g.GROUNDED
    assert g.grounded_confidence(sufficient=True, quote=quote, answer="sisters", **kw) == g.QUOTED
    assert (
        g.grounded_confidence(sufficient=True, quote="they were helped", answer="pigeons", **kw)
        == g.UNGROUNDED
    )
    assert (
        g.grounded_confidence(sufficient=False, quote=quote, answer="pigeons", **kw)
        == g.INSUFFICIENT
    )
    # multiple choice and claims: a real quote is enough (the answer is a letter or a verdict)
    mc = {"passages": PASSAGES, "open_task": False}
    assert g.grounded_confidence(sufficient=True, quote=quote, answer="B", **mc) == g.GROUNDED
    assert g.INSUFFICIENT < g.UNGROUNDED < g.QUOTED < 0.5 < g.GROUNDED


def test_a_real_quote_must_be_about_the_question() -> None:
    q = "Who helped Cinderella sort the lentils from the ashes?"
    help_quote = (
        "you tame pigeons, you turtle-doves, come and help me to pick the good into the pot"
    )
    off_topic = "When evening came she wished to leave, and the king's son followed her"
    named_only = "Cinderella went to her mother's grave beneath the hazel-tree"
    assert g.quote_relevant(q, help_quote)  # "helped" / "help"
    assert not g.quote_relevant(q, off_topic)
    assert not g.quote_relevant(q, named_only)  # the name alone does not tie it to the question
    assert g.quote_relevant("Who is Gilbert?", "Gilbert Blythe was the best student.")
    # the passage counts, not only the sentence: the answering sentence need not repeat the question
    pigeons = "Then two white pigeons came in by the kitchen window."
    lentils = "She emptied a dish of lentils into the ashes. " + pigeons
    assert not g.quote_relevant(q, pigeons)
    assert g.quote_relevant(q, pigeons, [off_topic, lentils])
    assert not g.quote_relevant(q, off_topic, [off_topic, lentils])
    passages = [help_quote, off_topic]

    def level(quote: str, answer: str) -> float:
        return g.grounded_confidence(
            sufficient=True,
            quote=quote,
            answer=answer,
            passages=passages,
            open_task=True,
            question=q,
        )

    # real and carrying its answer, but not about the question: it may not end the loop
    assert level(off_topic, "the king's son") == g.QUOTED
    assert level(help_quote, "the pigeons") == g.GROUNDED
