"""Focused reading (reasoners/focus.py) and the plain local-model answer (reasoners/llm.py,
its reply read by reasoners/replies.py)."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from mindscape.llm import LLMSettings, Usage
from mindscape.reasoners.base import AnswerRequest
from mindscape.reasoners.focus import ViewChunks, best_windows, focus
from mindscape.reasoners.llm import LLMReasoner
from mindscape.reasoners.replies import parse_plain, supporting_sentence
from mindscape.reasoners.sentence_vectors import SentenceVectors
from tests.fakes import HashingEmbedder, ScriptedChatModel, offline_reasoner

STORY = (
    "A rich man's wife fell sick. She called her daughter to her bed. "
    "She said, be good and pious, and God will protect you. "
    "Then she closed her eyes and died. The girl went to the grave every day. "
    "In winter the snow covered the grave. In spring the man took another wife. "
    "The new wife had two daughters. They were fair of face but black of heart. "
    "They took the girl's dresses away. She had to sleep in the ashes by the hearth. "
    "So they called her Cinderella. One day the father went to the fair. "
    "He brought a hazel twig for Cinderella. She planted it on the grave. "
    "It grew into a fine tree. A white bird sat in the tree and granted wishes."
)


def chunk_units(text: str, per: int = 3) -> list[SimpleNamespace]:
    """The story cut into chunks of `per` sentences, with their character spans."""
    from mindscape.memory.sentence_split import split_sentences

    spans = split_sentences(text)
    out = []
    for n in range(0, len(spans), per):
        start, end = spans[n][0], spans[min(n + per, len(spans)) - 1][1]
        out.append(
            SimpleNamespace(
                id=f"tale:c{n // per}",
                doc_id="tale",
                text=text[start:end],
                order=n // per,
                meta={"char_start": start},
            )
        )
    return out


def as_hits(units: list[SimpleNamespace], order: list[int]) -> list[dict]:
    return [
        {
            "unit_id": units[i].id,
            "layer": "veridical",
            "doc_id": "tale",
            "chunk_ids": [units[i].id],
            "text": units[i].text,
            "score": 1.0 - r / 10,
            "score_query": 0.0,
            "score_signature": 0.0,
            "tokens": len(units[i].text.split()),
            "round": 1,
            "probe": "q",
        }
        for r, i in enumerate(order)
    ]


def words(text: str) -> int:
    return len(text.split())


def view(units: list[SimpleNamespace]) -> ViewChunks:
    return ViewChunks(SimpleNamespace(units=units, row_of={u.id: n for n, u in enumerate(units)}))


def test_focus_reads_the_best_sentence_with_its_neighbours_across_chunks() -> None:
    units = chunk_units(STORY)
    # the answering chunk (c1: "...be good and pious...") is retrieved, its neighbours are not
    got = focus(
        "What did the mother tell her daughter before she died?",
        as_hits(units, [1]),
        budget=60,
        window=2,
        chunks=view(units),
        count=words,
    )
    text = " ".join(p["text"] for p in got)
    assert "be good and pious" in text
    # a neighbour from the chunk before (not retrieved) is read too: windows cross chunks
    assert "called her daughter" in text
    assert sum(words(p["text"]) + len(p["text"].split(".")) for p in got) <= 60 + 20
    assert {c for p in got for c in p["chunk_ids"]} >= {"tale:c0", "tale:c1"}


def test_focus_stays_in_budget_and_in_story_order() -> None:
    units = chunk_units(STORY)
    hits = as_hits(units, [4, 0, 2])  # retrieved out of story order
    got = focus(
        "Who planted the hazel twig on the grave?",
        hits,
        budget=40,
        window=1,
        chunks=view(units),
        count=words,
    )
    assert got and sum(p["tokens"] for p in got) <= 40
    starts = [STORY.index(p["text"].split(". ")[0]) for p in got]
    assert starts == sorted(starts)  # story order, not retrieval order
    assert any("hazel" in p["text"] for p in got)


def test_focus_leaves_out_what_earlier_attempts_read() -> None:
    units = chunk_units(STORY)
    hits = as_hits(units, [1, 2])
    first = focus(
        "What covered the grave in winter?",
        hits,
        budget=30,
        window=0,
        chunks=view(units),
        count=words,
    )
    again = focus(
        "What covered the grave in winter?",
        hits,
        budget=30,
        window=0,
        chunks=view(units),
        count=words,
        seen=[p["text"] for p in first],
    )
    read = {s for p in first for s in p["text"].split(". ")}
    assert again and not any(s in read for p in again for s in p["text"].split(". "))


def test_focus_without_positions_reads_each_hit_alone() -> None:
    units = chunk_units(STORY)
    got = focus(
        "What did the father bring?",
        as_hits(units, [3]),
        budget=200,
        window=2,
        chunks=None,
        count=words,
    )
    assert " ".join(p["text"] for p in got) in units[3].text.replace("\n", " ")


def test_dense_scores_join_the_ranking() -> None:
    units = chunk_units(STORY)
    hits = as_hits(units, [0, 4])

    def embed(query: str, texts: list[str]) -> np.ndarray:  # a dense model that likes hazel
        return np.array([1.0 if "hazel" in t else 0.0 for t in texts])

    def read(**kw: object) -> str:
        got = focus("What gift came home?", hits, budget=16, window=0, chunks=view(units),
                    count=words, **kw)  # fmt: skip
        return " ".join(p["text"] for p in got)

    assert "hazel" not in read()  # by chunk rank alone, the first chunk's sentences win
    assert "He brought a hazel twig for Cinderella." in read(embed=embed)


def test_parse_plain_replies() -> None:
    assert parse_plain("Answer: the pigeons.\nBecause ...") == ("the pigeons", True)
    assert parse_plain('"Be good and pious"') == ("Be good and pious", True)
    assert parse_plain("Not stated.")[1] is False
    assert parse_plain("The passage does not say.")[1] is False
    assert parse_plain("")[1] is False


def test_supporting_sentence_ties_the_answer_to_the_passage() -> None:
    passages = [{"text": "The snow fell. Two white pigeons came in by the window."}]
    assert supporting_sentence("the white pigeons", passages) == (
        "Two white pigeons came in by the window."
    )
    assert supporting_sentence("a dragon", passages) == ""


def local_reasoner(chat: ScriptedChatModel, **kw: bool) -> LLMReasoner:
    """The LLM reasoner as the local backend builds it, over a scripted chat model."""
    settings = LLMSettings(backend="local", retry_base_delay_s=0.0)
    fallback = offline_reasoner(SentenceVectors(HashingEmbedder(256)))
    return LLMReasoner(chat, fallback, settings=settings, **{"passage_tokens": 1000, **kw})


def test_local_model_answers_in_plain_words_from_the_focused_set() -> None:
    units = chunk_units(STORY)
    chat = ScriptedChatModel(responses=["to be good and pious"])
    r = local_reasoner(chat)
    u = Usage()
    req = AnswerRequest(
        "What did the mother tell her daughter before she died?",
        "open",
        passages=as_hits(units, [1, 4, 2, 3, 0]),
        focus_tokens=100,
    )
    a = r.answer(req, usage=u)
    prompt = chat.prompts[-1]
    assert "be good and pious" in prompt and "{" not in prompt  # plain words, no JSON
    assert len(prompt.split()) < len(STORY.split())  # a focused set, not every chunk
    assert a["answer"] == "to be good and pious" and a["sufficient"]
    assert a["confidence"] >= 0.5  # the answer is in the passage it read
    assert a["passages"] and u.calls == 1
    assert "certainty" not in a  # the endpoint sent no log-probabilities


def test_best_windows_are_the_best_scored_first() -> None:
    passages = [{"text": t, "score": s} for t, s in [("a", 0.1), ("b", 0.3), ("c", 0.2)]]
    assert [p["text"] for p in best_windows(passages, 2)] == ["b", "c"]
    assert best_windows(passages, 0) == passages  # 0: all of them, in their (story) order


def test_the_local_model_reads_only_its_best_windows() -> None:
    units = chunk_units(STORY)
    chat = ScriptedChatModel(responses=["to be good and pious", "to be good and pious"])
    r = local_reasoner(chat)
    req = AnswerRequest(
        "What did the mother tell her daughter before she died?",
        "open",
        passages=as_hits(units, [1, 4, 2, 3, 0]),
        focus_tokens=100,
    )
    every = r.answer(req, usage=Usage())["passages"]
    one = r.answer(replace(req, focus_windows=1), usage=Usage())["passages"]
    assert len(every) > 1 and len(one) == 1 and one[0] in every
    assert one[0] in chat.prompts[-1]
    assert not any(p in chat.prompts[-1] for p in every if p != one[0])


def test_a_not_stated_reply_is_the_not_enough_evidence_outcome() -> None:
    units = chunk_units(STORY)
    chat = ScriptedChatModel(responses=["not stated"])
    r = local_reasoner(chat)
    a = r.answer(
        AnswerRequest("Who was the king?", "open", passages=as_hits(units, [0]), focus_tokens=60),
        usage=Usage(),
    )
    assert not a["sufficient"] and a["confidence"] < 0.5


def test_plain_multiple_choice_reads_the_letter() -> None:
    units = chunk_units(STORY)
    chat = ScriptedChatModel(responses=["B"])
    r = local_reasoner(chat)
    a = r.answer(
        AnswerRequest(
            "What did the father bring?",
            "multiple-choice",
            options=["a golden ring", "a hazel twig", "a silk dress"],
            passages=as_hits(units, [3, 4]),
            focus_tokens=80,
        ),
        usage=Usage(),
    )
    assert a["answer"] == "B" and a["choice"] == 1
    assert "B. a hazel twig" in chat.prompts[-1]


def test_the_demo_judges_answers_by_the_references_key_words() -> None:
    from mindscape.commands.demo import is_right

    def item(accept: list[str], reference: str) -> dict:
        return {"question": "?", "reference": reference, "accept": accept}

    doves = item(["pigeon", "dove"], "two white pigeons, the turtle-doves and the birds")
    assert is_right("Two white pigeons", doves)
    assert is_right("the Turtle-doves and the birds", doves)
    assert not is_right("The step-mother", doves)
    wife = item(["wife"], "he took another wife")
    assert is_right("he took another wife", wife) and not is_right("a midwife", wife)
    assert not is_right("He danced with her", item(["slipper", "shoe"], "the golden slipper"))


def test_a_passage_read_is_shown_on_one_line_with_its_end() -> None:
    from mindscape.commands.ask import clip

    assert clip("The bird\n  threw down a dress.", 200) == "The bird threw down a dress."
    long = " ".join(f"w{n}" for n in range(200))
    shown = clip(long, 100)
    assert shown.startswith(long[:100]) and shown.endswith(long[-50:]) and " … " in shown
    assert len(shown) == 100 + 3 + 50


def test_option_scoring_takes_the_likeliest_letter_in_one_token() -> None:
    from langchain_core.messages import AIMessage

    from mindscape.reasoners.replies import letter_choice

    top = {"B": -0.4, " A": -1.6, "B.": -2.5, "The": -3.0}
    best, share = letter_choice(top, 3)
    assert best == 1 and 0.5 < share < 1.0
    assert letter_choice({"The": -0.1}, 3) is None
    assert letter_choice({"D": -0.1}, 3) is None  # not one of three options

    units = chunk_units(STORY)
    reply = AIMessage(
        content="C",
        response_metadata={
            "logprobs": {
                "content": [
                    {"token": "C", "logprob": -1.2, "top_logprobs": [
                        {"token": "B", "logprob": -0.3},
                        {"token": "C", "logprob": -1.2},
                    ]}
                ]
            }
        },
    )  # fmt: skip
    chat = ScriptedChatModel(responses=[reply])
    r = local_reasoner(chat, option_scoring=True)
    u = Usage()
    a = r.answer(
        AnswerRequest(
            "What did the father bring?",
            "multiple-choice",
            options=["a golden ring", "a hazel twig", "a silk dress"],
            passages=as_hits(units, [3, 4]),
            focus_tokens=80,
        ),
        usage=u,
    )
    assert a["answer"] == "B" and a["choice"] == 1  # the likeliest letter, not the sampled "C"
    assert a["certainty"] == pytest.approx(math.exp(-0.3) / (math.exp(-0.3) + math.exp(-1.2)))
    assert u.calls == 1
